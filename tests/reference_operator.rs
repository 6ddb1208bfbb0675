//! The reference operator on the embedded control plane: job outcomes end to end, crash safety,
//! and the reaction and scale measurements (printed, never asserted on time).
//!
//! Each test gets its own namespace and its own operator instance watching only that namespace:
//! in-process (`run_until` on the shared runtime) where nothing is done to the operator, as a
//! child process where it is killed or measured. Waits are watches, never sleeps.
//!
//! Reaction measurement: `cargo test --release --test reference_operator -- --nocapture measure`;
//! the 512-pod measurement is `examples/operator_scale.rs`.

mod common;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use grove_conformance::cluster::embedded::EmbeddedCluster;
use grove_reference_operator::api::{PodClique, PodCliqueScalingGroup, PodCliqueSet};
use grove_reference_operator::controller::{RunOptions, run_until};
use grove_reference_operator::names::{
    CONDITION_COMPLETED, CONDITION_FAILED, EVENT_GANG_RESTART_TRIGGERED, EVENT_JOB_COMPLETED,
    EVENT_JOB_FAILED, EVENT_RESTART_BUDGET_EXHAUSTED, LABEL_PART_OF, LABEL_POD_INDEX,
    LABEL_PODCLIQUE, LABEL_RESTART_ATTEMPT, REASON_COMPLETION_CRITERIA_MET, REASON_POD_LOST,
    REASON_RESTART_BUDGET_EXHAUSTED,
};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

/// How long any one wait may take.
const WAIT: Duration = Duration::from_secs(30);

// =============================================================================================
// Harness.

/// How a test runs the operator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A task on the shared runtime.
    InProcess,
    /// A child process (SIGKILL, RSS).
    Process,
    /// A task on the shared runtime, with only the permissions `reference-operator/deploy`
    /// grants its service account (by impersonation).
    AsDeployed,
}

/// One test's world: a namespace, a client, the cluster, and its operator.
struct World {
    client: Client,
    cluster: &'static EmbeddedCluster,
    ns: String,
    operator: Option<Operator>,
}

/// Runs `body` in a fresh namespace `ro-<name>` with an operator watching it.
fn with_operator<F, Fut>(name: &str, mode: Mode, limit: Duration, body: F)
where
    F: FnOnce(World) -> Fut,
    Fut: Future<Output = World>,
{
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let (env, cluster) = common::shared_cluster(grove_reference_operator::crds);
    let client = cluster.client();
    let ns = format!("ro-{name}");
    env.block_on(async move {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("namespace");
        let admin = cluster.control_plane.kubeconfig_path().to_path_buf();
        let kubeconfig = match mode {
            Mode::AsDeployed => deployed_kubeconfig(&client, &admin).await,
            Mode::InProcess | Mode::Process => admin,
        };
        let operator = Some(Operator::start(mode, kubeconfig, &ns));
        let world = World {
            client: client.clone(),
            cluster,
            ns: ns.clone(),
            operator,
        };
        let world = tokio::time::timeout(limit, body(world))
            .await
            .unwrap_or_else(|_| panic!("test {name} timed out after {limit:?}"));
        drop(world);
        // Frees the simulated nodes for the other tests; not awaited.
        let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    });
}

/// A running operator instance.
enum Operator {
    Task(tokio::task::JoinHandle<()>),
    Process(OperatorProcess),
}

impl Operator {
    fn start(mode: Mode, kubeconfig: PathBuf, ns: &str) -> Operator {
        match mode {
            Mode::InProcess | Mode::AsDeployed => {
                let options = RunOptions {
                    kubeconfig: Some(kubeconfig),
                    namespace: Some(ns.to_string()),
                };
                Operator::Task(tokio::spawn(async move {
                    run_until(options, futures::future::pending())
                        .await
                        .expect("the operator failed");
                }))
            }
            Mode::Process => Operator::Process(OperatorProcess::start(&kubeconfig, ns)),
        }
    }

