//! `conformance.html` in a real browser: a run of 110 cases, one of them a failed 256-pod case
//! whose monitor found a violation, rendered and opened in headless Chromium. The DOM must
//! mark the failing case, draw its lanes and highlight the violation's evidence; the page must
//! load in under a second and weigh under 5 MB. A screenshot is kept in
//! `target/grove-conformance-artifacts/`. Without Chromium (Debian: `apt-get install
//! chromium`) the test says `skipped: <reason>`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use grove_conformance::catalog::Profile;
use grove_conformance::monitor::{Actor, Entry, EventType, render_entries};
use grove_conformance::report::html::{self, WHOLE_TIMELINE};
use grove_conformance::report::{
    CaseResult, ConformanceReport, Failure, Implementation, Outcome, RunResults, TimeSplit,
};
use grove_conformance::vocab::{Kind, Revision, Vocabulary};
use serde_json::json;

fn result(name: &str, area: &str, clauses: &[&str], outcome: Outcome) -> CaseResult {
    CaseResult {
        case: name.into(),
        area: area.into(),
        clauses: clauses.iter().map(|c| (*c).to_owned()).collect(),
        profile: Profile::Core,
        outcome,
        duration: Duration::from_millis(4200),
        time: TimeSplit {
            waiting: Duration::from_millis(2000),
            holding: Duration::from_millis(1000),
            queued: Duration::ZERO,
        },
        crash_points: Vec::new(),
        fault_points: Vec::new(),
        api: None,
    }
}

fn entry(kind: Kind, event: EventType, rv: u64, object: serde_json::Value, actor: Actor) -> Entry {
    let mut object = object;
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    object["metadata"]["uid"] = json!(format!(
        "{:08x}-uid",
        object["metadata"]["name"].as_str().map_or(0, str::len) as u64 * 7919 + rv
    ));
    Entry::new(kind, event, object, actor).expect("a well-formed entry")
}

/// The timeline of a 256-pod gang whose pod 17 failed and was replaced (an E3 violation):
/// every pod created, running, the failure, the replacement.
fn big_failure() -> Failure {
    let mut entries = Vec::new();
    let mut rv = 100;
    let mut next = || {
        rv += 1;
        rv
    };
    entries.push(entry(
        Kind::PodCliqueSet,
        EventType::Added,
        next(),
        json!({"metadata": {"name": "job"}}),
        Actor::Harness,
    ));
    entries.push(entry(
        Kind::PodClique,
        EventType::Added,
        next(),
        json!({"metadata": {"name": "job-0-worker"}}),
        Actor::Implementation,
    ));
    let pod = |i: usize, phase: &str| {
        json!({"metadata": {"name": format!("job-0-worker-{i:03}"), "labels": {
            "grove.io/podclique": "job-0-worker", "grove.io/podclique-pod-index": i.to_string()}},
            "status": {"phase": phase}})
    };
    for i in 0..256 {
        entries.push(entry(
            Kind::Pod,
            EventType::Added,
            next(),
            pod(i, "Pending"),
            Actor::Implementation,
        ));
    }
    for i in 0..256 {
        entries.push(entry(
            Kind::Pod,
            EventType::Modified,
            next(),
            pod(i, "Running"),
            Actor::Harness,
        ));
    }
    entries.push(entry(
        Kind::Pod,
        EventType::Deleted,
        next(),
        pod(17, "Running"),
        Actor::Harness,
    ));
    let replacement = json!({"metadata": {"name": "job-0-worker-999", "labels": {
        "grove.io/podclique": "job-0-worker", "grove.io/podclique-pod-index": "17"}},
        "status": {"phase": "Pending"}});
    entries.push(entry(
        Kind::Pod,
        EventType::Added,
        next(),
        replacement,
        Actor::Implementation,
    ));
    let vocab = Vocabulary::default();
    let all: Vec<(usize, &Entry)> = entries.iter().enumerate().collect();
    let evidence: Vec<(usize, &Entry)> = vec![all[all.len() - 2], all[all.len() - 1]];
    let slices = format!(
        "E3: replacement pod job-0-worker-999 created for index 17\n{}",
        render_entries(&evidence, &vocab)
    );
    Failure {
        message: "invariant violated: E3: replacement pod job-0-worker-999 created for index 17"
            .into(),
        diff: None,
        compared: None,
        timeline: Some(format!(
            "{slices}\n\n{WHOLE_TIMELINE}\n{}",
            render_entries(&all, &vocab)
        )),
        broken: vec!["E3".into()],
    }
}

