//! Pure construction of desired children: names, labels, owner references, policies and pods,
//! as upstream Grove materialises them (B1–B3, grove-api.md "How the hierarchy is
//! materialised"), plus what a CRD cannot default: `minAvailable` → `replicas` and
//! `restartPolicy: Never` on pods of completion-aware cliques (V5).
//!
//! Every child carries `grove.io/restart-attempt` (R7): the restart count of the replica that
//! created it, so [`crate::semantics::evaluate_replica`] can tell a pending restart from a done one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::SignedDuration;
use kube::Resource;

use crate::api::{
    PodClique, PodCliqueScalingGroup, PodCliqueScalingGroupConfig, PodCliqueScalingGroupSpec,
    PodCliqueSet, PodCliqueSpec, PodCliqueTemplateSpec, RunPolicy,
};
use crate::names::{
    ENV_HEADLESS_SERVICE, ENV_PCLQ_NAME, ENV_PCLQ_POD_INDEX, ENV_PCS_INDEX, ENV_PCS_NAME,
    ENV_PCSG_INDEX, ENV_PCSG_NAME, ENV_PCSG_TEMPLATE_NUM_PODS, LABEL_MANAGED_BY, LABEL_PART_OF,
    LABEL_PCS_REPLICA_INDEX, LABEL_PCSG, LABEL_PCSG_REPLICA_INDEX, LABEL_POD_INDEX,
    LABEL_PODCLIQUE, LABEL_PODGANG, LABEL_RESTART_ATTEMPT, MANAGED_BY_VALUE,
    SCHEDULING_GATE_PODGANG,
};
use crate::semantics::attempt_label_value;

/// Errors of child construction.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The parent has no name or uid yet, so no owner reference can point to it.
    #[error("failed to reference {kind} as owner: it has no name or uid")]
    NotPersisted {
        /// Kind of the parent.
        kind: &'static str,
    },
    /// A label the operator sets on its children is missing or malformed.
    #[error("failed to read label {label} of {name}")]
    BadLabel {
        /// Object name.
        name: String,
        /// Label key.
        label: &'static str,
    },
    /// A scaling group or clique named by the object is not in the PodCliqueSet template.
    #[error("failed to find {what} {name} in the PodCliqueSet template")]
    NotInTemplate {
        /// `clique` or `scaling group`.
        what: &'static str,
        /// The missing name.
        name: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Names (B1).

/// Standalone PodClique `<pcs>-<i>-<clique>`.
pub fn podclique_name(pcs: &str, replica: u32, clique: &str) -> String {
    format!("{pcs}-{replica}-{clique}")
}

/// PCSG `<pcs>-<i>-<pcsg>`.
pub fn pcsg_name(pcs: &str, replica: u32, group: &str) -> String {
    format!("{pcs}-{replica}-{group}")
}

/// PodClique in a PCSG `<pcs>-<i>-<pcsg>-<j>-<clique>`, from the PCSG object name.
pub fn pcsg_podclique_name(pcsg_object: &str, replica: u32, clique: &str) -> String {
    format!("{pcsg_object}-{replica}-{clique}")
}

/// Headless service (and pod subdomain) of PCS replica i: `<pcs>-<i>`.
pub fn headless_service_name(pcs: &str, replica: u32) -> String {
    format!("{pcs}-{replica}")
}

/// Base PodGang of PCS replica i: `<pcs>-<i>`.
pub fn base_podgang_name(pcs: &str, replica: u32) -> String {
    format!("{pcs}-{replica}")
}

/// PodGang of a PCSG replica at or above `minAvailable`: `<pcsg object>-<j - minAvailable>`.
pub fn scaled_podgang_name(pcsg_object: &str, scaled_index: u32) -> String {
    format!("{pcsg_object}-{scaled_index}")
}

/// Hostname of pod `index` of a PodClique: `<podclique>-<index>`.
pub fn pod_hostname(podclique: &str, index: u32) -> String {
    format!("{podclique}-{index}")
}

// ---------------------------------------------------------------------------------------------
// PodCliques and PCSGs.

/// The direct children of one PodCliqueSet replica.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaChildren {
    /// Standalone PodCliques, in template order.
    pub podcliques: Vec<PodClique>,
    /// PodCliqueScalingGroups, in template order.
    pub scaling_groups: Vec<PodCliqueScalingGroup>,
}

