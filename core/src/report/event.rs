//! The event stream a run emits, and the results folded from it.

use std::time::Duration;

use crate::catalog::Profile;

/// How one case ended. A failed case is data, not an error: `Error` is reserved for the
/// harness itself breaking (the case could not be judged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every step held and the monitor saw no violation.
    Pass,
    /// The implementation did not behave as the case requires.
    Fail(Failure),
    /// The case cannot run here (an implementation without controller actions, a target
    /// without the simulated kubelet ...).
    Skip {
        /// Why, in one line.
        reason: String,
    },
    /// The spec revision under test does not define what the case checks.
    NotApplicable {
        /// Why, in one line.
        reason: String,
    },
    /// The harness could not run or judge the case.
    Error {
        /// What broke, in one line.
        message: String,
    },
}

impl Outcome {
    /// `pass`, `fail`, `skip`, `n/a` or `error`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Skip { .. } => "skip",
            Outcome::NotApplicable { .. } => "n/a",
            Outcome::Error { .. } => "error",
        }
    }
}

/// Why a case failed, with what a person needs to act on it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Failure {
    /// One line: the step that failed (or the violated clause) and why.
    pub message: String,
    /// Expected-vs-observed YAML diff (plain text), when an expectation failed.
    pub diff: Option<String>,
    /// What the failed expectation compared, for reporters that render the diff themselves.
    pub compared: Option<Box<super::Compared>>,
    /// The case's timeline (or the slice proving a monitor violation), rendered.
    pub timeline: Option<String>,
    /// The clauses the failure shows broken, when it names them exactly (an invariant the
    /// monitor found violated). Empty: the failure is charged to every clause the case cites.
    pub broken: Vec<String>,
}

/// One event of a run, in the order it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    /// The run starts with this many cases selected.
    RunStarted {
        /// Number of cases selected.
        cases: usize,
    },
    /// A case starts.
    CaseStarted {
        /// Case name.
        case: String,
    },
    /// A case begins a step.
    StepStarted {
        /// Case name.
        case: String,
        /// Step index from 0.
        index: usize,
        /// Short description (`exit pod job-0-worker/3`).
        description: String,
    },
    /// A case ended.
    CaseFinished(Box<CaseResult>),
    /// The run ended.
    RunFinished {
        /// Wall time of the whole run.
        duration: Duration,
    },
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// Case name.
    pub case: String,
    /// Its area (folder under `cases/`).
    pub area: String,
    /// The clause ids it cites.
    pub clauses: Vec<String>,
    /// Its profile.
    pub profile: Profile,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall time.
    pub duration: Duration,
    /// Where that time went.
    pub time: TimeSplit,
    /// Where each pinned crash landed (`crash before request #37: DELETE pods ...`), in order.
    pub crash_points: Vec<String>,
    /// Where each fault (a hold, a relist) started and what it held, in order.
    pub fault_points: Vec<String>,
    /// What the implementation cost the apiserver (`None`: no API proxy saw its requests).
    pub api: Option<super::ApiCost>,
}

/// Where a case's time went. Its wall time is `waiting` + `holding` + the harness's
/// [`overhead`](TimeSplit::overhead); `queued` came before it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeSplit {
    /// Waiting on the implementation: from each `expect` step (or pod action) until the state
    /// it waits for was there.
    pub waiting: Duration,
    /// `for:` holds: the expected state required to keep holding.
    pub holding: Duration,
    /// Holding a slot while queued behind an exclusive case (or, for an exclusive case, while
    /// the cases running beside it finish).
    pub queued: Duration,
}

impl TimeSplit {
    /// The rest of `wall`: the harness's own work (namespace, watches, implementation start,
    /// fixtures, pod actions, teardown).
    pub fn overhead(&self, wall: Duration) -> Duration {
        wall.saturating_sub(self.waiting + self.holding)
    }
}

/// Sums of the [`TimeSplit`]s of a run's cases, with their wall times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeTotals {
    /// Sum of the cases' wall times.
    pub cases: Duration,
    /// Of which waiting on the implementation.
    pub waiting: Duration,
    /// Of which `for:` holds.
    pub holding: Duration,
    /// Of which harness overhead.
    pub overhead: Duration,
    /// Time slots were held queued for an exclusive case (not part of `cases`).
    pub queued: Duration,
}

/// Everything a run produced, folded from its events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunResults {
    /// Results in completion order.
    pub cases: Vec<CaseResult>,
    /// Wall time of the run, once finished.
    pub duration: Duration,
}

impl RunResults {
    /// The cases' time splits summed.
    pub fn time_totals(&self) -> TimeTotals {
        let mut t = TimeTotals::default();
        for r in &self.cases {
            t.cases += r.duration;
            t.waiting += r.time.waiting;
            t.holding += r.time.holding;
            t.overhead += r.time.overhead(r.duration);
            t.queued += r.time.queued;
        }
        t
    }

    /// How many cases ended each way; a case not applicable in the revision is counted as
    /// such, never as skipped.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.cases {
            match r.outcome {
                Outcome::Pass => c.pass += 1,
                Outcome::Fail(_) => c.fail += 1,
                Outcome::Skip { .. } => c.skip += 1,
                Outcome::NotApplicable { .. } => c.not_applicable += 1,
                Outcome::Error { .. } => c.error += 1,
            }
        }
        c
    }

    /// Results sorted by case name (stable output for reports).
    pub fn sorted(&self) -> Vec<&CaseResult> {
        let mut v: Vec<&CaseResult> = self.cases.iter().collect();
        v.sort_by(|a, b| a.case.cmp(&b.case));
        v
    }
}

/// How many cases of a run ended each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Passed.
    pub pass: usize,
    /// Failed (the implementation's doing).
    pub fail: usize,
    /// Skipped: the case cannot run here.
    pub skip: usize,
    /// Not applicable in the revision under test.
    pub not_applicable: usize,
    /// Not judged: the harness broke.
    pub error: usize,
}

/// Folds a run's events into [`RunResults`].
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    results: RunResults,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// Consumes one event.
    pub fn on_event(&mut self, event: &RunEvent) {
        match event {
            RunEvent::CaseFinished(r) => self.results.cases.push((**r).clone()),
            RunEvent::RunFinished { duration } => self.results.duration = *duration,
            RunEvent::RunStarted { .. }
            | RunEvent::CaseStarted { .. }
            | RunEvent::StepStarted { .. } => {}
        }
    }

    /// The results so far.
    pub fn results(&self) -> &RunResults {
        &self.results
    }

    /// The results, consuming the recorder.
    pub fn into_results(self) -> RunResults {
        self.results
    }
}
