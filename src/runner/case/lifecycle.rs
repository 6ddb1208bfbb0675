//! One case's lifecycle: its namespace, the observer, the implementation instance, the steps
//! under the case's timeout, then the verdict (`verdict`) and the teardown.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::Mutex as AsyncMutex;

use super::namespaces::delete_case_namespace;
use super::requirements::{case_pods, is_large, loses_node, private_node_count, skip_reason};
use super::steps::{CaseRun, execute};
use super::verdict::{
    Judged, StepsEnded, injected_pin_failed, injection_failed, judge, with_pins_landed,
};
use crate::catalog::{
    Applicability, Case, Catalog, ControllerAction, FaultStep, Profile, RequestPin,
};
use crate::implementation::{ImplementationSpec, Instance};
use crate::kubelets::PodDriver;
use crate::monitor::{SeenRequest, Violation};
use crate::proxy::{ApiProxy, FaultAction, HookPosition, RecordedRequest, RequestInfo};
use crate::report::{ApiCost, CaseResult, Failure, Outcome, RunEvent, TimeSplit};
use crate::runner::observe::Observer;
use crate::vocab::Vocabulary;

/// Label on every case namespace, with the case name as value.
pub const CASE_LABEL: &str = "grove-conformance.io/case";
/// Default upper bound of a whole case.
pub const DEFAULT_CASE_TIMEOUT: Duration = Duration::from_secs(180);

/// What every case of a run shares.
#[derive(Clone)]
pub struct RunContext {
    /// Admin client of the target.
    pub client: Client,
    /// Its kubeconfig (handed to the implementation).
    pub kubeconfig: PathBuf,
    /// How pod actions reach pods.
    pub pods: PodDriver,
    /// The implementation under test.
    pub implementation: ImplementationSpec,
    /// A single instance serving every case, when the implementation is not per-case.
    pub shared_instance: Option<Arc<AsyncMutex<Instance>>>,
    /// The API proxy the shared instance goes through, if any.
    pub shared_proxy: Option<Arc<ApiProxy>>,
    /// Whether per-case instances go through an API proxy of their own.
    pub api_proxy: bool,
    /// The vocabulary of the selected revision.
    pub vocab: Vocabulary,
    /// The catalog (fixtures).
    pub catalog: Arc<Catalog>,
    /// Keep namespaces after the case.
    pub keep_namespaces: bool,
    /// L2 fails every case that breaches it, not only `extended` ones (explore's scenarios).
    pub restraint_fails_every_case: bool,
    /// Where implementation logs go.
    pub log_dir: PathBuf,
    /// Progress events.
    pub events: tokio::sync::mpsc::UnboundedSender<RunEvent>,
    /// A crash pinned before the first step of every case (the crash sweep's).
    pub inject_pin: Option<RequestPin>,
    /// A fault armed before the first step of every case (the stale and unobserved sweeps').
    pub inject_fault: Option<FaultStep>,
    /// Where each case's writes, as its API proxy saw them, are appended (the crash sweep's
    /// crash-free run).
    pub record_writes: Option<Arc<std::sync::Mutex<Vec<RequestInfo>>>>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("implementation", &self.implementation)
            .finish_non_exhaustive()
    }
}

/// Runs one case end to end and returns its result.
pub async fn run_case(run: &RunContext, case: &Case) -> CaseResult {
    run_case_queued(run, case, Duration::ZERO, None).await
}

