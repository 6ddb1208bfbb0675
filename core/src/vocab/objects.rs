//! Reading and writing observed objects: conditions, terminal states, and the job structure
//! of a PodCliqueSet ([`PcsShape`]), each read with a revision's names.

use crate::walk::Walk;
use serde_json::{Map, Value};

use super::{Feature, Kind, Term, Unsupported, Vocabulary};

/// How a revision shows that an object has reached a terminal state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalSignal {
    /// `status.conditions[]` entries of these types with status `True`.
    Conditions {
        /// The condition type meaning completed.
        completed: &'static str,
        /// The condition type meaning failed.
        failed: &'static str,
    },
    /// `status.phase` equal to one of these values.
    Phase {
        /// The phase meaning completed.
        completed: &'static str,
        /// The phase meaning failed.
        failed: &'static str,
    },
}

/// The terminal state of one observed object, as its revision shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TerminalState {
    /// Completed (condition True, or phase Completed).
    pub completed: bool,
    /// Failed (condition True, or phase Failed).
    pub failed: bool,
}

impl TerminalState {
    /// Either completed or failed.
    pub fn is_terminal(self) -> bool {
        self.completed || self.failed
    }
}

impl Vocabulary {
    /// How `kind` shows a terminal state in this revision (`None`: it never becomes terminal).
    pub fn terminal_signal(&self, kind: Kind) -> Option<TerminalSignal> {
        match (self.supports(Feature::PodCliqueConditions), kind) {
            (_, Kind::Pod | Kind::Event) => None,
            (true, _) => Some(TerminalSignal::Conditions {
                completed: self.name(Term::Completed)?,
                failed: self.name(Term::Failed)?,
            }),
            (false, Kind::PodClique) => Some(TerminalSignal::Phase {
                completed: self.name(Term::PhaseCompleted)?,
                failed: self.name(Term::PhaseFailed)?,
            }),
            (false, Kind::PodCliqueScalingGroup | Kind::PodCliqueSet) => None,
        }
    }

    /// The terminal state of an observed object of `kind`.
    pub fn terminal_state(&self, kind: Kind, object: &Value) -> TerminalState {
        match self.terminal_signal(kind) {
            None => TerminalState::default(),
            Some(TerminalSignal::Conditions { completed, failed }) => TerminalState {
                completed: condition_status(object, completed) == Some("True"),
                failed: condition_status(object, failed) == Some("True"),
            },
            Some(TerminalSignal::Phase { completed, failed }) => {
                let phase = object.walk(&["status", "phase"]).and_then(Value::as_str);
                TerminalState {
                    completed: phase == Some(completed),
                    failed: phase == Some(failed),
                }
            }
        }
    }

    /// Whether a PodClique object (or clique template `spec`'s parent) is completion-aware.
    ///
    /// `object` is a PodClique object or a clique template (`{name, spec}`): both keep the
    /// policy and pod spec under `spec`.
    pub fn is_completion_aware_clique(&self, object: &Value) -> bool {
        let spec = object.get("spec");
        if self.supports(Feature::CompletionPolicyField) {
            let (Some(policy), Some(completion)) =
                (self.name(Term::Policy), self.name(Term::Completion))
            else {
                return false;
            };
            spec.and_then(|s| s.get(policy))
                .and_then(|p| p.get(completion))
                .is_some_and(|c| !c.is_null())
        } else {
            spec.and_then(|s| s.walk(&["podSpec", "restartPolicy"]))
                .and_then(Value::as_str)
                == Some("Never")
        }
    }

