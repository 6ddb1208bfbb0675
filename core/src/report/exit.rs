//! The process exit codes of `grove-conformance`: one table, [`Exit`], whose rows the README's
//! table of exit codes repeats (a test compares them).

use super::event::RunResults;

/// How a `grove-conformance` process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every selected case passed, or the subcommand did its work.
    Success,
    /// The reference operator's own command line stopped with an error.
    OperatorFailed,
    /// Bad command line, or input refused before anything started.
    Usage,
    /// At least one case failed or was unstable (`--repeat`); none errored.
    CasesFailed,
    /// The harness could not judge at least one case (takes precedence over failures).
    CasesErrored,
    /// The catalog does not parse, lint fails, or the coverage table is stale.
    InvalidCatalog,
    /// The target or the implementation could not be set up.
    SetupFailed,
    /// The filter selected no case.
    NoCases,
    /// SIGINT or SIGTERM: the target was torn down, no report written.
    Interrupted,
    /// `verify-report`: the report was edited, or does not match the checkout.
    ReportRefused,
}

impl Exit {
    /// Every way a process ends, in the order of the table.
    pub const ALL: [Exit; 10] = [
        Exit::Success,
        Exit::OperatorFailed,
        Exit::Usage,
        Exit::CasesFailed,
        Exit::CasesErrored,
        Exit::InvalidCatalog,
        Exit::SetupFailed,
        Exit::NoCases,
        Exit::ReportRefused,
        Exit::Interrupted,
    ];

    /// The process exit code.
    pub const fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::OperatorFailed => 1,
            Exit::Usage => 2,
            Exit::CasesFailed => 100,
            Exit::CasesErrored => 101,
            Exit::InvalidCatalog => 102,
            Exit::SetupFailed => 103,
            Exit::NoCases => 104,
            Exit::ReportRefused => 105,
            Exit::Interrupted => 130,
        }
    }

    /// What it means, as the README's table says it.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Success => {
                "every selected case passed (skipped and not-applicable cases allowed), or the subcommand did its work"
            }
            Exit::OperatorFailed => {
                "`reference-operator` (the reference operator's own command line) stopped with an error"
            }
            Exit::Usage => {
                "bad command line, or input refused before anything started (the implementation's CRD, webhook or configuration files, shards that do not belong together)"
            }
            Exit::CasesFailed => "at least one case failed or was unstable, none errored",
            Exit::CasesErrored => "the harness could not judge at least one case",
            Exit::InvalidCatalog => {
                "the catalog does not parse, `lint` fails, or the coverage table is stale"
            }
            Exit::SetupFailed => "the target or the implementation could not be set up",
            Exit::NoCases => "the filter selected no case",
            Exit::ReportRefused => {
                "`verify-report`: the report was edited, or does not match this checkout of the suite (each difference named)"
            }
            Exit::Interrupted => {
                "interrupted (SIGINT or SIGTERM): the target torn down, no report written"
            }
        }
    }
}

/// The table of exit codes, as Markdown (the README's).
pub fn exit_table() -> String {
    let mut out = String::from("| exit code | meaning |\n|---|---|\n");
    for exit in Exit::ALL {
        out.push_str(&format!("| {} | {} |\n", exit.code(), exit.meaning()));
    }
    out
}

/// 0: see [`Exit::Success`].
pub const SUCCESS: i32 = Exit::Success.code();
/// 2: see [`Exit::Usage`].
pub const USAGE: i32 = Exit::Usage.code();
/// 100: see [`Exit::CasesFailed`].
pub const CASES_FAILED: i32 = Exit::CasesFailed.code();
/// 101: see [`Exit::CasesErrored`].
pub const CASES_ERRORED: i32 = Exit::CasesErrored.code();
/// 102: see [`Exit::InvalidCatalog`].
pub const INVALID_CATALOG: i32 = Exit::InvalidCatalog.code();
/// 103: see [`Exit::SetupFailed`].
pub const SETUP_FAILED: i32 = Exit::SetupFailed.code();
/// 104: see [`Exit::NoCases`].
pub const NO_CASES: i32 = Exit::NoCases.code();
/// 130: see [`Exit::Interrupted`].
pub const INTERRUPTED: i32 = Exit::Interrupted.code();

/// How a finished run ends.
///
/// | cases run | any error | any failure | exit |
/// |---|---|---|---|
/// | none | - | - | [`Exit::NoCases`] |
/// | some | yes | - | [`Exit::CasesErrored`] |
/// | some | no | yes (or unstable) | [`Exit::CasesFailed`] |
/// | some | no | no | [`Exit::Success`] |
pub fn run_exit(results: &RunResults) -> Exit {
    let counts = results.counts();
    let failed = counts.fail + counts.unstable > 0;
    match (results.cases.is_empty(), counts.error > 0, failed) {
        (true, _, _) => Exit::NoCases,
        (false, true, _) => Exit::CasesErrored,
        (false, false, true) => Exit::CasesFailed,
        (false, false, false) => Exit::Success,
    }
}

/// The exit code for a finished run ([`run_exit`]'s).
pub fn exit_code(results: &RunResults) -> i32 {
    run_exit(results).code()
}