/// [`run_case`] for a case that held a slot for `queued` before it could start (behind an
/// exclusive case, or as one). Everything it logs is in a `case` span naming the case and,
/// once it exists, its namespace. `repeat` is which run of a case run several times this is
/// (from 1): its result is then sent as [`RunEvent::RepeatFinished`], and its log named by it.
#[tracing::instrument(name = "case", skip_all, fields(case = %case.name, namespace))]
pub async fn run_case_queued(
    run: &RunContext,
    case: &Case,
    queued: Duration,
    repeat: Option<u32>,
) -> CaseResult {
    let started = Instant::now();
    let _ = run.events.send(RunEvent::CaseStarted {
        case: case.name.clone(),
    });
    let applicability = run.catalog.applicability(case, run.vocab.revision());
    let ran = match (applicability, skip_reason(case, run)) {
        (Applicability::NotApplicable(reason), _) => {
            Ran::without(Outcome::NotApplicable { reason })
        }
        (_, Some(reason)) => Ran::without(Outcome::Skip { reason }),
        (_, None) => {
            let timeout = case
                .timeout
                .map(|d| d.as_std())
                .unwrap_or(DEFAULT_CASE_TIMEOUT);
            run_steps(run, case, timeout, repeat).await
        }
    };
    let result = CaseResult {
        case: case.name.clone(),
        area: case.area.clone(),
        clauses: case.clauses.clone(),
        profile: case.profile,
        outcome: ran.outcome,
        duration: started.elapsed(),
        time: TimeSplit { queued, ..ran.time },
        crash_points: ran.crash_points,
        fault_points: ran.fault_points,
        api: ran.api,
    };
    let _ = run.events.send(finished(repeat, result.clone()));
    result
}

/// The event for a case's `result`: the case's end, or one run's of a repeated case.
pub fn finished(repeat: Option<u32>, result: CaseResult) -> RunEvent {
    match repeat {
        None => RunEvent::CaseFinished(Box::new(result)),
        Some(run) => RunEvent::RepeatFinished {
            run,
            result: Box::new(result),
        },
    }
}

/// How a case's steps went: the outcome, where each pinned crash landed, how long the steps
/// waited and held, and what the implementation cost the apiserver.
struct Ran {
    outcome: Outcome,
    crash_points: Vec<String>,
    fault_points: Vec<String>,
    time: TimeSplit,
    api: Option<ApiCost>,
}

impl Ran {
    /// A case whose steps did not run.
    fn without(outcome: Outcome) -> Self {
        Ran {
            outcome,
            crash_points: Vec::new(),
            fault_points: Vec::new(),
            time: TimeSplit::default(),
            api: None,
        }
    }
}

/// Runs the steps of a case that applies here: its namespace, observer and implementation
/// instance, the steps under `timeout`, the monitor's verdict, then the teardown.
async fn run_steps(run: &RunContext, case: &Case, timeout: Duration, repeat: Option<u32>) -> Ran {
    let mut ran = Ran::without(Outcome::Pass);
    let outcome = run_steps_noting(run, case, timeout, repeat, &mut ran).await;
    ran.outcome = restraint_verdict(
        case,
        outcome,
        ran.api.as_ref(),
        run.restraint_fails_every_case,
    );
    ran
}

/// L2 (provisional) in the verdict: writes past the restraint bound fail a passing case of the
/// `extended` profile (or any case, with `every_case`); in a `core` case they are otherwise
/// reported with its cost, never its verdict.
fn restraint_verdict(
    case: &Case,
    outcome: Outcome,
    api: Option<&ApiCost>,
    every_case: bool,
) -> Outcome {
    let finding = api.and_then(ApiCost::restraint_finding);
    let judged = every_case || case.profile == Profile::Extended;
    match (outcome, finding) {
        (Outcome::Pass, Some(message)) if judged => Outcome::Fail(Failure {
            message,
            diff: None,
            compared: None,
            timeline: None,
            broken: vec!["L2".to_owned()],
        }),
        (outcome, _) => outcome,
    }
}

