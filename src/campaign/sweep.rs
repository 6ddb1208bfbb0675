//! The sweeps: a case runs once fault-free with the implementation's writes recorded by the
//! API proxy, then once per recorded write with a fault placed at it. Each run is judged as
//! any run of the case is: its own expectations (the same final conditions and restart counts
//! as without the fault) and the invariant monitor (no double count, no duplicate or
//! replacement children, nothing deleted before the decision that justifies it).
//!
//! The fault is the sweep's [`Pattern`], one of the three state faults real controllers fail
//! on:
//! - `intermediate`: a crash pinned just before the write (and, if asked, just after it): the
//!   implementation restarts into a half-done world. That is O3 explored write by write.
//! - `stale`: from the write's answer on, the implementation's watch events of the written
//!   object are held back and its reads of that kind are answered as of that moment, for
//!   [`HOLD`]; then every held event is delivered in order. It decides on a view that lags
//!   behind its own write, as behind a lagging cache or apiserver.
//! - `unobserved`: the same hold with current reads, released with each object's last state
//!   only: the states the object went through meanwhile are never seen.
//!
//! The stale and unobserved points follow Sieve's learning run in its simplest form: the
//! object a write names is the one whose next events the implementation's following
//! decisions rest on.
//!
//! A pin counts matching requests from the start of the case, so "the Nth PATCH of
//! podcliques/status job-0-worker" is the same write in every run as long as the
//! implementation makes its writes in the same order; when it does not, the fault lands on
//! the Nth such write of that run (reported), or nowhere (the point is reported as not
//! reached, never as passed).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::catalog::{
    Case, FaultStep, FaultStepAction, HoldFault, HoldRelease, RequestPin, SweptFault, Trigger,
};
use crate::proxy::RequestInfo;
use crate::report::{Outcome, RunEvent, Verdict};
use crate::runner::case::{RunContext, run_case};
use crate::vocab::Kind;

/// How long a stale or unobserved point holds the implementation's view back.
pub const HOLD: Duration = Duration::from_secs(3);

/// Which fault a sweep places at each recorded write (the module's header says how).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pattern {
    /// A crash just before the write (and, if asked, just after it).
    #[default]
    Intermediate,
    /// The written object's watch events held and its kind read as of the write, then
    /// delivered.
    Stale,
    /// The written object's watch events held, then only its last state delivered.
    Unobserved,
}

impl Pattern {
    /// The pattern as the command line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Intermediate => "intermediate",
            Pattern::Stale => "stale",
            Pattern::Unobserved => "unobserved",
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Pattern::Intermediate, Pattern::Stale, Pattern::Unobserved]
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!("unknown pattern `{s}`: expected intermediate, stale or unobserved")
            })
    }
}

/// One explored point.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    /// The recorded write it is placed at (1-based, in the fault-free run's order).
    pub write: usize,
    /// The pin: where the crash is, or what starts the hold.
    pub pin: RequestPin,
    /// The hold of a stale or unobserved point.
    pub fault: Option<FaultStep>,
    /// How the case ended with the fault there.
    pub outcome: Outcome,
    /// Where the fault actually landed.
    pub landed: Vec<String>,
    /// Wall time of the run.
    pub duration: Duration,
}

impl SweepPoint {
    /// The point's verdict: a skip means the pin never fired (the point was not reached).
    pub fn verdict(&self) -> Verdict {
        self.outcome.verdict()
    }

    /// The verdict in words: `pass`, `fail`, `error`, or `not reached` (a skip).
    pub fn verdict_words(&self) -> &'static str {
        match self.verdict() {
            Verdict::Skip | Verdict::NotApplicable => "not reached",
            v @ (Verdict::Pass | Verdict::Fail | Verdict::Error | Verdict::Unstable) => v.label(),
        }
    }

    /// The fault in words: `crash before the 2nd patch podcliques/status a`, or `hold
    /// podcliques a (stale reads) 3s after the 2nd patch podcliques/status a`.
    pub fn what(&self) -> String {
        match &self.fault {
            Some(FaultStep {
                action: FaultStepAction::Hold(h),
                ..
            }) => {
                let name = h
                    .name
                    .as_deref()
                    .map(|n| format!(" {n}"))
                    .unwrap_or_default();
                let how = match (h.stale_reads, h.release) {
                    (true, _) => " (stale reads)",
                    (false, HoldRelease::Coalesce) => " (coalesced)",
                    (false, _) => "",
                };
                let lasts = h.lasts.map(|d| format!(" {d}")).unwrap_or_default();
                format!("hold {}{name}{how}{lasts} {}", h.kind.plural(), self.pin)
            }
            _ => format!("crash {}", self.pin),
        }
    }
}

