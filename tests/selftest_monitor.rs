//! Self-tests of the invariant monitor: synthetic timelines that break each invariant (every
//! one must be caught) and legitimate ones (no false positives).

use std::collections::HashMap;

use grove_conformance::monitor::{Actor, Entry, EventType, Monitor, SeenRequest, Violation};
use grove_conformance::vocab::{Kind, Revision, Vocabulary};
use serde_json::{Value, json};

use Actor::{Harness, Implementation as Impl};

/// A tiny fake API server: keeps objects, stamps uids and resourceVersions, feeds the monitor.
struct Sim {
    monitor: Monitor,
    rv: u64,
    next_uid: u64,
    objects: HashMap<(Kind, String), Value>,
    found: Vec<Violation>,
    /// Leave out every `*-replica-index` label (no clause requires them).
    without_replica_index_labels: bool,
}

impl Sim {
    fn new() -> Self {
        Sim {
            monitor: Monitor::new(Vocabulary::default()),
            rv: 100,
            next_uid: 1,
            objects: HashMap::new(),
            found: Vec::new(),
            without_replica_index_labels: false,
        }
    }

    fn feed(&mut self, kind: Kind, event: EventType, mut object: Value, actor: Actor) {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let entry = Entry::new(kind, event, object, actor).unwrap();
        let v = self.monitor.observe(entry);
        self.found.extend(v);
    }

    fn uid(&self, kind: Kind, name: &str) -> String {
        self.objects[&(kind, name.to_owned())]["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn add(&mut self, kind: Kind, mut object: Value, actor: Actor) {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        object["kind"] = json!(kind.as_str());
        object["metadata"]["uid"] = json!(format!("{:08x}-uid", self.next_uid));
        if self.without_replica_index_labels
            && let Some(labels) = object["metadata"]["labels"].as_object_mut()
        {
            labels.retain(|k, _| !k.ends_with("-replica-index"));
        }
        self.next_uid += 1;
        self.objects.insert((kind, name), object.clone());
        self.feed(kind, EventType::Added, object, actor);
    }

    fn modify(&mut self, kind: Kind, name: &str, actor: Actor, f: impl FnOnce(&mut Value)) {
        let object = self.objects.get_mut(&(kind, name.to_owned())).unwrap();
        f(object);
        let object = object.clone();
        self.feed(kind, EventType::Modified, object, actor);
    }

    /// Starts a graceful deletion (deletionTimestamp set).
    fn delete(&mut self, kind: Kind, name: &str, actor: Actor) {
        self.modify(kind, name, actor, |o| {
            o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        });
    }

    /// The object is gone (finalisation, by `actor`).
    fn gone(&mut self, kind: Kind, name: &str, actor: Actor) {
        let object = self.objects.remove(&(kind, name.to_owned())).unwrap();
        self.feed(kind, EventType::Deleted, object, actor);
    }

    fn condition(&mut self, kind: Kind, name: &str, actor: Actor, type_: &str, status: &str) {
        self.modify(kind, name, actor, |o| {
            let list = o["status"]["conditions"].as_array_mut().unwrap();
            list.retain(|c| c["type"] != type_);
            list.push(json!({"type": type_, "status": status}));
        });
    }

    /// The implementation writes `MinAvailableBreached` with `status` on `kind` `name`.
    fn breach(&mut self, kind: Kind, name: &str, status: &str) {
        self.condition(kind, name, Impl, "MinAvailableBreached", status);
    }

    fn counts(&mut self, kind: Kind, name: &str, counts: Value) {
        self.modify(kind, name, Impl, |o| {
            o["status"]["replicaRestartCounts"] = counts
        });
    }

    fn phase(&mut self, name: &str, phase: &str) {
        self.modify(Kind::Pod, name, Harness, |o| {
            o["status"]["phase"] = json!(phase)
        });
    }

    fn clauses(&self) -> Vec<&'static str> {
        self.found.iter().map(|v| v.clause).collect()
    }

    fn assert_clean(&self) {
        assert!(
            self.found.is_empty(),
            "unexpected violations:\n{}\ntimeline:\n{}",
            self.found.iter().map(Violation::render).collect::<String>(),
            self.monitor.render_timeline()
        );
    }
}

fn owner(kind: Kind, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": kind.api_version(), "kind": kind.as_str(), "name": name, "uid": uid, "controller": true}])
}

/// A leader-driven job: PCS `job` → PCSG `job-0-trainer` (leader ×1, worker ×2, optional
/// regular `sidecar` ×1), targetNames [leader], PCSG budget `budget`.
fn leader_worker(budget: u32, sidecar: bool) -> Sim {
    leader_worker_in(Sim::new(), budget, sidecar)
}

