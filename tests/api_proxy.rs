//! The API proxy in front of the embedded control plane: requests go through and are
//! recorded, watches stream, injected statuses, delays and hooks do what they say.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use grove_conformance::cluster::embedded::client_for;
use grove_conformance::proxy::{
    ApiProxy, FaultAction, FaultRule, Fired, Hold, HookPosition, Reads, RecordedRequest, Release,
    RequestMatch, Verb,
};
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;

/// One test's world: the shared cluster, a proxy of its own in front of it, and a namespace.
struct World {
    proxy: ApiProxy,
    /// A client going through the proxy.
    proxied: Client,
    /// A client going straight to the apiserver.
    direct: Client,
    ns: String,
    _dir: tempfile::TempDir,
}

impl World {
    fn proxied_cms(&self) -> Api<ConfigMap> {
        Api::namespaced(self.proxied.clone(), &self.ns)
    }

    fn direct_cms(&self) -> Api<ConfigMap> {
        Api::namespaced(self.direct.clone(), &self.ns)
    }
}

/// Runs a test body against a fresh proxy in front of the shared cluster.
fn with_proxy<F, Fut>(name: &str, body: F)
where
    F: FnOnce(World) -> Fut,
    Fut: Future<Output = ()>,
{
    let (env, cluster) = common::shared_cluster(Vec::new);
    let ns = format!("proxy-{name}");
    env.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let proxy = ApiProxy::start(cluster.control_plane.kubeconfig_path(), dir.path())
            .await
            .unwrap();
        let proxied = client_for(proxy.kubeconfig()).await.unwrap();
        let direct = cluster.client();
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(direct.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        let world = World {
            proxy,
            proxied,
            direct,
            ns,
            _dir: dir,
        };
        tokio::time::timeout(Duration::from_secs(60), body(world))
            .await
            .expect("test timed out");
    });
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": value}})).unwrap()
}

fn value(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("k").map(String::as_str)
}

fn merge(value: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"data": {"k": value}}))
}

/// `verb resource name status` of each request, for comparing logs at a glance.
fn summary(requests: &[RecordedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| {
            let status = r.status.map_or("dropped".to_string(), |s| s.to_string());
            let name = if r.request.name.is_empty() {
                "-"
            } else {
                &r.request.name
            };
            format!(
                "{} {} {name} {status}",
                r.request.verb,
                r.request.group_resource()
            )
        })
        .collect()
}

