//! Steps: each entry of a case's `steps:` read into its [`Step`](crate::catalog::Step), with
//! every problem named by file, line and field: the writes (`apply`, `update`, `delete`,
//! `force-delete`, `reject`), the pod actions (`exit`, `unready`, `ready`, `evict`, `preempt`,
//! `lose-node`), `controller` with its `when:` trigger, `fault` (holds and relists of the
//! implementation's watches), `refuse` (writes the apiserver refuses) and `remember`. (`expect`
//! steps are in `expect.rs`.)

use super::{Fields, Parser, join};
use crate::catalog::model::{
    Addressee, Apply, ConditionWrite, ControllerAction, ControllerStep, Delete, DeletionTarget,
    FaultStep, FaultStepAction, HoldFault, HoldRelease, NodeLoss, ObjectRef, PodAction, PodStep,
    Refusal, RefuseStep, RefusedVerb, Reject, Remember, Request, RequestPin, Step, StepKind,
    Subresource, Trigger, Update,
};

/// The longest `for:` a hold may have: the proxy releases a hold at 4 minutes, before the
/// apiserver's default 5-minute compaction can end the reads it needs.
pub const MAX_HOLD_IN_CASE: std::time::Duration = std::time::Duration::from_secs(4 * 60);
use crate::catalog::yaml::Node;
use crate::catalog::{STEP_KINDS, step_definition};
use crate::vocab::{Category, Kind};

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
        let p = join(path, key);
        let kind = match key {
            "apply" => StepKind::Apply(self.apply(body, &p)?),
            "update" => StepKind::Update(self.update(body, &p)?),
            "delete" | "force-delete" => self.delete(body, &p, key == "force-delete")?,
            "reject" => StepKind::Reject(self.reject(body, &p)?),
            "exit" | "unready" | "ready" | "evict" | "preempt" | "lose-node" => {
                StepKind::Pods(self.pod_step(key, body, &p)?)
            }
            "controller" => StepKind::Controller(self.controller(body, &p)?),
            "fault" => StepKind::Fault(self.fault(body, &p)?),
            "refuse" => StepKind::Refuse(self.refuse(body, &p)?),
            "remember" => StepKind::Remember(self.remember(body, &p)?),
            "expect" => StepKind::Expect(self.expect(body, &p)?),
            // An unknown key, which `fields` has reported.
            _ if step_definition(key).is_none() => return None,
            _ => unreachable!("the step keyword `{key}` is defined in STEP_KINDS but not parsed"),
        };
        Some(Step {
            pos: node.pos,
            kind,
        })
    }

    fn apply(&mut self, node: &Node, path: &str) -> Option<Apply> {
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

    fn update(&mut self, node: &Node, path: &str) -> Option<Update> {
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
            Some(n) => match self.string(n, &f.child("subresource")).as_deref() {
                Some("status") => Some(Subresource::Status),
                Some("scale") => Some(Subresource::Scale),
                Some(other) => {
                    self.error(
                        n.pos,
                        &f.child("subresource"),
                        format!("unknown subresource `{other}` (expected `status` or `scale`)"),
                    );
                    None
                }
                None => None,
            },
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

    fn pod_step(&mut self, key: &str, node: &Node, path: &str) -> Option<PodStep> {
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

    fn delete(&mut self, node: &Node, path: &str, force: bool) -> Option<StepKind> {
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

    fn reject(&mut self, node: &Node, path: &str) -> Option<Reject> {
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

    fn controller(&mut self, node: &Node, path: &str) -> Option<ControllerStep> {
        let action_of = |s: &str| match s {
            "pause" => Some(ControllerAction::Pause),
            "resume" => Some(ControllerAction::Resume),
            "crash" => Some(ControllerAction::Crash),
            "wait" => Some(ControllerAction::Wait),
            _ => None,
        };
        if let Some(s) = node.as_str() {
            let Some(action) = action_of(s) else {
                self.error(
                    node.pos,
                    path,
                    format!(
                        "unknown controller action `{s}` (expected pause, resume, crash or wait)"
                    ),
                );
                return None;
            };
            return Some(ControllerStep { action, when: None });
        }
        let f = self.fields(node, path, &["action", "when"])?;
        let action = self.required(&f, "action").and_then(|n| {
            let s = self.string(n, &f.child("action"))?;
            let a = action_of(&s);
            if a.is_none() {
                self.error(
                    n.pos,
                    &f.child("action"),
                    format!(
                        "unknown controller action `{s}` (expected pause, resume, crash or wait)"
                    ),
                );
            }
            a
        });
        let when = match f.get("when") {
            Some(n) => Some(self.trigger(n, &f.child("when"))?),
            None => None,
        };
        if let (Some(a), Some(n)) = (action, f.get("when"))
            && a == ControllerAction::Wait
        {
            self.error(
                n.pos,
                &f.child("when"),
                "`wait` waits for the actions armed before it and takes no `when`",
            );
            return None;
        }
        if let (Some(Trigger::Request(_)), Some(a), Some(n)) = (&when, action, f.get("when"))
            && a == ControllerAction::Resume
        {
            self.error(
                n.pos,
                &f.child("when"),
                "a `request:` trigger pins a crash or a pause: use it with `action: crash` or `action: pause`",
            );
            return None;
        }
        Some(ControllerStep {
            action: action?,
            when,
        })
    }

    fn fault(&mut self, node: &Node, path: &str) -> Option<FaultStep> {
        if let Some(s) = node.as_str() {
            if s == "release" {
                return Some(FaultStep {
                    action: FaultStepAction::Release,
                    when: None,
                });
            }
            self.error(
                node.pos,
                path,
                format!(
                    "unknown fault `{s}` (expected `release`, or a mapping with `hold` or `relist`)"
                ),
            );
            return None;
        }
        let f = self.fields(
            node,
            path,
            &[
                "hold", "relist", "name", "reads", "release", "when", "until", "for",
            ],
        )?;
        let when = match f.get("when") {
            Some(n) => Some(self.trigger(n, &f.child("when"))?),
            None => None,
        };
        match (f.get("hold"), f.get("relist")) {
            (Some(_), Some(_)) | (None, None) => {
                self.error(
                    f.pos,
                    path,
                    "a fault has exactly one of `hold: <kind>` or `relist: <kind>`",
                );
                None
            }
            (None, Some(n)) => {
                let kind = self.kind(n, &f.child("relist"), true);
                for key in ["name", "reads", "release", "until", "for"] {
                    if let Some(k) = f.get(key) {
                        self.error(
                            k.pos,
                            &f.child(key),
                            format!("`{key}` belongs to a `hold`; a `relist` ends every watch of its kind"),
                        );
                        return None;
                    }
                }
                Some(FaultStep {
                    action: FaultStepAction::Relist(kind?),
                    when,
                })
            }
            (Some(n), None) => {
                let kind = self.kind(n, &f.child("hold"), true);
                let name = match f.get("name") {
                    Some(n) => Some(self.string(n, &f.child("name"))?),
                    None => None,
                };
                let stale_reads = match f.get("reads") {
                    None => false,
                    Some(n) => match self.string(n, &f.child("reads"))?.as_str() {
                        "current" => false,
                        "stale" => true,
                        other => {
                            self.error(
                                n.pos,
                                &f.child("reads"),
                                format!("unknown reads `{other}` (expected current or stale)"),
                            );
                            return None;
                        }
                    },
                };
                let release = match f.get("release") {
                    None => HoldRelease::Deliver,
                    Some(n) => match self.string(n, &f.child("release"))?.as_str() {
                        "deliver" => HoldRelease::Deliver,
                        "coalesce" => HoldRelease::Coalesce,
                        "relist" => HoldRelease::Relist,
                        other => {
                            self.error(
                                n.pos,
                                &f.child("release"),
                                format!(
                                    "unknown release `{other}` (expected deliver, coalesce or relist)"
                                ),
                            );
                            return None;
                        }
                    },
                };
                let until = match f.get("until") {
                    Some(n) => Some(self.trigger(n, &f.child("until"))?),
                    None => None,
                };
                let lasts = match f.get("for") {
                    Some(n) => {
                        let d = self.duration(n, &f.child("for"))?;
                        if d.as_std() > MAX_HOLD_IN_CASE {
                            self.error(
                                n.pos,
                                &f.child("for"),
                                format!(
                                    "a hold longer than {MAX_HOLD_IN_CASE:?} outlives what a real \
                                     apiserver keeps (etcd compacts every 5 minutes by default)"
                                ),
                            );
                            return None;
                        }
                        Some(d)
                    }
                    None => None,
                };
                Some(FaultStep {
                    action: FaultStepAction::Hold(HoldFault {
                        kind: kind?,
                        name,
                        stale_reads,
                        release,
                        until,
                        lasts,
                    }),
                    when,
                })
            }
        }
    }

    fn refuse(&mut self, node: &Node, path: &str) -> Option<RefuseStep> {
        if let Some(s) = node.as_str() {
            if s == "lift" {
                return Some(RefuseStep::Lift);
            }
            self.error(
                node.pos,
                path,
                format!(
                    "unknown refuse `{s}` (expected `lift`, or a mapping with `verb` and `kind`)"
                ),
            );
            return None;
        }
        let f = self.fields(node, path, &["verb", "kind", "subresource", "for"])?;
        let verb = self.required(&f, "verb").and_then(|n| {
            match self.string(n, &f.child("verb"))?.as_str() {
                "create" => Some(RefusedVerb::Create),
                "update" => Some(RefusedVerb::Update),
                "delete" => Some(RefusedVerb::Delete),
                other => {
                    self.error(
                        n.pos,
                        &f.child("verb"),
                        format!("unknown verb `{other}` (expected create, update or delete)"),
                    );
                    None
                }
            }
        });
        let kind = self
            .required(&f, "kind")
            .and_then(|n| self.kind(n, &f.child("kind"), true));
        let status = match f.get("subresource") {
            None => Some(false),
            Some(n) => match self.string(n, &f.child("subresource"))?.as_str() {
                "status" if verb == Some(RefusedVerb::Update) => Some(true),
                "status" => {
                    self.error(
                        n.pos,
                        &f.child("subresource"),
                        "only an `update` writes the status subresource",
                    );
                    None
                }
                other => {
                    self.error(
                        n.pos,
                        &f.child("subresource"),
                        format!("unknown subresource `{other}` (expected status)"),
                    );
                    None
                }
            },
        };
        let lasts = match f.get("for") {
            Some(n) => Some(self.duration(n, &f.child("for"))?),
            None => None,
        };
        Some(RefuseStep::Start(Refusal {
            verb: verb?,
            kind: kind?,
            status: status?,
            lasts,
        }))
    }

    fn trigger(&mut self, node: &Node, path: &str) -> Option<Trigger> {
        let f = self.fields(node, path, &["changed", "deleted", "condition", "request"])?;
        if f.entries.len() != 1 {
            self.error(
                f.pos,
                path,
                "expected exactly one of `changed`, `deleted`, `condition` or `request`",
            );
            return None;
        }
        let (k, body) = &f.entries[0];
        let key = k.as_str().unwrap_or_default();
        let p = join(path, key);
        match key {
            "request" => self.request_pin(body, &p).map(Trigger::Request),
            "changed" => {
                let cf = self.fields(body, &p, &["kind", "name", "path"])?;
                let object = self.object_ref(&cf, false);
                let field = self.required(&cf, "path").and_then(|n| {
                    let s = self.string(n, &cf.child("path"))?;
                    self.note_path_terms(&s);
                    Some(s)
                });
                Some(Trigger::Changed {
                    object: object?,
                    path: field?,
                })
            }
            "deleted" => {
                let cf = self.fields(body, &p, &["kind", "name", "pod", "clique"])?;
                if cf.has("pod") || cf.has("clique") {
                    let present = ["pod", "clique"].iter().filter(|k| cf.has(k)).count();
                    if present != 1 || cf.has("kind") || cf.has("name") {
                        self.error(
                            cf.pos,
                            &p,
                            "expected one of `pod`, `clique`, or `kind` (with optional `name`)",
                        );
                        return None;
                    }
                    return self
                        .pod_selector(&cf, true)
                        .map(DeletionTarget::Pod)
                        .map(Trigger::Deleted);
                }
                let kind = self
                    .required(&cf, "kind")
                    .and_then(|n| self.kind(n, &cf.child("kind"), true))?;
                match cf.get("name") {
                    None => Some(Trigger::Deleted(DeletionTarget::AnyOf(kind))),
                    Some(n) => {
                        if kind == Kind::Pod {
                            self.error(
                                n.pos,
                                &cf.child("name"),
                                "pods are addressed by `pod: <podclique>/<index>`, never by name",
                            );
                            return None;
                        }
                        let name = self.name(n, &cf.child("name"))?;
                        Some(Trigger::Deleted(DeletionTarget::Object(ObjectRef {
                            kind,
                            name,
                        })))
                    }
                }
            }
            _ => {
                let cf = self.fields(body, &p, &["kind", "name", "type", "status"])?;
                let object = self.object_ref(&cf, false);
                let condition = self
                    .required(&cf, "type")
                    .and_then(|n| self.term(n, &cf.child("type"), Category::ConditionType));
                let status = self
                    .required(&cf, "status")
                    .and_then(|n| self.condition_status(n, &cf.child("status")));
                if let (Some(o), Some(c)) = (&object, condition) {
                    self.note_condition(Some(o.kind), c);
                }
                Some(Trigger::Condition {
                    object: object?,
                    condition: condition?,
                    status: status?,
                })
            }
        }
    }

    fn request_pin(&mut self, node: &Node, path: &str) -> Option<RequestPin> {
        const VERBS: &[&str] = &[
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
        ];
        let f = self.fields(
            node,
            path,
            &["verb", "resource", "subresource", "name", "nth", "at"],
        )?;
        let mut ok = true;
        let mut text = |parser: &mut Self, key: &str| match f.get(key) {
            Some(n) => {
                let s = parser.string(n, &f.child(key));
                ok &= s.is_some();
                s
            }
            None => None,
        };
        let verb = text(self, "verb");
        let resource = text(self, "resource");
        let subresource = text(self, "subresource");
        let name = text(self, "name");
        let at = text(self, "at");
        if let (Some(v), Some(n)) = (&verb, f.get("verb"))
            && !VERBS.contains(&v.as_str())
        {
            self.error(
                n.pos,
                &f.child("verb"),
                format!("unknown verb `{v}` (expected one of {})", VERBS.join(", ")),
            );
            ok = false;
        }
        let after = match (at.as_deref(), f.get("at")) {
            (None, _) | (Some("before"), _) => false,
            (Some("after"), _) => true,
            (Some(other), Some(n)) => {
                self.error(
                    n.pos,
                    &f.child("at"),
                    format!("unknown position `{other}` (expected before or after)"),
                );
                ok = false;
                false
            }
            (Some(_), None) => false,
        };
        let nth = match f.get("nth") {
            Some(n) => match self.unsigned(n, &f.child("nth")) {
                Some(0) => {
                    self.error(n.pos, &f.child("nth"), "`nth` counts from 1");
                    ok = false;
                    1
                }
                Some(k) => k,
                None => {
                    ok = false;
                    1
                }
            },
            None => 1,
        };
        ok.then_some(RequestPin {
            verb,
            resource,
            subresource,
            name,
            nth,
            after,
        })
    }

    fn remember(&mut self, node: &Node, path: &str) -> Option<Remember> {
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
