//! Observed state at one instant and the queries on it: pure lookups, no client, no clock, no
//! judgement.
//!
//! The runner's watches keep a [`Snapshot`] of the case's namespace up to date
//! ([`crate::runner::observe`]). The [`crate::matcher`] judges expectations with these queries
//! (which object or pod an expectation is about, how many pods or events match); the runner uses
//! them to address pod actions, to resolve remembered UIDs and to arm and fire `controller`
//! triggers.

use crate::walk::Walk;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::catalog::{
    DeletionTarget, EventExpectation, ObjectRef, PodCount, PodFilter, PodSelector, Subject,
    UidSubject,
};
use crate::vocab::{Kind, Term, Vocabulary, condition};

/// Observed state at one instant, as the runner's watch caches hold it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Grove objects by kind and name (the current incarnation).
    pub objects: BTreeMap<(Kind, String), Value>,
    /// Every pod of the case's namespace.
    pub pods: Vec<Value>,
    /// Every Event of the case's namespace.
    pub events: Vec<Value>,
}

impl Snapshot {
    /// Adds or replaces an object (kind from its `kind`, name from `metadata.name`).
    pub fn insert(&mut self, object: Value) {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .and_then(|k| k.parse::<Kind>().ok());
        let name = object
            .walk(&["metadata", "name"])
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (kind, name) {
            (Some(Kind::Pod), _) => self.pods.push(object),
            (Some(Kind::Event), _) => self.events.push(object),
            (Some(kind), Some(name)) => {
                self.objects.insert((kind, name), object);
            }
            (Some(_), None) | (None, _) => {}
        }
    }

    /// The Grove object `object` names, if it exists (being deleted or not).
    pub fn object(&self, object: &ObjectRef) -> Option<&Value> {
        self.objects.get(&(object.kind, object.name.clone()))
    }

    /// The value at a dotted `path` (`status.replicaRestartCounts`, already in the revision's
    /// spelling) of the Grove object `object` names.
    pub fn field(&self, object: &ObjectRef, path: &str) -> Option<&Value> {
        self.object(object)
            .and_then(|o| path.split('.').try_fold(o, |v, key| v.get(key)))
    }

    /// The object an expectation is about: a Grove object, or the current pod of a clique index
    /// ([`Snapshot::current_pod`]).
    pub fn subject(&self, subject: &Subject, vocab: &Vocabulary) -> Option<&Value> {
        match subject {
            Subject::Object(r) => self.object(r),
            Subject::Pod { clique, index } => self.current_pod(clique, *index, vocab),
        }
    }

    /// The pods a selector addresses, whatever their state.
    pub fn select_pods(&self, selector: &PodSelector, vocab: &Vocabulary) -> Vec<&Value> {
        let clique_label = vocab.name(Term::LabelPodClique).unwrap_or_default();
        let index_label = vocab.name(Term::LabelPodIndex).unwrap_or_default();
        let part_of = vocab.name(Term::LabelPartOf).unwrap_or_default();
        self.pods
            .iter()
            .filter(|p| match selector {
                PodSelector::Pod { clique, index } => {
                    label(p, clique_label) == Some(clique.as_str())
                        && label(p, index_label) == Some(index.to_string().as_str())
                }
                PodSelector::Clique(c) => label(p, clique_label) == Some(c.as_str()),
                PodSelector::PodCliqueSet(s) => label(p, part_of) == Some(s.as_str()),
            })
            .collect()
    }

