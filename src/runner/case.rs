//! Running one case: a fresh namespace, watches and the invariant monitor, the
//! implementation (one instance per case when it can be namespace-scoped), then the steps in
//! order. A failed case is data ([`Outcome::Fail`]); [`Outcome::Error`] means the harness
//! itself could not judge it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::Mutex as AsyncMutex;

use super::implementation::{ImplementationSpec, Instance};
use super::observe::{Observer, api_resource, current_uids};
use super::pods::PodDriver;
use crate::catalog::{
    Applicability, Case, Catalog, ControllerAction, ControllerStep, Delete, DeletionTarget,
    Expectation, PodAction, PodSelector, PodStep, Reject, Remember, Request, StepKind, Subresource,
    Target, Trigger, UidSubject, Update, merge_patch,
};
use crate::matcher::{self, Snapshot};
use crate::report::{CaseResult, Failure, Outcome, RunEvent};
use crate::vocab::{Kind, Vocabulary};

/// Label on every case namespace, with the case name as value.
pub const CASE_LABEL: &str = "grove-conformance.io/case";
/// Default for an `expect` without `within` or `for`.
pub const DEFAULT_WITHIN: Duration = Duration::from_secs(30);
/// Default upper bound of a whole case.
pub const DEFAULT_CASE_TIMEOUT: Duration = Duration::from_secs(180);

/// What every case of a run shares.
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
    /// The vocabulary of the selected revision.
    pub vocab: Vocabulary,
    /// The catalog (fixtures).
    pub catalog: Arc<Catalog>,
    /// Keep namespaces after the case.
    pub keep_namespaces: bool,
    /// Where implementation logs go.
    pub log_dir: PathBuf,
    /// Progress events.
    pub events: tokio::sync::mpsc::UnboundedSender<RunEvent>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("implementation", &self.implementation)
            .finish_non_exhaustive()
    }
}

/// Cases creating at least this many pods run alone: on a small machine they would starve
/// the cases beside them (and be starved), turning timing into flakiness.
pub const LARGE_CASE_PODS: u64 = 128;

/// How many pods the PodCliqueSet of a fixture manifest asks for.
pub fn fixture_pods(manifest: &Value) -> u64 {
    let int = |v: Option<&Value>, default: u64| v.and_then(Value::as_u64).unwrap_or(default);
    let template = manifest.pointer("/spec/template");
    let pcs_replicas = int(manifest.pointer("/spec/replicas"), 1);
    let groups: Vec<&Value> = template
        .and_then(|t| t.get("podCliqueScalingGroups"))
        .and_then(Value::as_array)
        .map(|g| g.iter().collect())
        .unwrap_or_default();
    let per_replica: u64 = template
        .and_then(|t| t.get("cliques"))
        .and_then(Value::as_array)
        .map(|cliques| {
            cliques
                .iter()
                .map(|c| {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
                    let pods = int(c.pointer("/spec/replicas"), 1);
                    let group_replicas = groups
                        .iter()
                        .find(|g| {
                            g.get("cliqueNames")
                                .and_then(Value::as_array)
                                .is_some_and(|n| n.iter().any(|n| n.as_str() == Some(name)))
                        })
                        .map(|g| int(g.get("replicas"), 1))
                        .unwrap_or(1);
                    pods * group_replicas
                })
                .sum()
        })
        .unwrap_or(0);
    pcs_replicas * per_replica
}

/// Whether a case creates [`LARGE_CASE_PODS`] pods or more: a fixture it declares, or one it
/// applies with a patch (which is how the 256-pod cases scale).
fn is_large(case: &Case, catalog: &Catalog) -> bool {
    let large = |manifest: &Value| fixture_pods(manifest) >= LARGE_CASE_PODS;
    case.fixtures
        .iter()
        .any(|f| catalog.fixture(f).is_some_and(|fx| large(&fx.manifest)))
        || case.steps.iter().any(|s| match &s.kind {
            StepKind::Apply(a) => catalog.fixture(&a.fixture).is_some_and(|fx| {
                let mut manifest = fx.manifest.clone();
                if let Some(patch) = &a.patch {
                    merge_patch(&mut manifest, patch);
                }
                large(&manifest)
            }),
            _ => false,
        })
}

