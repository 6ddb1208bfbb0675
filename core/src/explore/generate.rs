//! Generated scenarios: a valid shape (the V clauses hold) and pod actions the catalog has,
//! or an invalid shape with the rejection the model says is due. Every draw comes from one
//! [`Rng`], so a seed and a scenario index reproduce the scenario.

use std::collections::BTreeSet;

use super::rng::Rng;
use crate::catalog::{
    ControllerAction, ControllerStep, NodeLoss, PodAction, PodSelector, PodStep, StepKind,
};
use crate::model::{
    Clique, Completion, Group, Model, PodChange, PodEvent, PodState, RestartPolicy, Shape, World,
    admit,
};

/// One round of a scenario: steps of the case language the harness takes (pod actions, alone
/// or between a `controller: pause` and `resume` so that the implementation sees them in one
/// observation, or a `controller: crash`), after which the case expects what every state the
/// model allows agrees on.
#[derive(Debug, Clone, PartialEq)]
pub struct Round(pub Vec<StepKind>);

impl Round {
    /// One pod action, seen alone.
    pub fn alone(step: PodStep) -> Round {
        Round(vec![StepKind::Pods(step)])
    }

    /// Pod actions seen together: applied while the implementation is paused.
    pub fn together(steps: Vec<PodStep>) -> Round {
        let mut v = vec![controller(ControllerAction::Pause)];
        v.extend(steps.into_iter().map(StepKind::Pods));
        v.push(controller(ControllerAction::Resume));
        Round(v)
    }

    /// The implementation is killed and restarted while quiet (O3: nothing may change).
    pub fn crash() -> Round {
        Round(vec![controller(ControllerAction::Crash)])
    }

    /// Its pod actions, in order.
    pub fn pods(&self) -> impl Iterator<Item = &PodStep> {
        self.0.iter().filter_map(|s| match s {
            StepKind::Pods(p) => Some(p),
            _ => None,
        })
    }

    /// Whether its pod actions are applied while the implementation is paused.
    pub fn paused(&self) -> bool {
        self.0.iter().any(|s| {
            matches!(
                s,
                StepKind::Controller(ControllerStep {
                    action: ControllerAction::Pause,
                    when: None
                })
            )
        })
    }

    /// Whether it crashes the implementation.
    pub fn crashes(&self) -> bool {
        self.0.iter().any(|s| {
            matches!(
                s,
                StepKind::Controller(ControllerStep {
                    action: ControllerAction::Crash,
                    ..
                })
            )
        })
    }

    /// The same round without its pod action `k`; seen alone once one action is left.
    pub fn without_pod(&self, k: usize) -> Round {
        let mut pods: Vec<PodStep> = self.pods().cloned().collect();
        pods.remove(k);
        if self.paused() && pods.len() > 1 {
            Round::together(pods)
        } else {
            Round(pods.into_iter().map(StepKind::Pods).collect())
        }
    }

    /// Whether a fault is composed into it ([`super::faults`]).
    pub fn faulted(&self) -> bool {
        self.0.iter().any(super::faults::is_fault)
    }

    /// The same round without its faults: its pod actions, seen as they were.
    pub fn without_faults(&self) -> Round {
        if !self.faulted() {
            return self.clone();
        }
        if self.deleted().is_some() {
            return Round(
                self.0
                    .iter()
                    .filter(|s| matches!(s, StepKind::Delete(_)))
                    .cloned()
                    .collect(),
            );
        }
        let pods: Vec<PodStep> = self.pods().cloned().collect();
        if self.paused() {
            Round::together(pods)
        } else {
            Round(pods.into_iter().map(StepKind::Pods).collect())
        }
    }

    /// What the model sees of it: the pod changes it makes, all in one observation. Its
    /// faults change nothing the clauses require, so the model sees none of them.
    pub fn events(&self) -> Result<Vec<PodEvent>, Unjudged> {
        let mut out = Vec::new();
        for step in &self.0 {
            match step {
                StepKind::Pods(p) => out.push(pod_event(p)?),
                StepKind::Controller(ControllerStep { when: None, .. }) => {}
                // A user delete is applied by `predictions` ([`Round::deleted`]).
                StepKind::Delete(_) if self.deleted().is_some() => {}
                fault if super::faults::is_fault(fault) => {}
                other => return Err(Unjudged::Unmodelled(other.keyword())),
            }
        }
        Ok(out)
    }
}

