//! Admission without a webhook: the CEL rules (`x-kubernetes-validations`) the CRDs carry.
//!
//! Every V-clause of `job-semantics.md` that a CRD validation rule can express is here, as data:
//! the schema node a rule sits on, the rule, the message (naming the full field path and the
//! clause) and the `fieldPath`/`reason` the apiserver reports in `details.causes[]`. Keeping the
//! rules in one table rather than in derive attributes lets the same `PodCliqueSpec` rules name
//! `spec.template.cliques[].spec…` in the PodCliqueSet CRD and `spec…` in the PodClique CRD, and
//! lets tests enumerate the clauses covered. [`crate::crd`] injects them into the derived
//! schemas.
//!
//! What the schema itself enforces (no CEL needed): negative `maxRestarts` (`minimum: 0`, V3),
//! empty or duplicate `targetNames` (`minItems: 1`, `x-kubernetes-list-type: set`, V2), and
//! `completion: {}` / `{success: {}}` / `{failure: {}}` being valid (every field optional, V10).
//!
//! Cost: the apiserver bounds each rule's estimated cost, so every list a rule walks has
//! `maxItems` and every string `maxLength` (cliques, scaling groups, `cliqueNames`, `targetNames`
//! ≤ 32; names ≤ 63), and rules that would nest four loops are written as two cheaper ones.

/// The kind whose CRD a rule belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// PodCliqueSet.
    PodCliqueSet,
    /// PodCliqueScalingGroup.
    PodCliqueScalingGroup,
    /// PodClique.
    PodClique,
}

/// One CEL validation rule and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionRule {
    /// Spec clause the rule enforces (`V1`…`V10`), or `upstream` for upstream webhook checks.
    pub clause: &'static str,
    /// CRD the rule belongs to.
    pub kind: Kind,
    /// Schema node, as property names from the root; `[]` steps into list items.
    pub at: Vec<&'static str>,
    /// The CEL expression (`self` is the node at `at`).
    pub rule: String,
    /// Failure message: full field path, what is wrong, the clause.
    pub message: String,
    /// Relative path of the offending field, reported as the cause's field.
    pub field_path: Option<&'static str>,
    /// `FieldValueForbidden`, `FieldValueInvalid`, …
    pub reason: Option<&'static str>,
}

impl AdmissionRule {
    /// Whether the rule compares against `oldSelf` (a transition rule, update only).
    pub fn is_transition(&self) -> bool {
        self.rule.contains("oldSelf")
    }

    /// The rule as an `x-kubernetes-validations` entry.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "rule": self.rule, "message": self.message });
        if let Some(f) = self.field_path {
            v["fieldPath"] = f.into();
        }
        if let Some(r) = self.reason {
            v["reason"] = r.into();
        }
        v
    }
}

const FORBIDDEN: Option<&str> = Some("FieldValueForbidden");
const INVALID: Option<&str> = Some("FieldValueInvalid");

/// CEL: clique spec `c` (a `PodCliqueSpec` value) is completion-aware.
fn aware(c: &str) -> String {
    format!("(has({c}.policy) && has({c}.policy.completion))")
}

/// CEL: scaling group config `g` has a completion-aware member among `t.cliques`.
fn group_aware(g: &str, t: &str) -> String {
    format!(
        "{g}.cliqueNames.exists(n, {t}.cliques.exists(c, c.name == n && {}))",
        aware("c.spec")
    )
}

