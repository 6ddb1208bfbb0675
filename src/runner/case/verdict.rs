//! The decision at the end of a case, apart from the actions around it: how the steps ended
//! and what the observer saw make the outcome (the monitor's last word on safety, a timeline
//! that cannot be judged, pods that failed by themselves or could not start), where the pins
//! landed can make a pass a skip, and a crash the harness failed to pin is an error.

use std::time::Duration;

use super::steps::StepError;
use crate::catalog::{ControllerAction, RequestPin};
use crate::monitor::Violation;
use crate::report::html::WHOLE_TIMELINE;
use crate::report::{Failure, Outcome};

/// How a case ends when what the run injects before it (the sweeps' pinned crash or armed
/// fault, `what`: "pin the crash (...)") cannot be set: skipped when the run cannot inject it
/// at all (no API proxy), an error when the harness failed at it.
pub(super) fn injection_failed(what: &str, error: StepError) -> Outcome {
    match error {
        StepError::Skip(reason) => Outcome::Skip { reason },
        StepError::Error(message) => Outcome::Error {
            message: format!("failed to {what}: {message}"),
        },
        StepError::Fail(f) => Outcome::Error {
            message: format!("failed to {what}: {}", f.message),
        },
    }
}

/// [`injection_failed`] for the crash the run pins before the case.
pub(super) fn injected_pin_failed(pin: &RequestPin, error: StepError) -> Outcome {
    injection_failed(&format!("pin the crash ({pin})"), error)
}

/// How a case's steps ended.
pub(super) enum StepsEnded {
    /// They ran to their end, or one did not go through.
    Ran(Result<(), StepError>),
    /// The case's timeout ran out first.
    TimedOut,
    /// Pods of the case cannot start on the target: each its name and the reason.
    CannotStart(Vec<String>),
}

/// What the observer knows once the steps have ended.
#[derive(Default)]
pub(super) struct Judged {
    /// The monitor's violations.
    pub(super) violations: Vec<Violation>,
    /// The whole timeline, rendered.
    pub(super) timeline: String,
    /// Why the timeline cannot be judged, if it cannot.
    pub(super) unjudgeable: Option<String>,
    /// Pods that failed on the target though no step made them fail.
    pub(super) failed_unprompted: Vec<String>,
    /// Pods the cluster itself deleted though the case loses no node and no step acted on
    /// them.
    pub(super) disrupted_by_cluster: Vec<String>,
}

/// The outcome of a case whose steps ended so, given what the observer saw: the steps' own,
/// then the monitor's last word on safety, unless the timeline cannot be judged at all or the
/// case did not run as written.
pub(super) fn judge(ended: StepsEnded, timeout: Duration, seen: &Judged) -> Outcome {
    let outcome = match ended {
        StepsEnded::Ran(Ok(())) => Outcome::Pass,
        StepsEnded::Ran(Err(StepError::Fail(f))) => Outcome::Fail(f),
        StepsEnded::Ran(Err(StepError::Skip(reason))) => Outcome::Skip { reason },
        StepsEnded::Ran(Err(StepError::Error(message))) => Outcome::Error { message },
        StepsEnded::TimedOut => Outcome::Fail(Failure {
            message: format!("the case did not finish within its timeout of {timeout:?}"),
            diff: None,
            compared: None,
            timeline: None,
            broken: Vec::new(),
        }),
        StepsEnded::CannotStart(pods) => Outcome::Error {
            message: format!(
                "the case cannot run on this target: {} cannot start: {}",
                if pods.len() == 1 { "a pod" } else { "pods" },
                pods.join("; ")
            ),
        },
    };
    let mut outcome = with_monitor_verdict(outcome, &seen.violations, seen.timeline.clone());
    if let Some(why) = &seen.unjudgeable
        && matches!(outcome, Outcome::Pass | Outcome::Fail(_))
    {
        // An error carries no timeline: what the watches went through goes with it.
        let notes: Vec<&str> = seen
            .timeline
            .lines()
            .filter_map(|l| l.strip_prefix("note: "))
            .collect();
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        outcome = Outcome::Error {
            message: format!("the case cannot be judged: {why}{notes}"),
        };
    }
    // A failure is the implementation's only if the case ran as written: on real kubelets a
    // pod can fail by itself (a container the runtime could not start under load).
    let unprompted = &seen.failed_unprompted;
    if !unprompted.is_empty() && matches!(outcome, Outcome::Fail(_)) {
        outcome = Outcome::Error {
            message: format!(
                "the case cannot be judged: {} failed on this target though no step made {} fail, so the case did not run as written: {}",
                if unprompted.len() == 1 {
                    "a pod"
                } else {
                    "pods"
                },
                if unprompted.len() == 1 { "it" } else { "them" },
                unprompted.join("; ")
            ),
        };
    }
    // Nor if the cluster itself took pods away (on a loaded machine a kind node can miss its
    // heartbeats and have its pods evicted): what followed is not the implementation's doing.
    let disrupted = &seen.disrupted_by_cluster;
    if !disrupted.is_empty() && matches!(outcome, Outcome::Fail(_)) {
        outcome = Outcome::Error {
            message: format!(
                "the case cannot be judged: the cluster itself deleted {} of the case though no step asked for it, so the case did not run as written: {}",
                if disrupted.len() == 1 {
                    "a pod"
                } else {
                    "pods"
                },
                disrupted.join("; ")
            ),
        };
    }
    outcome
}

