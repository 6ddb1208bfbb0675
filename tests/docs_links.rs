//! The docs say true things about the repository: every relative link of `README.md` and of
//! the book's chapters (`docs/src/**/*.md`) reaches a file, every `#anchor` a heading of its
//! page (slugs as GitHub and mdBook make them), `docs/src/SUMMARY.md` lists every chapter,
//! every `{{#include}}` names a file, every repository path the docs name in code
//! (`src/cluster/options.rs`, `tests/`) exists, the table of steps is the one the step kinds'
//! definitions give, and `.ci/run` runs the commands the README says CI runs. None of it
//! needs mdBook: the book's build is `.ci/run`'s.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The folders at the top of the repository whose paths the docs name: a code span starting
/// with one of them is a path that must exist.
const TOP: &[&str] = &[
    "src/",
    "core/",
    "tests/",
    "docs/",
    "examples/",
    "reference-operator/",
    "cases/",
    "fixtures/",
    "in-cluster/",
    "kind-config/",
    ".ci/",
    ".cargo/",
];

/// Paths that exist only once something is built: `mdbook build docs` writes the book there.
const BUILT: &[&str] = &["docs/book/"];

/// One page: its path relative to the repository root, and its text.
type Pages = BTreeMap<PathBuf, String>;

/// `a/b/../c` → `a/c`, without touching the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// `line` split into its code spans and the text between them: (is code, text).
fn spans(line: &str) -> Vec<(bool, &str)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let ticks = rest[open..].chars().take_while(|c| *c == '`').count();
        let fence = &rest[open..open + ticks];
        match rest[open + ticks..].find(fence) {
            Some(len) => {
                out.push((false, &rest[..open]));
                out.push((true, &rest[open + ticks..open + ticks + len]));
                rest = &rest[open + ticks + len + ticks..];
            }
            None => break,
        }
    }
    out.push((false, rest));
    out
}

/// The targets of the Markdown links `[text](target)` in `text` (not in code).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        for (code, part) in spans(line) {
            if code {
                continue;
            }
            let mut rest = part;
            while let Some(i) = rest.find("](") {
                let after = &rest[i + 2..];
                let Some(end) = after.find(')') else { break };
                out.push((n, after[..end].trim().to_string()));
                rest = &after[end..];
            }
        }
    }
    out
}

/// A heading's anchor as GitHub and mdBook make it: the text without its Markdown, lowercase,
/// letters, digits, `-` and `_` kept, each space a `-`, everything else dropped.
fn slug(heading: &str) -> String {
    // A link in a heading reads as its text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        text.push_str(&rest[..i]);
        rest = rest[i + 2..].split_once(')').map_or("", |(_, r)| r);
    }
    text.push_str(rest);
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c == ' ' {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered `-1`, `-2`, … as both tools do.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim());
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// Every broken link and anchor of `pages`; `exists` says whether a path of the repository
/// exists (a page of `pages` always does).
fn broken_links(pages: &Pages, exists: &dyn Fn(&Path) -> bool) -> Vec<String> {
    let mut broken = Vec::new();
    for (page, text) in pages {
        let dir = page.parent().unwrap_or(Path::new(""));
        for (n, target) in links(text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = file.split_whitespace().next().unwrap_or("");
            let resolved = if file.is_empty() {
                page.clone()
            } else {
                normalize(&dir.join(file))
            };
            if !pages.contains_key(&resolved) && !exists(&resolved) {
                broken.push(format!(
                    "{}:{n}: the link to {target} names no file ({})",
                    page.display(),
                    resolved.display()
                ));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            match pages.get(&resolved) {
                Some(target_text) if anchors(target_text).contains(anchor) => {}
                Some(target_text) => broken.push(format!(
                    "{}:{n}: #{anchor} is no heading of {} (its anchors: {})",
                    page.display(),
                    resolved.display(),
                    anchors(target_text)
                        .into_iter()
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                None => broken.push(format!(
                    "{}:{n}: #{anchor} points into {}, which is not a page",
                    page.display(),
                    resolved.display()
                )),
            }
        }
    }
    broken
}

/// The repository paths `text` names in code spans (`src/runner/`, `tests/layout.rs:12`): those
/// starting with a folder of [`TOP`], without placeholders, with a `:line` suffix cut.
fn named_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        for (code, part) in spans(line) {
            if !code {
                continue;
            }
            for word in part.split_whitespace() {
                let word = word.trim_end_matches([',', ';', ')']);
                let path = word.split(':').next().unwrap_or(word);
                if TOP.iter().any(|t| path.starts_with(t))
                    && !BUILT.iter().any(|b| path.starts_with(b))
                    && !path.contains(['<', '>', '{', '}', '*', '$', '…', '|'])
                {
                    out.push((n, path.to_string()));
                }
            }
        }
    }
    out
}

/// The chapters `SUMMARY.md` links, relative to `docs/src/`.
fn summary_chapters(summary: &str) -> BTreeSet<PathBuf> {
    links(summary)
        .into_iter()
        .map(|(_, t)| normalize(Path::new(t.split('#').next().unwrap_or(&t))))
        .collect()
}

/// The files `{{#include F}}` brings into `text`.
fn includes(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let rest = l.split("{{#include ").nth(1)?;
            let file = rest.split("}}").next()?.split(':').next()?.trim();
            Some((i + 1, file.to_string()))
        })
        .collect()
}