/// [`run_steps`], noting the crash points, the time split and the API cost in `ran`.
///
/// Once the namespace exists, every ending goes through [`tear_down`]: a case that could not
/// start its proxy or implementation, pin its crash or reserve its nodes deletes its
/// namespace and stops what it started, as a case that ran does.
async fn run_steps_noting(
    run: &RunContext,
    case: &Case,
    timeout: Duration,
    repeat: Option<u32>,
    ran: &mut Ran,
) -> Outcome {
    let started = (std::time::Instant::now(), std::time::SystemTime::now());
    let namespace = namespace_for(&case.name);
    tracing::Span::current().record("namespace", namespace.as_str());
    let namespaces: Api<Namespace> = Api::all(run.client.clone());
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": namespace, "labels": {
            CASE_LABEL: case.name,
            super::RUN_LABEL: super::run_id(),
        }}
    }))
    .expect("a valid Namespace");
    if let Err(e) = namespaces.create(&PostParams::default(), &ns).await {
        return Outcome::Error {
            message: format!("failed to create namespace {namespace}: {e}"),
        };
    }
    let observer = Observer::start(
        run.client.clone(),
        &namespace,
        run.vocab,
        run.pods.fleet().cloned(),
    )
    .await;
    let mut ctx = CaseRun {
        run,
        case,
        repeat,
        namespace: namespace.clone(),
        observer,
        instance: None,
        proxy: None,
        pins: Vec::new(),
        remembered: BTreeMap::new(),
        triggers: Vec::new(),
        lost_nodes: Vec::new(),
        faults: Vec::new(),
        fault_log: Arc::default(),
        refusals: Default::default(),
        time: std::sync::Mutex::default(),
        required_at: std::sync::Mutex::default(),
        trigger_points: Arc::default(),
        kubelet_lag: Arc::default(),
    };
    // Nodes of its own where the pod driver can give them: for a case that loses a node, or
    // one with more pods than the shared nodes hold.
    let private_nodes = private_node_count(case, &run.catalog, &run.pods);
    let outcome = match prepare(&mut ctx, private_nodes).await {
        Err(outcome) => outcome,
        Ok(()) => {
            let ended = run_under_timeout(&mut ctx, timeout).await;
            if matches!(ended, StepsEnded::Ran(Ok(()))) {
                ctx.watch_restraint_tail().await;
            }
            ran.time = ctx.time_split();
            ran.api = ctx.api_cost(started);
            let timeline = ctx.observer.settle().await;
            judge(
                ended,
                timeout,
                &Judged {
                    violations: monitor_verdicts(&ctx),
                    timeline,
                    unjudgeable: ctx.observer.unjudgeable(),
                    failed_unprompted: ctx.observer.failed_unprompted(),
                    // A case that loses a node expects the cluster to take its pods.
                    disrupted_by_cluster: if loses_node(case) {
                        Vec::new()
                    } else {
                        ctx.observer.disrupted_by_cluster()
                    },
                },
            )
        }
    };
    let outcome = tear_down(ctx, outcome, private_nodes.is_some(), ran).await;
    if !run.keep_namespaces {
        let simulated = run.pods.fleet().is_some();
        delete_case_namespace(
            &run.client,
            &namespace,
            is_large(case, &run.catalog),
            simulated,
        )
        .await;
    }
    outcome
}

/// The monitor's violations, with the creations it left undecided judged against the
/// requests the case's API proxy saw (none without a proxy: nothing then shows a breach).
fn monitor_verdicts(ctx: &CaseRun<'_>) -> Vec<Violation> {
    let mut violations = ctx.observer.violations();
    let undecided = ctx.observer.undecided();
    let Some(proxy) = &ctx.proxy else {
        return violations;
    };
    for u in &undecided {
        let seen = |r: &RecordedRequest, read: Option<(String, String)>| SeenRequest {
            arrived: r.seq,
            answered_after: r.answered_after,
            revision: r.resource_version,
            read,
        };
        let mut requests: Vec<SeenRequest> = proxy
            .writes_at(&u.revisions())
            .iter()
            .map(|r| seen(r, None))
            .collect();
        let (resource, name) = &u.parent;
        requests.extend(proxy.quorum_reads(resource, name).iter().map(|r| {
            let read = (r.request.resource.clone(), r.request.name.clone());
            seen(r, Some(read))
        }));
        match u.judge(&requests) {
            Some(v) => violations.push(v),
            None => tracing::info!(
                case = %ctx.case.name,
                "{}: {}: allowed, nothing shows the create was not under way",
                u.clause,
                u.message
            ),
        }
    }
    violations
}

