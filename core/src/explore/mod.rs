//! Generated scenarios.
