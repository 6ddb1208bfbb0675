//! Generated scenarios judged by the spec model ([`crate::model`]): shapes and pod actions
//! drawn from one seed ([`rng`], [`generate`]), written as an ordinary case and fixture with
//! the model's predictions as the expectations ([`render`]), and made smaller when one fails
//! ([`shrink`]).

pub mod generate;
pub mod render;
pub mod rng;
pub mod shrink;

#[cfg(test)]
mod tests;

pub use generate::{Act, Action, Body, Scenario, Step, scenario};
