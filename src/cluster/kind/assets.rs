//! Everything `--kind` needs, built offline into the version-keyed cache
//! (`grove-conformance setup --kind`): the kind binary, the node-side Kubernetes binaries,
//! crictl, the component images kubeadm asks for, the `busybox` fixture image and the kind node
//! image itself, assembled from a Debian rootfs (`kind build node-image` fetches from registries
//! and cannot work offline).
//!
//! The node image is a debootstrap `minbase` rootfs with systemd, containerd, runc and the CNI
//! plugins from Debian, kind's own base files (entrypoint, containerd configuration, kubelet
//! unit) from its Go module, the Kubernetes binaries at [`KUBERNETES_VERSION`], and every image
//! a node runs preloaded into its containerd, whose registries all point at a closed loopback
//! port so a missing image fails at once instead of reaching for a registry.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::embedded::provision::{
    self, Builder, KUBERNETES_VERSION, ProvisionError, ProvisionOptions, default_cache_root, io_err,
};
use crate::host::{docker, is_executable};

use super::images::{self, busybox_rootfs, cmd, import, sh};
use super::node_image::node_image_build;

/// The kind release, built with `go install`.
pub const KIND_VERSION: &str = "v0.33.0";
/// The cri-tools release crictl is built from.
pub const CRICTL_VERSION: &str = "v1.34.0";
/// The Debian release of the node image.
pub const DEBIAN_SUITE: &str = "bookworm";
/// The node image's repository; the tag is the Kubernetes version.
pub const NODE_IMAGE_REPOSITORY: &str = "grove-conformance/kind-node";
/// The fixture image, from Debian's `busybox-static`.
pub const BUSYBOX_IMAGE: &str = "busybox:latest";
/// The pause image containerd's configuration names as its sandbox image.
pub(super) const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Node-side Kubernetes commands, built like the control plane's.
const NODE_COMMANDS: [&str; 5] = [
    "kubelet",
    "kubeadm",
    "kubectl",
    "kube-scheduler",
    "kube-proxy",
];

/// The node image of the pinned Kubernetes version.
pub fn node_image() -> String {
    format!("{NODE_IMAGE_REPOSITORY}:{KUBERNETES_VERSION}")
}

/// The version-keyed directory of the kind assets.
pub fn kind_dir(root: &Path) -> PathBuf {
    root.join("kind")
        .join(format!("k8s-{KUBERNETES_VERSION}-kind-{KIND_VERSION}"))
}

/// Resolved kind assets.
#[derive(Debug, Clone)]
pub struct KindAssets {
    /// The kind binary.
    pub kind: PathBuf,
    /// kubectl at the pinned version, for a user to look at the cluster (`setup --kind` prints
    /// where it is); the harness itself execs through the API.
    pub kubectl: PathBuf,
    /// The folder holding both (put first on `PATH`).
    pub bin_dir: PathBuf,
    /// The node image tag.
    pub node_image: String,
}

/// Resolves the kind assets, building what is missing when `options.allow_build`. `harness`
/// is the grove-conformance executable (the runc shim, on hosts that need one).
pub fn resolve(options: &ProvisionOptions, harness: &Path) -> Result<KindAssets, ProvisionError> {
    let root = options
        .cache_root
        .clone()
        .unwrap_or_else(default_cache_root);
    let dir = kind_dir(&root);
    let assets = KindAssets {
        kind: dir.join("bin/kind"),
        kubectl: dir.join("bin/kubectl"),
        bin_dir: dir.join("bin"),
        node_image: node_image(),
    };
    docker::available().map_err(|e| ProvisionError::Prerequisite {
        missing: "a Docker engine",
        cache: dir.clone(),
        source: Box::new(e),
    })?;
    super::runc_shim::ensure_privileged_works(&dir, harness, options.progress).map_err(|e| {
        ProvisionError::Prerequisite {
            missing: "a Docker engine that runs privileged containers",
            cache: dir.clone(),
            source: Box::new(e),
        }
    })?;
    let complete = || {
        is_executable(&assets.kind)
            && is_executable(&assets.kubectl)
            && docker::image_exists(&assets.node_image)
            && docker::image_exists(BUSYBOX_IMAGE)
    };
    if complete() {
        return Ok(assets);
    }
    if !options.allow_build {
        return Err(ProvisionError::NotFound {
            missing: format!("the kind assets (kind, kubectl, {})", assets.node_image),
            cache: dir,
            reason: "run `grove-conformance setup --kind` to build them".into(),
        });
    }
    build(&root, &dir, options.progress)?;
    Ok(assets)
}

