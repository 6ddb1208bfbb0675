//! The case language: cases and fixtures as data, with parsing, diagnostics, lint and
//! coverage.
//!
//! A case lives in `cases/<area>/<name>.yaml` and uses PodCliqueSet fixtures from
//! `fixtures/<fixture>.yaml`. [`parse_case`] turns one file into a [`Case`] or every problem
//! in it ([`Diagnostic`], with file:line:column); [`load_catalog`] loads everything;
//! [`lint`] also requires every `core` clause to be cited; [`coverage`] renders the
//! clause → cases table.

mod clauses;
mod coverage;
mod diagnostic;
mod load;
mod model;
mod parse;
mod patch;
mod yaml;

pub use clauses::{CLAUSES, Clause, ClauseStatus, Profile, clause};
pub use coverage::coverage;
pub use diagnostic::{Diagnostic, render as render_diagnostics};
pub use load::{
    Applicability, Catalog, EXIT_CODE_FILE, Fixture, READY_FILE, READY_PROBE, container_contract,
    lint, lint_catalog, load_catalog, parse_fixture,
};
pub use model::*;
pub use parse::{parse_case, parse_case_with_fixtures};
pub use patch::merge_patch;
pub use yaml::Pos;
