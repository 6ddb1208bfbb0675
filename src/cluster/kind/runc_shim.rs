//! Privileged containers on hosts whose root lacks `CAP_SYS_RESOURCE`.
//!
//! kind's nodes are `--privileged` containers, for which Docker asks runc for every capability;
//! where the capability bounding set lacks `CAP_SYS_RESOURCE`, runc fails ("unable to apply
//! caps: operation not permitted"). The fix, applied only when that bit is missing: a runc
//! shim — this executable under the name [`SHIM_NAME`] — registered as dockerd's default
//! runtime. It removes `CAP_SYS_RESOURCE` from the OCI bundle's `config.json` on
//! `create`/`run` and from the `--process` file on `exec`, then runs the real runc.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::host::docker;

/// The name the shim is installed and registered under.
pub const SHIM_NAME: &str = "grove-conformance-runc";
/// The capability the host cannot grant.
const CAPABILITY: &str = "CAP_SYS_RESOURCE";
/// Its bit number.
const CAP_SYS_RESOURCE_BIT: u32 = 24;
/// dockerd's configuration file.
const DAEMON_JSON: &str = "/etc/docker/daemon.json";

/// Whether a `CapBnd:` line of `/proc/self/status` includes `CAP_SYS_RESOURCE`.
pub fn bounding_set_has_sys_resource(status: &str) -> Option<bool> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))?
        .trim();
    let bits = u64::from_str_radix(hex, 16).ok()?;
    Some(bits >> CAP_SYS_RESOURCE_BIT & 1 == 1)
}

/// Why privileged containers cannot be made to work.
#[derive(Debug, thiserror::Error)]
pub enum RuncShimError {
    /// The capability bounding set could not be read.
    #[error("failed to read /proc/self/status")]
    Status(#[source] std::io::Error),
    /// Installing the shim or writing dockerd's configuration failed.
    #[error("failed to {what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// dockerd's configuration is not JSON.
    #[error("failed to read {DAEMON_JSON} as JSON: fix it, then run again")]
    DaemonJson(#[source] serde_json::Error),
    /// No dockerd took the signal to reload.
    #[error(
        "failed to reload dockerd: this host's capability bounding set lacks {CAPABILITY}, so privileged containers need the runc shim {}; it is registered in {DAEMON_JSON}, but no dockerd could be told to reload: restart dockerd",
        shim.display()
    )]
    NotReloaded {
        /// The installed shim.
        shim: PathBuf,
    },
    /// dockerd reloaded without taking the shim as its default runtime.
    #[error(
        "failed to make the runc shim {} dockerd's default runtime: it is registered in {DAEMON_JSON}, but dockerd did not take it on reload (was it started with --default-runtime or --add-runtime {SHIM_NAME}?): restart dockerd",
        shim.display()
    )]
    NotTaken {
        /// The installed shim.
        shim: PathBuf,
    },
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RuncShimError {
    let path = path.to_path_buf();
    move |source| RuncShimError::Io { what, path, source }
}

fn default_runtime() -> Option<String> {
    docker::info("{{.DefaultRuntime}}")
}

/// Makes sure Docker can run privileged containers here: nothing to do where the bounding set
/// has `CAP_SYS_RESOURCE`; elsewhere installs the shim into `dir`, registers it in
/// `/etc/docker/daemon.json` as the default runtime and reloads dockerd (SIGHUP), saying so.
/// `harness` is the grove-conformance executable the shim is a copy of.
pub fn ensure_privileged_works(
    dir: &Path,
    harness: &Path,
    progress: bool,
) -> Result<(), RuncShimError> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(RuncShimError::Status)?;
    if bounding_set_has_sys_resource(&status) != Some(false) {
        return Ok(());
    }
    let registered = std::fs::read_to_string(DAEMON_JSON)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|c| c["runtimes"][SHIM_NAME]["path"].as_str().map(PathBuf::from));
    if default_runtime().as_deref() == Some(SHIM_NAME) && registered.is_some_and(|p| p.exists()) {
        return Ok(());
    }
    let shim = dir.join(SHIM_NAME);
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let tmp = dir.join(format!(".{SHIM_NAME}.tmp"));
    std::fs::copy(harness, &tmp).map_err(io_err("copy the harness to", &tmp))?;
    std::fs::rename(&tmp, &shim).map_err(io_err("install", &shim))?;
    let text = std::fs::read_to_string(DAEMON_JSON).unwrap_or_else(|_| "{}".into());
    let mut config: Value = serde_json::from_str(&text).map_err(RuncShimError::DaemonJson)?;
    register(&mut config, &shim);
    std::fs::create_dir_all("/etc/docker").map_err(io_err("create", Path::new("/etc/docker")))?;
    std::fs::write(
        DAEMON_JSON,
        serde_json::to_string_pretty(&config).expect("JSON serializes"),
    )
    .map_err(io_err("write", Path::new(DAEMON_JSON)))?;
    let reloaded = Command::new("pkill")
        .args(["-HUP", "-x", "dockerd"])
        .status()
        .is_ok_and(|s| s.success());
    if !reloaded {
        return Err(RuncShimError::NotReloaded { shim });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while default_runtime().as_deref() != Some(SHIM_NAME) {
        if Instant::now() > deadline {
            return Err(RuncShimError::NotTaken { shim });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if progress {
        tracing::info!(
            "this host's capability bounding set lacks {CAPABILITY}, which privileged containers (kind's nodes) ask for: registered the runc shim {} as dockerd's default runtime in {DAEMON_JSON} and reloaded dockerd",
            shim.display()
        );
    }
    Ok(())
}

/// Adds the shim to a dockerd configuration as the default runtime.
pub fn register(config: &mut Value, shim: &Path) {
    if !config.is_object() {
        *config = Value::Object(Default::default());
    }
    let runtimes = config
        .as_object_mut()
        .expect("an object")
        .entry("runtimes")
        .or_insert_with(|| Value::Object(Default::default()));
    if !runtimes.is_object() {
        *runtimes = Value::Object(Default::default());
    }
    runtimes[SHIM_NAME] = serde_json::json!({"path": shim.to_string_lossy()});
    config["default-runtime"] = Value::String(SHIM_NAME.into());
}

/// Removes the capability from every capability set of an OCI `process` object.
fn strip_capability(process: &mut Value) -> bool {
    let mut changed = false;
    if let Some(sets) = process
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        for set in sets.values_mut() {
            if let Some(list) = set.as_array_mut() {
                let before = list.len();
                list.retain(|c| c.as_str() != Some(CAPABILITY));
                changed |= list.len() != before;
            }
        }
    }
    changed
}

/// Rewrites an OCI bundle's `config.json` (`bundle`) or an `exec --process` file without the
/// capability.
pub fn strip_file(path: &Path, bundle: bool) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let Ok(mut json) = serde_json::from_str::<Value>(&text) else {
        return Ok(());
    };
    let changed = if bundle {
        json.get_mut("process").is_some_and(strip_capability)
    } else {
        strip_capability(&mut json)
    };
    if changed {
        std::fs::write(path, serde_json::to_vec(&json).expect("JSON serializes"))?;
    }
    Ok(())
}