#[test]
fn reads_writes_and_apply_go_through_and_are_recorded() {
    with_proxy("crud", |w| async move {
        let cms = w.proxied_cms();
        let pp = PostParams::default();
        let created = cms.create(&pp, &cm("a", "1")).await.unwrap();
        assert_eq!(value(&cms.get("a").await.unwrap()), Some("1"));
        let names: Vec<String> = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        assert!(names.contains(&"a".to_string()), "{names:?}");
        let patched = cms
            .patch("a", &PatchParams::default(), &merge("2"))
            .await
            .unwrap();
        let applied = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}, "data": {"k": "3", "applied": "yes"}
        });
        let applied = cms
            .patch(
                "a",
                &PatchParams::apply("proxy-test").force(),
                &Patch::Apply(applied),
            )
            .await
            .unwrap();
        let seen = w.direct_cms().get("a").await.unwrap();
        assert_eq!(value(&seen), Some("3"));
        assert_eq!(seen.data.unwrap()["applied"], "yes");
        let managers: Vec<String> = seen
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| m.manager)
            .collect();
        assert!(managers.contains(&"proxy-test".to_string()), "{managers:?}");
        cms.delete("a", &DeleteParams::default()).await.unwrap();
        assert!(w.direct_cms().get_opt("a").await.unwrap().is_none());

        // A grouped resource and a cluster-scoped object.
        Api::<Deployment>::namespaced(w.proxied.clone(), &w.ns)
            .list(&ListParams::default())
            .await
            .unwrap();
        Api::<Namespace>::all(w.proxied.clone())
            .get(&w.ns)
            .await
            .unwrap();

        // Protobuf is negotiated end to end and binary bodies pass unchanged.
        let request = http::Request::get(format!("/api/v1/namespaces/{}/configmaps", w.ns))
            .header(http::header::ACCEPT, "application/vnd.kubernetes.protobuf")
            .body(kube::client::Body::empty())
            .unwrap();
        let response = w.proxied.send(request).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()[http::header::CONTENT_TYPE],
            "application/vnd.kubernetes.protobuf"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(body.starts_with(b"k8s\0"), "{body:?}");

        let log = w.proxy.requests();
        assert_eq!(
            summary(&log),
            [
                "create configmaps - 201",
                "get configmaps a 200",
                "list configmaps - 200",
                "patch configmaps a 200",
                "patch configmaps a 200",
                "delete configmaps a 200",
                "list apps/deployments - 200",
                "get namespaces proxy-crud 200",
                "list configmaps - 200",
            ]
        );
        let seqs: Vec<u64> = log.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=9).collect::<Vec<u64>>());
        assert!(
            log.iter()
                .all(|r| r.duration.is_some() && r.faults.is_empty())
        );
        assert!(log[..6].iter().all(|r| r.request.namespace == w.ns));
        // Accepted creates, updates and patches record the revision they committed at, and
        // where their answer fell in the arrival order; reads and deletes name none.
        let revision = |cm: &ConfigMap| cm.metadata.resource_version.as_deref()?.parse().ok();
        let revisions: Vec<Option<u64>> = log.iter().map(|r| r.resource_version).collect();
        assert_eq!(revisions[0], revision(&created));
        assert_eq!(revisions[3], revision(&patched));
        assert_eq!(revisions[4], revision(&applied));
        assert!(
            [1, 2, 5, 6, 7, 8].iter().all(|i| revisions[*i].is_none()),
            "{revisions:?}"
        );
        assert!(log.iter().all(|r| r.answered_after == Some(r.seq)));
        let at = w
            .proxy
            .writes_at(&[revision(&patched).unwrap(), revision(&created).unwrap()]);
        assert_eq!(at.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 4]);
        assert_eq!(log[6].request.group, "apps");
        assert_eq!(
            summary(&w.proxy.mutating_requests()),
            [
                "create configmaps - 201",
                "patch configmaps a 200",
                "patch configmaps a 200",
                "delete configmaps a 200",
            ]
        );
        w.proxy.clear_log();
        assert!(w.proxy.requests().is_empty());
        cms.get_opt("a").await.unwrap();
        assert_eq!(w.proxy.requests()[0].seq, 10, "numbering goes on");
        assert_eq!(w.proxy.requests()[0].status, Some(404));
    });
}

/// The next ADDED object of a watch (bookmarks skipped), within `within`.
async fn next_added<S>(events: &mut S, within: Duration) -> ConfigMap
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let wait = async {
        loop {
            match events.next().await {
                Some(Ok(WatchEvent::Added(cm))) => return cm,
                Some(Ok(WatchEvent::Bookmark(_))) => continue,
                other => panic!("unexpected watch item {other:?}"),
            }
        }
    };
    tokio::time::timeout(within, wait)
        .await
        .expect("no event arrived in time")
}

#[test]
fn watches_stream_event_by_event() {
    with_proxy("watch", |w| async move {
        let cms = w.proxied_cms();
        // Only this test's objects: the controller manager adds `kube-root-ca.crt` to every
        // new namespace whenever it gets to it.
        let params = WatchParams::default()
            .labels("proxy-test=watch")
            .timeout(50);
        let listed = cms.list(&ListParams::default()).await.unwrap();
        let version = listed.metadata.resource_version.unwrap();
        let mut events = cms.watch(&params, &version).await.unwrap().boxed();
        for i in 0..3 {
            let name = format!("w{i}");
            let mut object = cm(&name, "1");
            object
                .labels_mut()
                .insert("proxy-test".into(), "watch".into());
            w.direct_cms()
                .create(&PostParams::default(), &object)
                .await
                .unwrap();
            let written = Instant::now();
            let added = next_added(&mut events, Duration::from_secs(1)).await;
            assert_eq!(added.name_any(), name);
            assert!(written.elapsed() < Duration::from_secs(1));
        }
        // Still open: nothing but bookmarks, and no end.
        let quiet = tokio::time::timeout(Duration::from_millis(300), async {
            loop {
                match events.next().await {
                    Some(Ok(WatchEvent::Bookmark(_))) => continue,
                    other => return other,
                }
            }
        })
        .await;
        assert!(quiet.is_err(), "the watch yielded {quiet:?}");
        let watch = w
            .proxy
            .requests()
            .into_iter()
            .find(|r| r.request.verb == Verb::Watch)
            .expect("the watch is recorded");
        assert_eq!(watch.request.resource, "configmaps");
        assert_eq!(watch.status, Some(200), "recorded at its headers");
    });
}

