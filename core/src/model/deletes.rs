//! A user deleting a PodClique, a PodCliqueScalingGroup or the PodCliqueSet, where the
//! clauses settle what follows. Inside a terminal scope nothing is created again (C4), so a
//! PodClique or PCSG a user deletes there stays gone with everything below it (B3); a deleted
//! PodCliqueSet takes everything below it (B3). A delete inside a scope that still runs is not
//! modelled: the clauses do not say whether the implementation recreates the child or fails
//! the scope, so no outcome could be expected of it.

use std::collections::BTreeSet;

use super::shape::Child;
use super::world::{Model, PodState, World};

/// What a user deletes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UserDelete {
    /// A PodClique, by name.
    Clique(String),
    /// A PodCliqueScalingGroup, by name.
    Group(String),
    /// The PodCliqueSet.
    Set,
}

/// A delete whose outcome the clauses do not settle in some allowed state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a user delete of {what} is not modelled here: {why}")]
pub struct NotDeletable {
    /// What was to be deleted.
    pub what: String,
    /// Why its outcome is not settled.
    pub why: &'static str,
}

impl Model {
    /// The deletes in `w` whose outcome the clauses settle: each PodClique and PCSG that is
    /// left inside a terminal scope (and has no active pod), and the PodCliqueSet once it is
    /// terminal (before that, its children may still write conditions and events as their
    /// pods go, which the clauses do not bound).
    pub fn deletable(&self, w: &World) -> Vec<UserDelete> {
        let mut out: Vec<UserDelete> = w
            .cliques
            .keys()
            .filter(|n| self.why_not(w, &UserDelete::Clique((*n).clone())).is_none())
            .map(|n| UserDelete::Clique(n.clone()))
            .collect();
        out.extend(
            w.groups
                .keys()
                .filter(|n| self.why_not(w, &UserDelete::Group((*n).clone())).is_none())
                .map(|n| UserDelete::Group(n.clone())),
        );
        if self.why_not(w, &UserDelete::Set).is_none() {
            out.push(UserDelete::Set);
        }
        out
    }

    /// The states allowed after a user deletes `d` in every world of `before`; `Err` when
    /// some world does not settle its outcome.
    pub fn user_delete(
        &self,
        before: &BTreeSet<World>,
        d: &UserDelete,
    ) -> Result<BTreeSet<World>, NotDeletable> {
        let mut out = BTreeSet::new();
        for w in before {
            if let Some(why) = self.why_not(w, d) {
                return Err(NotDeletable {
                    what: self.describe(d),
                    why,
                });
            }
            let mut w = w.clone();
            match d {
                UserDelete::Clique(name) => {
                    w.cliques.remove(name);
                }
                UserDelete::Group(name) => {
                    self.remove_group(&mut w, name);
                }
                UserDelete::Set => {
                    w.cliques.clear();
                    w.groups.clear();
                    w.uncertain.clear();
                    w.set_deleted = true;
                }
            }
            out.insert(w);
        }
        Ok(out)
    }

    fn describe(&self, d: &UserDelete) -> String {
        match d {
            UserDelete::Clique(n) => format!("PodClique {n}"),
            UserDelete::Group(n) => format!("PodCliqueScalingGroup {n}"),
            UserDelete::Set => format!("PodCliqueSet {}", self.shape.name),
        }
    }

