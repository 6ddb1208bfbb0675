//! The events a reconcile owes (EV1–EV4) and their publication: each at most once per object
//! and after the write it reports has landed, so that a crash in between leaves the object
//! owing the event, which the next process finds missing (by listing the events about the
//! object) and publishes.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType};

use super::conditions;
use super::context::Context;
use crate::names::{CONDITION_FAILED, EVENT_JOB_COMPLETED, EVENT_JOB_FAILED};
use crate::semantics::Terminal;

/// Events to publish on one object, in order.
pub(super) struct Events {
    regarding: ObjectReference,
    reports: Vec<Report>,
}

/// One event an object is to carry.
struct Report {
    event: Event,
    /// Text of the message that tells this event from others of the same reason on the same
    /// object (a restart's replica and count); `None` when the reason alone does.
    marker: Option<String>,
    /// Owed by the persisted state rather than decided now: a previous process may have
    /// written that state and published the event, or died in between (EV1–EV4 must not be
    /// lost to a crash), so it is looked up before it is published.
    owed: bool,
}

impl Report {
    fn key(&self) -> String {
        format!(
            "{}/{}",
            self.event.reason,
            self.marker.as_deref().unwrap_or_default()
        )
    }
}

impl Events {
    /// No events yet, about `obj`.
    pub(super) fn on<K: Resource<DynamicType = ()>>(obj: &K) -> Events {
        Events {
            regarding: obj.object_ref(&()),
            reports: Vec::new(),
        }
    }

    /// Adds the event of a decision made now; `related` names a second object (the failed
    /// child of a restart), `marker` what tells it from others of its reason.
    pub(super) fn add(
        &mut self,
        warning: bool,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
        marker: Option<String>,
    ) {
        self.push(warning, reason, note, related, marker, false);
    }

    /// Adds an event the object's persisted state calls for, published only if it is not
    /// there yet (see [`Report::owed`]).
    pub(super) fn owe(
        &mut self,
        warning: bool,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
        marker: Option<String>,
    ) {
        self.push(warning, reason, note, related, marker, true);
    }

    /// Each event as (reason, marker, owed), for tests.
    #[cfg(test)]
    pub(super) fn describe(&self) -> Vec<(String, Option<String>, bool)> {
        self.reports
            .iter()
            .map(|r| (r.event.reason.clone(), r.marker.clone(), r.owed))
            .collect()
    }

    /// Owes the events of a terminal condition persisted before this reconcile (EV1, EV2):
    /// `JobCompleted` noted `completed`, or `JobFailed` noted `failed` of the Failed
    /// condition's message. Returns that message when the object is Failed.
    pub(super) fn owe_terminal(
        &mut self,
        conditions: &[Condition],
        completed: String,
        failed: impl FnOnce(&str) -> String,
    ) -> Option<String> {
        match conditions::terminal(conditions)? {
            Terminal::Completed => {
                self.owe(false, EVENT_JOB_COMPLETED, completed, None, None);
                None
            }
            Terminal::Failed => {
                let message = conditions::find(conditions, CONDITION_FAILED)
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                self.owe(true, EVENT_JOB_FAILED, failed(&message), None, None);
                Some(message)
            }
        }
    }

    fn push(
        &mut self,
        warning: bool,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
        marker: Option<String>,
        owed: bool,
    ) {
        self.reports.push(Report {
            event: Event {
                type_: if warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: reason.into(),
                note: Some(note),
                action: "Reconcile".into(),
                secondary: related,
            },
            marker,
            owed,
        });
    }
}

impl Context {
    /// Publishes `events`, in order, each at most once per object: they report a write that
    /// has landed, and are published before anything acts on it, so a crash in between leaves
    /// the write's object owing the event, which the next process finds missing and publishes.
    /// A failure is logged, never blocks a decision, and is retried by the next reconcile that
    /// owes the event.
    pub(super) async fn publish(&self, events: Events) {
        let uid = events.regarding.uid.clone().unwrap_or_default();
        let object = events.regarding.name.clone().unwrap_or_default();
        for report in &events.reports {
            let key = (uid.clone(), report.key());
            if self.reported().contains(&key) {
                continue;
            }
            if report.owed {
                match self.published(&events.regarding, report).await {
                    Ok(true) => {
                        self.reported().insert(key);
                        continue;
                    }
                    Ok(false) => {
                        tracing::info!(reason = %report.event.reason, object, "publishing an event owed since before a restart");
                    }
                    Err(error) => {
                        tracing::warn!(reason = %report.event.reason, object, %error, "failed to look up an event");
                        continue;
                    }
                }
            }
            match self
                .recorder
                .publish(&report.event, &events.regarding)
                .await
            {
                Ok(()) => {
                    self.reported().insert(key);
                }
                Err(error) => {
                    tracing::warn!(reason = %report.event.reason, object, %error, "failed to publish an event");
                }
            }
        }
    }

    fn reported(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        self.reported.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `report` is already published about `regarding` (by any process).
    async fn published(
        &self,
        regarding: &ObjectReference,
        report: &Report,
    ) -> Result<bool, kube::Error> {
        let api: Api<CoreEvent> = Api::namespaced(
            self.client.clone(),
            regarding.namespace.as_deref().unwrap_or_default(),
        );
        let fields = format!(
            "involvedObject.uid={},reason={}",
            regarding.uid.as_deref().unwrap_or_default(),
            report.event.reason
        );
        let found = api.list(&ListParams::default().fields(&fields)).await?;
        Ok(found.items.iter().any(|e| {
            report
                .marker
                .as_deref()
                .is_none_or(|m| e.message.as_deref().unwrap_or_default().contains(m))
        }))
    }
}