#[test]
fn an_injected_conflict_fails_exactly_times_requests() {
    with_proxy("conflict", |w| async move {
        let cms = w.proxied_cms();
        cms.create(&PostParams::default(), &cm("c", "0"))
            .await
            .unwrap();
        let before = w.direct_cms().get("c").await.unwrap().resource_version();
        w.proxy.set_rules(vec![FaultRule::new(
            RequestMatch::any()
                .verb(Verb::Patch)
                .resource("configmaps")
                .name("c*"),
            FaultAction::Status {
                code: 409,
                times: Some(2),
            },
        )]);
        // Not matched: passes and is not counted.
        cms.get("c").await.unwrap();
        for attempt in 1..=2 {
            match cms.patch("c", &PatchParams::default(), &merge("x")).await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!(status.code, 409, "attempt {attempt}");
                    assert_eq!(status.reason, "Conflict");
                    assert!(status.message.contains("injected"), "{}", status.message);
                }
                other => panic!("attempt {attempt}: expected a 409, got {other:?}"),
            }
        }
        // Injected answers never reached the apiserver.
        let unchanged = w.direct_cms().get("c").await.unwrap();
        assert_eq!(unchanged.resource_version(), before);
        let patched = cms
            .patch("c", &PatchParams::default(), &merge("y"))
            .await
            .unwrap();
        assert_eq!(value(&patched), Some("y"));

        let fired = w.proxy.fired();
        let fired_on: Vec<u64> = fired.iter().map(|f| f.seq).collect();
        let log = w.proxy.requests();
        let conflicts: Vec<u64> = log
            .iter()
            .filter(|r| r.status == Some(409))
            .map(|r| r.seq)
            .collect();
        assert_eq!(fired_on, conflicts);
        assert_eq!(conflicts.len(), 2);
        assert!(fired.iter().all(|f| f.rule == 0 && f.request.name == "c"));
        for record in log.iter().filter(|r| r.status == Some(409)) {
            assert_eq!(record.faults.len(), 1);
        }
    });
}

#[test]
fn delays_hold_requests_and_throttling_says_when_to_retry() {
    with_proxy("delay", |w| async move {
        let cms = w.proxied_cms();
        cms.create(&PostParams::default(), &cm("d", "0"))
            .await
            .unwrap();
        let get = RequestMatch::any().verb(Verb::Get).resource("configmaps");
        w.proxy.set_rules(vec![FaultRule::new(
            get.clone(),
            FaultAction::Delay {
                by: Duration::from_millis(400),
                times: Some(1),
            },
        )]);
        let started = Instant::now();
        cms.get("d").await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(400));
        let started = Instant::now();
        cms.get("d").await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(400));

        // kube clients retry a 429 after its Retry-After (1 s): the caller sees success.
        w.proxy.clear_log();
        w.proxy.set_rules(vec![FaultRule::new(
            get,
            FaultAction::Status {
                code: 429,
                times: Some(1),
            },
        )]);
        let started = Instant::now();
        cms.get("d").await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(1));
        assert_eq!(
            summary(&w.proxy.requests()),
            ["get configmaps d 429", "get configmaps d 200"]
        );
    });
}