/// Rules on a `PodCliqueSpec` node whose full path is `p` (V1, V3, V5–V8, upstream).
fn podclique_spec_rules(kind: Kind, at: Vec<&'static str>, p: &str) -> Vec<AdmissionRule> {
    let a = aware("self");
    let old_a = aware("oldSelf");
    let rule = |clause, rule: String, message: String, field_path, reason| AdmissionRule {
        clause,
        kind,
        at: at.clone(),
        rule,
        message,
        field_path,
        reason,
    };
    vec![
        rule(
            "V1",
            // `success: {}` alone is the defaults marker (V10) and stays valid.
            "!has(self.policy) || !has(self.policy.completion) || !has(self.policy.completion.success) \
             || !has(self.policy.completion.success.targetNames)"
                .into(),
            format!("{p}.policy.completion.success: targetNames is not allowed on a clique (V1)"),
            Some(".policy.completion.success"),
            FORBIDDEN,
        ),
        rule(
            "V3",
            "!has(self.policy) || !has(self.policy.completion) || !has(self.policy.completion.failure) \
             || !has(self.policy.completion.failure.maxRestarts) || self.policy.completion.failure.maxRestarts == 0"
                .into(),
            format!("{p}.policy.completion.failure.maxRestarts: must be 0 on a clique (V3)"),
            Some(".policy.completion.failure.maxRestarts"),
            INVALID,
        ),
        rule(
            "V5",
            format!("!{a} || !has(self.podSpec.restartPolicy) || self.podSpec.restartPolicy == 'Never'"),
            format!(
                "{p}.podSpec.restartPolicy: must be Never or omitted on a completion-aware clique (V5)"
            ),
            Some(".podSpec.restartPolicy"),
            FORBIDDEN,
        ),
        rule(
            "V6",
            format!("{a} || !has(self.podSpec.restartPolicy) || self.podSpec.restartPolicy == 'Always'"),
            format!(
                "{p}.podSpec.restartPolicy: must be Always or omitted on a regular clique, \
                 Never and OnFailure need policy.completion (V6)"
            ),
            Some(".podSpec.restartPolicy"),
            FORBIDDEN,
        ),
        rule(
            "V7",
            format!("!{a} || !has(self.autoScalingConfig)"),
            format!("{p}.autoScalingConfig: not allowed on a completion-aware clique (V7)"),
            Some(".autoScalingConfig"),
            FORBIDDEN,
        ),
        rule(
            "V8",
            format!("!({a} || {old_a}) || self.replicas == oldSelf.replicas"),
            format!("{p}.replicas: immutable on a completion-aware clique (V8)"),
            Some(".replicas"),
            FORBIDDEN,
        ),
        rule(
            "upstream",
            "!has(self.minAvailable) || self.minAvailable <= self.replicas".into(),
            format!("{p}.minAvailable: must not exceed replicas"),
            Some(".minAvailable"),
            INVALID,
        ),
    ]
}

/// Rules on `spec.template` of a PodCliqueSet (scaling group configs: V2, V4, V7, V8).
fn template_rules() -> Vec<AdmissionRule> {
    const G: &str = "spec.template.podCliqueScalingGroups[]";
    let at = vec!["spec", "template"];
    let has_groups = "has(self.podCliqueScalingGroups)";
    let group_policy = "has(g.policy) && has(g.policy.completion)";
    let targets = "g.policy.completion.success.targetNames";
    let has_targets = format!(
        "{group_policy} && has(g.policy.completion.success) && has(g.policy.completion.success.targetNames)"
    );
    let rule = |clause, rule: String, message: String, field_path, reason| AdmissionRule {
        clause,
        kind: Kind::PodCliqueSet,
        at: at.clone(),
        rule,
        message,
        field_path,
        reason,
    };
    vec![
        rule(
            "V2",
            format!(
                "!{has_groups} || self.podCliqueScalingGroups.all(g, !({has_targets}) \
                 || {targets}.all(t, t in g.cliqueNames))"
            ),
            format!(
                "{G}.policy.completion.success.targetNames: must name cliques of the scaling \
                 group's cliqueNames (V2)"
            ),
            Some(".podCliqueScalingGroups"),
            INVALID,
        ),
        rule(
            "V2",
            format!(
                "!{has_groups} || self.podCliqueScalingGroups.all(g, !({has_targets}) \
                 || {targets}.all(t, self.cliques.exists(c, c.name == t && {})))",
                aware("c.spec")
            ),
            format!(
                "{G}.policy.completion.success.targetNames: must name completion-aware cliques \
                 (with policy.completion) (V2)"
            ),
            Some(".podCliqueScalingGroups"),
            INVALID,
        ),
        rule(
            "V4",
            format!(
                "!{has_groups} || self.podCliqueScalingGroups.all(g, !({group_policy}) || {})",
                group_aware("g", "self")
            ),
            format!("{G}.policy.completion: the scaling group has no completion-aware clique (V4)"),
            Some(".podCliqueScalingGroups"),
            INVALID,
        ),
        rule(
            "V7",
            format!(
                "!{has_groups} || self.podCliqueScalingGroups.all(g, !has(g.scaleConfig) || !{})",
                group_aware("g", "self")
            ),
            format!("{G}.scaleConfig: not allowed on a completion-aware scaling group (V7)"),
            Some(".podCliqueScalingGroups"),
            FORBIDDEN,
        ),
        // V8 is written from the cliques' side (aware clique → its group's replicas unchanged),
        // once for the new and once for the old awareness: cheaper than nesting group
        // awareness inside a group-by-group comparison.
        rule(
            "V8",
            format!(
                "!{has_groups} || !has(oldSelf.podCliqueScalingGroups) || self.cliques.all(c, !{} \
                 || self.podCliqueScalingGroups.all(g, !(c.name in g.cliqueNames) \
                 || oldSelf.podCliqueScalingGroups.all(o, o.name != g.name || o.replicas == g.replicas)))",
                aware("c.spec")
            ),
            format!("{G}.replicas: immutable on a completion-aware scaling group (V8)"),
            Some(".podCliqueScalingGroups"),
            FORBIDDEN,
        ),
        rule(
            "V8",
            format!(
                "!{has_groups} || !has(oldSelf.podCliqueScalingGroups) || oldSelf.cliques.all(c, !{} \
                 || oldSelf.podCliqueScalingGroups.all(o, !(c.name in o.cliqueNames) \
                 || self.podCliqueScalingGroups.all(g, g.name != o.name || g.replicas == o.replicas)))",
                aware("c.spec")
            ),
            format!("{G}.replicas: immutable on a completion-aware scaling group (V8)"),
            Some(".podCliqueScalingGroups"),
            FORBIDDEN,
        ),
    ]
}

