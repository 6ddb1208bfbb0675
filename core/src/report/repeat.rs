//! A case run several times (`--repeat N`) folded into one result: a pass only when every run
//! passed, a mix of passes and failures [`Outcome::Unstable`], never a pass by luck.

use super::event::{CaseResult, Failure, Outcome};

/// Folds the results of one case's runs, each with its run number (from 1), into one result
/// of `runs` runs:
///
/// - a run the harness could not judge makes the case an error (the first such run's message,
///   naming its run);
/// - every judged run passed: a pass;
/// - none passed: a failure, the first failing run's, with every failing run's timeline;
/// - some passed, some failed: [`Outcome::Unstable`], likewise.
///
/// Runs that were skipped or not applicable count only when all were (the case then is too);
/// passing runs beside skipped ones are a skip saying so, never a pass of fewer runs.
/// Times are those of the longest run; the API cost, of the first run that passed (what doing
/// the job cost), else of the longest; crash and fault points, of the first failing run, or
/// of the first run when none failed.
///
/// # Panics
/// When `results` is empty: a case is run at least once.
pub fn fold_runs(mut results: Vec<(u32, CaseResult)>) -> CaseResult {
    assert!(!results.is_empty(), "a case is run at least once");
    results.sort_by_key(|(run, _)| *run);
    let runs = u32::try_from(results.len()).unwrap_or(u32::MAX);
    if runs == 1 {
        return results.remove(0).1;
    }
    let longest = results
        .iter()
        .max_by_key(|(_, r)| r.duration)
        .map(|(_, r)| r.clone())
        .expect("not empty");
    let mut folded = CaseResult {
        outcome: Outcome::Pass,
        ..longest
    };
    if let Some((_, passing)) = results.iter().find(|(_, r)| r.outcome == Outcome::Pass) {
        folded.api.clone_from(&passing.api);
    }
    if let Some((run, message)) = results.iter().find_map(|(run, r)| match &r.outcome {
        Outcome::Error { message } => Some((run, message)),
        _ => None,
    }) {
        folded.outcome = Outcome::Error {
            message: format!("run {run} of {runs}: {message}"),
        };
        return folded;
    }
    let judged: Vec<&(u32, CaseResult)> = results
        .iter()
        .filter(|(_, r)| matches!(r.outcome, Outcome::Pass | Outcome::Fail(_)))
        .collect();
    if judged.is_empty() {
        folded.outcome = results[0].1.outcome.clone();
        return folded;
    }
    let failing: Vec<(u32, &CaseResult, &Failure)> = judged
        .iter()
        .filter_map(|(run, r)| match &r.outcome {
            Outcome::Fail(f) => Some((*run, r, f)),
            _ => None,
        })
        .collect();
    let passed = u32::try_from(judged.len() - failing.len()).unwrap_or(u32::MAX);
    // Runs that passed while others never ran (`--fail-fast`) are no pass of N.
    if failing.is_empty()
        && let Some(reason) = results.iter().find_map(|(_, r)| match &r.outcome {
            Outcome::Skip { reason } | Outcome::NotApplicable { reason } => Some(reason),
            _ => None,
        })
    {
        folded.outcome = Outcome::Skip {
            reason: format!("only {passed} of {runs} runs ran, all passing; the others: {reason}"),
        };
        return folded;
    }
    let Some((first_run, first, first_failure)) = failing.first().copied() else {
        folded.crash_points = results[0].1.crash_points.clone();
        folded.fault_points = results[0].1.fault_points.clone();
        return folded;
    };
    folded.crash_points = first.crash_points.clone();
    folded.fault_points = first.fault_points.clone();
    let judged_runs = u32::try_from(judged.len()).unwrap_or(u32::MAX);
    let timelines: Vec<String> = failing
        .iter()
        .filter_map(|(run, _, f)| {
            f.timeline
                .as_ref()
                .map(|t| format!("── run {run} of {runs} ──\n{t}"))
        })
        .collect();
    // Clauses named broken only when every failing run names them; else the failure is
    // charged to every clause the case cites, as a single failure naming none is.
    let broken = if failing.iter().all(|(_, _, f)| !f.broken.is_empty()) {
        let mut all: Vec<String> = failing
            .iter()
            .flat_map(|(_, _, f)| f.broken.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    } else {
        Vec::new()
    };
    let failure = Failure {
        message: if passed == 0 {
            format!(
                "failed {judged_runs} of {judged_runs} runs; run {first_run}: {}",
                first_failure.message
            )
        } else {
            format!(
                "passed {passed} of {judged_runs} runs; run {first_run} failed: {}",
                first_failure.message
            )
        },
        diff: first_failure.diff.clone(),
        compared: first_failure.compared.clone(),
        timeline: (!timelines.is_empty()).then(|| timelines.join("\n")),
        broken,
    };
    folded.outcome = if passed == 0 {
        Outcome::Fail(failure)
    } else {
        Outcome::Unstable {
            passed,
            runs: judged_runs,
            failure,
        }
    };
    folded
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::catalog::Profile;
    use crate::report::TimeSplit;

    fn result(outcome: Outcome, millis: u64) -> CaseResult {
        CaseResult {
            case: "c".into(),
            area: "a".into(),
            clauses: vec!["E1".into()],
            profile: Profile::Core,
            outcome,
            duration: Duration::from_millis(millis),
            time: TimeSplit::default(),
            crash_points: vec![format!("crash {millis}")],
            fault_points: Vec::new(),
            api: None,
        }
    }

    fn fail(message: &str, broken: &[&str]) -> Outcome {
        Outcome::Fail(Failure {
            message: message.into(),
            timeline: Some(format!("timeline of {message}")),
            broken: broken.iter().map(|b| (*b).to_owned()).collect(),
            ..Failure::default()
        })
    }

    #[test]
    fn one_run_is_its_own_result() {
        let one = result(fail("x", &[]), 5);
        assert_eq!(fold_runs(vec![(1, one.clone())]), one);
    }

    #[test]
    fn every_run_passing_is_a_pass_timed_by_the_longest() {
        let folded = fold_runs(vec![
            (2, result(Outcome::Pass, 30)),
            (1, result(Outcome::Pass, 10)),
        ]);
        assert_eq!(folded.outcome, Outcome::Pass);
        assert_eq!(folded.duration, Duration::from_millis(30));
        assert_eq!(folded.crash_points, ["crash 10"], "the first run's points");
    }

    #[test]
    fn a_mix_is_unstable_with_every_failing_runs_timeline() {
        let folded = fold_runs(vec![
            (3, result(fail("late", &["E2"]), 20)),
            (1, result(Outcome::Pass, 10)),
            (2, result(fail("early", &["E1"]), 40)),
        ]);
        let Outcome::Unstable {
            passed,
            runs,
            failure,
        } = &folded.outcome
        else {
            panic!("not unstable: {:?}", folded.outcome);
        };
        assert_eq!((*passed, *runs), (1, 3));
        assert_eq!(folded.outcome.stability().as_deref(), Some("1/3"));
        assert_eq!(
            failure.message, "passed 1 of 3 runs; run 2 failed: early",
            "the first failing run by number"
        );
        let timeline = failure.timeline.as_deref().unwrap();
        assert!(timeline.contains("── run 2 of 3 ──\ntimeline of early"));
        assert!(timeline.contains("── run 3 of 3 ──\ntimeline of late"));
        assert_eq!(failure.broken, ["E1", "E2"]);
        assert_eq!(folded.crash_points, ["crash 40"], "the first failing run's");
        assert!(!folded.outcome.verdict().is_success());
    }

    #[test]
    fn a_failure_naming_no_clause_charges_them_all() {
        let folded = fold_runs(vec![
            (1, result(fail("a", &["E2"]), 1)),
            (2, result(fail("b", &[]), 1)),
        ]);
        let Outcome::Fail(f) = &folded.outcome else {
            panic!("not a failure: {:?}", folded.outcome);
        };
        assert_eq!(f.message, "failed 2 of 2 runs; run 1: a");
        assert!(f.broken.is_empty());
    }

    #[test]
    fn an_error_in_any_run_is_an_error_naming_it() {
        let folded = fold_runs(vec![
            (1, result(Outcome::Pass, 1)),
            (
                2,
                result(
                    Outcome::Error {
                        message: "broke".into(),
                    },
                    1,
                ),
            ),
        ]);
        assert_eq!(
            folded.outcome,
            Outcome::Error {
                message: "run 2 of 2: broke".into()
            }
        );
    }

    #[test]
    fn skipped_runs_count_only_when_all_are() {
        let skip = || Outcome::Skip {
            reason: "no kubelet".into(),
        };
        assert_eq!(
            fold_runs(vec![(1, result(skip(), 1)), (2, result(skip(), 1))]).outcome,
            skip()
        );
        assert_eq!(
            fold_runs(vec![(1, result(skip(), 1)), (2, result(Outcome::Pass, 1))]).outcome,
            Outcome::Skip {
                reason: "only 1 of 2 runs ran, all passing; the others: no kubelet".into()
            }
        );
        let mixed = fold_runs(vec![
            (1, result(skip(), 1)),
            (2, result(Outcome::Pass, 1)),
            (3, result(fail("x", &[]), 1)),
        ]);
        assert_eq!(mixed.outcome.stability().as_deref(), Some("1/2"));
    }
}
