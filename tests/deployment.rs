//! The reference operator deployed in kind from `reference-operator/deploy/` (its image built
//! here from this very binary and loaded into the nodes), certified through
//! `--implementation-deployment`: its traffic through the harness's API proxy with its own
//! ServiceAccount token, pauses as proxy freezes, crashes as pod kills, pinned crashes and
//! held watches. Then what must never be left changed: the Deployment after the run, after a
//! harness killed outright (the marker), after SIGINT, and after each kind of bad input.
//!
//! Last, the harness itself in the cluster against the same deployed operator: its
//! conformance image run as the Job of `in-cluster/job.yaml`, then by Hydrophone
//! (`HYDROPHONE`, or `hydrophone` on PATH); each JUnit must count what a direct run of the
//! same focus counts. Without a Hydrophone binary that last part says `skipped:` with the
//! reason.
//!
//! Needs `GROVE_CONFORMANCE_TARGET=kind` (a Deployment's pods need real kubelets); on any
//! other target it says `skipped:` with the reason and checks nothing else.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use grove_conformance::cluster::{TargetOptions, acquire, kind};
use grove_conformance::errors;
use grove_conformance::host::image::{self, Role};
use grove_conformance::implementation::deployment::{
    DeploymentError, DeploymentRef, MARKER, restorable_view,
};
use grove_conformance::implementation::{ImplementationSpec, Instance, InstanceError};
use grove_conformance::proxy::{ApiProxy, Credentials, ProxyOptions};
use grove_conformance::report::Outcome;
use grove_conformance::runner::{RunSettings, run_cases};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, ResourceExt};

const NAMESPACE: &str = "grove-reference-operator";
const NAME: &str = "grove-reference-operator";

/// The cases run against the deployed operator: the seeds' kind subset, and one of each
/// control the deployment mode adds (a pause, a crash while down, a pinned crash, a hold).
const CASES: [&str; 10] = [
    "leader-completes-while-worker-fails",
    "evicted-pod-fails-clique",
    "evicted-unschedulable-pending-pod-fails-clique",
    "regular-member-cleaned-up-when-group-completes",
    "budget-exhausted-fails-job",
    "node-loss-fails-clique",
    "pod-vanishes-while-controller-paused-fails-clique",
    "pod-vanishes-while-controller-down-fails-clique",
    "crash-at-first-deletion-of-a-restart",
    "group-restart-seen-late-by-the-clique-cache",
];

/// Server-side applies every object of the YAML files in `dir` (but the kustomization),
/// the operator's image set to `image`.
async fn apply_manifests(client: &Client, dir: &Path, image: &str) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    // The namespace first.
    files.sort_by_key(|p| !p.ends_with("namespace.yaml"));
    let mut objects = Vec::new();
    for file in files {
        for mut object in documents(&file) {
            if object["kind"] == "Deployment" {
                object["spec"]["template"]["spec"]["containers"][0]["image"] = image.into();
            }
            objects.push(object);
        }
    }
    apply_objects(client, objects).await;
}

/// The YAML documents of `file`.
fn documents(file: &Path) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(file).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// Server-side applies `objects`, in order.
async fn apply_objects(client: &Client, objects: Vec<serde_json::Value>) {
    let params = PatchParams::apply("grove-conformance-test").force();
    for object in objects {
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let api = dynamic_api(client, &object).await;
        api.patch(&object.name_any(), &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("applying {}: {e}", object.name_any()));
    }
}

/// The API of `object`'s kind, in its namespace when it has one.
async fn dynamic_api(client: &Client, object: &DynamicObject) -> Api<DynamicObject> {
    let types = object.types.clone().unwrap();
    let gvk = kube::core::GroupVersionKind::try_from(&types).unwrap();
    let (resource, caps) = pinned_kind(client, &gvk).await.unwrap();
    match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object.namespace().as_deref().unwrap_or("default"),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    }
}