/// The log of an implementation instance that serves every case.
pub const SHARED_LOG: &str = "implementation.log";

/// Where a case's implementation log goes: its own for a per-case instance (one a run when
/// it is repeated: `<case>.run-2.log`), the run's for an instance that serves every case.
fn log_path(run: &RunContext, case: &Case, repeat: Option<u32>) -> PathBuf {
    if !run.implementation.per_case() {
        return run.log_dir.join(SHARED_LOG);
    }
    match repeat {
        None => run.log_dir.join(format!("{}.log", case.name)),
        Some(n) => run.log_dir.join(format!("{}.run-{n}.log", case.name)),
    }
}

/// What a case starts before its first step, into `ctx` as it starts (so that the teardown
/// stops it whatever comes next): its API proxy and implementation instance when they are
/// per case, the crash the run pins before every case, and nodes of its own. `Err` is how
/// the case ends when one of them fails.
async fn prepare(ctx: &mut CaseRun<'_>, private_nodes: Option<usize>) -> Result<(), Outcome> {
    let run = ctx.run;
    // A target whose nodes cannot hold the case's pods says so before anything runs.
    let needed = case_pods(ctx.case, &run.catalog);
    match run.pods.pod_capacity().await {
        Ok(Some(capacity)) if needed > capacity => {
            return Err(Outcome::Skip {
                reason: format!(
                    "the case needs {needed} pods at once; the target's nodes hold at most {capacity} (the allocatable pods of its Ready, schedulable, untainted nodes)"
                ),
            });
        }
        Ok(_) => {}
        Err(e) => {
            return Err(Outcome::Error {
                message: format!(
                    "failed to read what the target's nodes hold: {}",
                    crate::errors::chain(&e)
                ),
            });
        }
    }
    ctx.proxy = if run.implementation.per_case() && run.api_proxy {
        let proxy = ApiProxy::start(&run.kubeconfig, &run.log_dir)
            .await
            .map_err(|e| Outcome::Error {
                message: format!("failed to start the API proxy: {e}"),
            })?;
        Some(Arc::new(proxy))
    } else {
        run.shared_proxy.clone()
    };
    ctx.instance = if run.implementation.per_case() {
        let kubeconfig = ctx
            .proxy
            .as_ref()
            .map_or(run.kubeconfig.as_path(), |p| p.kubeconfig());
        let log = log_path(run, ctx.case, ctx.repeat);
        let mut started =
            Instance::start(&run.implementation, kubeconfig, Some(&ctx.namespace), &log)
                .await
                .map_err(|e| Outcome::Error {
                    message: format!("failed to start the implementation: {e}"),
                })?;
        started.account_as(&ctx.case.area);
        let instance = Arc::new(AsyncMutex::new(started));
        ctx.instance = Some(instance.clone());
        instance
            .lock()
            .await
            .ready()
            .await
            .map_err(|e| Outcome::Error {
                message: e.to_string(),
            })?;
        Some(instance)
    } else {
        run.shared_instance.clone()
    };
    if let Some(pin) = &run.inject_pin {
        let Some(instance) = ctx.instance.clone() else {
            return Err(Outcome::Error {
                message: "a pinned crash needs an implementation the harness controls".into(),
            });
        };
        ctx.pin_action(instance, pin, ControllerAction::Crash)
            .map_err(|e| injected_pin_failed(pin, e))?;
    }
    if let Some(fault) = &run.inject_fault {
        ctx.fault(fault)
            .await
            .map_err(|e| injection_failed("arm the sweep's fault", e))?;
    }
    if let Some(count) = private_nodes {
        run.pods
            .reserve_nodes(&ctx.namespace, count)
            .await
            .map_err(|e| Outcome::Error {
                message: format!(
                    "failed to reserve nodes for the case: {}",
                    crate::errors::chain(&e)
                ),
            })?;
    }
    Ok(())
}