/// Why a scenario's rounds cannot be judged by the spec model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unjudged {
    /// A step the model does not judge in a scenario.
    #[error("the spec model does not judge a `{0}` step in a scenario")]
    Unmodelled(&'static str),
    /// A pod step on a pod the model holds no active pod for.
    #[error("round {round}: {source}")]
    NoActivePod {
        round: usize,
        source: crate::model::NoActivePod,
    },
    /// A user delete whose outcome the model does not settle.
    #[error("round {round}: {source}")]
    NotDeletable {
        round: usize,
        source: crate::model::NotDeletable,
    },
    /// The allowed states disagree before a round, so its expectations cannot be built.
    #[error("round {0}: the states the model allows before it disagree")]
    Diverged(usize),
}

fn controller(action: ControllerAction) -> StepKind {
    StepKind::Controller(ControllerStep { action, when: None })
}

/// What the model sees of a pod step on one pod.
fn pod_event(p: &PodStep) -> Result<PodEvent, Unjudged> {
    let PodSelector::Pod { clique, index } = &p.selector else {
        return Err(Unjudged::Unmodelled("pod step on more than one pod"));
    };
    let change = match p.action {
        PodAction::Exit(c) => PodChange::Exit(c),
        PodAction::Evict
        | PodAction::Preempt
        | PodAction::Delete
        | PodAction::ForceDelete
        | PodAction::LoseNode(_) => PodChange::Removed,
        PodAction::Unready | PodAction::Ready => {
            return Err(Unjudged::Unmodelled(p.action.keyword()));
        }
    };
    Ok(PodEvent {
        clique: clique.clone(),
        index: *index,
        change,
    })
}

/// A pod step on pod `index` of PodClique `clique`.
pub fn on_pod(clique: &str, index: u32, action: PodAction, terminal_phase: bool) -> PodStep {
    PodStep {
        selector: PodSelector::Pod {
            clique: clique.to_owned(),
            index,
        },
        action,
        without_terminal_phase: !terminal_phase,
        // A node is lost while the pod is the only one on it (see `steps`).
        alone: matches!(action, PodAction::LoseNode(_)),
        if_present: false,
    }
}

/// What a scenario checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A valid shape and rounds on it.
    Rounds(Vec<Round>),
    /// An invalid shape: its creation must be rejected naming `field` (clause `clause`).
    Rejected {
        /// The V clause.
        clause: &'static str,
        /// The field.
        field: String,
    },
}

/// A generated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The seed it came from.
    pub seed: u64,
    /// Its index under the seed.
    pub index: u32,
    /// The job.
    pub shape: Shape,
    /// What is done and checked.
    pub body: Body,
    /// How it was made smaller from the generated one (empty when not shrunk).
    pub shrink_path: Vec<String>,
    /// Drawn with faults (`explore --faults`).
    pub faults: bool,
}

impl Scenario {
    /// The scenario's name: `explore-<seed>-<index>` (`explore-faults-…` with faults).
    pub fn name(&self) -> String {
        let kind = if self.faults {
            "explore-faults"
        } else {
            "explore"
        };
        if self.shrink_path.is_empty() {
            format!("{kind}-{}-{}", self.seed, self.index)
        } else {
            format!("{kind}-{}-{}-shrunk", self.seed, self.index)
        }
    }
}

const CLIQUE_NAMES: &[&str] = &[
    "leader", "worker", "ps", "eval", "coord", "rank", "head", "shard", "actor", "critic",
];
const GROUP_NAMES: &[&str] = &["trainer", "gang", "pool"];

/// The scenario `index` of `seed` at size `size` (1–5: larger shapes and longer sequences).
pub fn scenario(seed: u64, index: u32, size: u32) -> Scenario {
    let size = size.clamp(1, 5);
    let mut rng = Rng::for_scenario(seed, index);
    let shape = valid_shape(&mut rng, size);
    let body = if rng.chance(1, 8) {
        match invalid(&mut rng, &shape) {
            Some((bad, clause, field)) => {
                return Scenario {
                    seed,
                    index,
                    shape: bad,
                    body: Body::Rejected { clause, field },
                    shrink_path: Vec::new(),
                    faults: false,
                };
            }
            None => Body::Rounds(rounds(&mut rng, &shape, size)),
        }
    } else {
        Body::Rounds(rounds(&mut rng, &shape, size))
    };
    Scenario {
        seed,
        index,
        shape,
        body,
        shrink_path: Vec::new(),
        faults: false,
    }
}

