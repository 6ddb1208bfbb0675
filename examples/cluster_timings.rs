//! Timings of a target: cold start (binaries and assets present), pod created → Running
//! visible, exit injected → terminal phase visible, and (embedded) idle memory of the control
//! plane. On kind the pods are real: fixture-like busybox containers that exit when told
//! through `kubectl exec`.
//!
//! `cargo run --release --example cluster_timings -- [--kind] [starts] [pods]` (defaults 5
//! and 40; on kind, 1 start).

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use grove_conformance::catalog::PodAction;
use grove_conformance::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use grove_conformance::cluster::{TargetSpec, acquire};
use grove_conformance::kubelets::PodDriver;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn stats(name: &str, xs: Vec<Duration>) {
    let mut sorted = xs.clone();
    sorted.sort();
    println!(
        "{name:<36} n={:<4} min={:>9.1?} median={:>9.1?} p90={:>9.1?} max={:>9.1?}",
        xs.len(),
        sorted[0],
        median(xs),
        sorted[sorted.len() * 9 / 10],
        sorted[sorted.len() - 1]
    );
}

fn rss_kib(pid: u32) -> u64 {
    support::memory_kib(&pid.to_string(), "VmRSS")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

#[tokio::main]
async fn main() {
    let kind = std::env::args().any(|a| a == "--kind");
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let starts = args.first().copied().unwrap_or(if kind { 1 } else { 5 });
    let pods = args.get(1).copied().unwrap_or(40);

    // Kept alive until the end: the target of the pod measurements.
    let mut embedded = None;
    let mut guard = None;
    let mut start_times = Vec::new();
    for i in 0..starts {
        let t = Instant::now();
        if kind {
            let exe = std::env::current_exe().unwrap();
            let harness = exe
                .parent()
                .and_then(|d| d.parent())
                .unwrap()
                .join("grove-conformance");
            let spec = TargetSpec::Kind {
                config: None,
                keep: false,
                harness,
            };
            let target = acquire(&spec, grove_reference_operator::crds(), true)
                .await
                .expect("the kind cluster starts");
            start_times.push(t.elapsed());
            if i + 1 == starts {
                guard = Some(target);
            }
        } else {
            let cluster = EmbeddedCluster::start(EmbeddedOptions::default())
                .await
                .expect("the embedded cluster starts");
            start_times.push(t.elapsed());
            if i + 1 == starts {
                embedded = Some(cluster);
            }
        }
    }
    stats(
        if kind {
            "cold start (kind: nodes Ready, CRDs)"
        } else {
            "cold start (cp + 8 nodes ready)"
        },
        start_times,
    );

    let (client, driver) = match (&embedded, &guard) {
        (Some(cluster), _) => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let rss: u64 = cluster
                .control_plane
                .pids()
                .iter()
                .map(|p| rss_kib(*p))
                .sum();
            println!(
                "idle RSS of etcd + apiserver + controller manager: {} MiB ({} KiB, {} KiB, {} KiB)",
                rss / 1024,
                rss_kib(cluster.control_plane.pids()[0]),
                rss_kib(cluster.control_plane.pids()[1]),
                rss_kib(cluster.control_plane.pids()[2])
            );
            (
                cluster.client(),
                PodDriver::Simulated(cluster.fleet.clone()),
            )
        }
        (None, Some(target)) => (
            target.handles().client.clone(),
            target.handles().pods.clone(),
        ),
        (None, None) => unreachable!("one target was started"),
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "timings"}})).unwrap(),
        )
        .await
        .unwrap();
    // The service account a real cluster's admission wants in a new namespace.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "timings");
    while accounts.get_opt("default").await.ok().flatten().is_none() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), "timings");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String, Instant)>();
    let watch_api = api.clone();
    tokio::spawn(async move {
        let mut stream = watcher(watch_api, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = stream.next().await {
            if let watcher::Event::Apply(p) = event {
                let _ = tx.send((
                    p.metadata.name.clone().unwrap_or_default(),
                    phase(&p).to_string(),
                    Instant::now(),
                ));
            }
        }
    });
    let mut running = Vec::new();
    let mut terminal = Vec::new();
    let mut seen: HashMap<(String, String), Instant> = HashMap::new();
    let mut wait_for =
        async |name: &str,
               wanted: &str,
               rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String, Instant)>| {
            let key = (name.to_string(), wanted.to_string());
            loop {
                if let Some(t) = seen.get(&key) {
                    return *t;
                }
                let (n, p, t) = rx.recv().await.unwrap();
                seen.entry((n, p)).or_insert(t);
            }
        };
    for i in 0..pods {
        let name = format!("p{i}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2, "containers": [{
                "name": "main", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "mkfifo /tmp/exit-code && read code < /tmp/exit-code; exit $code"],
            }]}
        }))
        .unwrap();
        let t0 = Instant::now();
        api.create(&PostParams::default(), &pod).await.unwrap();
        let t1 = wait_for(&name, "Running", &mut rx).await;
        running.push(t1 - t0);
        let t2 = Instant::now();
        driver
            .act("timings", &name, PodAction::Exit((i % 2) as i32), false)
            .await
            .unwrap();
        let wanted = if i % 2 == 0 { "Succeeded" } else { "Failed" };
        let t3 = wait_for(&name, wanted, &mut rx).await;
        terminal.push(t3 - t2);
    }
    stats("pod created -> Running visible", running);
    stats("exit injected -> terminal visible", terminal);
}
