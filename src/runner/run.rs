//! Running a selection of cases: in parallel (`jobs` at a time), cases that need the cluster
//! to themselves alone, every event streamed to the writers.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{Mutex as AsyncMutex, RwLock, Semaphore};

use super::case::{RunContext, needs_exclusive, run_case_queued};
use crate::catalog::{Case, Catalog, Profile};
use crate::implementation::{ImplementationSpec, Instance};
use crate::proxy::ApiProxy;
use crate::report::{CaseResult, Outcome, Recorder, RunEvent, RunResults, TimeSplit};
use crate::target::TargetHandles;
use crate::vocab::Vocabulary;

/// Which cases to run.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Each pattern selects cases whose name contains it, whose area equals it, or that
    /// cite it as a clause id; empty selects every case.
    pub filters: Vec<String>,
    /// Only this profile, when set.
    pub profile: Option<Profile>,
}

impl Selection {
    /// Whether `case` is selected.
    pub fn selects(&self, case: &Case) -> bool {
        self.profile.is_none_or(|p| p == case.profile)
            && (self.filters.is_empty()
                || self.filters.iter().any(|f| {
                    case.name.contains(f.as_str())
                        || &case.area == f
                        || case.clauses.iter().any(|c| c == f)
                }))
    }
}

/// Where and how a run happens.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The implementation under test.
    pub implementation: ImplementationSpec,
    /// The vocabulary of the revision under test.
    pub vocab: Vocabulary,
    /// Cases at once.
    pub jobs: usize,
    /// Keep case namespaces afterwards.
    pub keep_namespaces: bool,
    /// Where implementation logs go.
    pub log_dir: PathBuf,
    /// After the first case that fails or errors, start no further case (they are reported
    /// as skipped, saying why).
    pub fail_fast: bool,
    /// Route every implementation the harness starts through its API proxy (needed for
    /// `request:` crash pins; off only to measure what the proxy costs).
    pub api_proxy: bool,
}

/// Runs `case` (`run` reports its result), turning a panic into an error result: a case the
/// harness broke on is reported, never lost.
async fn guarded(
    case: &Case,
    events: &UnboundedSender<RunEvent>,
    run: impl std::future::Future<Output = ()>,
) {
    let started = Instant::now();
    if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
        let message = format!("the harness panicked: {}", panic_message(panic.as_ref()));
        let _ = events.send(RunEvent::CaseFinished(Box::new(broken(
            case, message, started,
        ))));
    }
}

/// The result of a case the harness broke on.
fn broken(case: &Case, message: String, started: Instant) -> CaseResult {
    CaseResult {
        case: case.name.clone(),
        area: case.area.clone(),
        clauses: case.clauses.clone(),
        profile: case.profile,
        outcome: Outcome::Error { message },
        duration: started.elapsed(),
        time: TimeSplit::default(),
        crash_points: Vec::new(),
    }
}

/// The text a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// The default number of cases at once, on simulated kubelets or on real ones.
///
/// Simulated: cases mostly wait (for the implementation, and in `for:` holds that must run
/// their length), so many run per core: on 2 cores the catalog took 198 s with 4 at once,
/// 151 s with 8 and 81 s with 16, every case passing in each.
///
/// Real kubelets (kind, or a cluster of a kubeconfig): every pod is a sandbox and a container
/// that a kubelet starts, probes and stops, and on a kind cluster those kubelets share the
/// harness's cores. On 2 cores, 16 at once made 5 of 108 cases miss their windows (pods of a
/// finished attempt still terminating 30 s on); 2 a core is the default there.
pub fn default_jobs(real_kubelets: bool) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    if real_kubelets {
        (cores * 2).clamp(2, 16)
    } else {
        (cores * 8).clamp(4, 16)
    }
}