/// The file the shim must rewrite for runc arguments `args`: `(path, is a bundle config)`.
pub fn file_to_strip(args: &[String]) -> Option<(PathBuf, bool)> {
    let mut command = None;
    let mut bundle = None;
    let mut process = None;
    let mut previous = "";
    for arg in args {
        match previous {
            "--bundle" | "-b" => bundle = Some(arg.clone()),
            "--process" | "-p" => process = Some(arg.clone()),
            _ => {}
        }
        if let Some(b) = arg.strip_prefix("--bundle=") {
            bundle = Some(b.to_string());
        }
        if let Some(p) = arg.strip_prefix("--process=") {
            process = Some(p.to_string());
        }
        if command.is_none() && matches!(arg.as_str(), "create" | "run" | "exec") {
            command = Some(arg.clone());
        }
        previous = arg;
    }
    match command.as_deref() {
        Some("create" | "run") => Some((
            Path::new(bundle.as_deref().unwrap_or(".")).join("config.json"),
            true,
        )),
        Some("exec") => process.map(|p| (PathBuf::from(p), false)),
        _ => None,
    }
}

/// The shim's entry point: strip, then become the real runc.
pub fn shim_main() -> ! {
    use std::os::unix::process::CommandExt;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some((path, bundle)) = file_to_strip(&args)
        && let Err(e) = strip_file(&path, bundle)
    {
        eprintln!("{SHIM_NAME}: {}: {e}", path.display());
    }
    let runc = ["/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("runc");
    let error = Command::new(runc).args(&args).exec();
    eprintln!("{SHIM_NAME}: failed to run {runc}: {error}");
    std::process::exit(127)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounding_set_is_read_from_proc_status() {
        assert_eq!(
            bounding_set_has_sys_resource("Name:\tx\nCapBnd:\t000001ffffffffff\n"),
            Some(true)
        );
        assert_eq!(
            bounding_set_has_sys_resource("CapBnd:\t000001fffeffffff\n"),
            Some(false)
        );
        assert_eq!(bounding_set_has_sys_resource("Name:\tx\n"), None);
    }

    #[test]
    fn the_file_to_rewrite_follows_runc_arguments() {
        let args = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            file_to_strip(&args("--root /r create --bundle /b id")),
            Some((PathBuf::from("/b/config.json"), true))
        );
        assert_eq!(
            file_to_strip(&args("--log x exec --process=/p.json id")),
            Some((PathBuf::from("/p.json"), false))
        );
        assert_eq!(file_to_strip(&args("--root /r start id")), None);
    }

    #[test]
    fn the_capability_leaves_every_set_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let config = serde_json::json!({"process": {"capabilities": {
            "bounding": ["CAP_CHOWN", "CAP_SYS_RESOURCE"],
            "effective": ["CAP_SYS_RESOURCE", "CAP_KILL"],
        }}, "root": {"path": "rootfs"}});
        std::fs::write(&path, config.to_string()).unwrap();
        strip_file(&path, true).unwrap();
        let after: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            after["process"]["capabilities"]["bounding"],
            serde_json::json!(["CAP_CHOWN"])
        );
        assert_eq!(
            after["process"]["capabilities"]["effective"],
            serde_json::json!(["CAP_KILL"])
        );
        assert_eq!(after["root"]["path"], "rootfs");
    }

    #[test]
    fn registering_keeps_other_settings_and_runtimes() {
        let mut config = serde_json::json!({"runtimes": {"other": {"path": "/o"}}, "debug": true});
        register(&mut config, Path::new("/c/grove-conformance-runc"));
        assert_eq!(config["default-runtime"], SHIM_NAME);
        assert_eq!(config["runtimes"]["other"]["path"], "/o");
        assert_eq!(
            config["runtimes"][SHIM_NAME]["path"],
            "/c/grove-conformance-runc"
        );
        assert_eq!(config["debug"], true);
    }
}