/// Rules on `spec` of a PodCliqueSet (PCS policy: V2, V4; V8 and V9 on the whole PCS).
fn pcs_spec_rules() -> Vec<AdmissionRule> {
    let at = vec!["spec"];
    let no_targets = "!has(self.policy) || !has(self.policy.completion) \
                      || !has(self.policy.completion.success) \
                      || !has(self.policy.completion.success.targetNames)";
    let t = "self.policy.completion.success.targetNames";
    let groups = "self.template.podCliqueScalingGroups";
    let has_groups = "has(self.template.podCliqueScalingGroups)";
    let pcs_aware = |s: &str| format!("{s}.template.cliques.exists(c, {})", aware("c.spec"));
    let either_aware = format!("({} || {})", pcs_aware("self"), pcs_aware("oldSelf"));
    let rule = |clause, rule: String, message: String, field_path, reason| AdmissionRule {
        clause,
        kind: Kind::PodCliqueSet,
        at: at.clone(),
        rule,
        message,
        field_path,
        reason,
    };
    let same_clique = |field: &str| {
        format!(
            "self.template.cliques.all(c, oldSelf.template.cliques.all(o, o.name != c.name \
             || (has(o.{field}) == has(c.{field}) && (!has(c.{field}) || o.{field} == c.{field}))))"
        )
    };
    vec![
        rule(
            "V2",
            format!(
                "{no_targets} || {t}.all(t, ({has_groups} && {groups}.exists(g, g.name == t)) \
                 || (self.template.cliques.exists(c, c.name == t) \
                 && (!{has_groups} || !{groups}.exists(g, t in g.cliqueNames))))"
            ),
            "spec.policy.completion.success.targetNames: must name standalone cliques or \
             scaling groups of spec.template (V2)"
                .into(),
            Some(".policy.completion.success.targetNames"),
            INVALID,
        ),
        rule(
            "V2",
            format!(
                "{no_targets} || {t}.all(t, !self.template.cliques.exists(c, c.name == t && !{}) \
                 || ({has_groups} && {groups}.exists(g, g.name == t)))",
                aware("c.spec")
            ),
            "spec.policy.completion.success.targetNames: must name completion-aware cliques \
             (with policy.completion) (V2)"
                .into(),
            Some(".policy.completion.success.targetNames"),
            INVALID,
        ),
        rule(
            "V2",
            format!(
                "{no_targets} || !{has_groups} || {groups}.all(g, !(g.name in {t}) || {})",
                group_aware("g", "self.template")
            ),
            "spec.policy.completion.success.targetNames: must name completion-aware scaling \
             groups (with a completion-aware clique) (V2)"
                .into(),
            Some(".policy.completion.success.targetNames"),
            INVALID,
        ),
        rule(
            "V4",
            format!(
                "!has(self.policy) || !has(self.policy.completion) || {}",
                pcs_aware("self")
            ),
            "spec.policy.completion: the PodCliqueSet has no completion-aware clique or \
             scaling group (V4)"
                .into(),
            Some(".policy.completion"),
            INVALID,
        ),
        rule(
            "V8",
            format!("!{either_aware} || self.replicas == oldSelf.replicas"),
            "spec.replicas: immutable on a completion-aware PodCliqueSet (V8)".into(),
            Some(".replicas"),
            FORBIDDEN,
        ),
        rule(
            "V9",
            format!(
                "!{either_aware} || (size(self.template.cliques) == size(oldSelf.template.cliques) \
                 && self.template.cliques.all(c, oldSelf.template.cliques.exists(o, o.name == c.name)))"
            ),
            "spec.template.cliques: cliques cannot be added or removed on a completion-aware \
             PodCliqueSet (V9)"
                .into(),
            Some(".template.cliques"),
            FORBIDDEN,
        ),
        rule(
            "V9",
            format!(
                "!{either_aware} || self.template.cliques.all(c, oldSelf.template.cliques.all(o, \
                 o.name != c.name || o.spec.podSpec == c.spec.podSpec))"
            ),
            "spec.template.cliques[].spec.podSpec: immutable on a completion-aware PodCliqueSet, \
             rolling updates are not supported for jobs (V9)"
                .into(),
            Some(".template.cliques"),
            FORBIDDEN,
        ),
        rule(
            "V9",
            format!(
                "!{either_aware} || ({} && {})",
                same_clique("labels"),
                same_clique("annotations")
            ),
            "spec.template.cliques[].labels, annotations: immutable on a completion-aware \
             PodCliqueSet, they are part of the pod template (V9)"
                .into(),
            Some(".template.cliques"),
            FORBIDDEN,
        ),
        rule(
            "V9",
            format!(
                "!{either_aware} || (has(self.template.priorityClassName) == \
                 has(oldSelf.template.priorityClassName) && (!has(self.template.priorityClassName) \
                 || self.template.priorityClassName == oldSelf.template.priorityClassName))"
            ),
            "spec.template.priorityClassName: immutable on a completion-aware PodCliqueSet, it \
             is part of the pod template (V9)"
                .into(),
            Some(".template.priorityClassName"),
            FORBIDDEN,
        ),
    ]
}

