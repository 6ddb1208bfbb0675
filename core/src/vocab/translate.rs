//! Translation of what the catalog writes in the default revision (manifests, patches and
//! field paths) into another revision's API objects and paths.

use serde_json::{Map, Value};

use super::{Category, Kind, Revision, Term, Unsupported, Vocabulary};

impl Vocabulary {
    /// Rewrites a field path written in the default revision (as in a case's `field:`) for
    /// this revision; `None` when a segment has no equivalent.
    pub fn translate_field_path(&self, path: &str) -> Option<String> {
        let mut out = Vec::new();
        for segment in path.split('.') {
            let (name, index) = match segment.find('[') {
                Some(at) => segment.split_at(at),
                None => (segment, ""),
            };
            let translated = match Term::from_catalog_name(Category::PolicyField, name)
                .or_else(|| Term::from_catalog_name(Category::StatusField, name))
            {
                Some(term) => self.name(term)?,
                None => name,
            };
            out.push(format!("{translated}{index}"));
        }
        Some(out.join("."))
    }

    /// Rewrites a manifest (or a patch shaped like one) written in the default revision for
    /// this revision. Fields the revision cannot express are an error saying which.
    ///
    /// | revision | rewrite |
    /// |---|---|
    /// | `grep-0285-review` | none |
    /// | `grep-0285-2026-08` | `success.targetNames` → `success.completedNames`; empty `completion`/`success`/`failure` → their explicit defaults |
    /// | `grove-pr-728` | a clique's `policy.completion` → `podSpec.restartPolicy: Never`; parent policies and explicit non-`Never` restart policies of completion-aware cliques, or `Never`/`OnFailure` of regular ones, are errors |
    pub fn translate_manifest(&self, kind: Kind, manifest: &Value) -> Result<Value, Unsupported> {
        let mut out = manifest.clone();
        match kind {
            Kind::PodCliqueSet => {
                if let Some(spec) = out.get_mut("spec") {
                    self.translate_policy_holder(spec, "spec")?;
                    if let Some(template) = spec.get_mut("template") {
                        if let Some(cliques) =
                            template.get_mut("cliques").and_then(Value::as_array_mut)
                        {
                            for (i, clique) in cliques.iter_mut().enumerate() {
                                if let Some(cspec) = clique.get_mut("spec") {
                                    self.translate_clique_spec(
                                        cspec,
                                        &format!("spec.template.cliques[{i}].spec"),
                                    )?;
                                }
                            }
                        }
                        if let Some(groups) = template
                            .get_mut("podCliqueScalingGroups")
                            .and_then(Value::as_array_mut)
                        {
                            for (i, group) in groups.iter_mut().enumerate() {
                                self.translate_policy_holder(
                                    group,
                                    &format!("spec.template.podCliqueScalingGroups[{i}]"),
                                )?;
                            }
                        }
                    }
                }
            }
            Kind::PodClique => {
                if let Some(spec) = out.get_mut("spec") {
                    self.translate_clique_spec(spec, "spec")?;
                }
            }
            Kind::PodCliqueScalingGroup => {
                if let Some(spec) = out.get_mut("spec") {
                    self.translate_policy_holder(spec, "spec")?;
                }
            }
            Kind::Pod | Kind::Event => {}
        }
        Ok(out)
    }

    /// Translates the `policy` of a PCS spec or PCSG config/spec (`holder.policy.completion`).
    fn translate_policy_holder(&self, holder: &mut Value, at: &str) -> Result<(), Unsupported> {
        let Some(completion) = holder
            .get_mut(src(Term::Policy))
            .and_then(|p| p.get_mut(src(Term::Completion)))
        else {
            return Ok(());
        };
        match self.revision {
            Revision::Grep0285Review => Ok(()),
            Revision::Grep0285ProposalText => {
                self.spell_out_defaults(completion);
                Ok(())
            }
            Revision::GrovePr728 => Err(Unsupported::Manifest {
                revision: self.revision,
                path: format!("{at}.{}.{}", src(Term::Policy), src(Term::Completion)),
                why: "it has no completion semantics above PodClique".into(),
            }),
        }
    }

    /// Rewrites one completion object for a revision with other spellings and no empty
    /// markers: renamed fields, and `{}` parts replaced by their explicit defaults.
    fn spell_out_defaults(&self, completion: &mut Value) {
        let Some(map) = completion.as_object_mut() else {
            return;
        };
        let (Some(success), Some(targets), Some(failure), Some(max_restarts)) = (
            self.name(Term::Success),
            self.name(Term::TargetNames),
            self.name(Term::Failure),
            self.name(Term::MaxRestarts),
        ) else {
            return;
        };
        if let Some(s) = map.remove(src(Term::Success)) {
            let mut s = s.as_object().cloned().unwrap_or_default();
            if let Some(names) = s.remove(src(Term::TargetNames)) {
                s.insert(targets.into(), names);
            }
            if !s.is_empty() {
                map.insert(success.into(), Value::Object(s));
            }
        }
        let f = map
            .remove(src(Term::Failure))
            .and_then(|f| f.as_object().cloned())
            .unwrap_or_default();
        let mut f: Map<String, Value> = f
            .into_iter()
            .map(|(k, v)| {
                if k == src(Term::MaxRestarts) {
                    (max_restarts.to_owned(), v)
                } else {
                    (k, v)
                }
            })
            .collect();
        if f.is_empty() && map.contains_key(success) {
            return;
        }
        if f.is_empty() {
            f.insert(max_restarts.into(), Value::from(0));
        }
        map.insert(failure.into(), Value::Object(f));
    }

