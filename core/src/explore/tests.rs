//! The generators, the renderer and the shrinker on many seeds: what they make is valid,
//! reproducible and an ordinary case.

use std::collections::BTreeSet;
use std::path::Path;

use super::generate::{Body, Round, predictions, scenario, scenario_with_faults};
use super::{render, shrink};
use crate::catalog::{
    ControllerStep, PodAction, Pos, StepKind, Trigger, parse_case_with_fixtures, parse_fixture,
    write_case,
};
use crate::model::admit;

#[test]
fn a_seed_reproduces_its_scenarios() {
    for i in 0..50 {
        assert_eq!(scenario(7, i, 2), scenario(7, i, 2));
    }
    let distinct: BTreeSet<String> = (0..50)
        .map(|i| render::case(&scenario(7, i, 2)).unwrap())
        .collect();
    assert!(distinct.len() > 40, "{}", distinct.len());
}

#[test]
fn generated_shapes_are_admitted_or_due_exactly_their_rejection() {
    let (mut valid, mut invalid) = (0, 0);
    for size in 1..=5 {
        for i in 0..200 {
            let s = scenario(size as u64 * 1000, i, size);
            let due = admit(&s.shape);
            match &s.body {
                Body::Rounds(steps) => {
                    valid += 1;
                    assert!(due.is_empty(), "{s:?}: {due:?}");
                    let pods = s.shape.total_pods();
                    assert!(pods <= 6 + 6 * size, "{pods} pods at size {size}");
                    for c in &s.shape.cliques {
                        assert!((1..=4).contains(&c.pods));
                    }
                    for g in &s.shape.groups {
                        assert!((1..=3).contains(&g.replicas));
                        assert!((1..=3).contains(&g.members.len()));
                    }
                    assert!((1..=2).contains(&s.shape.replicas));
                    assert!(predictions(&s.shape, steps).is_ok());
                }
                Body::Rejected { clause, field } => {
                    invalid += 1;
                    assert_eq!(due.len(), 1, "{s:?}");
                    assert_eq!((due[0].clause, &due[0].field), (*clause, field));
                }
            }
        }
    }
    assert!(
        invalid > 50 && valid > 700,
        "{valid} valid, {invalid} invalid"
    );
}

#[test]
fn every_step_kind_is_generated() {
    let mut seen = BTreeSet::new();
    for i in 0..400 {
        if let Body::Rounds(rounds) = scenario(3, i, 3).body {
            for r in rounds {
                if r.crashes() {
                    seen.insert("crash".to_owned());
                }
                if r.paused() {
                    seen.insert("together".to_owned());
                }
                for p in r.pods() {
                    seen.insert(
                        format!("{:?}", p.action)
                            .split('(')
                            .next()
                            .unwrap()
                            .to_owned(),
                    );
                    if p.action == PodAction::Exit(0) {
                        seen.insert("Exit(0)".to_owned());
                    }
                }
            }
        }
    }
    for k in [
        "crash",
        "together",
        "Exit(0)",
        "Evict",
        "Preempt",
        "Delete",
        "ForceDelete",
        "LoseNode",
    ] {
        assert!(seen.contains(k), "{k} never drawn: {seen:?}");
    }
}

#[test]
fn rendered_scenarios_are_ordinary_cases_with_contract_keeping_fixtures() {
    for size in [1, 2, 4] {
        for i in 0..150 {
            let s = scenario(11, i, size);
            let name = s.name();
            let fixture_text = render::fixture(&s);
            let fixture = parse_fixture(Path::new(&format!("fixtures/{name}.yaml")), &fixture_text)
                .unwrap_or_else(|d| panic!("{fixture_text}\n{d:?}"));
            assert!(fixture.contract.is_empty(), "{:?}", fixture.contract);
            let text = render::case(&s).unwrap();
            let known = BTreeSet::from([name.clone()]);
            let case = parse_case_with_fixtures(
                Path::new(&format!("cases/explore/{name}.yaml")),
                &text,
                &known,
            )
            .unwrap_or_else(|d| panic!("{text}\n{d:?}"));
            assert_eq!(case.name, name);
        }
    }
}