/// Runs `in-cluster/job.yaml` as its comments say, with `image` and `focus`: the exit code of
/// its conformance container, and the JUnit file and `done` file it left in the results
/// container. Deletes what it applied.
async fn run_job(
    client: &Client,
    manifest: &Path,
    image: &str,
    focus: &str,
) -> (i32, String, String) {
    use tokio::io::AsyncReadExt;
    let mut objects = documents(manifest);
    for object in &mut objects {
        if object["kind"] != "Job" {
            continue;
        }
        let containers = &mut object["spec"]["template"]["spec"]["containers"];
        for container in containers.as_array_mut().unwrap() {
            container["image"] = image.into();
            for env in container["env"].as_array_mut().into_iter().flatten() {
                if env["name"] == "E2E_FOCUS" {
                    env["value"] = focus.into();
                }
            }
        }
    }
    apply_objects(client, objects.clone()).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(client.clone(), "grove-conformance");
    let selector = kube::api::ListParams::default().labels("job-name=grove-conformance");
    let deadline = Instant::now() + Duration::from_secs(900);
    let (pod, code) = loop {
        let found = pods.list(&selector).await.unwrap();
        let ended = found.items.iter().find_map(|p| {
            let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
            let conformance = statuses.iter().find(|c| c.name == "conformance")?;
            let terminated = conformance.state.as_ref()?.terminated.as_ref()?;
            Some((p.name_any(), terminated.exit_code))
        });
        if let Some(ended) = ended {
            break ended;
        }
        assert!(Instant::now() < deadline, "the Job's run never ended");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let read = |path: &'static str| {
        let pods = pods.clone();
        let pod = pod.clone();
        async move {
            let params = kube::api::AttachParams::default()
                .container("results")
                .stdout(true)
                .stderr(false);
            let mut process = pods
                .exec(&pod, ["cat", path], &params)
                .await
                .unwrap_or_else(|e| panic!("reading {path} in {pod}: {e}"));
            let mut text = String::new();
            process
                .stdout()
                .unwrap()
                .read_to_string(&mut text)
                .await
                .unwrap();
            let _ = process.join().await;
            text
        }
    };
    let junit = read("/tmp/results/junit_01.xml").await;
    let done = read("/tmp/results/done").await;
    // What it applied goes, the namespace (and the Job in it) last.
    let params = kube::api::DeleteParams::background();
    for object in objects.into_iter().rev() {
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let api = dynamic_api(client, &object).await;
        let _ = api.delete(&object.name_any(), &params).await;
    }
    (code, junit, done)
}

/// Waits until Deployment `name` has a ready replica.
async fn wait_ready(client: &Client, name: &str) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let d = api.get(name).await.unwrap();
        let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
        if ready >= 1 {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never became ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn view(client: &Client, name: &str) -> serde_json::Value {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    restorable_view(&api.get(name).await.unwrap())
}

/// A Deployment of `replicas` busybox pods that ignore `KUBECONFIG` (they only sleep).
async fn deaf(client: &Client, name: &str, replicas: i32) {
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": NAME,
                    "terminationGracePeriodSeconds": 0,
                    // The namespace enforces the restricted Pod Security Standard.
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "sleeper",
                        "image": "busybox:latest",
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                },
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
}

/// (testcases, failures, errors, skipped) in a JUnit file.
fn junit_counts(path: &Path) -> (usize, usize, usize, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    junit_text_counts(&text)
}

/// (testcases, failures, errors, skipped) in a JUnit document.
fn junit_text_counts(text: &str) -> (usize, usize, usize, usize) {
    let count = |tag: &str| text.matches(tag).count();
    (
        count("<testcase "),
        count("<failure"),
        count("<error"),
        count("<skipped"),
    )
}

/// The Hydrophone binary: `HYDROPHONE`, else `hydrophone` on PATH; or why there is none.
fn hydrophone() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("HYDROPHONE") {
        let path = PathBuf::from(path);
        return if grove_conformance::host::is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "HYDROPHONE names {}, which is not an executable file",
                path.display()
            ))
        };
    }
    grove_conformance::host::which("hydrophone").ok_or_else(|| {
        "no Hydrophone binary (set HYDROPHONE, or `go install sigs.k8s.io/hydrophone@v0.8.0`)"
            .to_string()
    })
}

fn spec_of(name: &str, proxy_address: std::net::IpAddr) -> ImplementationSpec {
    let mut deployment = DeploymentRef::parse(&format!("{NAMESPACE}/{name}"), None).unwrap();
    deployment.traffic_timeout = Duration::from_secs(15);
    ImplementationSpec::Deployment {
        deployment,
        proxy_address,
    }
}