/// Runs the steps under the case's timeout (grown by the time real kubelets took), ending at
/// once when a pod of the case cannot start on the target.
async fn run_under_timeout(ctx: &mut CaseRun<'_>, timeout: Duration) -> StepsEnded {
    let mut start_failures = ctx.observer.start_failures();
    let lag = ctx.kubelet_lag.clone();
    let steps = async {
        tokio::select! {
            biased;
            result = execute(ctx) => StepsEnded::Ran(result),
            pods = start_failures.wait() => StepsEnded::CannotStart(pods),
        }
    };
    within_timeout(timeout, lag, steps)
        .await
        .unwrap_or(StepsEnded::TimedOut)
}

/// Stops what the case started, however it ended: its armed triggers, its pins on the API
/// proxy (and the writes it recorded, for the crash sweep), its lost and reserved nodes, its
/// implementation instance and its log (kept when the case failed or errored). Returns the
/// outcome with what the teardown learnt (where the pins landed, an implementation that
/// exited by itself, where the log is).
async fn tear_down(
    mut ctx: CaseRun<'_>,
    mut outcome: Outcome,
    private_nodes: bool,
    ran: &mut Ran,
) -> Outcome {
    let run = ctx.run;
    let namespace = ctx.namespace.clone();
    for trigger in ctx.triggers.drain(..) {
        trigger.abort();
    }
    let (settled, fault_points) = ctx.settle_faults(outcome).await;
    outcome = settled;
    // Before anything else writes: a refusal left standing would keep the namespace's
    // objects from being deleted.
    if let Err(e) = ctx.lift_refusals().await
        && !matches!(outcome, Outcome::Error { .. })
    {
        outcome = Outcome::Error {
            message: format!(
                "a refusal could not be lifted: {}",
                crate::errors::chain(&e)
            ),
        };
    }
    if !run.keep_namespaces {
        ctx.remove_case_finalizers().await;
    }
    if let Some(proxy) = &ctx.proxy {
        let landed = landed_pins(proxy, &namespace, &ctx.pins);
        outcome = with_pins_landed(outcome, &ctx.pins, landed.len());
        ran.crash_points = landed;
        ran.crash_points.extend(
            ctx.trigger_points
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .drain(..),
        );
        ran.fault_points = fault_points;
        if let Some(sink) = &run.record_writes {
            sink.lock().unwrap_or_else(|p| p.into_inner()).extend(
                proxy
                    .mutating_requests()
                    .into_iter()
                    .map(|r| r.request)
                    .filter(|r| r.namespace == namespace),
            );
        }
        proxy.clear_hook();
        proxy.set_rules(Vec::new());
    }
    for node in ctx.lost_nodes.drain(..) {
        if let Err(e) = run.pods.recover_node(&node).await {
            tracing::warn!(node, error = %crate::errors::chain(&e), "a lost node did not recover");
        }
    }
    if private_nodes {
        run.pods.release_nodes(&namespace);
    }
    if run.implementation.per_case()
        && let Some(instance) = ctx.instance.take()
    {
        let mut instance = instance.lock().await;
        if let Some(exit) = instance.exited().await
            && let Outcome::Fail(f) = &mut outcome
        {
            f.message
                .push_str(&format!(" ({exit}; log: {})", instance.log().display()));
        }
        instance.stop().await;
    }
    let log = log_path(run, ctx.case, ctx.repeat);
    if matches!(outcome, Outcome::Fail(_) | Outcome::Error { .. }) {
        if let Outcome::Fail(f) = &mut outcome {
            f.message.push_str(&format!(
                " [namespace {namespace}, implementation log {}]",
                log.display()
            ));
        }
    } else if log.exists() && run.implementation.per_case() {
        let _ = std::fs::remove_file(&log);
    }
    outcome
}

