//! `remember` and `expect`: recording UIDs, and judging expectations against the watched
//! state, waiting for them to hold (`within`) and requiring them to keep holding (`for`).

use std::time::{Duration, Instant};

use super::steps::{CaseRun, StepError, fail};
use crate::catalog::{Expectation, Remember};
use crate::matcher;
use crate::report::Failure;

/// Default for an `expect` without `within` or `for`.
pub const DEFAULT_WITHIN: Duration = Duration::from_secs(30);

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
        let remembered: matcher::Remembered = self
            .remembered
            .iter()
            .map(|(k, (_, uid))| (k.clone(), uid.clone()))
            .collect();
        self.observer.with_snapshot(|s| {
            let current = s.current_uids(&self.remembered, self.vocab());
            matcher::evaluate(exp, s, &remembered, &current, self.vocab())
        })
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
                timeline: None,
                broken: Vec::new(),
            })
        };
        if let Some(within) = within {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                let eval = self.evaluate(exp);
                if eval.ok {
                    break;
                }
                if self.observer.violation_found() {
                    return Ok(()); // the monitor's verdict is reported at the end
                }
                if tokio::time::timeout_at(deadline, changes.changed())
                    .await
                    .is_err()
                {
                    let eval = self.evaluate(exp);
                    if eval.ok {
                        break;
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
                let eval = self.evaluate(exp);
                if !eval.ok {
                    return Err(failure(&eval, format!("did not stay true for {hold:?}")));
                }
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