    /// The current pod of `clique` with `index`: the one not being deleted, else the newest.
    pub fn current_pod(&self, clique: &str, index: u32, vocab: &Vocabulary) -> Option<&Value> {
        let selected = self.select_pods(
            &PodSelector::Pod {
                clique: clique.to_owned(),
                index,
            },
            vocab,
        );
        let created = |p: &Value| {
            p.walk(&["metadata", "creationTimestamp"])
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        selected
            .iter()
            .copied()
            .filter(|p| !is_deleting(p))
            .max_by_key(|p| created(p))
            .or_else(|| selected.iter().copied().max_by_key(|p| created(p)))
    }

    /// The pods a pod action addresses: the current pod of a `pod:` selector, the active pods
    /// ([`pod_is_active`]) of a clique or a PodCliqueSet.
    pub fn addressed_pods(&self, selector: &PodSelector, vocab: &Vocabulary) -> Vec<&Value> {
        match selector {
            PodSelector::Pod { clique, index } => self
                .current_pod(clique, *index, vocab)
                .into_iter()
                .collect(),
            other => self
                .select_pods(other, vocab)
                .into_iter()
                .filter(|p| pod_is_active(p))
                .collect(),
        }
    }

    /// The pod named `name`.
    pub fn pod_named(&self, name: &str) -> Option<&Value> {
        self.pods
            .iter()
            .find(|p| p.walk(&["metadata", "name"]).and_then(Value::as_str) == Some(name))
    }

    /// The pods bound to any of `nodes`.
    pub fn pods_on_nodes(&self, nodes: &[String]) -> Vec<&Value> {
        self.pods
            .iter()
            .filter(|p| {
                p.walk(&["spec", "nodeName"])
                    .and_then(Value::as_str)
                    .is_some_and(|n| nodes.iter().any(|m| m == n))
            })
            .collect()
    }

    /// How many pods of a count's scope pass its filter.
    pub fn count_pods(&self, count: &PodCount, vocab: &Vocabulary) -> u32 {
        let n = self
            .select_pods(&count.scope, vocab)
            .into_iter()
            .filter(|p| match count.filter {
                PodFilter::All => true,
                PodFilter::Phase(ph) => phase(p) == ph.as_str(),
                PodFilter::Active => pod_is_active(p),
                PodFilter::Terminal => pod_is_terminal(p),
                PodFilter::Ready => pod_is_ready(p),
                PodFilter::Owned => self.controlled_by_its_clique(p, vocab),
            })
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Whether `pod`'s controller ownerReference is the PodClique its clique label names, as
    /// that PodClique is now (same UID).
    fn controlled_by_its_clique(&self, pod: &Value, vocab: &Vocabulary) -> bool {
        let clique_label = vocab.name(Term::LabelPodClique).unwrap_or_default();
        let Some(clique) = pod
            .walk(&["metadata", "labels"])
            .and_then(|l| l.get(clique_label))
            .and_then(Value::as_str)
        else {
            return false;
        };
        let owner = ObjectRef {
            kind: Kind::PodClique,
            name: clique.to_owned(),
        };
        self.object(&owner)
            .is_some_and(|o| controller_ref_is(pod, &owner, o))
    }

    /// How often the events an expectation describes occurred (summing Event `count`, or
    /// `series.count`): reason in the revision's spelling, the type the spec gives it
    /// ([`event_type`]), the words it must mention, and the involved object when given.
    pub fn count_events(&self, exp: &EventExpectation, vocab: &Vocabulary) -> u64 {
        let Some(reason) = vocab.name(exp.reason) else {
            return 0;
        };
        let type_ = event_type(exp.reason);
        self.events
            .iter()
            .filter(|e| e.get("reason").and_then(Value::as_str) == Some(reason))
            .filter(|e| type_.is_none_or(|t| e.get("type").and_then(Value::as_str) == Some(t)))
            .filter(|e| {
                let message = e
                    .get("message")
                    .or_else(|| e.get("note"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                exp.mentions.iter().all(|w| mentions(message, w))
            })
            .filter(|e| {
                let involved = e.get("involvedObject").or_else(|| e.get("regarding"));
                let kind_ok = exp.kind.is_none_or(|k| {
                    involved.and_then(|i| i.get("kind")).and_then(Value::as_str) == Some(k.as_str())
                });
                let name_ok = exp.name.as_deref().is_none_or(|n| {
                    involved.and_then(|i| i.get("name")).and_then(Value::as_str) == Some(n)
                });
                kind_ok && name_ok
            })
            .map(|e| {
                e.get("count")
                    .and_then(Value::as_u64)
                    .or_else(|| e.walk(&["series", "count"]).and_then(Value::as_u64))
                    .unwrap_or(1)
                    .max(1)
            })
            .sum()
    }

    /// The objects a `deleted:` trigger watches, being deleted or not.
    pub fn deletion_targets(&self, target: &DeletionTarget, vocab: &Vocabulary) -> Vec<&Value> {
        match target {
            DeletionTarget::Pod(selector) => self.select_pods(selector, vocab),
            DeletionTarget::Object(o) => self.object(o).into_iter().collect(),
            DeletionTarget::AnyOf(Kind::Pod) => self.pods.iter().collect(),
            DeletionTarget::AnyOf(kind) => self
                .objects
                .iter()
                .filter(|((k, _), _)| k == kind)
                .map(|(_, v)| v)
                .collect(),
        }
    }

    /// The current UID of a remembered subject (object, or current pod of a clique index);
    /// `None` when it is gone or being deleted.
    pub fn current_uid(&self, subject: &UidSubject, vocab: &Vocabulary) -> Option<&str> {
        match subject {
            UidSubject::Object(o) => self.object(o).filter(|o| !is_deleting(o)).and_then(uid),
            UidSubject::Pod { clique, index } => self
                .current_pod(clique, *index, vocab)
                .filter(|p| !is_deleting(p))
                .and_then(uid),
        }
    }

    /// Resolves remembered labels (label → subject and the UID recorded then) to the subjects'
    /// current UIDs ([`Snapshot::current_uid`]).
    pub fn current_uids(
        &self,
        remembered: &BTreeMap<String, (UidSubject, String)>,
        vocab: &Vocabulary,
    ) -> BTreeMap<String, Option<String>> {
        remembered
            .iter()
            .map(|(label, (subject, _))| {
                (
                    label.clone(),
                    self.current_uid(subject, vocab).map(str::to_string),
                )
            })
            .collect()
    }
}

/// What real kubelets still owe a snapshot's pods: work that is theirs, not the
/// implementation's (see [`Snapshot::kubelets_caught_up`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KubeletBacklog {
    /// Pods being deleted from a node, with no finalizer left: their kubelet has yet to stop
    /// them and remove them.
    pub terminating: usize,
    /// Pods bound to a node and still Pending: their kubelet has yet to start them.
    pub starting: usize,
    /// Running pods not Ready since their containers started: their kubelet has yet to see
    /// the readiness probe pass (fixture containers are ready as soon as they run).
    pub unprobed: usize,
}

impl KubeletBacklog {
    /// Whether the kubelets owe nothing.
    pub fn is_empty(&self) -> bool {
        self.terminating + self.starting + self.unprobed == 0
    }
}

impl std::fmt::Display for KubeletBacklog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pods still terminating, {} still starting, {} not yet probed ready",
            self.terminating, self.starting, self.unprobed
        )
    }
}

