//! How a batch of pod changes reaches the parents: the PodCliques whose evaluation changes
//! write their conditions in some order and grouping, and each parent decides from what its
//! own view holds of those writes, which may lag behind what has landed.
//!
//! A parent sees its children only through their writes (E7–E10 for a PCSG replica over its
//! PodCliques, E13 for a PCS replica over a PCSG). Two pod changes seen together by the kubelet
//! therefore reach a parent as two writes, in either order, and the parent may decide from a
//! view that holds the first and not yet the second, though the second has landed and the
//! parent's cleanup then finds it terminal (it stays: C2, C3 delete non-terminal children).
//! Views are prefixes of the order in which writes land: a parent that sees a write sees every
//! write that landed before it.

use std::collections::{BTreeMap, BTreeSet};

use super::world::{Cond, Model, PodChange, PodEvent, PodState, World, evaluate_clique};

/// What the parents' decisions see of the conditions written in this batch.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// PodCliques whose terminal condition landed but is not in the deciding parents' view:
    /// they read as running.
    hidden: BTreeSet<String>,
    /// The PCSGs see every landed write (only the PCS's view lags).
    groups_see_all: bool,
    /// When only the PCS's view lags: each PCSG's condition as the PCS's view holds it.
    groups: Option<BTreeMap<String, Cond>>,
}

impl View {
    /// PodClique `name`'s condition as a PCSG replica deciding over it sees it.
    pub(crate) fn clique_for_group(&self, w: &World, name: &str) -> Cond {
        if self.hidden.contains(name) && !self.groups_see_all {
            return Cond::Running;
        }
        w.cliques.get(name).map_or(Cond::Running, |c| c.cond)
    }

    /// Standalone PodClique `name`'s condition as a PCS replica deciding over it sees it.
    pub(crate) fn clique_for_set(&self, w: &World, name: &str) -> Cond {
        if self.hidden.contains(name) {
            return Cond::Running;
        }
        w.cliques.get(name).map_or(Cond::Running, |c| c.cond)
    }

    /// PCSG `name`'s condition as a PCS replica deciding over it sees it (E13).
    pub(crate) fn group_for_set(&self, w: &World, name: &str) -> Cond {
        let Some(group) = w.groups.get(name) else {
            return Cond::Running;
        };
        match &self.groups {
            Some(seen) => seen.get(name).copied().unwrap_or(Cond::Running),
            None => group.cond,
        }
    }
}

/// Where a parent's view lags in one order of writes: after block `at`, the writes of the
/// later blocks land before the parents act on the earlier ones, unseen by `who`.
#[derive(Debug, Clone, Copy)]
struct Lag {
    at: usize,
    who: Lagging,
}

/// Whose view lags.
#[derive(Debug, Clone, Copy)]
enum Lagging {
    /// The PCSGs' (and so the PCS's, which sees the PCSGs through their conditions).
    Groups,
    /// Only the PCS's: the PCSGs decide from every landed write, the PCS does not see what
    /// they and the later PodCliques wrote.
    Set,
}

/// A pod event that addresses no active pod of a world (its PodClique is gone, or the pod
/// has ended).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no active pod {clique}/{index}")]
pub struct NoActivePod {
    pub clique: String,
    pub index: u32,
}

impl Model {
    /// The states allowed after `events` hit every world of `before` together (in one
    /// observation of the kubelet; the implementation may still see their consequences on
    /// the PodCliques in any order, and its parents decide from views that may lag). `Err`
    /// names an event that addresses no active pod.
    pub fn apply(
        &self,
        before: &BTreeSet<World>,
        events: &[PodEvent],
    ) -> Result<BTreeSet<World>, NoActivePod> {
        let mut out = BTreeSet::new();
        for w in before {
            out.extend(self.apply_one(w, events)?);
        }
        Ok(out)
    }

