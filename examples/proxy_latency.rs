//! What the API proxy adds to each request: N GETs and N small merge PATCHes of one
//! ConfigMap, straight to the embedded apiserver and through the proxy (alternating, so both
//! see the same load), with the median and p99 of each.
//!
//! `cargo run --release --example proxy_latency -- [requests]` (default 500).

use std::time::{Duration, Instant};

use grove_conformance::cluster::embedded::client_for;
use grove_conformance::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use grove_conformance::proxy::ApiProxy;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const NAMESPACE: &str = "proxy-latency";
const WARM_UP: usize = 20;

/// Median and p99 of some samples.
fn quantiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// Times `n` rounds of `op` on each API, alternating between them; `op` gets a value unique
/// to the round and the API (so every PATCH changes the object: an unchanged one is not
/// written to etcd, and would be faster).
async fn measure<F, Fut>(n: usize, apis: [&Api<ConfigMap>; 2], op: F) -> [Vec<Duration>; 2]
where
    F: Fn(Api<ConfigMap>, String) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut samples = [Vec::with_capacity(n), Vec::with_capacity(n)];
    for i in 0..WARM_UP + n {
        for (which, api) in apis.iter().enumerate() {
            let started = Instant::now();
            op((*api).clone(), format!("{which}-{i}")).await;
            if i >= WARM_UP {
                samples[which].push(started.elapsed());
            }
        }
    }
    samples
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let cluster = EmbeddedCluster::start(EmbeddedOptions::default())
        .await
        .expect("the embedded cluster starts");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let proxy = ApiProxy::start(cluster.control_plane.kubeconfig_path(), dir.path())
        .await
        .expect("the proxy starts");
    let direct = cluster.client();
    let proxied = client_for(proxy.kubeconfig())
        .await
        .expect("a client for the proxy");
    Api::<Namespace>::all(direct.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    let direct: Api<ConfigMap> = Api::namespaced(direct, NAMESPACE);
    let proxied: Api<ConfigMap> = Api::namespaced(proxied, NAMESPACE);
    direct
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "probe"}, "data": {"i": "0"}}))
                .unwrap(),
        )
        .await
        .unwrap();

    let gets = measure(n, [&direct, &proxied], |api, _| async move {
        api.get("probe").await.unwrap();
    })
    .await;
    let patches = measure(n, [&direct, &proxied], |api, value| async move {
        let patch = Patch::Merge(json!({"data": {"i": value}}));
        api.patch("probe", &PatchParams::default(), &patch)
            .await
            .unwrap();
    })
    .await;
    proxy.shutdown().await;

    println!("{n} requests each, after {WARM_UP} warm-up rounds");
    println!(
        "{:<6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "", "direct p50", "proxy p50", "added p50", "direct p99", "proxy p99", "added p99"
    );
    for (name, [direct, proxied]) in [("GET", gets), ("PATCH", patches)] {
        let (d50, d99) = quantiles(direct);
        let (p50, p99) = quantiles(proxied);
        println!(
            "{name:<6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
            ms(d50),
            ms(p50),
            added(d50, p50),
            ms(d99),
            ms(p99),
            added(d99, p99),
        );
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}ms", d.as_secs_f64() * 1e3)
}

/// The difference, signed: on a busy machine the proxied side is sometimes the faster.
fn added(direct: Duration, proxied: Duration) -> String {
    format!(
        "{:+.3}ms",
        (proxied.as_secs_f64() - direct.as_secs_f64()) * 1e3
    )
}
