//! The steps on the implementation: `controller` (pause, resume, crash) with its `when:`
//! trigger (a watched change, a condition, an API request, pinned by verb, resource and
//! moment), `fault` (holds and relists of the implementation's watches) and `refuse` (writes
//! the apiserver refuses), each read with every problem named by file, line and field.

use super::{Parser, join};
use crate::catalog::yaml::Node;
use crate::catalog::{
    ControllerAction, ControllerStep, DeletionTarget, FaultStep, FaultStepAction, HoldFault,
    HoldRelease, ObjectRef, Refusal, RefuseStep, RefusedVerb, RequestPin, Trigger,
};
use crate::vocab::{Category, Kind};

/// The longest `for:` a hold may have: the proxy releases a hold at 4 minutes, before the
/// apiserver's default 5-minute compaction can end the reads it needs.
pub const MAX_HOLD_IN_CASE: std::time::Duration = std::time::Duration::from_secs(4 * 60);

impl Parser<'_> {
    pub(in crate::catalog) fn controller(
        &mut self,
        node: &Node,
        path: &str,
    ) -> Option<ControllerStep> {
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

    pub(in crate::catalog) fn fault(&mut self, node: &Node, path: &str) -> Option<FaultStep> {
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
                    Some(n) => {
                        let word = self.string(n, &f.child("release"))?;
                        let Some(release) =
                            HoldRelease::ALL.into_iter().find(|r| r.keyword() == word)
                        else {
                            self.error(
                                n.pos,
                                &f.child("release"),
                                format!(
                                    "unknown release `{word}` (expected deliver, coalesce or relist)"
                                ),
                            );
                            return None;
                        };
                        release
                    }
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

    pub(in crate::catalog) fn refuse(&mut self, node: &Node, path: &str) -> Option<RefuseStep> {
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

    pub(super) fn trigger(&mut self, node: &Node, path: &str) -> Option<Trigger> {
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

    pub(super) fn request_pin(&mut self, node: &Node, path: &str) -> Option<RequestPin> {
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
}