/// The standalone PodCliques and the PCSGs of PCS replica `replica`, labelled with restart
/// attempt `attempt` (the PCS's `replicaRestartCounts[replica]`), owned by the PCS (B3).
pub fn pcs_replica_children(
    pcs: &PodCliqueSet,
    replica: u32,
    attempt: u32,
) -> Result<ReplicaChildren, BuildError> {
    let owner = owner_ref(pcs, "PodCliqueSet")?;
    let pcs_name = pcs.metadata.name.clone().unwrap_or_default();
    let base = child_labels(&pcs_name, replica, attempt);
    let template = &pcs.spec.template;

    let podcliques = template
        .standalone_cliques()
        .map(|clique| {
            podclique(
                pcs,
                clique,
                podclique_name(&pcs_name, replica, &clique.name),
                base.clone(),
                &owner,
            )
        })
        .collect();

    let scaling_groups = template
        .scaling_groups()
        .iter()
        .map(|group| {
            let mut spec = PodCliqueScalingGroupSpec {
                replicas: group.replicas,
                min_available: Some(group.min_available),
                clique_names: group.clique_names.clone(),
                policy: group.policy.clone(),
            };
            // Self-describing object: a completion-aware group always says so, even when its
            // config carries no policy (`completion: {}` means the defaults, V10).
            if template.is_scaling_group_completion_aware(group) && !spec.is_completion_aware() {
                spec.policy = Some(RunPolicy::completion_defaults());
            }
            PodCliqueScalingGroup {
                metadata: ObjectMeta {
                    name: Some(pcsg_name(&pcs_name, replica, &group.name)),
                    namespace: pcs.metadata.namespace.clone(),
                    labels: Some(base.clone()),
                    annotations: group.annotations.clone(),
                    owner_references: Some(vec![owner.clone()]),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            }
        })
        .collect();

    Ok(ReplicaChildren {
        podcliques,
        scaling_groups,
    })
}

/// The PodCliques of replica `replica` of PCSG `pcsg` (an object built by
/// [`pcs_replica_children`]), labelled with restart attempt `attempt` (the PCSG's
/// `replicaRestartCounts[replica]`), owned by the PCSG (B3).
pub fn pcsg_replica_podcliques(
    pcs: &PodCliqueSet,
    pcsg: &PodCliqueScalingGroup,
    replica: u32,
    attempt: u32,
) -> Result<Vec<PodClique>, BuildError> {
    let owner = owner_ref(pcsg, "PodCliqueScalingGroup")?;
    let pcsg_object = pcsg.metadata.name.clone().unwrap_or_default();
    let pcs_name = pcs.metadata.name.clone().unwrap_or_default();
    let pcs_replica = label_u32(pcsg, LABEL_PCS_REPLICA_INDEX)?;
    let mut labels = child_labels(&pcs_name, pcs_replica, attempt);
    labels.insert(LABEL_PCSG.into(), pcsg_object.clone());
    labels.insert(LABEL_PCSG_REPLICA_INDEX.into(), replica.to_string());

    pcsg.spec
        .clique_names
        .iter()
        .map(|name| {
            let clique =
                pcs.spec
                    .template
                    .clique(name)
                    .ok_or_else(|| BuildError::NotInTemplate {
                        what: "clique",
                        name: name.clone(),
                    })?;
            Ok(podclique(
                pcs,
                clique,
                pcsg_podclique_name(&pcsg_object, replica, name),
                labels.clone(),
                &owner,
            ))
        })
        .collect()
}

/// Labels every child of PCS replica `replica` carries.
fn child_labels(pcs: &str, replica: u32, attempt: u32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY_VALUE.to_string()),
        (LABEL_PART_OF.to_string(), pcs.to_string()),
        (LABEL_PCS_REPLICA_INDEX.to_string(), replica.to_string()),
        (
            LABEL_RESTART_ATTEMPT.to_string(),
            attempt_label_value(attempt),
        ),
    ])
}

/// A PodClique from its template: template labels and annotations under the operator's labels,
/// the spec with what the CRD cannot default applied.
fn podclique(
    pcs: &PodCliqueSet,
    clique: &PodCliqueTemplateSpec,
    name: String,
    operator_labels: BTreeMap<String, String>,
    owner: &OwnerReference,
) -> PodClique {
    let mut labels = clique.labels.clone().unwrap_or_default();
    labels.extend(operator_labels);
    PodClique {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: pcs.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: clique.annotations.clone(),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: podclique_spec(
            &clique.spec,
            pcs.spec.template.priority_class_name.as_deref(),
        ),
        status: None,
    }
}