/// Scenario `index` of `seed` at size `size` with faults: [`scenario`]'s, with faults composed
/// into its rounds ([`super::faults`]); a rejected shape stays as it is.
pub fn scenario_with_faults(seed: u64, index: u32, size: u32) -> Scenario {
    let mut s = scenario(seed, index, size);
    if let Body::Rounds(rounds) = &s.body {
        let mut rng = super::faults::fault_rng(seed, index);
        let faulted = super::faults::with_faults(&mut rng, &s.shape, rounds);
        s.body = Body::Rounds(super::deletes::with_deletes(&mut rng, &s.shape, &faulted));
    }
    s.faults = true;
    s
}

/// A shape the V clauses admit: 1–2 PCS replicas, standalone cliques and groups (1–3
/// replicas, 1–3 members), aware and regular mixed, 1–4 pods a clique, targetNames subsets
/// or absent, budgets 0–2.
pub fn valid_shape(rng: &mut Rng, size: u32) -> Shape {
    loop {
        let shape = draw_shape(rng, size);
        if admit(&shape).is_empty() && shape.total_pods() <= 6 + 6 * size {
            return shape;
        }
    }
}

fn draw_shape(rng: &mut Rng, size: u32) -> Shape {
    let replicas = if size >= 2 && rng.chance(1, 3) { 2 } else { 1 };
    let mut names: Vec<&str> = CLIQUE_NAMES.to_vec();
    let mut take_name = |rng: &mut Rng| {
        let k = rng.range(0, names.len() as u32 - 1) as usize;
        names.remove(k).to_owned()
    };
    let n_groups = rng.range(0, size.min(2));
    let n_standalone = rng.range(u32::from(n_groups == 0), size.min(2));
    let max_pods = (size + 1).min(4);
    let clique = |rng: &mut Rng, name: String| {
        let aware = rng.chance(3, 4);
        Clique {
            name,
            pods: rng.range(1, max_pods),
            completion: aware.then(|| Completion {
                target_names: None,
                max_restarts: rng.chance(1, 4).then_some(0),
            }),
            restart_policy: if rng.chance(1, 4) {
                Some(if aware {
                    RestartPolicy::Never
                } else {
                    RestartPolicy::Always
                })
            } else {
                None
            },
            autoscaling: false,
        }
    };
    let mut cliques = Vec::new();
    for _ in 0..n_standalone {
        let name = take_name(rng);
        cliques.push(clique(rng, name));
    }
    let mut groups = Vec::new();
    for g in 0..n_groups {
        let members: Vec<String> = (0..rng.range(1, (size + 1).min(3)))
            .map(|_| take_name(rng))
            .collect();
        for m in &members {
            cliques.push(clique(rng, m.clone()));
        }
        groups.push(Group {
            name: GROUP_NAMES[g as usize].to_owned(),
            replicas: rng.range(1, size.min(3)),
            members,
            completion: None,
            scale_config: false,
        });
    }
    let mut shape = Shape {
        name: "job".to_owned(),
        replicas,
        completion: None,
        cliques,
        groups,
    };
    // Policies: only where the scope is completion-aware (V4), targets among its aware
    // direct children (V2).
    for k in 0..shape.groups.len() {
        let g = &shape.groups[k];
        if !shape.group_aware(g) || rng.chance(1, 4) {
            continue;
        }
        let aware: Vec<String> = g
            .members
            .iter()
            .filter(|m| shape.clique(m).is_some_and(Clique::aware))
            .cloned()
            .collect();
        let completion = policy(rng, &aware);
        shape.groups[k].completion = Some(completion);
    }
    if shape.aware() && rng.chance(3, 4) {
        let aware: Vec<String> = shape
            .children()
            .into_iter()
            .filter(|c| shape.child_aware(*c))
            .map(|c| c.name().to_owned())
            .collect();
        shape.completion = Some(policy(rng, &aware));
    }
    shape
}

fn policy(rng: &mut Rng, aware: &[String]) -> Completion {
    let target_names = if rng.chance(1, 2) {
        let mut t: Vec<String> = aware.iter().filter(|_| rng.chance(1, 2)).cloned().collect();
        if t.is_empty() {
            t.push(rng.pick(aware).clone());
        }
        Some(t)
    } else {
        None
    };
    Completion {
        target_names,
        max_restarts: rng.chance(3, 4).then(|| rng.range(0, 2) as i32),
    }
}

