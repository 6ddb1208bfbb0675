//! `fault` steps: holding back, coalescing or relisting what the implementation's watches
//! see, through the case's API proxy, now or when a trigger fires; a hold released by a
//! step, a later trigger or a duration.

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use super::steps::{CaseRun, StepError};
use super::triggers::TriggerSource;
use crate::catalog::{DeletionTarget, FaultStep, FaultStepAction, HoldFault, HoldRelease, Trigger};
use crate::proxy::{ApiProxy, Hold, HoldError, HookPosition, Reads, Release, RequestMatch};
use crate::report::Outcome;
use crate::vocab::Kind;

/// A fault armed with `when:` (or a hold's release armed with `until:`), and what it said
/// when it was done.
pub(super) struct ArmedFault {
    /// The step, as the report names it.
    what: String,
    /// Ends with `None` when its trigger never fired (the proxy dropped the pin at the end
    /// of the case, or the observer stopped), with `Err` when the fault could not be
    /// carried out.
    task: JoinHandle<Option<Result<(), HoldError>>>,
}

/// What the case's faults did, one line each, for the report (hold ids keep their lines
/// apart until the teardown knows how each hold ended).
#[derive(Default)]
pub(super) struct FaultLog {
    lines: Vec<(Option<u64>, String)>,
}

type SharedLog = Arc<Mutex<FaultLog>>;

fn note(log: &SharedLog, hold: Option<u64>, line: String) {
    log.lock()
        .unwrap_or_else(|p| p.into_inner())
        .lines
        .push((hold, line));
}

/// Everything a fault needs once it fires, away from the case's steps.
#[derive(Clone)]
struct Armer {
    proxy: Arc<ApiProxy>,
    namespace: String,
    source: TriggerSource,
    log: SharedLog,
    /// The request pattern of an `until: {request: ...}`, built when the step ran.
    until_pin: Option<(RequestMatch, HookPosition, u32)>,
}

impl CaseRun<'_> {
    /// `fault`: starts a hold or a relist now, arms it on a trigger, or releases every hold.
    pub(super) async fn fault(&mut self, step: &FaultStep) -> Result<(), StepError> {
        let proxy = self.proxy.clone().ok_or_else(|| {
            StepError::Skip(
                "a `fault` step needs the implementation to go through the harness's API proxy (it was turned off)"
                    .into(),
            )
        })?;
        if step.action == FaultStepAction::Release {
            for record in proxy.release_all() {
                tracing::debug!(%record, "released by a step");
            }
            return Ok(());
        }
        let until_pin = match &step.action {
            FaultStepAction::Hold(HoldFault {
                until: Some(Trigger::Request(pin)),
                ..
            }) => {
                let (m, p) = self.pin_match(pin)?;
                Some((m, p, pin.nth))
            }
            _ => None,
        };
        let armer = Armer {
            proxy: proxy.clone(),
            namespace: self.namespace.clone(),
            source: self.trigger_source(),
            log: self.fault_log.clone(),
            until_pin,
        };
        let action = step.action.clone();
        let Some(trigger) = step.when.clone() else {
            return armer
                .start(&action, "at once".into())
                .await
                .map_err(StepError::from);
        };
        let what = format!("{} when {}", describe_action(&action), describe(&trigger));
        let label = format!("when {}", describe(&trigger));
        let task = if let Trigger::Request(pin) = &trigger {
            let (matches, position) = self.pin_match(pin)?;
            let (tx, rx) = tokio::sync::oneshot::channel();
            proxy.on_request(matches, pin.nth, position, move |request| async move {
                let label = format!("{label}: {request}");
                let _ = tx.send(armer.start(&action, label).await);
            });
            // A pin that never fired is dropped with the proxy's marks at the end of the
            // case, and its sender with it.
            tokio::spawn(async move { rx.await.ok() })
        } else {
            let source = armer.source.clone();
            tokio::spawn(async move {
                if source.fired(trigger).await {
                    Some(armer.start(&action, label).await)
                } else {
                    None
                }
            })
        };
        self.faults.push(ArmedFault { what, task });
        Ok(())
    }

    /// What the case's faults did, for the report, and the outcome with what they learnt: a
    /// fault no real cluster could produce (a hold longer than the apiserver's history, one
    /// that could not start) makes the case an error; an armed fault that never started
    /// tested nothing, so a pass becomes a skip.
    pub(super) async fn settle_faults(&mut self, mut outcome: Outcome) -> (Outcome, Vec<String>) {
        let Some(proxy) = self.proxy.clone() else {
            return (outcome, Vec::new());
        };
        proxy.clear_marks();
        let mut never = Vec::new();
        let mut failed = Vec::new();
        for armed in self.faults.drain(..) {
            if !armed.task.is_finished() {
                armed.task.abort();
                never.push(armed.what);
                continue;
            }
            match armed.task.await {
                Ok(Some(Ok(()))) => {}
                Ok(None) => never.push(armed.what),
                Ok(Some(Err(e))) => {
                    failed.push(format!("{}: {}", armed.what, crate::errors::chain(&e)))
                }
                Err(e) => failed.push(format!("{}: {e}", armed.what)),
            }
        }
        proxy.release_all();
        let records = proxy.holds();
        let log = std::mem::take(&mut *self.fault_log.lock().unwrap_or_else(|p| p.into_inner()));
        let points = log
            .lines
            .into_iter()
            .map(
                |(hold, label)| match hold.and_then(|id| records.iter().find(|r| r.id == id)) {
                    Some(record) => format!("{record} ({label})"),
                    None => label,
                },
            )
            .collect();
        failed.extend(proxy.fault_errors());
        if !failed.is_empty() && !matches!(outcome, Outcome::Error { .. }) {
            outcome = Outcome::Error {
                message: format!(
                    "a fault was not one a real cluster can produce: {}",
                    failed.join("; ")
                ),
            };
        } else if let Some(missed) = never.first()
            && outcome == Outcome::Pass
        {
            outcome = Outcome::Skip {
                reason: format!(
                    "the armed fault ({missed}) never started: its trigger never fired"
                ),
            };
        }
        (outcome, points)
    }
}