/// The sweep of one case.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The case.
    pub case: String,
    /// The fault placed at each write.
    pub pattern: Pattern,
    /// The crash-free run's outcome; the sweep explores nothing when it did not pass.
    pub baseline: Outcome,
    /// The implementation's writes in the crash-free run, in order.
    pub writes: Vec<RequestInfo>,
    /// Every explored point.
    pub points: Vec<SweepPoint>,
    /// Wall time of the whole sweep.
    pub duration: Duration,
}

/// Why a case cannot be swept with `pattern`, if it cannot: the first of its steps that
/// conflicts with the sweep's fault ([`StepKind::sweep_conflict`] says which do).
pub fn unsweepable(case: &Case, pattern: Pattern) -> Option<String> {
    let fault = match pattern {
        Pattern::Intermediate => SweptFault::Crash,
        Pattern::Stale | Pattern::Unobserved => SweptFault::Hold,
    };
    case.steps
        .iter()
        .find_map(|s| s.kind.sweep_conflict(fault))
        .map(str::to_owned)
}

/// The pin that crashes at write `k` (1-based) of `writes`: its verb, resource, subresource
/// and name, and how many identical requests came before it.
pub fn pin_for(writes: &[RequestInfo], k: usize, after: bool) -> RequestPin {
    let w = &writes[k - 1];
    let same = |o: &RequestInfo| {
        o.verb == w.verb
            && o.resource == w.resource
            && o.subresource == w.subresource
            && stable_name(o) == stable_name(w)
    };
    let nth = writes[..k].iter().filter(|o| same(o)).count();
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    RequestPin {
        verb: Some(w.verb.as_str().to_owned()),
        resource: non_empty(&w.resource),
        subresource: non_empty(&w.subresource),
        name: non_empty(&stable_name(w)),
        nth: u32::try_from(nth).unwrap_or(u32::MAX),
        after,
    }
}

/// The hold a stale or unobserved point places at write `k` (1-based) of `writes`: the
/// written object's kind (its name as in every run; the whole kind for a create, whose name
/// the request does not carry), from the write's answer on, for [`HOLD`]. `None` for the
/// crash pattern, and for a write of a kind the proxy cannot hold (an Event).
pub fn fault_for(writes: &[RequestInfo], k: usize, pattern: Pattern) -> Option<FaultStep> {
    let release = match pattern {
        Pattern::Intermediate => return None,
        Pattern::Stale => HoldRelease::Deliver,
        Pattern::Unobserved => HoldRelease::Coalesce,
    };
    let w = &writes[k - 1];
    let kind = Kind::ALL
        .into_iter()
        .find(|kind| *kind != Kind::Event && kind.plural() == w.resource)?;
    let name = stable_name(w);
    Some(FaultStep {
        action: FaultStepAction::Hold(HoldFault {
            kind,
            name: (!name.is_empty()).then_some(name),
            stale_reads: pattern == Pattern::Stale,
            release,
            until: None,
            lasts: Some(crate::catalog::Duration(HOLD)),
        }),
        when: Some(Trigger::Request(pin_for(writes, k, true))),
    })
}

/// The name of a write's object as it is in every run: a pod's generated suffix becomes a
/// glob (`job-0-worker-x7k2p` → `job-0-worker-*`); other names are fixed by B1.
fn stable_name(w: &RequestInfo) -> String {
    match (w.resource.as_str(), w.name.rsplit_once('-')) {
        ("pods", Some((clique, _))) => format!("{clique}-*"),
        _ => w.name.clone(),
    }
}