/// Whether a case needs the cluster to itself: it loses a node, it pauses or crashes an
/// implementation that serves every case, or it is large ([`LARGE_CASE_PODS`]).
pub fn needs_exclusive(
    case: &Case,
    catalog: &Catalog,
    implementation: &ImplementationSpec,
) -> bool {
    is_large(case, catalog)
        || case.steps.iter().any(|s| match &s.kind {
            StepKind::Pods(p) => matches!(p.action, PodAction::LoseNode(_)),
            StepKind::Controller(_) => !implementation.per_case(),
            _ => false,
        })
}

/// Why a case cannot run here, if it cannot.
pub fn skip_reason(case: &Case, ctx: &RunContext) -> Option<String> {
    let fail_closed = ctx.implementation.fail_closed();
    let mut paused = false;
    for step in &case.steps {
        if paused
            && let Some(resource) = written_resource(&step.kind)
            && fail_closed.iter().any(|r| r == resource)
        {
            return Some(format!(
                "the case writes {resource} while the implementation is paused, and the implementation's admission webhooks reject every such write then (failurePolicy: Fail)"
            ));
        }
        if let StepKind::Controller(c) = &step.kind
            && c.when.is_none()
        {
            paused = c.action == ControllerAction::Pause;
        }
        match &step.kind {
            StepKind::Controller(_) if !ctx.implementation.controllable() => {
                return Some(
                    "the case pauses, resumes or crashes the implementation, which an external implementation does not allow"
                        .into(),
                );
            }
            StepKind::Pods(p) => {
                if let Some(reason) = ctx.pods.unsupported(p.action, p.without_terminal_phase) {
                    return Some(reason);
                }
            }
            _ => {}
        }
    }
    None
}

/// The resource (plural, main resource only) a step writes through the API, if any.
fn written_resource(step: &StepKind) -> Option<&'static str> {
    let of_target = |target: &Target| match target {
        Target::Object(o) => o.kind.plural(),
        Target::Fixture(_) => Kind::PodCliqueSet.plural(),
    };
    let of_update = |u: &crate::catalog::Update| {
        (u.subresource == Subresource::Main).then(|| of_target(&u.target))
    };
    match step {
        StepKind::Apply(_) => Some(Kind::PodCliqueSet.plural()),
        StepKind::Update(u) => of_update(u),
        StepKind::Delete(d) => Some(of_target(&d.target)),
        StepKind::Reject(r) => match &r.request {
            Request::Apply(_) => Some(Kind::PodCliqueSet.plural()),
            Request::Update(u) => of_update(u),
        },
        _ => None,
    }
}

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

struct CaseRun<'a> {
    run: &'a RunContext,
    case: &'a Case,
    namespace: String,
    observer: Observer,
    instance: Option<Arc<AsyncMutex<Instance>>>,
    remembered: BTreeMap<String, (UidSubject, String)>,
    triggers: Vec<tokio::task::JoinHandle<Result<(), String>>>,
    lost_nodes: Vec<String>,
}

enum StepError {
    Fail(Failure),
    Skip(String),
    Error(String),
}

fn fail(message: impl Into<String>) -> StepError {
    StepError::Fail(Failure {
        message: message.into(),
        diff: None,
        timeline: None,
    })
}

/// Runs one case end to end and returns its result.
pub async fn run_case(run: &RunContext, case: &Case) -> CaseResult {
    let started = Instant::now();
    let _ = run.events.send(RunEvent::CaseStarted {
        case: case.name.clone(),
    });
    let applicability = run.catalog.applicability(case, run.vocab.revision());
    let outcome = match (applicability, skip_reason(case, run)) {
        (Applicability::NotApplicable(reason), _) => Outcome::NotApplicable { reason },
        (_, Some(reason)) => Outcome::Skip { reason },
        (_, None) => {
            let timeout = case
                .timeout
                .map(|d| d.as_std())
                .unwrap_or(DEFAULT_CASE_TIMEOUT);
            run_steps(run, case, timeout).await
        }
    };
    let result = CaseResult {
        case: case.name.clone(),
        area: case.area.clone(),
        clauses: case.clauses.clone(),
        profile: case.profile,
        outcome,
        duration: started.elapsed(),
    };
    let _ = run.events.send(RunEvent::CaseFinished(result.clone()));
    result
}