#[test]
fn the_deployed_reference_operator_passes_with_every_fault_and_is_restored() {
    let options = TargetOptions::from_env().unwrap_or_else(|e| panic!("{e}"));
    if !options.kind {
        eprintln!(
            "skipped: a deployed implementation needs real kubelets; run with GROVE_CONFORMANCE_TARGET=kind"
        );
        return;
    }
    let root = common::root();
    let harness = common::harness_binary();
    let spec = options.spec(harness).unwrap();
    let runtime = grove_conformance::host::runtime("grove-test", None).unwrap();
    let target = runtime
        .block_on(acquire(&spec, grove_reference_operator::crds(), true))
        .unwrap_or_else(|e| panic!("{:#}", errors::chain(&e)));
    let cluster = target.kind_cluster().expect("a kind target").name.clone();
    let tag = format!("grove-reference-operator:test-{}", std::process::id());
    image::build(harness, &tag, Role::ReferenceOperator, root).unwrap();
    kind::load_image(&cluster, &tag).unwrap();
    let _ = Command::new("docker").args(["rmi", &tag]).output();
    let gateway = kind::network_gateway().unwrap();
    let handles = target.handles().clone();
    let client = handles.client.clone();
    let catalog = common::repository_catalog();
    let logs = tempfile::tempdir().unwrap();

    runtime.block_on(async {
        apply_manifests(&client, &root.join("reference-operator/deploy"), &tag).await;
        wait_ready(&client, NAME).await;
        let before = view(&client, NAME).await;

        // Bad input: each a clear error naming the Deployment, nothing left changed.
        let proxy = Arc::new(
            ApiProxy::start_with(
                &handles.kubeconfig,
                logs.path(),
                ProxyOptions {
                    listen: gateway,
                    credentials: Credentials::Client,
                },
            )
            .await
            .unwrap(),
        );
        let start = |name: &str| {
            let ImplementationSpec::Deployment {
                deployment,
                proxy_address,
            } = spec_of(name, gateway)
            else {
                panic!("spec_of makes a Deployment");
            };
            let proxy = proxy.clone();
            let client = client.clone();
            let kubeconfig = handles.kubeconfig.clone();
            let log = logs.path().join(format!("{name}.log"));
            async move {
                Instance::start_deployed(
                    &deployment,
                    proxy_address,
                    client,
                    &kubeconfig,
                    proxy,
                    &log,
                )
                .await
            }
        };
        let error = |r: Result<Instance, InstanceError>| match r {
            Err(InstanceError::Deployment(e)) => e,
            Err(e) => panic!("not a deployment error: {e}"),
            Ok(_) => panic!("bad input was accepted"),
        };
        let missing = error(start("no-such-operator").await);
        assert!(matches!(missing, DeploymentError::Missing(_)), "{missing}");
        assert!(
            missing
                .to_string()
                .contains("Deployment grove-reference-operator/no-such-operator does not exist"),
            "{missing}"
        );
        deaf(&client, "idle-operator", 0).await;
        let idle_before = view(&client, "idle-operator").await;
        let idle = error(start("idle-operator").await);
        assert!(matches!(idle, DeploymentError::NotReady(..)), "{idle}");
        assert!(idle.to_string().contains("has no ready pod"), "{idle}");
        assert_eq!(view(&client, "idle-operator").await, idle_before);
        deaf(&client, "deaf-operator", 1).await;
        wait_ready(&client, "deaf-operator").await;
        let deaf_before = view(&client, "deaf-operator").await;
        let silent = error(start("deaf-operator").await);
        assert!(
            matches!(silent, DeploymentError::NoTraffic { .. }),
            "{silent}"
        );
        assert!(silent.to_string().contains("ignore KUBECONFIG"), "{silent}");
        assert_eq!(view(&client, "deaf-operator").await, deaf_before);

        // A harness killed outright leaves the marker; the next start restores from it.
        let killed = start(NAME).await.unwrap();
        std::mem::forget(killed);
        let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
        assert!(
            api.get(NAME)
                .await
                .unwrap()
                .annotations()
                .contains_key(MARKER)
        );
        assert_ne!(view(&client, NAME).await, before);

        // The cases, through a proxy of the run's own.
        let cases: Vec<_> = catalog
            .cases
            .iter()
            .filter(|c| CASES.contains(&c.name.as_str()))
            .cloned()
            .collect();
        assert_eq!(
            cases
                .iter()
                .map(|c| c.name.as_str())
                .collect::<std::collections::BTreeSet<_>>(),
            CASES.into_iter().collect(),
            "a case of the deployed subset is missing from the catalog"
        );
        let settings = RunSettings {
            jobs: 4,
            ..common::settings(spec_of(NAME, gateway), logs.path().join("run"))
        };
        let results = run_cases(&handles, catalog.clone(), cases, &settings, |_| {})
            .await
            .unwrap();
        let log =
            std::fs::read_to_string(logs.path().join("run/implementation.log")).unwrap_or_default();
        for line in log
            .lines()
            .filter(|l| l.contains("served again") || l.contains("restoring"))
        {
            eprintln!("{line}");
        }
        let not_passed: Vec<String> = results
            .cases
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Pass))
            .map(|r| format!("{}: {:?}", r.case, r.outcome))
            .collect();
        assert!(not_passed.is_empty(), "{not_passed:#?}\n{log}");
        assert!(
            log.contains("still carried the changes of an earlier run"),
            "the marker was not restored from:\n{log}"
        );
        assert!(log.contains("served again through the proxy"), "{log}");
        assert_eq!(
            view(&client, NAME).await,
            before,
            "the Deployment was not restored"
        );
    });

    // SIGINT in the middle of a run restores it too.
    let before = runtime.block_on(view(&client, NAME));
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(harness)
        .current_dir(root)
        .args(["run", "--kubeconfig"])
        .arg(&handles.kubeconfig)
        .args([
            "--implementation-deployment",
            &format!("{NAMESPACE}/{NAME}"),
            "--filter",
            "budget-exhausted-fails-job",
            "--out",
        ])
        .arg(out.path())
        .spawn()
        .unwrap();
    runtime.block_on(async {
        let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !api
            .get(NAME)
            .await
            .unwrap()
            .annotations()
            .contains_key(MARKER)
        {
            assert!(
                Instant::now() < deadline,
                "the run never changed the Deployment"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let signalled = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(
        runtime.block_on(view(&client, NAME)),
        before,
        "SIGINT left the Deployment changed"
    );

    // The harness in the cluster against the same deployed operator: its image, run first
    // as the Job of `in-cluster/job.yaml`, then by Hydrophone; each must count what a direct
    // run of the same focus counts.
    let conformance = format!("grove-conformance-test/conformance:{}", std::process::id());
    let busybox = format!("grove-conformance-test/busybox:{}", std::process::id());
    image::build(harness, &conformance, Role::Conformance, root).unwrap();
    let tagged = Command::new("docker")
        .args(["tag", "busybox:latest", &busybox])
        .status()
        .unwrap();
    assert!(tagged.success(), "the busybox fixture image is missing");
    for tag in [&conformance, &busybox] {
        kind::load_image(&cluster, tag).unwrap();
        let _ = Command::new("docker").args(["rmi", tag]).output();
    }
    let focus = "all-pods-succeed-completes-clique|pod-vanishes-while-controller-down-fails-clique|budget-exhausted-fails-job";
    let deployment = format!("{NAMESPACE}/{NAME}");
    let direct = tempfile::tempdir().unwrap();
    let run = Command::new(harness)
        .current_dir(root)
        .args(["run", "--kubeconfig"])
        .arg(&handles.kubeconfig)
        .args([
            "--implementation-deployment",
            &deployment,
            "--focus",
            focus,
            "--out",
        ])
        .arg(direct.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the direct run failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let direct_counts = junit_counts(&direct.path().join("junit.xml"));
    assert_eq!(direct_counts, (3, 0, 0, 0));

    let started = Instant::now();
    let (code, junit, done) = runtime.block_on(run_job(
        &client,
        &root.join("in-cluster/job.yaml"),
        &conformance,
        focus,
    ));
    eprintln!("the Job took {:.0?}", started.elapsed());
    assert_eq!(code, 0, "the Job's run failed:\n{junit}");
    assert_eq!(done.trim(), "/tmp/results/junit_01.xml", "{done}");
    assert_eq!(junit_text_counts(&junit), direct_counts, "{junit}");
    assert_eq!(
        runtime.block_on(view(&client, NAME)),
        before,
        "the Job's run left the Deployment changed"
    );

    let hydrophone = match hydrophone() {
        Ok(path) => path,
        Err(why) => {
            eprintln!("skipped: the Hydrophone part: {why}");
            return;
        }
    };
    let through = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("900")
        .arg(&hydrophone)
        .arg("--kubeconfig")
        .arg(&handles.kubeconfig)
        .args([
            "--conformance-image",
            &conformance,
            "--busybox-image",
            &busybox,
            "--focus",
            focus,
            &format!("--extra-args=--implementation-deployment={deployment}"),
            "--output-dir",
        ])
        .arg(through.path())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("Hydrophone took {:.0?}", started.elapsed());
    assert!(out.status.success(), "Hydrophone failed:\n{said}");
    let e2e = std::fs::read_to_string(through.path().join("e2e.log")).unwrap();
    assert!(e2e.contains("Will run 3 of"), "{e2e}");
    assert_eq!(e2e.matches('•').count(), 3, "{e2e}");
    let counted = junit_counts(&through.path().join("junit_01.xml"));
    assert_eq!(counted, direct_counts, "{said}");
    assert_eq!(
        runtime.block_on(view(&client, NAME)),
        before,
        "the in-cluster run left the Deployment changed"
    );
}
