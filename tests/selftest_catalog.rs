//! Self-tests of the case language: the real catalog, parser diagnostics, fixtures, lint,
//! coverage and revision applicability.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use grove_conformance::catalog::{
    self, Applicability, ClauseStatus, ConditionMatch, ConditionStatus, ControllerAction,
    DeletionTarget, NodeLoss, ObjectState, PodAction, PodFilter, PodPhase, PodSelector, Profile,
    StepKind, Subject, Trigger,
};
use grove_conformance::vocab::{Feature, Kind, Revision, Term};
use rstest::rstest;

fn root() -> PathBuf {
    common::root().to_path_buf()
}

fn fixtures() -> BTreeSet<String> {
    ["all-ranks", "leader-worker"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Parses `text` as `cases/x/<name>.yaml` and returns the rendered diagnostics.
fn diagnostics(name: &str, text: &str) -> Vec<String> {
    let path = PathBuf::from(format!("cases/x/{name}.yaml"));
    match catalog::parse_case_with_fixtures(&path, text, &fixtures()) {
        Ok(case) => panic!("expected diagnostics, parsed {case:?}"),
        Err(d) => d.iter().map(ToString::to_string).collect(),
    }
}

#[rstest]
fn every_case_in_the_catalog_parses(#[files("cases/**/*.yaml")] path: PathBuf) {
    let text = fs::read_to_string(&path).unwrap();
    let known: BTreeSet<String> = fs::read_dir(root().join("fixtures"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    if let Err(d) = catalog::parse_case_with_fixtures(&path, &text, &known) {
        panic!("{}", catalog::render_diagnostics(&d));
    }
}

#[test]
fn the_catalog_loads_with_areas_and_fixtures() {
    let cat = catalog::load_catalog(&root())
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    assert!(cat.cases.len() >= 4);
    let case = cat.case("leader-completes-while-worker-fails").unwrap();
    assert_eq!(case.area, "leader-driven");
    assert_eq!(case.profile, Profile::Core);
    let lw = cat.fixture("leader-worker").unwrap();
    assert_eq!(lw.object_name, "job");
    assert_eq!(
        lw.manifest.pointer(
            "/spec/template/podCliqueScalingGroups/0/policy/completion/success/targetNames"
        ),
        Some(&serde_json::json!(["leader"]))
    );
    let all = cat.fixture("all-ranks").unwrap();
    assert_eq!(
        all.manifest
            .pointer("/spec/template/cliques/0/spec/replicas"),
        Some(&serde_json::json!(8))
    );
}

#[test]
fn the_coverage_doc_is_current() {
    let cat = catalog::load_catalog(&root()).unwrap();
    let want = catalog::coverage(&cat);
    let path = root().join("docs/src/coverage.md");
    if std::env::var_os("GROVE_CONFORMANCE_UPDATE_COVERAGE").is_some() {
        fs::write(&path, &want).unwrap();
    }
    let have = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/src/coverage.md is stale: regenerate it with `grove-conformance coverage` \
         (or GROVE_CONFORMANCE_UPDATE_COVERAGE=1 cargo test --test selftest_catalog)"
    );
}

#[test]
fn a_full_case_parses_into_the_model() {
    let text = r#"
name: model
summary: Every step kind once.
clauses: [E3, O3]
profile: core
fixtures: [all-ranks, leader-worker]
revisions: [grep-0285-review, grep-0285-2026-08]
timeout: 1m30s
steps:
  - apply: {fixture: all-ranks, patch: {spec: {replicas: 2}}}
  - update: {fixture: all-ranks, patch: {metadata: {labels: {a: b}}}}
  - update:
      kind: PodClique
      name: job-0-worker
      subresource: status
      conditions: {Completed: {status: "True", reason: CompletionCriteriaMet}, Failed: false}
  - delete: {kind: PodClique, name: job-0-worker}
  - force-delete: {pod: job-0-worker/2}
  - delete: {clique: job-0-worker}
  - reject:
      update: {kind: PodCliqueSet, name: job, subresource: scale, patch: {spec: {replicas: 3}}}
      field: spec.replicas
  - exit: {pcs: job, code: 0}
  - unready: {pod: job-0-worker/1}
  - ready: {pod: job-0-worker/1}
  - evict: {pod: job-0-worker/1}
  - preempt: {clique: job-0-worker}
  - lose-node: {pod: job-0-worker/4, mode: fail}
  - controller: pause
  - controller:
      action: crash
      when: {changed: {kind: PodCliqueSet, name: job, path: status.replicaRestartCounts}}
  - controller: {action: crash, when: {deleted: {kind: Pod}}}
  - controller: {action: crash, when: {condition: {kind: PodClique, name: job-0-worker, type: Failed, status: "True"}}}
  - remember: {as: w, kind: PodClique, name: job-0-worker}
  - remember: {as: p, pod: job-0-worker/0}
  - expect:
      within: 20s
      for: 500ms
      objects:
        - kind: PodClique
          name: job-0-worker
          conditions: {Completed: absent, MinAvailableBreached: "False"}
          labels: {grove.io/restart-attempt: "1"}
        - {kind: PodCliqueScalingGroup, name: job-0-trainer, absent: true}
        - {pod: job-0-worker/0, spec: {restartPolicy: Never}}
      pods:
        - {clique: job-0-worker, phase: Succeeded, count: 8}
        - {pcs: job, active: 0}
        - {pod: job-0-worker/0, terminal: 1}
      recreated: [w]
      unchanged: [p]
      events: [{reason: JobFailed, kind: PodClique, name: job-0-worker, count: 1}, {reason: JobCompleted}]
"#;
    let case =
        catalog::parse_case_with_fixtures(Path::new("cases/x/model.yaml"), text, &fixtures())
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    assert_eq!(case.steps.len(), 20);
    assert_eq!(case.timeout.unwrap().to_string(), "1m30s");
    assert_eq!(
        case.revisions,
        Some(vec![
            Revision::Grep0285Review,
            Revision::Grep0285ProposalText
        ])
    );
    let kinds: Vec<&str> = case.steps.iter().map(|s| s.kind.keyword()).collect();
    assert_eq!(
        kinds,
        [
            "apply",
            "update",
            "update",
            "delete",
            "force-delete",
            "delete",
            "reject",
            "exit",
            "unready",
            "ready",
            "evict",
            "preempt",
            "lose-node",
            "controller",
            "controller",
            "controller",
            "controller",
            "remember",
            "remember",
            "expect"
        ]
    );
    assert_eq!(case.steps[1].pos.line, 11);
    match &case.steps[4].kind {
        StepKind::Pods(p) => {
            assert_eq!(
                p.selector,
                PodSelector::Pod {
                    clique: "job-0-worker".into(),
                    index: 2
                }
            );
            assert_eq!(p.action, PodAction::ForceDelete);
        }
        other => panic!("{other:?}"),
    }
    match &case.steps[12].kind {
        StepKind::Pods(p) => assert_eq!(p.action, PodAction::LoseNode(NodeLoss::FailFirst)),
        other => panic!("{other:?}"),
    }
    match &case.steps[14].kind {
        StepKind::Controller(c) => {
            assert_eq!(c.action, ControllerAction::Crash);
            assert!(
                matches!(&c.when, Some(Trigger::Changed { path, .. }) if path == "status.replicaRestartCounts")
            );
        }
        other => panic!("{other:?}"),
    }
    match &case.steps[15].kind {
        StepKind::Controller(c) => assert_eq!(
            c.when,
            Some(Trigger::Deleted(DeletionTarget::AnyOf(Kind::Pod)))
        ),
        other => panic!("{other:?}"),
    }
    let StepKind::Expect(e) = &case.steps[19].kind else {
        panic!("expected an expectation");
    };
    assert_eq!(e.hold.unwrap().as_std().as_millis(), 500);
    let ObjectState::Present {
        conditions, labels, ..
    } = &e.objects[0].state
    else {
        panic!("present")
    };
    assert_eq!(conditions[0].condition, Term::Completed);
    assert_eq!(conditions[0].expect, ConditionMatch::Absent);
    assert_eq!(
        conditions[1].expect,
        ConditionMatch::Status {
            status: ConditionStatus::False,
            reason: None
        }
    );
    assert_eq!(labels, &vec![(Term::LabelRestartAttempt, "1".to_owned())]);
    assert_eq!(e.objects[1].state, ObjectState::Absent);
    assert!(matches!(
        e.objects[2].subject,
        Subject::Pod { index: 0, .. }
    ));
    assert_eq!(e.pods[0].filter, PodFilter::Phase(PodPhase::Succeeded));
    assert_eq!(e.pods[1].filter, PodFilter::Active);
    assert_eq!(e.events[1].count, None);
    assert!(case.terms.contains(&Term::ReplicaRestartCounts));
    assert!(case.terms.contains(&Term::LabelRestartAttempt));
    assert!(case.features.contains(&Feature::ParentSemantics));
}

#[test]
fn a_case_name_too_long_for_a_label_is_rejected_at_load() {
    let name = "a".repeat(64);
    let text = format!(
        "name: {name}\nsummary: ok\nclauses: [E3]\nprofile: core\nfixture: leader-worker\nsteps:\n  - apply: leader-worker\n"
    );
    assert_eq!(
        diagnostics(&name, &text),
        [format!(
            "cases/x/{name}.yaml:1:7: name: name `{name}` has 64 characters; a case's name labels its namespace, so it may have at most 63"
        )]
    );
    let ok = "a".repeat(63);
    let text = text.replace(&name, &ok);
    catalog::parse_case_with_fixtures(
        &PathBuf::from(format!("cases/x/{ok}.yaml")),
        &text,
        &fixtures(),
    )
    .expect("63 characters are allowed");
}

#[test]
fn every_problem_is_reported_at_once_with_positions() {
    let text = r#"name: other-name
summary: ok
clauses: [E3, E99, R7]
profile: core
fixture: leader-worker
colour: blue
steps:
  - apply: all-ranks
  - exit: {pod: job-0-worker-abc12, code: 1}
  - exit: {clique: job-0-worker}
  - expect:
      objects:
        - {kind: PodClique, name: job-0-worker, conditions: {Complete: "True"}}
  - expect: {within: soon, recreated: [nothing]}
  - controller: nap
  - reject: {apply: leader-worker}
  - evict: {pod: job-0-worker/1}
    extra: 1
"#;
    let got = diagnostics("case", text);
    let want = [
        "cases/x/case.yaml:1:7: name: name `other-name` must equal the file name `case`",
        "cases/x/case.yaml:3:15: clauses[1]: unknown clause `E99` (not in job-semantics.md)",
        "cases/x/case.yaml:3:20: clauses[2]: clause `R7` is provisional; a case citing it belongs in profile `extended`",
        "cases/x/case.yaml:6:1: colour: unknown key `colour` (expected one of: name, summary, clauses, profile, fixture, fixtures, revisions, timeout, steps)",
        "cases/x/case.yaml:8:12: steps[0].apply: fixture `all-ranks` is not declared in the case's `fixture`/`fixtures` (leader-worker)",
        "cases/x/case.yaml:9:17: steps[1].exit.pod: expected `<podclique>/<index>` (e.g. `job-0-worker/3`), found `job-0-worker-abc12`; pods are addressed by PodClique and pod index, never by pod name",
        "cases/x/case.yaml:10:11: steps[2].exit: missing required key `code`",
        "cases/x/case.yaml:12:7: steps[3].expect: expected `within: <duration>` (becomes true) and/or `for: <duration>` (stays true)",
        "cases/x/case.yaml:13:62: steps[3].expect.objects[0].conditions.Complete: unknown condition type `Complete` (the vocabulary has: Completed, Failed, MinAvailableBreached, PodCliqueScheduled, GangTerminationInProgress)",
        "cases/x/case.yaml:14:22: steps[4].expect.within: invalid duration `soon` (expected e.g. `500ms`, `20s`, `2m`, `1m30s`)",
        "cases/x/case.yaml:14:40: steps[4].expect.recreated[0]: `nothing` is not remembered by an earlier `remember` step",
        "cases/x/case.yaml:15:17: steps[5].controller: unknown controller action `nap` (expected pause, resume, crash or wait)",
        "cases/x/case.yaml:16:13: steps[6].reject: missing required key `field`",
        "cases/x/case.yaml:17:5: steps[7]: a step has exactly one key (its kind), found 2",
    ];
    // The step keywords are those the step kinds define, in their order.
    let keywords: Vec<&str> = grove_conformance::catalog::STEP_KINDS
        .iter()
        .map(|d| d.keyword)
        .collect();
    assert_eq!(&keywords[..3], ["apply", "update", "delete"]);
    let unknown_step = format!(
        "cases/x/case.yaml:18:5: steps[7].extra: unknown key `extra` (expected one of: {})",
        keywords.join(", ")
    );
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want_sorted: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    want_sorted.push(unknown_step);
    want_sorted.sort();
    assert_eq!(got_sorted, want_sorted, "got:\n{}", got.join("\n"));
}

#[test]
fn unknown_fixtures_and_bad_yaml_are_diagnosed() {
    let got = diagnostics(
        "c",
        "name: c\nsummary: s\nclauses: [E1]\nprofile: core\nfixture: nope\nsteps: [{apply: nope}]\n",
    );
    assert_eq!(
        got,
        ["cases/x/c.yaml:5:10: fixtures: unknown fixture `nope` (no fixtures/nope.yaml)"]
    );
    let got = diagnostics("c", "name: c\nsummary: [unclosed\n");
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with("cases/x/c.yaml:3:1: failed to parse YAML"),
        "{got:?}"
    );
}

#[test]
fn fixtures_are_validated() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Job_1\n  namespace: x\nspec: {}\n";
    let got: Vec<String> = catalog::parse_fixture(Path::new("fixtures/bad.yaml"), text)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "fixtures/bad.yaml:1:13: apiVersion: expected `grove.io/v1alpha1`, found `v1`",
            "fixtures/bad.yaml:2:7: kind: expected `PodCliqueSet`, found `Pod`",
            "fixtures/bad.yaml:4:9: metadata.name: expected a DNS label (lowercase letters, digits, `-`)",
            "fixtures/bad.yaml:5:14: metadata.namespace: a fixture has no namespace: every case runs in a fresh one",
            "fixtures/bad.yaml:6:7: spec.template.cliques: expected a non-empty list of cliques",
        ]
    );
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn lint_requires_every_core_clause_and_reports_every_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "fixtures/all-ranks.yaml",
        &fs::read_to_string(root().join("fixtures/all-ranks.yaml")).unwrap(),
    );
    write(
        dir.path(),
        "cases/a/one.yaml",
        "name: one\nsummary: s\nclauses: [E1, E2]\nprofile: core\nfixture: all-ranks\nsteps: [{apply: all-ranks}]\n",
    );
    let err = catalog::lint(dir.path()).unwrap_err();
    assert_eq!(err.len(), 1);
    let msg = err[0].to_string();
    assert!(
        msg.contains("core clauses cited by no case: B1, B2"),
        "{msg}"
    );
    assert!(!msg.contains(" E1,") && !msg.contains("R7"), "{msg}");

    // A catalog citing every core clause passes lint.
    let core: Vec<&str> = catalog::CLAUSES
        .iter()
        .filter(|c| c.status == ClauseStatus::Settled)
        .map(|c| c.id)
        .collect();
    write(
        dir.path(),
        "cases/a/one.yaml",
        &format!(
            "name: one\nsummary: s\nclauses: [{}]\nprofile: core\nfixture: all-ranks\nsteps: [{{apply: all-ranks}}]\n",
            core.join(", ")
        ),
    );
    let cat = catalog::lint(dir.path()).unwrap();
    assert!(catalog::coverage(&cat).contains("| E3 | core |"));

    // Problems in several files are all reported.
    write(dir.path(), "cases/b/two.yaml", "name: two\n");
    write(dir.path(), "fixtures/broken.yaml", "kind: PodCliqueSet\n");
    let err = catalog::load_catalog(dir.path()).unwrap_err();
    let files: BTreeSet<String> = err
        .iter()
        .map(|d| d.file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        ["broken.yaml", "two.yaml"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}

#[test]
fn coverage_is_deterministic_markdown() {
    let cat = catalog::load_catalog(&root()).unwrap();
    let a = catalog::coverage(&cat);
    assert_eq!(a, catalog::coverage(&cat));
    assert!(a.starts_with("# Clause coverage\n"));
    let e10 = a.lines().find(|l| l.starts_with("| E10 |")).unwrap();
    assert!(
        e10.starts_with("| E10 | core | Option A: required completion wins over a simultaneous failure | ")
            && e10.contains(
                "[leader-completes-while-worker-fails](../../cases/leader-driven/leader-completes-while-worker-fails.yaml)"
            ),
        "{e10}"
    );
    // Every clause has a row: linked cases, or **none** when no case cites it.
    for clause in catalog::CLAUSES {
        let row = a
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", clause.id)))
            .unwrap_or_else(|| panic!("no row for {}", clause.id));
        let cited = !cat.cases_citing(clause.id).is_empty();
        assert_eq!(row.ends_with("| **none** |"), !cited, "{row}");
    }
}

#[test]
fn applicability_follows_the_revision() {
    let cat = catalog::load_catalog(&root()).unwrap();
    let lw = cat.case("leader-completes-while-worker-fails").unwrap();
    assert_eq!(
        cat.applicability(lw, Revision::Grep0285Review),
        Applicability::Applies
    );
    assert_eq!(
        cat.applicability(lw, Revision::Grep0285ProposalText),
        Applicability::Applies
    );
    let Applicability::NotApplicable(why) = cat.applicability(lw, Revision::GrovePr728) else {
        panic!("leader-driven cases need parent semantics");
    };
    assert!(why.contains("grove-pr-728"), "{why}");

    let v1 = cat.case("success-on-clique-rejected").unwrap();
    assert!(matches!(
        cat.applicability(v1, Revision::GrovePr728),
        Applicability::NotApplicable(_)
    ));
    let text = "name: only-review\nsummary: s\nclauses: [V10]\nprofile: core\nfixture: all-ranks\nrevisions: [grep-0285-review]\nsteps: [{apply: all-ranks}]\n";
    let case = catalog::parse_case_with_fixtures(Path::new("only-review.yaml"), text, &fixtures())
        .unwrap();
    assert_eq!(
        cat.applicability(&case, Revision::Grep0285ProposalText),
        Applicability::NotApplicable("the case applies only to revisions grep-0285-review".into())
    );
}

#[test]
fn the_clause_table_matches_the_spec_when_available() {
    let spec = root().join("../shared/spec/job-semantics.md");
    let Ok(text) = fs::read_to_string(&spec) else {
        eprintln!("skipped: {} not found", spec.display());
        return;
    };
    let mut found = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("- **") else {
            continue;
        };
        let Some((id, after)) = rest.split_once("**") else {
            continue;
        };
        let digits = id.trim_start_matches(|c: char| c.is_ascii_uppercase());
        if digits.is_empty()
            || digits.len() == id.len()
            || !digits.chars().all(|c| c.is_ascii_digit())
        {
            continue; // a definition such as **Required**, not a clause
        }
        let provisional = after.trim_start().starts_with("(provisional)");
        found.push((id.to_owned(), provisional));
    }
    let table: Vec<(String, bool)> = catalog::CLAUSES
        .iter()
        .map(|c| (c.id.to_owned(), c.status == ClauseStatus::Provisional))
        .collect();
    assert_eq!(
        found,
        table,
        "the clause table differs from {}",
        spec.display()
    );
}