impl Snapshot {
    /// The snapshot as it will be once real kubelets have done what they owe its pods, and
    /// what that is: pods being deleted from a node are gone, pods bound to a node and still
    /// Pending are Running and Ready, Running pods not Ready since their containers started
    /// are Ready. Everything else, the implementation's part, stays as it is: an unbound or
    /// gated pod, a pod made unready after it was ready, a pod held by a finalizer.
    pub fn kubelets_caught_up(&self) -> (Snapshot, KubeletBacklog) {
        let mut backlog = KubeletBacklog::default();
        let mut projected = Snapshot {
            objects: self.objects.clone(),
            pods: Vec::with_capacity(self.pods.len()),
            events: self.events.clone(),
        };
        for pod in &self.pods {
            let bound = pod
                .walk(&["spec", "nodeName"])
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let finalized = pod
                .walk(&["metadata", "finalizers"])
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if is_deleting(pod) {
                if bound && !finalized {
                    backlog.terminating += 1;
                } else {
                    projected.pods.push(pod.clone());
                }
                continue;
            }
            let owed = match phase(pod) {
                "Pending" if bound => Some(&mut backlog.starting),
                "Running" if !pod_is_ready(pod) && never_ready_since_start(pod) => {
                    Some(&mut backlog.unprobed)
                }
                _ => None,
            };
            let Some(owed) = owed else {
                projected.pods.push(pod.clone());
                continue;
            };
            *owed += 1;
            let mut pod = pod.clone();
            pod["status"]["phase"] = Value::from("Running");
            let ready = serde_json::json!({"type": "Ready", "status": "True"});
            match pod["status"]["conditions"].as_array_mut() {
                Some(conditions) => {
                    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("Ready"));
                    conditions.push(ready);
                }
                None => pod["status"]["conditions"] = Value::Array(vec![ready]),
            }
            projected.pods.push(pod);
        }
        (projected, backlog)
    }
}

/// Whether a Running pod's `Ready` condition has been False since before its containers
/// started (each running, none ready): it was never ready in this run of its containers, as
/// opposed to a pod made unready later.
fn never_ready_since_start(pod: &Value) -> bool {
    let Some(since) = condition(pod, "Ready")
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
    else {
        return false;
    };
    let Some(containers) = pod
        .walk(&["status", "containerStatuses"])
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    else {
        return false;
    };
    containers.iter().all(|c| {
        c.get("ready").and_then(Value::as_bool) != Some(true)
            && c.walk(&["state", "running", "startedAt"])
                .and_then(Value::as_str)
                // RFC 3339 times of one clock and format compare as text.
                .is_some_and(|started| since <= started)
    })
}

/// Whether an object is being deleted (`metadata.deletionTimestamp` set).
pub fn is_deleting(o: &Value) -> bool {
    o.walk(&["metadata", "deletionTimestamp"])
        .is_some_and(|t| !t.is_null())
}

