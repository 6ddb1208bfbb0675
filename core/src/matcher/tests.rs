use super::*;

use crate::vocab::Vocabulary;
use serde_json::json;
#[test]
fn subset_matches_conditions_by_type_not_position() {
    let observed = json!({"status": {"conditions": [
        {"type": "Failed", "status": "False", "lastTransitionTime": "t"},
        {"type": "Completed", "status": "True", "reason": "CompletionCriteriaMet"}
    ], "replicas": 8}});
    assert!(is_subset(
        &json!({"status": {"conditions": [{"type": "Completed", "status": "True"}]}}),
        &observed
    ));
    assert!(!is_subset(
        &json!({"status": {"conditions": [{"type": "Completed", "status": "False"}]}}),
        &observed
    ));
    assert!(is_subset(&json!({"status": {"replicas": 8.0}}), &observed));
    assert!(!is_subset(&json!({"a": [1, 2]}), &json!({"a": [1, 2, 3]})));
}

#[test]
fn server_fields_are_stripped() {
    let o = json!({"metadata": {"name": "x", "uid": "u", "resourceVersion": "1",
        "managedFields": [], "creationTimestamp": "t", "generation": 2},
        "status": {"conditions": [{"type": "A", "lastTransitionTime": "t"}]}});
    assert_eq!(
        strip_server_fields(&o),
        json!({"metadata": {"name": "x"}, "status": {"conditions": [{"type": "A"}]}})
    );
}

#[test]
fn field_names_are_found_as_words() {
    let v = Vocabulary::default();
    let msg = "PodCliqueSet.grove.io \"job\" is invalid: spec.template.cliques[1].spec.policy.completion.success: Forbidden";
    assert!(message_names_field(
        msg,
        "spec.template.cliques[1].spec.policy.completion.success",
        &v
    ));
    assert!(!message_names_field("successful", "x.success", &v));
    let text = Vocabulary::new(crate::vocab::Revision::Grep0285ProposalText);
    assert!(message_names_field(
        "success.completedNames: Required",
        "spec.policy.completion.success.targetNames",
        &text
    ));
}

#[test]
fn a_field_is_named_by_its_path_or_a_suffix_of_two_segments() {
    let v = Vocabulary::default();
    let field = "spec.template.cliques[0].spec.policy.completion.failure.maxRestarts";
    let webhook = "admission webhook denied the request: spec.template.cliques[0].spec.policy.completion.failure.maxRestarts: Invalid value: 2";
    assert!(message_names_field(webhook, field, &v));
    assert!(message_names_field(
        "failure.maxRestarts: must be 0",
        field,
        &v
    ));
    assert!(
        !message_names_field("maxRestarts: must be 0", field, &v),
        "one word"
    );
    assert!(
        !message_names_field("policy.completion: invalid", field, &v),
        "not a suffix"
    );
    assert!(
        !message_names_field(
            "spec.template.cliques[0].spec.replicas: immutable",
            "spec.replicas",
            &v
        ),
        "another field's path"
    );
    assert!(message_names_field(
        "spec.replicas: field is immutable",
        "spec.replicas",
        &v
    ));
    assert!(!message_names_field(
        "replicas is immutable",
        "spec.replicas",
        &v
    ));
}