#[test]
fn not_true_vanishing_pods_and_event_mentions_parse() {
    let text = r#"
name: forms
summary: The spec-exact forms.
clauses: [E3, EV3]
profile: core
fixture: all-ranks
steps:
  - apply: all-ranks
  - evict: {pod: job-0-worker/1, terminal-phase: false}
  - delete: {pod: job-0-worker/2, terminal-phase: false}
  - preempt: {pod: job-0-worker/3}
  - expect:
      within: 5s
      objects:
        - {kind: PodClique, name: job-0-worker, conditions: {Failed: "True", Completed: not-true}}
      events:
        - {reason: GangRestartTriggered, kind: PodCliqueSet, name: job, count: 1, mentions: ["0", worker]}
"#;
    let case =
        catalog::parse_case_with_fixtures(Path::new("cases/x/forms.yaml"), text, &fixtures())
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let silent: Vec<bool> = case.steps[1..4]
        .iter()
        .map(|s| match &s.kind {
            StepKind::Pods(p) => p.without_terminal_phase,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(silent, [true, true, false]);
    let StepKind::Expect(e) = &case.steps[4].kind else {
        panic!("expected an expectation");
    };
    let ObjectState::Present { conditions, .. } = &e.objects[0].state else {
        panic!("present")
    };
    assert_eq!(conditions[1].expect, ConditionMatch::NotTrue);
    assert_eq!(e.events[0].mentions, ["0", "worker"]);

    let bad = r#"
name: bad-forms
summary: Misused forms.
clauses: [E3]
profile: core
fixture: all-ranks
steps:
  - force-delete: {pod: job-0-worker/2, terminal-phase: false}
  - exit: {pod: job-0-worker/2, code: 1, terminal-phase: false}
  - expect:
      within: 5s
      events:
        - {reason: JobFailed, mentions: ["two words"]}
"#;
    let d = diagnostics("bad-forms", bad).join("\n");
    assert!(
        d.contains("8:") && d.contains("graceful delete of pods only"),
        "{d}"
    );
    assert!(d.contains("9:") && d.contains("terminal-phase"), "{d}");
    assert!(d.contains("`two words` is not one word"), "{d}");
}

/// The case files under `cases/`, relative to the crate root, as rstest's `#[files]` names
/// them: every character but letters and digits becomes `_`, cut to 64 characters.
fn case_test_names(dir: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            case_test_names(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            let relative = path
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let name: String = relative
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(64)
                .collect();
            out.push(name);
        }
    }
}

#[test]
fn each_kind_case_filter_of_ci_and_readme_selects_exactly_one_case() {
    let mut names = Vec::new();
    case_test_names(&root().join("cases"), &mut names);
    // The shape check: rstest's name of a long path ends cut off, as seen in `--list`.
    assert!(
        names
            .iter()
            .any(|n| n == "cases_podclique_evicted_unschedulable_pending_pod_fails_clique_y"),
        "rstest's naming changed; update this test"
    );
    for file in [".ci/run", "README.md"] {
        let text = fs::read_to_string(root().join(file)).unwrap();
        let block = text
            .split("GROVE_CONFORMANCE_TARGET=kind cargo test --test catalog --")
            .nth(1)
            .unwrap_or_else(|| panic!("{file} has no kind test command"));
        let filters: Vec<&str> = block
            .split_whitespace()
            .take_while(|w| *w == "\\" || w.starts_with("cases_"))
            .filter(|w| w.starts_with("cases_"))
            .collect();
        assert_eq!(filters.len(), 6, "{file}: {filters:?}");
        for filter in filters {
            let matching: Vec<&String> = names.iter().filter(|n| n.contains(filter)).collect();
            assert_eq!(
                matching.len(),
                1,
                "{file}: the filter {filter} selects {matching:?}, not exactly one case"
            );
        }
    }
}

#[test]
fn a_crash_pinned_to_a_request_parses_and_its_mistakes_are_named() {
    let text = r#"
name: pinned
summary: Pins.
clauses: [O3]
profile: core
fixture: all-ranks
steps:
  - controller: {action: crash, when: {request: {verb: delete, resource: podcliques, name: "job-*", nth: 2, at: after}}}
  - controller: {action: crash, when: {request: {verb: patch, resource: podcliquesets, subresource: status}}}
"#;
    let case = catalog::parse_case_with_fixtures(Path::new("pinned.yaml"), text, &fixtures())
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let pins: Vec<String> = case
        .steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Controller(c) => match &c.when {
                Some(Trigger::Request(pin)) => {
                    assert_eq!(c.action, ControllerAction::Crash);
                    pin.to_string()
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        pins,
        [
            "after the 2nd delete podcliques job-*",
            "before the 1st patch podcliquesets/status",
        ]
    );

    let bad = r#"name: bad-pins
summary: Misused pins.
clauses: [O3]
profile: core
fixture: all-ranks
steps:
  - controller: {action: crash, when: {request: {verb: remove, resource: pods}}}
  - controller: {action: crash, when: {request: {verb: delete, nth: 0}}}
  - controller: {action: crash, when: {request: {verb: delete, at: during}}}
  - controller: {action: resume, when: {request: {verb: delete}}}
  - controller: {action: crash, when: {request: {verb: delete, kind: Pod}}}
  - controller: {action: wait, when: {request: {verb: delete}}}
"#;
    let d = diagnostics("bad-pins", bad).join("\n");
    assert!(
        d.contains("7:") && d.contains("unknown verb `remove`"),
        "{d}"
    );
    assert!(d.contains("8:") && d.contains("`nth` counts from 1"), "{d}");
    assert!(
        d.contains("9:") && d.contains("unknown position `during`"),
        "{d}"
    );
    assert!(
        d.contains("10:") && d.contains("a `request:` trigger pins a crash or a pause"),
        "{d}"
    );
    assert!(d.contains("11:") && d.contains("kind"), "{d}");
    assert!(
        d.contains("12:") && d.contains("`wait` waits for the actions armed before it"),
        "{d}"
    );
}

#[test]
fn fault_steps_parse_and_their_mistakes_are_named() {
    let text = r#"
name: faults
summary: Faults.
clauses: [C4]
profile: core
fixture: all-ranks
steps:
  - fault: {hold: PodCliqueSet}
  - fault: {hold: PodClique, name: "job-0-*", reads: stale, release: coalesce, for: 10s, until: {deleted: {kind: PodCliqueSet, name: job}}, when: {request: {verb: patch, resource: podcliques, at: after}}}
  - fault: {relist: Pod, when: {condition: {kind: PodCliqueSet, name: job, type: Completed, status: "True"}}}
  - fault: release
"#;
    let case = catalog::parse_case_with_fixtures(Path::new("faults.yaml"), text, &fixtures())
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let faults: Vec<&catalog::FaultStep> = case
        .steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Fault(f) => f,
            other => panic!("{other:?}"),
        })
        .collect();
    match &faults[0].action {
        catalog::FaultStepAction::Hold(h) => {
            assert_eq!(h.kind, grove_conformance::vocab::Kind::PodCliqueSet);
            assert_eq!(h.release, catalog::HoldRelease::Deliver);
            assert!(!h.stale_reads && h.name.is_none() && h.until.is_none() && h.lasts.is_none());
        }
        other => panic!("{other:?}"),
    }
    assert!(faults[0].when.is_none());
    match &faults[1].action {
        catalog::FaultStepAction::Hold(h) => {
            assert_eq!(h.name.as_deref(), Some("job-0-*"));
            assert!(h.stale_reads);
            assert_eq!(h.release, catalog::HoldRelease::Coalesce);
            assert_eq!(h.lasts, Some(catalog::Duration::from_secs(10)));
            assert!(matches!(h.until, Some(Trigger::Deleted(_))));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(faults[1].when, Some(Trigger::Request(_))));
    assert_eq!(
        faults[2].action,
        catalog::FaultStepAction::Relist(grove_conformance::vocab::Kind::Pod)
    );
    assert!(matches!(faults[2].when, Some(Trigger::Condition { .. })));
    assert_eq!(faults[3].action, catalog::FaultStepAction::Release);

    let bad = r#"name: bad-faults
summary: Misused faults.
clauses: [C4]
profile: core
fixture: all-ranks
steps:
  - fault: {hold: PodClique, relist: Pod}
  - fault: {hold: PodClique, reads: old}
  - fault: {hold: PodClique, release: drop}
  - fault: {relist: Pod, name: x}
  - fault: {hold: PodClique, for: 10m}
  - fault: stop
  - fault: {hold: Event}
  - fault: {hold: PodClique, until: {request: {verb: delete, nth: 0}}}
"#;
    let d = diagnostics("bad-faults", bad).join("\n");
    assert!(
        d.contains("7:") && d.contains("exactly one of `hold: <kind>` or `relist: <kind>`"),
        "{d}"
    );
    assert!(d.contains("8:") && d.contains("unknown reads `old`"), "{d}");
    assert!(
        d.contains("9:") && d.contains("unknown release `drop`"),
        "{d}"
    );
    assert!(
        d.contains("10:") && d.contains("`name` belongs to a `hold`"),
        "{d}"
    );
    assert!(
        d.contains("11:") && d.contains("outlives what a real apiserver keeps"),
        "{d}"
    );
    assert!(
        d.contains("12:") && d.contains("unknown fault `stop`"),
        "{d}"
    );
    assert!(
        d.contains("13:") && d.contains("steps[6].fault.hold"),
        "{d}"
    );
    assert!(
        d.contains("14:") && d.contains("`nth` counts from 1"),
        "{d}"
    );
}

#[test]
fn refuse_steps_parse_and_their_mistakes_are_named() {
    let text = r#"
name: refusals
summary: Refusals.
clauses: [B5]
profile: core
fixture: all-ranks
steps:
  - refuse: {verb: create, kind: Pod}
  - refuse: {verb: update, kind: PodClique, subresource: status, for: 5s}
  - refuse: {verb: delete, kind: PodCliqueScalingGroup}
  - refuse: lift
"#;
    let case = catalog::parse_case_with_fixtures(Path::new("refusals.yaml"), text, &fixtures())
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let steps: Vec<&catalog::RefuseStep> = case
        .steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Refuse(r) => r,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        steps[0],
        &catalog::RefuseStep::Start(catalog::Refusal {
            verb: catalog::RefusedVerb::Create,
            kind: Kind::Pod,
            status: false,
            lasts: None,
        })
    );
    assert_eq!(
        steps[1],
        &catalog::RefuseStep::Start(catalog::Refusal {
            verb: catalog::RefusedVerb::Update,
            kind: Kind::PodClique,
            status: true,
            lasts: Some(catalog::Duration::from_secs(5)),
        })
    );
    assert!(matches!(
        steps[2],
        catalog::RefuseStep::Start(catalog::Refusal {
            verb: catalog::RefusedVerb::Delete,
            kind: Kind::PodCliqueScalingGroup,
            ..
        })
    ));
    assert_eq!(steps[3], &catalog::RefuseStep::Lift);

    let bad = r#"name: bad-refusals
summary: Misused refusals.
clauses: [B5]
profile: core
fixture: all-ranks
steps:
  - refuse: {verb: patch, kind: Pod}
  - refuse: {verb: create, kind: Event}
  - refuse: {verb: create, kind: Pod, subresource: status}
  - refuse: {verb: update, kind: Pod, subresource: scale}
  - refuse: {kind: Pod}
  - refuse: allow
  - refuse: {verb: delete, kind: Pod, when: {deleted: {kind: PodCliqueSet, name: job}}}
"#;
    let d = diagnostics("bad-refusals", bad).join("\n");
    assert!(
        d.contains("7:") && d.contains("unknown verb `patch`"),
        "{d}"
    );
    assert!(
        d.contains("8:") && d.contains("steps[1].refuse.kind"),
        "{d}"
    );
    assert!(
        d.contains("9:") && d.contains("only an `update` writes the status subresource"),
        "{d}"
    );
    assert!(
        d.contains("10:") && d.contains("unknown subresource `scale`"),
        "{d}"
    );
    assert!(d.contains("11:") && d.contains("verb"), "{d}");
    assert!(
        d.contains("12:") && d.contains("unknown refuse `allow`"),
        "{d}"
    );
    assert!(d.contains("13:") && d.contains("when"), "{d}");
}

