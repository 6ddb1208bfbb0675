//! The generated CRDs: committed YAML is current, the schema is structural and installable.

use serde_json::Value;

use super::{FILES, committed_dir, crd, rendered, try_crds};
use crate::admission::{Kind, rules_for};

fn schema(kind: Kind) -> Value {
    let crd = crd(kind).expect("crd builds");
    serde_json::to_value(&crd.spec.versions[0].schema).expect("json")["openAPIV3Schema"].clone()
}

#[test]
fn committed_yaml_is_current() {
    for (file, yaml) in rendered().expect("render") {
        let path = committed_dir().join(file);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == yaml,
            "{} is stale: run `cargo run -p grove-reference-operator -- crdgen`",
            path.display()
        );
    }
}

#[test]
fn crds_have_upstream_names_subresources_and_short_names() {
    let expected = [
        (
            "podcliquesets.grove.io",
            "PodCliqueSet",
            "pcs",
            ".status.hpaPodSelector",
        ),
        (
            "podcliquescalinggroups.grove.io",
            "PodCliqueScalingGroup",
            "pcsg",
            ".status.selector",
        ),
        (
            "podcliques.grove.io",
            "PodClique",
            "pclq",
            ".status.hpaPodSelector",
        ),
    ];
    let crds = try_crds().expect("crds");
    assert_eq!(crds.len(), FILES.len());
    for (crd, (name, kind, short, selector)) in crds.iter().zip(expected) {
        assert_eq!(crd.metadata.name.as_deref(), Some(name));
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&[short.to_string()][..])
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let sub = version.subresources.as_ref().expect("subresources");
        assert!(sub.status.is_some());
        let scale = sub.scale.as_ref().expect("scale");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(scale.label_selector_path.as_deref(), Some(selector));
    }
}

#[test]
fn every_admission_rule_is_placed() {
    for (kind, _) in FILES {
        let text = serde_json::to_string(&schema(kind)).expect("json");
        for rule in rules_for(kind) {
            let rule_json = serde_json::to_string(&rule.rule).expect("json");
            assert!(text.contains(&rule_json), "rule missing: {}", rule.rule);
        }
    }
}

#[test]
fn cliques_and_scaling_groups_are_bounded_list_maps() {
    let s = schema(Kind::PodCliqueSet);
    let template = &s["properties"]["spec"]["properties"]["template"]["properties"];
    for list in ["cliques", "podCliqueScalingGroups"] {
        let node = &template[list];
        assert_eq!(node["x-kubernetes-list-type"], "map", "{list}");
        assert_eq!(
            node["x-kubernetes-list-map-keys"],
            serde_json::json!(["name"]),
            "{list}"
        );
        assert_eq!(node["maxItems"], 32, "{list}");
        assert_eq!(
            node["items"]["properties"]["name"]["maxLength"], 63,
            "{list}"
        );
    }
    let names = &template["podCliqueScalingGroups"]["items"]["properties"]["cliqueNames"];
    assert_eq!(names["x-kubernetes-list-type"], "set");
    assert_eq!(names["maxItems"], 32);
}

#[test]
fn pod_spec_keeps_its_structure_but_not_its_descriptions() {
    let s = schema(Kind::PodClique);
    let pod_spec = &s["properties"]["spec"]["properties"]["podSpec"];
    assert_eq!(pod_spec["type"], "object");
    assert_eq!(pod_spec["properties"]["restartPolicy"]["type"], "string");
    assert_eq!(
        pod_spec["properties"]["containers"]["items"]["properties"]["ports"]["items"]["properties"]
            ["containerPort"]["type"],
        "integer"
    );
    let text = serde_json::to_string(&pod_spec["properties"]).expect("json");
    assert!(!text.contains("\"description\""));
    // Quantities and IntOrString are structural.
    let resources = &pod_spec["properties"]["containers"]["items"]["properties"]["resources"];
    assert_eq!(
        resources["properties"]["limits"]["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
}

#[test]
fn free_form_upstream_fields_preserve_unknown_fields() {
    let s = schema(Kind::PodCliqueSet);
    let template = &s["properties"]["spec"]["properties"]["template"]["properties"];
    for field in ["topologyConstraint", "headlessServiceConfig"] {
        assert_eq!(
            template[field]["x-kubernetes-preserve-unknown-fields"], true,
            "{field}"
        );
    }
    assert_eq!(
        template["resourceSharing"]["items"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
}

#[test]
fn status_has_conditions_list_map_and_restart_counts() {
    for kind in [Kind::PodCliqueSet, Kind::PodCliqueScalingGroup] {
        let status = &schema(kind)["properties"]["status"]["properties"];
        assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            status["conditions"]["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
        assert_eq!(status["replicaRestartCounts"]["items"]["type"], "integer");
    }
    let status = &schema(Kind::PodClique)["properties"]["status"]["properties"];
    assert!(status["replicaRestartCounts"].is_null());
    assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
}

#[test]
fn crds_fit_a_client_side_apply() {
    // kubectl's last-applied annotation is limited to 256 KiB.
    for crd in try_crds().expect("crds") {
        let size = serde_json::to_string(&crd).expect("json").len();
        assert!(size < 256 * 1024, "{:?} is {size} bytes", crd.metadata.name);
    }
}

#[test]
fn upstream_manifests_deserialize() {
    let yaml = r#"
apiVersion: grove.io/v1alpha1
kind: PodCliqueSet
metadata: {name: simple1}
spec:
  replicas: 1
  template:
    terminationDelay: 1m
    headlessServiceConfig: {publishNotReadyAddresses: true}
    cliqueStartupType: CliqueStartupTypeExplicit
    cliques:
      - name: pca
        labels: {kai.scheduler/queue: test}
        topologyConstraint: {pack: {required: rack}}
        spec:
          roleName: rolea
          replicas: 3
          minAvailable: 1
          startsAfter: []
          autoScalingConfig: {maxReplicas: 5, metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]}
          podSpec:
            containers:
              - name: pca
                image: registry.k8s.io/pause:3.10
                resources: {requests: {cpu: 10m, memory: 1Gi}}
    podCliqueScalingGroups:
      - name: sga
        cliqueNames: [pca]
        scaleConfig: {maxReplicas: 4}
"#;
    let pcs: crate::api::PodCliqueSet = serde_yaml::from_str(yaml).expect("parses");
    assert_eq!(pcs.spec.template.cliques[0].spec.replicas, 3);
    assert!(!pcs.spec.template.is_completion_aware());
    let back = serde_json::to_value(&pcs).expect("json");
    assert_eq!(
        back["spec"]["template"]["cliques"][0]["topologyConstraint"]["pack"]["required"],
        "rack"
    );
}
