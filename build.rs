//! Records the commit this harness is built from (`GROVE_CONFORMANCE_COMMIT`), which every
//! report names: `git rev-parse HEAD` of the checkout, or `unknown` outside one.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=GROVE_CONFORMANCE_COMMIT={commit}");
    // A commit, a checkout or a reset moves HEAD's log; a build in a fresh clone has none.
    for file in [".git/HEAD", ".git/logs/HEAD"] {
        if std::path::Path::new(file).exists() {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
