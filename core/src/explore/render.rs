//! A scenario built into an ordinary [`Case`] and fixture, and written by the catalog's one
//! writer: the case language is what runs, so a generated scenario, run by `explore`, and its
//! file, run by `run`, are the same case. After each round the case expects what every state
//! the model allows agrees on.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::expect::{Expect, clauses, exists};
pub use super::fixture::fixture;
use super::generate::{Body, Round, Scenario, Unjudged, predictions, settled};
use crate::catalog::{
    Apply, Case, ControllerAction, ControllerStep, Duration, Expectation, ObjectExpectation,
    ObjectRef, ObjectState, PodAction, PodCount, PodFilter, PodPhase, PodSelector, Pos, Profile,
    Reject, Remember, Request, Step, StepKind, Subject, UidSubject, write_case,
};
use crate::model::World;
use crate::vocab::{Kind, Revision};

/// How long each step may take to reach the predicted state.
const WITHIN: Duration = Duration(std::time::Duration::from_secs(30));
/// How long the last predicted state must then hold (nothing else happens: C4, R3, E6).
const HOLD: Duration = Duration(std::time::Duration::from_secs(1));

/// The case file of `scenario`; its fixture has the case's name.
pub fn case(scenario: &Scenario) -> Result<String, Unjudged> {
    case_named(scenario, &scenario.name())
}

/// The case file of `scenario` under another name (and fixture name).
pub fn case_named(scenario: &Scenario, name: &str) -> Result<String, Unjudged> {
    Ok(write_case(&build(scenario, name)?))
}

/// The case of `scenario` named `name` (its fixture too), as the case language holds it.
/// Only its `terms` and `features`, which the parser derives from what a case says, are left
/// empty: [`case_named`]'s text, read by the parser, has them.
pub fn build(scenario: &Scenario, name: &str) -> Result<Case, Unjudged> {
    let shape = &scenario.shape;
    let object = |kind, name: &str| ObjectRef {
        kind,
        name: name.to_owned(),
    };
    let mut steps: Vec<StepKind> = Vec::new();
    let clauses;
    let mut timeout = None;
    match &scenario.body {
        Body::Rejected { clause, field } => {
            clauses = vec![(*clause).to_owned()];
            steps.push(StepKind::Reject(Reject {
                request: Request::Apply(Apply {
                    fixture: name.to_owned(),
                    patch: None,
                }),
                code: None,
                field: field.clone(),
            }));
            steps.push(StepKind::Expect(Expectation {
                hold: Some(Duration::from_secs(1)),
                objects: vec![ObjectExpectation {
                    subject: Subject::Object(object(Kind::PodCliqueSet, &shape.name)),
                    state: ObjectState::Absent,
                }],
                ..Expectation::default()
            }));
        }
        Body::Rounds(rounds) => {
            let worlds = predictions(shape, rounds)?;
            let crashes = rounds.iter().any(Round::crashes);
            // A crash may lose or repeat an event the spec does not make crash-safe, and so may
            // a write whose answer a fault lost: restart events are then counted at least.
            let perturbed = crashes || rounds.iter().any(Round::faulted);
            let deletes = rounds.iter().any(|r| r.deleted().is_some());
            clauses = self::clauses(shape, &worlds, crashes, deletes)
                .into_iter()
                .map(str::to_owned)
                .collect();
            timeout = Some(Duration::from_secs(90 + 40 * rounds.len() as u64));
            steps.push(StepKind::Apply(Apply {
                fixture: name.to_owned(),
                patch: None,
            }));
            steps.push(StepKind::Expect(Expectation {
                within: Some(Duration::from_secs(60)),
                pods: vec![PodCount {
                    scope: PodSelector::PodCliqueSet(shape.name.clone()),
                    filter: PodFilter::Phase(PodPhase::Running),
                    count: shape.total_pods(),
                }],
                ..Expectation::default()
            }));
            let mut expect = Expect::new(shape, &worlds[0], perturbed);
            steps.push(expect.step(WITHIN, true, &[], &[]));
            for (k, round) in rounds.iter().enumerate() {
                let before = &worlds[k];
                let after = &worlds[k + 1];
                let state = settled(before).ok_or(Unjudged::Diverged(k))?;
                // A crash round remembers nothing: nothing may change (O3).
                let (mut recreated, unchanged) = if round.pods().next().is_some() {
                    remembered(k, before, after)
                } else {
                    (Vec::new(), Vec::new())
                };
                let mut remember: Vec<Remember> = recreated
                    .iter()
                    .chain(&unchanged)
                    .map(|(label, kind, name)| Remember {
                        label: label.clone(),
                        subject: UidSubject::Object(object(*kind, name)),
                    })
                    .collect();
                // B4: a regular pod that goes is replaced with the same index; its new UID is
                // what tells the replacement happened.
                for p in round.pods() {
                    let PodSelector::Pod { clique, index } = &p.selector else {
                        continue;
                    };
                    let replaced = !state.cliques[clique].aware
                        && !matches!(p.action, PodAction::Exit(_))
                        && after.iter().all(|w| {
                            w.incarnations[clique] == before_incarnation(before, clique)
                                && w.cliques.contains_key(clique)
                        });
                    if replaced {
                        let label = format!("s{k}-pod-{clique}-{index}");
                        remember.push(Remember {
                            label: label.clone(),
                            subject: UidSubject::Pod {
                                clique: clique.clone(),
                                index: *index,
                            },
                        });
                        recreated.push((label, Kind::Pod, String::new()));
                    }
                }
                steps.extend(remember.into_iter().map(StepKind::Remember));
                // What the pods show is checked while the pause that makes them seen together
                // still holds: before the round's first resume (a later one ends a pinned
                // pause, after which the implementation has acted).
                let mut seen = round
                    .paused()
                    .then(|| seen_while_paused(state, round))
                    .flatten();
                for step in &round.0 {
                    if let StepKind::Controller(ControllerStep {
                        action: ControllerAction::Resume,
                        when: None,
                    }) = step
                        && let Some(seen) = seen.take()
                    {
                        steps.push(seen);
                    }
                    steps.push(step.clone());
                }
                let labels = |v: &[(String, Kind, String)]| {
                    v.iter().map(|(l, _, _)| l.clone()).collect::<Vec<_>>()
                };
                expect = Expect::new(shape, after, perturbed);
                steps.push(expect.step(WITHIN, true, &labels(&recreated), &labels(&unchanged)));
            }
            steps.push(expect.step(HOLD, false, &[], &[]));
        }
    }
    Ok(Case {
        name: name.to_owned(),
        path: PathBuf::from(format!("{name}.yaml")),
        area: String::new(),
        summary: summary(scenario),
        clauses,
        profile: Profile::Core,
        fixtures: vec![name.to_owned()],
        revisions: Some(vec![Revision::Grep0285Review]),
        timeout,
        steps: steps
            .into_iter()
            .map(|kind| Step {
                pos: Pos::default(),
                kind,
            })
            .collect(),
        terms: BTreeSet::new(),
        features: BTreeSet::new(),
    })
}

