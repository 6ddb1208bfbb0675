//! Faults composed into a scenario's rounds (`explore --faults`): a pause or a crash pinned
//! before a request the round makes (the request dropped) or after it (its answer lost), a
//! hold of the implementation's view with stale or current reads released by deliver,
//! coalesce or relist, and a refusal of a kind of write for a while. Each is one a real
//! cluster produces, and none changes what the clauses require: the model judges the round
//! as it would without it. Faults are drawn from a generator of their own, so scenario `i`
//! with faults is scenario `i` without them plus its faults.

use std::collections::BTreeSet;

use super::generate::{Round, predictions, settled};
use super::rng::Rng;
use crate::catalog::{
    ControllerAction, ControllerStep, Duration, FaultStep, FaultStepAction, HoldFault, HoldRelease,
    PodAction, PodSelector, Refusal, RefuseStep, RefusedVerb, RequestPin, StepKind, Trigger,
};
use crate::model::{Shape, World};
use crate::vocab::Kind;

/// What the fault generator's seed is derived with, apart from the scenario's.
const FAULT_STREAM: u64 = 0x6661_756C_7473_0001;

/// How long a hold stands.
const HOLD_FOR: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a refusal stands.
const REFUSE_FOR: std::time::Duration = std::time::Duration::from_secs(3);

/// The generator of the faults of scenario `index` of `seed`.
pub fn fault_rng(seed: u64, index: u32) -> Rng {
    Rng::for_scenario(seed ^ FAULT_STREAM, index)
}

/// `rounds` with faults composed into about half of the rounds that act on pods.
pub fn with_faults(rng: &mut Rng, shape: &Shape, rounds: &[Round]) -> Vec<Round> {
    let Ok(worlds) = predictions(shape, rounds) else {
        return rounds.to_vec();
    };
    rounds
        .iter()
        .enumerate()
        .map(|(k, round)| {
            if round.pods().next().is_none() || !rng.chance(1, 2) {
                return round.clone();
            }
            let Some(before) = settled(&worlds[k]) else {
                return round.clone();
            };
            // A round seen together is applied while the implementation is paused, and a pin
            // may fire just before that pause (on a request the previous round caused): its
            // crash would then restart the implementation unpaused, or its pause be lifted by
            // the round's resume. Such a round gets a hold or a refusal, never a pin.
            let pins = if round.paused() {
                Vec::new()
            } else {
                made_requests(shape, before, &worlds[k + 1], round)
            };
            compose(rng, shape, round, &pins)
        })
        .collect()
}

/// One fault around `round`: pinned to one of `pins` (requests every allowed state makes it
/// send), or a hold or a refusal, which need no request.
fn compose(rng: &mut Rng, shape: &Shape, round: &Round, pins: &[RequestPin]) -> Round {
    // A pinned fault, where the round makes a request to pin, twice as often as each other.
    let kinds = if pins.is_empty() { 2 } else { 6 };
    let (before, after): (Vec<StepKind>, Vec<StepKind>) = match rng.range(0, kinds - 1) {
        0 => (vec![hold(rng, shape)], Vec::new()),
        1 => (vec![refusal(rng, shape)], Vec::new()),
        pinned => {
            let mut pin = rng.pick(pins).clone();
            pin.after = rng.chance(1, 2);
            let crash = pinned >= 4;
            let action = if crash {
                ControllerAction::Crash
            } else {
                ControllerAction::Pause
            };
            let arm = StepKind::Controller(ControllerStep {
                action,
                when: Some(Trigger::Request(pin)),
            });
            let mut after = vec![controller(ControllerAction::Wait)];
            if !crash {
                after.push(controller(ControllerAction::Resume));
            }
            (vec![arm], after)
        }
    };
    let mut steps = before;
    steps.extend(round.0.iter().cloned());
    steps.extend(after);
    Round(steps)
}

fn controller(action: ControllerAction) -> StepKind {
    StepKind::Controller(ControllerStep { action, when: None })
}

/// A hold of one kind the job has, stale or current reads, released after [`HOLD_FOR`].
pub(super) fn hold(rng: &mut Rng, shape: &Shape) -> StepKind {
    let mut kinds = vec![Kind::Pod, Kind::PodClique, Kind::PodCliqueSet];
    if !shape.groups.is_empty() {
        kinds.push(Kind::PodCliqueScalingGroup);
    }
    let kind = *rng.pick(&kinds);
    StepKind::Fault(FaultStep {
        action: FaultStepAction::Hold(HoldFault {
            kind,
            name: None,
            stale_reads: rng.chance(1, 2),
            release: *rng.pick(&HoldRelease::ALL),
            until: None,
            lasts: Some(Duration(HOLD_FOR)),
        }),
        when: None,
    })
}

