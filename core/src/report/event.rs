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
    /// Run `runs` times (`--repeat`), the case passed `passed` of them and failed the others:
    /// not a pass. The failure is the first failing run's, its timeline every failing run's.
    Unstable {
        /// Runs that passed (at least one, fewer than `runs`).
        passed: u32,
        /// Runs in all.
        runs: u32,
        /// The failing runs' failure: the first one's message, diff and broken clauses, and
        /// the timelines of all of them, each headed by its run.
        failure: Failure,
    },
}

impl Outcome {
    /// `pass`, `fail`, `skip`, `n/a`, `error` or `unstable`.
    pub fn label(&self) -> &'static str {
        self.verdict().label()
    }

    /// The failure it reports: a failed case's, or an unstable case's failing runs'.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Outcome::Fail(f) | Outcome::Unstable { failure: f, .. } => Some(f),
            Outcome::Pass
            | Outcome::Skip { .. }
            | Outcome::NotApplicable { .. }
            | Outcome::Error { .. } => None,
        }
    }

    /// The label, with the runs passed for an unstable case (`unstable 6/8`).
    pub fn shown(&self) -> String {
        match self.stability() {
            Some(k) => format!("{} {k}", self.label()),
            None => self.label().to_owned(),
        }
    }

    /// `6/8` for an unstable case that passed 6 of 8 runs.
    pub fn stability(&self) -> Option<String> {
        match self {
            Outcome::Unstable { passed, runs, .. } => Some(format!("{passed}/{runs}")),
            _ => None,
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
    /// One run of a case run several times (`--repeat`) ended; the case's `CaseFinished`
    /// follows when all its runs have ([`fold_runs`](super::fold_runs)).
    RepeatFinished {
        /// Which run, from 1.
        run: u32,
        /// Its result.
        result: Box<CaseResult>,
    },
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
                Outcome::Unstable { .. } => c.unstable += 1,
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
    /// Passed some of their repeated runs, failed others.
    pub unstable: usize,
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
            | RunEvent::StepStarted { .. }
            | RunEvent::RepeatFinished { .. } => {}
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