/// The PodClique spec for a clique template spec: `minAvailable` defaults to `replicas`, the
/// template's priority class applies when the pod spec names none, and a completion-aware
/// clique's pods run with `restartPolicy: Never` (V5).
pub fn podclique_spec(template: &PodCliqueSpec, priority_class: Option<&str>) -> PodCliqueSpec {
    let mut spec = template.clone();
    spec.min_available = Some(template.effective_min_available());
    if spec.pod_spec.priority_class_name.is_none() {
        spec.pod_spec.priority_class_name = priority_class.map(str::to_string);
    }
    if spec.is_completion_aware() {
        spec.pod_spec.restart_policy = Some("Never".into());
    }
    spec
}

fn owner_ref<K: Resource<DynamicType = ()>>(
    parent: &K,
    kind: &'static str,
) -> Result<OwnerReference, BuildError> {
    parent
        .controller_owner_ref(&())
        .ok_or(BuildError::NotPersisted { kind })
}

fn label_u32<K: Resource>(obj: &K, label: &'static str) -> Result<u32, BuildError> {
    obj.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(label))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| BuildError::BadLabel {
            name: obj.meta().name.clone().unwrap_or_default(),
            label,
        })
}

fn label_str<K: Resource>(obj: &K, label: &'static str) -> Result<String, BuildError> {
    obj.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(label))
        .cloned()
        .ok_or_else(|| BuildError::BadLabel {
            name: obj.meta().name.clone().unwrap_or_default(),
            label,
        })
}

// ---------------------------------------------------------------------------------------------
// Pods.

/// Where a PodClique sits in the hierarchy: what its pods' names, labels and env need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodContext {
    /// PodCliqueSet name.
    pub pcs: String,
    /// PodCliqueSet replica index.
    pub pcs_replica: u32,
    /// Set for a PodClique in a PCSG.
    pub scaling_group: Option<ScalingGroupContext>,
}

/// The PCSG part of a [`PodContext`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalingGroupContext {
    /// PCSG object name.
    pub name: String,
    /// PCSG replica index.
    pub replica: u32,
    /// PCSG `minAvailable` (replicas below it are in the base PodGang).
    pub min_available: u32,
    /// Pods in one replica of the group (sum of its cliques' replicas).
    pub template_num_pods: u32,
}

impl PodContext {
    /// The PodGang the pods belong to: the base one, or the scaled one of a PCSG replica at or
    /// above `minAvailable`.
    pub fn podgang(&self) -> String {
        match &self.scaling_group {
            Some(g) if g.replica >= g.min_available => {
                scaled_podgang_name(&g.name, g.replica - g.min_available)
            }
            _ => base_podgang_name(&self.pcs, self.pcs_replica),
        }
    }
}

/// The context of `pclq` from its labels and the PodCliqueSet template; `pcsg` is its owning
/// PCSG when it has one.
pub fn pod_context(
    pcs: &PodCliqueSet,
    pclq: &PodClique,
    pcsg: Option<&PodCliqueScalingGroup>,
) -> Result<PodContext, BuildError> {
    let scaling_group = match pcsg {
        None => None,
        Some(group) => {
            let name = label_str(pclq, LABEL_PCSG)?;
            let config = group_config(pcs, group)?;
            Some(ScalingGroupContext {
                name,
                replica: label_u32(pclq, LABEL_PCSG_REPLICA_INDEX)?,
                min_available: u32::try_from(
                    group.spec.min_available.unwrap_or(config.min_available),
                )
                .unwrap_or(1),
                template_num_pods: config
                    .clique_names
                    .iter()
                    .filter_map(|n| pcs.spec.template.clique(n))
                    .map(|c| u32::try_from(c.spec.replicas).unwrap_or(0))
                    .sum(),
            })
        }
    };
    Ok(PodContext {
        pcs: label_str(pclq, LABEL_PART_OF)?,
        pcs_replica: label_u32(pclq, LABEL_PCS_REPLICA_INDEX)?,
        scaling_group,
    })
}

fn group_config<'a>(
    pcs: &'a PodCliqueSet,
    pcsg: &PodCliqueScalingGroup,
) -> Result<&'a PodCliqueScalingGroupConfig, BuildError> {
    let object = pcsg.metadata.name.as_deref().unwrap_or_default();
    let pcs_name = pcs.metadata.name.as_deref().unwrap_or_default();
    let replica = label_u32(pcsg, LABEL_PCS_REPLICA_INDEX)?;
    pcs.spec
        .template
        .scaling_groups()
        .iter()
        .find(|g| pcsg_name(pcs_name, replica, &g.name) == object)
        .ok_or_else(|| BuildError::NotInTemplate {
            what: "scaling group",
            name: object.to_string(),
        })
}