/// An object's `metadata.uid`.
pub fn uid(o: &Value) -> Option<&str> {
    o.walk(&["metadata", "uid"]).and_then(Value::as_str)
}

fn label<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o.walk(&["metadata", "labels"])?.get(key)?.as_str()
}

/// A pod's `status.phase`, `Pending` when it has none yet.
fn phase(pod: &Value) -> &str {
    pod.walk(&["status", "phase"])
        .and_then(Value::as_str)
        .unwrap_or("Pending")
}

/// Whether a pod is active (Pending or Running, not being deleted).
pub fn pod_is_active(pod: &Value) -> bool {
    matches!(phase(pod), "Pending" | "Running") && !is_deleting(pod)
}

/// Whether a pod is terminal (Succeeded or Failed).
pub fn pod_is_terminal(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Whether a pod is Ready (condition `Ready` True) and not being deleted.
pub fn pod_is_ready(pod: &Value) -> bool {
    !is_deleting(pod)
        && condition(pod, "Ready")
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("True")
}

/// The type the spec gives each job event (EV1–EV4); other events' types are not checked.
pub fn event_type(reason: Term) -> Option<&'static str> {
    match reason {
        Term::JobCompleted => Some("Normal"),
        Term::JobFailed | Term::GangRestartTriggered | Term::RestartBudgetExhaustedEvent => {
            Some("Warning")
        }
        _ => None,
    }
}

/// Whether `text` contains `word` with no letter or digit on either side.
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
        boundary(before) && boundary(after)
    })
}

