//! `remember` and `expect`: recording UIDs, and judging expectations against the watched
//! state, waiting for them to hold (`within`) and requiring them to keep holding (`for`).

use std::time::{Duration, Instant};

use super::steps::{CaseRun, StepError, fail};
use crate::catalog::{Expectation, Remember};
use crate::matcher;
use crate::report::{Compared, Failure};
use crate::snapshot::{KubeletBacklog, Snapshot};

/// Default for an `expect` without `within` or `for`.
pub const DEFAULT_WITHIN: Duration = Duration::from_secs(30);

/// On real kubelets, how long after the implementation has done its part of an expectation
/// (within the window) its kubelets may take to do theirs.
pub const KUBELET_CATCH_UP: Duration = Duration::from_secs(300);

/// How often, at most, an unmet expectation is judged against the state the kubelets will
/// make of the snapshot (a projection copies every pod).
const PROJECTION_INTERVAL: Duration = Duration::from_secs(1);

impl CaseRun<'_> {
    /// `remember`: records the subject's current UID under the step's label.
    pub(super) fn remember(&mut self, step: &Remember) -> Result<(), StepError> {
        let uid = self
            .observer
            .with_snapshot(|s| {
                s.current_uid(&step.subject, self.vocab())
                    .map(str::to_string)
            })
            .ok_or_else(|| {
                fail(format!(
                    "nothing to remember as `{}`: the subject does not exist",
                    step.label
                ))
            })?;
        self.remembered
            .insert(step.label.clone(), (step.subject.clone(), uid));
        Ok(())
    }

    /// Judges `exp` against the observer's snapshot now.
    fn evaluate(&self, exp: &Expectation) -> matcher::Evaluation {
        self.observer.with_snapshot(|s| self.evaluate_on(exp, s))
    }

    fn evaluate_on(&self, exp: &Expectation, s: &Snapshot) -> matcher::Evaluation {
        let remembered: matcher::Remembered = self
            .remembered
            .iter()
            .map(|(k, (_, uid))| (k.clone(), uid.clone()))
            .collect();
        let current = s.current_uids(&self.remembered, self.vocab());
        matcher::evaluate(exp, s, &remembered, &current, self.vocab())
    }

    /// Whether the implementation has done its part of `exp` (real kubelets only): it holds in
    /// the state the kubelets will make of the snapshot once they have caught up, though not
    /// yet in the snapshot. Returns what the kubelets still owe, then.
    fn implementation_part_done(&self, exp: &Expectation) -> Option<KubeletBacklog> {
        let (projected, backlog) = self.observer.with_snapshot(Snapshot::kubelets_caught_up);
        (!backlog.is_empty() && self.evaluate_on(exp, &projected).ok).then_some(backlog)
    }

    /// `expect`: waits (watch-driven) until `exp` holds, up to `within` (default
    /// [`DEFAULT_WITHIN`]), or requires it to hold when the step runs (`for` alone); then, with
    /// `for`, requires it to keep holding that long.
    pub(super) async fn expect(&self, exp: &Expectation) -> Result<(), StepError> {
        let begun = Instant::now();
        let mut reached = None;
        let result = self.expect_marking(exp, &mut reached).await;
        let end = Instant::now();
        let reached = reached.unwrap_or(end);
        if result.is_ok() {
            self.reached(reached);
        }
        self.spent(reached - begun, end - reached);
        result
    }

    /// [`expect`](Self::expect), noting in `reached` when the expected state was there (the
    /// wait ends and the hold begins).
    async fn expect_marking(
        &self,
        exp: &Expectation,
        reached: &mut Option<Instant>,
    ) -> Result<(), StepError> {
        let mut changes = self.observer.subscribe();
        let within = match (exp.within, exp.hold) {
            (Some(w), _) => Some(w.as_std()),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_WITHIN),
        };
        let failure = |eval: &matcher::Evaluation, what: String| {
            StepError::Fail(Failure {
                message: format!("{what}: {}", eval.failures.join("; ")),
                diff: Some(eval.diff()),
                compared: Some(Box::new(Compared {
                    expected: eval.expected.clone(),
                    observed: eval.observed.clone(),
                })),
                timeline: None,
                broken: Vec::new(),
            })
        };
        if let Some(within) = within {
            let started = tokio::time::Instant::now();
            let window_end = started + within;
            let mut deadline = window_end;
            // On real kubelets, a window judges the implementation: once its part holds
            // within the window, its kubelets get up to [`KUBELET_CATCH_UP`] more for theirs
            // (starting and stopping pods), and the case's timeout grows by what is used.
            let mut part_done: Option<(tokio::time::Instant, KubeletBacklog)> = None;
            let mut projected_at: Option<tokio::time::Instant> = None;
            // A simulated kubelet owes nothing: its windows are plain.
            let real_kubelets = self.run.pods.fleet().is_none();
            loop {
                let evaluated = Instant::now();
                let eval = self.evaluate(exp);
                let cost = evaluated.elapsed();
                if eval.ok {
                    if part_done.is_some() {
                        self.kubelets_took(
                            tokio::time::Instant::now().saturating_duration_since(window_end),
                        );
                    }
                    break;
                }
                if self.observer.violation_found() {
                    return Ok(()); // the monitor's verdict is reported at the end
                }
                let now = tokio::time::Instant::now();
                if real_kubelets
                    && part_done.is_none()
                    && now < window_end
                    && projected_at.is_none_or(|at| now >= at + PROJECTION_INTERVAL)
                {
                    projected_at = Some(now);
                    if let Some(backlog) = self.implementation_part_done(exp) {
                        tracing::debug!(
                            case = %self.case.name,
                            after = ?now - started,
                            %backlog,
                            "the implementation's part of an expectation holds; waiting for the kubelets"
                        );
                        part_done = Some((now, backlog));
                        deadline = deadline.max(now + KUBELET_CATCH_UP);
                    }
                }
                // Wake up to project again while the window lasts, even without a change.
                let wake = match (part_done, projected_at) {
                    (None, Some(at)) => deadline.min(at + PROJECTION_INTERVAL).max(now),
                    _ => deadline,
                };
                pace(cost, wake).await;
                if tokio::time::timeout_at(wake, changes.changed())
                    .await
                    .is_err()
                    && tokio::time::Instant::now() >= deadline
                {
                    let eval = self.evaluate(exp);
                    if eval.ok {
                        break;
                    }
                    if let Some((at, then)) = part_done {
                        self.kubelets_took(deadline.saturating_duration_since(window_end));
                        if let Some(now) = self.implementation_part_done(exp) {
                            return Err(StepError::Error(format!(
                                "not true within {within:?}: the implementation had done its part {:.1?} in ({then}), but the target's kubelets had not caught up {KUBELET_CATCH_UP:?} later ({now}), so this target cannot judge the case (it needs more capacity): {}",
                                at - started,
                                eval.failures.join("; ")
                            )));
                        }
                    }
                    return Err(failure(&eval, format!("not true within {within:?}")));
                }
            }
        } else {
            let eval = self.evaluate(exp);
            if !eval.ok {
                return Err(failure(&eval, "not true when the step ran".into()));
            }
        }
        *reached = Some(Instant::now());
        if let Some(hold) = exp.hold {
            let hold = hold.as_std();
            let deadline = tokio::time::Instant::now() + hold;
            loop {
                let evaluated = Instant::now();
                let eval = self.evaluate(exp);
                if !eval.ok {
                    return Err(failure(&eval, format!("did not stay true for {hold:?}")));
                }
                pace(evaluated.elapsed(), deadline).await;
                if tokio::time::timeout_at(deadline, changes.changed())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Before an expectation is judged again, waits three times as long as judging it took (up to
/// 100 ms, never past `until`), when that was over a millisecond: on a snapshot of thousands
/// of pods that changes with every event, judging at every change kept a core busy with the
/// same question (its cost grew with the pods times the events). The changes meanwhile are
/// judged together, as the watch channel already coalesces them; a small snapshot is judged
/// at once.
async fn pace(cost: std::time::Duration, until: tokio::time::Instant) {
    if cost > std::time::Duration::from_millis(1) {
        let pause = (cost * 3).min(std::time::Duration::from_millis(100));
        tokio::time::sleep_until((tokio::time::Instant::now() + pause).min(until)).await;
    }
}