fn leader_worker_in(mut sim: Sim, budget: u32, sidecar: bool) -> Sim {
    let aware = json!({"completion": {}});
    let mut cliques = vec![
        json!({"name": "leader", "spec": {"replicas": 1, "policy": aware, "podSpec": {}}}),
        json!({"name": "worker", "spec": {"replicas": 2, "policy": aware, "podSpec": {}}}),
    ];
    let mut names = vec!["leader", "worker"];
    if sidecar {
        cliques.push(json!({"name": "sidecar", "spec": {"replicas": 1, "podSpec": {}}}));
        names.push("sidecar");
    }
    sim.add(
        Kind::PodCliqueSet,
        json!({"metadata": {"name": "job"}, "spec": {"replicas": 1, "template": {
            "cliques": cliques,
            "podCliqueScalingGroups": [{"name": "trainer", "cliqueNames": names, "replicas": 1,
                "policy": {"completion": {"success": {"targetNames": ["leader"]},
                                          "failure": {"maxRestarts": budget}}}}]}},
            "status": {"conditions": []}}),
        Harness,
    );
    let pcs = sim.uid(Kind::PodCliqueSet, "job");
    sim.add(
        Kind::PodCliqueScalingGroup,
        json!({"metadata": {"name": "job-0-trainer", "ownerReferences": owner(Kind::PodCliqueSet, "job", &pcs),
            "labels": {"app.kubernetes.io/part-of": "job", "grove.io/podcliqueset-replica-index": "0"}},
            "spec": {"replicas": 1, "cliqueNames": names},
            "status": {"conditions": [], "replicaRestartCounts": [0]}}),
        Impl,
    );
    create_attempt(&mut sim, sidecar);
    sim
}

/// Creates the PodCliques and pods of PCSG replica 0 (one attempt).
fn create_attempt(sim: &mut Sim, sidecar: bool) {
    let pcsg = sim.uid(Kind::PodCliqueScalingGroup, "job-0-trainer");
    let mut cliques = vec![("leader", 1, true), ("worker", 2, true)];
    if sidecar {
        cliques.push(("sidecar", 1, false));
    }
    for (clique, replicas, aware) in cliques {
        let name = format!("job-0-trainer-0-{clique}");
        let mut spec = json!({"replicas": replicas, "podSpec": {}});
        if aware {
            spec["policy"] = json!({"completion": {}});
        }
        sim.add(
            Kind::PodClique,
            json!({"metadata": {"name": name, "ownerReferences": owner(Kind::PodCliqueScalingGroup, "job-0-trainer", &pcsg),
                "labels": {"app.kubernetes.io/part-of": "job", "grove.io/podcliqueset-replica-index": "0",
                    "grove.io/podcliquescalinggroup": "job-0-trainer", "grove.io/podcliquescalinggroup-replica-index": "0"}},
                "spec": spec, "status": {"conditions": []}}),
            Impl,
        );
        for i in 0..replicas {
            add_pod(sim, &name, i, Impl);
        }
    }
}

fn add_pod(sim: &mut Sim, clique: &str, index: u32, actor: Actor) {
    let uid = sim.uid(Kind::PodClique, clique);
    let suffix = sim.next_uid;
    sim.add(
        Kind::Pod,
        json!({"metadata": {"name": format!("{clique}-x{suffix}"), "ownerReferences": owner(Kind::PodClique, clique, &uid),
            "labels": {"grove.io/podclique": clique, "grove.io/podclique-pod-index": index.to_string(),
                "app.kubernetes.io/part-of": "job"}},
            "status": {"phase": "Running"}}),
        actor,
    );
}

fn pod_name(sim: &Sim, clique: &str, index: u32) -> String {
    sim.objects
        .iter()
        .find(|((k, _), o)| {
            *k == Kind::Pod
                && o["metadata"]["labels"]["grove.io/podclique"] == clique
                && o["metadata"]["labels"]["grove.io/podclique-pod-index"]
                    .as_str()
                    .and_then(|s| s.parse::<u32>().ok())
                    == Some(index)
                && o["metadata"]["deletionTimestamp"].is_null()
        })
        .map(|((_, n), _)| n.clone())
        .unwrap()
}

/// The leader pod of replica 0 succeeds and the implementation marks its PodClique Completed.
fn leader_completes(sim: &mut Sim) {
    let leader = pod_name(sim, "job-0-trainer-0-leader", 0);
    sim.phase(&leader, "Succeeded");
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-leader",
        Impl,
        "Completed",
        "True",
    );
}

/// The implementation deletes every PodClique of replica 0 and their pods (cascade).
fn delete_replica(sim: &mut Sim, sidecar: bool) {
    let mut cliques = vec!["leader", "worker"];
    if sidecar {
        cliques.push("sidecar");
    }
    for c in &cliques {
        sim.delete(Kind::PodClique, &format!("job-0-trainer-0-{c}"), Impl);
    }
    let pods: Vec<String> = sim
        .objects
        .keys()
        .filter(|(k, _)| *k == Kind::Pod)
        .map(|(_, n)| n.clone())
        .collect();
    for p in pods {
        sim.delete(Kind::Pod, &p, Impl);
        sim.gone(Kind::Pod, &p, Harness);
    }
    for c in &cliques {
        sim.gone(Kind::PodClique, &format!("job-0-trainer-0-{c}"), Impl);
    }
}

