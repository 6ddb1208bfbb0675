//! How the monitor reads the objects' relations from what it has seen: an object's owners
//! (by ownerReference or label), the PodCliqueSet and shape above it, the replicas it belongs
//! to (indices from the B1 names), and whether a replica is completion-aware, complete or
//! terminal.

use crate::walk::Walk;
use serde_json::Value;

use super::{Monitor, Obj, ReplicaKey};
use crate::vocab::{Kind, PcsShape, Term};

impl Monitor {
    pub(super) fn label<'a>(&self, o: &'a Value, t: Term) -> Option<&'a str> {
        o.walk(&["metadata", "labels"])?
            .get(self.vocab.name(t)?)?
            .as_str()
    }

    pub(super) fn current(&self, kind: Kind, name: &str) -> Option<&Obj> {
        self.by_name
            .get(&(kind, name.to_owned()))
            .and_then(|u| self.objs.get(u))
            .filter(|o| !o.gone)
    }

    /// The UID of the controller owner of `o` with `kind`, by ownerReference or label.
    pub(super) fn owner(&self, o: &Value, kind: Kind) -> Option<String> {
        let by_ref = o
            .walk(&["metadata", "ownerReferences"])
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("kind").and_then(Value::as_str) == Some(kind.as_str()))
            })
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        by_ref.or_else(|| {
            let name = match kind {
                Kind::PodClique => self.label(o, Term::LabelPodClique),
                Kind::PodCliqueScalingGroup => self.label(o, Term::LabelPcsg),
                Kind::PodCliqueSet => self.label(o, Term::LabelPartOf),
                Kind::Pod | Kind::Event => None,
            }?;
            self.by_name.get(&(kind, name.to_owned())).cloned()
        })
    }

    /// The PCS that `uid` belongs to (itself, or through its owners), and its shape.
    pub(super) fn pcs_of(&self, uid: &str) -> Option<(&Obj, PcsShape)> {
        let mut current = self.objs.get(uid)?;
        for _ in 0..3 {
            match current.kind {
                Kind::PodCliqueSet => return Some((current, self.vocab.shape(&current.object))),
                Kind::PodCliqueScalingGroup => {
                    current = self
                        .objs
                        .get(&self.owner(&current.object, Kind::PodCliqueSet)?)?;
                }
                Kind::PodClique => {
                    let up = self
                        .owner(&current.object, Kind::PodCliqueScalingGroup)
                        .or_else(|| self.owner(&current.object, Kind::PodCliqueSet))?;
                    current = self.objs.get(&up)?;
                }
                Kind::Pod => {
                    current = self
                        .objs
                        .get(&self.owner(&current.object, Kind::PodClique)?)?;
                }
                Kind::Event => return None,
            }
        }
        None
    }

    /// The replicas a child object belongs to, nearest first: for a PodClique in a PCSG,
    /// (PCSG, j) then (PCS, i); for a standalone PodClique or a PCSG, (PCS, i). The parents
    /// come from ownerReferences (B3), the indices from the B1 names (`<pcs>-<i>-<pcsg>`,
    /// `<pcs>-<i>-<pcsg>-<j>-<clique>`, `<pcs>-<i>-<clique>`): no label is needed.
    pub(super) fn replicas_of(&self, o: &Value, kind: Kind) -> Vec<ReplicaKey> {
        let mut out = Vec::new();
        let name = o
            .walk(&["metadata", "name"])
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind == Kind::PodClique
            && let Some(pcsg) = self.owner(o, Kind::PodCliqueScalingGroup)
            && let Some(j) = self
                .objs
                .get(&pcsg)
                .and_then(|g| index_after(name, &g.name))
        {
            out.push((pcsg, j));
        }
        if matches!(kind, Kind::PodClique | Kind::PodCliqueScalingGroup) {
            let pcs = self.owner(o, Kind::PodCliqueSet).or_else(|| {
                let pcsg = self.owner(o, Kind::PodCliqueScalingGroup)?;
                self.owner(&self.objs.get(&pcsg)?.object, Kind::PodCliqueSet)
            });
            if let Some(pcs) = pcs
                && let Some(i) = self.objs.get(&pcs).and_then(|p| index_after(name, &p.name))
            {
                out.push((pcs, i));
            }
        }
        out
    }

    /// Whether replica `key` of a completion-aware parent is complete: every required child of
    /// its current attempt (not being deleted) is Completed.
    pub(super) fn replica_complete(&self, key: &ReplicaKey) -> bool {
        self.replica_complete_where(key, |_| true)
    }

    /// [`Self::replica_complete`] counting only the required children that `current` accepts.
    pub(super) fn replica_complete_where(
        &self,
        key: &ReplicaKey,
        current: impl Fn(&Obj) -> bool,
    ) -> bool {
        let Some(parent) = self.objs.get(&key.0) else {
            return false;
        };
        let Some((pcs, shape)) = self.pcs_of(&key.0) else {
            return false;
        };
        let live_completed = |kind: Kind, name: &str| {
            self.current(kind, name)
                .is_some_and(|o| o.deleting.is_none() && o.terminal.completed && current(o))
        };
        match parent.kind {
            Kind::PodCliqueScalingGroup => {
                let prefix = format!(
                    "{}-{}-",
                    pcs.name,
                    index_after(&parent.name, &pcs.name).unwrap_or(0)
                );
                let Some(cfg) = parent.name.strip_prefix(&prefix).or_else(|| {
                    shape
                        .groups
                        .iter()
                        .map(|g| g.name.as_str())
                        .find(|g| parent.name.ends_with(&format!("-{g}")))
                }) else {
                    return false;
                };
                let Some(group) = shape.group(cfg) else {
                    return false;
                };
                let required = group.required_cliques(&shape);
                !required.is_empty()
                    && required.iter().all(|c| {
                        live_completed(Kind::PodClique, &format!("{}-{}-{c}", parent.name, key.1))
                    })
            }
            Kind::PodCliqueSet => {
                let required = shape.required_children();
                !required.is_empty()
                    && required.iter().all(|c| {
                        let name = format!("{}-{}-{c}", parent.name, key.1);
                        if shape.group(c).is_some() {
                            live_completed(Kind::PodCliqueScalingGroup, &name)
                        } else {
                            live_completed(Kind::PodClique, &name)
                        }
                    })
            }
            Kind::Pod | Kind::PodClique | Kind::Event => false,
        }
    }

    /// Whether the parent of replica `key` is completion-aware.
    pub(super) fn replica_aware(&self, key: &ReplicaKey) -> bool {
        let Some(parent) = self.objs.get(&key.0) else {
            return false;
        };
        let Some((pcs, shape)) = self.pcs_of(&key.0) else {
            return false;
        };
        match parent.kind {
            Kind::PodCliqueSet => shape.completion_aware,
            Kind::PodCliqueScalingGroup => shape
                .groups
                .iter()
                .find(|g| {
                    parent.name.ends_with(&format!("-{}", g.name))
                        && parent.name.starts_with(&pcs.name)
                })
                .is_some_and(|g| g.completion_aware),
            Kind::Pod | Kind::PodClique | Kind::Event => false,
        }
    }

    pub(super) fn max_restarts(&self, key: &ReplicaKey) -> u64 {
        let Some(parent) = self.objs.get(&key.0) else {
            return 0;
        };
        let Some((_, shape)) = self.pcs_of(&key.0) else {
            return 0;
        };
        match parent.kind {
            Kind::PodCliqueSet => u64::from(shape.max_restarts),
            Kind::PodCliqueScalingGroup => shape
                .groups
                .iter()
                .find(|g| parent.name.ends_with(&format!("-{}", g.name)))
                .map_or(0, |g| u64::from(g.max_restarts)),
            // Only a PCS or a PCSG has replicas with a budget.
            Kind::Pod | Kind::PodClique | Kind::Event => 0,
        }
    }

    /// The entry showing why the scope of replica `key` is terminal, if it is: the parent's
    /// terminal write, or the latest required child's completion.
    pub(super) fn scope_terminal(&self, key: &ReplicaKey) -> Option<usize> {
        let parent = self.objs.get(&key.0)?;
        if parent.terminal.is_terminal() {
            return parent.terminal_at.or(Some(parent.last));
        }
        self.replica_complete(key).then_some(parent.last)
    }
}

/// The replica index in a B1 name: `name` is `<parent>-<index>-<rest>`.
pub(super) fn index_after(name: &str, parent: &str) -> Option<u32> {
    let (index, rest) = name
        .strip_prefix(parent)?
        .strip_prefix('-')?
        .split_once('-')?;
    if rest.is_empty() || index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    index.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::index_after;

    #[test]
    fn replica_indices_are_read_from_b1_names() {
        assert_eq!(index_after("job-0-trainer", "job"), Some(0));
        assert_eq!(
            index_after("job-12-trainer-3-worker", "job-12-trainer"),
            Some(3)
        );
        assert_eq!(index_after("job-x-trainer", "job"), None);
        assert_eq!(index_after("job-0", "job"), None);
        assert_eq!(index_after("jobs-0-trainer", "job"), None);
        assert_eq!(index_after("job-0-", "job"), None);
    }
}
