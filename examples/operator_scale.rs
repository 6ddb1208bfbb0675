//! The reference operator at scale: one PodCliqueSet whose scaling group has `replicas`
//! replicas of 16 pods (a leader and 15 workers), on the embedded control plane. The job runs,
//! survives one gang restart of replica 7 and completes. Prints how long each phase took, the
//! operator's peak RSS and the API requests it made per pod.
//!
//! `cargo run --release --example operator_scale -- [replicas]` (default 32, i.e. 512 pods).
//!
//! The operator runs as a child process (this example re-run with `--operator`), so its RSS and
//! request count are its own.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use grove_conformance::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use grove_conformance::errors;
use grove_reference_operator::api::{PodCliqueScalingGroup, PodCliqueSet};
use grove_reference_operator::controller::{RunOptions, run};
use grove_reference_operator::names::{
    CONDITION_COMPLETED, CONDITION_FAILED, LABEL_PART_OF, LABEL_RESTART_ATTEMPT,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NS: &str = "scale";
const PODS_PER_REPLICA: usize = 16;
const VICTIM_REPLICA: usize = 7;
/// How long any phase may take before the run is abandoned.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--operator") {
        return operator(&args[1..]);
    }
    let replicas = args.first().and_then(|a| a.parse().ok()).unwrap_or(32);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    match runtime.block_on(measure(replicas)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The child: the reference operator on `kubeconfig`, watching `NS`.
fn operator(args: &[String]) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let options = RunOptions {
        kubeconfig: args.first().map(PathBuf::from),
        namespace: Some(NS.into()),
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {:#}", errors::chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// The operator child process; its log goes to a temporary file.
struct OperatorChild {
    child: Child,
    log: tempfile::NamedTempFile,
}

impl OperatorChild {
    fn start(kubeconfig: &Path) -> OperatorChild {
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let child = Command::new(std::env::current_exe().expect("this executable"))
            .arg("--operator")
            .arg(kubeconfig)
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("the log file"))
            .spawn()
            .expect("the operator starts");
        OperatorChild { child, log }
    }

    /// Peak resident set size, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        support::memory_kib(&self.child.id().to_string(), "VmHWM")
    }

    /// SIGTERM, wait (at most 10 s), and the line the operator logs on the way out.
    fn stop(&mut self) -> Option<String> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(self.log.path())
            .unwrap_or_default()
            .lines()
            .rev()
            .find(|l| l.contains("API requests made"))
            .map(str::to_string)
    }
}

impl Drop for OperatorChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn attempt(pod: &Pod) -> Option<&str> {
    pod.labels().get(LABEL_RESTART_ATTEMPT).map(String::as_str)
}