/// One breach of one V clause on `shape`, with the single rejection the model says is due.
fn invalid(rng: &mut Rng, shape: &Shape) -> Option<(Shape, &'static str, String)> {
    for _ in 0..20 {
        let mut s = shape.clone();
        let k = rng.range(0, s.cliques.len() as u32 - 1) as usize;
        let aware = s.cliques[k].aware();
        match rng.range(0, 7) {
            0 if aware => {
                let own = s.cliques[k].name.clone();
                s.cliques[k].completion.as_mut()?.target_names = Some(vec![own]);
            }
            1 => {
                let bad = match rng.range(0, 2) {
                    0 => Vec::new(),
                    1 => vec![s.cliques[k].name.clone(), s.cliques[k].name.clone()],
                    _ => vec!["nobody".to_owned()],
                };
                if s.groups.is_empty() || rng.chance(1, 2) {
                    s.completion
                        .get_or_insert_with(Completion::default)
                        .target_names = Some(bad);
                } else {
                    let g = rng.range(0, s.groups.len() as u32 - 1) as usize;
                    s.groups[g]
                        .completion
                        .get_or_insert_with(Completion::default)
                        .target_names = Some(bad);
                }
            }
            2 if aware => {
                s.cliques[k].completion.as_mut()?.max_restarts = Some(rng.range(1, 2) as i32);
            }
            3 => {
                s.completion
                    .get_or_insert_with(Completion::default)
                    .max_restarts = Some(-1);
            }
            4 => {
                // V4: every clique regular, a policy kept on the PCS.
                for c in &mut s.cliques {
                    c.completion = None;
                    c.restart_policy = None;
                }
                for g in &mut s.groups {
                    g.completion = None;
                }
                s.completion = Some(Completion {
                    target_names: None,
                    max_restarts: Some(1),
                });
            }
            5 => {
                s.cliques[k].restart_policy = Some(if aware {
                    *rng.pick(&[RestartPolicy::Always, RestartPolicy::OnFailure])
                } else {
                    *rng.pick(&[RestartPolicy::Never, RestartPolicy::OnFailure])
                });
            }
            6 if aware => s.cliques[k].autoscaling = true,
            7 if !s.groups.is_empty() => {
                let g = rng.range(0, s.groups.len() as u32 - 1) as usize;
                s.groups[g].scale_config = true;
            }
            _ => continue,
        }
        let due = admit(&s);
        if let [one] = due.as_slice() {
            return Some((s.clone(), one.clause, one.field.clone()));
        }
    }
    None
}

/// Rounds on `shape`, each drawn from the pods the model says are active in every allowed
/// state, until the job is terminal, the states the spec allows diverge, or the size's
/// length is reached.
fn rounds(rng: &mut Rng, shape: &Shape, size: u32) -> Vec<Round> {
    let model = Model::new(shape.clone());
    let mut worlds = BTreeSet::from([model.initial()]);
    let mut out = Vec::new();
    // A node may be lost while every pod is still on the node it started on (the simulated
    // fleet gives each a node of its own, up to 8), so that losing it takes that pod alone.
    let mut pods_moved = false;
    let mut lost_node = false;
    // A regular pod whose container exited is restarted in place: nothing observable tells
    // when that is over, so no later action is aimed at it.
    let mut spent: BTreeSet<(String, u32)> = BTreeSet::new();
    let max = 1 + 2 * size;
    while out.len() < max as usize {
        let Some(state) = settled(&worlds) else {
            break;
        };
        if state.set.terminal() && !shape.aware() {
            break;
        }
        let active: Vec<(String, u32)> = active_pods(state)
            .into_iter()
            .filter(|p| !spent.contains(p))
            .collect();
        if active.is_empty() {
            break;
        }
        if rng.chance(1, 10) {
            out.push(Round::crash());
            continue;
        }
        let together = rng.chance(1, 4);
        let mut actions = Vec::new();
        let first = rng.pick(&active).clone();
        let scope = scope_of(&model, &first.0);
        let n = if together { rng.range(2, 3) } else { 1 };
        let mut chosen = vec![first];
        if together {
            let same: Vec<_> = active
                .iter()
                .filter(|p| scope_of(&model, &p.0) == scope && !chosen.contains(p))
                .cloned()
                .collect();
            let mut same = same;
            while chosen.len() < n as usize && !same.is_empty() {
                let k = rng.range(0, same.len() as u32 - 1) as usize;
                chosen.push(same.remove(k));
            }
        }
        let together = chosen.len() > 1;
        for (clique, index) in chosen {
            let may_lose_node = !together && !lost_node && !pods_moved;
            let step = draw_act(rng, shape, &clique, index, may_lose_node);
            lost_node |= matches!(step.action, PodAction::LoseNode(_));
            if !state.cliques[&clique].aware {
                match step.action {
                    PodAction::Exit(_) => {
                        spent.insert((clique.clone(), index));
                    }
                    _ => pods_moved = true,
                }
            }
            actions.push(step);
        }
        let round = if together {
            Round::together(actions)
        } else {
            Round::alone(actions.remove(0))
        };
        let events = round.events().expect("generated rounds are modelled");
        worlds = model
            .apply(&worlds, &events)
            .expect("actions address active pods");
        if worlds
            .iter()
            .any(|w| w.incarnations.values().any(|n| *n > 1))
        {
            pods_moved = true;
        }
        out.push(round);
        if state_of_all(&worlds).len() > 1 {
            // The allowed states differ: what follows would depend on which one holds.
            break;
        }
    }
    out
}

