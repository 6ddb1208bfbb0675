//! The CEL rules evaluated client-side (kube's `cel` feature) against the generated CRD
//! schemas: every V-clause with a CEL rule is exercised with a rejected and an accepted input.
//!
//! The client-side evaluator pairs old and new list items by position where the apiserver
//! pairs list-map items by key, so transition tests keep the item order of the old object.

use kube::core::cel::Validator;
use serde_json::{Value, json};

use super::{Kind, NOT_CEL, rules};
use crate::crd;

fn schema(kind: Kind) -> Value {
    let crd = crd::crd(kind).expect("crd builds");
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("json")
}

/// Messages of the failed rules (empty when valid).
fn check(kind: Kind, object: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(&schema(kind), object, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

fn assert_valid(kind: Kind, object: &Value, old: Option<&Value>) {
    let errors = check(kind, object, old);
    assert!(errors.is_empty(), "expected valid, got {errors:#?}");
}

/// Asserts exactly the rules of `clause` fail, each message naming `field`.
fn assert_rejected(kind: Kind, object: &Value, old: Option<&Value>, clause: &str, field: &str) {
    let errors = check(kind, object, old);
    assert!(!errors.is_empty(), "expected {clause} to reject");
    for e in &errors {
        assert!(
            e.contains(&format!("({clause})")),
            "unexpected failure {e} for {clause}"
        );
        assert!(e.contains(field), "{e} does not name {field}");
    }
}

fn clique(name: &str, policy: Option<Value>) -> Value {
    let mut spec = json!({
        "roleName": name,
        "replicas": 2,
        "podSpec": {"containers": [{"name": "main", "image": "busybox"}]},
    });
    if let Some(p) = policy {
        spec["policy"] = p;
    }
    json!({"name": name, "spec": spec})
}

fn aware() -> Option<Value> {
    Some(json!({"completion": {}}))
}

/// A PCS with cliques `leader`, `worker` (both completion-aware) in scaling group `trainer`,
/// and a regular standalone clique `router`.
fn pcs() -> Value {
    json!({
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": {"name": "job"},
        "spec": {
            "replicas": 1,
            "template": {
                "cliques": [
                    clique("leader", aware()),
                    clique("worker", aware()),
                    clique("router", None),
                ],
                "podCliqueScalingGroups": [
                    {"name": "trainer", "cliqueNames": ["leader", "worker"], "replicas": 1, "minAvailable": 1}
                ],
            },
        },
    })
}

fn with(mut v: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let target = v.pointer_mut(parent).expect("parent exists");
    match target {
        Value::Array(items) => items[key.parse::<usize>().expect("index")] = value,
        Value::Object(map) => {
            map.insert(key.to_string(), value);
        }
        _ => panic!("cannot set {pointer}"),
    }
    v
}

fn without(mut v: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    if let Some(Value::Object(map)) = v.pointer_mut(parent) {
        map.remove(key);
    }
    v
}

const PCS: Kind = Kind::PodCliqueSet;
const LEADER: &str = "/spec/template/cliques/0/spec";
const WORKER: &str = "/spec/template/cliques/1/spec";
const ROUTER: &str = "/spec/template/cliques/2/spec";
const GROUP: &str = "/spec/template/podCliqueScalingGroups/0";

#[test]
fn the_base_fixture_is_valid() {
    assert_valid(PCS, &pcs(), None);
}

#[test]
fn every_v_clause_has_a_cel_rule_or_a_stated_reason() {
    let covered: Vec<&str> = rules().iter().map(|r| r.clause).collect();
    for n in 1..=10 {
        let clause = format!("V{n}");
        let explained = NOT_CEL.iter().any(|(c, _)| *c == clause);
        assert!(
            covered.contains(&clause.as_str()) || explained,
            "{clause} has neither a rule nor a reason"
        );
    }
}

#[test]
fn every_message_names_a_field_path_and_its_clause() {
    for r in rules() {
        let head = r.message.split(':').next().unwrap_or_default();
        assert!(
            head.starts_with("spec"),
            "{} does not start with a field path",
            r.message
        );
        if r.clause != "upstream" {
            assert!(
                r.message.ends_with(&format!("({})", r.clause)),
                "{}",
                r.message
            );
        }
        assert!(!r.message.contains('\n'), "messages are one line");
    }
}

#[test]
fn v1_rejects_target_names_on_a_clique() {
    let bad = with(
        pcs(),
        &format!("{LEADER}/policy"),
        json!({"completion": {"success": {"targetNames": ["x"]}}}),
    );
    assert_rejected(
        PCS,
        &bad,
        None,
        "V1",
        "spec.template.cliques[].spec.policy.completion.success",
    );
    let bad_object = json!({
        "apiVersion": "grove.io/v1alpha1", "kind": "PodClique", "metadata": {"name": "p"},
        "spec": {"roleName": "r", "replicas": 1, "podSpec": {"containers": []},
                 "policy": {"completion": {"success": {"targetNames": ["x"]}}}},
    });
    assert_rejected(
        Kind::PodClique,
        &bad_object,
        None,
        "V1",
        "spec.policy.completion.success",
    );
}

#[test]
fn v2_rejects_target_names_outside_the_scaling_group_or_regular() {
    let not_member = with(
        pcs(),
        &format!("{GROUP}/policy"),
        json!({"completion": {"success": {"targetNames": ["router"]}}}),
    );
    assert_rejected(PCS, &not_member, None, "V2", "targetNames");
    let regular = with(pcs(), &format!("{WORKER}/policy"), Value::Null);
    let regular = without(regular, &format!("{WORKER}/policy"));
    let regular = with(
        regular,
        &format!("{GROUP}/policy"),
        json!({"completion": {"success": {"targetNames": ["worker"]}}}),
    );
    assert_rejected(PCS, &regular, None, "V2", "targetNames");
    let good = with(
        pcs(),
        &format!("{GROUP}/policy"),
        json!({"completion": {"success": {"targetNames": ["leader"]}, "failure": {"maxRestarts": 3}}}),
    );
    assert_valid(PCS, &good, None);
}

#[test]
fn v2_checks_pcs_target_names_against_direct_children() {
    let policy = |names: Value| json!({"completion": {"success": {"targetNames": names}}});
    // A clique inside a scaling group is not a direct child of the PCS.
    let inner = with(pcs(), "/spec/policy", policy(json!(["leader"])));
    assert_rejected(
        PCS,
        &inner,
        None,
        "V2",
        "spec.policy.completion.success.targetNames",
    );
    // A regular standalone clique is not completion-aware.
    let regular = with(pcs(), "/spec/policy", policy(json!(["router"])));
    assert_rejected(
        PCS,
        &regular,
        None,
        "V2",
        "spec.policy.completion.success.targetNames",
    );
    // A scaling group without a completion-aware clique.
    let lazy = without(pcs(), &format!("{LEADER}/policy"));
    let lazy = without(lazy, &format!("{WORKER}/policy"));
    let lazy = with(lazy, &format!("{ROUTER}/policy"), json!({"completion": {}}));
    let lazy = with(lazy, "/spec/policy", policy(json!(["trainer"])));
    assert_rejected(
        PCS,
        &lazy,
        None,
        "V2",
        "spec.policy.completion.success.targetNames",
    );
    // Unknown name.
    let unknown = with(pcs(), "/spec/policy", policy(json!(["nope"])));
    assert_rejected(
        PCS,
        &unknown,
        None,
        "V2",
        "spec.policy.completion.success.targetNames",
    );
    // A completion-aware scaling group and a completion-aware standalone clique are fine.
    let good = with(
        pcs(),
        &format!("{ROUTER}/policy"),
        json!({"completion": {}}),
    );
    let good = with(good, "/spec/policy", policy(json!(["trainer", "router"])));
    assert_valid(PCS, &good, None);
}

#[test]
fn v2_rejects_target_names_on_a_pcsg_object_outside_its_cliques() {
    let pcsg = |names: Value| {
        json!({
            "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueScalingGroup",
            "metadata": {"name": "g"},
            "spec": {"replicas": 1, "cliqueNames": ["a", "b"],
                     "policy": {"completion": {"success": {"targetNames": names}}}},
        })
    };
    assert_rejected(
        Kind::PodCliqueScalingGroup,
        &pcsg(json!(["c"])),
        None,
        "V2",
        "spec.policy.completion.success.targetNames",
    );
    assert_valid(Kind::PodCliqueScalingGroup, &pcsg(json!(["a"])), None);
}

#[test]
fn v3_rejects_a_clique_max_restarts_other_than_zero() {
    let bad = with(
        pcs(),
        &format!("{LEADER}/policy"),
        json!({"completion": {"failure": {"maxRestarts": 2}}}),
    );
    assert_rejected(PCS, &bad, None, "V3", "maxRestarts");
    let zero = with(
        pcs(),
        &format!("{LEADER}/policy"),
        json!({"completion": {"failure": {"maxRestarts": 0}}}),
    );
    assert_valid(PCS, &zero, None);
}

#[test]
fn v4_rejects_completion_on_scopes_without_completion_aware_children() {
    let regular = without(pcs(), &format!("{LEADER}/policy"));
    let regular = without(regular, &format!("{WORKER}/policy"));
    let group = with(
        regular.clone(),
        &format!("{GROUP}/policy"),
        json!({"completion": {}}),
    );
    assert_rejected(
        PCS,
        &group,
        None,
        "V4",
        "spec.template.podCliqueScalingGroups[].policy.completion",
    );
    let whole = with(regular, "/spec/policy", json!({"completion": {}}));
    assert_rejected(PCS, &whole, None, "V4", "spec.policy.completion");
    let fine = with(pcs(), "/spec/policy", json!({"completion": {}}));
    assert_valid(PCS, &fine, None);
}

#[test]
fn v5_rejects_always_and_on_failure_on_completion_aware_cliques() {
    for policy in ["Always", "OnFailure"] {
        let bad = with(
            pcs(),
            &format!("{LEADER}/podSpec/restartPolicy"),
            json!(policy),
        );
        assert_rejected(
            PCS,
            &bad,
            None,
            "V5",
            "spec.template.cliques[].spec.podSpec.restartPolicy",
        );
    }
    let never = with(
        pcs(),
        &format!("{LEADER}/podSpec/restartPolicy"),
        json!("Never"),
    );
    assert_valid(PCS, &never, None);
}

#[test]
fn v6_rejects_never_and_on_failure_on_regular_cliques() {
    for policy in ["Never", "OnFailure"] {
        let bad = with(
            pcs(),
            &format!("{ROUTER}/podSpec/restartPolicy"),
            json!(policy),
        );
        assert_rejected(
            PCS,
            &bad,
            None,
            "V6",
            "spec.template.cliques[].spec.podSpec.restartPolicy",
        );
    }
    let always = with(
        pcs(),
        &format!("{ROUTER}/podSpec/restartPolicy"),
        json!("Always"),
    );
    assert_valid(PCS, &always, None);
}

#[test]
fn v7_rejects_autoscaling_on_completion_aware_cliques_and_groups() {
    let clique = with(
        pcs(),
        &format!("{LEADER}/autoScalingConfig"),
        json!({"maxReplicas": 4}),
    );
    assert_rejected(PCS, &clique, None, "V7", "autoScalingConfig");
    let group = with(
        pcs(),
        &format!("{GROUP}/scaleConfig"),
        json!({"maxReplicas": 4}),
    );
    assert_rejected(PCS, &group, None, "V7", "scaleConfig");
    let regular = with(
        pcs(),
        &format!("{ROUTER}/autoScalingConfig"),
        json!({"maxReplicas": 4}),
    );
    assert_valid(PCS, &regular, None);
}

#[test]
fn v8_rejects_replica_changes_of_completion_aware_scopes() {
    let old = pcs();
    assert_rejected(
        PCS,
        &with(old.clone(), "/spec/replicas", json!(2)),
        Some(&old),
        "V8",
        "spec.replicas",
    );
    assert_rejected(
        PCS,
        &with(old.clone(), &format!("{LEADER}/replicas"), json!(3)),
        Some(&old),
        "V8",
        "spec.template.cliques[].spec.replicas",
    );
    assert_rejected(
        PCS,
        &with(old.clone(), &format!("{GROUP}/replicas"), json!(2)),
        Some(&old),
        "V8",
        "spec.template.podCliqueScalingGroups[].replicas",
    );
    // A regular clique of a completion-aware PCS may change its replicas (not a pod template).
    assert_valid(
        PCS,
        &with(old.clone(), &format!("{ROUTER}/replicas"), json!(3)),
        Some(&old),
    );
}

#[test]
fn v8_also_holds_when_completion_is_removed_in_the_same_update() {
    let old = pcs();
    let new = without(old.clone(), &format!("{LEADER}/policy"));
    let new = without(new, &format!("{WORKER}/policy"));
    let new = with(new, "/spec/replicas", json!(5));
    assert_rejected(PCS, &new, Some(&old), "V8", "spec.replicas");
}

#[test]
fn v8_rejects_replica_changes_of_completion_aware_objects() {
    let pclq = |replicas: i32| {
        json!({
            "apiVersion": "grove.io/v1alpha1", "kind": "PodClique", "metadata": {"name": "p"},
            "spec": {"roleName": "r", "replicas": replicas, "podSpec": {"containers": []},
                     "policy": {"completion": {}}},
        })
    };
    assert_rejected(
        Kind::PodClique,
        &pclq(3),
        Some(&pclq(2)),
        "V8",
        "spec.replicas",
    );
    let pcsg = |replicas: i32| {
        json!({
            "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueScalingGroup",
            "metadata": {"name": "g"},
            "spec": {"replicas": replicas, "cliqueNames": ["a"], "policy": {"completion": {}}},
        })
    };
    assert_rejected(
        Kind::PodCliqueScalingGroup,
        &pcsg(3),
        Some(&pcsg(2)),
        "V8",
        "spec.replicas",
    );
    let regular = without(pcsg(3), "/spec/policy");
    let regular_old = without(pcsg(2), "/spec/policy");
    assert_valid(Kind::PodCliqueScalingGroup, &regular, Some(&regular_old));
}

#[test]
fn v9_rejects_pod_template_changes_of_a_completion_aware_pcs() {
    let old = pcs();
    let image = with(
        old.clone(),
        &format!("{ROUTER}/podSpec/containers/0/image"),
        json!("busybox:2"),
    );
    assert_rejected(
        PCS,
        &image,
        Some(&old),
        "V9",
        "spec.template.cliques[].spec.podSpec",
    );
    let labels = with(
        old.clone(),
        "/spec/template/cliques/0/labels",
        json!({"a": "b"}),
    );
    assert_rejected(PCS, &labels, Some(&old), "V9", "labels");
    let priority = with(
        old.clone(),
        "/spec/template/priorityClassName",
        json!("high"),
    );
    assert_rejected(PCS, &priority, Some(&old), "V9", "priorityClassName");
    // Fields outside the pod template may change.
    let delay = with(old.clone(), "/spec/template/terminationDelay", json!("1m"));
    assert_valid(PCS, &delay, Some(&old));
}

#[test]
fn regular_pcs_allows_rolling_updates_and_scaling() {
    let old = without(pcs(), &format!("{LEADER}/policy"));
    let old = without(old, &format!("{WORKER}/policy"));
    let new = with(old.clone(), "/spec/replicas", json!(3));
    let new = with(
        new,
        &format!("{LEADER}/podSpec/containers/0/image"),
        json!("busybox:2"),
    );
    let new = with(new, &format!("{GROUP}/replicas"), json!(4));
    assert_valid(PCS, &new, Some(&old));
}

#[test]
fn v10_empty_completion_parts_mean_the_defaults() {
    for policy in [
        json!({"completion": {}}),
        json!({"completion": {"success": {}}}),
        json!({"completion": {"failure": {}}}),
    ] {
        assert_valid(
            PCS,
            &with(pcs(), &format!("{LEADER}/policy"), policy.clone()),
            None,
        );
        assert_valid(
            PCS,
            &with(pcs(), &format!("{GROUP}/policy"), policy.clone()),
            None,
        );
        assert_valid(PCS, &with(pcs(), "/spec/policy", policy), None);
    }
}

#[test]
fn min_available_must_not_exceed_replicas() {
    let bad = with(pcs(), &format!("{ROUTER}/minAvailable"), json!(3));
    let errors = check(PCS, &bad, None);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains("minAvailable: must not exceed replicas"));
}