impl Armer {
    /// Carries out `action` now; `label` says what started it.
    async fn start(&self, action: &FaultStepAction, label: String) -> Result<(), HoldError> {
        match action {
            FaultStepAction::Release => {
                self.proxy.release_all();
                Ok(())
            }
            FaultStepAction::Relist(kind) => {
                let (group, _) = group_version(*kind);
                let ended = self.proxy.relist(group, kind.plural());
                note(
                    &self.log,
                    None,
                    format!(
                        "relist {}: {ended} watch(es) ended with 410 ({label})",
                        kind.plural()
                    ),
                );
                Ok(())
            }
            FaultStepAction::Hold(h) => self.hold(h, label).await,
        }
    }

    async fn hold(&self, h: &HoldFault, label: String) -> Result<(), HoldError> {
        let (group, version) = group_version(h.kind);
        let hold = Hold {
            group: group.to_string(),
            version: version.to_string(),
            resource: h.kind.plural().to_string(),
            namespace: Some(self.namespace.clone()),
            names: h.name.clone().into_iter().collect(),
            reads: if h.stale_reads {
                Reads::Stale
            } else {
                Reads::Current
            },
            release: match h.release {
                HoldRelease::Deliver => Release::Deliver,
                HoldRelease::Coalesce => Release::Coalesce,
                HoldRelease::Relist => Release::Relist,
            },
        };
        let record = self.proxy.hold(hold).await?;
        let id = record.id;
        let mut released_by = Vec::new();
        if let Some(lasts) = h.lasts {
            released_by.push(format!("for {:?}", lasts.as_std()));
            let proxy = self.proxy.clone();
            tokio::spawn(async move {
                tokio::time::sleep(lasts.as_std()).await;
                proxy.release(id);
            });
        }
        match (&h.until, &self.until_pin) {
            (Some(until @ Trigger::Request(_)), Some((matches, position, nth))) => {
                released_by.push(format!("until {}", describe(until)));
                let proxy = self.proxy.clone();
                self.proxy
                    .on_request(matches.clone(), *nth, *position, move |_| async move {
                        proxy.release(id);
                    });
            }
            (Some(until), _) => {
                released_by.push(format!("until {}", describe(until)));
                let proxy = self.proxy.clone();
                let source = self.source.clone();
                let until = until.clone();
                tokio::spawn(async move {
                    if source.fired(until).await {
                        proxy.release(id);
                    }
                });
            }
            (None, _) => {}
        }
        let released = if released_by.is_empty() {
            String::new()
        } else {
            format!("; released {}", released_by.join(" or "))
        };
        note(&self.log, Some(id), format!("{label}{released}"));
        Ok(())
    }
}

/// The API group and version of a kind's resource.
fn group_version(kind: Kind) -> (&'static str, &'static str) {
    match kind.api_version().split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", kind.api_version()),
    }
}

fn describe_action(action: &FaultStepAction) -> String {
    match action {
        FaultStepAction::Hold(h) => match &h.name {
            Some(name) => format!("hold {} {name}", h.kind.plural()),
            None => format!("hold {}", h.kind.plural()),
        },
        FaultStepAction::Relist(kind) => format!("relist {}", kind.plural()),
        FaultStepAction::Release => "release".into(),
    }
}

/// A trigger as the report says it.
fn describe(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Changed { object, path } => format!("{object} {path} changed"),
        Trigger::Deleted(DeletionTarget::Object(o)) => format!("{o} deleted"),
        Trigger::Deleted(DeletionTarget::AnyOf(k)) => format!("a {k} deleted"),
        Trigger::Deleted(DeletionTarget::Pod(p)) => format!("pod {p} deleted"),
        Trigger::Condition {
            object,
            condition,
            status,
        } => format!("{object} {condition:?}={status:?}"),
        Trigger::Request(pin) => format!("request {pin}"),
    }
}

impl From<HoldError> for StepError {
    fn from(e: HoldError) -> Self {
        StepError::Error(crate::errors::chain(&e).to_string())
    }
}
