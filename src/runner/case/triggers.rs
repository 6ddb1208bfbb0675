//! `controller` steps: pausing, resuming or crashing the implementation, now or when a trigger
//! (a watched value changed, an object deleted, a condition reached) fires.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Mutex as AsyncMutex;

use super::expect::DEFAULT_WITHIN;
use super::steps::{CaseRun, StepError};
use crate::catalog::{
    ControllerAction, ControllerStep, DeletionTarget, ObjectRef, RequestPin, Trigger,
};
use crate::implementation::admission::NotListening;
use crate::implementation::{Instance, InstanceError};
use crate::proxy::{FaultAction, FaultRule, HookPosition, RequestMatch, Verb};
use crate::snapshot::{Snapshot, is_deleting, uid};
use crate::vocab::Vocabulary;

impl CaseRun<'_> {
    /// `controller`: pauses, resumes or crashes the implementation now, or arms a trigger
    /// that does it when it fires while the case goes on.
    pub(super) async fn controller(&mut self, step: &ControllerStep) -> Result<(), StepError> {
        let instance = self
            .instance
            .clone()
            .ok_or_else(|| StepError::Skip("the implementation cannot be controlled".into()))?;
        let action = step.action;
        if action == ControllerAction::Wait {
            return self.wait_for_triggers().await;
        }
        let Some(trigger) = step.when.clone() else {
            return Ok(act(&instance, action).await?);
        };
        if let Trigger::Request(pin) = &trigger {
            return self.pin_action(instance, pin, action);
        }
        let mut changes = self.observer.subscribe();
        let vocab = *self.vocab();
        let armed = self.observer.with_snapshot(|s| arm(&trigger, s, &vocab));
        let snapshots = self.observer.snapshot_handle();
        let (proxy, namespace) = (self.proxy.clone(), self.namespace.clone());
        let points = self.trigger_points.clone();
        self.triggers.push(tokio::spawn(async move {
            loop {
                let fired = snapshots.with(|s| fires(&trigger, &armed, s, &vocab));
                if fired {
                    if let Some(proxy) = &proxy {
                        let point = super::landing::landing(proxy, &namespace, action, &trigger);
                        points
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(point);
                    }
                    return act(&instance, action).await;
                }
                if changes.changed().await.is_err() {
                    return Ok(());
                }
            }
        }));
        Ok(())
    }
}