#[test]
fn a_legitimate_gang_restart_then_completion_is_clean() {
    let mut sim = leader_worker(1, false);
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.phase(&w1, "Failed");
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    delete_replica(&mut sim, false);
    create_attempt(&mut sim, false);
    // The new attempt completes through its leader; the workers are cleaned up (C2).
    leader_completes(&mut sim);
    sim.condition(
        Kind::PodCliqueScalingGroup,
        "job-0-trainer",
        Impl,
        "Completed",
        "True",
    );
    sim.condition(Kind::PodCliqueSet, "job", Impl, "Completed", "True");
    sim.delete(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    let w0 = pod_name(&sim, "job-0-trainer-0-worker", 0);
    sim.delete(Kind::Pod, &w0, Impl);
    sim.assert_clean();
    assert!(sim.monitor.timeline().len() > 20);
}

#[test]
fn harness_deletions_and_a_clique_failure_are_clean() {
    let mut sim = leader_worker(0, false);
    let w0 = pod_name(&sim, "job-0-trainer-0-worker", 0);
    // Evicted by the harness: the pod vanishes without a terminal phase.
    sim.delete(Kind::Pod, &w0, Harness);
    sim.gone(Kind::Pod, &w0, Harness);
    // E3 + C1: Failed first, then the remaining active pod is deleted.
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.delete(Kind::Pod, &w1, Impl);
    // E9: budget 0, the PCSG fails, then its non-terminal PodCliques are deleted (C2).
    sim.condition(
        Kind::PodCliqueScalingGroup,
        "job-0-trainer",
        Impl,
        "Failed",
        "True",
    );
    sim.delete(Kind::PodClique, "job-0-trainer-0-leader", Impl);
    sim.assert_clean();
}

#[test]
fn option_a_completion_with_a_simultaneous_failure_is_clean() {
    let mut sim = leader_worker(1, false);
    let leader = pod_name(&sim, "job-0-trainer-0-leader", 0);
    let w0 = pod_name(&sim, "job-0-trainer-0-worker", 0);
    sim.phase(&leader, "Succeeded");
    sim.phase(&w0, "Failed");
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-leader",
        Harness,
        "Completed",
        "True",
    );
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Harness,
        "Failed",
        "True",
    );
    // The replica is complete: worker cleanup needs no increment.
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.delete(Kind::Pod, &w1, Impl);
    sim.condition(
        Kind::PodCliqueScalingGroup,
        "job-0-trainer",
        Impl,
        "Completed",
        "True",
    );
    sim.delete(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    sim.assert_clean();
}

#[test]
fn a_regular_gang_termination_consumes_no_budget_and_is_clean() {
    let mut sim = leader_worker(1, true);
    sim.breach(Kind::PodClique, "job-0-trainer-0-sidecar", "True");
    delete_replica(&mut sim, true);
    create_attempt(&mut sim, true);
    sim.assert_clean();
}

#[test]
fn e3_a_replacement_pod_is_caught() {
    let mut sim = leader_worker(1, false);
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.delete(Kind::Pod, &w1, Harness);
    sim.gone(Kind::Pod, &w1, Harness);
    add_pod(&mut sim, "job-0-trainer-0-worker", 1, Impl);
    assert_eq!(sim.clauses(), ["E3"]);
    let v = &sim.found[0];
    assert!(
        v.message
            .contains("index 1 of completion-aware PodClique job-0-trainer-0-worker"),
        "{}",
        v.message
    );
    assert_eq!(v.evidence.len(), 4, "{}", v.slice);
    assert!(v.slice.contains("DELETED  Pod"), "{}", v.slice);
}

#[test]
fn e6_both_true_and_a_reverted_condition_are_caught() {
    let mut sim = leader_worker(1, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-leader",
        Impl,
        "Completed",
        "True",
    );
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-leader",
        Impl,
        "Failed",
        "True",
    );
    assert_eq!(sim.clauses(), ["E6"]);
    let mut sim = leader_worker(1, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "False",
    );
    assert_eq!(sim.clauses(), ["E6"]);
    assert!(sim.found[0].message.contains("was Failed and is no longer"));
    // The harness's own writes are never held against the implementation.
    let mut sim = leader_worker(1, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Harness,
        "Failed",
        "True",
    );
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Harness,
        "Failed",
        "False",
    );
    sim.assert_clean();
}

