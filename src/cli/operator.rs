//! `reference-operator`: the reference operator, the default implementation under test.

use std::path::PathBuf;

use grove_conformance::errors;
use grove_conformance::report;

use super::runtime;

pub(crate) fn reference_operator(kubeconfig: Option<PathBuf>, namespace: Option<String>) -> i32 {
    let options = grove_reference_operator::controller::RunOptions {
        kubeconfig,
        namespace,
    };
    match runtime().block_on(grove_reference_operator::controller::run(options)) {
        Ok(()) => report::SUCCESS,
        Err(err) => {
            eprintln!("error: {:#}", errors::chain(&err));
            1
        }
    }
}
