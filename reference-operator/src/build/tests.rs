//! Names, labels, owners, policies and pods as upstream materialises them (B1–B3, R7, V5).

use k8s_openapi::jiff::SignedDuration;
use serde_json::json;

use super::*;
use crate::api::{PodCliqueSet, PodCliqueSetSpec};
use crate::names::{API_VERSION, KIND_PCLQ, KIND_PCS, KIND_PCSG};

fn pcs() -> PodCliqueSet {
    let spec: PodCliqueSetSpec = serde_json::from_value(json!({
        "replicas": 2,
        "template": {
            "priorityClassName": "batch",
            "terminationDelay": "90s",
            "cliques": [
                {"name": "leader", "labels": {"team": "a"}, "annotations": {"note": "x"},
                 "spec": {"roleName": "leader", "replicas": 1, "policy": {"completion": {}},
                          "podSpec": {"containers": [{"name": "main", "image": "busybox",
                                                      "env": [{"name": "GROVE_PCLQ_NAME", "value": "stale"}]}]}}},
                {"name": "worker",
                 "spec": {"roleName": "worker", "replicas": 3, "policy": {"completion": {}},
                          "podSpec": {"containers": [{"name": "main", "image": "busybox"}],
                                      "initContainers": [{"name": "init", "image": "busybox"}]}}},
                {"name": "router",
                 "spec": {"roleName": "router", "replicas": 2, "minAvailable": 1,
                          "podSpec": {"containers": [{"name": "main", "image": "busybox"}]}}},
            ],
            "podCliqueScalingGroups": [
                {"name": "trainer", "cliqueNames": ["leader", "worker"], "replicas": 3, "minAvailable": 2,
                 "annotations": {"g": "1"}}
            ],
        },
        "policy": {"completion": {"failure": {"maxRestarts": 2}}},
    }))
    .expect("spec");
    let mut pcs = PodCliqueSet::new("job", spec);
    pcs.metadata.namespace = Some("ns".into());
    pcs.metadata.uid = Some("uid-pcs".into());
    pcs
}

fn persisted<K: kube::Resource>(mut obj: K, uid: &str) -> K {
    obj.meta_mut().uid = Some(uid.into());
    obj
}

fn label<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta().labels.as_ref()?.get(key).map(String::as_str)
}

#[test]
fn names_follow_upstream() {
    assert_eq!(podclique_name("job", 0, "router"), "job-0-router");
    assert_eq!(pcsg_name("job", 1, "trainer"), "job-1-trainer");
    assert_eq!(
        pcsg_podclique_name("job-1-trainer", 2, "leader"),
        "job-1-trainer-2-leader"
    );
    assert_eq!(headless_service_name("job", 1), "job-1");
    assert_eq!(base_podgang_name("job", 1), "job-1");
    assert_eq!(scaled_podgang_name("job-1-trainer", 0), "job-1-trainer-0");
    assert_eq!(pod_hostname("job-0-router", 3), "job-0-router-3");
}

#[test]
fn pcs_replica_children_are_standalone_cliques_and_scaling_groups() {
    let children = pcs_replica_children(&pcs(), 1, 4).expect("builds");
    let names: Vec<_> = children
        .podcliques
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, vec!["job-1-router"]);
    let groups: Vec<_> = children
        .scaling_groups
        .iter()
        .map(|g| g.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(groups, vec!["job-1-trainer"]);

    for obj in children
        .podcliques
        .iter()
        .map(|p| p.meta())
        .chain(children.scaling_groups.iter().map(|g| g.meta()))
    {
        let labels = obj.labels.as_ref().expect("labels");
        assert_eq!(labels[LABEL_MANAGED_BY], MANAGED_BY_VALUE);
        assert_eq!(labels[LABEL_PART_OF], "job");
        assert_eq!(labels[LABEL_PCS_REPLICA_INDEX], "1");
        assert_eq!(labels[LABEL_RESTART_ATTEMPT], "4", "R7");
        assert_eq!(obj.namespace.as_deref(), Some("ns"));
        let owner = &obj.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            (KIND_PCS, "uid-pcs")
        );
        assert_eq!(owner.api_version, API_VERSION);
        assert_eq!(owner.controller, Some(true), "B3");
    }

    let router = &children.podcliques[0].spec;
    assert_eq!(router.min_available, Some(1));
    assert_eq!(
        router.pod_spec.priority_class_name.as_deref(),
        Some("batch")
    );
    assert_eq!(
        router.pod_spec.restart_policy, None,
        "regular cliques keep their policy"
    );

    let group = &children.scaling_groups[0];
    assert_eq!(group.spec.replicas, 3);
    assert_eq!(group.spec.min_available, Some(2));
    assert_eq!(group.spec.clique_names, vec!["leader", "worker"]);
    assert!(
        group.spec.is_completion_aware(),
        "a completion-aware group says so"
    );
    assert_eq!(
        group.metadata.annotations.as_ref().expect("annotations")["g"],
        "1"
    );
}

