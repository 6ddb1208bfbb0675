//! The case language: cases and fixtures as data, with parsing, loading, diagnostics, lint and
//! coverage.
//!
//! A case lives in `cases/<area>/<name>.yaml` and uses PodCliqueSet fixtures from
//! `fixtures/<fixture>.yaml`. The model of a case, its steps and expectations (what an `update`
//! or `delete` addresses is an [`Addressee`]) is `model`, what an `expect` step judges is
//! `expectation`; the spec's clause table is `clauses`.
//! [`parse_case`] turns one file into a [`Case`] or every problem in it ([`Diagnostic`], with
//! file:line:column and the field), reading a positioned YAML tree (`yaml`) and applying
//! fixture patches (`patch`); [`load_catalog`] loads everything; [`lint`] also requires every
//! `core` clause to be cited and every fixture container to keep the [`container_contract`];
//! [`coverage`] renders the clause → cases table.

mod clauses;
mod coverage;
mod diagnostic;
mod expectation;
mod load;
mod model;
mod parse;
mod patch;
mod step_effects;
mod step_kinds;
mod write;
mod yaml;

pub use clauses::{CLAUSES, Clause, ClauseStatus, Profile, clause};
pub use coverage::coverage;
pub use diagnostic::{Diagnostic, render as render_diagnostics};
pub use expectation::*;
pub use load::{
    Applicability, Catalog, EXIT_CODE_FILE, Fixture, READY_FILE, READY_PROBE, container_contract,
    lint, lint_catalog, load_catalog, parse_fixture,
};
pub use model::*;
pub use parse::{parse_case, parse_case_with_fixtures};
pub use patch::merge_patch;
pub use step_effects::SweptFault;
pub use step_kinds::{Needs, STEP_KINDS, StepDefinition, step_definition, steps_table};
pub use write::{write_case, write_step, write_yaml};
pub use yaml::Pos;