/// The controller ownerReference of `object` (`controller: true`), if it has one.
pub fn controller_ref(object: &Value) -> Option<&Value> {
    object
        .walk(&["metadata", "ownerReferences"])?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// Whether the controller ownerReference of `object` names `owner` (kind and name) with the
/// UID of `owner_object`, the owner as it is now.
pub fn controller_ref_is(object: &Value, owner: &ObjectRef, owner_object: &Value) -> bool {
    let Some(r) = controller_ref(object) else {
        return false;
    };
    r.get("kind").and_then(Value::as_str) == Some(owner.kind.as_str())
        && r.get("name").and_then(Value::as_str) == Some(owner.name.as_str())
        && uid(owner_object).is_some_and(|u| r.get("uid").and_then(Value::as_str) == Some(u))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, index: u32, phase: &str, created: &str, deleting: bool) -> Value {
        let mut p = json!({"kind": "Pod", "metadata": {"name": name, "uid": format!("uid-{name}"),
            "creationTimestamp": created,
            "labels": {"grove.io/podclique": "job-0-worker",
                "grove.io/podclique-pod-index": index.to_string(),
                "app.kubernetes.io/part-of": "job"}},
            "spec": {"nodeName": format!("node-{index}")}, "status": {"phase": phase}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:09Z");
        }
        p
    }

    fn snapshot() -> Snapshot {
        let mut s = Snapshot::default();
        s.insert(
            json!({"kind": "PodCliqueSet", "metadata": {"name": "job", "uid": "pcs-1"},
            "status": {"replicaRestartCounts": [2]}}),
        );
        // Index 0: a newer pod being deleted and the older one still live.
        s.insert(pod("w-0-old", 0, "Running", "2026-01-01T00:00:01Z", false));
        s.insert(pod("w-0-new", 0, "Running", "2026-01-01T00:00:02Z", true));
        s.insert(pod("w-1", 1, "Succeeded", "2026-01-01T00:00:01Z", false));
        s.insert(pod("w-2", 2, "Pending", "2026-01-01T00:00:01Z", true));
        s
    }

    fn names<'a>(pods: &[&'a Value]) -> Vec<&'a str> {
        pods.iter()
            .filter_map(|p| p.walk(&["metadata", "name"]).and_then(Value::as_str))
            .collect()
    }

    #[test]
    fn the_current_pod_is_the_live_one_else_the_newest() {
        let (s, v) = (snapshot(), Vocabulary::default());
        let name = |i| {
            names(
                &s.current_pod("job-0-worker", i, &v)
                    .into_iter()
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(name(0), ["w-0-old"]);
        assert_eq!(name(2), ["w-2"], "only one, being deleted");
        assert_eq!(name(3), Vec::<&str>::new());
        let gone = UidSubject::Pod {
            clique: "job-0-worker".into(),
            index: 2,
        };
        assert_eq!(s.current_uid(&gone, &v), None, "being deleted");
    }

    #[test]
    fn pod_actions_address_the_active_pods_of_a_clique() {
        let (s, v) = (snapshot(), Vocabulary::default());
        let clique = PodSelector::Clique("job-0-worker".into());
        assert_eq!(
            names(&s.select_pods(&clique, &v)),
            ["w-0-old", "w-0-new", "w-1", "w-2"]
        );
        assert_eq!(names(&s.addressed_pods(&clique, &v)), ["w-0-old"]);
        assert_eq!(
            names(&s.pods_on_nodes(&["node-1".into(), "node-2".into()])),
            ["w-1", "w-2"]
        );
        assert_eq!(s.pod_named("w-1").and_then(uid), Some("uid-w-1"), "by name");
    }

    #[test]
    fn objects_are_found_by_reference_and_fields_by_dotted_path() {
        let s = snapshot();
        let job = ObjectRef {
            kind: Kind::PodCliqueSet,
            name: "job".into(),
        };
        assert_eq!(s.object(&job).and_then(uid), Some("pcs-1"));
        assert_eq!(
            s.field(&job, "status.replicaRestartCounts"),
            Some(&json!([2]))
        );
        assert_eq!(s.field(&job, "status.phase"), None);
        let v = Vocabulary::default();
        assert_eq!(
            s.deletion_targets(&DeletionTarget::AnyOf(Kind::PodCliqueSet), &v)
                .len(),
            1
        );
        assert_eq!(
            s.deletion_targets(&DeletionTarget::AnyOf(Kind::Pod), &v)
                .len(),
            4
        );
    }

    /// A Running pod whose container started at `started`, with its Ready condition `ready`
    /// since `since`.
    fn running(name: &str, index: u32, ready: bool, since: &str, started: &str) -> Value {
        let mut p = pod(name, index, "Running", "2026-01-01T00:00:01Z", false);
        p["status"]["conditions"] = json!([{"type": "Ready",
            "status": if ready { "True" } else { "False" }, "lastTransitionTime": since}]);
        p["status"]["containerStatuses"] = json!([{"name": "main", "ready": ready,
            "state": {"running": {"startedAt": started}}}]);
        p
    }

    #[test]
    fn caught_up_kubelets_finish_what_is_theirs_and_nothing_else() {
        let mut s = Snapshot::default();
        // Theirs: a bound pod being deleted, a bound Pending pod, a Running pod not yet
        // probed ready since its container started.
        s.insert(pod("stopping", 0, "Running", "2026-01-01T00:00:01Z", true));
        s.insert(pod("starting", 1, "Pending", "2026-01-01T00:00:01Z", false));
        s.insert(running(
            "unprobed",
            2,
            false,
            "2026-01-01T00:00:01Z",
            "2026-01-01T00:00:03Z",
        ));
        // Not theirs: an unbound (gated) pod, a pod made unready after it started, a pod
        // being deleted that a finalizer holds, a ready pod.
        let mut gated = pod("gated", 3, "Pending", "2026-01-01T00:00:01Z", false);
        gated["spec"] = json!({});
        s.insert(gated);
        s.insert(running(
            "flipped",
            4,
            false,
            "2026-01-01T00:00:09Z",
            "2026-01-01T00:00:03Z",
        ));
        let mut held = pod("held", 5, "Running", "2026-01-01T00:00:01Z", true);
        held["metadata"]["finalizers"] = json!(["example.com/keep"]);
        s.insert(held);
        s.insert(running(
            "ready",
            6,
            true,
            "2026-01-01T00:00:04Z",
            "2026-01-01T00:00:03Z",
        ));

        let (projected, backlog) = s.kubelets_caught_up();
        assert_eq!(
            backlog,
            KubeletBacklog {
                terminating: 1,
                starting: 1,
                unprobed: 1
            }
        );
        let names: Vec<&str> = projected
            .pods
            .iter()
            .filter_map(|p| p.walk(&["metadata", "name"]).and_then(Value::as_str))
            .collect();
        assert!(!names.contains(&"stopping"), "{names:?}");
        assert_eq!(names.len(), 6);
        let ready = |name: &str| pod_is_ready(projected.pod_named(name).unwrap());
        assert!(ready("starting") && ready("unprobed") && ready("ready"));
        assert!(!ready("gated") && !ready("flipped") && !ready("held"));
        assert_eq!(phase(projected.pod_named("starting").unwrap()), "Running");
        assert_eq!(phase(projected.pod_named("gated").unwrap()), "Pending");
        // The snapshot itself is untouched, and a settled one owes nothing.
        assert_eq!(s.pods.len(), 7);
        let settled = projected.kubelets_caught_up();
        assert!(settled.1.is_empty(), "{}", settled.1);
        assert_eq!(settled.0, projected);
    }
}