async fn run_steps(run: &RunContext, case: &Case, timeout: Duration) -> Outcome {
    let namespace = namespace_for(&case.name);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(run.client.clone());
    let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(json!({
        "metadata": {"name": namespace, "labels": {CASE_LABEL: case.name}}
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
    let log = run.log_dir.join(format!("{}.log", case.name));
    let instance = if run.implementation.per_case() {
        let started =
            match Instance::start(&run.implementation, &run.kubeconfig, Some(&namespace), &log)
                .await
            {
                Ok(i) => i,
                Err(e) => {
                    return Outcome::Error {
                        message: format!("failed to start the implementation: {e}"),
                    };
                }
            };
        if let Err(message) = started.ready().await {
            return Outcome::Error { message };
        }
        Some(Arc::new(AsyncMutex::new(started)))
    } else {
        run.shared_instance.clone()
    };
    let mut ctx = CaseRun {
        run,
        case,
        namespace: namespace.clone(),
        observer,
        instance,
        remembered: BTreeMap::new(),
        triggers: Vec::new(),
        lost_nodes: Vec::new(),
    };
    let result = tokio::time::timeout(timeout, execute(&mut ctx)).await;
    let mut outcome = match result {
        Ok(Ok(())) => Outcome::Pass,
        Ok(Err(StepError::Fail(f))) => Outcome::Fail(f),
        Ok(Err(StepError::Skip(reason))) => Outcome::Skip { reason },
        Ok(Err(StepError::Error(message))) => Outcome::Error { message },
        Err(_) => Outcome::Fail(Failure {
            message: format!("the case did not finish within its timeout of {timeout:?}"),
            diff: None,
            timeline: None,
        }),
    };
    // Whatever the steps said, the monitor has the last word on safety.
    let timeline = ctx.observer.settle().await;
    let violations = ctx.observer.violations();
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
        let previous = match outcome {
            Outcome::Fail(f) => format!("\n(also: {})", f.message),
            _ => String::new(),
        };
        outcome = Outcome::Fail(Failure {
            message: format!("invariant violated: {message}{previous}"),
            diff: None,
            timeline: Some(slices),
        });
    }
    if let Outcome::Fail(f) = &mut outcome
        && f.timeline.is_none()
    {
        f.timeline = Some(timeline);
    }
    for trigger in ctx.triggers.drain(..) {
        trigger.abort();
    }
    for node in ctx.lost_nodes.drain(..) {
        if let Err(e) = run.pods.recover_node(&node).await {
            tracing::warn!(node, error = %e, "a lost node did not recover");
        }
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
    if matches!(outcome, Outcome::Fail(_) | Outcome::Error { .. }) {
        if let Outcome::Fail(f) = &mut outcome {
            f.message.push_str(&format!(
                " [namespace {namespace}, implementation log {}]",
                log.display()
            ));
        }
    } else if log.exists() {
        let _ = std::fs::remove_file(&log);
    }
    drop(ctx);
    if !run.keep_namespaces {
        let _ = namespaces
            .delete(&namespace, &DeleteParams::background())
            .await;
        // A large case runs alone; so does its teardown: on real kubelets, hundreds of pods
        // ending their grace periods would otherwise starve the cases that start next.
        if is_large(case, &run.catalog) {
            let gone = kube::runtime::wait::await_condition(
                namespaces.clone(),
                &namespace,
                kube::runtime::conditions::is_deleted(""),
            );
            if tokio::time::timeout(DEFAULT_CASE_TIMEOUT, gone)
                .await
                .is_err()
            {
                tracing::warn!(namespace, "a large case's namespace was not gone in time");
            }
        }
    }
    outcome
}

async fn execute(ctx: &mut CaseRun<'_>) -> Result<(), StepError> {
    for (index, step) in ctx.case.steps.iter().enumerate() {
        let _ = ctx.run.events.send(RunEvent::StepStarted {
            case: ctx.case.name.clone(),
            index,
            description: describe(&step.kind),
        });
        let at = format!(
            "step {} ({}, line {})",
            index + 1,
            step.kind.keyword(),
            step.pos.line
        );
        let result = match &step.kind {
            StepKind::Apply(apply) => ctx
                .apply(&apply.fixture, apply.patch.as_ref())
                .await
                .map(|_| ()),
            StepKind::Update(update) => ctx.update(update).await.map(|_| ()),
            StepKind::Delete(delete) => ctx.delete(delete).await,
            StepKind::Reject(reject) => ctx.reject(reject).await,
            StepKind::Pods(pods) => ctx.pods(pods).await,
            StepKind::Controller(c) => ctx.controller(c).await,
            StepKind::Remember(r) => ctx.remember(r),
            StepKind::Expect(e) => ctx.expect(e).await,
        };
        result.map_err(|e| match e {
            StepError::Fail(mut f) => {
                f.message = format!("{at}: {}", f.message);
                StepError::Fail(f)
            }
            StepError::Error(m) => StepError::Error(format!("{at}: {m}")),
            other => other,
        })?;
        for trigger in &mut ctx.triggers {
            if trigger.is_finished() {
                let done = std::mem::replace(trigger, tokio::spawn(async { Ok(()) }));
                if let Ok(Err(e)) = done.await {
                    return Err(StepError::Error(e));
                }
            }
        }
        if ctx.observer.violation_confirmed().await {
            // Reported with its evidence once the case ends.
            return Ok(());
        }
    }
    Ok(())
}

fn describe(kind: &StepKind) -> String {
    match kind {
        StepKind::Apply(a) => format!("apply {}", a.fixture),
        StepKind::Update(u) => format!("update {}", target_name(&u.target)),
        StepKind::Delete(d) => format!("{} {}", kind.keyword(), target_name(&d.target)),
        StepKind::Reject(_) => "reject".into(),
        StepKind::Pods(p) if p.without_terminal_phase => {
            format!("{} {} (no terminal phase)", p.action.keyword(), p.selector)
        }
        StepKind::Pods(p) => format!("{} {}", p.action.keyword(), p.selector),
        StepKind::Controller(c) => format!("controller {:?}", c.action).to_lowercase(),
        StepKind::Remember(r) => format!("remember {}", r.label),
        StepKind::Expect(_) => "expect".into(),
    }
}

fn target_name(target: &Target) -> String {
    match target {
        Target::Object(o) => o.to_string(),
        Target::Fixture(f) => format!("fixture {f}"),
    }
}

fn api_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

impl CaseRun<'_> {
    fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.run.client.clone(),
            &self.namespace,
            &api_resource(kind),
        )
    }

    fn vocab(&self) -> &Vocabulary {
        &self.run.vocab
    }

    fn resolve(&self, target: &Target) -> Result<(Kind, String), StepError> {
        match target {
            Target::Object(o) => Ok((o.kind, o.name.clone())),
            Target::Fixture(f) => self
                .run
                .catalog
                .fixture(f)
                .map(|fx| (Kind::PodCliqueSet, fx.object_name.clone()))
                .ok_or_else(|| StepError::Error(format!("unknown fixture {f}"))),
        }
    }

    fn manifest(&self, fixture: &str, patch: Option<&Value>) -> Result<Value, StepError> {
        let fx = self
            .run
            .catalog
            .fixture(fixture)
            .ok_or_else(|| StepError::Error(format!("unknown fixture {fixture}")))?;
        let mut manifest = fx.manifest.clone();
        if let Some(patch) = patch {
            merge_patch(&mut manifest, patch);
        }
        let mut manifest = self
            .vocab()
            .translate_manifest(Kind::PodCliqueSet, &manifest)
            .map_err(|e| StepError::Skip(e.to_string()))?;
        manifest["metadata"]["namespace"] = json!(self.namespace);
        Ok(manifest)
    }

    async fn apply(&self, fixture: &str, patch: Option<&Value>) -> Result<(), StepError> {
        let manifest = self.manifest(fixture, patch)?;
        let object: DynamicObject = serde_json::from_value(manifest)
            .map_err(|e| StepError::Error(format!("fixture {fixture} is not an object: {e}")))?;
        let created = self
            .api(Kind::PodCliqueSet)
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| {
                fail(format!(
                    "failed to create fixture {fixture}: {}",
                    api_error_text(&e)
                ))
            })?;
        self.observer
            .harness_wrote(&serde_json::to_value(&created).unwrap_or_default());
        Ok(())
    }

    async fn updated_object(&self, update: &Update) -> Result<(Kind, String, Value), StepError> {
        let (kind, name) = self.resolve(&update.target)?;
        let live = self.api(kind).get(&name).await.map_err(|e| {
            fail(format!(
                "failed to read {kind} {name}: {}",
                api_error_text(&e)
            ))
        })?;
        let mut object = serde_json::to_value(&live).unwrap_or_default();
        if let Some(patch) = &update.patch {
            let patch = if kind == Kind::PodCliqueSet && update.subresource == Subresource::Main {
                self.vocab()
                    .translate_manifest(kind, patch)
                    .map_err(|e| StepError::Skip(e.to_string()))?
            } else {
                patch.clone()
            };
            merge_patch(&mut object, &patch);
        }
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        for write in &update.conditions {
            let reason = write.reason.and_then(|r| self.vocab().name(r));
            if write.status == crate::catalog::ConditionStatus::True {
                self.vocab()
                    .set_terminal(kind, &mut object, write.condition, reason, &now)
                    .map_err(|e| StepError::Skip(e.to_string()))?;
            } else {
                let type_ = self
                    .vocab()
                    .require(write.condition)
                    .map_err(|e| StepError::Skip(e.to_string()))?;
                Vocabulary::set_condition(&mut object, type_, write.status.as_str(), reason, &now);
            }
        }
        Ok((kind, name, object))
    }

    /// Sends an update, reading the live object afresh and retrying when the implementation
    /// wrote it in between (409 Conflict): the harness's change is what is being tested, not
    /// its timing.
    async fn send_update(&self, update: &Update) -> Result<Value, kube::Error> {
        use backon::{ExponentialBuilder, Retryable};
        (|| self.send_update_once(update))
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(5))
                    .with_max_delay(Duration::from_millis(200))
                    .with_max_times(9),
            )
            .when(|e| matches!(e, kube::Error::Api(status) if status.code == 409))
            .await
    }

    async fn send_update_once(&self, update: &Update) -> Result<Value, kube::Error> {
        let (kind, name, object) = match self.updated_object(update).await {
            Ok(x) => x,
            Err(_) => {
                return Err(kube::Error::Service(
                    format!(
                        "failed to prepare the update of {}",
                        target_name(&update.target)
                    )
                    .into(),
                ));
            }
        };
        let api = self.api(kind);
        let written = match update.subresource {
            Subresource::Main => {
                let object: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                serde_json::to_value(api.replace(&name, &PostParams::default(), &object).await?)
                    .unwrap_or_default()
            }
            Subresource::Status => {
                let object: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                serde_json::to_value(
                    api.replace_status(&name, &PostParams::default(), &object)
                        .await?,
                )
                .unwrap_or_default()
            }
            Subresource::Scale => {
                let patch = update.patch.clone().unwrap_or_else(|| json!({}));
                let scale = api
                    .patch_scale(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                serde_json::to_value(scale).unwrap_or_default()
            }
        };
        Ok(written)
    }

    async fn update(&self, update: &Update) -> Result<(), StepError> {
        // Surface preparation problems (missing object, unsupported revision) as such.
        self.updated_object(update).await?;
        let written = self.send_update(update).await.map_err(|e| {
            fail(format!(
                "failed to update {}: {}",
                target_name(&update.target),
                api_error_text(&e)
            ))
        })?;
        self.observer.harness_wrote(&written);
        Ok(())
    }

    async fn delete(&self, delete: &Delete) -> Result<(), StepError> {
        let (kind, name) = self.resolve(&delete.target)?;
        let api = self.api(kind);
        if let Ok(live) = api.get(&name).await
            && let Some(uid) = live.metadata.uid.as_deref()
        {
            self.observer.harness_deleted(uid);
        }
        let params = DeleteParams {
            grace_period_seconds: delete.force.then_some(0),
            ..DeleteParams::background()
        };
        api.delete(&name, &params).await.map_err(|e| {
            fail(format!(
                "failed to delete {kind} {name}: {}",
                api_error_text(&e)
            ))
        })?;
        Ok(())
    }

    async fn reject(&self, reject: &Reject) -> Result<(), StepError> {
        let (result, created_name) = match &reject.request {
            Request::Apply(apply) => {
                let manifest = self.manifest(&apply.fixture, apply.patch.as_ref())?;
                let name = manifest
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let object: DynamicObject = serde_json::from_value(manifest)
                    .map_err(|e| StepError::Error(format!("fixture is not an object: {e}")))?;
                (
                    self.api(Kind::PodCliqueSet)
                        .create(&PostParams::default(), &object)
                        .await
                        .map(|o| serde_json::to_value(o).unwrap_or_default()),
                    Some(name),
                )
            }
            Request::Update(update) => {
                self.updated_object(update).await?;
                (self.send_update(update).await, None)
            }
        };
        match result {
            Ok(_) => Err(fail(format!(
                "the request was accepted; it must be rejected naming `{}`",
                reject.field
            ))),
            Err(kube::Error::Api(status)) => {
                if !(400..500).contains(&status.code) {
                    return Err(fail(format!(
                        "the request failed with {} instead of a 4xx rejection: {}",
                        status.code, status.message
                    )));
                }
                if let Some(code) = reject.code
                    && status.code != code
                {
                    return Err(fail(format!(
                        "rejected with code {} instead of {code}: {}",
                        status.code, status.message
                    )));
                }
                let mut text = status.message.clone();
                if let Some(details) = &status.details {
                    for cause in &details.causes {
                        text.push_str(&format!(" {} {}", cause.field, cause.message));
                    }
                }
                if !matcher::message_names_field(&text, &reject.field, self.vocab()) {
                    return Err(fail(format!(
                        "the rejection does not name `{}`: {}",
                        reject.field, status.message
                    )));
                }
                if let Some(name) = created_name
                    && self
                        .api(Kind::PodCliqueSet)
                        .get_opt(&name)
                        .await
                        .ok()
                        .flatten()
                        .is_some()
                {
                    return Err(fail("the request was rejected but the object exists"));
                }
                Ok(())
            }
            Err(other) => Err(StepError::Error(format!("the request failed: {other}"))),
        }
    }

    /// The pods a selector names now; waits (watch-driven) for a single addressed pod to
    /// exist and be Running when `running` is set.
    async fn selected_pods(
        &self,
        selector: &PodSelector,
        running: bool,
    ) -> Result<Vec<String>, StepError> {
        let mut changes = self.observer.subscribe();
        let deadline = tokio::time::Instant::now() + DEFAULT_WITHIN;
        loop {
            let (names, ready) = self.observer.with_snapshot(|s| {
                let pods: Vec<&Value> = match selector {
                    PodSelector::Pod { clique, index } => {
                        matcher::current_pod(&s.pods, clique, *index, self.vocab())
                            .into_iter()
                            .collect()
                    }
                    other => matcher::select_pods(&s.pods, other, self.vocab())
                        .into_iter()
                        .filter(|p| matcher::pod_is_active(p))
                        .collect(),
                };
                let ready = !pods.is_empty()
                    && (!running
                        || pods.iter().all(|p| {
                            p.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
                        }));
                let names: Vec<String> = pods
                    .iter()
                    .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect();
                (names, ready)
            });
            if ready {
                return Ok(names);
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return Err(fail(format!(
                    "{selector} never {} within {DEFAULT_WITHIN:?}",
                    if running { "was Running" } else { "existed" }
                )));
            }
        }
    }

    async fn pods(&mut self, step: &PodStep) -> Result<(), StepError> {
        let driver = self.run.pods.clone();
        // A node is lost whatever its pods' phases (a Succeeded pod goes with it too).
        let running = matches!(
            step.action,
            PodAction::Exit(_) | PodAction::Unready | PodAction::Ready
        );
        let names = self.selected_pods(&step.selector, running).await?;
        let ns = self.namespace.clone();
        let failed = |e: String| {
            fail(format!(
                "failed to {} {}: {e}",
                step.action.keyword(),
                step.selector
            ))
        };
        if let PodAction::LoseNode(how) = step.action {
            let mut nodes = Vec::new();
            for name in &names {
                let node = driver.node_of(&ns, name).await.map_err(failed)?;
                if !nodes.contains(&node) {
                    nodes.push(node);
                }
            }
            if step.alone {
                let others: Vec<String> = self.observer.with_snapshot(|s| {
                    s.pods
                        .iter()
                        .filter(|p| {
                            p.pointer("/spec/nodeName")
                                .and_then(Value::as_str)
                                .is_some_and(|n| nodes.iter().any(|m| m == n))
                        })
                        .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
                        .filter(|n| !names.iter().any(|m| m == n))
                        .map(str::to_string)
                        .collect()
                });
                if !others.is_empty() {
                    return Err(StepError::Skip(format!(
                        "the case needs {} alone on {} to lose it, but this target placed other pods of the case there too ({}), which the node would take with it",
                        step.selector,
                        nodes.join(", "),
                        others.join(", ")
                    )));
                }
            }
            for node in nodes {
                // Known before the node goes, so that no deletion it causes is ever taken
                // for the implementation's.
                for uid in driver.pods_on(&node).await.map_err(failed)? {
                    self.observer.harness_deleted(&uid);
                }
                self.lost_nodes.push(node.clone());
                for uid in driver.lose_node(&node, how).await.map_err(failed)? {
                    self.observer.harness_deleted(&uid);
                }
            }
            return Ok(());
        }
        for name in &names {
            if !matches!(
                step.action,
                PodAction::Exit(_) | PodAction::Ready | PodAction::Unready
            ) {
                let uid = self.observer.with_snapshot(|s| {
                    s.pods
                        .iter()
                        .find(|p| p.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
                        .map(uid)
                        .unwrap_or_default()
                });
                self.observer.harness_deleted(&uid);
            }
            driver
                .act(&ns, name, step.action, step.without_terminal_phase)
                .await
                .map_err(failed)?;
        }
        Ok(())
    }

    async fn controller(&mut self, step: &ControllerStep) -> Result<(), StepError> {
        let instance = self
            .instance
            .clone()
            .ok_or_else(|| StepError::Skip("the implementation cannot be controlled".into()))?;
        let action = step.action;
        let Some(trigger) = step.when.clone() else {
            return act(&instance, action).await.map_err(StepError::Error);
        };
        let mut changes = self.observer.subscribe();
        let vocab = *self.vocab();
        let armed = self.observer.with_snapshot(|s| arm(&trigger, s, &vocab));
        let snapshots = self.observer.snapshot_handle();
        self.triggers.push(tokio::spawn(async move {
            loop {
                let fired = snapshots.with(|s| fires(&trigger, &armed, s, &vocab));
                if fired {
                    return act(&instance, action).await;
                }
                if changes.changed().await.is_err() {
                    return Ok(());
                }
            }
        }));
        Ok(())
    }

    fn remember(&mut self, step: &Remember) -> Result<(), StepError> {
        let uid = self
            .observer
            .with_snapshot(|s| {
                matcher::current_uid(&step.subject, s, self.vocab()).map(str::to_string)
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

    fn evaluate(&self, exp: &Expectation) -> matcher::Evaluation {
        let remembered: matcher::Remembered = self
            .remembered
            .iter()
            .map(|(k, (_, uid))| (k.clone(), uid.clone()))
            .collect();
        self.observer.with_snapshot(|s| {
            let current = current_uids(&self.remembered, s, self.vocab());
            matcher::evaluate(exp, s, &remembered, &current, self.vocab())
        })
    }

    async fn expect(&self, exp: &Expectation) -> Result<(), StepError> {
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
            })
        };
        if let Some(within) = within {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                let eval = self.evaluate(exp);
                if eval.ok {
                    break;
                }
                if self.observer.violation_confirmed().await {
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

async fn act(instance: &Arc<AsyncMutex<Instance>>, action: ControllerAction) -> Result<(), String> {
    let mut instance = instance.lock().await;
    match action {
        ControllerAction::Pause => instance
            .pause()
            .await
            .map_err(|e| format!("failed to pause the implementation: {e}"))?,
        ControllerAction::Resume => instance
            .resume()
            .await
            .map_err(|e| format!("failed to resume the implementation: {e}"))?,
        ControllerAction::Crash => {
            instance
                .crash_and_restart()
                .await
                .map_err(|e| format!("failed to restart the implementation: {e}"))?;
            // Its webhooks answer again before the case goes on.
            instance.ready().await?;
        }
    }
    Ok(())
}

/// What a trigger compares against: the watched value when the step ran, or the UIDs that
/// existed then.
#[derive(Debug, Clone)]
enum Armed {
    Value(Value),
    Uids(Vec<String>),
    Nothing,
}

fn value_at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(object, |v, key| v.get(key))
}

fn trigger_objects<'a>(
    target: &DeletionTarget,
    s: &'a Snapshot,
    vocab: &Vocabulary,
) -> Vec<&'a Value> {
    match target {
        DeletionTarget::Pod(selector) => matcher::select_pods(&s.pods, selector, vocab),
        DeletionTarget::Object(o) => s
            .objects
            .get(&(o.kind, o.name.clone()))
            .into_iter()
            .collect(),
        DeletionTarget::AnyOf(Kind::Pod) => s.pods.iter().collect(),
        DeletionTarget::AnyOf(kind) => s
            .objects
            .iter()
            .filter(|((k, _), _)| k == kind)
            .map(|(_, v)| v)
            .collect(),
    }
}

fn uid(o: &Value) -> String {
    o.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn arm(trigger: &Trigger, s: &Snapshot, vocab: &Vocabulary) -> Armed {
    match trigger {
        Trigger::Changed { object, path } => {
            let path = vocab
                .translate_field_path(path)
                .unwrap_or_else(|| path.clone());
            Armed::Value(
                s.objects
                    .get(&(object.kind, object.name.clone()))
                    .and_then(|o| value_at(o, &path).cloned())
                    .unwrap_or(Value::Null),
            )
        }
        Trigger::Deleted(target) => Armed::Uids(
            trigger_objects(target, s, vocab)
                .into_iter()
                .filter(|o| {
                    o.pointer("/metadata/deletionTimestamp")
                        .is_none_or(Value::is_null)
                })
                .map(uid)
                .collect(),
        ),
        Trigger::Condition { .. } => Armed::Nothing,
    }
}

fn fires(trigger: &Trigger, armed: &Armed, s: &Snapshot, vocab: &Vocabulary) -> bool {
    match (trigger, armed) {
        (Trigger::Changed { object, path }, Armed::Value(before)) => {
            let path = vocab
                .translate_field_path(path)
                .unwrap_or_else(|| path.clone());
            let now = s
                .objects
                .get(&(object.kind, object.name.clone()))
                .and_then(|o| value_at(o, &path).cloned())
                .unwrap_or(Value::Null);
            &now != before
        }
        (Trigger::Deleted(target), Armed::Uids(before)) => {
            let now = trigger_objects(target, s, vocab);
            let live: Vec<String> = now
                .iter()
                .filter(|o| {
                    o.pointer("/metadata/deletionTimestamp")
                        .is_none_or(Value::is_null)
                })
                .map(|o| uid(o))
                .collect();
            before.iter().any(|u| !live.contains(u))
        }
        (
            Trigger::Condition {
                object,
                condition,
                status,
            },
            _,
        ) => vocab.name(*condition).is_some_and(|type_| {
            s.objects
                .get(&(object.kind, object.name.clone()))
                .and_then(|o| crate::vocab::condition_status(o, type_))
                == Some(status.as_str())
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_256_pod_cases_are_large_through_their_patch() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
                .expect("the catalog loads");
        for name in [
            "all-ranks-256-pods-restart",
            "leader-worker-256-pods-restart",
        ] {
            let case = catalog.case(name).expect("the case exists");
            assert!(is_large(case, &catalog), "{name} is not seen as large");
        }
        let small = catalog
            .case("all-ranks-completes")
            .expect("the case exists");
        assert!(!is_large(small, &catalog));
    }

    #[test]
    fn fixture_pods_multiply_clique_group_and_set_replicas() {
        let manifest = json!({"spec": {"replicas": 2, "template": {
            "cliques": [
                {"name": "leader", "spec": {"replicas": 1}},
                {"name": "worker", "spec": {"replicas": 16}},
                {"name": "router", "spec": {"replicas": 3}},
            ],
            "podCliqueScalingGroups": [{"name": "trainer", "cliqueNames": ["leader", "worker"], "replicas": 4}],
        }}});
        // Per set replica: (1 + 16) x 4 in the group, plus 3 standalone.
        assert_eq!(fixture_pods(&manifest), 2 * (17 * 4 + 3));
    }
}