fn condition(obj: &impl serde::Serialize, type_: &str) -> Option<String> {
    let value = serde_json::to_value(obj).ok()?;
    value
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

fn counts(group: &PodCliqueScalingGroup) -> Vec<i64> {
    serde_json::to_value(group)
        .ok()
        .and_then(|v| v.pointer("/status/replicaRestartCounts").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// Polls `probe` every 200 ms until it returns a value, for at most [`PHASE_LIMIT`].
async fn until<T, F, Fut>(what: &str, mut probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + PHASE_LIMIT;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("gave up waiting for {what} after {PHASE_LIMIT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{LABEL_PART_OF}=big")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn manifest(replicas: usize) -> Result<PodCliqueSet, String> {
    let clique = |name: &str, replicas: usize| {
        json!({"name": name, "spec": {
            "roleName": name, "replicas": replicas, "policy": {"completion": {}},
            "podSpec": {"terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "main", "image": "busybox"}]},
        }})
    };
    let value: Value = json!({
        "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
        "metadata": {"name": "big"},
        "spec": {"replicas": 1, "template": {
            "cliques": [clique("leader", 1), clique("worker", PODS_PER_REPLICA - 1)],
            "podCliqueScalingGroups": [{
                "name": "gang", "cliqueNames": ["leader", "worker"], "replicas": replicas,
                "policy": {"completion": {"failure": {"maxRestarts": 1}}},
            }],
        }},
    });
    serde_json::from_value(value).map_err(|e| e.to_string())
}

async fn measure(replicas: usize) -> Result<(), String> {
    if replicas <= VICTIM_REPLICA {
        return Err(format!("replicas must exceed {VICTIM_REPLICA}"));
    }
    let total = replicas * PODS_PER_REPLICA;
    let options = EmbeddedOptions {
        crds: grove_reference_operator::crds(),
        ..EmbeddedOptions::default()
    };
    let cluster = EmbeddedCluster::start(options)
        .await
        .map_err(|e| format!("{:#}", errors::chain(&e)))?;
    let client = cluster.client();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| e.to_string())?;
    let mut operator = OperatorChild::start(cluster.control_plane.kubeconfig_path());

    let started = Instant::now();
    let sets: Api<PodCliqueSet> = Api::namespaced(client.clone(), NS);
    sets.create(&PostParams::default(), &manifest(replicas)?)
        .await
        .map_err(|e| format!("the PodCliqueSet was rejected: {e}"))?;
    let all_running = |pods: &[Pod]| pods.iter().filter(|p| running(p)).count() == total;
    until("all pods running", || async {
        all_running(&pods(&client).await).then_some(())
    })
    .await?;
    let running_after = started.elapsed();

    // One worker of replica 7 fails: the replica restarts as a gang.
    let clique = format!("big-0-gang-{VICTIM_REPLICA}-worker");
    let victim = pods(&client)
        .await
        .into_iter()
        .find(|p| p.labels().get("grove.io/podclique") == Some(&clique) && running(p))
        .ok_or("no running worker in replica 7")?;
    let restart = Instant::now();
    cluster
        .fleet
        .exit(NS, &victim.name_any(), 1)
        .await
        .map_err(|e| e.to_string())?;
    let groups: Api<PodCliqueScalingGroup> = Api::namespaced(client.clone(), NS);
    until("the restart to be counted", || async {
        let group = groups.get_opt("big-0-gang").await.ok().flatten()?;
        (counts(&group).get(VICTIM_REPLICA) == Some(&1)).then_some(())
    })
    .await?;
    let counted_after = restart.elapsed();
    let back = until("the replica to be back", || async {
        let pods = pods(&client).await;
        let recreated = pods
            .iter()
            .filter(|p| attempt(p) == Some("1") && running(p))
            .count();
        (recreated == PODS_PER_REPLICA && all_running(&pods)).then_some(pods)
    })
    .await?;
    let restarted_after = restart.elapsed();

    // Every pod exits 0: the job completes.
    let finish = Instant::now();
    let fleet = &cluster.fleet;
    futures::stream::iter(back.iter().filter(|p| running(p)))
        .for_each_concurrent(32, |p| async move {
            let _ = fleet.exit(NS, &p.name_any(), 0).await;
        })
        .await;
    let job = until("the job to complete", || async {
        let job = sets.get_opt("big").await.ok().flatten()?;
        condition(&job, CONDITION_COMPLETED)
            .is_some_and(|s| s == "True")
            .then_some(job)
    })
    .await?;
    let completed_after = finish.elapsed();

    let group = groups.get("big-0-gang").await.map_err(|e| e.to_string())?;
    let mut expected = vec![0; replicas];
    expected[VICTIM_REPLICA] = 1;
    if counts(&group) != expected {
        return Err(format!(
            "restart counts {:?}, expected {expected:?}",
            counts(&group)
        ));
    }
    if condition(&job, CONDITION_FAILED).is_some() {
        return Err("the job also shows Failed".into());
    }

    let rss = operator.peak_rss_kib();
    let line = operator
        .stop()
        .ok_or("the operator did not log its request count")?;
    let requests: f64 = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))
        .and_then(|n| n.parse().ok())
        .ok_or("no total in the operator's request count")?;
    // Pods created: the job's, plus the replica's recreated ones.
    let created = (total + PODS_PER_REPLICA) as f64;
    println!("{total}-pod job ({replicas} replicas x {PODS_PER_REPLICA} pods)");
    println!("  all pods running            {running_after:>8.1?} after creation");
    println!("  restart counted             {counted_after:>8.1?} after the failure");
    println!("  replica running again       {restarted_after:>8.1?} after the failure");
    println!("  Completed                   {completed_after:>8.1?} after the exits began");
    println!(
        "  operator peak RSS           {:>8.1} MiB",
        rss as f64 / 1024.0
    );
    println!(
        "  operator API requests       {requests:>8} = {:.2} per pod created ({created} pods)",
        requests / created
    );
    println!("  {line}");
    Ok(())
}