/// Sweeps `case` with `pattern` on the target of `context` (whose implementation must go
/// through the API proxy): the fault-free run, then a run per write (for crashes, per write
/// and position: `before`, and `after` too when `after_too`), `jobs` at once, calling
/// `progress` after each in write order.
///
/// The runs' progress events go to a channel of the sweep's own, read as they come (logged at
/// debug level), never to `context.events`: a sweep runs for hours, and a channel nobody reads
/// would hold every step and timeline of every run until it ends.
pub async fn sweep(
    context: &RunContext,
    case: &Case,
    pattern: Pattern,
    after_too: bool,
    jobs: usize,
    mut progress: impl FnMut(&SweepPoint),
) -> Sweep {
    let started = Instant::now();
    let (events, mut read) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    tokio::spawn(async move {
        while let Some(event) = read.recv().await {
            match event {
                RunEvent::StepStarted {
                    case,
                    index,
                    description,
                } => tracing::debug!(case, step = index + 1, description, "sweep step"),
                RunEvent::CaseFinished(result) => {
                    tracing::debug!(
                        case = result.case,
                        outcome = result.outcome.label(),
                        "sweep run ended"
                    );
                }
                RunEvent::RunStarted { .. }
                | RunEvent::CaseStarted { .. }
                | RunEvent::RepeatFinished { .. }
                | RunEvent::RunFinished { .. } => {}
            }
        }
    });
    let context = &RunContext {
        events,
        ..context.clone()
    };
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let baseline_context = RunContext {
        record_writes: Some(recorded.clone()),
        ..context.clone()
    };
    let baseline = run_case(&baseline_context, case).await.outcome;
    let writes = recorded.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut points = Vec::new();
    if baseline == Outcome::Pass {
        let positions: &[bool] = match (pattern, after_too) {
            (Pattern::Intermediate, true) => &[false, true],
            (Pattern::Intermediate, false) => &[false],
            (Pattern::Stale | Pattern::Unobserved, _) => &[true],
        };
        let placed: Vec<(usize, RequestPin, Option<FaultStep>)> = (1..=writes.len())
            .flat_map(|k| positions.iter().map(move |&after| (k, after)))
            .filter_map(|(k, after)| {
                let fault = fault_for(&writes, k, pattern);
                (pattern == Pattern::Intermediate || fault.is_some())
                    .then(|| (k, pin_for(&writes, k, after), fault))
            })
            .collect();
        // Each run has its own namespace, implementation instance and API proxy, so points
        // run side by side; they are reported in write order.
        let runs = placed.into_iter().map(|(k, pin, fault)| async move {
            let context = RunContext {
                inject_pin: fault.is_none().then(|| pin.clone()),
                inject_fault: fault.clone(),
                ..context.clone()
            };
            let result = run_case(&context, case).await;
            SweepPoint {
                write: k,
                pin,
                fault,
                outcome: result.outcome,
                landed: [result.crash_points, result.fault_points].concat(),
                duration: result.duration,
            }
        });
        let mut runs = futures::stream::iter(runs).buffered(jobs.max(1));
        while let Some(point) = runs.next().await {
            progress(&point);
            points.push(point);
        }
    }
    Sweep {
        case: case.name.clone(),
        pattern,
        baseline,
        writes,
        points,
        duration: started.elapsed(),
    }
}

/// An outcome's label with its reason (`fail: step 3 ...`), as a sweep reports a run that did
/// not pass.
pub fn why_not(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Fail(f) => format!("fail: {}", f.message),
        Outcome::Error { message } => format!("error: {message}"),
        Outcome::Skip { reason } => format!("skipped: {reason}"),
        other => other.label().to_owned(),
    }
}