#[test]
fn a_scaling_group_policy_is_copied_from_its_config() {
    let mut pcs = pcs();
    let groups = pcs
        .spec
        .template
        .pod_clique_scaling_groups
        .as_mut()
        .expect("groups");
    groups[0].policy = serde_json::from_value(
        json!({"completion": {"success": {"targetNames": ["leader"]}, "failure": {"maxRestarts": 1}}}),
    )
    .expect("policy");
    let children = pcs_replica_children(&pcs, 0, 0).expect("builds");
    assert_eq!(children.scaling_groups[0].spec.policy, groups_policy(&pcs));
}

fn groups_policy(pcs: &PodCliqueSet) -> Option<RunPolicy> {
    pcs.spec.template.scaling_groups()[0].policy.clone()
}

#[test]
fn a_regular_scaling_group_gets_no_policy() {
    let mut pcs = pcs();
    for c in &mut pcs.spec.template.cliques {
        c.spec.policy = None;
    }
    let children = pcs_replica_children(&pcs, 0, 0).expect("builds");
    assert!(!children.scaling_groups[0].spec.is_completion_aware());
}

#[test]
fn pcsg_replica_podcliques_carry_scaling_group_labels() {
    let pcs = pcs();
    let group = persisted(
        pcs_replica_children(&pcs, 1, 0)
            .expect("builds")
            .scaling_groups
            .remove(0),
        "uid-pcsg",
    );
    let cliques = pcsg_replica_podcliques(&pcs, &group, 2, 1).expect("builds");
    let names: Vec<_> = cliques
        .iter()
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        vec!["job-1-trainer-2-leader", "job-1-trainer-2-worker"]
    );
    let leader = &cliques[0];
    assert_eq!(label(leader, LABEL_PCSG), Some("job-1-trainer"));
    assert_eq!(label(leader, LABEL_PCSG_REPLICA_INDEX), Some("2"));
    assert_eq!(label(leader, LABEL_PCS_REPLICA_INDEX), Some("1"));
    assert_eq!(label(leader, LABEL_RESTART_ATTEMPT), Some("1"));
    assert_eq!(label(leader, "team"), Some("a"), "template labels are kept");
    let owner = &leader.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        (KIND_PCSG, "uid-pcsg")
    );
    assert_eq!(
        leader.spec.min_available,
        Some(1),
        "minAvailable defaults to replicas"
    );
    assert_eq!(
        leader.spec.pod_spec.restart_policy.as_deref(),
        Some("Never"),
        "V5"
    );
    assert!(
        leader.spec.is_completion_aware(),
        "policy copied from the template"
    );
}

#[test]
fn children_of_an_unpersisted_parent_cannot_be_owned() {
    let mut pcs = pcs();
    pcs.metadata.uid = None;
    assert_eq!(
        pcs_replica_children(&pcs, 0, 0),
        Err(BuildError::NotPersisted {
            kind: "PodCliqueSet"
        })
    );
}

#[test]
fn a_scaling_group_naming_an_unknown_clique_is_an_error() {
    let pcs = pcs();
    let mut group = persisted(
        pcs_replica_children(&pcs, 0, 0)
            .expect("builds")
            .scaling_groups
            .remove(0),
        "uid",
    );
    group.spec.clique_names.push("ghost".into());
    assert!(matches!(
        pcsg_replica_podcliques(&pcs, &group, 0, 0),
        Err(BuildError::NotInTemplate { .. })
    ));
}

fn pcsg_clique(replica: u32) -> (PodCliqueSet, PodCliqueScalingGroup, PodClique) {
    let pcs = pcs();
    let group = persisted(
        pcs_replica_children(&pcs, 1, 0)
            .expect("builds")
            .scaling_groups
            .remove(0),
        "uid-pcsg",
    );
    let clique = persisted(
        pcsg_replica_podcliques(&pcs, &group, replica, 0)
            .expect("builds")
            .remove(0),
        "uid-pclq",
    );
    (pcs, group, clique)
}

