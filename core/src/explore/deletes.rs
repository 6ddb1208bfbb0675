//! User deletes composed into a scenario (`explore --faults`): a PodClique or a
//! PodCliqueScalingGroup left inside a terminal scope, or the PodCliqueSet once it is
//! terminal, deleted between rounds, at times while a watch of the implementation is held.
//! The model settles what follows ([`crate::model::UserDelete`]): nothing is created again
//! inside a terminal scope (C4), and what a deleted object owns goes with it (B3).

use super::faults::hold;
use super::generate::{Round, predictions, settled};
use super::rng::Rng;
use crate::catalog::{Addressee, Delete, ObjectRef, StepKind};
use crate::model::{Model, Shape, UserDelete};
use crate::vocab::Kind;

impl Round {
    /// A user deleting `d` (gracefully, as `kubectl delete` does).
    pub fn user_delete(shape: &Shape, d: &UserDelete) -> Round {
        let (kind, name) = match d {
            UserDelete::Clique(n) => (Kind::PodClique, n.clone()),
            UserDelete::Group(n) => (Kind::PodCliqueScalingGroup, n.clone()),
            UserDelete::Set => (Kind::PodCliqueSet, shape.name.clone()),
        };
        Round(vec![StepKind::Delete(Delete {
            target: Addressee::Object(ObjectRef { kind, name }),
            force: false,
        })])
    }

    /// What the round deletes, when it is a user delete.
    pub fn deleted(&self) -> Option<UserDelete> {
        self.0.iter().find_map(|s| match s {
            StepKind::Delete(Delete {
                target: Addressee::Object(o),
                ..
            }) => Some(match o.kind {
                Kind::PodClique => UserDelete::Clique(o.name.clone()),
                Kind::PodCliqueScalingGroup => UserDelete::Group(o.name.clone()),
                _ => UserDelete::Set,
            }),
            _ => None,
        })
    }
}

/// `rounds` with user deletes inserted: after a round whose state
/// every allowed world agrees on, one time in three, one of the deletes the model settles
/// there, half of them while a watch of the implementation is held. The PodCliqueSet is only
/// deleted last. An insertion that would leave a later round unjudged is not made.
pub fn with_deletes(rng: &mut Rng, shape: &Shape, rounds: &[Round]) -> Vec<Round> {
    let model = Model::new(shape.clone());
    let mut out: Vec<Round> = Vec::new();
    for k in 1..=rounds.len() {
        out.push(rounds[k - 1].clone());
        if !rng.chance(1, 3) {
            continue;
        }
        let Ok(worlds) = predictions(shape, &out) else {
            continue;
        };
        let Some(state) = settled(worlds.last().expect("the initial state")) else {
            continue;
        };
        let last = k == rounds.len();
        let options: Vec<UserDelete> = model
            .deletable(state)
            .into_iter()
            .filter(|d| last || *d != UserDelete::Set)
            .collect();
        if options.is_empty() {
            continue;
        }
        let d = rng.pick(&options).clone();
        let mut round = Round::user_delete(shape, &d);
        if rng.chance(1, 2) {
            round.0.insert(0, hold(rng, shape));
        }
        let mut candidate = out.clone();
        candidate.push(round.clone());
        candidate.extend(rounds[k..].iter().cloned());
        if judged(shape, &candidate) {
            out.push(round);
        }
    }
    out
}

/// Whether every round of `rounds` starts from a state every allowed world agrees on.
fn judged(shape: &Shape, rounds: &[Round]) -> bool {
    predictions(shape, rounds).is_ok_and(|w| w[..w.len() - 1].iter().all(|w| settled(w).is_some()))
}