/// The sweeps as Markdown: per case the crash points explored and passed, then a row per
/// point.
pub fn summary(sweeps: &[Sweep]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| case | pattern | writes | points | passed | failed | not reached | wall (s) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for s in sweeps {
        let count = |v: Verdict| s.points.iter().filter(|p| p.verdict() == v).count();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            s.case,
            s.pattern,
            s.writes.len(),
            s.points.len(),
            count(Verdict::Pass),
            count(Verdict::Fail) + count(Verdict::Error),
            count(Verdict::Skip) + count(Verdict::NotApplicable),
            s.duration.as_secs_f64()
        );
    }
    for s in sweeps {
        let _ = writeln!(out, "\n### {}\n", s.case);
        if s.baseline != Outcome::Pass {
            let _ = writeln!(
                out,
                "the fault-free run did not pass ({}): nothing explored",
                why_not(&s.baseline)
            );
            continue;
        }
        let _ = writeln!(out, "| write | fault | verdict | where it landed |");
        let _ = writeln!(out, "|---|---|---|---|");
        for p in &s.points {
            let why = match &p.outcome {
                Outcome::Fail(f) => format!(" ({})", f.message),
                Outcome::Error { message } => format!(" ({message})"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {}{} | {} |",
                p.write,
                p.what(),
                p.verdict_words(),
                why.replace('|', "/"),
                p.landed.join("; ")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ControllerAction, StepKind};
    use crate::cluster::TargetHandles;
    use crate::implementation::ImplementationSpec;
    use crate::kubelets::PodDriver;
    use crate::kubelets::real::{NodeControl, RealPods};

    #[tokio::test]
    async fn a_sweep_reads_its_runs_events_itself() {
        let catalog = crate::catalog::load_catalog(std::path::Path::new(".")).unwrap();
        // A case that pauses the implementation: skipped at once with an external one, so
        // the crash-free run needs no cluster (the client points at a closed port).
        let case = catalog
            .cases
            .iter()
            .find(|c| {
                c.steps.iter().any(|s| {
                    matches!(&s.kind, StepKind::Controller(c) if c.action == ControllerAction::Pause)
                })
            })
            .unwrap()
            .clone();
        let config = kube::Config::new("https://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let logs = tempfile::tempdir().unwrap();
        let (events, mut unread) = tokio::sync::mpsc::unbounded_channel();
        let target = TargetHandles {
            client: client.clone(),
            kubeconfig: "/dev/null".into(),
            pods: PodDriver::Real(RealPods::new(client, NodeControl::Unavailable)),
        };
        let context = RunContext::new(
            &target,
            ImplementationSpec::External,
            Arc::new(catalog),
            logs.path().to_path_buf(),
            events,
        );
        let done = sweep(&context, &case, Pattern::Intermediate, false, 1, |_| {}).await;
        assert!(
            matches!(done.baseline, Outcome::Skip { .. }),
            "{:?}",
            done.baseline
        );
        // Nothing was left in the caller's channel, which nobody reads during a sweep.
        assert!(
            unread.try_recv().is_err(),
            "the sweep's events piled up in a channel nobody reads"
        );
    }

    fn write(method: &str, path: &str) -> RequestInfo {
        RequestInfo::parse(method, path, "")
    }

    #[test]
    fn a_case_with_its_own_pins_or_crashes_is_not_swept() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(".")).expect("the catalog loads");
        let case = |name: &str| {
            catalog
                .cases
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("{name} is in the catalog"))
        };
        let crash = Pattern::Intermediate;
        let pinned = unsweepable(
            case("pod-created-without-an-answer-then-deleted-fails-clique"),
            crash,
        );
        assert!(pinned.is_some_and(|why| why.contains("pins its own requests")));
        let crashes = unsweepable(case("crash-between-attempts"), crash);
        assert!(crashes.is_some_and(|why| why.contains("crashes the implementation")));
        assert_eq!(unsweepable(case("one-failure-restarts-gang"), crash), None);
        // A hold goes with a crash of the case's own, not with a hold of its own.
        assert_eq!(
            unsweepable(case("crash-between-attempts"), Pattern::Stale),
            None
        );
        let holds = unsweepable(
            case("group-restart-seen-late-by-the-clique-cache"),
            Pattern::Unobserved,
        );
        assert!(holds.is_some_and(|why| why.contains("holds the implementation's view")));
    }

    #[test]
    fn a_pin_names_the_write_and_counts_identical_ones_before_it() {
        let writes = vec![
            write(
                "PATCH",
                "/apis/grove.io/v1alpha1/namespaces/n/podcliques/a/status",
            ),
            write("DELETE", "/api/v1/namespaces/n/pods/job-0-w-abcde"),
            write(
                "PATCH",
                "/apis/grove.io/v1alpha1/namespaces/n/podcliques/a/status",
            ),
            write("POST", "/apis/grove.io/v1alpha1/namespaces/n/podcliques"),
            write("DELETE", "/api/v1/namespaces/n/pods/job-0-w-fghij"),
        ];
        let third = pin_for(&writes, 3, false);
        assert_eq!(
            third.to_string(),
            "before the 2nd patch podcliques/status a"
        );
        let create = pin_for(&writes, 4, true);
        assert_eq!(create.to_string(), "after the 1st create podcliques");
        assert_eq!(create.name, None);
        // Generated pod names differ from run to run: the pin names the clique's pods.
        let second_pod = pin_for(&writes, 5, false);
        assert_eq!(
            second_pod.to_string(),
            "before the 2nd delete pods job-0-w-*"
        );
    }

    #[test]
    fn patterns_parse_and_a_hold_follows_the_written_object() {
        assert_eq!("stale".parse::<Pattern>(), Ok(Pattern::Stale));
        assert_eq!("unobserved".parse::<Pattern>(), Ok(Pattern::Unobserved));
        assert_eq!("intermediate".parse::<Pattern>(), Ok(Pattern::Intermediate));
        let bad = "lagging".parse::<Pattern>().unwrap_err();
        assert!(bad.contains("intermediate, stale or unobserved"), "{bad}");
        let writes = vec![
            write(
                "PATCH",
                "/apis/grove.io/v1alpha1/namespaces/n/podcliquescalinggroups/g/status",
            ),
            write("POST", "/api/v1/namespaces/n/events"),
            write("POST", "/api/v1/namespaces/n/pods"),
            write("DELETE", "/api/v1/namespaces/n/pods/job-0-w-abcde"),
        ];
        assert_eq!(fault_for(&writes, 1, Pattern::Intermediate), None);
        let Some(FaultStep {
            action: FaultStepAction::Hold(stale),
            when: Some(Trigger::Request(pin)),
        }) = fault_for(&writes, 1, Pattern::Stale)
        else {
            panic!("a stale point holds the written object from the write's answer on");
        };
        assert_eq!(stale.kind, Kind::PodCliqueScalingGroup);
        assert_eq!(stale.name.as_deref(), Some("g"));
        assert!(stale.stale_reads);
        assert_eq!(stale.release, HoldRelease::Deliver);
        assert_eq!(stale.until, None);
        assert_eq!(stale.lasts.map(|d| d.as_std()), Some(HOLD));
        assert_eq!(
            pin.to_string(),
            "after the 1st patch podcliquescalinggroups/status g"
        );
        // Events cannot be held.
        assert_eq!(fault_for(&writes, 2, Pattern::Stale), None);
        // A create does not name its object: the whole kind is held.
        let Some(FaultStep {
            action: FaultStepAction::Hold(created),
            ..
        }) = fault_for(&writes, 3, Pattern::Unobserved)
        else {
            panic!("a create is held");
        };
        assert_eq!((created.kind, created.name.clone()), (Kind::Pod, None));
        assert!(!created.stale_reads);
        assert_eq!(created.release, HoldRelease::Coalesce);
        // A pod's generated name becomes its clique's glob.
        let Some(FaultStep {
            action: FaultStepAction::Hold(deleted),
            ..
        }) = fault_for(&writes, 4, Pattern::Stale)
        else {
            panic!("a delete is held");
        };
        assert_eq!(deleted.name.as_deref(), Some("job-0-w-*"));
        let point = SweepPoint {
            write: 1,
            pin: pin_for(&writes, 1, true),
            fault: fault_for(&writes, 1, Pattern::Stale),
            outcome: Outcome::Pass,
            landed: Vec::new(),
            duration: Duration::ZERO,
        };
        assert_eq!(
            point.what(),
            "hold podcliquescalinggroups g (stale reads) 3s after the 1st patch podcliquescalinggroups/status g"
        );
    }
}