fn run() -> RunResults {
    let mut cases = vec![result(
        "all-ranks-256-pods-vanished-pod",
        "all-ranks",
        &["E3", "C1"],
        Outcome::Fail(big_failure()),
    )];
    cases.push(result(
        "leader-completes-while-worker-fails",
        "leader-driven",
        &["E10"],
        Outcome::Fail(Failure {
            message: "step 9 (line 41): expectation not met within 20s".into(),
            compared: Some(Box::new(grove_conformance::report::Compared {
                expected: json!({"status": {"replicaRestartCounts": [0]}}),
                observed: json!({"status": {"replicaRestartCounts": [1]}}),
            })),
            ..Failure::default()
        }),
    ));
    cases.push(result(
        "skips-on-this-target",
        "podclique",
        &["E2"],
        Outcome::Skip {
            reason: "no terminal phase".into(),
        },
    ));
    for i in 0..107 {
        cases.push(result(
            &format!("passing-case-{i:03}"),
            "scale",
            &["B1", "E1"],
            Outcome::Pass,
        ));
    }
    RunResults {
        cases,
        duration: Duration::from_secs(93),
    }
}

fn chromium() -> Result<PathBuf, String> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in ["/usr/bin", "/usr/local/bin", "/snap/bin"] {
            let path = Path::new(dir).join(name);
            if path.exists() {
                return Ok(path);
            }
        }
    }
    Err("no Chromium found (Debian: `apt-get install chromium`)".into())
}

/// Chromium as this machine allows it: headless, no sandbox (root), nothing fetched.
fn browser(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn the_page_of_a_run_with_a_failed_256_pod_case_marks_and_draws_it() {
    let results = run();
    let report = ConformanceReport::new(
        Implementation {
            name: "wrong-operator".into(),
            version: "0.0.1".into(),
        },
        Revision::default(),
        "2026-12-01",
        &results,
    );
    let page = html::render(&report, &results);
    // Checks that need no browser.
    assert!(
        page.len() < 5 * 1024 * 1024,
        "the page weighs {} bytes",
        page.len()
    );
    assert!(page.contains("not conformant"));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page fetches nothing"
    );
    let chromium = match chromium() {
        Ok(c) => c,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conformance.html");
    std::fs::write(&file, &page).unwrap();
    let url = format!("file://{}", file.display());
    let dom = browser(&chromium, &dir.path().join("profile"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs");
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success() && dom_text.contains("</html>"),
        "chromium failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    // The failing case is marked and open, with its lanes and the violation.
    let section = dom_text
        .split("<section")
        .find(|s| s.contains("id=\"case-all-ranks-all-ranks-256-pods-vanished-pod\""))
        .expect("the failed case has a section");
    assert!(
        section.contains("data-outcome=\"fail\""),
        "not marked failed"
    );
    assert!(section.contains("<details open"), "a failed case is open");
    assert!(section.contains("class=\"lane\""), "no lanes drawn");
    assert!(
        section.contains("data-object=\"job-0-worker\""),
        "no lane for the clique"
    );
    assert!(
        section.contains("pods of job-0-worker (257)"),
        "pods not grouped under their clique"
    );
    assert!(
        section.contains("evidence"),
        "the violation's evidence is not highlighted"
    );
    assert!(
        section.contains("cited by a violation (2 of 257)"),
        "the cited pods are not kept in view"
    );
    assert!(
        section.contains("<details class=\"pods\"><summary>"),
        "a 257-pod clique is not folded"
    );
    assert!(
        section.contains("class=\"violation\""),
        "the violation is not shown"
    );
    assert!(
        dom_text.contains("class=\"ins\"") && dom_text.contains("class=\"del\""),
        "no diff"
    );
    // Loaded (parsed, laid out, scripts run) in under a second.
    let load_ms: u64 = dom_text
        .split("data-load-ms=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .expect("the page's load script ran");
    println!("page: {} bytes, loaded in {load_ms} ms", page.len());
    assert!(load_ms < 1000, "the page took {load_ms} ms to load");
    // A screenshot, kept for people to look at.
    let artifacts = common::root().join("target/grove-conformance-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("conformance-html-fixture.html"), &page).unwrap();
    let shot = artifacts.join("conformance-html-failed-case.png");
    let _ = std::fs::remove_file(&shot);
    let status = browser(&chromium, &dir.path().join("profile2"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1400,1600")
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(
        shot.metadata().is_ok_and(|m| m.len() > 10_000),
        "no screenshot: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    println!("screenshot: {}", shot.display());
}