/// A hook callback that reports each firing (with what `probe` saw at that moment) and takes
/// a while, recording that it finished.
fn reporting_hook<P, PF, T>(
    proxy: &ApiProxy,
    probe: P,
) -> (mpsc::UnboundedReceiver<(Fired, T)>, Arc<AtomicBool>)
where
    P: Fn() -> PF + Send + Sync + 'static,
    PF: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let finished = Arc::new(AtomicBool::new(false));
    let done = finished.clone();
    let probe = Arc::new(probe);
    proxy.set_hook(move |fired| {
        let (tx, done, probe) = (tx.clone(), done.clone(), probe.clone());
        async move {
            let seen = probe().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            done.store(true, Ordering::SeqCst);
            tx.send((fired, seen)).unwrap();
        }
    });
    (rx, finished)
}

#[test]
fn a_before_hook_runs_its_callback_and_the_write_never_arrives() {
    with_proxy("before", |w| async move {
        let (mut fired, finished) = reporting_hook(&w.proxy, || async {});
        w.proxy.set_rules(vec![FaultRule::new(
            RequestMatch::any()
                .verb(Verb::Create)
                .resource("configmaps")
                .namespace(&w.ns),
            FaultAction::Hook {
                position: HookPosition::Before,
            },
        )]);
        let cms = w.proxied_cms();
        let err = cms
            .create(&PostParams::default(), &cm("held", "1"))
            .await
            .expect_err("the held create is dropped");
        assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
        assert!(
            finished.load(Ordering::SeqCst),
            "the client saw the drop before the callback finished"
        );
        let (fired, ()) = fired.try_recv().expect("the callback ran");
        assert_eq!(fired.rule, 0);
        assert_eq!(fired.request.verb, Verb::Create);
        assert_eq!(fired.request.namespace, w.ns);
        assert_eq!(fired.upstream_status, None);
        assert!(w.direct_cms().get_opt("held").await.unwrap().is_none());

        let log = w.proxy.requests();
        let held = log.iter().find(|r| r.seq == fired.seq).unwrap();
        assert_eq!(held.status, None);
        assert_eq!(held.faults.len(), 1);
        assert_eq!(w.proxy.fired(), std::slice::from_ref(&fired));
        assert!(
            fired
                .to_string()
                .ends_with(&format!("(request #{})", fired.seq))
        );

        // A hook fires once: the same create now goes through.
        cms.create(&PostParams::default(), &cm("held", "1"))
            .await
            .unwrap();
        assert!(w.direct_cms().get_opt("held").await.unwrap().is_some());
        assert_eq!(w.proxy.fired().len(), 1);
    });
}

#[test]
fn an_after_hook_lets_the_write_persist_but_the_client_never_hears() {
    with_proxy("after", |w| async move {
        let direct = w.direct_cms();
        let (mut fired, finished) = reporting_hook(&w.proxy, move || {
            let direct = direct.clone();
            async move { value(&direct.get("late").await.unwrap()).map(str::to_string) }
        });
        w.proxy.set_rules(vec![FaultRule::new(
            RequestMatch::any()
                .verb(Verb::Patch)
                .resource("core/configmaps")
                .name("la*"),
            FaultAction::Hook {
                position: HookPosition::After,
            },
        )]);
        let cms = w.proxied_cms();
        cms.create(&PostParams::default(), &cm("late", "1"))
            .await
            .unwrap();
        let err = cms
            .patch("late", &PatchParams::default(), &merge("2"))
            .await
            .expect_err("the answer is dropped");
        assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
        assert!(finished.load(Ordering::SeqCst));
        let (fired, seen) = fired.try_recv().expect("the callback ran");
        assert_eq!(seen.as_deref(), Some("2"), "persisted before the callback");
        assert_eq!(fired.upstream_status, Some(200));
        assert_eq!(fired.request.verb, Verb::Patch);
        assert_eq!(fired.request.name, "late");
        assert_eq!(value(&w.direct_cms().get("late").await.unwrap()), Some("2"));
        assert_eq!(
            summary(&w.proxy.mutating_requests()),
            ["create configmaps - 201", "patch configmaps late dropped"]
        );
    });
}