/// The Debian mirror the host's apt uses (the node image comes from the same one).
pub fn debian_mirror() -> String {
    let mut texts = vec![std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default()];
    if let Ok(entries) = std::fs::read_dir("/etc/apt/sources.list.d") {
        for entry in entries.flatten() {
            texts.push(std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    mirror_from_sources(&texts.join("\n"))
        .unwrap_or_else(|| "http://deb.debian.org/debian".to_string())
}

/// The first Debian archive URI of apt sources (one-line or deb822 format), security
/// archives excluded.
pub fn mirror_from_sources(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split_whitespace())
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .find(|w| w.contains("debian") && !w.contains("security"))
        .map(|w| w.trim_end_matches('/').to_string())
}

/// Builds the kind assets into `dir` (twelve steps), the control-plane binaries first (built,
/// or found in the cache under `root`).
fn build(root: &Path, dir: &Path, progress: bool) -> Result<(), ProvisionError> {
    let lock = provision::lock_build(dir, "the kind assets", progress)?;
    let control_plane = provision::resolve(&ProvisionOptions {
        allow_build: true,
        cache_root: Some(root.to_path_buf()),
        progress,
    })?;
    let bin = dir.join("bin");
    let work = dir.join("work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&bin).map_err(io_err("create", &bin))?;
    std::fs::create_dir_all(&work).map_err(io_err("create", &work))?;
    let log_path = dir.join("build.log");
    let _ = std::fs::remove_file(&log_path);
    let mut b = Builder::new("building the kind assets", log_path, 12, progress);
    host_tools(&mut b)?;
    go_tools(&mut b, &bin, &work)?;
    node_binaries(&mut b, &bin, &work)?;
    busybox_image(&mut b, &work)?;
    let rootfs_tar = debian_rootfs(&mut b, dir, &work)?;
    let preload = images::component_images(&mut b, &work, &bin, &rootfs_tar, &control_plane)?;
    // 9-11. The node image.
    let image = node_image();
    if docker::image_exists(&image) {
        for _ in 0..3 {
            b.announce(&format!("{image} (cached)"));
        }
    } else {
        node_image_build(&mut b, &work, &rootfs_tar, &bin, &preload, &image)?;
    }
    let _ = std::fs::remove_dir_all(&work);
    if progress {
        tracing::info!(
            "kind assets ready in {:.0?}: {} and image {image}",
            b.elapsed(),
            bin.display()
        );
    }
    drop(lock);
    Ok(())
}

/// The Debian packages the build runs on the host: debootstrap, and busybox-static, not just
/// any /bin/busybox (the fixture and pause images have no libc).
const HOST_PACKAGES: [&str; 2] = ["debootstrap", "busybox-static"];

/// The host packages `installed` says are not installed.
fn missing_host_packages(installed: impl Fn(&str) -> bool) -> Vec<&'static str> {
    HOST_PACKAGES
        .into_iter()
        .filter(|p| !installed(p))
        .collect()
}

/// Step 1: the host tools from Debian, installed when missing.
fn host_tools(b: &mut Builder) -> Result<(), ProvisionError> {
    b.announce("host tools: debootstrap, busybox-static");
    let installed = |package: &str| {
        Command::new("dpkg-query")
            .args(["-W", "-f", "${Status}", package])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
    };
    let missing = missing_host_packages(installed);
    if !missing.is_empty() {
        let list = missing.join(" ");
        b.command(
            "apt-get install",
            sh(&format!(
                "export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q {list} || {{ apt-get update -q && apt-get install -y -q {list}; }}"
            )),
            false,
        )?;
    }
    Ok(())
}

/// Steps 2 and 3: kind and crictl, `go install`ed into `bin` when missing.
fn go_tools(b: &mut Builder, bin: &Path, work: &Path) -> Result<(), ProvisionError> {
    b.announce(&format!("kind {KIND_VERSION} (go install)"));
    if !is_executable(&bin.join("kind")) {
        let mut go = cmd(
            "go",
            &["install", &format!("sigs.k8s.io/kind@{KIND_VERSION}")],
        );
        go.env("GOBIN", bin)
            .env("CGO_ENABLED", "0")
            .current_dir(work);
        b.command("go install kind", go, false)?;
    }
    b.announce(&format!("crictl {CRICTL_VERSION} (go install)"));
    if !is_executable(&bin.join("crictl")) {
        let mut go = cmd(
            "go",
            &[
                "install",
                "-trimpath",
                &format!("sigs.k8s.io/cri-tools/cmd/crictl@{CRICTL_VERSION}"),
            ],
        );
        go.env("GOBIN", bin)
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-buildvcs=false")
            .current_dir(work);
        b.command("go install crictl", go, false)?;
    }
    Ok(())
}

/// The node-side commands not yet in `bin`, given what `is_there`.
fn missing_node_commands(is_there: impl Fn(&str) -> bool) -> Vec<&'static str> {
    NODE_COMMANDS.into_iter().filter(|c| !is_there(c)).collect()
}

/// Steps 3-5: the node-side Kubernetes binaries (three steps of the shared Go build).
fn node_binaries(b: &mut Builder, bin: &Path, work: &Path) -> Result<(), ProvisionError> {
    let missing = missing_node_commands(|c| is_executable(&bin.join(c)));
    if missing.is_empty() {
        for _ in 0..3 {
            b.announce("Kubernetes node binaries (cached)");
        }
    } else {
        let out = work.join("k8s-out");
        std::fs::create_dir_all(&out).map_err(io_err("create", &out))?;
        provision::build_kubernetes(b, &work.join("kubernetes"), &missing, &out)?;
        for c in &missing {
            std::fs::rename(out.join(c), bin.join(c)).map_err(io_err("install", &bin.join(c)))?;
        }
    }
    Ok(())
}

/// Step 6: the busybox fixture image, from busybox-static.
fn busybox_image(b: &mut Builder, work: &Path) -> Result<(), ProvisionError> {
    b.announce(&format!("{BUSYBOX_IMAGE} from busybox-static"));
    if !docker::image_exists(BUSYBOX_IMAGE) {
        let rootfs = work.join("busybox");
        busybox_rootfs(b, &rootfs)?;
        import(
            b,
            &rootfs,
            BUSYBOX_IMAGE,
            &["ENV PATH=/bin", "CMD [\"sh\"]"],
        )?;
    }
    Ok(())
}

/// Step 7: the Debian rootfs, debootstrapped from the host's mirror into a tar in `dir`
/// once; returns the tar.
fn debian_rootfs(b: &mut Builder, dir: &Path, work: &Path) -> Result<PathBuf, ProvisionError> {
    let rootfs_tar = dir.join(format!("debian-{DEBIAN_SUITE}-minbase.tar"));
    let mirror = debian_mirror();
    b.announce(&format!(
        "Debian {DEBIAN_SUITE} rootfs (debootstrap from {mirror})"
    ));
    if !rootfs_tar.exists() {
        let target = work.join("minbase");
        b.command(
            "debootstrap",
            cmd(
                "debootstrap",
                &[
                    "--variant=minbase",
                    DEBIAN_SUITE,
                    &target.to_string_lossy(),
                    &mirror,
                ],
            ),
            false,
        )?;
        let tmp = rootfs_tar.with_extension("tar.tmp");
        b.command(
            "pack the rootfs",
            cmd(
                "tar",
                &[
                    "-C",
                    &target.to_string_lossy(),
                    "--numeric-owner",
                    "-cf",
                    &tmp.to_string_lossy(),
                    ".",
                ],
            ),
            false,
        )?;
        std::fs::rename(&tmp, &rootfs_tar).map_err(io_err("install", &rootfs_tar))?;
        let _ = std::fs::remove_dir_all(&target);
    }
    Ok(rootfs_tar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_read_from_either_sources_format() {
        assert_eq!(
            mirror_from_sources("deb http://mirror.example/debian/ bookworm main\n"),
            Some("http://mirror.example/debian".into())
        );
        let deb822 = "Types: deb\nURIs: http://deb.example/debian-security\nSuites: bookworm-security\n\n\
                      Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm\n";
        assert_eq!(
            mirror_from_sources(deb822),
            Some("http://deb.example/debian".into())
        );
        assert_eq!(mirror_from_sources("# deb http://x/debian b main\n"), None);
    }

    #[test]
    fn assets_are_keyed_by_both_versions() {
        let dir = kind_dir(Path::new("/c"));
        assert_eq!(
            dir,
            Path::new("/c/kind").join(format!("k8s-{KUBERNETES_VERSION}-kind-{KIND_VERSION}"))
        );
        assert_eq!(
            node_image(),
            format!("grove-conformance/kind-node:{KUBERNETES_VERSION}")
        );
    }

    #[test]
    fn only_missing_host_packages_and_node_commands_are_installed() {
        assert_eq!(
            missing_host_packages(|p| p == "debootstrap"),
            vec!["busybox-static"]
        );
        assert!(missing_host_packages(|_| true).is_empty());
        assert_eq!(
            missing_node_commands(|c| c != "kubelet" && c != "kube-proxy"),
            vec!["kubelet", "kube-proxy"]
        );
        assert_eq!(missing_node_commands(|_| false), NODE_COMMANDS.to_vec());
    }
}