fn root() -> PathBuf {
    common::root().to_path_buf()
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// `README.md` and every page under `docs/src/`, keyed by their path from the root.
fn pages() -> Pages {
    let mut files = vec![root().join("README.md")];
    markdown_files(&root().join("docs/src"), &mut files);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(root()).unwrap().to_path_buf(), text)
        })
        .collect()
}

fn report(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let pages = pages();
    assert!(
        pages.len() > 10,
        "the book has chapters: {:?}",
        pages.keys()
    );
    let root = root();
    report(
        "broken links",
        broken_links(&pages, &|p| root.join(p).exists()),
    );
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    for (page, text) in pages() {
        for (n, path) in named_paths(&text) {
            if !root().join(&path).exists() {
                missing.push(format!("{}:{n}: {path} does not exist", page.display()));
            }
        }
    }
    report("paths named by the docs that do not exist", missing);
}

#[test]
fn the_summary_lists_every_chapter_and_every_include_exists() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed = summary_chapters(&summary);
    let mut problems = Vec::new();
    let mut included = BTreeSet::new();
    let mut files = Vec::new();
    markdown_files(&src, &mut files);
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let dir = file.parent().unwrap();
        for (n, inc) in includes(&text) {
            let path = normalize(&dir.join(&inc));
            if !path.exists() {
                problems.push(format!(
                    "{}:{n}: includes {inc}, which does not exist",
                    file.display()
                ));
            }
            included.insert(path);
        }
    }
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().to_path_buf();
        if rel != Path::new("SUMMARY.md") && !listed.contains(&rel) && !included.contains(file) {
            problems.push(format!(
                "docs/src/{}: a chapter docs/src/SUMMARY.md does not list",
                rel.display()
            ));
        }
    }
    for chapter in &listed {
        if !src.join(chapter).exists() {
            problems.push(format!(
                "docs/src/SUMMARY.md lists {}, which does not exist",
                chapter.display()
            ));
        }
    }
    report("the book's summary", problems);
}

/// The book's table of steps is the one the step kinds' definitions give
/// (`GROVE_CONFORMANCE_UPDATE_GOLDEN=1` rewrites it).
#[test]
fn docs_steps_table() {
    let path = root().join("docs/src/steps-table.md");
    let table = grove_conformance::catalog::steps_table();
    if std::env::var_os("GROVE_CONFORMANCE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &table).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(
        written == table,
        "{} is not the table core/src/catalog/step_kinds.rs gives; rewrite it with GROVE_CONFORMANCE_UPDATE_GOLDEN=1 cargo test --test docs_links",
        path.display()
    );
}

#[test]
fn ci_runs_the_commands_the_readme_gives() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let section = readme
        .split("## What CI runs")
        .nth(1)
        .expect("README.md has a section \"What CI runs\"")
        .split("\n## ")
        .next()
        .unwrap();
    let ci_lines: Vec<&str> = ci.lines().map(str::trim).collect();
    let mut commands = 0;
    let mut fenced = false;
    for line in section.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced && !line.trim().is_empty() {
            commands += 1;
            assert!(
                ci_lines.contains(&line.trim()),
                ".ci/run does not run the README's line `{line}`"
            );
        }
    }
    assert!(commands >= 6, "the README gives CI's commands: {commands}");
}

/// The checker itself, on pages made up here: a broken anchor, a missing file and a heading
/// repeated are seen; good links are not reported.
#[test]
fn a_broken_anchor_or_file_is_reported_with_page_and_line() {
    let pages: Pages = [
        (
            PathBuf::from("docs/src/a.md"),
            "# A\n\n## Setup: the `embedded` cluster\n\n## Setup: the `embedded` cluster\n\n\
             See [b](b.md#the-step-table), [up](#setup-the-embedded-cluster-1),\n\
             [gone](b.md#setup), [nothing](missing.md) and `[not a link](x.md)`.\n\
             ```sh\n[in code](nowhere.md)\n```\n"
                .to_string(),
        ),
        (
            PathBuf::from("docs/src/b.md"),
            "# B\n\n## The step table\n\nBack to [a](a.md#setup-the-embedded-cluster).\n"
                .to_string(),
        ),
    ]
    .into();
    let broken = broken_links(&pages, &|_| false);
    assert_eq!(broken.len(), 2, "{broken:#?}");
    assert!(
        broken[0].starts_with("docs/src/a.md:8: #setup is no heading of docs/src/b.md"),
        "{}",
        broken[0]
    );
    assert!(
        broken[1].starts_with("docs/src/a.md:8: the link to missing.md names no file"),
        "{}",
        broken[1]
    );
}

#[test]
fn slugs_follow_github_and_mdbook() {
    assert_eq!(
        slug("Setup: the embedded cluster"),
        "setup-the-embedded-cluster"
    );
    assert_eq!(
        slug("Against kind (needs Docker)"),
        "against-kind-needs-docker"
    );
    assert_eq!(
        slug("Under stale and unobserved views (`sweep --pattern stale|unobserved`)"),
        "under-stale-and-unobserved-views-sweep---pattern-staleunobserved"
    );
    assert_eq!(slug("The [proxy](x.md) faults"), "the-proxy-faults");
}

#[test]
fn named_paths_are_code_spans_under_the_repository_folders() {
    let text = "Open `src/cluster/options.rs:12`, `tests/`, `docs/book/` and `cases/<area>/`; not src/x.rs, \
                nor `kind-run/conformance.yaml`.\n```sh\n`src/in/code.rs`\n```\n";
    let named: Vec<String> = named_paths(text).into_iter().map(|(_, p)| p).collect();
    assert_eq!(named, ["src/cluster/options.rs", "tests/"]);
}