#[test]
fn upgrades_are_refused_with_a_clear_status() {
    with_proxy("upgrade", |w| async move {
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{}/pods/p/exec?command=ls",
            w.ns
        ))
        .header(http::header::CONNECTION, "Upgrade")
        .header(http::header::UPGRADE, "SPDY/3.1")
        .body(Vec::new())
        .unwrap();
        match w.proxied.request_text(request).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 501);
                assert!(status.message.contains("upgrade"), "{}", status.message);
            }
            other => panic!("expected a 501, got {other:?}"),
        }
        let log = w.proxy.requests();
        assert_eq!(log[0].request.subresource, "exec");
        assert_eq!(log[0].status, Some(501));
    });
}

#[test]
fn shutdown_closes_watches_and_removes_the_kubeconfig() {
    with_proxy("shutdown", |w| async move {
        let cms = w.proxied_cms();
        let mut events = cms
            .watch(&WatchParams::default().timeout(50), "0")
            .await
            .unwrap()
            .boxed();
        let kubeconfig = w.proxy.kubeconfig().to_path_buf();
        let addr = w.proxy.addr();
        assert!(kubeconfig.exists());
        w.proxy.shutdown().await;
        tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(Ok(_)) = events.next().await {}
        })
        .await
        .expect("the watch ended");
        assert!(!kubeconfig.exists());
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    });
}

/// The next watch item other than a bookmark, or `None` when none comes within `within` or
/// the watch ends.
async fn next_event<S>(events: &mut S, within: Duration) -> Option<WatchEvent<ConfigMap>>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let wait = async {
        loop {
            match events.next().await {
                Some(Ok(WatchEvent::Bookmark(_))) => continue,
                Some(Ok(event)) => return Some(event),
                None => return None,
                other => panic!("unexpected watch item {other:?}"),
            }
        }
    };
    tokio::time::timeout(within, wait).await.ok().flatten()
}

/// `TYPE name=value` of a watch event.
fn said(event: &WatchEvent<ConfigMap>) -> String {
    match event {
        WatchEvent::Added(c) => format!("ADDED {}={}", c.name_any(), value(c).unwrap_or("")),
        WatchEvent::Modified(c) => {
            format!("MODIFIED {}={}", c.name_any(), value(c).unwrap_or(""))
        }
        WatchEvent::Deleted(c) => format!("DELETED {}={}", c.name_any(), value(c).unwrap_or("")),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

/// A labelled ConfigMap, so a watch sees only the test's own objects.
fn labelled(name: &str, value: &str, label: &str) -> ConfigMap {
    let mut object = cm(name, value);
    object
        .labels_mut()
        .insert("proxy-test".into(), label.into());
    object
}

fn configmap_hold(ns: &str) -> Hold {
    let mut hold = Hold::kind("", "v1", "configmaps");
    hold.namespace = Some(ns.to_string());
    hold
}

/// Every event until `within` passes without one.
async fn drain<S>(events: &mut S, within: Duration) -> Vec<String>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut out = Vec::new();
    while let Some(event) = next_event(events, within).await {
        out.push(said(&event));
    }
    out
}

#[test]
fn a_hold_keeps_watch_events_back_until_released_and_reads_stay_current() {
    with_proxy("hold", |w| async move {
        let cms = w.proxied_cms();
        let params = WatchParams::default().labels("proxy-test=hold").timeout(50);
        let pp = PostParams::default();
        w.direct_cms()
            .create(&pp, &labelled("a", "1", "hold"))
            .await
            .unwrap();
        let version = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version;
        let mut events = cms.watch(&params, &version.unwrap()).await.unwrap().boxed();
        let record = w.proxy.hold(configmap_hold(&w.ns)).await.unwrap();
        assert!(record.at > 0);
        let direct = w.direct_cms();
        direct
            .patch("a", &PatchParams::default(), &merge("2"))
            .await
            .unwrap();
        direct
            .patch("a", &PatchParams::default(), &merge("3"))
            .await
            .unwrap();
        assert_eq!(
            next_event(&mut events, Duration::from_millis(800))
                .await
                .as_ref()
                .map(said),
            None
        );
        // The watch lags; a read does not.
        assert_eq!(value(&cms.get("a").await.unwrap()), Some("3"));
        let released = w.proxy.release(record.id).unwrap();
        assert_eq!(released.delivered, Some(2));
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["MODIFIED a=2", "MODIFIED a=3"]
        );
        direct
            .patch("a", &PatchParams::default(), &merge("4"))
            .await
            .unwrap();
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["MODIFIED a=4"],
            "released for good"
        );
        assert!(w.proxy.fault_errors().is_empty());
    });
}