/// Where each hook of the case's namespace fired, in order, as one line each.
fn landed_pins(
    proxy: &ApiProxy,
    namespace: &str,
    pins: &[(RequestPin, ControllerAction)],
) -> Vec<String> {
    proxy
        .fired()
        .into_iter()
        .filter(|f| matches!(f.action, FaultAction::Hook { .. }))
        .filter(|f| f.request.namespace == namespace)
        .zip(pins)
        .map(|(f, (_, action))| {
            let action = match action {
                ControllerAction::Pause => "pause",
                ControllerAction::Crash => "crash",
                // Pins carry only pauses and crashes (the parser rejects the others).
                ControllerAction::Resume => "resume",
                ControllerAction::Wait => "wait",
            };
            let position = match f.action {
                FaultAction::Hook {
                    position: HookPosition::After,
                } => "after",
                FaultAction::Hook {
                    position: HookPosition::Before,
                }
                | FaultAction::Status { .. }
                | FaultAction::Delay { .. } => "before",
            };
            let mut what = format!(
                "{action} {position} request #{}: {} {}",
                f.seq,
                f.request.verb.as_str(),
                f.request.resource
            );
            if !f.request.subresource.is_empty() {
                what.push_str(&format!("/{}", f.request.subresource));
            }
            if !f.request.name.is_empty() {
                what.push_str(&format!(" {}", f.request.name));
            }
            if let Some(code) = f.upstream_status {
                what.push_str(&format!(" (the apiserver answered {code})"));
            }
            what
        })
        .collect()
}

/// Runs `steps` under the case's `timeout`, grown by the time expectations waited past their
/// windows for real kubelets (`lag`); `Err` when it ran out.
async fn within_timeout<T>(
    timeout: Duration,
    lag: Arc<std::sync::Mutex<Duration>>,
    steps: impl std::future::Future<Output = T>,
) -> Result<T, ()> {
    let started = tokio::time::Instant::now();
    let lag = move || *lag.lock().unwrap_or_else(|p| p.into_inner());
    let mut steps = std::pin::pin!(steps);
    loop {
        let deadline = started + timeout + lag();
        tokio::select! {
            result = &mut steps => return Ok(result),
            () = tokio::time::sleep_until(deadline) => {
                if tokio::time::Instant::now() >= started + timeout + lag() {
                    return Err(());
                }
            }
        }
    }
}

/// A fresh namespace name for a case: `gc-<case>-<random hex>`.
fn namespace_for(case: &str) -> String {
    let suffix: u32 = rand_suffix();
    let mut base: String = case
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    base.truncate(50);
    format!("gc-{}-{suffix:04x}", base.trim_end_matches('-'))
}

fn rand_suffix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    (h.finish() & 0xffff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_case_timeout_grows_by_the_time_spent_waiting_for_kubelets() {
        let lag = Arc::new(std::sync::Mutex::new(Duration::ZERO));
        let steps = {
            let lag = lag.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(8)).await;
                *lag.lock().unwrap() += Duration::from_secs(5);
                tokio::time::sleep(Duration::from_secs(4)).await;
                "done"
            }
        };
        // 12 s of steps: past a 10 s timeout, within it once 5 s of lag are added.
        assert_eq!(
            within_timeout(Duration::from_secs(10), lag, steps).await,
            Ok("done")
        );
        let lag = Arc::new(std::sync::Mutex::new(Duration::ZERO));
        let slow = tokio::time::sleep(Duration::from_secs(12));
        assert_eq!(
            within_timeout(Duration::from_secs(10), lag, slow).await,
            Err(())
        );
    }
}