    /// The `policy.completion` object of a PCS (`spec.policy`) or PCSG config (`policy`).
    fn completion_of<'a>(&self, policy_parent: Option<&'a Value>) -> Option<&'a Value> {
        policy_parent?
            .get(self.name(Term::Policy)?)?
            .get(self.name(Term::Completion)?)
            .filter(|c| !c.is_null())
    }

    fn targets_of(&self, completion: Option<&Value>) -> Option<Vec<String>> {
        let list = completion?
            .get(self.name(Term::Success)?)?
            .get(self.name(Term::TargetNames)?)?
            .as_array()?;
        Some(
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        )
    }

    fn max_restarts_of(&self, completion: Option<&Value>) -> u32 {
        (|| {
            completion?
                .get(self.name(Term::Failure)?)?
                .get(self.name(Term::MaxRestarts)?)?
                .as_u64()
        })()
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The job structure of a PodCliqueSet manifest or object, read with this revision's names.
    pub fn shape(&self, pcs: &Value) -> PcsShape {
        let spec = pcs.get("spec");
        let template = spec.and_then(|s| s.get("template"));
        let list = |key: &str| -> Vec<Value> {
            template
                .and_then(|t| t.get(key))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let replicas = |v: Option<&Value>, default: u32| {
            v.and_then(Value::as_u64)
                .map_or(default, |n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        let groups_raw = list("podCliqueScalingGroups");
        let cliques: Vec<CliqueShape> = list("cliques")
            .iter()
            .map(|c| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
                CliqueShape {
                    name: name.to_owned(),
                    completion_aware: self.is_completion_aware_clique(c),
                    replicas: replicas(c.walk(&["spec", "replicas"]), 0),
                    group: groups_raw
                        .iter()
                        .find(|g| {
                            g.get("cliqueNames")
                                .and_then(Value::as_array)
                                .is_some_and(|n| n.iter().any(|n| n.as_str() == Some(name)))
                        })
                        .and_then(|g| g.get("name").and_then(Value::as_str))
                        .map(str::to_owned),
                }
            })
            .collect();
        let groups: Vec<GroupShape> = groups_raw
            .iter()
            .map(|g| {
                let names: Vec<String> = g
                    .get("cliqueNames")
                    .and_then(Value::as_array)
                    .map(|n| {
                        n.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let completion = self.completion_of(Some(g));
                GroupShape {
                    name: g
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    completion_aware: names
                        .iter()
                        .any(|n| cliques.iter().any(|c| &c.name == n && c.completion_aware)),
                    replicas: replicas(g.get("replicas"), 1),
                    target_names: self.targets_of(completion),
                    max_restarts: self.max_restarts_of(completion),
                    clique_names: names,
                }
            })
            .collect();
        let completion = self.completion_of(spec);
        PcsShape {
            name: pcs
                .walk(&["metadata", "name"])
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            replicas: replicas(spec.and_then(|s| s.get("replicas")), 0),
            completion_aware: cliques
                .iter()
                .any(|c| c.group.is_none() && c.completion_aware)
                || groups.iter().any(|g| g.completion_aware),
            target_names: self.targets_of(completion),
            max_restarts: self.max_restarts_of(completion),
            cliques,
            groups,
        }
    }

    /// Sets (or replaces, by type) a condition in `object.status.conditions`.
    ///
    /// Used by the harness to write children's conditions itself (same-observation cases);
    /// `now` is an RFC 3339 timestamp for `lastTransitionTime`.
    pub fn set_condition(
        object: &mut Value,
        type_: &str,
        status: &str,
        reason: Option<&str>,
        now: &str,
    ) {
        let Some(root) = object.as_object_mut() else {
            return;
        };
        let status_obj = root
            .entry("status")
            .or_insert_with(|| Value::Object(Map::new()));
        if !status_obj.is_object() {
            *status_obj = Value::Object(Map::new());
        }
        let conditions = status_obj
            .as_object_mut()
            .expect("status was made an object")
            .entry("conditions")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !conditions.is_array() {
            *conditions = Value::Array(Vec::new());
        }
        let list = conditions.as_array_mut().expect("conditions is an array");
        let mut condition = Map::new();
        condition.insert("type".into(), Value::from(type_));
        condition.insert("status".into(), Value::from(status));
        // metav1.Condition requires a reason and a message.
        condition.insert(
            "reason".into(),
            Value::from(reason.unwrap_or("SetByConformanceHarness")),
        );
        condition.insert(
            "message".into(),
            Value::from("written by the grove-conformance harness"),
        );
        condition.insert("lastTransitionTime".into(), Value::from(now));
        match list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        {
            Some(existing) => *existing = Value::Object(condition),
            None => list.push(Value::Object(condition)),
        }
    }

    /// Writes a terminal state into an object's status the way this revision shows it
    /// (a condition, or `status.phase`), e.g. for the harness's status writes.
    pub fn set_terminal(
        &self,
        kind: Kind,
        object: &mut Value,
        term: Term,
        reason: Option<&str>,
        now: &str,
    ) -> Result<(), Unsupported> {
        let signal = self.terminal_signal(kind).ok_or(Unsupported::Feature {
            revision: self.revision,
            feature: Feature::ParentSemantics,
        })?;
        let completed = match term {
            Term::Completed | Term::PhaseCompleted => true,
            Term::Failed | Term::PhaseFailed => false,
            other => {
                return Err(Unsupported::Term {
                    revision: self.revision,
                    term: other,
                });
            }
        };
        match signal {
            TerminalSignal::Conditions {
                completed: c,
                failed: f,
            } => {
                Self::set_condition(object, if completed { c } else { f }, "True", reason, now);
            }
            TerminalSignal::Phase {
                completed: c,
                failed: f,
            } => {
                if let Some(root) = object.as_object_mut() {
                    let status = root
                        .entry("status")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(status) = status.as_object_mut() {
                        status.insert("phase".into(), Value::from(if completed { c } else { f }));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The status of the condition of `type_` in `object.status.conditions`, if present.
pub fn condition_status<'a>(object: &'a Value, type_: &str) -> Option<&'a str> {
    condition(object, type_)?.get("status")?.as_str()
}

/// The condition of `type_` in `object.status.conditions`, if present.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object
        .walk(&["status", "conditions"])?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// The job structure of a PodCliqueSet, read through a [`Vocabulary`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PcsShape {
    /// `metadata.name`.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: u32,
    /// Whether any direct child is completion-aware.
    pub completion_aware: bool,
    /// `spec.policy.completion.success.targetNames`, when present.
    pub target_names: Option<Vec<String>>,
    /// `spec.policy.completion.failure.maxRestarts` (0 when omitted).
    pub max_restarts: u32,
    /// Clique templates.
    pub cliques: Vec<CliqueShape>,
    /// PCSG configs.
    pub groups: Vec<GroupShape>,
}

/// A clique template of a [`PcsShape`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CliqueShape {
    /// Template name.
    pub name: String,
    /// Whether its policy makes it completion-aware.
    pub completion_aware: bool,
    /// `spec.replicas` (pods per PodClique).
    pub replicas: u32,
    /// The PCSG config it belongs to, if any (else it is standalone).
    pub group: Option<String>,
}

/// A PCSG config of a [`PcsShape`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupShape {
    /// Config name.
    pub name: String,
    /// `cliqueNames`.
    pub clique_names: Vec<String>,
    /// Whether any member clique is completion-aware.
    pub completion_aware: bool,
    /// `replicas` (default 1).
    pub replicas: u32,
    /// `policy.completion.success.targetNames`, when present.
    pub target_names: Option<Vec<String>>,
    /// `policy.completion.failure.maxRestarts` (0 when omitted).
    pub max_restarts: u32,
}

impl PcsShape {
    /// Standalone clique templates (in no PCSG).
    pub fn standalone_cliques(&self) -> impl Iterator<Item = &CliqueShape> {
        self.cliques.iter().filter(|c| c.group.is_none())
    }

    /// The template of a clique by name.
    pub fn clique(&self, name: &str) -> Option<&CliqueShape> {
        self.cliques.iter().find(|c| c.name == name)
    }

    /// The PCSG config by name.
    pub fn group(&self, name: &str) -> Option<&GroupShape> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Names of the required direct children of a PCS replica (clique or PCSG config names).
    pub fn required_children(&self) -> Vec<String> {
        match &self.target_names {
            Some(t) => t.clone(),
            None => self
                .standalone_cliques()
                .filter(|c| c.completion_aware)
                .map(|c| c.name.clone())
                .chain(
                    self.groups
                        .iter()
                        .filter(|g| g.completion_aware)
                        .map(|g| g.name.clone()),
                )
                .collect(),
        }
    }
}

impl GroupShape {
    /// Names of the required member cliques of a replica of this PCSG.
    pub fn required_cliques(&self, pcs: &PcsShape) -> Vec<String> {
        match &self.target_names {
            Some(t) => t.clone(),
            None => self
                .clique_names
                .iter()
                .filter(|n| pcs.clique(n).is_some_and(|c| c.completion_aware))
                .cloned()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Revision, leader_worker};
    use serde_json::json;

    #[test]
    fn terminal_state_reads_conditions_or_phase() {
        let obj = json!({"status": {"conditions": [
            {"type": "Failed", "status": "True"}, {"type": "Completed", "status": "False"}
        ], "phase": "Completed"}});
        let review = Vocabulary::new(Revision::Grep0285Review);
        let pr = Vocabulary::new(Revision::GrovePr728);
        let s = review.terminal_state(Kind::PodClique, &obj);
        assert!(s.failed && !s.completed);
        let s = pr.terminal_state(Kind::PodClique, &obj);
        assert!(s.completed && !s.failed);
        assert!(!pr.terminal_state(Kind::PodCliqueSet, &obj).is_terminal());
    }

    #[test]
    fn shape_reads_required_children_and_budgets() {
        let v = Vocabulary::default();
        let shape = v.shape(&leader_worker());
        assert_eq!(shape.name, "job");
        assert!(shape.completion_aware);
        let g = shape.group("trainer").unwrap();
        assert!(g.completion_aware);
        assert_eq!(g.max_restarts, 2);
        assert_eq!(g.replicas, 1);
        assert_eq!(g.required_cliques(&shape), vec!["leader".to_owned()]);
        assert_eq!(shape.required_children(), vec!["trainer".to_owned()]);
        assert_eq!(shape.standalone_cliques().count(), 1);
    }

    #[test]
    fn set_terminal_writes_the_revision_form() {
        let mut obj = json!({"status": {"conditions": [{"type": "Completed", "status": "False"}]}});
        Vocabulary::default()
            .set_terminal(
                Kind::PodClique,
                &mut obj,
                Term::Completed,
                Some("CompletionCriteriaMet"),
                "t",
            )
            .unwrap();
        assert_eq!(
            obj["status"]["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "CompletionCriteriaMet",
                    "message": "written by the grove-conformance harness", "lastTransitionTime": "t"}])
        );
        let mut obj = json!({});
        Vocabulary::new(Revision::GrovePr728)
            .set_terminal(Kind::PodClique, &mut obj, Term::Failed, None, "t")
            .unwrap();
        assert_eq!(obj, json!({"status": {"phase": "Failed"}}));
    }
}