#[test]
fn stale_reads_answer_as_of_the_hold_and_writes_from_them_conflict() {
    with_proxy("stale", |w| async move {
        let cms = w.proxied_cms();
        let pp = PostParams::default();
        w.direct_cms()
            .create(&pp, &labelled("a", "1", "stale"))
            .await
            .unwrap();
        let mut hold = configmap_hold(&w.ns);
        hold.reads = Reads::Stale;
        let record = w.proxy.hold(hold).await.unwrap();
        w.direct_cms()
            .patch("a", &PatchParams::default(), &merge("2"))
            .await
            .unwrap();
        w.direct_cms()
            .create(&pp, &labelled("b", "1", "stale"))
            .await
            .unwrap();
        // Reads a watch cache serves (resourceVersion=0) lag with it.
        let cached = GetParams::any();
        let old = cms.get_with("a", &cached).await.unwrap();
        assert_eq!(value(&old), Some("1"), "read as of the hold");
        match cms.get_with("b", &cached).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "b came after the hold"),
            other => panic!("expected NotFound, got {other:?}"),
        }
        // A quorum read is current on every apiserver.
        assert_eq!(value(&cms.get("a").await.unwrap()), Some("2"));
        let listed = cms
            .list(&ListParams::default().labels("proxy-test=stale").match_any())
            .await
            .unwrap();
        let names: Vec<String> = listed.items.iter().map(|c| c.name_any()).collect();
        assert_eq!(names, ["a"]);
        assert_eq!(
            listed.metadata.resource_version,
            Some(record.at.to_string())
        );
        // A write made from the stale view meets optimistic concurrency.
        let mut stale = old.clone();
        stale
            .data
            .as_mut()
            .unwrap()
            .insert("k".into(), "from-stale".into());
        match cms.replace("a", &pp, &stale).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
            other => panic!("expected a conflict, got {other:?}"),
        }
        w.proxy.release(record.id);
        assert_eq!(value(&cms.get_with("a", &cached).await.unwrap()), Some("2"));
        assert!(cms.get_with("b", &cached).await.is_ok());
        assert!(w.proxy.fault_errors().is_empty());
    });
}

#[test]
fn coalescing_delivers_last_states_and_never_what_came_and_went() {
    with_proxy("coalesce", |w| async move {
        let cms = w.proxied_cms();
        let params = WatchParams::default()
            .labels("proxy-test=coalesce")
            .timeout(50);
        let pp = PostParams::default();
        let direct = w.direct_cms();
        direct
            .create(&pp, &labelled("a", "1", "coalesce"))
            .await
            .unwrap();
        let version = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version;
        let mut events = cms.watch(&params, &version.unwrap()).await.unwrap().boxed();
        let mut hold = configmap_hold(&w.ns);
        hold.release = Release::Coalesce;
        let record = w.proxy.hold(hold).await.unwrap();
        direct
            .patch("a", &PatchParams::default(), &merge("2"))
            .await
            .unwrap();
        direct
            .create(&pp, &labelled("brief", "1", "coalesce"))
            .await
            .unwrap();
        direct
            .create(&pp, &labelled("c", "1", "coalesce"))
            .await
            .unwrap();
        direct
            .patch("a", &PatchParams::default(), &merge("3"))
            .await
            .unwrap();
        direct
            .delete("brief", &DeleteParams::default())
            .await
            .unwrap();
        direct
            .patch("c", &PatchParams::default(), &merge("2"))
            .await
            .unwrap();
        assert_eq!(
            next_event(&mut events, Duration::from_millis(800))
                .await
                .as_ref()
                .map(said),
            None
        );
        w.proxy.release(record.id);
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["MODIFIED a=3", "ADDED c=2"]
        );
    });
}