/// The kubelet's side of every pod action of a paused round, seen while paused: what the
/// pods show before the implementation may act.
fn seen_while_paused(state: &World, round: &Round) -> Option<StepKind> {
    let mut pods = Vec::new();
    for p in round.pods() {
        let PodSelector::Pod { clique, .. } = &p.selector else {
            continue;
        };
        let aware = state.cliques[clique].aware;
        let (filter, count) = match p.action {
            PodAction::Exit(_) if !aware => continue,
            PodAction::Exit(0) => (PodFilter::Phase(PodPhase::Succeeded), 1),
            PodAction::Exit(_) => (PodFilter::Phase(PodPhase::Failed), 1),
            _ => (PodFilter::All, 0),
        };
        pods.push(PodCount {
            scope: p.selector.clone(),
            filter,
            count,
        });
    }
    (!pods.is_empty()).then(|| {
        StepKind::Expect(Expectation {
            within: Some(Duration::from_secs(20)),
            pods,
            ..Expectation::default()
        })
    })
}

fn summary(scenario: &Scenario) -> String {
    let mut s = match &scenario.body {
        Body::Rejected { clause, .. } => format!(
            "A generated PodCliqueSet that breaks {clause} is rejected and nothing is created"
        ),
        Body::Rounds(rounds) => format!(
            "A generated job ({} replica(s), {} clique(s), {} scaling group(s)) under {} step(s) reaches the states the spec model allows",
            scenario.shape.replicas,
            scenario.shape.cliques.len(),
            scenario.shape.groups.len(),
            rounds.len()
        ),
    };
    let _ = write!(
        s,
        " (explore --seed {} scenario {}",
        scenario.seed, scenario.index
    );
    if !scenario.shrink_path.is_empty() {
        let _ = write!(s, "; shrunk: {}", scenario.shrink_path.join(", "));
    }
    s.push_str(").");
    s
}

/// A remembered object: its label, kind and name.
type Labelled = (String, Kind, String);

/// Objects every allowed state recreates in a step (remembered before it, expected recreated
/// after), and the PCSGs every one keeps (expected unchanged).
fn remembered(
    step: usize,
    before: &BTreeSet<World>,
    after: &BTreeSet<World>,
) -> (Vec<Labelled>, Vec<Labelled>) {
    let Some(b) = settled(before) else {
        return (Vec::new(), Vec::new());
    };
    let mut recreated = Vec::new();
    let mut unchanged = Vec::new();
    let objects = b
        .cliques
        .keys()
        .map(|n| (Kind::PodClique, n))
        .chain(b.groups.keys().map(|n| (Kind::PodCliqueScalingGroup, n)));
    for (kind, name) in objects {
        if !after.iter().all(|w| exists(w, kind, name)) {
            continue;
        }
        let was = b.incarnations[name];
        if after.iter().all(|w| w.incarnations[name] > was) {
            recreated.push((label(step, name), kind, name.clone()));
        } else if kind == Kind::PodCliqueScalingGroup
            && after.iter().all(|w| w.incarnations[name] == was)
        {
            unchanged.push((label(step, name), kind, name.clone()));
        }
    }
    (recreated, unchanged)
}

fn before_incarnation(before: &BTreeSet<World>, name: &str) -> u32 {
    before
        .iter()
        .next()
        .and_then(|w| w.incarnations.get(name).copied())
        .unwrap_or(0)
}

/// A label unique within a case: the step's number and the object's name.
fn label(step: usize, name: &str) -> String {
    format!("s{step}-{name}")
}
