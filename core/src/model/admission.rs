//! Admission (V1–V7): which rejections a shape is due, each naming its clause and the field
//! the error message must name. An empty list means the shape is admitted.

use std::collections::BTreeSet;

use super::shape::{Completion, RestartPolicy, Shape};

/// One rejection the spec requires.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rejection {
    /// The V clause.
    pub clause: &'static str,
    /// The field the error names (dotted, with indexes).
    pub field: String,
}

/// The rejections `shape` is due at creation, in manifest order (PCS policy, cliques, groups).
pub fn admit(shape: &Shape) -> Vec<Rejection> {
    let mut out = Vec::new();
    let mut reject = |clause, field: String| out.push(Rejection { clause, field });

    // The PCS's own policy.
    if let Some(c) = &shape.completion {
        let at = "spec.policy.completion";
        // V4: policy.completion on a PCS with no completion-aware direct child.
        if !shape.aware() {
            reject("V4", at.to_owned());
        }
        // V2: targetNames of a PCS name completion-aware direct children only.
        let allowed: BTreeSet<&str> = shape
            .children()
            .into_iter()
            .filter(|c| shape.child_aware(*c))
            .map(|c| c.name())
            .collect();
        if !targets_valid(c, &allowed) {
            reject("V2", format!("{at}.success.targetNames"));
        }
        // V3: a negative maxRestarts is rejected everywhere.
        if c.max_restarts.is_some_and(|m| m < 0) {
            reject("V3", format!("{at}.failure.maxRestarts"));
        }
    }

    for (k, clique) in shape.cliques.iter().enumerate() {
        let at = format!("spec.template.cliques[{k}].spec");
        if let Some(c) = &clique.completion {
            // V1: `success` (targetNames) on a clique's policy.
            if c.target_names.is_some() {
                reject("V1", format!("{at}.policy.completion.success"));
            }
            // V3: a clique's maxRestarts other than 0.
            if c.max_restarts.is_some_and(|m| m != 0) {
                reject("V3", format!("{at}.policy.completion.failure.maxRestarts"));
            }
            // V5: a completion-aware clique with restartPolicy Always or OnFailure.
            if matches!(
                clique.restart_policy,
                Some(RestartPolicy::Always | RestartPolicy::OnFailure)
            ) {
                reject("V5", format!("{at}.podSpec.restartPolicy"));
            }
            // V7: a completion-aware clique with autoScalingConfig.
            if clique.autoscaling {
                reject("V7", format!("{at}.autoScalingConfig"));
            }
        } else if matches!(
            clique.restart_policy,
            Some(RestartPolicy::Never | RestartPolicy::OnFailure)
        ) {
            // V6: a regular clique with explicit Never or OnFailure.
            reject("V6", format!("{at}.podSpec.restartPolicy"));
        }
    }

    for (k, group) in shape.groups.iter().enumerate() {
        let at = format!("spec.template.podCliqueScalingGroups[{k}]");
        let aware = shape.group_aware(group);
        if let Some(c) = &group.completion {
            // V4: policy.completion on a PCSG with no completion-aware member.
            if !aware {
                reject("V4", format!("{at}.policy.completion"));
            }
            // V2: targetNames of a PCSG name its completion-aware member cliques only.
            let allowed: BTreeSet<&str> = group
                .members
                .iter()
                .filter(|m| shape.clique(m).is_some_and(|c| c.aware()))
                .map(String::as_str)
                .collect();
            if !targets_valid(c, &allowed) {
                reject("V2", format!("{at}.policy.completion.success.targetNames"));
            }
            // V3: negative maxRestarts.
            if c.max_restarts.is_some_and(|m| m < 0) {
                reject("V3", format!("{at}.policy.completion.failure.maxRestarts"));
            }
        }
        // V7: a completion-aware PCSG with scaleConfig.
        if aware && group.scale_config {
            reject("V7", format!("{at}.scaleConfig"));
        }
    }
    out
}

/// V2: `targetNames`, when present, is non-empty, has no duplicates and names only `allowed`.
fn targets_valid(c: &Completion, allowed: &BTreeSet<&str>) -> bool {
    let Some(names) = &c.target_names else {
        return true;
    };
    let distinct: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    !names.is_empty() && distinct.len() == names.len() && distinct.is_subset(allowed)
}
