//! The process exit codes of `grove-conformance`.
//!
//! | code | constant | meaning |
//! |---|---|---|
//! | 0 | [`SUCCESS`] | every selected case passed (skipped cases allowed) |
//! | 2 | [`USAGE`] | bad command line |
//! | 100 | [`CASES_FAILED`] | at least one case failed; none errored |
//! | 101 | [`CASES_ERRORED`] | the harness could not judge at least one case |
//! | 102 | [`INVALID_CATALOG`] | the catalog does not parse, lint fails, or the coverage doc is stale |
//! | 103 | [`SETUP_FAILED`] | the target cluster or the implementation could not be started |
//! | 104 | [`NO_CASES`] | the filter selected no case |
//! | 130 | [`INTERRUPTED`] | SIGINT or SIGTERM: the target was torn down, no report written |

use super::event::RunResults;

/// 0: every selected case passed (skipped cases allowed).
pub const SUCCESS: i32 = 0;
/// 2: bad command line (the argument parser's own code).
pub const USAGE: i32 = 2;
/// 100: at least one case failed; none errored.
pub const CASES_FAILED: i32 = 100;
/// 101: the harness could not judge at least one case (takes precedence over failures).
pub const CASES_ERRORED: i32 = 101;
/// 102: the catalog does not parse, lint fails, or the coverage doc is stale.
pub const INVALID_CATALOG: i32 = 102;
/// 103: the target cluster or the implementation could not be started.
pub const SETUP_FAILED: i32 = 103;
/// 104: the filter selected no case.
pub const NO_CASES: i32 = 104;
/// Interrupted (SIGINT or SIGTERM): the target was torn down, no report was written.
pub const INTERRUPTED: i32 = 130;

/// The exit code for a finished run.
///
/// | cases run | any error | any failure | code |
/// |---|---|---|---|
/// | none | - | - | [`NO_CASES`] |
/// | some | yes | - | [`CASES_ERRORED`] |
/// | some | no | yes | [`CASES_FAILED`] |
/// | some | no | no | [`SUCCESS`] |
pub fn exit_code(results: &RunResults) -> i32 {
    let counts = results.counts();
    match (results.cases.is_empty(), counts.error > 0, counts.fail > 0) {
        (true, _, _) => NO_CASES,
        (false, true, _) => CASES_ERRORED,
        (false, false, true) => CASES_FAILED,
        (false, false, false) => SUCCESS,
    }
}
