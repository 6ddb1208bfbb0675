//! Reporting: execution emits [`RunEvent`]s; writers consume them.
//!
//! [`Recorder`] folds the stream into [`RunResults`]; each case's outcome reads as one word, its
//! [`Verdict`]; [`ProgressLine`] shows the live case and step on a terminal; [`summary_table`]
//! renders the end-of-run table and `failures` the details of each failed case for the
//! terminal; [`junit`] writes JUnit XML; [`ConformanceReport`] aggregates per clause and profile
//! in YAML and Markdown; [`html`] writes the self-contained page; [`exit_code`] maps results to
//! the documented exit codes (`exit`); [`ApiCost`] is what an implementation cost the
//! apiserver in a case, with the restraint clause (L2) judged on it; [`RunRecord`] is `results.json`, which [`merge`] combines
//! from shards; [`fold_runs`] makes one result of a case's repeated runs.

mod conformance;
mod console;
mod cost;
mod event;
mod exit;
mod failures;
pub mod html;
mod junit;
mod provenance;
mod record;
mod repeat;
mod seal;
mod verdict;
mod verify;

pub use conformance::{
    CaseTiming, ClauseVerdict, ConformanceReport, CrashPoints, Implementation, NamedTiming,
    ProfileVerdict, REPORT_API_VERSION, REPORT_KIND, ReportedCase, Tally, Timing,
};
pub use console::{ProgressLine, summary_table};
pub use cost::{ApiCost, ApiRequest, LateWrites, RESTRAINT_BOUND};
pub use event::{
    CaseResult, Counts, Failure, Outcome, Recorder, RunEvent, RunResults, TimeSplit, TimeTotals,
};
pub use exit::{
    CASES_ERRORED, CASES_FAILED, Exit, INTERRUPTED, INVALID_CATALOG, NO_CASES, SETUP_FAILED,
    SUCCESS, USAGE, exit_code, exit_table, run_exit,
};
pub use failures::{Compared, TIMELINE_LINES, capped, failure_details};
pub use junit::{TIME_PROPERTIES, junit, junit_with, provenance_properties, write_junit};
pub use provenance::{
    Harness, ImplementationRun, Implementer, Provenance, ProvenanceMismatch, SelectionRecord,
    Settings, TargetRecord,
};
pub use record::{
    CaseRecord, MergeError, RECORD_FORMAT, RecordError, RecordedImplementation, RunIdentity,
    RunRecord, merge,
};
pub use repeat::fold_runs;
pub use seal::{DIGEST_FIELD, digest_of};
pub use verdict::{NOT_APPLICABLE_PREFIX, Verdict};
pub use verify::{Checkout, CheckoutCase, Finding, ReportFile, ReportKind, agree, read_report};
