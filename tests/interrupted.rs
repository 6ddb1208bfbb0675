//! Runs stopped by a signal leave nothing behind: a `run` against a cluster that outlives it
//! (`--kubeconfig`) deletes the case namespaces it made, and `bench` passes SIGTERM on to the
//! `run` it is waiting for, which tears its target down, instead of leaving it running.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits for `child` to exit, at most `limit`.
fn wait(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not exit within {limit:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The fields of `/proc/<pid>/stat` after the command name (state, ppid, …): the name is in
/// parentheses and may hold spaces, so they are read after its `)`.
fn stat(pid: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The pids whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            stat(&pid.to_string()).and_then(|f| f.get(1).and_then(|p| p.parse::<u32>().ok()))
                == Some(parent)
        })
        .collect()
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    stat(&pid.to_string())
        .and_then(|f| f.first().cloned())
        .is_some_and(|state| state != "Z" && state != "X")
}

#[test]
fn an_interrupted_run_against_a_kubeconfig_deletes_its_case_namespaces() {
    let world = common::embedded_world();
    let handles = world.target().handles().clone();
    let out = tempfile::tempdir().unwrap();
    let mut run = Command::new(common::harness_binary())
        .current_dir(common::root())
        .args(["run", "--kubeconfig"])
        .arg(&handles.kubeconfig)
        .args(["--filter", "budget-exhausted-fails-job", "--out"])
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(handles.client.clone());
    let selector = ListParams::default().labels("grove-conformance.io/case");
    let made: Vec<String> = world.runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let list = namespaces.list(&selector).await.unwrap();
            let names: Vec<String> = list
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect();
            if !names.is_empty() {
                return names;
            }
            assert!(Instant::now() < deadline, "the run made no case namespace");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    signal(&run, "INT");
    let status = wait(&mut run, Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "{status:?}");
    world.runtime.block_on(async {
        for name in &made {
            match namespaces.get_opt(name).await.unwrap() {
                None => {}
                Some(ns) => assert!(
                    ns.metadata.deletion_timestamp.is_some(),
                    "the interrupted run left namespace {name} behind"
                ),
            }
        }
    });
}

#[test]
fn bench_passes_sigterm_on_to_its_run_and_exits_interrupted() {
    let out = tempfile::tempdir().unwrap();
    let mut bench = Command::new(common::harness_binary())
        .current_dir(common::root())
        .args(["bench", "--runs", "3", "--out"])
        .arg(out.path())
        .args(["--", "--filter", "all-pods-succeed-completes-clique"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let run = loop {
        if let Some(pid) = children_of(bench.id()).into_iter().next() {
            break pid;
        }
        assert!(Instant::now() < deadline, "bench started no run");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Once the run is under way (its console shows the cluster starting).
    let console = out.path().join("run-1/console.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&console).is_ok_and(|t| !t.is_empty()) {
        assert!(Instant::now() < deadline, "the run wrote nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&bench, "TERM");
    let status = wait(&mut bench, Duration::from_secs(150));
    let mut said = String::new();
    std::io::Read::read_to_string(&mut bench.stderr.take().unwrap(), &mut said).unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}: {said}");
    assert!(!alive(run), "bench exited and left its run {run} running");
    assert!(said.contains("interrupted by SIGTERM"), "{said}");
    assert!(
        !Path::new(&out.path().join("run-2")).exists(),
        "a run started after the signal"
    );
}