/// Rules on `spec` of a PodCliqueScalingGroup object (V1, V3 do not apply: a PCSG may hold
/// `success` and any `maxRestarts`; V8).
fn pcsg_object_rules() -> Vec<AdmissionRule> {
    let a = "(has(self.policy) && has(self.policy.completion))";
    let old_a = "(has(oldSelf.policy) && has(oldSelf.policy.completion))";
    vec![
        AdmissionRule {
            clause: "V8",
            kind: Kind::PodCliqueScalingGroup,
            at: vec!["spec"],
            rule: format!("!({a} || {old_a}) || self.replicas == oldSelf.replicas"),
            message: "spec.replicas: immutable on a completion-aware PodCliqueScalingGroup (V8)"
                .into(),
            field_path: Some(".replicas"),
            reason: FORBIDDEN,
        },
        AdmissionRule {
            clause: "V2",
            kind: Kind::PodCliqueScalingGroup,
            at: vec!["spec"],
            rule: "!has(self.policy) || !has(self.policy.completion) \
                   || !has(self.policy.completion.success) \
                   || !has(self.policy.completion.success.targetNames) \
                   || self.policy.completion.success.targetNames.all(t, t in self.cliqueNames)"
                .into(),
            message: "spec.policy.completion.success.targetNames: must name cliques of \
                      spec.cliqueNames (V2)"
                .into(),
            field_path: Some(".policy.completion.success.targetNames"),
            reason: INVALID,
        },
    ]
}

/// Every admission rule, for all three CRDs.
pub fn rules() -> Vec<AdmissionRule> {
    let mut all = podclique_spec_rules(
        Kind::PodCliqueSet,
        vec!["spec", "template", "cliques", "[]", "spec"],
        "spec.template.cliques[].spec",
    );
    all.extend(template_rules());
    all.extend(pcs_spec_rules());
    all.extend(pcsg_object_rules());
    all.extend(podclique_spec_rules(Kind::PodClique, vec!["spec"], "spec"));
    all
}

/// The rules of one CRD.
pub fn rules_for(kind: Kind) -> Vec<AdmissionRule> {
    rules().into_iter().filter(|r| r.kind == kind).collect()
}

/// V-clauses no CRD rule expresses, with the reason; each is enforced elsewhere.
pub const NOT_CEL: &[(&str, &str)] = &[
    (
        "V5",
        "the defaulting half (omitted restartPolicy runs as Never) cannot be done by a CRD: \
         build::pod sets restartPolicy: Never on pods of completion-aware cliques",
    ),
    (
        "V10",
        "nothing to reject: every field of completion is optional, so {} is valid by schema",
    ),
];

#[cfg(test)]
mod tests;
