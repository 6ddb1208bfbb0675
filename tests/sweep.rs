//! `sweep --pattern stale|unobserved` through the command line on the embedded cluster: a
//! case runs fault-free, then once per recorded write with the written object's watch events
//! held from the write's answer on; the reference operator passes every point it reaches, the
//! holds really kept events back, and a coalescing release delivered fewer than it held.

mod common;

use common::{harness, text};

/// The points of `sweep.md`: (fault, verdict, where it landed).
fn points(summary: &str) -> Vec<(String, String, String)> {
    summary
        .lines()
        .filter(|l| l.starts_with("| ") && l.chars().nth(2).is_some_and(|c| c.is_ascii_digit()))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            (
                cells[1].to_owned(),
                cells[2].to_owned(),
                cells.get(3).copied().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// `(held, delivered)` from a hold's record: `... 13 events held, 4 delivered at release ...`.
fn held_and_delivered(landed: &str) -> Option<(u32, u32)> {
    let (before, after) = landed.split_once(" held, ")?;
    let held = before.rsplit(' ').nth(1)?.parse().ok()?;
    let delivered = after.split(' ').next()?.parse().ok()?;
    Some((held, delivered))
}

fn sweep(pattern: &str) -> Vec<(String, String, String)> {
    let out = tempfile::tempdir().unwrap();
    let done = harness(&[
        "sweep",
        "--pattern",
        pattern,
        "--filter",
        "one-failure-restarts-gang",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    let summary = std::fs::read_to_string(out.path().join("sweep.md")).unwrap();
    assert!(
        summary.contains(&format!("| one-failure-restarts-gang | {pattern} |")),
        "{summary}"
    );
    let points = points(&summary);
    assert!(points.len() >= 5, "{summary}");
    for (fault, verdict, _) in &points {
        assert!(fault.starts_with("hold "), "{fault}");
        assert!(
            verdict == "pass" || verdict == "not reached",
            "{fault}: {verdict}"
        );
    }
    points
}

#[test]
fn a_stale_sweep_holds_each_written_object_and_the_operator_passes() {
    let points = sweep("stale");
    let held: Vec<(u32, u32)> = points
        .iter()
        .filter(|(_, verdict, _)| verdict == "pass")
        .filter_map(|(_, _, landed)| held_and_delivered(landed))
        .collect();
    assert!(
        points
            .iter()
            .all(|(fault, ..)| fault.contains("(stale reads)")),
        "{points:?}"
    );
    assert!(
        held.iter().any(|(h, _)| *h > 0),
        "no hold kept anything back: {points:?}"
    );
    // Delivering releases every held event.
    assert!(held.iter().all(|(h, d)| h == d), "{held:?}");
}

#[test]
fn an_unobserved_sweep_coalesces_what_it_held() {
    let points = sweep("unobserved");
    assert!(
        points
            .iter()
            .all(|(fault, ..)| fault.contains("(coalesced)")),
        "{points:?}"
    );
    let held: Vec<(u32, u32)> = points
        .iter()
        .filter_map(|(_, _, landed)| held_and_delivered(landed))
        .collect();
    assert!(
        held.iter().any(|(h, d)| d < h),
        "no state went unobserved: {held:?}"
    );
}

#[test]
fn an_unknown_pattern_is_refused_with_the_choices() {
    let done = harness(&["sweep", "--pattern", "lagging", "--filter", "x"]);
    assert_eq!(done.status.code(), Some(2), "{}", text(&done));
    assert!(
        text(&done).contains("expected intermediate, stale or unobserved"),
        "{}",
        text(&done)
    );
}

#[test]
fn a_sweep_of_nothing_it_can_sweep_is_no_pass() {
    // Every case of the `leader-driven` area judges PodCliqueSet outcomes, which the
    // `grove-pr-728` revision does not have; a sweep of none of them is not a pass, and no
    // cluster starts for it.
    let done = harness(&[
        "sweep",
        "--pattern",
        "stale",
        "--revision",
        "grove-pr-728",
        "--filter",
        "leader-completes-while-worker-fails",
    ]);
    assert_eq!(done.status.code(), Some(104), "{}", text(&done));
    let out = text(&done);
    assert!(
        out.contains(
            "leader-completes-while-worker-fails: not swept: not applicable in this revision"
        ),
        "{out}"
    );
    assert!(
        out.contains("none of the selected cases can be swept"),
        "{out}"
    );
}

#[test]
fn an_implementation_file_needs_the_implementation_command() {
    let done = harness(&[
        "sweep",
        "--filter",
        "x",
        "--implementation-webhooks",
        "webhooks.yaml",
    ]);
    assert_eq!(done.status.code(), Some(2), "{}", text(&done));
    assert!(
        text(&done).contains("--implementation-cmd"),
        "{}",
        text(&done)
    );
}
