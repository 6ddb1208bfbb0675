//! Running a selection of cases: in parallel (`jobs` at a time), cases that need the cluster
//! to themselves alone, every event streamed to the writers.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{
    Mutex as AsyncMutex, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, Semaphore,
};

use super::case::{RunContext, finished, needs_exclusive, run_case_queued};
use crate::catalog::{Case, Catalog, Profile};
use crate::cluster::TargetHandles;
use crate::implementation::{ImplementationSpec, Instance};
use crate::proxy::{ApiProxy, Credentials, ProxyOptions};
use crate::report::{CaseResult, Outcome, Recorder, RunEvent, RunResults, TimeSplit, fold_runs};
use crate::schedule::{self, Durations, Planned};
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
    /// L2 fails every case that breaches it, not only `extended` ones (explore's scenarios,
    /// which certify nothing).
    pub restraint_fails_every_case: bool,
    /// Where implementation logs go.
    pub log_dir: PathBuf,
    /// After the first case that fails or errors, start no further case (they are reported
    /// as skipped, saying why).
    pub fail_fast: bool,
    /// Route every implementation the harness starts through its API proxy (needed for
    /// `request:` crash pins; off only to measure what the proxy costs).
    pub api_proxy: bool,
    /// The cases' durations in a previous run, for the order they start in (empty: catalog
    /// order, exclusive cases first).
    pub durations: Durations,
    /// Runs of each case (`--repeat`; at least 1): a case passes only when every run passed,
    /// a mix is unstable ([`fold_runs`]).
    pub repeat: u32,
}

impl Default for RunSettings {
    /// As `grove-conformance run` has it on the simulated fleet, against an implementation
    /// already running in the cluster (`External`: name another with `implementation`), its
    /// logs in `grove-conformance-results/logs`.
    fn default() -> RunSettings {
        RunSettings {
            implementation: ImplementationSpec::External,
            vocab: Vocabulary::default(),
            jobs: default_jobs(false),
            keep_namespaces: false,
            restraint_fails_every_case: false,
            log_dir: PathBuf::from("grove-conformance-results/logs"),
            fail_fast: false,
            api_proxy: true,
            durations: Durations::default(),
            repeat: 1,
        }
    }
}

/// Runs `case` (`run` reports its result), turning a panic into an error result: a case the
/// harness broke on is reported, never lost.
async fn guarded(
    case: &Case,
    repeat: Option<u32>,
    events: &UnboundedSender<RunEvent>,
    run: impl std::future::Future<Output = ()>,
) {
    let started = Instant::now();
    if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
        let message = format!("the harness panicked: {}", panic_message(panic.as_ref()));
        let _ = events.send(finished(repeat, broken(case, message, started)));
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
        fault_points: Vec::new(),
        api: None,
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
/// 151 s with 8 and 81 s with 16; with the control plane's collector relaxed and the cases
/// started longest first, 83 s with 24, 77 s with 32 and 72 s with 48 (process wall, cluster
/// start included), every case passing in each. Past 32 the machine is out of CPU: the
/// cases only wait longer (summed waiting 475 s at 32, 797 s at 48), closer to their windows.
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
        (cores * 16).clamp(4, 32)
    }
}

/// The order cases start in, each with whether it needs the cluster to itself
/// ([`schedule::start_order`]): the exclusive ones first, then the others, each part longest
/// first by `durations` (a case it does not know counts as the longest), equal ones in
/// catalog order.
pub fn plan(
    cases: Vec<Case>,
    durations: &Durations,
    exclusive: impl Fn(&Case) -> bool,
) -> Vec<(Case, bool)> {
    let planned: Vec<Planned> = cases
        .iter()
        .enumerate()
        .map(|(index, c)| Planned {
            index,
            duration: durations.planned(&c.name),
            alone: exclusive(c),
        })
        .collect();
    let order = schedule::start_order(&planned);
    let mut cases: Vec<Option<Case>> = cases.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|i| {
            let case = cases[i].take().expect("each index once");
            (case, planned[i].alone)
        })
        .collect()
}

