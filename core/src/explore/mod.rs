//! Generated scenarios judged by the spec model ([`crate::model`]): shapes, and rounds of
//! steps of the case language, drawn from one seed ([`rng`], [`generate`]), built into an
//! ordinary [`Case`](crate::catalog::Case) and fixture with the model's predictions as the
//! expectations (`expect`) and written by the catalog's one writer ([`render`], `fixture`),
//! and made smaller when one fails ([`shrink`]). With faults ([`faults`]) a scenario also gets
//! user deletes of objects the clauses say stay gone (`deletes`).

mod deletes;
mod expect;
pub mod faults;
mod fixture;
pub mod generate;
pub mod render;
pub mod rng;
pub mod shrink;

#[cfg(test)]
mod tests;

pub use generate::{Body, Round, Scenario, Unjudged, on_pod, scenario, scenario_with_faults};