    fn apply_one(&self, before: &World, events: &[PodEvent]) -> Result<Vec<World>, NoActivePod> {
        let mut w = before.clone();
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for e in events {
            let no_pod = || NoActivePod {
                clique: e.clique.clone(),
                index: e.index,
            };
            let clique = w.cliques.get_mut(&e.clique).ok_or_else(no_pod)?;
            if clique.pods.get(&e.index) != Some(&PodState::Active) {
                return Err(no_pod());
            }
            if !clique.aware {
                // B4: a regular clique's container restarts (restartPolicy Always) or its
                // deleted pod is replaced with the same index: it stays active.
                continue;
            }
            match e.change {
                // V5: an aware clique's pods run with restartPolicy Never, so an exit is final.
                PodChange::Exit(0) => {
                    clique.pods.insert(e.index, PodState::Succeeded);
                }
                PodChange::Exit(_) => {
                    clique.pods.insert(e.index, PodState::Failed);
                }
                // E3: the pod is gone before reaching Succeeded; never replaced.
                PodChange::Removed => {
                    clique.pods.remove(&e.index);
                    clique.lost = true;
                }
            }
            touched.insert(e.clique.clone());
        }
        // The cliques whose evaluation now changes; the implementation may write their
        // conditions, and their parents may observe them, in any order and grouping.
        let pending: Vec<String> = touched
            .into_iter()
            .filter(|n| {
                let c = &w.cliques[n];
                c.cond == Cond::Running && evaluate_clique(&self.shape, c) != Cond::Running
            })
            .collect();
        let mut out = Vec::new();
        for blocks in ordered_partitions(pending.len()) {
            let blocks: Vec<Vec<&str>> = blocks
                .iter()
                .map(|b| b.iter().map(|&k| pending[k].as_str()).collect())
                .collect();
            let lags = (0..blocks.len().saturating_sub(1)).flat_map(|at| {
                let set = (!self.shape.groups.is_empty()).then_some(Lagging::Set);
                [Some(Lagging::Groups), set]
                    .into_iter()
                    .flatten()
                    .map(move |who| Some(Lag { at, who }))
            });
            for lag in std::iter::once(None).chain(lags) {
                out.push(self.write_in_order(&w, &blocks, lag));
            }
        }
        Ok(out)
    }

    /// The PodCliques of `blocks` write their conditions block by block, the parents acting
    /// after each block on what their view holds (`lag`: where it falls behind).
    fn write_in_order(&self, w: &World, blocks: &[Vec<&str>], lag: Option<Lag>) -> World {
        let mut v = w.clone();
        for (b, block) in blocks.iter().enumerate() {
            self.write_terminal(&mut v, block);
            let Some(lag) = lag.filter(|l| l.at == b) else {
                self.settle(&mut v, &View::default());
                continue;
            };
            let later: Vec<&str> = blocks[b + 1..].iter().flatten().copied().collect();
            let hidden: BTreeSet<String> = later
                .iter()
                .filter(|n| v.cliques.get(**n).is_some_and(|c| c.cond == Cond::Running))
                .map(|n| (*n).to_owned())
                .collect();
            let view = match lag.who {
                Lagging::Groups => View {
                    hidden,
                    ..View::default()
                },
                Lagging::Set => {
                    // What the PCSGs wrote from the earlier blocks alone is in the PCS's
                    // view; what they wrote after the later blocks landed is not.
                    let mut seen = v.clone();
                    let earlier = View {
                        hidden: hidden.clone(),
                        ..View::default()
                    };
                    self.settle_groups(&mut seen, &earlier);
                    let groups = v
                        .groups
                        .keys()
                        .map(|g| {
                            let same = seen.incarnations.get(g) == v.incarnations.get(g);
                            let cond = seen.groups.get(g).filter(|_| same).map(|s| s.cond);
                            (g.clone(), cond.unwrap_or(Cond::Running))
                        })
                        .collect();
                    View {
                        hidden,
                        groups_see_all: true,
                        groups: Some(groups),
                    }
                }
            };
            // The later writes land before the parents act, unseen by their decisions.
            self.write_terminal(&mut v, &later);
            self.settle(&mut v, &view);
            // Then the views catch up.
            self.settle(&mut v, &View::default());
            break;
        }
        v
    }

    /// The conditions of `names` as their pods now evaluate (E1–E3), for those that still
    /// exist and are not terminal: a clique a restart or a cleanup already removed is gone,
    /// and its pods' fate no longer counts (a recreated one is a new attempt).
    fn write_terminal(&self, v: &mut World, names: &[&str]) {
        for name in names {
            let Some(c) = v.cliques.get(*name) else {
                continue;
            };
            if c.cond != Cond::Running {
                continue;
            }
            let cond = evaluate_clique(&self.shape, c);
            self.set_clique_terminal(v, name, cond);
        }
    }
}

/// Every ordered partition of `0..n` into non-empty blocks: the orders and groupings in
/// which a parent may observe `n` children becoming terminal.
pub fn ordered_partitions(n: usize) -> Vec<Vec<Vec<usize>>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    let total = n.pow(n as u32);
    for code in 0..total {
        let mut block = vec![0usize; n];
        let mut c = code;
        for b in block.iter_mut() {
            *b = c % n;
            c /= n;
        }
        let used: BTreeSet<usize> = block.iter().copied().collect();
        let blocks = used.len();
        if used.iter().copied().ne(0..blocks) {
            continue;
        }
        out.push(
            (0..blocks)
                .map(|b| (0..n).filter(|&k| block[k] == b).collect())
                .collect(),
        );
    }
    out
}