/// A refusal, for [`REFUSE_FOR`], of a write only the implementation makes (the harness's
/// pod steps and the kubelets' writes go through): pod creates, PodClique creates, or status
/// writes of a Grove kind.
fn refusal(rng: &mut Rng, shape: &Shape) -> StepKind {
    let mut choices = vec![
        (RefusedVerb::Create, Kind::Pod, false),
        (RefusedVerb::Create, Kind::PodClique, false),
        (RefusedVerb::Update, Kind::PodClique, true),
        (RefusedVerb::Update, Kind::PodCliqueSet, true),
    ];
    if !shape.groups.is_empty() {
        choices.push((RefusedVerb::Update, Kind::PodCliqueScalingGroup, true));
    }
    let (verb, kind, status) = *rng.pick(&choices);
    StepKind::Refuse(RefuseStep::Start(Refusal {
        verb,
        kind,
        status,
        lasts: Some(Duration(REFUSE_FOR)),
    }))
}

/// The requests every state the model allows after `round` makes the implementation send:
/// a status write of each object whose terminal condition changes, a create of each PodClique
/// it recreates, and a pod create for each regular pod it replaces.
fn made_requests(
    shape: &Shape,
    before: &World,
    after: &BTreeSet<World>,
    round: &Round,
) -> Vec<RequestPin> {
    // A create is sent to the collection, so its request carries no name: it is pinned by
    // its verb and resource alone.
    let pin =
        |verb: Option<&str>, resource: &str, subresource: Option<&str>, name: Option<&str>| {
            RequestPin {
                verb: verb.map(str::to_owned),
                resource: Some(resource.to_owned()),
                subresource: subresource.map(str::to_owned),
                name: name.map(str::to_owned),
                nth: 1,
                after: false,
            }
        };
    let mut pins = Vec::new();
    if after.iter().all(|w| w.set != before.set) {
        pins.push(pin(
            None,
            "podcliquesets",
            Some("status"),
            Some(&shape.name),
        ));
    }
    for (name, g) in &before.groups {
        if after
            .iter()
            .all(|w| w.groups.get(name).is_some_and(|a| a.cond != g.cond))
        {
            pins.push(pin(
                None,
                "podcliquescalinggroups",
                Some("status"),
                Some(name),
            ));
        }
    }
    for (name, c) in &before.cliques {
        let was = before.incarnations.get(name).copied().unwrap_or(0);
        if after
            .iter()
            .all(|w| w.incarnations.get(name).is_some_and(|n| *n > was))
        {
            // A PodClique made again gets its pods made again.
            pins.push(pin(Some("create"), "podcliques", None, None));
            pins.push(pin(Some("create"), "pods", None, None));
        } else if c.aware
            && after
                .iter()
                .all(|w| w.cliques.get(name).is_some_and(|a| a.cond != c.cond))
        {
            pins.push(pin(None, "podcliques", Some("status"), Some(name)));
        }
    }
    // B4: a regular pod that goes is replaced in place, so a pod create follows.
    for p in round.pods() {
        let PodSelector::Pod { clique, .. } = &p.selector else {
            continue;
        };
        let regular = before.cliques.get(clique).is_some_and(|c| !c.aware);
        let was = before.incarnations.get(clique).copied().unwrap_or(0);
        let kept = after
            .iter()
            .all(|w| w.cliques.contains_key(clique) && w.incarnations.get(clique) == Some(&was));
        if regular && kept && !matches!(p.action, PodAction::Exit(_)) {
            pins.push(pin(Some("create"), "pods", None, None));
        }
    }
    let mut unique: Vec<RequestPin> = Vec::new();
    for p in pins {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
}

/// Whether a step is a fault composed into a round (not one of its pod actions or the pause
/// that makes them seen together).
pub fn is_fault(step: &StepKind) -> bool {
    match step {
        StepKind::Fault(_) | StepKind::Refuse(_) => true,
        StepKind::Controller(ControllerStep { when, action }) => {
            when.is_some() || *action == ControllerAction::Wait
        }
        _ => false,
    }
}
