//! Timings of the embedded cluster: cold start (binaries present), pod created → Running
//! visible, exit injected → terminal phase visible, and idle memory of the control plane.
//!
//! `cargo run --release --example cluster_timings -- [starts] [pods]` (defaults 5 and 40).

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use grove_conformance::embedded::{EmbeddedCluster, EmbeddedOptions};
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
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let starts = args.first().copied().unwrap_or(5);
    let pods = args.get(1).copied().unwrap_or(40);

    let mut start_times = Vec::new();
    for _ in 0..starts {
        let t = Instant::now();
        let cluster = EmbeddedCluster::start(EmbeddedOptions::default())
            .await
            .expect("the embedded cluster starts");
        start_times.push(t.elapsed());
        drop(cluster);
    }
    stats("cold start (cp + 8 nodes ready)", start_times);

    let cluster = EmbeddedCluster::start(EmbeddedOptions::default())
        .await
        .unwrap();
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

    let client = cluster.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "timings"}})).unwrap(),
        )
        .await
        .unwrap();
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
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        }))
        .unwrap();
        let t0 = Instant::now();
        api.create(&PostParams::default(), &pod).await.unwrap();
        let t1 = wait_for(&name, "Running", &mut rx).await;
        running.push(t1 - t0);
        let t2 = Instant::now();
        cluster
            .fleet
            .exit("timings", &name, (i % 2) as i32)
            .await
            .unwrap();
        let wanted = if i % 2 == 0 { "Succeeded" } else { "Failed" };
        let t3 = wait_for(&name, wanted, &mut rx).await;
        terminal.push(t3 - t2);
    }
    stats("pod created -> Running visible", running);
    stats("exit injected -> terminal visible", terminal);
}
