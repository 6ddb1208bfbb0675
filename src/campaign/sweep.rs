//! The crash sweep: a case runs once crash-free with the implementation's writes recorded by
//! the API proxy, then once per recorded write with a crash pinned just before it (and, if
//! asked, once just after it). Each run is judged as any run of the case is: its own
//! expectations (the same final conditions and restart counts as without a crash) and the
//! invariant monitor (no double count, no duplicate or replacement children, nothing deleted
//! before the decision that justifies it). That is O3 explored write by write.
//!
//! A pin counts matching requests from the start of the case, so "the Nth PATCH of
//! podcliques/status job-0-worker" is the same write in every run as long as the
//! implementation makes its writes in the same order; when it does not, the crash lands on
//! the Nth such write of that run (reported), or nowhere (the point is reported as not
//! reached, never as passed).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::catalog::{Case, ControllerAction, RequestPin, StepKind, Trigger};
use crate::proxy::RequestInfo;
use crate::report::{Outcome, RunEvent, Verdict};
use crate::runner::case::{RunContext, run_case};

/// One explored crash point.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    /// The recorded write it is pinned to (1-based, in the crash-free run's order).
    pub write: usize,
    /// The pin.
    pub pin: RequestPin,
    /// How the case ended with the crash there.
    pub outcome: Outcome,
    /// Where the crash actually landed.
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
            v @ (Verdict::Pass | Verdict::Fail | Verdict::Error) => v.label(),
        }
    }
}

/// The sweep of one case.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The case.
    pub case: String,
    /// The crash-free run's outcome; the sweep explores nothing when it did not pass.
    pub baseline: Outcome,
    /// The implementation's writes in the crash-free run, in order.
    pub writes: Vec<RequestInfo>,
    /// Every explored point.
    pub points: Vec<SweepPoint>,
    /// Wall time of the whole sweep.
    pub duration: Duration,
}

/// Why a case cannot be swept, if it cannot: crashes of its own would fight the pinned one
/// (pausing and resuming is fine: a paused implementation makes no request to pin).
pub fn unsweepable(case: &Case) -> Option<String> {
    let controls = || {
        case.steps.iter().filter_map(|s| match &s.kind {
            StepKind::Controller(c) => Some(c),
            StepKind::Apply(_)
            | StepKind::Update(_)
            | StepKind::Delete(_)
            | StepKind::Reject(_)
            | StepKind::Pods(_)
            | StepKind::Fault(_)
            | StepKind::Remember(_)
            | StepKind::Expect(_) => None,
        })
    };
    if controls().any(|c| c.action == ControllerAction::Crash) {
        return Some("the case crashes the implementation itself".into());
    }
    // The proxy holds one set of fault rules: the case's own pin and the sweep's cannot
    // both stand, so every point would go unreached.
    controls()
        .any(|c| matches!(c.when, Some(Trigger::Request(_))))
        .then(|| "the case pins its own requests, and the API proxy holds one pin at a time".into())
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

/// The name of a write's object as it is in every run: a pod's generated suffix becomes a
/// glob (`job-0-worker-x7k2p` → `job-0-worker-*`); other names are fixed by B1.
fn stable_name(w: &RequestInfo) -> String {
    match (w.resource.as_str(), w.name.rsplit_once('-')) {
        ("pods", Some((clique, _))) => format!("{clique}-*"),
        _ => w.name.clone(),
    }
}

/// Sweeps `case` on the target of `context` (whose implementation must go through the API
/// proxy): the crash-free run, then a run per write and position (`before`, and `after` too
/// when `after_too`), calling `progress` after each.
///
/// The runs' progress events go to a channel of the sweep's own, read as they come (logged at
/// debug level), never to `context.events`: a sweep runs for hours, and a channel nobody reads
/// would hold every step and timeline of every run until it ends.
pub async fn sweep(
    context: &RunContext,
    case: &Case,
    after_too: bool,
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
        let positions: &[bool] = if after_too { &[false, true] } else { &[false] };
        for k in 1..=writes.len() {
            for &after in positions {
                let pin = pin_for(&writes, k, after);
                let pinned = RunContext {
                    inject_pin: Some(pin.clone()),
                    ..context.clone()
                };
                let result = run_case(&pinned, case).await;
                let point = SweepPoint {
                    write: k,
                    pin,
                    outcome: result.outcome,
                    landed: result.crash_points,
                    duration: result.duration,
                };
                progress(&point);
                points.push(point);
            }
        }
    }
    Sweep {
        case: case.name.clone(),
        baseline,
        writes,
        points,
        duration: started.elapsed(),
    }
}

/// The sweeps as Markdown: per case the crash points explored and passed, then a row per
/// point.
pub fn summary(sweeps: &[Sweep]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| case | writes | crash points | passed | failed | not reached | wall (s) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for s in sweeps {
        let count = |v: Verdict| s.points.iter().filter(|p| p.verdict() == v).count();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.1} |",
            s.case,
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
                "the crash-free run did not pass ({}): nothing explored",
                s.baseline.label()
            );
            continue;
        }
        let _ = writeln!(out, "| write | crash | verdict | where it landed |");
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
                p.pin,
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
    use crate::implementation::ImplementationSpec;
    use crate::target::TargetHandles;
    use crate::target::pods::PodDriver;
    use crate::target::real_kubelets::{NodeControl, RealPods};

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
        let done = sweep(&context, &case, false, |_| {}).await;
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
        let pinned = unsweepable(case(
            "pod-created-without-an-answer-then-deleted-fails-clique",
        ));
        assert!(pinned.is_some_and(|why| why.contains("pins its own requests")));
        let crashes = unsweepable(case("crash-between-attempts"));
        assert!(crashes.is_some_and(|why| why.contains("crashes the implementation")));
        assert_eq!(unsweepable(case("one-failure-restarts-gang")), None);
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
}
