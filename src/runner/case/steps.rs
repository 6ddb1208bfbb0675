//! The step loop: the state one case's steps share, how a step fails, and the dispatch of
//! each step to its kind's handler.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;

use super::lifecycle::RunContext;
use crate::catalog::{Case, ControllerAction, RequestPin, StepKind, UidSubject};
use crate::implementation::Instance;
use crate::proxy::ApiProxy;
use crate::report::{Failure, RunEvent, TimeSplit};
use crate::runner::observe::Observer;
use crate::vocab::Vocabulary;

/// The state of one running case, shared by its steps.
pub(super) struct CaseRun<'a> {
    /// What every case of the run shares.
    pub(super) run: &'a RunContext,
    /// The case.
    pub(super) case: &'a Case,
    /// Which run of a repeated case this is (from 1), if it is repeated.
    pub(super) repeat: Option<u32>,
    /// The case's own namespace.
    pub(super) namespace: String,
    /// The watches of the namespace and the invariant monitor.
    pub(super) observer: Observer,
    /// The implementation instance serving the case, when there is one to control.
    pub(super) instance: Option<Arc<AsyncMutex<Instance>>>,
    /// The API proxy the instance reaches the apiserver through, if any.
    pub(super) proxy: Option<Arc<ApiProxy>>,
    /// The `request:` pins armed, in order, with what each does (crash or pause).
    pub(super) pins: Vec<(RequestPin, ControllerAction)>,
    /// `remember` label → the subject and its UID then.
    pub(super) remembered: BTreeMap<String, (UidSubject, String)>,
    /// Armed `controller … when` triggers.
    pub(super) triggers: Vec<tokio::task::JoinHandle<Result<(), super::triggers::ControlError>>>,
    /// Nodes the case lost, recovered at its end.
    pub(super) lost_nodes: Vec<String>,
    /// The `fault` steps armed on a trigger.
    pub(super) faults: Vec<super::faults::ArmedFault>,
    /// What the case's faults did.
    pub(super) fault_log: Arc<std::sync::Mutex<super::faults::FaultLog>>,
    /// The `refuse` steps' refusals that stand.
    pub(super) refusals: super::refusals::Refusals,
    /// How long the steps waited on the implementation and held expectations.
    pub(super) time: std::sync::Mutex<TimeSplit>,
    /// When the last `expect` step's state was there (see [`ApiCost`](crate::report::ApiCost)).
    pub(super) required_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// Where each crash or pause fired by a watched change landed (see [`super::landing`]).
    pub(super) trigger_points: Arc<std::sync::Mutex<Vec<String>>>,
    /// How long expectations waited past their windows for real kubelets to catch up with
    /// an implementation that had done its part; the case's timeout grows by as much.
    pub(super) kubelet_lag: Arc<std::sync::Mutex<std::time::Duration>>,
}

/// Why a step did not go through: the case fails, is skipped, or could not be judged.
pub(super) enum StepError {
    /// The case fails.
    Fail(Failure),
    /// The case cannot run here, for this reason.
    Skip(String),
    /// The harness could not judge the case.
    Error(String),
}

/// A failed step with this message.
pub(super) fn fail(message: impl Into<String>) -> StepError {
    StepError::Fail(Failure {
        message: message.into(),
        diff: None,
        compared: None,
        timeline: None,
        broken: Vec::new(),
    })
}

/// Runs the case's steps in order, until one does not go through, the action of an armed
/// trigger fails, or the monitor confirms a violation.
pub(super) async fn execute(ctx: &mut CaseRun<'_>) -> Result<(), StepError> {
    for (index, step) in ctx.case.steps.iter().enumerate() {
        let _ = ctx.run.events.send(RunEvent::StepStarted {
            case: ctx.case.name.clone(),
            index,
            description: step.kind.describe(),
        });
        let at = format!(
            "step {} ({}, line {})",
            index + 1,
            step.kind.keyword(),
            step.pos.line
        );
        let result = match &step.kind {
            StepKind::Apply(apply) => ctx
                .apply(&apply.fixture, apply.patch.as_ref())
                .await
                .map(|_| ()),
            StepKind::Update(update) => ctx.update(update).await.map(|_| ()),
            StepKind::Delete(delete) => ctx.delete(delete).await,
            StepKind::Reject(reject) => ctx.reject(reject).await,
            StepKind::Pods(pods) => ctx.pods(pods).await,
            StepKind::Controller(c) => ctx.controller(c).await,
            StepKind::Fault(f) => ctx.fault(f).await,
            StepKind::Refuse(r) => ctx.refuse(r).await,
            StepKind::Remember(r) => ctx.remember(r),
            StepKind::Expect(e) => ctx.expect(e).await,
        };
        result.map_err(|e| match e {
            StepError::Fail(mut f) => {
                f.message = format!("{at}: {}", f.message);
                StepError::Fail(f)
            }
            StepError::Error(m) => StepError::Error(format!("{at}: {m}")),
            other => other,
        })?;
        for trigger in &mut ctx.triggers {
            if trigger.is_finished() {
                let done = std::mem::replace(trigger, tokio::spawn(async { Ok(()) }));
                if let Ok(Err(e)) = done.await {
                    return Err(e.into());
                }
            }
        }
        if ctx.observer.violation_found() {
            // Reported with its evidence once the case ends.
            return Ok(());
        }
    }
    Ok(())
}

impl CaseRun<'_> {
    /// Adds a wait on the implementation (`waited`) or a hold (`held`) to the case's split.
    pub(super) fn spent(&self, waited: Duration, held: Duration) {
        let mut time = self.time.lock().unwrap_or_else(|p| p.into_inner());
        time.waiting += waited;
        time.holding += held;
    }

    /// Records that an expectation waited `lag` past its window for the kubelets.
    pub(super) fn kubelets_took(&self, lag: std::time::Duration) {
        *self.kubelet_lag.lock().unwrap_or_else(|p| p.into_inner()) += lag;
    }

    /// How long the steps waited and held so far.
    pub(super) fn time_split(&self) -> TimeSplit {
        *self.time.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The vocabulary of the selected revision.
    pub(super) fn vocab(&self) -> &Vocabulary {
        &self.run.vocab
    }
}