    fn process(&mut self) -> &mut OperatorProcess {
        match self {
            Operator::Process(p) => p,
            Operator::Task(_) => panic!("the operator runs in-process"),
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Operator::Task(task) = self {
            task.abort();
        }
    }
}

/// Installs the service account, ClusterRole and binding of `reference-operator/deploy` and
/// returns a kubeconfig that acts as that service account.
async fn deployed_kubeconfig(client: &Client, admin: &Path) -> PathBuf {
    let deploy = common::root().join("reference-operator/deploy");
    let read = |file: &str| std::fs::read_to_string(deploy.join(file)).unwrap();
    let apply = PatchParams::apply("reference-operator-tests").force();
    let namespace: Namespace = serde_yaml::from_str(&read("namespace.yaml")).unwrap();
    let account: ServiceAccount = serde_yaml::from_str(&read("serviceaccount.yaml")).unwrap();
    let role: ClusterRole = serde_yaml::from_str(&read("clusterrole.yaml")).unwrap();
    let binding: ClusterRoleBinding =
        serde_yaml::from_str(&read("clusterrolebinding.yaml")).unwrap();
    let ns = account.namespace().unwrap();
    Api::<Namespace>::all(client.clone())
        .patch(&namespace.name_any(), &apply, &Patch::Apply(&namespace))
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .patch(&account.name_any(), &apply, &Patch::Apply(&account))
        .await
        .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .patch(&role.name_any(), &apply, &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(&binding.name_any(), &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
    let mut kubeconfig: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(admin).unwrap()).unwrap();
    let user = format!("system:serviceaccount:{ns}:{}", account.name_any());
    for entry in kubeconfig["users"].as_sequence_mut().unwrap() {
        entry["user"]["as"] = user.clone().into();
    }
    // Credentials' paths: private, and removed when the test binary exits.
    let path = grove_conformance::host::process::temp_dir("deployed")
        .unwrap()
        .join("kubeconfig");
    std::fs::write(&path, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path
}

/// The operator as a child process (the harness binary's `reference-operator` subcommand).
/// Output goes to a log file.
struct OperatorProcess {
    child: Child,
    log: PathBuf,
}

impl OperatorProcess {
    fn start(kubeconfig: &Path, ns: &str) -> OperatorProcess {
        let dir = std::env::temp_dir().join("grove-reference-operator-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join(format!("{ns}-{}.log", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut command = Command::new(common::harness_binary());
        command
            .arg("reference-operator")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--namespace")
            .arg(ns);
        let child = command
            .env(
                "RUST_LOG",
                std::env::var("OPERATOR_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("failed to start the operator");
        OperatorProcess { child, log }
    }

    /// SIGKILL, no chance to clean up.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OperatorProcess {
    /// Stops the operator and removes its log. The log is kept when `OPERATOR_LOG` asked for
    /// it, or when the test failed (then its end is shown).
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!(
                "last lines of the operator's log ({}):\n{tail}",
                self.log.display()
            );
        } else if std::env::var_os("OPERATOR_LOG").is_some() {
            eprintln!("the operator's log: {}", self.log.display());
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

// =============================================================================================
// Manifests.

/// A clique template; `aware` adds `policy.completion: {}`.
fn clique(name: &str, replicas: i32, aware: bool) -> Value {
    let mut spec = json!({
        "roleName": name,
        "replicas": replicas,
        "podSpec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox"}],
        },
    });
    if aware {
        spec["policy"] = json!({"completion": {}});
    }
    json!({"name": name, "spec": spec})
}

fn pcs(name: &str, cliques: Vec<Value>, groups: Vec<Value>, policy: Value) -> PodCliqueSet {
    let mut spec = json!({"replicas": 1, "template": {"cliques": cliques}});
    if !groups.is_empty() {
        spec["template"]["podCliqueScalingGroups"] = json!(groups);
    }
    if !policy.is_null() {
        spec["policy"] = policy;
    }
    serde_json::from_value(json!({
        "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn max_restarts(n: i32) -> Value {
    json!({"completion": {"failure": {"maxRestarts": n}}})
}

async fn create(w: &World, pcs: &PodCliqueSet) {
    Api::<PodCliqueSet>::namespaced(w.client.clone(), &w.ns)
        .create(&PostParams::default(), pcs)
        .await
        .expect("the PodCliqueSet was rejected");
}

// =============================================================================================
// Observation.

fn condition<'a>(conditions: Option<&'a Vec<Condition>>, type_: &str) -> Option<&'a Condition> {
    conditions?.iter().find(|c| c.type_ == type_)
}

fn conditions_of<K: Resource + serde::Serialize>(obj: &K) -> Vec<Condition> {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.pointer("/status/conditions").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// `type_` is True, with `reason` when given.
fn is_true<K: Resource + serde::Serialize>(obj: &K, type_: &str, reason: Option<&str>) -> bool {
    let conditions = conditions_of(obj);
    condition(Some(&conditions), type_)
        .is_some_and(|c| c.status == "True" && reason.is_none_or(|r| c.reason == r))
}

fn is_absent<K: Resource + serde::Serialize>(obj: &K, type_: &str) -> bool {
    condition(Some(&conditions_of(obj)), type_).is_none()
}

fn counts<K: Resource + serde::Serialize>(obj: &K) -> Vec<i64> {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.pointer("/status/replicaRestartCounts").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// Waits until `name` exists and satisfies `test`.
async fn wait_for<K>(
    w: &World,
    name: &str,
    what: &str,
    test: impl Fn(&K) -> bool + Send + 'static,
) -> K
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let api: Api<K> = Api::namespaced(w.client.clone(), &w.ns);
    let wait = await_condition(api, name, move |o: Option<&K>| o.is_some_and(&test));
    match tokio::time::timeout(WAIT, wait).await {
        Ok(Ok(Some(obj))) => obj,
        _ => panic!("timed out waiting for {what}"),
    }
}

/// Waits until the objects matching `selector` satisfy `test` as a set; returns them.
async fn wait_list<K>(w: &World, selector: &str, what: &str, test: impl Fn(&[K]) -> bool) -> Vec<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    wait_list_within(w, WAIT, selector, what, test).await
}

/// [`wait_list`] with its own time limit.
async fn wait_list_within<K>(
    w: &World,
    limit: Duration,
    selector: &str,
    what: &str,
    test: impl Fn(&[K]) -> bool,
) -> Vec<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = Api::namespaced(w.client.clone(), &w.ns);
    let config = if selector.is_empty() {
        watcher::Config::default()
    } else {
        watcher::Config::default().labels(selector)
    };
    let (reader, writer) = reflector::store::<K>();
    let mut events = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .boxed();
    let watch = async {
        let mut listed = false;
        while let Some(event) = events.next().await {
            listed |= matches!(event, Ok(watcher::Event::InitDone));
            if listed {
                let objects: Vec<K> = reader.state().iter().map(|o| (**o).clone()).collect();
                if test(&objects) {
                    return objects;
                }
            }
        }
        unreachable!("watches do not end")
    };
    match tokio::time::timeout(limit, watch).await {
        Ok(objects) => objects,
        Err(_) => {
            let seen: Vec<String> = reader.state().iter().map(|o| o.name_any()).collect();
            let some = &seen[..seen.len().min(5)];
            panic!(
                "timed out waiting for {what}; last saw {} objects: {some:?}…",
                seen.len()
            )
        }
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn running(pod: &Pod) -> bool {
    phase(pod) == "Running" && pod.metadata.deletion_timestamp.is_none()
}

fn active(pod: &Pod) -> bool {
    matches!(phase(pod), "Pending" | "Running") && pod.metadata.deletion_timestamp.is_none()
}

fn index(pod: &Pod) -> u32 {
    pod.labels()[LABEL_POD_INDEX].parse().unwrap()
}

fn owner_uid(pod: &Pod) -> String {
    pod.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
        .unwrap_or_default()
}

/// Creates the all-ranks PodCliqueSet `job` (one completion-aware clique `worker` of
/// `workers` pods, `maxRestarts: budget`); returns its pods once all of them run.
async fn start_all_ranks_job(w: &World, workers: i32, budget: i32) -> Vec<Pod> {
    let worker = clique("worker", workers, true);
    create(w, &pcs("job", vec![worker], vec![], max_restarts(budget))).await;
    running_pods(w, "job-0-worker", usize::try_from(workers).unwrap()).await
}

/// Waits until PodClique `clique` is the object of restart attempt `attempt` (R7).
async fn attempt_started(w: &World, clique: &str, attempt: &'static str) -> PodClique {
    wait_for(w, clique, "the new attempt", move |c: &PodClique| {
        c.labels().get(LABEL_RESTART_ATTEMPT).map(String::as_str) == Some(attempt)
    })
    .await
}

/// Waits until PodClique `clique` (its current object) has `n` running pods; returns them
/// ordered by index.
async fn running_pods(w: &World, clique: &str, n: usize) -> Vec<Pod> {
    let pclq: PodClique = wait_for(w, clique, clique, |_| true).await;
    let uid = pclq.uid().unwrap();
    let mut pods = wait_list(
        w,
        &format!("{LABEL_PODCLIQUE}={clique}"),
        &format!("{n} running pods of {clique}"),
        |pods: &[Pod]| {
            pods.iter()
                .filter(|p| owner_uid(p) == uid && running(p))
                .count()
                == n
        },
    )
    .await;
    pods.retain(|p| owner_uid(p) == uid && running(p));
    pods.sort_by_key(index);
    pods
}

/// Occurrences of events with `reason` on `kind`/`name` (series counted).
fn event_count(events: &[Event], kind: &str, name: &str, reason: &str) -> u64 {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .map(|e| {
            e.series
                .as_ref()
                .map_or(1, |s| u64::try_from(s.count).unwrap_or(1))
        })
        .sum()
}

/// Waits until every `(kind, name, reason)` has at least one event; returns the events.
async fn wait_events(w: &World, wanted: &[(&str, &str, &str)]) -> Vec<Event> {
    let what = format!("events {wanted:?}");
    wait_list(w, "", &what, |events: &[Event]| {
        wanted
            .iter()
            .all(|(kind, name, reason)| event_count(events, kind, name, reason) > 0)
    })
    .await
}

async fn exit_all(w: &World, pods: &[Pod], code: i32) {
    for pod in pods {
        w.cluster
            .fleet
            .exit(&w.ns, &pod.name_any(), code)
            .await
            .expect("exit");
    }
}

// =============================================================================================
// Job outcomes.

#[test]
fn all_ranks_complete_and_keep_their_terminal_pods() {
    with_operator(
        "all-ranks",
        Mode::InProcess,
        Duration::from_secs(50),
        |w| async move {
            let pods = start_all_ranks_job(&w, 4, 1).await;
            let indices: BTreeSet<u32> = pods.iter().map(index).collect();
            assert_eq!(indices, (0..4).collect(), "B2: one pod per index");
            for pod in &pods {
                assert_eq!(pod.labels()[LABEL_PART_OF], "job");
                assert_eq!(
                    pod.spec.as_ref().unwrap().restart_policy.as_deref(),
                    Some("Never"),
                    "V5"
                );
            }
            exit_all(&w, &pods, 0).await;

            let pclq: PodClique = wait_for(&w, "job-0-worker", "the clique to complete", |c| {
                is_true(c, CONDITION_COMPLETED, Some(REASON_COMPLETION_CRITERIA_MET))
            })
            .await;
            assert!(is_absent(&pclq, CONDITION_FAILED), "E6");
            let job: PodCliqueSet = wait_for(&w, "job", "the job to complete", |p| {
                is_true(p, CONDITION_COMPLETED, Some(REASON_COMPLETION_CRITERIA_MET))
            })
            .await;
            assert!(is_absent(&job, CONDITION_FAILED));
            assert_eq!(counts(&job), vec![0], "R3: no restart");
            let events = wait_events(
                &w,
                &[
                    ("PodClique", "job-0-worker", EVENT_JOB_COMPLETED),
                    ("PodCliqueSet", "job", EVENT_JOB_COMPLETED),
                ],
            )
            .await;
            assert_eq!(
                event_count(&events, "PodCliqueSet", "job", EVENT_JOB_COMPLETED),
                1
            );
            let pods: Api<Pod> = Api::namespaced(w.client.clone(), &w.ns);
            let left = pods.list(&Default::default()).await.unwrap().items;
            assert_eq!(left.len(), 4, "C7: the terminal pods stay");
            assert!(left.iter().all(|p| phase(p) == "Succeeded"));
            w
        },
    );
}

#[test]
fn a_failed_rank_restarts_the_scaling_group_replica_once() {
    with_operator(
        "gang-restart",
        Mode::InProcess,
        Duration::from_secs(55),
        |w| async move {
            let group = json!({"name": "gang", "cliqueNames": ["leader", "worker"], "replicas": 1,
                           "policy": max_restarts(2)});
            let cliques = vec![clique("leader", 1, true), clique("worker", 3, true)];
            create(&w, &pcs("train", cliques, vec![group], Value::Null)).await;
            let leader = running_pods(&w, "train-0-gang-0-leader", 1).await;
            let workers = running_pods(&w, "train-0-gang-0-worker", 3).await;
            let old: PodClique = wait_for(&w, "train-0-gang-0-leader", "leader", |_| true).await;

            exit_all(&w, &workers[1..2], 1).await;
            let gang: PodCliqueScalingGroup =
                wait_for(&w, "train-0-gang", "the count", |g| counts(g) == vec![1]).await;
            assert!(is_absent(&gang, CONDITION_FAILED));
            // R1: every PodClique of the replica is recreated, labelled with its attempt (R7).
            for name in ["train-0-gang-0-leader", "train-0-gang-0-worker"] {
                let old_uid = if name.ends_with("leader") {
                    old.uid()
                } else {
                    None
                };
                wait_for(&w, name, "the new attempt", move |c: &PodClique| {
                    c.labels().get(LABEL_RESTART_ATTEMPT).map(String::as_str) == Some("1")
                        && (old_uid.is_none() || c.uid() != old_uid)
                })
                .await;
            }
            let new_leader = running_pods(&w, "train-0-gang-0-leader", 1).await;
            let new_workers = running_pods(&w, "train-0-gang-0-worker", 3).await;
            assert_ne!(
                new_leader[0].uid(),
                leader[0].uid(),
                "R1: the leader restarts too"
            );
            for pod in new_leader.iter().chain(&new_workers) {
                assert_eq!(pod.labels()[LABEL_RESTART_ATTEMPT], "1", "R7");
            }
            let events = wait_events(
                &w,
                &[(
                    "PodCliqueScalingGroup",
                    "train-0-gang",
                    EVENT_GANG_RESTART_TRIGGERED,
                )],
            )
            .await;
            assert_eq!(
                event_count(
                    &events,
                    "PodCliqueScalingGroup",
                    "train-0-gang",
                    EVENT_GANG_RESTART_TRIGGERED
                ),
                1,
                "EV3: one event per restart"
            );
            let job: PodCliqueSet = wait_for(&w, "train", "the job", |_| true).await;
            assert_eq!(
                counts(&job),
                vec![0],
                "R6: the nearest aware parent restarts"
            );

            exit_all(&w, &new_leader, 0).await;
            exit_all(&w, &new_workers, 0).await;
            let gang: PodCliqueScalingGroup =
                wait_for(&w, "train-0-gang", "the group to complete", |g| {
                    is_true(g, CONDITION_COMPLETED, None)
                })
                .await;
            assert_eq!(counts(&gang), vec![1], "R3: exactly one restart");
            wait_for(&w, "train", "the job to complete", |p: &PodCliqueSet| {
                is_true(p, CONDITION_COMPLETED, None) && is_absent(p, CONDITION_FAILED)
            })
            .await;
            w
        },
    );
}

#[test]
fn a_spent_budget_fails_the_job() {
    with_operator(
        "budget",
        Mode::InProcess,
        Duration::from_secs(50),
        |w| async move {
            let pods = start_all_ranks_job(&w, 2, 1).await;
            exit_all(&w, &pods[..1], 3).await;
            wait_for(&w, "job", "the first restart", |p: &PodCliqueSet| {
                counts(p) == vec![1]
            })
            .await;
            let pclq: PodClique = attempt_started(&w, "job-0-worker", "1").await;
            let pods = running_pods(&w, "job-0-worker", 2).await;
            exit_all(&w, &pods[1..], 3).await;

            let job: PodCliqueSet = wait_for(&w, "job", "the job to fail", |p| {
                is_true(p, CONDITION_FAILED, Some(REASON_RESTART_BUDGET_EXHAUSTED))
            })
            .await;
            assert!(is_absent(&job, CONDITION_COMPLETED), "E6");
            assert_eq!(counts(&job), vec![1], "E9: no restart beyond the budget");
            let failed: PodClique = wait_for(&w, "job-0-worker", "the clique to fail", |c| {
                is_true(c, CONDITION_FAILED, None)
            })
            .await;
            assert_eq!(failed.uid(), pclq.uid(), "C4: nothing is recreated");
            wait_events(
                &w,
                &[
                    ("PodClique", "job-0-worker", EVENT_JOB_FAILED),
                    ("PodCliqueSet", "job", EVENT_RESTART_BUDGET_EXHAUSTED),
                    ("PodCliqueSet", "job", EVENT_JOB_FAILED),
                ],
            )
            .await;
            let uid = pclq.uid().unwrap();
            wait_list(
                &w,
                &format!("{LABEL_PODCLIQUE}=job-0-worker"),
                "C1",
                |pods: &[Pod]| {
                    let mine: Vec<&Pod> = pods.iter().filter(|p| owner_uid(p) == uid).collect();
                    mine.iter().all(|p| !active(p)) && mine.iter().any(|p| phase(p) == "Failed")
                },
            )
            .await;
            w
        },
    );
}

#[test]
fn a_leader_completes_the_gang_and_the_workers_are_cleaned_up() {
    with_operator(
        "leader",
        Mode::InProcess,
        Duration::from_secs(50),
        |w| async move {
            let group = json!({"name": "gang", "cliqueNames": ["leader", "worker"], "replicas": 1,
                           "policy": {"completion": {"success": {"targetNames": ["leader"]},
                                                     "failure": {"maxRestarts": 1}}}});
            let cliques = vec![clique("leader", 1, true), clique("worker", 3, true)];
            create(&w, &pcs("lead", cliques, vec![group], Value::Null)).await;
            let leader = running_pods(&w, "lead-0-gang-0-leader", 1).await;
            running_pods(&w, "lead-0-gang-0-worker", 3).await;

            exit_all(&w, &leader, 0).await;
            let gang: PodCliqueScalingGroup =
                wait_for(&w, "lead-0-gang", "the group to complete", |g| {
                    is_true(g, CONDITION_COMPLETED, Some(REASON_COMPLETION_CRITERIA_MET))
                })
                .await;
            assert_eq!(counts(&gang), vec![0], "E10: no budget used");
            wait_for(&w, "lead", "the job to complete", |p: &PodCliqueSet| {
                is_true(p, CONDITION_COMPLETED, None)
            })
            .await;
            // C2: the non-required worker clique goes, and its pods with it; the leader's
            // terminal pod stays (C1, C7).
            let api: Api<PodClique> = Api::namespaced(w.client.clone(), &w.ns);
            let gone = await_condition(api, "lead-0-gang-0-worker", |o: Option<&PodClique>| {
                o.is_none()
            });
            tokio::time::timeout(WAIT, gone)
                .await
                .expect("the worker clique stays")
                .unwrap();
            let pods = wait_list(
                &w,
                &format!("{LABEL_PART_OF}=lead"),
                "worker pods gone",
                |pods: &[Pod]| {
                    pods.iter()
                        .all(|p| p.labels()[LABEL_PODCLIQUE] == "lead-0-gang-0-leader")
                },
            )
            .await;
            assert_eq!(pods.len(), 1);
            assert_eq!(phase(&pods[0]), "Succeeded");
            assert_eq!(pods[0].uid(), leader[0].uid());
            wait_events(
                &w,
                &[
                    ("PodClique", "lead-0-gang-0-leader", EVENT_JOB_COMPLETED),
                    ("PodCliqueScalingGroup", "lead-0-gang", EVENT_JOB_COMPLETED),
                    ("PodCliqueSet", "lead", EVENT_JOB_COMPLETED),
                ],
            )
            .await;
            w
        },
    );
}

/// A pod removed without ever showing phase Failed fails its clique (E3), with no replacement.
fn vanished_pod_fails_the_job(name: &str, remove: &'static str) {
    with_operator(
        name,
        Mode::InProcess,
        Duration::from_secs(45),
        move |w| async move {
            let pods = start_all_ranks_job(&w, 3, 0).await;
            let victim = pods[2].name_any();
            match remove {
                "evict" => w.cluster.fleet.evict(&w.ns, &victim).await.unwrap(),
                _ => w.cluster.fleet.force_delete(&w.ns, &victim).await.unwrap(),
            }
            let pclq: PodClique = wait_for(&w, "job-0-worker", "the clique to fail", |c| {
                is_true(c, CONDITION_FAILED, None)
            })
            .await;
            if remove == "force-delete" {
                assert!(
                    is_true(&pclq, CONDITION_FAILED, Some(REASON_POD_LOST)),
                    "E3"
                );
            }
            let job: PodCliqueSet = wait_for(&w, "job", "the job to fail", |p| {
                is_true(p, CONDITION_FAILED, Some(REASON_RESTART_BUDGET_EXHAUSTED))
            })
            .await;
            assert_eq!(counts(&job), vec![0]);
            let uid = pclq.uid().unwrap();
            let pods = wait_list(
                &w,
                &format!("{LABEL_PODCLIQUE}=job-0-worker"),
                "C1",
                |pods: &[Pod]| {
                    pods.iter()
                        .filter(|p| owner_uid(p) == uid)
                        .all(|p| !active(p))
                },
            )
            .await;
            assert!(
                pods.iter()
                    .all(|p| p.name_any() != victim && index(p) != 2 || !active(p)),
                "E3: no replacement pod"
            );
            w
        },
    );
}

#[test]
fn a_force_deleted_pod_fails_the_job() {
    vanished_pod_fails_the_job("force-delete", "force-delete");
}

#[test]
fn an_evicted_pod_fails_the_job() {
    vanished_pod_fails_the_job("evict", "evict");
}

// =============================================================================================
// Crash safety.

#[test]
fn a_sigkill_in_the_middle_of_a_restart_still_counts_one_restart() {
    with_operator(
        "sigkill",
        Mode::Process,
        Duration::from_secs(55),
        |mut w| async move {
            let pods = start_all_ranks_job(&w, 4, 2).await;
            let first: PodClique = wait_for(&w, "job-0-worker", "the clique", |_| true).await;
            let seen = Arc::new(Mutex::new(BTreeSet::new()));
            let counts_seen = record_counts(&w, "job", seen.clone()).await;

            exit_all(&w, &pods[..1], 1).await;
            // The count is persisted; the deletes and recreations are under way: kill now (O3).
            wait_for(&w, "job", "the count", |p: &PodCliqueSet| {
                counts(p) == vec![1]
            })
            .await;
            let operator = w.operator.as_mut().unwrap().process();
            operator.kill();
            let after_kill: Option<PodClique> = Api::namespaced(w.client.clone(), &w.ns)
                .get_opt("job-0-worker")
                .await
                .unwrap();
            let state = match &after_kill {
                Some(c) if c.uid() == first.uid() => "before the old clique was deleted",
                Some(_) => "after the new clique was created",
                None => "between the delete and the recreation",
            };
            eprintln!("sigkill: the operator died {state}");
            *operator = OperatorProcess::start(w.cluster.control_plane.kubeconfig_path(), &w.ns);

            let clique: PodClique = attempt_started(&w, "job-0-worker", "1").await;
            assert_ne!(clique.uid(), first.uid());
            let pods = running_pods(&w, "job-0-worker", 4).await;
            exit_all(&w, &pods, 0).await;
            let job: PodCliqueSet = wait_for(&w, "job", "the job to complete", |p| {
                is_true(p, CONDITION_COMPLETED, None)
            })
            .await;
            assert_eq!(counts(&job), vec![1], "O3: exactly one restart");
            assert!(is_absent(&job, CONDITION_FAILED));
            counts_seen.abort();
            let seen = seen.lock().unwrap().clone();
            assert_eq!(
                seen,
                BTreeSet::from([vec![0], vec![1]]),
                "R3: counts seen {seen:?}"
            );
            // No duplicate children: exactly one pod per index in the new attempt.
            let uid = clique.uid().unwrap();
            let pods: Vec<Pod> = Api::<Pod>::namespaced(w.client.clone(), &w.ns)
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|p| owner_uid(p) == uid)
                .collect();
            let indices: Vec<u32> = pods.iter().map(index).collect();
            assert_eq!(indices.len(), 4, "no duplicate pods: {indices:?}");
            assert_eq!(indices.iter().collect::<BTreeSet<_>>().len(), 4);
            w
        },
    );
}

/// Records every `replicaRestartCounts` value PodCliqueSet `name` shows; returns once the
/// watch has listed, so no value written afterwards can be missed.
async fn record_counts(
    w: &World,
    name: &str,
    seen: Arc<Mutex<BTreeSet<Vec<i64>>>>,
) -> tokio::task::JoinHandle<()> {
    let api: Api<PodCliqueSet> = Api::namespaced(w.client.clone(), &w.ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut events = watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(pcs) | watcher::Event::InitApply(pcs)) => {
                    seen.lock().unwrap().insert(counts(&pcs));
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    tokio::time::timeout(WAIT, listed)
        .await
        .expect("the count watch lists in time")
        .expect("the count watch runs");
    task
}

// =============================================================================================
// Measurements (printed, not asserted on time).

/// Watch events of a namespace, timestamped on arrival.
#[derive(Clone, Default)]
struct Timeline {
    entries: Arc<Mutex<Vec<(Instant, Value)>>>,
    listed: Arc<Mutex<usize>>,
}

impl Timeline {
    /// Starts recording pods, PodCliques and PCSGs of `w`'s namespace; returns once all three
    /// watches have listed.
    async fn start(w: &World) -> (Timeline, Vec<tokio::task::JoinHandle<()>>) {
        let timeline = Timeline::default();
        let tasks = vec![
            timeline.record(Api::<Pod>::namespaced(w.client.clone(), &w.ns)),
            timeline.record(Api::<PodClique>::namespaced(w.client.clone(), &w.ns)),
            timeline.record(Api::<PodCliqueScalingGroup>::namespaced(
                w.client.clone(),
                &w.ns,
            )),
        ];
        let deadline = Instant::now() + WAIT;
        while *timeline.listed.lock().unwrap() < 3 {
            assert!(
                Instant::now() < deadline,
                "the timeline watches did not list"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (timeline, tasks)
    }

    fn record<K>(&self, api: Api<K>) -> tokio::task::JoinHandle<()>
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug,
        K: serde::de::DeserializeOwned + serde::Serialize,
        K: Send + 'static,
    {
        let this = self.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                        let mut value = serde_json::to_value(&o).unwrap();
                        value["kind"] = K::kind(&()).into_owned().into();
                        this.entries.lock().unwrap().push((Instant::now(), value));
                    }
                    Ok(watcher::Event::InitDone) => *this.listed.lock().unwrap() += 1,
                    _ => {}
                }
            }
        })
    }

    /// The first time `test` holds for an entry after `since`.
    fn first(&self, since: Instant, test: impl Fn(&Value) -> bool) -> Option<Instant> {
        let entries = self.entries.lock().unwrap();
        entries
            .iter()
            .find(|(t, v)| *t >= since && test(v))
            .map(|(t, _)| *t)
    }

    /// [`Timeline::nth`], once the watches have delivered it (the waits above read the
    /// apiserver, which may be a little ahead of them).
    async fn await_nth(&self, since: Instant, n: usize, test: impl Fn(&Value) -> bool) -> Instant {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(t) = self.nth(since, n, &test) {
                return t;
            }
            assert!(Instant::now() < deadline, "the timeline missed an object");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The time the `n`-th distinct object satisfying `test` was first seen after `since`.
    fn nth(&self, since: Instant, n: usize, test: impl Fn(&Value) -> bool) -> Option<Instant> {
        let entries = self.entries.lock().unwrap();
        let mut seen = BTreeSet::new();
        for (t, v) in entries.iter().filter(|(t, _)| *t >= since) {
            if test(v) {
                seen.insert(
                    v.pointer("/metadata/uid")
                        .cloned()
                        .unwrap_or_default()
                        .to_string(),
                );
                if seen.len() == n {
                    return Some(*t);
                }
            }
        }
        None
    }
}

fn attempt_of(v: &Value) -> Option<&str> {
    v.pointer(&format!(
        "/metadata/labels/{}",
        LABEL_RESTART_ATTEMPT.replace('/', "~1")
    ))
    .and_then(Value::as_str)
}

fn millis(from: Instant, to: Option<Instant>) -> f64 {
    to.map_or(f64::NAN, |t| t.duration_since(from).as_secs_f64() * 1000.0)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Reaction to a failure in a 16-pod PCSG replica: failure visible → count persisted → all
/// PodCliques of the replica recreated → all 16 pods created, over nine restarts.
#[test]
fn measure_restart_reaction_for_a_16_pod_replica() {
    const RESTARTS: i32 = 9;
    with_operator(
        "reaction",
        Mode::Process,
        Duration::from_secs(120),
        |w| async move {
            let group = json!({"name": "gang", "cliqueNames": ["leader", "worker"], "replicas": 1,
                           "policy": max_restarts(RESTARTS)});
            let cliques = vec![clique("leader", 1, true), clique("worker", 15, true)];
            create(&w, &pcs("react", cliques, vec![group], Value::Null)).await;
            let (timeline, tasks) = Timeline::start(&w).await;
            let (mut persisted, mut cliques_back, mut pods_back) = (vec![], vec![], vec![]);
            for attempt in 1..=RESTARTS as usize {
                running_pods(&w, "react-0-gang-0-leader", 1).await;
                let workers = running_pods(&w, "react-0-gang-0-worker", 15).await;
                let victim = workers[attempt % 15].name_any();
                let since = Instant::now();
                exit_all(&w, &workers[attempt % 15..attempt % 15 + 1], 1).await;
                wait_for(
                    &w,
                    "react-0-gang",
                    "the count",
                    move |g: &PodCliqueScalingGroup| {
                        counts(g) == vec![i64::try_from(attempt).unwrap()]
                    },
                )
                .await;
                let label = attempt.to_string();
                let pod_label = label.clone();
                wait_list(
                    &w,
                    &format!("{LABEL_PART_OF}=react,{LABEL_RESTART_ATTEMPT}={label}"),
                    "16 new pods",
                    |pods: &[Pod]| pods.len() == 16,
                )
                .await;
                let failed = timeline
                    .first(since, |v| {
                        v["kind"] == "Pod"
                            && v["metadata"]["name"] == victim.as_str()
                            && v["status"]["phase"] == "Failed"
                    })
                    .expect("the failure was seen");
                let count = timeline
                    .await_nth(since, 1, move |v| {
                        v["kind"] == "PodCliqueScalingGroup"
                            && v["status"]["replicaRestartCounts"][0] == attempt
                    })
                    .await;
                let cliques = timeline
                    .await_nth(since, 2, move |v| {
                        v["kind"] == "PodClique" && attempt_of(v) == Some(label.as_str())
                    })
                    .await;
                let pods = timeline
                    .await_nth(since, 16, move |v| {
                        v["kind"] == "Pod" && attempt_of(v) == Some(pod_label.as_str())
                    })
                    .await;
                persisted.push(millis(failed, Some(count)));
                cliques_back.push(millis(failed, Some(cliques)));
                pods_back.push(millis(failed, Some(pods)));
            }
            for task in tasks {
                task.abort();
            }
            eprintln!(
                "reaction of a 16-pod replica, ms after the failure was visible (median of {RESTARTS}): \
             count persisted {:.0}, PodCliques recreated {:.0}, 16 pods created {:.0}\n  \
             count {persisted:.0?}\n  cliques {cliques_back:.0?}\n  pods {pods_back:.0?}",
                median(persisted.clone()),
                median(cliques_back.clone()),
                median(pods_back.clone()),
            );
            w
        },
    );
}

#[test]
fn a_mixed_job_runs_with_the_deployed_permissions_only() {
    with_operator(
        "deployed",
        Mode::AsDeployed,
        Duration::from_secs(55),
        |w| async move {
            let group = json!({"name": "gang", "cliqueNames": ["leader", "worker"], "replicas": 1,
                           "policy": max_restarts(1)});
            let cliques = vec![
                clique("leader", 1, true),
                clique("worker", 2, true),
                clique("router", 1, false),
            ];
            create(&w, &pcs("mixed", cliques, vec![group], Value::Null)).await;
            running_pods(&w, "mixed-0-router", 1).await;
            let workers = running_pods(&w, "mixed-0-gang-0-worker", 2).await;
            running_pods(&w, "mixed-0-gang-0-leader", 1).await;
            // E4: MinAvailableBreached on the regular clique only.
            let router: PodClique =
                wait_for(&w, "mixed-0-router", "the router's availability", |c| {
                    condition(Some(&conditions_of(c)), "MinAvailableBreached")
                        .is_some_and(|c| c.status == "False")
                })
                .await;
            let worker: PodClique = wait_for(&w, "mixed-0-gang-0-worker", "worker", |_| true).await;
            assert!(is_absent(&worker, "MinAvailableBreached"), "E4");

            exit_all(&w, &workers[..1], 2).await;
            wait_for(
                &w,
                "mixed-0-gang",
                "the restart",
                |g: &PodCliqueScalingGroup| counts(g) == vec![1],
            )
            .await;
            // The count is written before the old attempt is deleted: wait for the new one.
            attempt_started(&w, "mixed-0-gang-0-leader", "1").await;
            attempt_started(&w, "mixed-0-gang-0-worker", "1").await;
            let leader = running_pods(&w, "mixed-0-gang-0-leader", 1).await;
            let workers = running_pods(&w, "mixed-0-gang-0-worker", 2).await;
            let router_now: PodClique = wait_for(&w, "mixed-0-router", "router", |_| true).await;
            assert_eq!(
                router_now.uid(),
                router.uid(),
                "R1: a PCSG restart leaves the PCS's cliques"
            );
            exit_all(&w, &leader, 0).await;
            exit_all(&w, &workers, 0).await;

            wait_for(&w, "mixed", "the job to complete", |p: &PodCliqueSet| {
                is_true(p, CONDITION_COMPLETED, None)
            })
            .await;
            // E12, C3: the regular router does not hold the job back and is cleaned up after it.
            let api: Api<PodClique> = Api::namespaced(w.client.clone(), &w.ns);
            let gone = await_condition(api, "mixed-0-router", |o: Option<&PodClique>| o.is_none());
            tokio::time::timeout(WAIT, gone)
                .await
                .expect("the router stays")
                .unwrap();
            wait_events(
                &w,
                &[(
                    "PodCliqueScalingGroup",
                    "mixed-0-gang",
                    EVENT_GANG_RESTART_TRIGGERED,
                )],
            )
            .await;
            w
        },
    );
}
