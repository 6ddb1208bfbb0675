//! The entry point: a client, one watch and cache per kind, the three controllers, and a clean
//! stop on SIGTERM/SIGINT.
//!
//! Each kind is watched once. The watch task updates the kind's cache and only then hands the
//! object on to the controllers that react to it, so a reconcile triggered by a change always
//! reads a cache that holds that change (kube's `.owns()` runs a separate watch whose trigger
//! can overtake the cache). The controllers are kube-runtime `Controller`s fed by those
//! streams: `for_stream` for their own kind, `owns_stream` for children with a controller
//! ownerReference (pods → PodClique, PodCliques → PCSG or PCS, PCSGs → PCS).

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::future::{BoxFuture, Shared};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use kube::api::Api;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tracing::Instrument;
use tracing::instrument::Instrumented;

use super::closed::Closed;
use super::context::{Context, Kind, Vanished};
use super::error::Error;
use super::{pcs, pcsg, podclique};
use crate::api::{PodClique, PodCliqueScalingGroup, PodCliqueSet};
use crate::names::{FIELD_MANAGER, LABEL_PODCLIQUE};

/// How the operator runs.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Kubeconfig to use; else in-cluster, `KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// Watch and act in this namespace only; else in every namespace.
    pub namespace: Option<String>,
}

/// Trailing-edge debounce of reconcile requests: a burst of pod transitions (a gang starting,
/// a gang finishing) becomes one reconcile instead of one per pod.
const DEBOUNCE: Duration = Duration::from_millis(5);

/// Runs the controllers until SIGTERM or SIGINT.
pub async fn run(options: RunOptions) -> Result<(), Error> {
    let stop = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            },
            Err(error) => {
                tracing::warn!(%error, "failed to listen for SIGTERM; stopping on SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        tracing::info!("shutdown requested");
    };
    run_until(options, stop).await
}

/// Runs the controllers until `stop` resolves, then lets running reconciles finish.
pub async fn run_until(
    options: RunOptions,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let requests = RequestCounter::default();
    let client = client(&options, requests.clone()).await?;
    let namespace = options.namespace.clone();
    tracing::info!(namespace = namespace.as_deref().unwrap_or("*"), "starting");

    // One watch per kind; each hands what it saw to the controllers that react to it.
    let (pod_tx, pods_rx) = unbounded();
    let (pclq_tx, [pclq_self, pclq_to_pcsg, pclq_to_pcs]) = fan_out::<PodClique, 3>();
    let (pcsg_tx, [pcsg_self, pcsg_to_pcs]) = fan_out::<PodCliqueScalingGroup, 2>();
    let (pcs_tx, [pcs_self]) = fan_out::<PodCliqueSet, 1>();
    let pods_config = watcher::Config::default().labels(LABEL_PODCLIQUE);
    let vanished = Arc::new(Vanished::default());
    let (pods, pods_ready, pods_watch) = watch(
        api(&client, &namespace),
        pods_config,
        trim_pod,
        gone({
            let vanished = vanished.clone();
            move |pod: &Pod| vanished.note(pod)
        }),
        vec![pod_tx],
    );
    let (podcliques, pclq_ready, pclq_watch) = watch(
        api(&client, &namespace),
        Default::default(),
        |_| {},
        gone({
            let vanished = vanished.clone();
            move |pclq: &PodClique| {
                vanished.forget(&ResourceExt::uid(pclq).unwrap_or_default(), None)
            }
        }),
        pclq_tx,
    );
    let (scaling_groups, pcsg_ready, pcsg_watch) = watch(
        api(&client, &namespace),
        Default::default(),
        |_| {},
        gone(|_| {}),
        pcsg_tx,
    );
    let (podcliquesets, pcs_ready, pcs_watch) = watch(
        api(&client, &namespace),
        Default::default(),
        |_| {},
        gone(|_| {}),
        pcs_tx,
    );
    let _watches = [pods_watch, pclq_watch, pcsg_watch, pcs_watch].map(Task::spawn);

    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER)),
        client,
        pods,
        podcliques: podcliques.clone(),
        scaling_groups: scaling_groups.clone(),
        podcliquesets: podcliquesets.clone(),
        ready: vec![pods_ready, pclq_ready, pcsg_ready, pcs_ready],
        written: Mutex::default(),
        created: Mutex::default(),
        vanished,
        reported: Mutex::default(),
        closed: Closed::default(),
    });
    let stop: Shared<BoxFuture<'static, ()>> = stop.boxed().shared();
    let config = Config::default().debounce(DEBOUNCE);

    let pclq_controller = Controller::for_stream(pclq_self.map(Ok), podcliques)
        .owns_stream(pods_rx.map(Ok))
        .with_config(config.clone())
        .graceful_shutdown_on(stop.clone())
        .run(traced(podclique::reconcile), error_policy, ctx.clone())
        .for_each(log_result);
    let pcsg_controller = Controller::for_stream(pcsg_self.map(Ok), scaling_groups)
        .owns_stream(pclq_to_pcsg.map(Ok))
        .with_config(config.clone())
        .graceful_shutdown_on(stop.clone())
        .run(traced(pcsg::reconcile), error_policy, ctx.clone())
        .for_each(log_result);
    let pcs_controller = Controller::for_stream(pcs_self.map(Ok), podcliquesets)
        .owns_stream(pclq_to_pcs.map(Ok))
        .owns_stream(pcsg_to_pcs.map(Ok))
        .with_config(config)
        .graceful_shutdown_on(stop)
        .run(traced(pcs::reconcile), error_policy, ctx)
        .for_each(log_result);
    futures::join!(pclq_controller, pcsg_controller, pcs_controller);

    tracing::info!(
        total = requests.total(),
        by_verb = %requests.summary(),
        "stopped; API requests made"
    );
    Ok(())
}