/// `outcome` once the pins are known to have landed `landed` times: a pin the implementation
/// never reached tested nothing, so a pass becomes a skip, saying so.
pub(super) fn with_pins_landed(
    outcome: Outcome,
    pins: &[(RequestPin, ControllerAction)],
    landed: usize,
) -> Outcome {
    match pins.get(landed) {
        Some((missed, _)) if outcome == Outcome::Pass => Outcome::Skip {
            reason: format!(
                "the pinned crash point ({missed}) was never reached: the implementation made no such request"
            ),
        },
        _ => outcome,
    }
}

/// `outcome` with the monitor's verdict: a case that passed or failed fails on the violations
/// the monitor found, with their timeline slices as evidence followed by the whole case's
/// `timeline`; a failure without a timeline gets the whole `timeline`.
fn with_monitor_verdict(
    mut outcome: Outcome,
    violations: &[Violation],
    timeline: String,
) -> Outcome {
    if matches!(outcome, Outcome::Pass | Outcome::Fail(_)) && !violations.is_empty() {
        let message = violations
            .iter()
            .map(|v| format!("{}: {}", v.clause, v.message))
            .collect::<Vec<_>>()
            .join("; ");
        let slices = violations
            .iter()
            .map(|v| v.render())
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut broken: Vec<String> = Vec::new();
        for v in violations {
            for clause in v.clause.split('/') {
                if !broken.iter().any(|b| b == clause) {
                    broken.push(clause.to_owned());
                }
            }
        }
        let previous = match outcome {
            Outcome::Fail(f) => format!("\n(also: {})", f.message),
            _ => String::new(),
        };
        outcome = Outcome::Fail(Failure {
            message: format!("invariant violated: {message}{previous}"),
            diff: None,
            compared: None,
            timeline: Some(format!("{slices}\n\n{WHOLE_TIMELINE}\n{timeline}")),
            broken,
        });
    }
    if let Outcome::Fail(f) = &mut outcome
        && f.timeline.is_none()
    {
        f.timeline = Some(timeline);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin() -> RequestPin {
        RequestPin {
            verb: Some("frobnicate".into()),
            resource: Some("pods".into()),
            subresource: None,
            name: None,
            nth: 1,
            after: false,
        }
    }

    #[test]
    fn a_crash_pin_the_harness_fails_to_set_is_an_error_not_a_skip() {
        let outcome = injected_pin_failed(
            &pin(),
            StepError::Error("bad verb in a crash pin: frobnicate".into()),
        );
        let Outcome::Error { message } = outcome else {
            panic!("expected an error, got {outcome:?}");
        };
        assert!(message.contains("bad verb in a crash pin"), "{message}");
        // A run that cannot pin crashes at all (no API proxy) skips, saying why.
        assert_eq!(
            injected_pin_failed(&pin(), StepError::Skip("no API proxy".into())),
            Outcome::Skip {
                reason: "no API proxy".into()
            }
        );
    }

    #[test]
    fn a_failure_after_the_cluster_took_pods_away_by_itself_is_not_judged() {
        let failed = || {
            StepsEnded::Ran(Err(StepError::Fail(Failure {
                message: "step 4 (expect): not true within 20s".into(),
                ..Failure::default()
            })))
        };
        let seen = Judged {
            disrupted_by_cluster: vec!["job-0-w-abcde (DeletionByTaintManager)".into()],
            ..Judged::default()
        };
        let Outcome::Error { message } = judge(failed(), Duration::from_secs(60), &seen) else {
            panic!("expected an error");
        };
        assert!(
            message.contains("the cluster itself deleted a pod of the case")
                && message.contains("job-0-w-abcde (DeletionByTaintManager)"),
            "{message}"
        );
        // A pass despite it stays a pass; without it a failure stays a failure.
        assert_eq!(
            judge(StepsEnded::Ran(Ok(())), Duration::from_secs(60), &seen),
            Outcome::Pass
        );
        assert!(matches!(
            judge(failed(), Duration::from_secs(60), &Judged::default()),
            Outcome::Fail(_)
        ));
    }

    #[test]
    fn pods_that_cannot_start_end_the_case_as_an_error_naming_them_and_the_reason() {
        let pods = vec![
            "job-0-w-abcde (main: ErrImagePull: failed to pull image \"busybox\")".to_string(),
            "job-0-w-fghij (main: ImagePullBackOff)".to_string(),
        ];
        let seen = Judged {
            failed_unprompted: vec!["job-0-w-klmno (StartError)".into()],
            ..Judged::default()
        };
        let outcome = judge(
            StepsEnded::CannotStart(pods),
            Duration::from_secs(180),
            &seen,
        );
        assert_eq!(
            outcome,
            Outcome::Error {
                message: "the case cannot run on this target: pods cannot start: job-0-w-abcde (main: ErrImagePull: failed to pull image \"busybox\"); job-0-w-fghij (main: ImagePullBackOff)".into()
            }
        );
    }

    #[test]
    fn a_timeout_fails_with_the_timeline_and_an_unreached_pin_makes_a_pass_a_skip() {
        let seen = Judged {
            timeline: "#0 rv 1".into(),
            ..Judged::default()
        };
        let Outcome::Fail(f) = judge(StepsEnded::TimedOut, Duration::from_secs(9), &seen) else {
            panic!("a timeout is a failure");
        };
        assert_eq!(
            f.message,
            "the case did not finish within its timeout of 9s"
        );
        assert_eq!(f.timeline.as_deref(), Some("#0 rv 1"));
        let unjudgeable = Judged {
            unjudgeable: Some("the Pod watch did not confirm resourceVersion 9".into()),
            timeline: "#0 rv 1\nnote: watch error, resumed by itself: Pod: connection refused\n"
                .into(),
            ..Judged::default()
        };
        assert_eq!(
            judge(StepsEnded::Ran(Ok(())), Duration::ZERO, &unjudgeable),
            Outcome::Error {
                message: "the case cannot be judged: the Pod watch did not confirm resourceVersion 9 (watch error, resumed by itself: Pod: connection refused)".into()
            }
        );
        let pins = [(pin(), ControllerAction::Crash)];
        assert!(matches!(
            with_pins_landed(Outcome::Pass, &pins, 0),
            Outcome::Skip { .. }
        ));
        assert_eq!(with_pins_landed(Outcome::Pass, &pins, 1), Outcome::Pass);
        let error = Outcome::Error {
            message: "x".into(),
        };
        assert_eq!(with_pins_landed(error.clone(), &pins, 0), error);
    }
}