/// How the implementation runs for the whole run, decided from the settings:
///
/// | per case | controllable | api proxy | shared proxy | shared instance |
/// |----------|--------------|-----------|--------------|-----------------|
/// | yes      | any          | any       | no           | no              |
/// | no       | yes          | yes       | yes          | yes             |
/// | no       | yes          | no        | no           | yes             |
/// | no       | no           | any       | no           | no (external)   |
fn shared_plan(settings: &RunSettings) -> (bool, bool) {
    let per_case = settings.implementation.per_case();
    let controllable = settings.implementation.controllable();
    let instance = !per_case && controllable;
    (instance && settings.api_proxy, instance)
}

/// The shared API proxy and instance of the run, when [`shared_plan`] calls for them (an
/// implementation that is not started per case and that the harness controls).
pub async fn start_shared(
    target: &TargetHandles,
    settings: &RunSettings,
) -> Result<(Option<Arc<ApiProxy>>, Option<Arc<AsyncMutex<Instance>>>), std::io::Error> {
    let (proxy, instance) = shared_plan(settings);
    // A shared instance reaches the apiserver through one proxy for the run; per-case
    // instances get one each (`case::lifecycle`).
    if let ImplementationSpec::Deployment {
        deployment,
        proxy_address,
    } = &settings.implementation
    {
        // A deployed implementation always goes through the proxy, with its own credentials.
        let options = ProxyOptions {
            listen: *proxy_address,
            credentials: Credentials::Client,
        };
        let proxy = Arc::new(
            ApiProxy::start_with(&target.kubeconfig, &settings.log_dir, options)
                .await
                .map_err(std::io::Error::other)?,
        );
        let log = settings.log_dir.join(super::case::SHARED_LOG);
        let instance = Instance::start_deployed(
            deployment,
            *proxy_address,
            target.client.clone(),
            &target.kubeconfig,
            proxy.clone(),
            &log,
        )
        .await
        .map_err(|e| std::io::Error::other(crate::errors::chain(&e).to_string()))?;
        return Ok((Some(proxy), Some(Arc::new(AsyncMutex::new(instance)))));
    }
    let shared_proxy = match proxy {
        true => Some(Arc::new(
            ApiProxy::start(&target.kubeconfig, &settings.log_dir)
                .await
                .map_err(std::io::Error::other)?,
        )),
        false => None,
    };
    if !instance {
        return Ok((shared_proxy, None));
    }
    let kubeconfig = shared_proxy
        .as_ref()
        .map_or(target.kubeconfig.as_path(), |p| p.kubeconfig());
    let log = settings.log_dir.join(super::case::SHARED_LOG);
    let instance = Instance::start(&settings.implementation, kubeconfig, None, &log)
        .await
        .map_err(std::io::Error::other)?;
    instance.ready().await.map_err(std::io::Error::other)?;
    Ok((shared_proxy, Some(Arc::new(AsyncMutex::new(instance)))))
}

/// With fail-fast, the first case that failed or errored.
type FirstFailure = Arc<std::sync::Mutex<Option<String>>>;