fn api<K: Kind>(client: &Client, namespace: &Option<String>) -> Api<K> {
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn client(options: &RunOptions, requests: RequestCounter) -> Result<Client, Error> {
    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| Error::Config(Box::new(e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Config(Box::new(e)))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| Error::Config(Box::new(e)))?,
    };
    let count = tower::util::MapRequestLayer::new(move |request: http::Request<_>| {
        requests.count(&request);
        request
    });
    Ok(ClientBuilder::try_from(config)
        .map_err(|e| Error::Client(Box::new(e)))?
        .with_layer(&count)
        .build())
}

/// A reconcile function run in a span naming the object (`kind`, `namespace`, `name`).
fn traced<K, F, Fut>(reconcile: F) -> impl FnMut(Arc<K>, Arc<Context>) -> Instrumented<Fut>
where
    K: Resource<DynamicType = ()>,
    F: Fn(Arc<K>, Arc<Context>) -> Fut,
{
    move |obj, ctx| {
        let span = tracing::debug_span!(
            "reconcile",
            kind = %K::kind(&()),
            namespace = ResourceExt::namespace(obj.as_ref()).unwrap_or_default(),
            name = %obj.name_any()
        );
        reconcile(obj, ctx).instrument(span)
    }
}

fn error_policy<K>(obj: Arc<K>, error: &Error, _: Arc<Context>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    if matches!(error, Error::ScopeClosed { .. }) {
        tracing::debug!(kind = %K::kind(&()), name = %obj.name_any(), %error, "scope closed, looking again");
        Action::requeue(Duration::from_secs(1))
    } else if error.is_conflict() || error.is_gone() {
        tracing::debug!(kind = %K::kind(&()), name = %obj.name_any(), %error, "stale read, looking again");
        Action::requeue(Duration::from_millis(50))
    } else {
        tracing::warn!(kind = %K::kind(&()), name = %obj.name_any(), error = %render(error), "reconcile failed");
        Action::requeue(Duration::from_secs(1))
    }
}

async fn log_result<K, E: std::error::Error>(result: Result<(ObjectRef<K>, Action), E>)
where
    K: Lookup,
    K::DynamicType: Default,
{
    match result {
        Ok((object, _)) => tracing::trace!(%object, "reconciled"),
        Err(error) => tracing::debug!(error = %render(&error), "controller"),
    }
}