#[test]
fn a_relist_ends_the_watch_with_410_and_the_client_misses_what_went_meanwhile() {
    with_proxy("relist", |w| async move {
        let cms = w.proxied_cms();
        let params = WatchParams::default()
            .labels("proxy-test=relist")
            .timeout(50);
        let pp = PostParams::default();
        let direct = w.direct_cms();
        direct
            .create(&pp, &labelled("a", "1", "relist"))
            .await
            .unwrap();
        let version = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version;
        let mut events = cms.watch(&params, &version.unwrap()).await.unwrap().boxed();
        let mut hold = configmap_hold(&w.ns);
        hold.release = Release::Relist;
        let record = w.proxy.hold(hold).await.unwrap();
        direct.delete("a", &DeleteParams::default()).await.unwrap();
        assert_eq!(
            next_event(&mut events, Duration::from_millis(800))
                .await
                .as_ref()
                .map(said),
            None
        );
        let released = w.proxy.release(record.id).unwrap();
        assert_eq!(released.ended, 1);
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["ERROR 410"]
        );
        assert!(events.next().await.is_none(), "the watch is over");
        // What a client lists again no longer has `a`, and it never saw it deleted.
        let listed = cms
            .list(&ListParams::default().labels("proxy-test=relist"))
            .await
            .unwrap();
        assert!(listed.items.is_empty());
        // A relist on demand, without a hold.
        let version = listed.metadata.resource_version.unwrap();
        let mut events = cms.watch(&params, &version).await.unwrap().boxed();
        // The relay opens once the apiserver answers the watch, however long that takes on a
        // loaded machine: the watch is ended as soon as it is open, and only it.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let ended = loop {
            match w.proxy.relist("", "configmaps") {
                0 if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                n => break n,
            }
        };
        assert_eq!(ended, 1, "one watch open through the proxy, ended");
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["ERROR 410"]
        );
    });
}