/// Pod `index` of `pclq`: `generateName: <podclique>-`, the PodClique's labels plus
/// `grove.io/podclique`, `grove.io/podclique-pod-index`, `grove.io/podgang` (B2), hostname
/// `<podclique>-<index>` and subdomain `<pcs>-<i>`, the GROVE_* env vars, `restartPolicy:
/// Never` when the clique is completion-aware (V5), and a controller owner reference to the
/// PodClique (B3). Without the PodGang scheduling gate: this operator creates no PodGangs
/// (R8, provisional), so nothing would lift it.
pub fn pod(pclq: &PodClique, index: u32, ctx: &PodContext) -> Result<Pod, BuildError> {
    let owner = owner_ref(pclq, "PodClique")?;
    let name = pclq.metadata.name.clone().unwrap_or_default();
    let namespace = pclq.metadata.namespace.clone();
    let podgang = ctx.podgang();

    let mut labels = pclq.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_PODCLIQUE.into(), name.clone());
    labels.insert(LABEL_POD_INDEX.into(), index.to_string());
    labels.insert(LABEL_PODGANG.into(), podgang);

    let service = headless_service_name(&ctx.pcs, ctx.pcs_replica);
    let mut env = vec![
        env_var(ENV_PCS_NAME, &ctx.pcs),
        env_var(ENV_PCS_INDEX, &ctx.pcs_replica.to_string()),
        env_var(ENV_PCLQ_NAME, &name),
        env_var(
            ENV_HEADLESS_SERVICE,
            &format!(
                "{service}.{}.svc.cluster.local",
                namespace.as_deref().unwrap_or("default")
            ),
        ),
        env_var(ENV_PCLQ_POD_INDEX, &index.to_string()),
    ];
    if let Some(group) = &ctx.scaling_group {
        env.push(env_var(ENV_PCSG_NAME, &group.name));
        env.push(env_var(ENV_PCSG_INDEX, &group.replica.to_string()));
        env.push(env_var(
            ENV_PCSG_TEMPLATE_NUM_PODS,
            &group.template_num_pods.to_string(),
        ));
    }

    let mut spec: PodSpec = pclq.spec.pod_spec.clone();
    spec.hostname = Some(pod_hostname(&name, index));
    spec.subdomain = Some(service);
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        let vars = container.env.get_or_insert_with(Vec::new);
        vars.retain(|v| !env.iter().any(|e| e.name == v.name));
        vars.extend(env.iter().cloned());
    }
    // No PodGangs here, so nothing would ever lift upstream's PodGang scheduling gate (R8 is
    // provisional): pods are created schedulable, and a gate copied from the template goes.
    if let Some(gates) = spec.scheduling_gates.as_mut() {
        gates.retain(|g| g.name != SCHEDULING_GATE_PODGANG);
    }
    if pclq.spec.is_completion_aware() {
        spec.restart_policy = Some("Never".into());
    }

    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace,
            labels: Some(labels),
            annotations: pclq.metadata.annotations.clone(),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Durations.

/// Upstream's default `terminationDelay`.
pub const DEFAULT_TERMINATION_DELAY: SignedDuration = SignedDuration::from_hours(4);

/// Parse a Go duration (`4h`, `90s`, `1m30s`, `1.5h`, `300ms`) as `metav1.Duration` writes it.
pub fn parse_go_duration(text: &str) -> Option<SignedDuration> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_end);
        let value: f64 = number.parse().ok()?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        nanos += value * scale;
        rest = tail;
    }
    let nanos = if negative { -nanos } else { nanos };
    // Whole nanoseconds; the cast saturates, far beyond any sensible delay.
    #[allow(clippy::cast_possible_truncation)]
    Some(SignedDuration::from_nanos(nanos.round() as i64))
}

/// The `terminationDelay` of a PodCliqueSet, upstream's 4h when unset or unparsable.
pub fn termination_delay(pcs: &PodCliqueSet) -> SignedDuration {
    pcs.spec
        .template
        .termination_delay
        .as_deref()
        .and_then(parse_go_duration)
        .unwrap_or(DEFAULT_TERMINATION_DELAY)
}

#[cfg(test)]
mod tests;