fn render(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

// ---------------------------------------------------------------------------------------------
// Watches.

fn fan_out<K, const N: usize>() -> (Vec<UnboundedSender<K>>, [UnboundedReceiver<K>; N]) {
    let mut senders = Vec::with_capacity(N);
    let receivers = std::array::from_fn(|_| {
        let (tx, rx) = unbounded();
        senders.push(tx);
        rx
    });
    (senders, receivers)
}

/// What a watch does with an object that vanished, in the last states it observed, before its
/// cache forgets it.
type Gone<K> = Box<dyn Fn(&K) + Send + Sync>;

fn gone<K>(f: impl Fn(&K) + Send + Sync + 'static) -> Gone<K> {
    Box::new(f)
}

/// A cache of `K`, a flag raised once it holds a first complete listing, and the task that
/// keeps it: the task applies each watch event, `trim`med, to the cache, then sends every
/// touched object to `outputs`. After a (re)list it sends every object, and those that
/// vanished meanwhile, so nothing missed during a watch gap goes unreconciled. An object that
/// vanishes is handed to `on_gone` (as the deletion showed it and as last cached) before the
/// cache drops it.
fn watch<K: Kind>(
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
    on_gone: Gone<K>,
    outputs: Vec<UnboundedSender<K>>,
) -> (
    Store<K>,
    tokio::sync::watch::Receiver<bool>,
    BoxFuture<'static, ()>,
) {
    follow(
        watcher(api, config).default_backoff().boxed(),
        trim,
        on_gone,
        outputs,
    )
}

/// The cache, the flag and the task of [`watch`], fed by any stream of watch events.
fn follow<K: Kind>(
    mut events: BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    trim: fn(&mut K),
    on_gone: Gone<K>,
    outputs: Vec<UnboundedSender<K>>,
) -> (
    Store<K>,
    tokio::sync::watch::Receiver<bool>,
    BoxFuture<'static, ()>,
) {
    let (reader, mut writer) = reflector::store::<K>();
    // `Store::wait_until_ready` wakes only one of several concurrent waiters; this flag wakes all.
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
    let cache = reader.clone();
    let task = async move {
        let mut relisted: HashSet<ObjectRef<K>> = HashSet::new();
        while let Some(event) = events.next().await {
            let event = match event {
                // Managed fields are never read; dropping them keeps the caches small.
                Ok(event) => event.modify(|o| {
                    o.meta_mut().managed_fields = None;
                    trim(o);
                }),
                Err(error) => {
                    tracing::warn!(kind = %K::kind(&()), %error, "watch failed, retrying");
                    continue;
                }
            };
            let touched: Vec<Arc<K>> = match &event {
                watcher::Event::Apply(o) => vec![Arc::new(o.clone())],
                watcher::Event::Delete(o) => {
                    if let Some(last) = cache.get(&ObjectRef::from_obj(o)) {
                        on_gone(&last);
                    }
                    on_gone(o);
                    vec![Arc::new(o.clone())]
                }
                watcher::Event::InitDone => {
                    // Objects missing from the new listing vanished during the gap.
                    let listed = std::mem::take(&mut relisted);
                    let gone: Vec<Arc<K>> = cache
                        .state()
                        .into_iter()
                        .filter(|o| !listed.contains(&ObjectRef::from_obj(o.as_ref())))
                        .collect();
                    for o in &gone {
                        on_gone(o);
                    }
                    writer.apply_watcher_event(&event);
                    ready_tx.send_replace(true);
                    cache.state().into_iter().chain(gone).collect()
                }
                watcher::Event::Init => {
                    relisted.clear();
                    Vec::new()
                }
                watcher::Event::InitApply(o) => {
                    relisted.insert(ObjectRef::from_obj(o));
                    Vec::new()
                }
            };
            if !matches!(event, watcher::Event::InitDone) {
                writer.apply_watcher_event(&event);
            }
            for object in touched {
                for output in &outputs {
                    let _ = output.unbounded_send(object.as_ref().clone());
                }
            }
        }
    };
    (reader, ready_rx, task.boxed())
}

/// A cached pod keeps what the PodClique controller reads (labels, owner, deletion, node,
/// scheduling gates, phase, conditions); containers, volumes and container statuses go.
fn trim_pod(pod: &mut Pod) {
    pod.spec = pod.spec.take().map(|spec| PodSpec {
        node_name: spec.node_name,
        scheduling_gates: spec.scheduling_gates,
        ..PodSpec::default()
    });
    pod.status = pod.status.take().map(|status| PodStatus {
        phase: status.phase,
        conditions: status.conditions,
        ..PodStatus::default()
    });
}

/// A spawned task, aborted when dropped (so an in-process `run` that is dropped stops its
/// watches too).
struct Task(tokio::task::JoinHandle<()>);

impl Task {
    fn spawn(future: BoxFuture<'static, ()>) -> Task {
        Task(tokio::spawn(future))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Request accounting.

/// Counts the API requests of the operator's client, by verb.
#[derive(Clone, Debug, Default)]
struct RequestCounter {
    total: Arc<AtomicU64>,
    by_verb: Arc<Mutex<BTreeMap<&'static str, u64>>>,
}

impl RequestCounter {
    fn count<B>(&self, request: &http::Request<B>) {
        let query = request.uri().query().unwrap_or_default();
        let verb = match *request.method() {
            http::Method::GET if query.contains("watch=true") => "watch",
            http::Method::GET if !query.is_empty() => "list",
            http::Method::GET => "get",
            http::Method::POST => "create",
            http::Method::PATCH => "patch",
            http::Method::PUT => "update",
            http::Method::DELETE => "delete",
            _ => "other",
        };
        self.total.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut by_verb) = self.by_verb.lock() {
            *by_verb.entry(verb).or_default() += 1;
        }
    }

    fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    fn summary(&self) -> String {
        self.by_verb
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(verb, n)| format!("{verb}={n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use futures::SinkExt;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::controller::context::{GonePods, Vanished};
    use crate::semantics::{FailureCause, PodCliqueOutcome, evaluate_podclique};

    fn pod(name: &str, index: u32, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "labels": {"grove.io/podclique": "job-0-worker", "grove.io/podclique-pod-index": index.to_string()},
                "ownerReferences": [{"apiVersion": "grove.io/v1alpha1", "kind": "PodClique",
                    "name": "job-0-worker", "uid": "clique-1", "controller": true}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    /// The record of a vanished Succeeded pod is in place before anything downstream hears
    /// of the deletion, whether the watch delivers the deletion or a relist misses the pod.
    #[tokio::test]
    async fn a_succeeded_pod_that_vanishes_is_recorded_before_its_deletion_is_passed_on() {
        let (mut events, stream) = futures::channel::mpsc::unbounded();
        let vanished = Arc::new(Vanished::default());
        let (out, mut seen) = unbounded();
        let record = vanished.clone();
        let (cache, _ready, task) = follow(
            stream.boxed(),
            trim_pod,
            gone(move |p: &Pod| record.note(p)),
            vec![out],
        );
        let _task = Task::spawn(task);
        let send = |e| Ok::<_, watcher::Error>(e);
        events.send(send(watcher::Event::Init)).await.unwrap();
        for (name, index) in [("p0", 0), ("p1", 1), ("p2", 2)] {
            let e = watcher::Event::InitApply(pod(name, index, "Running"));
            events.send(send(e)).await.unwrap();
        }
        events.send(send(watcher::Event::InitDone)).await.unwrap();
        for _ in 0..3 {
            seen.next().await.unwrap();
        }

        // Succeeded, then deleted (the deletion event carries the last state).
        let e = watcher::Event::Apply(pod("p0", 0, "Succeeded"));
        events.send(send(e)).await.unwrap();
        seen.next().await.unwrap();
        let e = watcher::Event::Delete(pod("p0", 0, "Succeeded"));
        events.send(send(e)).await.unwrap();
        let deleted = seen.next().await.unwrap();
        assert_eq!(deleted.metadata.name.as_deref(), Some("p0"));
        assert_eq!(vanished.of("clique-1").succeeded, BTreeSet::from([0]));
        assert!(cache.get(&ObjectRef::new("p0").within("ns")).is_none());

        // A running pod that is deleted is no success, but it existed.
        let e = watcher::Event::Delete(pod("p1", 1, "Running"));
        events.send(send(e)).await.unwrap();
        seen.next().await.unwrap();
        assert_eq!(vanished.of("clique-1").succeeded, BTreeSet::from([0]));
        assert_eq!(vanished.of("clique-1").created, BTreeSet::from([0, 1]));

        // Seen Succeeded, then missing from a relist (the deletion fell into a watch gap).
        let e = watcher::Event::Apply(pod("p2", 2, "Succeeded"));
        events.send(send(e)).await.unwrap();
        seen.next().await.unwrap();
        events.send(send(watcher::Event::Init)).await.unwrap();
        events.send(send(watcher::Event::InitDone)).await.unwrap();
        let gone_in_gap = seen.next().await.unwrap();
        assert_eq!(gone_in_gap.metadata.name.as_deref(), Some("p2"));
        assert_eq!(vanished.of("clique-1").succeeded, BTreeSet::from([0, 2]));

        // Once the status records them, they are forgotten.
        let recorded = GonePods {
            created: BTreeSet::from([0, 1]),
            succeeded: BTreeSet::from([0]),
        };
        vanished.forget("clique-1", Some(&recorded));
        assert_eq!(vanished.of("clique-1").succeeded, BTreeSet::from([2]));
        assert_eq!(vanished.of("clique-1").created, BTreeSet::from([2]));
        vanished.forget("clique-1", None);
        assert_eq!(vanished.of("clique-1"), GonePods::default());
    }

    /// E3: a pod whose create this process never heard answered (the answer was lost), and
    /// which the watch then shows created and deleted before it Succeeded, is lost: its clique
    /// fails and no pod replaces it, although the status never recorded the index.
    #[tokio::test]
    async fn a_pod_created_without_an_answer_and_gone_before_it_succeeded_is_lost() {
        let (mut events, stream) = futures::channel::mpsc::unbounded();
        let vanished = Arc::new(Vanished::default());
        let (out, mut seen) = unbounded();
        let record = vanished.clone();
        let (cache, _ready, task) = follow(
            stream.boxed(),
            trim_pod,
            gone(move |p: &Pod| record.note(p)),
            vec![out],
        );
        let _task = Task::spawn(task);
        let send = |e| Ok::<_, watcher::Error>(e);
        events.send(send(watcher::Event::Init)).await.unwrap();
        events.send(send(watcher::Event::InitDone)).await.unwrap();

        // ADDED, then DELETED without a terminal phase, delivered back to back.
        let e = watcher::Event::Apply(pod("p0", 0, "Pending"));
        events.send(send(e)).await.unwrap();
        let e = watcher::Event::Delete(pod("p0", 0, "Running"));
        events.send(send(e)).await.unwrap();
        seen.next().await.unwrap();
        let deleted = seen.next().await.unwrap();
        assert_eq!(deleted.metadata.name.as_deref(), Some("p0"));
        assert!(cache.state().is_empty());

        // The clique of one pod: no index recorded as created (the create's answer was lost).
        let pclq: PodClique = serde_json::from_value(serde_json::json!({
            "apiVersion": "grove.io/v1alpha1", "kind": "PodClique",
            "metadata": {"name": "job-0-worker", "namespace": "ns", "uid": "clique-1"},
            "spec": {"roleName": "worker", "replicas": 1, "policy": {"completion": {}},
                "podSpec": {"containers": [{"name": "main", "image": "busybox"}]}},
            "status": {"createdPodIndices": [], "succeededPodIndices": []}
        }))
        .unwrap();
        let decision = evaluate_podclique(&podclique::view(&pclq, &[], &vanished.of("clique-1")));
        assert_eq!(
            decision.outcome,
            Some(PodCliqueOutcome::Failed(FailureCause::PodLost))
        );
        assert!(decision.create.is_empty(), "E3: no replacement");
    }
}