    fn translate_clique_spec(&self, spec: &mut Value, at: &str) -> Result<(), Unsupported> {
        let completion_at = format!("{at}.{}.{}", src(Term::Policy), src(Term::Completion));
        match self.revision {
            Revision::Grep0285Review => Ok(()),
            Revision::Grep0285ProposalText => {
                if let Some(completion) = spec
                    .get_mut(src(Term::Policy))
                    .and_then(|p| p.get_mut(src(Term::Completion)))
                {
                    self.spell_out_defaults(completion);
                }
                Ok(())
            }
            Revision::GrovePr728 => {
                let completion = spec
                    .get(src(Term::Policy))
                    .and_then(|p| p.get(src(Term::Completion)))
                    .filter(|c| !c.is_null())
                    .cloned();
                let restart_policy = spec
                    .pointer("/podSpec/restartPolicy")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                match completion {
                    Some(completion) => {
                        if completion.get(src(Term::Success)).is_some() {
                            return Err(Unsupported::Manifest {
                                revision: self.revision,
                                path: format!("{completion_at}.{}", src(Term::Success)),
                                why: "its job marker is `restartPolicy: Never` only".into(),
                            });
                        }
                        if let Some(rp) = restart_policy.filter(|rp| rp != "Never") {
                            return Err(Unsupported::Manifest {
                                revision: self.revision,
                                path: format!("{at}.podSpec.restartPolicy"),
                                why: format!(
                                    "`{rp}` on a completion-aware clique has no equivalent"
                                ),
                            });
                        }
                        let spec_map = spec.as_object_mut().expect("a clique spec is an object");
                        if let Some(policy) = spec_map
                            .get_mut(src(Term::Policy))
                            .and_then(Value::as_object_mut)
                        {
                            policy.remove(src(Term::Completion));
                            if policy.is_empty() {
                                spec_map.remove(src(Term::Policy));
                            }
                        }
                        if let Some(pod_spec) =
                            spec_map.get_mut("podSpec").and_then(Value::as_object_mut)
                        {
                            pod_spec.insert("restartPolicy".into(), Value::from("Never"));
                        }
                        Ok(())
                    }
                    None => match restart_policy.filter(|rp| rp == "Never" || rp == "OnFailure") {
                        Some(rp) => Err(Unsupported::Manifest {
                            revision: self.revision,
                            path: format!("{at}.podSpec.restartPolicy"),
                            why: format!("`{rp}` on a regular clique would change its meaning"),
                        }),
                        None => Ok(()),
                    },
                }
            }
        }
    }
}

/// The default-revision spelling of `term`: how cases and fixtures are written.
fn src(term: Term) -> &'static str {
    term.catalog_name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::leader_worker;
    use serde_json::json;

    #[test]
    fn translation_to_the_2026_08_text_renames_and_spells_out_defaults() {
        let v = Vocabulary::new(Revision::Grep0285ProposalText);
        let out = v
            .translate_manifest(Kind::PodCliqueSet, &leader_worker())
            .unwrap();
        assert_eq!(
            out.pointer("/spec/template/podCliqueScalingGroups/0/policy/completion"),
            Some(
                &json!({"success": {"completedNames": ["leader"]}, "failure": {"maxRestarts": 2}})
            )
        );
        assert_eq!(
            out.pointer("/spec/template/cliques/0/spec/policy/completion"),
            Some(&json!({"failure": {"maxRestarts": 0}}))
        );
        let review = Vocabulary::default();
        assert_eq!(
            review
                .translate_manifest(Kind::PodCliqueSet, &leader_worker())
                .unwrap(),
            leader_worker()
        );
    }

    #[test]
    fn translation_to_pr_728_uses_restart_policy_and_refuses_parents() {
        let v = Vocabulary::new(Revision::GrovePr728);
        let err = v
            .translate_manifest(Kind::PodCliqueSet, &leader_worker())
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "spec.template.podCliqueScalingGroups[0].policy.completion` cannot be expressed"
            ),
            "{err}"
        );
        let mut simple = leader_worker();
        simple["spec"]["template"]
            .as_object_mut()
            .unwrap()
            .remove("podCliqueScalingGroups");
        let out = v.translate_manifest(Kind::PodCliqueSet, &simple).unwrap();
        assert_eq!(
            out.pointer("/spec/template/cliques/0/spec"),
            Some(&json!({"replicas": 1, "podSpec": {"containers": [], "restartPolicy": "Never"}}))
        );
        assert_eq!(
            out.pointer("/spec/template/cliques/2/spec/podSpec/restartPolicy"),
            None
        );
        assert!(v.is_completion_aware_clique(&out["spec"]["template"]["cliques"][0]));
        let mut regular_never = simple.clone();
        regular_never["spec"]["template"]["cliques"][2]["spec"]["podSpec"]["restartPolicy"] =
            json!("Never");
        assert!(
            v.translate_manifest(Kind::PodCliqueSet, &regular_never)
                .is_err()
        );
    }
}