#[test]
fn if_present_deletes_parse_and_their_mistakes_are_named() {
    let text = r#"
name: if-present
summary: Deletes of pods that may be gone.
clauses: [C4]
profile: core
fixture: all-ranks
steps:
  - delete: {pod: job-0-worker/0, if-present: true}
  - force-delete: {clique: job-0-worker, if-present: true}
  - delete: {pod: job-0-worker/1, if-present: false}
  - delete: {pod: job-0-worker/2}
"#;
    let case = catalog::parse_case_with_fixtures(Path::new("if-present.yaml"), text, &fixtures())
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let steps: Vec<(PodAction, bool)> = case
        .steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Pods(p) => (p.action, p.if_present),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        steps,
        [
            (PodAction::Delete, true),
            (PodAction::ForceDelete, true),
            (PodAction::Delete, false),
            (PodAction::Delete, false),
        ]
    );

    let bad = r#"name: bad-if-present
summary: Misused if-present.
clauses: [C4]
profile: core
fixture: all-ranks
steps:
  - delete: {kind: PodClique, name: job-0-worker, if-present: true}
  - delete: {pod: job-0-worker/0, if-present: maybe}
  - evict: {pod: job-0-worker/0, if-present: true}
"#;
    let d = diagnostics("bad-if-present", bad).join("\n");
    assert!(
        d.contains("7:") && d.contains("`if-present` applies to deleting pods only"),
        "{d}"
    );
    assert!(
        d.contains("8:") && d.contains("steps[1].delete.if-present"),
        "{d}"
    );
    assert!(
        d.lines()
            .any(|l| l.contains("9:") && l.contains("if-present")),
        "{d}"
    );
}
