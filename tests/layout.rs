//! The layout is a rule, not a convention: each folder of `src/` uses only the folders its
//! module doc allows (the pure core, `core/`, is kept pure by its crate's dependencies). A
//! `use crate::X` (or a path `crate::X::…`) outside the allowed set fails this test, naming
//! the file and line.

use std::collections::BTreeMap;
use std::path::Path;

/// The pure core, re-exported by the crate: every folder may use it.
const CORE: &[&str] = &[
    "catalog", "diff", "errors", "explore", "matcher", "model", "monitor", "report", "schedule",
    "snapshot", "vocab",
];

/// Folder → the folders of the I/O crate it may use (besides itself and the core).
fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("host", &[][..]),
        ("proxy", &["host"][..]),
        // The simulated kubelet reports the embedded control plane's pinned version.
        ("kubelets", &["host", "cluster"][..]),
        ("cluster", &["host", "kubelets"][..]),
        ("implementation", &["host", "proxy", "cluster"][..]),
        (
            "runner",
            &["host", "proxy", "kubelets", "cluster", "implementation"][..],
        ),
        (
            "campaign",
            &[
                "host",
                "proxy",
                "kubelets",
                "cluster",
                "implementation",
                "runner",
            ][..],
        ),
    ])
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::X` names a line uses (comments and doc links included: a doc that points at a
/// folder the code may not use is wrong too).
fn used(line: &str) -> Vec<String> {
    line.match_indices("crate::")
        .filter(|(i, _)| {
            // `grove_conformance_core::…` and `some_crate::` are not `crate::`.
            *i == 0 || !line[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .filter_map(|(i, m)| {
            let rest = &line[i + m.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn each_folder_uses_only_what_its_module_doc_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (folder, may) in allowed() {
        let mut files = Vec::new();
        rust_files(&src.join(folder), &mut files);
        assert!(!files.is_empty(), "src/{folder} has no Rust files");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                for name in used(line) {
                    if name != folder
                        && !CORE.contains(&name.as_str())
                        && !may.contains(&name.as_str())
                    {
                        broken.push(format!(
                            "{}:{}: src/{folder} uses crate::{name}",
                            file.strip_prefix(&src).unwrap_or(&file).display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "folders reach beyond their layout:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_core_crate_has_no_kube_client_and_no_async_runtime() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("core/Cargo.toml"))
            .unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("core/Cargo.toml has dependencies")
        .split("\n[")
        .next()
        .unwrap();
    for forbidden in ["kube", "k8s-openapi", "tokio", "hyper", "futures"] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(forbidden)
                && l.trim_start()[forbidden.len()..].starts_with(['.', ' ', '='])),
            "core/Cargo.toml depends on {forbidden}"
        );
    }
}

#[test]
fn a_use_of_another_folder_is_seen() {
    assert_eq!(used("use crate::runner::case::RunContext;"), ["runner"]);
    assert_eq!(
        used("x: crate::host::docker::command(), y: crate::cluster::X"),
        ["host", "cluster"]
    );
    assert!(used("use grove_conformance_core::catalog;").is_empty());
}