#[test]
fn a_client_that_reconnects_during_a_hold_is_held_too() {
    with_proxy("reconnect", |w| async move {
        let cms = w.proxied_cms();
        let params = WatchParams::default()
            .labels("proxy-test=reconnect")
            .timeout(50);
        let pp = PostParams::default();
        let direct = w.direct_cms();
        direct
            .create(&pp, &labelled("a", "1", "reconnect"))
            .await
            .unwrap();
        let version = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version;
        let version = version.unwrap();
        let record = w.proxy.hold(configmap_hold(&w.ns)).await.unwrap();
        let events = cms.watch(&params, &version).await.unwrap().boxed();
        direct
            .patch("a", &PatchParams::default(), &merge("2"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The client goes away and resumes from where it was.
        drop(events);
        let mut events = cms.watch(&params, &version).await.unwrap().boxed();
        assert_eq!(
            next_event(&mut events, Duration::from_millis(800))
                .await
                .as_ref()
                .map(said),
            None
        );
        w.proxy.release(record.id);
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["MODIFIED a=2"]
        );
    });
}

#[test]
fn a_frozen_proxy_holds_requests_and_watch_events_until_thawed() {
    with_proxy("freeze", |w| async move {
        let cms = w.proxied_cms();
        let version = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        // The label keeps out the namespace's kube-root-ca.crt, made meanwhile.
        let params = WatchParams::default()
            .labels("proxy-test=freeze")
            .timeout(50);
        let mut events = cms.watch(&params, &version).await.unwrap().boxed();
        w.proxy.freeze();
        let pp = PostParams::default();
        w.direct_cms()
            .create(&pp, &labelled("a", "1", "freeze"))
            .await
            .unwrap();
        assert_eq!(
            next_event(&mut events, Duration::from_millis(800))
                .await
                .as_ref()
                .map(said),
            None,
            "a watch event passed a freeze"
        );
        let read = tokio::spawn({
            let cms = cms.clone();
            async move { cms.get("a").await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!read.is_finished(), "a request passed a freeze");
        let before = w.proxy.requests().len();
        w.proxy.thaw();
        let got = read.await.unwrap().unwrap();
        assert_eq!(value(&got), Some("1"));
        assert_eq!(
            drain(&mut events, Duration::from_millis(500)).await,
            ["ADDED a=1"]
        );
        // The held read reached the apiserver only once thawed.
        assert_eq!(w.proxy.requests().len(), before + 1);
    });
}

/// A client of the proxy at `proxy` authenticating with `token`.
async fn token_client(proxy: &ApiProxy, token: &str) -> Client {
    let mut config = kube::Config::new(format!("https://{}", proxy.addr()).parse().unwrap());
    config.root_cert = Some(vec![pem_der(proxy.ca_pem())]);
    config.auth_info.token = Some(token.to_string().into());
    config.default_namespace = "default".into();
    Client::try_from(config).unwrap()
}

/// The DER of the one certificate in `pem`.
fn pem_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

#[test]
fn with_client_credentials_the_clients_own_rbac_decides_and_a_cut_off_client_is_gone() {
    use grove_conformance::proxy::{Credentials, ProxyOptions};
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    with_proxy("credentials", |w| async move {
        let dir = tempfile::tempdir().unwrap();
        let (_, cluster) = common::shared_cluster(Vec::new);
        let proxy = ApiProxy::start_with(
            cluster.control_plane.kubeconfig_path(),
            dir.path(),
            ProxyOptions {
                credentials: Credentials::Client,
                ..ProxyOptions::default()
            },
        )
        .await
        .unwrap();
        let pp = PostParams::default();
        let sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "reader"}})).unwrap();
        Api::<ServiceAccount>::namespaced(w.direct.clone(), &w.ns)
            .create(&pp, &sa)
            .await
            .unwrap();
        let role: Role = serde_json::from_value(json!({
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        }))
        .unwrap();
        Api::<Role>::namespaced(w.direct.clone(), &w.ns)
            .create(&pp, &role)
            .await
            .unwrap();
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": w.ns}],
        }))
        .unwrap();
        Api::<RoleBinding>::namespaced(w.direct.clone(), &w.ns)
            .create(&pp, &binding)
            .await
            .unwrap();
        w.direct_cms().create(&pp, &cm("a", "1")).await.unwrap();
        let request: TokenRequest =
            serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}}))
                .unwrap();
        let token = Api::<ServiceAccount>::namespaced(w.direct.clone(), &w.ns)
            .create_token_request("reader", &pp, &request)
            .await
            .unwrap()
            .status
            .unwrap()
            .token;
        let client = token_client(&proxy, &token).await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &w.ns);
        // RBAC takes a moment to see the binding.
        let mut read = cms.get("a").await;
        for _ in 0..50 {
            if read.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            read = cms.get("a").await;
        }
        assert_eq!(value(&read.unwrap()), Some("1"));
        match cms.create(&pp, &cm("b", "2")).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
            other => panic!("a write the client may not make went through: {other:?}"),
        }
        // Without a token of its own a client is anonymous.
        let anonymous = token_client(&proxy, "not-a-token").await;
        match Api::<ConfigMap>::namespaced(anonymous, &w.ns)
            .get("a")
            .await
        {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 401, "{status:?}"),
            other => panic!("a client without credentials read: {other:?}"),
        }
        let name = format!("serviceaccount {}/reader", w.ns);
        assert!(proxy.clients()[&name] >= 2, "{:?}", proxy.clients());
        let before = proxy.requests().len();
        proxy.cut_off(&name);
        assert!(cms.get("a").await.is_err(), "a client cut off was answered");
        assert_eq!(
            proxy.requests().len(),
            before,
            "a cut-off request was forwarded"
        );
        proxy.restore_client(&name);
        assert!(cms.get("a").await.is_ok());
    });
}