impl CaseRun<'_> {
    /// `controller: wait`: waits (up to [`DEFAULT_WITHIN`]) until every armed action has been
    /// carried out. One that never fires tested nothing: the case is skipped, saying so.
    async fn wait_for_triggers(&mut self) -> Result<(), StepError> {
        let deadline = tokio::time::Instant::now() + DEFAULT_WITHIN;
        for trigger in std::mem::take(&mut self.triggers) {
            match tokio::time::timeout_at(deadline, trigger).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(e.into()),
                Ok(Err(e)) => return Err(StepError::Error(format!("an armed action failed: {e}"))),
                Err(_) => {
                    let pinned = self
                        .pins
                        .last()
                        .map_or_else(String::new, |(pin, _)| format!(" (the last pin: {pin})"));
                    return Err(StepError::Skip(format!(
                        "an armed controller action never fired within {DEFAULT_WITHIN:?}{pinned}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// `when: {request: ...}`: the case's API proxy holds the implementation's matching
    /// request and crashes it there (and restarts it), or pauses it there; the request is
    /// then dropped (a paused implementation sees its connection gone once resumed). Where
    /// the pin landed is reported with the case's result.
    pub(super) fn pin_action(
        &mut self,
        instance: Arc<AsyncMutex<Instance>>,
        pin: &RequestPin,
        action: ControllerAction,
    ) -> Result<(), StepError> {
        let proxy = self.proxy.clone().ok_or_else(|| {
            StepError::Skip(
                "a `request:` crash pin needs the implementation to go through the harness's API proxy (it was turned off)"
                    .into(),
            )
        })?;
        let (matches, position) = self.pin_match(pin)?;
        proxy.set_rules(vec![
            FaultRule::new(matches, FaultAction::Hook { position }).nth(pin.nth),
        ]);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Result<(), ControlError>>();
        let done_tx = Arc::new(std::sync::Mutex::new(Some(done_tx)));
        proxy.set_hook(move |_fired| {
            let instance = instance.clone();
            let done_tx = done_tx.clone();
            async move {
                let result = act(&instance, action).await;
                if let Some(tx) = done_tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    let _ = tx.send(result);
                }
            }
        });
        self.pins.push((pin.clone(), action));
        self.triggers.push(tokio::spawn(async move {
            // Never firing is judged at the end of the case, not here.
            done_rx.await.unwrap_or(Ok(()))
        }));
        Ok(())
    }
}

impl CaseRun<'_> {
    /// The requests of the case's namespace `pin` selects, and where it lands.
    pub(super) fn pin_match(
        &self,
        pin: &RequestPin,
    ) -> Result<(RequestMatch, HookPosition), StepError> {
        let mut matches = RequestMatch::any().namespace(self.namespace.clone());
        if let Some(v) = &pin.verb {
            let verb = v
                .parse::<Verb>()
                .map_err(|e| StepError::Error(format!("bad verb in a request pin: {e}")))?;
            matches = matches.verb(verb);
        }
        if let Some(r) = &pin.resource {
            matches = matches.resource(r.clone());
        }
        if let Some(s) = &pin.subresource {
            matches = matches.subresource(s.clone());
        }
        if let Some(n) = &pin.name {
            matches = matches.name(n.clone());
        }
        let position = if pin.after {
            HookPosition::After
        } else {
            HookPosition::Before
        };
        Ok((matches, position))
    }

    /// What watches the case's objects for triggers other than request pins.
    pub(super) fn trigger_source(&self) -> TriggerSource {
        TriggerSource {
            changes: self.observer.subscribe(),
            snapshots: self.observer.snapshot_handle(),
            vocab: *self.vocab(),
        }
    }
}

/// The observer's view, for arming a watched trigger at any moment (from a task too).
#[derive(Clone)]
pub(super) struct TriggerSource {
    changes: tokio::sync::watch::Receiver<u64>,
    snapshots: crate::runner::observe::SnapshotHandle,
    vocab: Vocabulary,
}

impl TriggerSource {
    /// Arms `trigger` (a `changed`, `deleted` or `condition` one) now, and waits until it
    /// fires: `true`, or `false` when the observer is gone first.
    pub(super) async fn fired(mut self, trigger: Trigger) -> bool {
        let vocab = self.vocab;
        let armed = self.snapshots.with(|s| arm(&trigger, s, &vocab));
        loop {
            if self.snapshots.with(|s| fires(&trigger, &armed, s, &vocab)) {
                return true;
            }
            if self.changes.changed().await.is_err() {
                return false;
            }
        }
    }
}

/// A controller action the harness could not carry out.
#[derive(Debug, thiserror::Error)]
pub(super) enum ControlError {
    /// Pausing failed.
    #[error("failed to pause the implementation")]
    Pause(#[source] InstanceError),
    /// Resuming failed.
    #[error("failed to resume the implementation")]
    Resume(#[source] InstanceError),
    /// The crash's restart failed.
    #[error("failed to restart the implementation")]
    Restart(#[source] InstanceError),
    /// It restarted but did not become ready.
    #[error(transparent)]
    NotReady(#[from] NotListening),
}

impl From<ControlError> for StepError {
    fn from(e: ControlError) -> Self {
        StepError::Error(crate::errors::chain(&e).to_string())
    }
}

/// Carries out a controller action on the instance; after a crash, waits until it is ready.
async fn act(
    instance: &Arc<AsyncMutex<Instance>>,
    action: ControllerAction,
) -> Result<(), ControlError> {
    let mut instance = instance.lock().await;
    match action {
        ControllerAction::Pause => instance.pause().await.map_err(ControlError::Pause)?,
        ControllerAction::Resume => instance.resume().await.map_err(ControlError::Resume)?,
        ControllerAction::Wait => {}
        ControllerAction::Crash => {
            instance
                .crash_and_restart()
                .await
                .map_err(ControlError::Restart)?;
            // Its webhooks answer again before the case goes on.
            instance.ready().await?;
        }
    }
    Ok(())
}

/// What a trigger compares against: the watched value when the step ran, or the UIDs that
/// existed then.
#[derive(Debug, Clone)]
enum Armed {
    Value(Value),
    Uids(Vec<String>),
    Nothing,
}

/// The UIDs of the objects a `deleted:` trigger watches that are not being deleted.
fn live_uids(target: &DeletionTarget, s: &Snapshot, vocab: &Vocabulary) -> Vec<String> {
    s.deletion_targets(target, vocab)
        .into_iter()
        .filter(|o| !is_deleting(o))
        .map(|o| uid(o).unwrap_or_default().to_string())
        .collect()
}

/// The value a `changed:` trigger watches (`null` when absent).
fn watched_value(object: &ObjectRef, path: &str, s: &Snapshot, vocab: &Vocabulary) -> Value {
    let path = vocab
        .translate_field_path(path)
        .unwrap_or_else(|| path.to_owned());
    s.field(object, &path).cloned().unwrap_or(Value::Null)
}

/// What `trigger` compares against later, taken when its step runs.
fn arm(trigger: &Trigger, s: &Snapshot, vocab: &Vocabulary) -> Armed {
    match trigger {
        Trigger::Changed { object, path } => Armed::Value(watched_value(object, path, s, vocab)),
        Trigger::Deleted(target) => Armed::Uids(live_uids(target, s, vocab)),
        Trigger::Condition { .. } | Trigger::Request(_) => Armed::Nothing,
    }
}

/// Whether `trigger`, armed with `armed`, fires in `s`.
fn fires(trigger: &Trigger, armed: &Armed, s: &Snapshot, vocab: &Vocabulary) -> bool {
    match (trigger, armed) {
        (Trigger::Changed { object, path }, Armed::Value(before)) => {
            &watched_value(object, path, s, vocab) != before
        }
        (Trigger::Deleted(target), Armed::Uids(before)) => {
            let live = live_uids(target, s, vocab);
            before.iter().any(|u| !live.contains(u))
        }
        (
            Trigger::Condition {
                object,
                condition,
                status,
            },
            _,
        ) => vocab.name(*condition).is_some_and(|type_| {
            s.object(object)
                .and_then(|o| crate::vocab::condition_status(o, type_))
                == Some(status.as_str())
        }),
        _ => false,
    }
}
