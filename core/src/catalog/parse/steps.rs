//! Steps: each entry of a case's `steps:` read into its [`Step`](crate::catalog::Step), with
//! every problem named by file, line and field: the writes (`apply`, `update`, `delete`,
//! `force-delete`, `reject`), the pod actions (`exit`, `unready`, `ready`, `evict`, `preempt`,
//! `lose-node`) and `remember`. (The steps on the implementation, `controller`, `fault` and
//! `refuse`, are in `implementation.rs`; `expect` steps are in `expect.rs`.)

use super::{Fields, Parser, join};
use crate::catalog::yaml::Node;
use crate::catalog::{
    Addressee, Apply, ConditionWrite, Delete, NodeLoss, ObjectRef, PodAction, PodStep, Reject,
    Remember, Request, Step, StepKind, Subresource, Update,
};
use crate::catalog::{STEP_KINDS, step_definition};
use crate::vocab::Kind;

impl Parser<'_> {
    pub(super) fn step(&mut self, node: &Node, path: &str) -> Option<Step> {
        let keywords: Vec<&str> = STEP_KINDS.iter().map(|d| d.keyword).collect();
        let f = self.fields(node, path, &keywords)?;
        if f.entries.len() != 1 {
            self.error(
                node.pos,
                path,
                format!(
                    "a step has exactly one key (its kind), found {}",
                    f.entries.len()
                ),
            );
            return None;
        }
        let (key_node, body) = &f.entries[0];
        let key = key_node.as_str().unwrap_or_default();
        // An unknown key, which `fields` has reported, has no definition.
        let definition = step_definition(key)?;
        let kind = (definition.parse)(self, key, body, &join(path, key))?;
        Some(Step {
            pos: node.pos,
            kind,
        })
    }

    pub(in crate::catalog) fn apply(&mut self, node: &Node, path: &str) -> Option<Apply> {
        if node.as_str().is_some() {
            let fixture = self.fixture_ref(node, path)?;
            return Some(Apply {
                fixture,
                patch: None,
            });
        }
        let f = self.fields(node, path, &["fixture", "patch"])?;
        let fixture = self
            .required(&f, "fixture")
            .and_then(|n| self.fixture_ref(n, &f.child("fixture")));
        let patch = f
            .get("patch")
            .and_then(|n| self.patch_value(n, &f.child("patch")));
        Some(Apply {
            fixture: fixture?,
            patch,
        })
    }

    /// `kind` + `name`, or `fixture`; returns the target and whether it was complete.
    fn target(&mut self, f: &Fields<'_>) -> Option<Addressee> {
        match (f.get("kind"), f.get("name"), f.get("fixture")) {
            (_, _, Some(fx)) if f.has("kind") || f.has("name") => {
                self.error(
                    fx.pos,
                    &f.child("fixture"),
                    "use either `fixture` or `kind` + `name`",
                );
                None
            }
            (None, None, Some(fx)) => self
                .fixture_ref(fx, &f.child("fixture"))
                .map(Addressee::Fixture),
            (Some(k), Some(n), None) => {
                let kind = self.kind(k, &f.child("kind"), false);
                let name = self.name(n, &f.child("name"));
                Some(Addressee::Object(ObjectRef {
                    kind: kind?,
                    name: name?,
                }))
            }
            _ => {
                self.error(f.pos, &f.path, "expected `kind` and `name`, or `fixture`");
                None
            }
        }
    }

    pub(in crate::catalog) fn update(&mut self, node: &Node, path: &str) -> Option<Update> {
        let f = self.fields(
            node,
            path,
            &[
                "kind",
                "name",
                "fixture",
                "subresource",
                "patch",
                "conditions",
            ],
        )?;
        let target = self.target(&f);
        let subresource = match f.get("subresource") {
            None => Some(Subresource::Main),
            Some(n) => self.string(n, &f.child("subresource")).and_then(|word| {
                let found = Subresource::ALL.into_iter().find(|s| s.keyword() == word);
                if found.is_none() {
                    self.error(
                        n.pos,
                        &f.child("subresource"),
                        format!(
                            "unknown subresource `{word}` (expected `main`, `status` or `scale`)"
                        ),
                    );
                }
                found
            }),
        };
        let patch = f
            .get("patch")
            .and_then(|n| self.patch_value(n, &f.child("patch")));
        let kind = match &target {
            Some(Addressee::Object(o)) => Some(o.kind),
            Some(Addressee::Fixture(_)) => Some(Kind::PodCliqueSet),
            None => None,
        };
        let conditions = match f.get("conditions") {
            None => Vec::new(),
            Some(n) => {
                if subresource != Some(Subresource::Status) {
                    self.error(
                        n.pos,
                        &f.child("conditions"),
                        "`conditions` needs `subresource: status`",
                    );
                }
                self.conditions::<ConditionWrite>(n, &f.child("conditions"), kind)
            }
        };
        if !f.has("patch") && !f.has("conditions") {
            self.error(f.pos, path, "expected `patch` or `conditions`");
        }
        Some(Update {
            target: target?,
            subresource: subresource?,
            patch,
            conditions,
        })
    }

    pub(in crate::catalog) fn pod_step(
        &mut self,
        key: &str,
        node: &Node,
        path: &str,
    ) -> Option<PodStep> {
        let allowed: &[&str] = match key {
            "exit" => &["pod", "clique", "pcs", "code"],
            "lose-node" => &["pod", "mode", "alone"],
            "evict" | "preempt" => &["pod", "clique", "pcs", "terminal-phase"],
            _ => &["pod", "clique", "pcs"],
        };
        let f = self.fields(node, path, allowed)?;
        let without_terminal_phase = self.without_terminal_phase(&f)?;
        let selector = self.pod_selector(&f, key != "lose-node");
        let action = match key {
            "exit" => {
                let code = self.required(&f, "code").and_then(|n| {
                    let c = self.integer(n, &f.child("code"))?;
                    match i32::try_from(c) {
                        Ok(c) if (0..=255).contains(&c) => Some(c),
                        _ => {
                            self.error(n.pos, &f.child("code"), "expected an exit code in 0..=255");
                            None
                        }
                    }
                });
                PodAction::Exit(code?)
            }
            "unready" => PodAction::Unready,
            "ready" => PodAction::Ready,
            "evict" => PodAction::Evict,
            "preempt" => PodAction::Preempt,
            _ => {
                let mode = match f.get("mode") {
                    None => Some(NodeLoss::Vanish),
                    Some(n) => match self.string(n, &f.child("mode")).as_deref() {
                        Some("vanish") => Some(NodeLoss::Vanish),
                        Some("fail") => Some(NodeLoss::FailFirst),
                        Some(other) => {
                            self.error(
                                n.pos,
                                &f.child("mode"),
                                format!("unknown mode `{other}` (expected `vanish` or `fail`)"),
                            );
                            None
                        }
                        None => None,
                    },
                };
                PodAction::LoseNode(mode?)
            }
        };
        let alone = match f.get("alone") {
            None => false,
            Some(n) => self.boolean(n, &f.child("alone"))?,
        };
        Some(PodStep {
            selector: selector?,
            action,
            without_terminal_phase,
            alone,
            if_present: false,
        })
    }

    /// `terminal-phase: false` (the only value besides the default `true`).
    fn without_terminal_phase(&mut self, f: &Fields) -> Option<bool> {
        let Some(n) = f.get("terminal-phase") else {
            return Some(false);
        };
        Some(!self.boolean(n, &f.child("terminal-phase"))?)
    }

    pub(in crate::catalog) fn delete(
        &mut self,
        node: &Node,
        path: &str,
        force: bool,
    ) -> Option<StepKind> {
        let f = self.fields(
            node,
            path,
            &[
                "kind",
                "name",
                "fixture",
                "pod",
                "clique",
                "pcs",
                "terminal-phase",
                "if-present",
            ],
        )?;
        let is_pod = ["pod", "clique", "pcs"].iter().any(|k| f.has(k));
        if f.has("if-present") && !is_pod {
            self.error(
                f.pos,
                &f.child("if-present"),
                "`if-present` applies to deleting pods only (`pod`, `clique`, `pcs`)",
            );
            return None;
        }
        if f.has("terminal-phase") && (force || !is_pod) {
            self.error(
                f.pos,
                &f.child("terminal-phase"),
                "`terminal-phase` applies to a graceful delete of pods only",
            );
            return None;
        }
        if is_pod {
            let without_terminal_phase = self.without_terminal_phase(&f)?;
            if ["kind", "name", "fixture"].iter().any(|k| f.has(k)) {
                self.error(
                    f.pos,
                    path,
                    "use either a pod selector (`pod`, `clique`, `pcs`) or an object (`kind` + `name`, `fixture`)",
                );
                return None;
            }
            let if_present = match f.get("if-present") {
                None => false,
                Some(n) => self.boolean(n, &f.child("if-present"))?,
            };
            let selector = self.pod_selector(&f, true)?;
            return Some(StepKind::Pods(PodStep {
                selector,
                action: if force {
                    PodAction::ForceDelete
                } else {
                    PodAction::Delete
                },
                without_terminal_phase,
                alone: false,
                if_present,
            }));
        }
        let target = self.target(&f)?;
        Some(StepKind::Delete(Delete { target, force }))
    }

    pub(in crate::catalog) fn reject(&mut self, node: &Node, path: &str) -> Option<Reject> {
        let f = self.fields(node, path, &["apply", "update", "code", "field"])?;
        let request = match (f.get("apply"), f.get("update")) {
            (Some(a), None) => self.apply(a, &f.child("apply")).map(Request::Apply),
            (None, Some(u)) => self.update(u, &f.child("update")).map(Request::Update),
            _ => {
                self.error(f.pos, path, "expected exactly one of `apply` or `update`");
                None
            }
        };
        let code = f.get("code").and_then(|n| {
            let c = self.integer(n, &f.child("code"))?;
            match u16::try_from(c) {
                Ok(c) if (400..500).contains(&c) => Some(c),
                _ => {
                    self.error(n.pos, &f.child("code"), "expected an HTTP 4xx status code");
                    None
                }
            }
        });
        let field = self.required(&f, "field").and_then(|n| {
            let s = self.string(n, &f.child("field"))?;
            self.note_path_terms(&s);
            Some(s)
        });
        Some(Reject {
            request: request?,
            code,
            field: field?,
        })
    }

    pub(in crate::catalog) fn remember(&mut self, node: &Node, path: &str) -> Option<Remember> {
        let f = self.fields(node, path, &["as", "kind", "name", "pod"])?;
        let label = self
            .required(&f, "as")
            .and_then(|n| self.string(n, &f.child("as")).map(|s| (s, n.pos)));
        let subject = self.subject(&f);
        let (label, pos) = label?;
        if !self.remembered.insert(label.clone()) {
            self.error(
                pos,
                &f.child("as"),
                format!("label `{label}` is already remembered"),
            );
        }
        Some(Remember {
            label,
            subject: subject?,
        })
    }
}
