//! Helpers shared by the tests that drive the `grove-conformance` binary.

use std::process::{Command, Output};

/// Runs the binary with `args` from the crate's root and waits for it.
pub fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grove-conformance"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the harness runs")
}

/// The exit code and both streams of a run, for an assertion's message.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