/// Runs `cases` and returns the results; every event also goes to `sink`.
pub async fn run_cases(
    target: &TargetHandles,
    catalog: Arc<Catalog>,
    cases: Vec<Case>,
    settings: &RunSettings,
    mut sink: impl FnMut(&RunEvent) + Send + 'static,
) -> Result<RunResults, std::io::Error> {
    std::fs::create_dir_all(&settings.log_dir)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let consumer = tokio::spawn(async move {
        let mut recorder = Recorder::new();
        while let Some(event) = rx.recv().await {
            sink(&event);
            recorder.on_event(&event);
        }
        recorder.results().clone()
    });
    let started = Instant::now();
    let _ = tx.send(RunEvent::RunStarted { cases: cases.len() });
    // A shared instance reaches the apiserver through one proxy for the run; per-case
    // instances get one each (`case::lifecycle`).
    let shared_proxy = match (
        settings.api_proxy,
        settings.implementation.per_case(),
        settings.implementation.controllable(),
    ) {
        (true, false, true) => Some(Arc::new(
            ApiProxy::start(&target.kubeconfig, &settings.log_dir)
                .await
                .map_err(std::io::Error::other)?,
        )),
        _ => None,
    };
    let shared_instance = if settings.implementation.per_case() {
        None
    } else {
        match settings.implementation.controllable() {
            true => {
                let instance = Instance::start(
                    &settings.implementation,
                    shared_proxy
                        .as_ref()
                        .map_or(target.kubeconfig.as_path(), |p| p.kubeconfig()),
                    None,
                    &settings.log_dir.join("implementation.log"),
                )
                .await
                .map_err(std::io::Error::other)?;
                instance.ready().await.map_err(std::io::Error::other)?;
                Some(Arc::new(AsyncMutex::new(instance)))
            }
            false => None,
        }
    };
    let context = Arc::new(RunContext {
        client: target.client.clone(),
        kubeconfig: target.kubeconfig.clone(),
        pods: target.pods.clone(),
        implementation: settings.implementation.clone(),
        shared_instance,
        shared_proxy,
        api_proxy: settings.api_proxy,
        inject_pin: None,
        record_writes: None,
        vocab: settings.vocab,
        catalog,
        keep_namespaces: settings.keep_namespaces,
        log_dir: settings.log_dir.clone(),
        events: tx.clone(),
    });
    let slots = Arc::new(Semaphore::new(settings.jobs.max(1)));
    let cluster = Arc::new(RwLock::new(()));
    // Exclusive cases last, so they do not hold up the parallel ones.
    let (mut ordered, exclusive): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(|c| {
        !needs_exclusive(c, &context.catalog, &settings.implementation, &context.pods)
    });
    ordered.extend(exclusive);
    let mut tasks = Vec::new();
    // With fail-fast, the first case that failed or errored.
    let first_failure = Arc::new(std::sync::Mutex::new(None::<String>));
    for case in ordered {
        let context = context.clone();
        let slots = slots.clone();
        let cluster = cluster.clone();
        let exclusive = needs_exclusive(
            &case,
            &context.catalog,
            &settings.implementation,
            &context.pods,
        );
        let header = case.clone();
        let fail_fast = settings.fail_fast.then(|| first_failure.clone());
        let task = tokio::spawn(async move {
            // Always the slot first, then the cluster lock: a case holding the write lock
            // never waits for a slot held by a case queued behind it.
            let _slot = slots
                .acquire()
                .await
                .expect("the semaphore is never closed");
            let stopped = |first: &Arc<std::sync::Mutex<Option<String>>>| {
                first.lock().unwrap_or_else(|p| p.into_inner()).clone()
            };
            if let Some(failed) = fail_fast.as_ref().and_then(stopped) {
                let mut result = broken(&case, String::new(), Instant::now());
                result.outcome = Outcome::Skip {
                    reason: format!("not run: --fail-fast stopped the run after `{failed}` failed"),
                };
                let _ = context
                    .events
                    .send(RunEvent::CaseFinished(Box::new(result)));
                return;
            }
            guarded(&case, &context.events, async {
                let queued = Instant::now();
                let result = if exclusive {
                    let _alone = cluster.write().await;
                    run_case_queued(&context, &case, queued.elapsed()).await
                } else {
                    let _shared = cluster.read().await;
                    run_case_queued(&context, &case, queued.elapsed()).await
                };
                if let Some(first) = &fail_fast
                    && matches!(result.outcome, Outcome::Fail(_) | Outcome::Error { .. })
                {
                    first
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(result.case);
                }
            })
            .await;
        });
        tasks.push((header, task));
    }
    // A case whose task ended without a result (aborted, or panicked where it could not be
    // caught) is still reported: as an error, never left out.
    for (case, task) in tasks {
        if let Err(error) = task.await {
            let message = format!("the case's task ended without a result: {error}");
            let _ = tx.send(RunEvent::CaseFinished(Box::new(broken(
                &case, message, started,
            ))));
        }
    }
    if let Some(instance) = &context.shared_instance {
        instance.lock().await.stop().await;
    }
    let _ = tx.send(RunEvent::RunFinished {
        duration: started.elapsed(),
    });
    drop(tx);
    drop(context);
    Ok(consumer.await.expect("the event consumer does not panic"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_case_is_reported_as_an_error_with_its_message() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(".")).expect("the catalog loads");
        let case = catalog.cases[0].clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        guarded(&case, &tx, async { panic!("a bug in a step") }).await;
        let Some(RunEvent::CaseFinished(result)) = rx.recv().await else {
            panic!("no result was reported");
        };
        assert_eq!(result.case, case.name);
        match result.outcome {
            Outcome::Error { message } => assert!(message.contains("a bug in a step"), "{message}"),
            other => panic!("expected an error, got {other:?}"),
        }
        let mut recorder = Recorder::new();
        recorder.on_event(&RunEvent::CaseFinished(Box::new(broken(
            &case,
            "x".into(),
            Instant::now(),
        ))));
        assert_eq!(
            recorder.results().counts(),
            crate::report::Counts {
                error: 1,
                ..Default::default()
            }
        );
        assert_eq!(
            crate::report::exit_code(recorder.results()),
            crate::report::CASES_ERRORED
        );
    }
}