#[test]
fn r3_decrease_jump_and_double_count_are_caught() {
    let fail = |sim: &mut Sim| {
        sim.condition(
            Kind::PodClique,
            "job-0-trainer-0-worker",
            Impl,
            "Failed",
            "True",
        );
    };
    let mut sim = leader_worker(3, false);
    fail(&mut sim);
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([0]));
    assert_eq!(sim.clauses(), ["R3"]);
    assert!(sim.found[0].message.contains("decreased from 1 to 0"));

    let mut sim = leader_worker(3, false);
    fail(&mut sim);
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([2]));
    assert_eq!(sim.clauses(), ["R3"]);
    assert!(
        sim.found[0]
            .message
            .contains("grew from 0 to 2 in one write")
    );

    let mut sim = leader_worker(3, false);
    fail(&mut sim);
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([2]));
    assert_eq!(sim.clauses(), ["R3"]);
    assert!(sim.found[0].message.contains("a restart counted twice"));
}

#[test]
fn o1_deleting_before_the_terminal_condition_is_caught() {
    // Pods of a clique deleted before its Failed condition, with no budget.
    let mut sim = leader_worker(0, false);
    let w0 = pod_name(&sim, "job-0-trainer-0-worker", 0);
    sim.phase(&w0, "Failed");
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.delete(Kind::Pod, &w1, Impl);
    assert_eq!(sim.clauses(), ["O1"]);
    // A PodClique of the replica deleted before the PCSG shows Failed.
    let mut sim = leader_worker(0, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    sim.delete(Kind::PodClique, "job-0-trainer-0-leader", Impl);
    sim.condition(
        Kind::PodCliqueScalingGroup,
        "job-0-trainer",
        Impl,
        "Failed",
        "True",
    );
    assert_eq!(sim.clauses(), ["O1"]);
    let v = &sim.found[0];
    assert!(
        v.message
            .contains("PodClique job-0-trainer-0-leader deleted by the implementation too early"),
        "{}",
        v.message
    );
    assert!(v.slice.contains("Failed=True"), "{}", v.slice);
}

#[test]
fn o2_deleting_before_the_persisted_increment_is_caught() {
    let mut sim = leader_worker(1, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    sim.delete(Kind::PodClique, "job-0-trainer-0-leader", Impl);
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    assert_eq!(sim.clauses(), ["O2"]);
    assert!(
        sim.found[0]
            .message
            .contains("replicaRestartCounts[0] = 0 < maxRestarts 1"),
        "{}",
        sim.found[0].message
    );
}

#[test]
fn c4_creation_inside_a_terminal_scope_is_caught() {
    // A pod recreated in a Completed PodClique.
    // (The clique is given room for a second pod, so that the new pod is no E3 replacement.)
    let mut sim = leader_worker(1, false);
    sim.modify(Kind::PodClique, "job-0-trainer-0-leader", Harness, |o| {
        o["spec"]["replicas"] = json!(2)
    });
    leader_completes(&mut sim);
    add_pod(&mut sim, "job-0-trainer-0-leader", 1, Impl);
    assert_eq!(sim.clauses(), ["C4"]);
    // A PodClique recreated in a Completed PCSG replica after cleanup.
    let mut sim = leader_worker(1, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-leader",
        Impl,
        "Completed",
        "True",
    );
    sim.condition(
        Kind::PodCliqueScalingGroup,
        "job-0-trainer",
        Impl,
        "Completed",
        "True",
    );
    sim.delete(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    sim.gone(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    let pcsg = sim.uid(Kind::PodCliqueScalingGroup, "job-0-trainer");
    sim.add(
        Kind::PodClique,
        json!({"metadata": {"name": "job-0-trainer-0-worker", "ownerReferences": owner(Kind::PodCliqueScalingGroup, "job-0-trainer", &pcsg),
            "labels": {"app.kubernetes.io/part-of": "job", "grove.io/podcliqueset-replica-index": "0",
                "grove.io/podcliquescalinggroup": "job-0-trainer", "grove.io/podcliquescalinggroup-replica-index": "0"}},
            "spec": {"replicas": 2, "policy": {"completion": {}}}, "status": {"conditions": []}}),
        Impl,
    );
    assert_eq!(sim.clauses(), ["C4"]);
    assert!(
        sim.found[0]
            .message
            .contains("inside replica 0 of PodCliqueScalingGroup job-0-trainer")
    );
}

#[test]
fn phase_based_revisions_are_read_through_the_vocabulary() {
    let mut monitor = Monitor::new(Vocabulary::new(Revision::GrovePr728));
    let mut clique = json!({"kind": "PodClique", "metadata": {"name": "job-0-worker", "uid": "u1", "resourceVersion": "1"},
        "spec": {"podSpec": {"restartPolicy": "Never"}}, "status": {"phase": "Failed"}});
    monitor.observe(Entry::new(Kind::PodClique, EventType::Added, clique.clone(), Impl).unwrap());
    clique["status"]["phase"] = json!("Running");
    clique["metadata"]["resourceVersion"] = json!("2");
    let v =
        monitor.observe(Entry::new(Kind::PodClique, EventType::Modified, clique, Impl).unwrap());
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].clause, "E6");
}

#[test]
fn entries_need_metadata() {
    let err = Entry::new(
        Kind::Pod,
        EventType::Added,
        json!({"metadata": {"name": "p"}}),
        Impl,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to read `metadata.uid` of a watched Pod object"
    );
}

#[test]
fn c4_spares_a_new_attempt_starting_while_its_replica_completes() {
    // The leader completes (the replica is complete by evaluation) while the worker clique of
    // the same attempt creates its pods; the group has not written Completed yet. (The clique
    // is given room for more pods than the fixture made, so they are no E3 replacements.)
    let mut sim = leader_worker(1, false);
    sim.modify(Kind::PodClique, "job-0-trainer-0-worker", Harness, |o| {
        o["spec"]["replicas"] = json!(8)
    });
    leader_completes(&mut sim);
    add_pod(&mut sim, "job-0-trainer-0-worker", 5, Impl);
    assert!(sim.clauses().is_empty(), "{:?}", sim.found);
    // Once the group's Completed is persisted, a new pod is inside a terminal scope, unless
    // its create was already under way: only the requests can tell.
    sim.condition(
        Kind::PodCliqueScalingGroup,
        "job-0-trainer",
        Impl,
        "Completed",
        "True",
    );
    let terminal = sim.rv;
    add_pod(&mut sim, "job-0-trainer-0-worker", 6, Impl);
    assert!(sim.clauses().is_empty(), "{:?}", sim.found);
    let undecided = sim.monitor.undecided().to_vec();
    assert_eq!(undecided.len(), 1);
    let pod = &undecided[0];
    assert_eq!(pod.revisions(), [sim.rv, terminal]);
    assert_eq!(
        pod.parent,
        (
            "podcliquescalinggroups".to_owned(),
            "job-0-trainer".to_owned()
        )
    );
    let write = |revision, arrived, answered_after| SeenRequest {
        arrived,
        answered_after: Some(answered_after),
        revision: Some(revision),
        read: None,
    };
    let read = |name: &str, arrived, answered_after| SeenRequest {
        arrived,
        answered_after: Some(answered_after),
        revision: None,
        read: Some(("podcliquescalinggroups".to_owned(), name.to_owned())),
    };
    let terminal_write = write(terminal, 10, 12);
    // Read afresh after the terminal write's answer, then created: a breach.
    let late = pod
        .judge(&[
            terminal_write.clone(),
            read("job-0-trainer", 13, 14),
            write(sim.rv, 15, 16),
        ])
        .expect("a create sent after a fresh read showed the replica terminal");
    assert_eq!(late.clause, "C4");
    assert!(late.message.contains("request #15"), "{}", late.message);
    assert!(late.message.contains("request #13"), "{}", late.message);
    assert!(late.message.contains("request #10"), "{}", late.message);
    assert_eq!(late.evidence.len(), 2);
    // A LIST of the kind shows it too.
    assert!(
        pod.judge(&[
            terminal_write.clone(),
            read("", 13, 14),
            write(sim.rv, 15, 16)
        ])
        .is_some()
    );
    // Sent after the answer, but on no fresh read: it may rest on a check made before.
    assert_eq!(
        pod.judge(&[terminal_write.clone(), write(sim.rv, 15, 16)]),
        None
    );
    // A read sent before the terminal write was answered, or answered after the create was
    // sent, or of another object, shows nothing.
    for r in [
        read("job-0-trainer", 11, 14),
        read("job-0-trainer", 13, 15),
        read("job-0-other", 13, 14),
    ] {
        assert_eq!(
            pod.judge(&[terminal_write.clone(), r, write(sim.rv, 15, 16)]),
            None
        );
    }
    // Either write unknown (made past the proxy): nothing shows a breach.
    assert_eq!(
        pod.judge(&[read("job-0-trainer", 13, 14), write(sim.rv, 15, 16)]),
        None
    );
    assert_eq!(pod.judge(&[]), None);
    // A pod in the Completed clique itself stays a breach at once.
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Completed",
        "True",
    );
    add_pod(&mut sim, "job-0-trainer-0-worker", 7, Impl);
    assert_eq!(sim.clauses(), ["C4"]);
}

#[test]
fn a_late_entry_is_judged_in_resource_version_order() {
    // The increment is persisted, then the restart deletes: clean.
    let mut sim = leader_worker(1, false);
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    sim.delete(Kind::PodClique, "job-0-trainer-0-leader", Impl);
    sim.assert_clean();
    // A lagging watch delivers the deletion before the status write: in arrival order the
    // monitor sees an O2 violation; replayed in resource-version order, none.
    let mut entries = sim.monitor.timeline().to_vec();
    let n = entries.len();
    entries.swap(n - 2, n - 1);
    let mut arrival = Monitor::new(Vocabulary::default());
    for entry in entries.clone() {
        arrival.observe(entry);
    }
    let clauses: Vec<_> = arrival.violations().iter().map(|v| v.clause).collect();
    assert_eq!(clauses, ["O2"]);
    let replayed = Monitor::new(Vocabulary::default()).replayed_with(entries);
    assert!(
        replayed.violations().is_empty(),
        "{}",
        replayed.render_timeline()
    );
    assert_eq!(replayed.timeline().len(), n);
}

#[test]
fn e3_a_pod_beyond_the_first_attempts_indices_is_caught() {
    // A replacement under a fresh index (replicas 2: indices 0 and 1 only).
    let mut sim = leader_worker(1, false);
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.delete(Kind::Pod, &w1, Harness);
    sim.gone(Kind::Pod, &w1, Harness);
    add_pod(&mut sim, "job-0-trainer-0-worker", 2, Impl);
    assert_eq!(sim.clauses(), ["E3"]);
    assert!(
        sim.found[0]
            .message
            .contains("(index 2) created in completion-aware PodClique job-0-trainer-0-worker beyond its first attempt's 2 pods"),
        "{}",
        sim.found[0].message
    );
    // A third pod with no index label at all.
    let mut sim = leader_worker(1, false);
    let uid = sim.uid(Kind::PodClique, "job-0-trainer-0-worker");
    sim.add(
        Kind::Pod,
        json!({"metadata": {"name": "job-0-trainer-0-worker-extra",
            "ownerReferences": owner(Kind::PodClique, "job-0-trainer-0-worker", &uid),
            "labels": {"grove.io/podclique": "job-0-trainer-0-worker"}},
            "status": {"phase": "Running"}}),
        Impl,
    );
    assert_eq!(sim.clauses(), ["E3"]);
    assert!(
        sim.found[0].message.contains("(index none)"),
        "{}",
        sim.found[0].message
    );
    // The first attempt's own pods are not replacements, in any order of indices.
    let mut sim = leader_worker(1, false);
    let uid = sim.uid(Kind::PodCliqueScalingGroup, "job-0-trainer");
    sim.add(
        Kind::PodClique,
        json!({"metadata": {"name": "job-0-trainer-0-extra", "ownerReferences": owner(Kind::PodCliqueScalingGroup, "job-0-trainer", &uid)},
            "spec": {"replicas": 3, "policy": {"completion": {}}, "podSpec": {}}, "status": {"conditions": []}}),
        Impl,
    );
    for i in [2, 0, 1] {
        add_pod(&mut sim, "job-0-trainer-0-extra", i, Impl);
    }
    sim.assert_clean();
}

#[test]
fn replica_membership_comes_from_b1_names_without_index_labels() {
    let unlabelled = || Sim {
        without_replica_index_labels: true,
        ..Sim::new()
    };
    // O1 still caught: a PodClique of the replica deleted before the PCSG shows Failed.
    let mut sim = leader_worker_in(unlabelled(), 0, false);
    assert!(
        !sim.monitor.render_timeline().contains("replica-index"),
        "labels left in"
    );
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    sim.delete(Kind::PodClique, "job-0-trainer-0-leader", Impl);
    assert_eq!(sim.clauses(), ["O1"]);
    // A legitimate restart stays clean, and its increment is judged against the replica.
    let mut sim = leader_worker_in(unlabelled(), 1, false);
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.phase(&w1, "Failed");
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    delete_replica(&mut sim, false);
    create_attempt(&mut sim, false);
    sim.assert_clean();
    // A second increment with no failure in between is a double count (R3).
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([2]));
    assert_eq!(sim.clauses(), ["R3"]);
}

