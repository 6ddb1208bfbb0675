//! The Go build of the binaries: a wrapper module for k8s.io/kubernetes, and etcd.

use std::path::Path;

use crate::host::is_executable;

use super::builder::Builder;
use super::builder::lock_build;
use super::resolve::{
    Component, ETCD_VERSION, KUBERNETES_VERSION, ProvisionError, cache_bin_dir, io_err,
};

/// The replace lines a wrapper module needs: every staging module `k8s.io/X v0.0.0` that
/// `k8s.io/kubernetes` requires maps to `k8s.io/X v0.<minor>.<patch>`.
pub fn staging_replaces(kubernetes_go_mod: &str, kubernetes_version: &str) -> Vec<String> {
    let staging_version = kubernetes_version.replacen("v1.", "v0.", 1);
    let mut modules: Vec<&str> = kubernetes_go_mod
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let first = words.next()?;
            let (module, version) = if first == "require" {
                (words.next()?, words.next()?)
            } else {
                (first, words.next()?)
            };
            (module.starts_with("k8s.io/") && version == "v0.0.0").then_some(module)
        })
        .collect();
    modules.sort_unstable();
    modules.dedup();
    modules
        .into_iter()
        .map(|m| format!("replace {m} => {m} {staging_version}"))
        .collect()
}

/// The `-ldflags` that make `/version` report the real version instead of v0.0.0-master.
pub fn version_ldflags(kubernetes_version: &str) -> String {
    let minor = kubernetes_version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .unwrap_or("0");
    let mut flags = String::from("-s -w");
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        flags.push_str(&format!(
            " -X {package}.gitVersion={kubernetes_version} -X {package}.gitMajor=1 \
             -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
    }
    flags
}

/// Builds the commands `commands` (`k8s.io/kubernetes/cmd/<name>`) at [`KUBERNETES_VERSION`]
/// into `out`, in `dir` (three steps). A wrapper module, because k8s.io/kubernetes replaces
/// its staging modules with local paths and replaces only apply in the main module.
pub(crate) fn build_kubernetes(
    builder: &mut Builder,
    dir: &Path,
    commands: &[&str],
    out: &Path,
) -> Result<(), ProvisionError> {
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let seed = "module local/grove-conformance-seed\n\ngo 1.24.0\n";
    std::fs::write(dir.join("go.mod"), seed).map_err(io_err("write", dir))?;
    let info = builder.run(
        &format!("resolve k8s.io/kubernetes@{KUBERNETES_VERSION}"),
        dir,
        &[
            "mod",
            "download",
            "-json",
            &format!("k8s.io/kubernetes@{KUBERNETES_VERSION}"),
        ],
        true,
    )?;
    let info: serde_json::Value =
        serde_json::from_str(&info).map_err(|e| ProvisionError::Build {
            step: "read `go mod download` output".into(),
            log: builder.log_path().to_path_buf(),
            tail: e.to_string(),
        })?;
    let go_mod_path = info["GoMod"].as_str().unwrap_or_default().to_string();
    let upstream_go_mod =
        std::fs::read_to_string(&go_mod_path).map_err(io_err("read", Path::new(&go_mod_path)))?;
    let mut go_mod = format!(
        "module local/grove-conformance-kubernetes\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes {KUBERNETES_VERSION}\n\n"
    );
    for line in staging_replaces(&upstream_go_mod, KUBERNETES_VERSION) {
        go_mod.push_str(&line);
        go_mod.push('\n');
    }
    std::fs::write(dir.join("go.mod"), go_mod).map_err(io_err("write", dir))?;
    let mut tools = String::from("//go:build tools\n\npackage tools\n\nimport (\n");
    for command in commands {
        tools.push_str(&format!("\t_ \"k8s.io/kubernetes/cmd/{command}\"\n"));
    }
    tools.push_str(")\n");
    std::fs::write(dir.join("tools.go"), tools).map_err(io_err("write", dir))?;
    builder.run(
        "download Kubernetes modules (go mod tidy)",
        dir,
        &["mod", "tidy"],
        false,
    )?;
    let ldflags = version_ldflags(KUBERNETES_VERSION);
    let out = format!("{}/", out.display());
    let packages: Vec<String> = commands
        .iter()
        .map(|c| format!("k8s.io/kubernetes/cmd/{c}"))
        .collect();
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    builder.compile(
        &format!(
            "compile {} (the long step: 10-30 minutes on 2 cores when nothing is cached)",
            commands.join(", ")
        ),
        dir,
        &["-trimpath", "-ldflags", &ldflags, "-o", &out],
        &packages,
    )?;
    Ok(())
}

/// Builds the three binaries into the cache under an exclusive file lock. Another process
/// that holds the lock is waited for; if it produced the binaries, nothing is built again.
pub(super) fn build(root: &Path, progress: bool) -> Result<(), ProvisionError> {
    let _lock = lock_build(root, "the control-plane binaries", progress)?;
    let cache = cache_bin_dir(root);
    if Component::ALL
        .iter()
        .all(|c| is_executable(&cache.join(c.binary())))
    {
        return Ok(());
    }
    let work = root.join("build-work");
    let _ = std::fs::remove_dir_all(&work);
    let k8s_dir = work.join("kubernetes");
    let etcd_dir = work.join("etcd");
    let out_dir = work.join("out");
    for dir in [&k8s_dir, &etcd_dir, &out_dir] {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    let log_path = root.join("build.log");
    let _ = std::fs::remove_file(&log_path);
    let mut builder = Builder::new("building control-plane binaries", log_path, 5, progress);

    build_kubernetes(
        &mut builder,
        &k8s_dir,
        &["kube-apiserver", "kube-controller-manager"],
        &out_dir,
    )?;

    // etcd: `go.etcd.io/etcd/server/v3` is itself the main package.
    std::fs::write(
        etcd_dir.join("go.mod"),
        "module local/grove-conformance-etcd\n\ngo 1.24.0\n",
    )
    .map_err(io_err("write", &etcd_dir))?;
    builder.run(
        &format!("download etcd {ETCD_VERSION} modules"),
        &etcd_dir,
        &["get", &format!("go.etcd.io/etcd/server/v3@{ETCD_VERSION}")],
        false,
    )?;
    let etcd_out = out_dir.join("etcd");
    builder.compile(
        "compile etcd",
        &etcd_dir,
        &[
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            &etcd_out.to_string_lossy(),
        ],
        &["go.etcd.io/etcd/server/v3"],
    )?;

    std::fs::create_dir_all(&cache).map_err(io_err("create", &cache))?;
    for component in Component::ALL {
        let from = out_dir.join(component.binary());
        let to = cache.join(component.binary());
        std::fs::rename(&from, &to)
            .or_else(|_| std::fs::copy(&from, &to).map(|_| ()))
            .map_err(io_err("install", &to))?;
    }
    let _ = std::fs::remove_dir_all(&work);
    if progress {
        tracing::info!(
            "built the control-plane binaries in {:.0?}: {}",
            builder.elapsed(),
            cache.display()
        );
    }
    Ok(())
}