#[test]
fn a_pod_of_a_scaling_group_clique_has_everything_upstream_injects() {
    let (pcs, group, clique) = pcsg_clique(0);
    let ctx = pod_context(&pcs, &clique, Some(&group)).expect("context");
    assert_eq!(
        ctx.podgang(),
        "job-1",
        "replicas below minAvailable are in the base PodGang"
    );
    let pod = pod(&clique, 0, &ctx).expect("pod");

    assert_eq!(
        pod.metadata.generate_name.as_deref(),
        Some("job-1-trainer-0-leader-")
    );
    assert_eq!(pod.metadata.name, None);
    assert_eq!(label(&pod, LABEL_PODCLIQUE), Some("job-1-trainer-0-leader"));
    assert_eq!(label(&pod, LABEL_POD_INDEX), Some("0"));
    assert_eq!(label(&pod, LABEL_PODGANG), Some("job-1"));
    assert_eq!(label(&pod, LABEL_RESTART_ATTEMPT), Some("0"));
    assert_eq!(label(&pod, LABEL_PCSG), Some("job-1-trainer"));
    let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        (KIND_PCLQ, "uid-pclq")
    );

    let spec = pod.spec.expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("job-1-trainer-0-leader-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("job-1"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"), "V5");
    assert!(
        spec.scheduling_gates
            .iter()
            .flatten()
            .all(|g| g.name != SCHEDULING_GATE_PODGANG),
        "no PodGang lifts the gate, so pods are created without it"
    );
    let env: BTreeMap<_, _> = spec.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(env[ENV_PCS_NAME], "job");
    assert_eq!(env[ENV_PCS_INDEX], "1");
    assert_eq!(
        env[ENV_PCLQ_NAME], "job-1-trainer-0-leader",
        "an existing value is replaced"
    );
    assert_eq!(env[ENV_PCLQ_POD_INDEX], "0");
    assert_eq!(env[ENV_HEADLESS_SERVICE], "job-1.ns.svc.cluster.local");
    assert_eq!(env[ENV_PCSG_NAME], "job-1-trainer");
    assert_eq!(env[ENV_PCSG_INDEX], "0");
    assert_eq!(env[ENV_PCSG_TEMPLATE_NUM_PODS], "4", "leader 1 + worker 3");
    assert_eq!(
        spec.containers[0].env.as_ref().expect("env").len(),
        8,
        "no duplicates"
    );
}

#[test]
fn scaled_scaling_group_replicas_have_their_own_podgang() {
    let (pcs, group, clique) = pcsg_clique(2);
    let ctx = pod_context(&pcs, &clique, Some(&group)).expect("context");
    assert_eq!(ctx.podgang(), "job-1-trainer-0");
}

#[test]
fn init_containers_get_the_env_too() {
    let pcs = pcs();
    let group = persisted(
        pcs_replica_children(&pcs, 0, 0)
            .expect("builds")
            .scaling_groups
            .remove(0),
        "uid-pcsg",
    );
    let worker = persisted(
        pcsg_replica_podcliques(&pcs, &group, 0, 0)
            .expect("builds")
            .remove(1),
        "uid",
    );
    let ctx = pod_context(&pcs, &worker, Some(&group)).expect("context");
    let spec = pod(&worker, 2, &ctx).expect("pod").spec.expect("spec");
    let init_env = spec.init_containers.expect("init")[0]
        .env
        .clone()
        .expect("env");
    assert!(
        init_env
            .iter()
            .any(|e| e.name == ENV_PCLQ_POD_INDEX && e.value.as_deref() == Some("2"))
    );
}

#[test]
fn a_standalone_regular_pod_keeps_its_restart_policy_and_has_no_pcsg_env() {
    let pcs = pcs();
    let router = persisted(
        pcs_replica_children(&pcs, 0, 0)
            .expect("builds")
            .podcliques
            .remove(0),
        "uid",
    );
    let ctx = pod_context(&pcs, &router, None).expect("context");
    assert_eq!(ctx.scaling_group, None);
    let pod = pod(&router, 1, &ctx).expect("pod");
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.restart_policy, None);
    let env = spec.containers[0].env.clone().expect("env");
    assert_eq!(env.len(), 5);
    assert!(!env.iter().any(|e| e.name == ENV_PCSG_NAME));
}

#[test]
fn pod_context_needs_the_operator_labels() {
    let pcs = pcs();
    let mut router = persisted(
        pcs_replica_children(&pcs, 0, 0)
            .expect("builds")
            .podcliques
            .remove(0),
        "uid",
    );
    router.metadata.labels = None;
    assert!(matches!(
        pod_context(&pcs, &router, None),
        Err(BuildError::BadLabel {
            label: LABEL_PART_OF,
            ..
        })
    ));
}

#[test]
fn go_durations_parse() {
    let cases = [
        ("4h", Some(SignedDuration::from_hours(4))),
        ("90s", Some(SignedDuration::from_secs(90))),
        ("1m30s", Some(SignedDuration::from_secs(90))),
        ("1.5h", Some(SignedDuration::from_mins(90))),
        ("300ms", Some(SignedDuration::from_millis(300))),
        ("2us", Some(SignedDuration::from_micros(2))),
        ("-1s", Some(SignedDuration::from_secs(-1))),
        ("0", Some(SignedDuration::ZERO)),
        ("", None),
        ("5", None),
        ("1d", None),
        ("abc", None),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_go_duration(text), expected, "{text}");
    }
}

#[test]
fn termination_delay_defaults_to_four_hours() {
    let mut pcs = pcs();
    assert_eq!(termination_delay(&pcs), SignedDuration::from_secs(90));
    pcs.spec.template.termination_delay = None;
    assert_eq!(termination_delay(&pcs), DEFAULT_TERMINATION_DELAY);
    pcs.spec.template.termination_delay = Some("soon".into());
    assert_eq!(termination_delay(&pcs), DEFAULT_TERMINATION_DELAY);
}
