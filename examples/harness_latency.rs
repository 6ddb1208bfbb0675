//! How fast the harness notices a change: from the API answering a write to the case's
//! observer (the watches expectations are judged on) holding the new state, and the peak RSS
//! of this process.
//!
//! `cargo run --release --example harness_latency -- [writes]` (default 100).

mod support;

use std::time::{Duration, Instant};

use grove_conformance::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use grove_conformance::runner::observe::Observer;
use grove_conformance::vocab::Vocabulary;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

fn peak_rss_kib() -> u64 {
    support::memory_kib("self", "VmHWM")
}

#[tokio::main]
async fn main() {
    let writes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let cluster = EmbeddedCluster::start(EmbeddedOptions {
        crds: grove_reference_operator::crds(),
        ..EmbeddedOptions::default()
    })
    .await
    .expect("the embedded cluster starts");
    let client = cluster.client();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "latency"}})).unwrap(),
        )
        .await
        .unwrap();
    let observer = Observer::start(client.clone(), "latency", Vocabulary::default(), None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "latency");
    let mut changes = observer.subscribe();
    let mut samples = Vec::new();
    for i in 0..writes {
        let name = format!("p{i}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let answered = Instant::now();
        loop {
            let seen = observer.with_snapshot(|s| {
                s.pods
                    .iter()
                    .any(|p| p.pointer("/metadata/name").and_then(Value::as_str) == Some(&name))
            });
            if seen {
                break;
            }
            tokio::time::timeout(Duration::from_secs(10), changes.changed())
                .await
                .expect("the observer noticed nothing for 10 s")
                .unwrap();
        }
        samples.push(answered.elapsed());
    }
    samples.sort();
    println!(
        "write answered -> observer holds it: n={} min={:.2?} median={:.2?} p90={:.2?} max={:.2?}",
        samples.len(),
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() * 9 / 10],
        samples[samples.len() - 1]
    );
    println!(
        "peak RSS of the harness process: {} MiB",
        peak_rss_kib() / 1024
    );
}
