//! The layout is a rule, not a convention, and it is written once: each `src/<folder>/mod.rs`
//! ends its module doc with a `May use:` line naming the folders of the crate that folder may
//! use (as `crate::X` links; the pure core, re-exported by `src/lib.rs`, is always allowed).
//! This test reads those lines and fails, naming the file and line, on a `use crate::X` (or a
//! path `crate::X::…`, or `grove_conformance::X::…`) outside the allowed set, and on a folder
//! whose doc has no such line, or one it cannot read. The pure core, `core/`, is kept pure by
//! its crate's dependencies.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a folder's `May use:` line allows.
#[derive(Debug, PartialEq)]
enum MayUse {
    /// These folders of the crate (besides itself and the pure core).
    Folders(BTreeSet<String>),
    /// Every folder of the library: the binary's command line.
    Everything,
}

fn src() -> PathBuf {
    common::root().join("src")
}

/// The modules of the pure core the crate re-exports (`pub use grove_conformance_core::{…}` in
/// `src/lib.rs`): every folder may use them.
fn core_modules(lib_rs: &str) -> BTreeSet<String> {
    let list = lib_rs
        .split("pub use grove_conformance_core::{")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("src/lib.rs re-exports the pure core as `pub use grove_conformance_core::{...}`");
    list.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The folders of `src/` that are modules (they have a `mod.rs`).
fn folders() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("mod.rs").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The `May use:` rule of a folder's `mod.rs` (`file` names it in errors): the last paragraph
/// of the leading `//!` doc, starting `May use:`, naming folders as `crate::X` (checked against
/// `known`, the folders of `src/` and the core's modules), or saying "every folder of the
/// library". An error names the file and line.
fn may_use(file: &str, text: &str, known: &BTreeSet<String>) -> Result<MayUse, String> {
    let doc: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .take_while(|(_, l)| l.starts_with("//!"))
        .map(|(i, l)| (i + 1, l.trim_start_matches("//!").trim()))
        .collect();
    let starts: Vec<usize> = doc
        .iter()
        .enumerate()
        .filter(|(_, (_, l))| l.starts_with("May use:"))
        .map(|(i, _)| i)
        .collect();
    let first = match starts.as_slice() {
        [] => {
            return Err(format!(
                "{file}:1: its module doc has no `May use:` line (the folders it may use)"
            ));
        }
        [one] => *one,
        [_, second, ..] => {
            return Err(format!(
                "{file}:{}: a second `May use:` line; the rule is written once",
                doc[*second].0
            ));
        }
    };
    let line = doc[first].0;
    let paragraph: Vec<&str> = doc[first..]
        .iter()
        .map(|(_, l)| *l)
        .take_while(|l| !l.is_empty())
        .collect();
    if doc[first + paragraph.len()..]
        .iter()
        .any(|(_, l)| !l.is_empty())
    {
        return Err(format!(
            "{file}:{line}: the `May use:` line must end the module doc"
        ));
    }
    let rule = paragraph.join(" ");
    if rule.contains("every folder of the library") {
        return Ok(MayUse::Everything);
    }
    let mut allowed = BTreeSet::new();
    for name in used(&rule) {
        if !known.contains(&name) {
            return Err(format!(
                "{file}:{line}: `May use:` names crate::{name}, which is no folder of src/ and no module of the core"
            ));
        }
        allowed.insert(name);
    }
    if allowed.is_empty() && !rule.contains("nothing") {
        return Err(format!(
            "{file}:{line}: `May use:` names no folder as `crate::X` and does not say \"nothing\" or \"every folder of the library\": {rule}"
        ));
    }
    Ok(MayUse::Folders(allowed))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::X` (and `grove_conformance::X`, as doc examples spell the crate) names a line
/// uses (comments and doc links included: a doc that points at a folder the code may not use is
/// wrong too).
fn used(line: &str) -> Vec<String> {
    ["crate::", "grove_conformance::"]
        .iter()
        .flat_map(|prefix| {
            line.match_indices(prefix)
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
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn each_folder_uses_only_what_its_module_doc_allows() {
    let src = src();
    let core = core_modules(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let folders = folders();
    assert!(folders.len() >= 8, "src/ has its folders: {folders:?}");
    let known: BTreeSet<String> = folders
        .iter()
        .cloned()
        .chain(core.iter().cloned())
        .collect();
    let mut broken = Vec::new();
    for folder in &folders {
        let mod_rs = format!("src/{folder}/mod.rs");
        let text = std::fs::read_to_string(src.join(folder).join("mod.rs")).unwrap();
        let may = match may_use(&mod_rs, &text, &known) {
            Ok(MayUse::Everything) => continue,
            Ok(MayUse::Folders(may)) => may,
            Err(e) => {
                broken.push(e);
                continue;
            }
        };
        let mut files = Vec::new();
        rust_files(&src.join(folder), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                for name in used(line) {
                    if name != *folder && !core.contains(&name) && !may.contains(&name) {
                        broken.push(format!(
                            "src/{}:{}: src/{folder} uses crate::{name}, which {mod_rs}'s `May use:` line does not name",
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
    let manifest = std::fs::read_to_string(common::root().join("core/Cargo.toml")).unwrap();
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
    assert_eq!(used("use grove_conformance::proxy::ApiProxy;"), ["proxy"]);
    assert!(used("use grove_conformance_core::catalog;").is_empty());
}

fn known() -> BTreeSet<String> {
    ["host", "proxy", "cluster", "catalog"]
        .into_iter()
        .map(String::from)
        .collect()
}

#[test]
fn a_may_use_line_is_read_from_the_end_of_the_module_doc() {
    let text = "//! The proxy.\n//!\n//! May use: [`crate::host`] and\n//! [`crate::cluster`], the pure core.\n\nmod x;\n";
    assert_eq!(
        may_use("src/proxy/mod.rs", text, &known()),
        Ok(MayUse::Folders(
            ["host", "cluster"].into_iter().map(String::from).collect()
        ))
    );
    let host =
        "//! Helpers.\n//!\n//! May use: the standard library; nothing else of the harness.\n";
    assert_eq!(
        may_use("src/host/mod.rs", host, &known()),
        Ok(MayUse::Folders(BTreeSet::new()))
    );
    let cli = "//! The binary.\n//!\n//! May use: every folder of the library.\n";
    assert_eq!(
        may_use("src/cli/mod.rs", cli, &known()),
        Ok(MayUse::Everything)
    );
}

#[test]
fn a_missing_or_garbled_may_use_line_is_an_error_naming_file_and_line() {
    let missing = "//! The proxy, with no rule.\n\nmod x;\n";
    assert_eq!(
        may_use("src/proxy/mod.rs", missing, &known()),
        Err(
            "src/proxy/mod.rs:1: its module doc has no `May use:` line (the folders it may use)"
                .into()
        )
    );
    let unknown = "//! The proxy.\n//!\n//! May use: [`crate::hots`].\n";
    let err = may_use("src/proxy/mod.rs", unknown, &known()).unwrap_err();
    assert!(
        err.starts_with("src/proxy/mod.rs:3: `May use:` names crate::hots"),
        "{err}"
    );
    let vague = "//! The proxy.\n//!\n//! May use: whatever it needs.\n";
    let err = may_use("src/proxy/mod.rs", vague, &known()).unwrap_err();
    assert!(
        err.starts_with("src/proxy/mod.rs:3: `May use:` names no folder"),
        "{err}"
    );
    let not_last = "//! The proxy.\n//!\n//! May use: [`crate::host`].\n//!\n//! More text.\n";
    let err = may_use("src/proxy/mod.rs", not_last, &known()).unwrap_err();
    assert_eq!(
        err,
        "src/proxy/mod.rs:3: the `May use:` line must end the module doc"
    );
    let twice = "//! May use: [`crate::host`].\n//!\n//! May use: [`crate::cluster`].\n";
    let err = may_use("src/proxy/mod.rs", twice, &known()).unwrap_err();
    assert!(
        err.starts_with("src/proxy/mod.rs:3: a second `May use:` line"),
        "{err}"
    );
}

/// The most lines a hand-written source file holds (its `#[cfg(test)] mod tests` at the end,
/// and files named `tests.rs`, aside): past it a file holds more than one job.
const MAX_FILE_LINES: usize = 700;

/// The lines of a source file before its trailing unit tests.
fn code_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod tests"))
        .unwrap_or(lines.len())
}

#[test]
fn no_hand_written_file_is_over_the_line_limit() {
    let mut files = Vec::new();
    for dir in ["src", "core/src", "reference-operator/src"] {
        rust_files(&common::root().join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|f| {
            let n = code_lines(&std::fs::read_to_string(f).unwrap());
            (n > MAX_FILE_LINES).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_FILE_LINES} lines; split along what each part does:\n{}",
        long.join("\n")
    );
}

#[test]
fn trailing_unit_tests_do_not_count_towards_the_limit() {
    let text = "a\nb\n#[cfg(test)]\nmod tests {\n    x\n}\n";
    assert_eq!(code_lines(text), 2);
    assert_eq!(code_lines("a\nb\nc\n"), 3);
}