#[test]
fn shrink_candidates_are_smaller_valid_scenarios() {
    for i in 0..60 {
        let s = scenario(5, i, 3);
        for c in shrink::candidates(&s) {
            assert_eq!(c.shrink_path.len(), 1);
            assert!(c.name().ends_with("-shrunk"));
            render::case(&c).unwrap();
            match (&c.body, &s.body) {
                (Body::Rounds(a), Body::Rounds(b)) => {
                    assert!(admit(&c.shape).is_empty());
                    let smaller_shape =
                        c.shape.total_pods() < s.shape.total_pods() || c.shape != s.shape;
                    assert!(a.len() < b.len() || a != b || smaller_shape);
                }
                (Body::Rejected { clause: a, .. }, Body::Rejected { clause: b, .. }) => {
                    assert_eq!(a, b)
                }
                _ => panic!("the body changed kind"),
            }
        }
    }
}

/// A scenario's case, built as a value, is exactly what its file says: the generator and a
/// hand-written case meet in the case language, with nothing only one of them can say.
#[test]
fn a_built_scenario_reads_back_as_the_case_it_was_built_as() {
    let mut rounds = 0;
    for size in [1, 3, 5] {
        for i in 0..80 {
            let s = scenario(13, i, size);
            let name = s.name();
            let built = render::build(&s, &name).unwrap();
            let text = write_case(&built);
            let known = BTreeSet::from([name.clone()]);
            let mut again =
                parse_case_with_fixtures(Path::new(&format!("{name}.yaml")), &text, &known)
                    .unwrap_or_else(|d| panic!("{text}\n{d:?}"));
            for step in &mut again.steps {
                step.pos = Pos::default();
            }
            if matches!(s.body, Body::Rounds(_)) {
                assert!(!again.terms.is_empty(), "{text}");
            }
            again.terms.clear();
            again.features.clear();
            assert_eq!(again, built, "{text}");
            rounds += usize::from(matches!(s.body, Body::Rounds(_)));
        }
    }
    assert!(rounds > 100, "{rounds}");
}

/// With faults a scenario is the same scenario plus its faults: the shape and every round's
/// pod actions are those drawn without them, and the model predicts the same states.
#[test]
fn faults_are_added_to_the_same_scenario_and_change_no_prediction() {
    let mut faulted = 0;
    for i in 0..200 {
        let plain = scenario(21, i, 3);
        let with = scenario_with_faults(21, i, 3);
        assert_eq!(with.shape, plain.shape);
        assert!(
            with.name().starts_with("explore-faults-"),
            "{}",
            with.name()
        );
        match (&with.body, &plain.body) {
            (Body::Rounds(a), Body::Rounds(b)) => {
                // The user deletes aside (`user_deletes_…` below).
                let a: Vec<Round> = a
                    .iter()
                    .filter(|r| r.deleted().is_none())
                    .cloned()
                    .collect();
                let a = &a;
                assert_eq!(a.len(), b.len());
                for (x, y) in a.iter().zip(b) {
                    assert_eq!(&x.without_faults(), y);
                    faulted += usize::from(x.faulted());
                }
                assert_eq!(
                    predictions(&with.shape, a).unwrap(),
                    predictions(&plain.shape, b).unwrap()
                );
            }
            (a, b) => assert_eq!(a, b),
        }
    }
    assert!(faulted > 100, "{faulted} faulted rounds");
}

