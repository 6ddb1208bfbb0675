//! Nothing we start outlives us: not on drop, not when our process is SIGKILLed.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use grove_conformance::cluster::embedded::{
    ControlPlane, ControlPlaneOptions, ProvisionOptions, provision,
};
use grove_conformance::host::process;

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purposes: it holds no resources but a table slot.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next().map(|r| r.trim().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            found.push(pid);
        }
    }
    found
}

fn wait_dead(pids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    pids.iter().copied().filter(|p| alive(*p)).collect()
}

#[test]
fn dropping_the_control_plane_stops_every_process_and_removes_its_files() {
    let binaries = provision::resolve(&ProvisionOptions::default())
        .unwrap_or_else(|e| panic!("no control-plane binaries: {e}"));
    let runtime = grove_conformance::host::runtime("grove-test", None).unwrap();
    let (pids, kubeconfig, logs) = runtime.block_on(async {
        let cp = ControlPlane::start(ControlPlaneOptions::new(binaries))
            .await
            .unwrap();
        let pids = cp.pids();
        let kubeconfig = cp.kubeconfig_path().to_path_buf();
        let logs = cp.log_dir().to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the admin kubeconfig is readable by others");
        for pid in pids {
            assert!(alive(pid));
        }
        drop(cp);
        (pids, kubeconfig, logs)
    });
    assert_eq!(
        wait_dead(&pids),
        Vec::<u32>::new(),
        "processes survived teardown"
    );
    assert!(!kubeconfig.exists(), "the data directory survived teardown");
    assert!(!logs.exists(), "logs of a clean run were kept");
}

#[test]
fn a_sigkilled_harness_takes_its_control_plane_with_it() {
    let mut up = Command::new(common::harness_binary())
        .args(["up", "--nodes", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = up.stdout.take().unwrap();
    let mut kubeconfig = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(path) = line.strip_prefix("export KUBECONFIG=") {
            kubeconfig = Some(PathBuf::from(path));
            break;
        }
    }
    let kubeconfig = kubeconfig.expect("`up` never printed its kubeconfig");
    let data_dir = kubeconfig.parent().unwrap().to_path_buf();
    let children = children_of(up.id());
    assert!(
        children.len() >= 3,
        "expected etcd, apiserver and controller manager, found {children:?}"
    );
    up.kill().unwrap();
    up.wait().unwrap();
    assert_eq!(
        wait_dead(&children),
        Vec::<u32>::new(),
        "children outlived a SIGKILLed parent"
    );
    // The killed process could not remove its directory; the next start reaps it.
    assert!(data_dir.exists());
    process::reap_stale_dirs();
    assert!(!data_dir.exists(), "a stale directory was not reaped");
}