/// What lets a started case use the cluster: a share of it, or all of it.
enum ClusterGuard {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Alone(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// Starts one planned case, unless fail-fast already stopped the run: a slot first, then the
/// cluster lock (shared, or alone when `exclusive`), both taken here, before the case's task
/// is spawned, so that the caller starting cases one after another starts them in its order.
/// Always the slot first, then the lock: a case holding the write lock never waits for a
/// slot, since the slots are held only by cases already running.
async fn start_case(
    context: &Arc<RunContext>,
    case: Case,
    repeat: Option<u32>,
    exclusive: bool,
    slots: &Arc<Semaphore>,
    cluster: &Arc<RwLock<()>>,
    fail_fast: Option<FirstFailure>,
) -> tokio::task::JoinHandle<()> {
    let slot = slots
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let stopped = |first: &FirstFailure| first.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(failed) = fail_fast.as_ref().and_then(stopped) {
        let mut result = broken(&case, String::new(), Instant::now());
        result.outcome = Outcome::Skip {
            reason: format!("not run: --fail-fast stopped the run after `{failed}` failed"),
        };
        let _ = context.events.send(finished(repeat, result));
        return tokio::spawn(async {});
    }
    let queued = Instant::now();
    let guard = if exclusive {
        ClusterGuard::Alone(cluster.clone().write_owned().await)
    } else {
        ClusterGuard::Shared(cluster.clone().read_owned().await)
    };
    let queued = queued.elapsed();
    let context = context.clone();
    // The slot may be given back before the case ends (while it only watches its end); the
    // cluster lock is held to the end, teardown included.
    tokio::spawn(super::case::holding_slot(Box::new(slot), async move {
        let _guard = guard;
        guarded(&case, repeat, &context.events, async {
            let result = run_case_queued(&context, &case, queued, repeat).await;
            if let Some(first) = &fail_fast
                && !result.outcome.verdict().is_success()
            {
                first
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(result.case);
            }
        })
        .await;
    }))
}

/// The runs of repeated cases gathered until each case has all of them.
struct RepeatedRuns {
    repeat: u32,
    runs: std::collections::HashMap<String, Vec<(u32, CaseResult)>>,
}

impl RepeatedRuns {
    fn new(repeat: u32) -> RepeatedRuns {
        RepeatedRuns {
            repeat,
            runs: Default::default(),
        }
    }

    /// The folded result of a case once `event` brought its last run.
    fn on_event(&mut self, event: &RunEvent) -> Option<CaseResult> {
        let RunEvent::RepeatFinished { run, result } = event else {
            return None;
        };
        let runs = self.runs.entry(result.case.clone()).or_default();
        runs.push((*run, (**result).clone()));
        if runs.len() < self.repeat as usize {
            return None;
        }
        let runs = self.runs.remove(&result.case).unwrap_or_default();
        Some(fold_runs(runs))
    }
}

/// Runs `cases` and returns the results; every event also goes to `sink`. With
/// [`RunSettings::repeat`] above 1 each case runs that many times, each run's result comes as
/// [`RunEvent::RepeatFinished`], and the case's, folded from them, as `CaseFinished`.
pub async fn run_cases(
    target: &TargetHandles,
    catalog: Arc<Catalog>,
    cases: Vec<Case>,
    settings: &RunSettings,
    mut sink: impl FnMut(&RunEvent) + Send + 'static,
) -> Result<RunResults, std::io::Error> {
    std::fs::create_dir_all(&settings.log_dir)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let repeat = settings.repeat.max(1);
    let consumer = tokio::spawn(async move {
        let mut recorder = Recorder::new();
        let mut runs = RepeatedRuns::new(repeat);
        while let Some(event) = rx.recv().await {
            sink(&event);
            recorder.on_event(&event);
            if let Some(case) = runs.on_event(&event) {
                let event = RunEvent::CaseFinished(Box::new(case));
                sink(&event);
                recorder.on_event(&event);
            }
        }
        recorder.results().clone()
    });
    let started = Instant::now();
    let _ = tx.send(RunEvent::RunStarted { cases: cases.len() });
    let (shared_proxy, shared_instance) = start_shared(target, settings).await?;
    let context = Arc::new(RunContext {
        shared_instance,
        shared_proxy,
        api_proxy: settings.api_proxy,
        vocab: settings.vocab,
        keep_namespaces: settings.keep_namespaces,
        restraint_fails_every_case: settings.restraint_fails_every_case,
        ..RunContext::new(
            target,
            settings.implementation.clone(),
            catalog,
            settings.log_dir.clone(),
            tx.clone(),
        )
    });
    let slots = Arc::new(Semaphore::new(settings.jobs.max(1)));
    let cluster = Arc::new(RwLock::new(()));
    let first_failure: FirstFailure = Arc::new(std::sync::Mutex::new(None));
    let planned = plan(cases, &settings.durations, |c| {
        needs_exclusive(c, &context.catalog, &settings.implementation, &context.pods)
    });
    type Task = (Case, Option<u32>, tokio::task::JoinHandle<()>);
    let mut tasks: Vec<Task> = Vec::with_capacity(planned.len());
    // A repeated case's runs start one after another, side by side as slots allow.
    for (case, exclusive) in planned {
        for run in 1..=repeat {
            let fail_fast = settings.fail_fast.then(|| first_failure.clone());
            let numbered = (repeat > 1).then_some(run);
            let task = start_case(
                &context,
                case.clone(),
                numbered,
                exclusive,
                &slots,
                &cluster,
                fail_fast,
            )
            .await;
            tasks.push((case.clone(), numbered, task));
        }
    }
    // A case whose task ended without a result (aborted, or panicked where it could not be
    // caught) is still reported: as an error, never left out.
    for (case, numbered, task) in tasks {
        if let Err(error) = task.await {
            let message = format!("the case's task ended without a result: {error}");
            let _ = tx.send(finished(numbered, broken(&case, message, started)));
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

    #[test]
    fn only_a_shared_controllable_instance_is_started_for_the_run() {
        let settings = |implementation, api_proxy| RunSettings {
            implementation,
            vocab: Vocabulary::default(),
            jobs: 1,
            keep_namespaces: false,
            restraint_fails_every_case: false,
            log_dir: PathBuf::new(),
            fail_fast: false,
            api_proxy,
            durations: Durations::default(),
            repeat: 1,
        };
        let command = |template: &str| ImplementationSpec::Command {
            template: template.into(),
            setup: Default::default(),
        };
        let reference = ImplementationSpec::Reference {
            program: PathBuf::from("/x"),
        };
        assert_eq!(shared_plan(&settings(reference, true)), (false, false));
        assert_eq!(
            shared_plan(&settings(command("op -n {namespace}"), true)),
            (false, false)
        );
        assert_eq!(shared_plan(&settings(command("op"), true)), (true, true));
        assert_eq!(shared_plan(&settings(command("op"), false)), (false, true));
        assert_eq!(
            shared_plan(&settings(ImplementationSpec::External, true)),
            (false, false)
        );
    }

    #[test]
    fn the_plan_starts_exclusive_cases_first_then_the_longest() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(".")).expect("the catalog loads");
        let cases: Vec<Case> = catalog.cases.iter().take(6).cloned().collect();
        let names: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
        let alone = [names[1].clone(), names[3].clone()];
        let got = |durations: &Durations| -> Vec<(String, bool)> {
            plan(cases.clone(), durations, |c| alone.contains(&c.name))
                .into_iter()
                .map(|(c, e)| (c.name, e))
                .collect()
        };
        let n = |i: usize, e: bool| (names[i].clone(), e);
        // Without durations: catalog order, the exclusive ones first.
        assert_eq!(
            got(&Durations::default()),
            [
                n(1, true),
                n(3, true),
                n(0, false),
                n(2, false),
                n(4, false),
                n(5, false)
            ]
        );
        // With them: longest first in each part; a case they lack counts as long as the
        // longest they know, and follows it in catalog order.
        let ms = std::time::Duration::from_millis;
        let durations = Durations::from_pairs([
            (names[0].clone(), ms(100)),
            (names[1].clone(), ms(10)),
            (names[2].clone(), ms(300)),
            (names[3].clone(), ms(20)),
            (names[4].clone(), ms(200)),
        ]);
        assert_eq!(
            got(&durations),
            [
                n(3, true),
                n(1, true),
                n(2, false),
                n(5, false),
                n(4, false),
                n(0, false)
            ]
        );
    }

    #[tokio::test]
    async fn a_panicking_case_is_reported_as_an_error_with_its_message() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(".")).expect("the catalog loads");
        let case = catalog.cases[0].clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        guarded(&case, None, &tx, async { panic!("a bug in a step") }).await;
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