#[test]
fn a_healed_breach_authorises_no_later_deletion() {
    let mut sim = leader_worker(1, true);
    sim.breach(Kind::PodClique, "job-0-trainer-0-sidecar", "True");
    // The sidecar recovers before any gang termination.
    sim.breach(Kind::PodClique, "job-0-trainer-0-sidecar", "False");
    sim.assert_clean();
    sim.delete(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    assert_eq!(sim.clauses(), ["O1"]);
}

#[test]
fn a_group_breach_justifies_terminating_the_job_replica_and_a_clique_breach_alone_does_not() {
    // A regular clique's breach justifies terminating its group's replica (the nearest);
    // the PodCliqueSet replica only once the group itself shows MinAvailableBreached=True.
    let mut sim = leader_worker(1, true);
    sim.breach(Kind::PodClique, "job-0-trainer-0-sidecar", "True");
    sim.delete(Kind::PodCliqueScalingGroup, "job-0-trainer", Impl);
    assert_eq!(sim.clauses(), ["O1"]);
    assert!(
        sim.found[0].message.contains(
            "PodCliqueScalingGroup job-0-trainer deleted by the implementation too early"
        ),
        "{}",
        sim.found[0].message
    );
    let mut sim = leader_worker(1, true);
    sim.breach(Kind::PodClique, "job-0-trainer-0-sidecar", "True");
    sim.breach(Kind::PodCliqueScalingGroup, "job-0-trainer", "True");
    sim.delete(Kind::PodCliqueScalingGroup, "job-0-trainer", Impl);
    delete_replica(&mut sim, true);
    sim.assert_clean();
}

/// A job beside a regular scaling group: PCS `job` (budget 1) → standalone completion-aware
/// `trainer`, and regular PCSG `job-0-serving` → PodClique `job-0-serving-0-ps`.
fn job_beside_a_regular_group() -> Sim {
    let mut sim = Sim::new();
    sim.add(
        Kind::PodCliqueSet,
        json!({"metadata": {"name": "job"}, "spec": {"replicas": 1,
            "policy": {"completion": {"failure": {"maxRestarts": 1}}},
            "template": {
                "cliques": [
                    {"name": "trainer", "spec": {"replicas": 1, "policy": {"completion": {}}, "podSpec": {}}},
                    {"name": "ps", "spec": {"replicas": 1, "podSpec": {}}}],
                "podCliqueScalingGroups": [{"name": "serving", "cliqueNames": ["ps"], "replicas": 1}]}},
            "status": {"conditions": [], "replicaRestartCounts": [0]}}),
        Harness,
    );
    let pcs = sim.uid(Kind::PodCliqueSet, "job");
    sim.add(
        Kind::PodClique,
        json!({"metadata": {"name": "job-0-trainer", "ownerReferences": owner(Kind::PodCliqueSet, "job", &pcs),
            "labels": {"app.kubernetes.io/part-of": "job", "grove.io/podcliqueset-replica-index": "0"}},
            "spec": {"replicas": 1, "policy": {"completion": {}}, "podSpec": {}}, "status": {"conditions": []}}),
        Impl,
    );
    add_group(&mut sim);
    sim
}

/// Creates the regular group `job-0-serving` and its PodClique.
fn add_group(sim: &mut Sim) {
    let pcs = sim.uid(Kind::PodCliqueSet, "job");
    sim.add(
        Kind::PodCliqueScalingGroup,
        json!({"metadata": {"name": "job-0-serving", "ownerReferences": owner(Kind::PodCliqueSet, "job", &pcs),
            "labels": {"app.kubernetes.io/part-of": "job", "grove.io/podcliqueset-replica-index": "0"}},
            "spec": {"replicas": 1, "cliqueNames": ["ps"]}, "status": {"conditions": []}}),
        Impl,
    );
    add_ps(sim);
}

/// Creates `job-0-serving-0-ps`, owned by the group of that name as the monitor knows it last.
fn add_ps(sim: &mut Sim) {
    let group = sim.uid(Kind::PodCliqueScalingGroup, "job-0-serving");
    sim.add(
        Kind::PodClique,
        json!({"metadata": {"name": "job-0-serving-0-ps", "ownerReferences": owner(Kind::PodCliqueScalingGroup, "job-0-serving", &group),
            "labels": {"app.kubernetes.io/part-of": "job", "grove.io/podcliqueset-replica-index": "0",
                "grove.io/podcliquescalinggroup": "job-0-serving", "grove.io/podcliquescalinggroup-replica-index": "0"}},
            "spec": {"replicas": 1, "podSpec": {}}, "status": {"conditions": []}}),
        Impl,
    );
}

/// The regular clique of `job-0-serving` breaches, and so does the group.
fn group_breaches(sim: &mut Sim) {
    sim.breach(Kind::PodClique, "job-0-serving-0-ps", "True");
    sim.breach(Kind::PodCliqueScalingGroup, "job-0-serving", "True");
}

#[test]
fn a_regular_group_gang_termination_and_its_orphan_are_clean() {
    let mut sim = job_beside_a_regular_group();
    group_breaches(&mut sim);
    // The job replica's gang termination, from the group's breach.
    sim.delete(Kind::PodClique, "job-0-trainer", Impl);
    sim.gone(Kind::PodClique, "job-0-trainer", Impl);
    sim.delete(Kind::PodCliqueScalingGroup, "job-0-serving", Impl);
    sim.gone(Kind::PodClique, "job-0-serving-0-ps", Impl);
    // A reconcile that read the group just before its deletion creates a PodClique owned by
    // it; the garbage collector removes that orphan: the cascade of the group's deletion.
    add_ps(&mut sim);
    sim.gone(Kind::PodCliqueScalingGroup, "job-0-serving", Impl);
    sim.gone(Kind::PodClique, "job-0-serving-0-ps", Impl);
    sim.assert_clean();
    // The recreated group's own PodClique, deleted with no breach since, is O1.
    add_group(&mut sim);
    sim.delete(Kind::PodClique, "job-0-serving-0-ps", Impl);
    assert_eq!(sim.clauses(), ["O1"]);
    assert!(
        sim.found[0]
            .message
            .contains("PodClique job-0-serving-0-ps deleted by the implementation too early"),
        "{}",
        sim.found[0].message
    );
}

#[test]
fn a_regular_clique_breach_without_a_group_breach_or_after_it_healed_spares_nothing_else() {
    // The clique breaches but the group keeps its minAvailable: the job's trainer stays.
    let mut sim = job_beside_a_regular_group();
    sim.breach(Kind::PodClique, "job-0-serving-0-ps", "True");
    sim.delete(Kind::PodClique, "job-0-trainer", Impl);
    assert_eq!(sim.clauses(), ["O1"]);
    // The group breaches and heals with the same clique: a later deletion of the trainer is
    // judged again (here O2: a failure, budget left, no persisted restart).
    let mut sim = job_beside_a_regular_group();
    group_breaches(&mut sim);
    sim.breach(Kind::PodClique, "job-0-serving-0-ps", "False");
    sim.breach(Kind::PodCliqueScalingGroup, "job-0-serving", "False");
    sim.assert_clean();
    add_pod(&mut sim, "job-0-trainer", 0, Impl);
    let trainer = pod_name(&sim, "job-0-trainer", 0);
    sim.phase(&trainer, "Failed");
    sim.delete(Kind::PodClique, "job-0-trainer", Impl);
    assert_eq!(sim.clauses(), ["O2"]);
}

#[test]
fn a_job_replica_termination_racing_the_groups_own_is_clean() {
    // The group tears its breached replica down and its recreated clique makes the group's
    // condition not True; the PodCliqueSet replica's termination, decided on the same breach
    // from a cache that still showed it, follows.
    let mut sim = job_beside_a_regular_group();
    group_breaches(&mut sim);
    sim.delete(Kind::PodClique, "job-0-serving-0-ps", Impl);
    sim.gone(Kind::PodClique, "job-0-serving-0-ps", Impl);
    add_ps(&mut sim);
    sim.breach(Kind::PodCliqueScalingGroup, "job-0-serving", "False");
    sim.delete(Kind::PodClique, "job-0-trainer", Impl);
    sim.delete(Kind::PodCliqueScalingGroup, "job-0-serving", Impl);
    sim.assert_clean();
}

#[test]
fn c4_a_completed_replica_run_again_is_caught() {
    // Replica 0 completes by its leader; its group has other replicas to wait for, so no
    // terminal condition is persisted. Its worker clique is cleaned up (C2), then a user
    // deletes the completed leader clique.
    let mut sim = leader_worker(1, false);
    sim.modify(Kind::PodCliqueScalingGroup, "job-0-trainer", Harness, |o| {
        o["spec"]["replicas"] = json!(2)
    });
    leader_completes(&mut sim);
    let workers: Vec<String> = (0..2)
        .map(|i| pod_name(&sim, "job-0-trainer-0-worker", i))
        .collect();
    sim.delete(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    for w in &workers {
        sim.delete(Kind::Pod, w, Impl);
        sim.gone(Kind::Pod, w, Harness);
    }
    sim.gone(Kind::PodClique, "job-0-trainer-0-worker", Impl);
    let leader = pod_name(&sim, "job-0-trainer-0-leader", 0);
    sim.delete(Kind::PodClique, "job-0-trainer-0-leader", Harness);
    sim.gone(Kind::Pod, &leader, Harness);
    sim.gone(Kind::PodClique, "job-0-trainer-0-leader", Harness);
    sim.assert_clean();
    // The implementation creates the replica's cliques again: the finished replica is rerun.
    create_attempt(&mut sim, false);
    assert_eq!(sim.clauses(), ["C4", "C4"]);
    assert!(
        sim.found[0].message.contains(
            "PodClique job-0-trainer-0-leader created again inside replica 0 of PodCliqueScalingGroup job-0-trainer"
        ),
        "{}",
        sim.found[0].message
    );
}

#[test]
fn c4_spares_a_restart_that_raced_the_completion_and_a_completed_stale_attempt() {
    // The worker fails and, before the group evaluates it, the leader completes: a restart
    // decided on the failure alone is persisted after the completion, and the new attempt is
    // created where the completed one was (the cases judge whether that restart was right).
    let mut sim = leader_worker(2, false);
    let w0 = pod_name(&sim, "job-0-trainer-0-worker", 0);
    sim.phase(&w0, "Failed");
    sim.condition(
        Kind::PodClique,
        "job-0-trainer-0-worker",
        Impl,
        "Failed",
        "True",
    );
    leader_completes(&mut sim);
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([1]));
    delete_replica(&mut sim, false);
    create_attempt(&mut sim, false);
    sim.assert_clean();
    // The same with the restart persisted first and the old attempt's leader completing
    // after it: that attempt is already over, so its completion makes nothing final.
    let w1 = pod_name(&sim, "job-0-trainer-0-worker", 1);
    sim.phase(&w1, "Failed");
    sim.counts(Kind::PodCliqueScalingGroup, "job-0-trainer", json!([2]));
    leader_completes(&mut sim);
    delete_replica(&mut sim, false);
    create_attempt(&mut sim, false);
    sim.assert_clean();
}