/// Every kind of fault is drawn, each a step the case language has, and a faulted scenario's
/// case reads back as it was built; its faults can be shrunk away.
#[test]
fn every_kind_of_fault_is_drawn_and_written_as_a_case() {
    let mut seen = BTreeSet::new();
    for i in 0..300 {
        let s = scenario_with_faults(23, i, 3);
        let Body::Rounds(rounds) = &s.body else {
            continue;
        };
        for step in rounds.iter().flat_map(|r| &r.0) {
            let what = match step {
                StepKind::Controller(ControllerStep {
                    action,
                    when: Some(Trigger::Request(pin)),
                }) => format!("{action:?} {}", if pin.after { "after" } else { "before" }),
                StepKind::Fault(_) => "hold".into(),
                StepKind::Refuse(_) => "refuse".into(),
                _ => continue,
            };
            seen.insert(what);
        }
        let name = s.name();
        let built = render::build(&s, &name).unwrap();
        let text = write_case(&built);
        let known = BTreeSet::from([name.clone()]);
        let mut again = parse_case_with_fixtures(Path::new(&format!("{name}.yaml")), &text, &known)
            .unwrap_or_else(|d| panic!("{text}\n{d:?}"));
        for step in &mut again.steps {
            step.pos = Pos::default();
        }
        again.terms.clear();
        again.features.clear();
        assert_eq!(again, built, "{text}");
        if rounds.iter().any(|r| r.faulted()) {
            assert!(
                shrink::candidates(&s)
                    .iter()
                    .any(|c| c.shrink_path[0].starts_with("fault of step")),
                "{name}: no candidate drops a fault"
            );
        }
    }
    let want = [
        "Crash after",
        "Crash before",
        "Pause after",
        "Pause before",
        "hold",
        "refuse",
    ];
    for w in want {
        assert!(seen.contains(w), "no `{w}` drawn: {seen:?}");
    }
}

/// A round applied while the implementation is paused never gets a pinned pause or crash: a
/// pin firing just before the round's pause would crash it into an unpaused restart.
#[test]
fn a_round_seen_together_gets_no_pinned_fault() {
    let mut together = 0;
    for i in 0..300 {
        let Body::Rounds(rounds) = scenario_with_faults(29, i, 3).body else {
            continue;
        };
        for r in rounds.iter().filter(|r| r.paused()) {
            together += 1;
            assert!(
                !r.0.iter().any(|s| matches!(
                    s,
                    StepKind::Controller(ControllerStep { when: Some(_), .. })
                )),
                "{r:?}"
            );
        }
    }
    assert!(together > 20, "{together}");
}

/// With faults, a PodClique or a PCSG left inside a terminal scope and the terminal
/// PodCliqueSet are deleted now and then: each is absent in every state the model allows
/// after it, and stays so (C4) unless a gang restart makes a new attempt; a delete can be
/// shrunk away.
#[test]
fn user_deletes_are_drawn_of_every_kind_and_their_objects_stay_gone() {
    use crate::model::UserDelete;
    let mut seen = BTreeSet::new();
    for i in 0..400 {
        let s = scenario_with_faults(31, i, 3);
        let Body::Rounds(rounds) = &s.body else {
            continue;
        };
        let worlds = predictions(&s.shape, rounds).unwrap();
        for (k, r) in rounds.iter().enumerate() {
            let Some(d) = r.deleted() else { continue };
            // Only a later gang restart of the PCS replica that held a PodClique makes it
            // again (a new attempt: R2).
            let was = |n: &String| worlds[k].iter().next().unwrap().incarnations[n];
            let gone = |w: &crate::model::World| match &d {
                UserDelete::Clique(n) => !w.cliques.contains_key(n) || w.incarnations[n] > was(n),
                UserDelete::Group(n) => !w.groups.contains_key(n),
                UserDelete::Set => w.set_deleted && w.cliques.is_empty(),
            };
            for later in &worlds[k + 1..] {
                assert!(
                    later.iter().all(gone),
                    "{}: {d:?} back after round {k}",
                    s.name()
                );
            }
            seen.insert(match d {
                UserDelete::Clique(_) => "clique",
                UserDelete::Group(_) => "group",
                UserDelete::Set => "set",
            });
            assert!(
                shrink::candidates(&s)
                    .iter()
                    .any(|c| c.shrink_path[0] == format!("step {k} dropped")),
                "{}: the delete of round {k} cannot be dropped",
                s.name()
            );
        }
        render::build(&s, &s.name()).unwrap();
    }
    assert_eq!(seen, BTreeSet::from(["clique", "group", "set"]));
}