fn draw_act(
    rng: &mut Rng,
    shape: &Shape,
    clique: &str,
    index: u32,
    may_lose_node: bool,
) -> PodStep {
    loop {
        let terminal_phase = rng.chance(1, 2);
        let (action, terminal_phase) = match rng.range(0, 11) {
            0..=3 => (PodAction::Exit(0), true),
            4..=6 => (PodAction::Exit(rng.range(1, 3) as i32), true),
            7 => (PodAction::Evict, terminal_phase),
            8 => (PodAction::Preempt, terminal_phase),
            9 => (PodAction::Delete, terminal_phase),
            10 => (PodAction::ForceDelete, true),
            // One node loss a scenario, seen alone, while every pod is on a node of its own
            // and at least one other node is left for what gets created after it.
            _ if may_lose_node && (2..=7).contains(&shape.total_pods()) => {
                let mode = if rng.chance(1, 2) {
                    NodeLoss::FailFirst
                } else {
                    NodeLoss::Vanish
                };
                (PodAction::LoseNode(mode), true)
            }
            _ => continue,
        };
        return on_pod(clique, index, action, terminal_phase);
    }
}

/// The one state every allowed world agrees on, events aside (`None` when they differ).
pub fn settled(worlds: &BTreeSet<World>) -> Option<&World> {
    (state_of_all(worlds).len() == 1).then(|| worlds.iter().next().expect("not empty"))
}

fn state_of_all(worlds: &BTreeSet<World>) -> BTreeSet<World> {
    worlds
        .iter()
        .map(|w| World {
            events: Default::default(),
            ..w.clone()
        })
        .collect()
}

/// The active pods of existing PodCliques, by PodClique and index.
pub fn active_pods(w: &World) -> Vec<(String, u32)> {
    w.cliques
        .iter()
        .flat_map(|(name, c)| {
            c.pods
                .iter()
                .filter(|(_, p)| **p == PodState::Active)
                .map(move |(k, _)| (name.clone(), *k))
        })
        .collect()
}

/// The nearest parent scope of a PodClique: its PCS replica and, in a PCSG, that PCSG.
fn scope_of(model: &Model, clique: &str) -> (u32, Option<String>) {
    let (i, group) = model.slot_of(clique).expect("a PodClique of the shape");
    (i, group.map(|(g, _)| g))
}

/// The states the model allows after each round (the first: after creation).
pub fn predictions(shape: &Shape, rounds: &[Round]) -> Result<Vec<BTreeSet<World>>, Unjudged> {
    let model = Model::new(shape.clone());
    let mut worlds = BTreeSet::from([model.initial()]);
    let mut out = vec![worlds.clone()];
    for (k, round) in rounds.iter().enumerate() {
        let events = round.events()?;
        if !events.is_empty() {
            worlds = model
                .apply(&worlds, &events)
                .map_err(|source| Unjudged::NoActivePod { round: k, source })?;
        }
        if let Some(d) = round.deleted() {
            worlds = model
                .user_delete(&worlds, &d)
                .map_err(|source| Unjudged::NotDeletable { round: k, source })?;
        }
        out.push(worlds.clone());
    }
    Ok(out)
}