    /// Why `d`'s outcome in `w` is not settled (`None`: it is).
    fn why_not(&self, w: &World, d: &UserDelete) -> Option<&'static str> {
        if w.set_deleted {
            return Some("the PodCliqueSet is deleted");
        }
        match d {
            UserDelete::Set => (!w.set.terminal()).then_some("the PodCliqueSet is not terminal"),
            UserDelete::Clique(name) => {
                let Some(c) = w.cliques.get(name) else {
                    return Some("it does not exist");
                };
                if w.uncertain.contains(name) {
                    return Some("whether it exists is not settled");
                }
                if c.pods.values().any(|p| *p == PodState::Active) {
                    return Some("it has active pods");
                }
                let Some((i, group)) = self.slot_of(name) else {
                    return Some("it is not a PodClique of the shape");
                };
                let mut terminal = w.set.terminal() || w.set_replicas[i as usize].cond.terminal();
                if let Some((g, j)) = group {
                    let gname = self.shape.group_name(i, &g);
                    terminal |= w
                        .groups
                        .get(&gname)
                        .is_some_and(|g| g.replicas[j as usize].cond.terminal());
                }
                (!terminal).then_some("its scope is not terminal")
            }
            UserDelete::Group(name) => {
                if !w.groups.contains_key(name) {
                    return Some("it does not exist");
                }
                let Some(i) = (0..self.shape.replicas)
                    .find(|i| self.group_names(*i).iter().any(|n| n == name))
                else {
                    return Some("it is not a PodCliqueScalingGroup of the shape");
                };
                let terminal = w.set.terminal() || w.set_replicas[i as usize].cond.terminal();
                (!terminal).then_some("its PodCliqueSet replica is not terminal")
            }
        }
    }

    fn group_names(&self, i: u32) -> Vec<String> {
        self.shape
            .groups
            .iter()
            .map(|g| self.shape.group_name(i, &g.name))
            .collect()
    }

    /// B3: a PCSG goes with every PodClique of its replicas.
    fn remove_group(&self, w: &mut World, name: &str) {
        let shape = &self.shape;
        for i in 0..shape.replicas {
            for c in shape.children() {
                let Child::Group(g) = c else { continue };
                if shape.group_name(i, &g.name) != name {
                    continue;
                }
                for j in 0..g.replicas {
                    for m in &g.members {
                        let member = shape.member_name(i, &g.name, j, m);
                        w.cliques.remove(&member);
                        w.uncertain.remove(&member);
                    }
                }
            }
        }
        w.groups.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::tests::aware;
    use crate::model::{Completion, Cond, Group, PodChange, PodEvent, Shape};

    /// A standalone `leader` (1 pod) and a group `trainer` of 2 replicas of `worker` (1 pod),
    /// the PCS completing when every aware child has.
    fn shape() -> Shape {
        Shape {
            name: "job".into(),
            replicas: 1,
            completion: Some(Completion::default()),
            cliques: vec![aware("leader", 1), aware("worker", 1)],
            groups: vec![Group {
                name: "trainer".into(),
                replicas: 2,
                members: vec!["worker".into()],
                completion: Some(Completion::default()),
                scale_config: false,
            }],
        }
    }

    fn succeed(model: &Model, worlds: BTreeSet<World>, clique: &str) -> BTreeSet<World> {
        let event = PodEvent {
            clique: clique.into(),
            index: 0,
            change: PodChange::Exit(0),
        };
        model.apply(&worlds, &[event]).unwrap()
    }

    #[test]
    fn nothing_is_deletable_while_every_scope_runs() {
        let model = Model::new(shape());
        let w = model.initial();
        assert_eq!(model.deletable(&w), Vec::new());
        let err = model
            .user_delete(
                &BTreeSet::from([w]),
                &UserDelete::Clique("job-0-leader".into()),
            )
            .unwrap_err();
        assert_eq!(err.why, "it has active pods", "{err}");
    }

    #[test]
    fn a_completed_group_replica_s_clique_is_deletable_and_stays_gone() {
        let model = Model::new(shape());
        let worlds = succeed(
            &model,
            BTreeSet::from([model.initial()]),
            "job-0-trainer-0-worker",
        );
        let [w] = worlds.iter().collect::<Vec<_>>()[..] else {
            panic!("one state: {worlds:?}");
        };
        assert_eq!(
            model.deletable(w),
            vec![UserDelete::Clique("job-0-trainer-0-worker".into())],
            "only the clique of the completed replica: the group and the set still run"
        );
        let after = model
            .user_delete(
                &worlds,
                &UserDelete::Clique("job-0-trainer-0-worker".into()),
            )
            .unwrap();
        let after = after.iter().next().unwrap();
        assert!(!after.cliques.contains_key("job-0-trainer-0-worker"));
        assert_eq!(
            after.groups["job-0-trainer"].replicas[0].cond,
            Cond::Completed
        );
        // The other replica completing still completes the group, and then the set.
        let done = succeed(
            &model,
            BTreeSet::from([after.clone()]),
            "job-0-trainer-1-worker",
        );
        let done = succeed(&model, done, "job-0-leader");
        assert!(done.iter().all(|w| w.set == Cond::Completed), "{done:?}");
        assert!(
            done.iter()
                .all(|w| !w.cliques.contains_key("job-0-trainer-0-worker"))
        );
    }

    #[test]
    fn a_terminal_set_s_group_goes_with_its_cliques_and_the_set_with_everything() {
        let model = Model::new(shape());
        let mut worlds = BTreeSet::from([model.initial()]);
        for c in [
            "job-0-trainer-0-worker",
            "job-0-trainer-1-worker",
            "job-0-leader",
        ] {
            worlds = succeed(&model, worlds, c);
        }
        let w = worlds.iter().next().unwrap();
        let options = model.deletable(w);
        assert!(
            options.contains(&UserDelete::Group("job-0-trainer".into())),
            "{options:?}"
        );
        assert!(options.contains(&UserDelete::Set), "{options:?}");
        let after = model
            .user_delete(&worlds, &UserDelete::Group("job-0-trainer".into()))
            .unwrap();
        let a = after.iter().next().unwrap();
        assert!(a.groups.is_empty());
        assert_eq!(a.cliques.keys().collect::<Vec<_>>(), vec!["job-0-leader"]);
        let gone = model.user_delete(&after, &UserDelete::Set).unwrap();
        let g = gone.iter().next().unwrap();
        assert!(g.set_deleted && g.cliques.is_empty() && g.groups.is_empty());
        assert_eq!(model.deletable(g), Vec::new(), "nothing is left to delete");
    }
}
