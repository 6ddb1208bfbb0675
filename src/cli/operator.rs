//! `reference-operator`: the reference operator, the default implementation under test.

use std::path::PathBuf;

use grove_conformance::report::{self, Exit};

use super::error::{CliError, CliResult};
use super::runtime;

pub(crate) fn reference_operator(
    kubeconfig: Option<PathBuf>,
    namespace: Option<String>,
) -> CliResult {
    let options = grove_reference_operator::controller::RunOptions {
        kubeconfig,
        namespace,
    };
    runtime()
        .block_on(grove_reference_operator::controller::run(options))
        .map_err(|e| CliError::from_error(Exit::OperatorFailed, e))?;
    Ok(report::SUCCESS)
}
