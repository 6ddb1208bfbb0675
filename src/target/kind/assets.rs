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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::target::embedded::provision::{
    self, Builder, KUBERNETES_VERSION, ProvisionError, ProvisionOptions, default_cache_root, io_err,
};

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
const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Node-side Kubernetes commands, built like the control plane's.
const NODE_COMMANDS: [&str; 5] = [
    "kubelet",
    "kubeadm",
    "kubectl",
    "kube-scheduler",
    "kube-proxy",
];
/// Packages of the node image.
const NODE_PACKAGES: &[&str] = &[
    "systemd",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "fuse-overlayfs",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
    "containerd",
    "runc",
    "containernetworking-plugins",
];
/// Registries whose hosts the node's containerd resolves to a closed port.
const REGISTRIES: &[&str] = &[
    "registry.k8s.io",
    "docker.io",
    "registry-1.docker.io",
    "quay.io",
    "gcr.io",
    "ghcr.io",
    "_default",
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

/// Whether Docker answers, and if not, what to do.
pub fn docker_available() -> Result<(), String> {
    let output = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .output();
    match output {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "Docker does not answer (`docker info`: {}). Start the engine: `dockerd > /tmp/dockerd.log 2>&1 &` (no systemd here), or `systemctl start docker`; install it with `apt-get install docker.io` if it is missing",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "no `docker` command ({e}). Install Docker (`apt-get install docker.io`), start `dockerd`, and run `grove-conformance setup --kind`"
        )),
    }
}

fn image_exists(tag: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", tag])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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
    docker_available().map_err(|reason| ProvisionError::NotFound {
        missing: "a Docker engine".into(),
        cache: dir.clone(),
        reason,
    })?;
    super::runc_shim::ensure_privileged_works(&dir, harness, options.progress).map_err(
        |reason| ProvisionError::NotFound {
            missing: "a Docker engine that runs privileged containers".into(),
            cache: dir.clone(),
            reason,
        },
    )?;
    let complete = || {
        is_executable(&assets.kind)
            && is_executable(&assets.kubectl)
            && image_exists(&assets.node_image)
            && image_exists(BUSYBOX_IMAGE)
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

/// A command whose output goes to the build log.
fn cmd(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// `sh -c script` (for pipes between two programs and mounts with cleanup).
fn sh(script: &str) -> Command {
    cmd("sh", &["-c", script])
}

fn build(root: &Path, dir: &Path, progress: bool) -> Result<(), ProvisionError> {
    let lock = provision::lock_build(dir, "the kind assets", progress)?;
    // The control-plane binaries first (built, or found in the cache).
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
    let bin_s = bin.to_string_lossy().to_string();

    // 1. Host tools from Debian.
    b.announce("host tools: debootstrap, busybox-static");
    // busybox-static, not just any /bin/busybox: the fixture and pause images have no libc.
    let installed = |package: &str| {
        Command::new("dpkg-query")
            .args(["-W", "-f", "${Status}", package])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
    };
    let missing: Vec<&str> = ["debootstrap", "busybox-static"]
        .into_iter()
        .filter(|p| !installed(p))
        .collect();
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

    // 2. kind and crictl.
    b.announce(&format!("kind {KIND_VERSION} (go install)"));
    if !is_executable(&bin.join("kind")) {
        let mut go = cmd(
            "go",
            &["install", &format!("sigs.k8s.io/kind@{KIND_VERSION}")],
        );
        go.env("GOBIN", &bin)
            .env("CGO_ENABLED", "0")
            .current_dir(&work);
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
        go.env("GOBIN", &bin)
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-buildvcs=false")
            .current_dir(&work);
        b.command("go install crictl", go, false)?;
    }

    // 3-5. Node-side Kubernetes binaries (three steps of the shared Go build).
    let missing: Vec<&str> = NODE_COMMANDS
        .into_iter()
        .filter(|c| !is_executable(&bin.join(c)))
        .collect();
    if missing.is_empty() {
        for _ in 0..3 {
            b.announce("Kubernetes node binaries (cached)");
        }
    } else {
        let out = work.join("k8s-out");
        std::fs::create_dir_all(&out).map_err(io_err("create", &out))?;
        provision::build_kubernetes(&mut b, &work.join("kubernetes"), &missing, &out)?;
        for c in &missing {
            std::fs::rename(out.join(c), bin.join(c)).map_err(io_err("install", &bin.join(c)))?;
        }
    }

    // 6. The busybox fixture image.
    b.announce(&format!("{BUSYBOX_IMAGE} from busybox-static"));
    if !image_exists(BUSYBOX_IMAGE) {
        let rootfs = work.join("busybox");
        busybox_rootfs(&mut b, &rootfs)?;
        import(
            &mut b,
            &rootfs,
            BUSYBOX_IMAGE,
            &["ENV PATH=/bin", "CMD [\"sh\"]"],
        )?;
    }

    // 7. The Debian rootfs.
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

    // 8. Component images, tagged as kubeadm lists them.
    b.announce("component images (as `kubeadm config images list` prints them)");
    let listed = b.command(
        "kubeadm config images list",
        cmd(
            &format!("{bin_s}/kubeadm"),
            &[
                "config",
                "images",
                "list",
                "--kubernetes-version",
                KUBERNETES_VERSION,
            ],
        ),
        true,
    )?;
    let mut preload = vec![SANDBOX_IMAGE.to_string(), BUSYBOX_IMAGE.to_string()];
    for tag in listed.split_whitespace() {
        let binary = |name: &str| bin.join(name);
        if tag.contains("/coredns:") {
            // DNS is not needed: fixtures talk to nothing, the implementation runs on the host.
            continue;
        }
        preload.push(tag.to_string());
        if image_exists(tag) {
            continue;
        }
        if tag.contains("/kube-apiserver:") {
            scratch_image(&mut b, &work, tag, &control_plane.kube_apiserver)?;
        } else if tag.contains("/kube-controller-manager:") {
            scratch_image(&mut b, &work, tag, &control_plane.kube_controller_manager)?;
        } else if tag.contains("/kube-scheduler:") {
            scratch_image(&mut b, &work, tag, &binary("kube-scheduler"))?;
        } else if tag.contains("/etcd:") {
            scratch_image(&mut b, &work, tag, &control_plane.etcd)?;
        } else if tag.contains("/pause:") {
            pause_image(&mut b, &work, tag)?;
        } else if tag.contains("/kube-proxy:") {
            kube_proxy_image(&mut b, &work, &rootfs_tar, tag, &binary("kube-proxy"))?;
        } else {
            return Err(ProvisionError::Build {
                step: "component images".into(),
                log: b.log_path().to_path_buf(),
                tail: format!(
                    "kubeadm lists an image this setup does not know how to build: {tag}"
                ),
            });
        }
    }
    if !image_exists(SANDBOX_IMAGE) {
        let pause = listed
            .split_whitespace()
            .find(|t| t.contains("/pause:"))
            .unwrap_or(SANDBOX_IMAGE)
            .to_string();
        if pause == SANDBOX_IMAGE {
            pause_image(&mut b, &work, SANDBOX_IMAGE)?;
        } else {
            b.command(
                "tag the sandbox image",
                cmd("docker", &["tag", &pause, SANDBOX_IMAGE]),
                false,
            )?;
        }
    }
    preload.sort();
    preload.dedup();

    // 9-11. The node image.
    let image = node_image();
    if image_exists(&image) {
        for _ in 0..3 {
            b.announce(&format!("{image} (cached)"));
        }
    } else {
        node_image_build(&mut b, &work, &rootfs_tar, &bin, &preload, &image)?;
    }
    let _ = std::fs::remove_dir_all(&work);
    if progress {
        eprintln!(
            "[grove-conformance] kind assets ready in {:.0?}: {} and image {image}",
            b.elapsed(),
            bin.display()
        );
    }
    drop(lock);
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), ProvisionError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    std::fs::write(path, text).map_err(io_err("write", path))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ProvisionError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_err("chmod", path))
}

/// `/bin/busybox` and a symlink per applet, `/tmp`, `/etc/passwd`.
fn busybox_rootfs(b: &mut Builder, rootfs: &Path) -> Result<(), ProvisionError> {
    let _ = std::fs::remove_dir_all(rootfs);
    let bin = rootfs.join("bin");
    std::fs::create_dir_all(&bin).map_err(io_err("create", &bin))?;
    std::fs::create_dir_all(rootfs.join("tmp")).map_err(io_err("create", rootfs))?;
    set_mode(&rootfs.join("tmp"), 0o1777)?;
    std::fs::copy("/bin/busybox", bin.join("busybox")).map_err(io_err("copy", &bin))?;
    let applets = b.command("busybox --list", cmd("/bin/busybox", &["--list"]), true)?;
    for applet in applets.split_whitespace().filter(|a| *a != "busybox") {
        let _ = std::os::unix::fs::symlink("busybox", bin.join(applet));
    }
    write(
        &rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    )?;
    write(&rootfs.join("etc/group"), "root:x:0:\nnobody:x:65534:\n")
}

/// `docker import` of a directory, with image configuration `changes`.
fn import(
    b: &mut Builder,
    rootfs: &Path,
    tag: &str,
    changes: &[&str],
) -> Result<(), ProvisionError> {
    let mut script = format!(
        "tar -C '{}' --numeric-owner -c . | docker import",
        rootfs.display()
    );
    for change in changes {
        script.push_str(&format!(" --change '{change}'"));
    }
    script.push_str(&format!(" - '{tag}'"));
    b.command(&format!("docker import {tag}"), sh(&script), false)?;
    let _ = std::fs::remove_dir_all(rootfs);
    Ok(())
}

/// An image with one static binary as its entrypoint.
fn scratch_image(
    b: &mut Builder,
    work: &Path,
    tag: &str,
    binary: &Path,
) -> Result<(), ProvisionError> {
    let rootfs = work.join("scratch-image");
    let _ = std::fs::remove_dir_all(&rootfs);
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let dest = rootfs.join("usr/local/bin").join(&name);
    std::fs::create_dir_all(dest.parent().expect("a parent")).map_err(io_err("create", &rootfs))?;
    std::fs::copy(binary, &dest).map_err(io_err("copy", binary))?;
    std::fs::create_dir_all(rootfs.join("tmp")).map_err(io_err("create", &rootfs))?;
    set_mode(&rootfs.join("tmp"), 0o1777)?;
    write(
        &rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n",
    )?;
    write(&rootfs.join("etc/group"), "root:x:0:\nnobody:x:65534:\n")?;
    write(&rootfs.join("etc/nsswitch.conf"), "hosts: files dns\n")?;
    let entrypoint = format!("ENTRYPOINT [\"/usr/local/bin/{name}\"]");
    import(
        b,
        &rootfs,
        tag,
        &["ENV PATH=/usr/local/bin:/usr/bin:/bin", &entrypoint],
    )
}

/// The pod sandbox: busybox's shell sleeping until it is told to stop, reaping children.
fn pause_image(b: &mut Builder, work: &Path, tag: &str) -> Result<(), ProvisionError> {
    let rootfs = work.join("pause");
    busybox_rootfs(b, &rootfs)?;
    let script = "trap \"exit 0\" TERM INT; while :; do sleep 86400 & wait $!; done";
    let entrypoint = format!(
        "ENTRYPOINT [\"/bin/sh\", \"-c\", \"{}\"]",
        script.replace('"', "\\\"")
    );
    import(b, &rootfs, tag, &["ENV PATH=/bin", &entrypoint])
}

/// Mounts `/proc`, `/sys` and `/dev` into `rootfs`, runs `script` chrooted, unmounts.
fn chroot(
    b: &mut Builder,
    step: &str,
    rootfs: &Path,
    script: &str,
) -> Result<String, ProvisionError> {
    let d = rootfs.display();
    let full = format!(
        "set -e; for m in proc sys dev; do mount --bind /$m '{d}'/$m; done; \
         trap 'for m in dev sys proc; do umount '\"'{d}'\"'/$m || true; done' EXIT; \
         chroot '{d}' /bin/sh -c '{}'",
        script.replace('\'', "'\\''")
    );
    b.command(step, sh(&full), true)
}

/// `apt-get install` inside a rootfs, services not started, caches and docs removed after.
fn chroot_apt(b: &mut Builder, rootfs: &Path, packages: &[&str]) -> Result<(), ProvisionError> {
    std::fs::copy("/etc/resolv.conf", rootfs.join("etc/resolv.conf"))
        .map_err(io_err("copy", Path::new("/etc/resolv.conf")))?;
    let policy = rootfs.join("usr/sbin/policy-rc.d");
    write(&policy, "#!/bin/sh\nexit 101\n")?;
    set_mode(&policy, 0o755)?;
    chroot(
        b,
        "apt-get install in the rootfs",
        rootfs,
        &format!(
            "export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends {} && apt-get clean",
            packages.join(" ")
        ),
    )?;
    let _ = std::fs::remove_file(&policy);
    write(&rootfs.join("etc/resolv.conf"), "")?;
    let d = rootfs.display();
    b.command(
        "trim the rootfs",
        sh(&format!(
            "rm -rf '{d}'/var/lib/apt/lists/* '{d}'/var/log/* '{d}'/tmp/* '{d}'/var/tmp/* \
             '{d}'/usr/share/doc/* '{d}'/usr/share/man/* '{d}'/usr/share/info/* '{d}'/usr/share/locale/*"
        )),
        false,
    )?;
    Ok(())
}

fn unpack(b: &mut Builder, tar: &Path, rootfs: &Path) -> Result<(), ProvisionError> {
    let _ = std::fs::remove_dir_all(rootfs);
    std::fs::create_dir_all(rootfs).map_err(io_err("create", rootfs))?;
    b.command(
        "unpack the rootfs",
        cmd(
            "tar",
            &[
                "-C",
                &rootfs.to_string_lossy(),
                "-xf",
                &tar.to_string_lossy(),
            ],
        ),
        false,
    )?;
    Ok(())
}

/// kube-proxy needs iptables: Debian with iptables, nftables and conntrack, and a wrapper
/// that picks the iptables backend the node already uses (as kind's images do).
fn kube_proxy_image(
    b: &mut Builder,
    work: &Path,
    rootfs_tar: &Path,
    tag: &str,
    kube_proxy: &Path,
) -> Result<(), ProvisionError> {
    let rootfs = work.join("kube-proxy");
    unpack(b, rootfs_tar, &rootfs)?;
    chroot_apt(b, &rootfs, &["iptables", "nftables", "conntrack"])?;
    let real = rootfs.join("usr/local/bin/kube-proxy.real");
    std::fs::copy(kube_proxy, &real).map_err(io_err("copy", kube_proxy))?;
    let wrapper = rootfs.join("usr/local/bin/kube-proxy");
    write(&wrapper, KUBE_PROXY_WRAPPER)?;
    set_mode(&wrapper, 0o755)?;
    import(
        b,
        &rootfs,
        tag,
        &[
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENTRYPOINT [\"/usr/local/bin/kube-proxy\"]",
        ],
    )
}

const KUBE_PROXY_WRAPPER: &str = r#"#!/bin/sh
# Use the iptables backend the node already uses (the one with more rules; legacy on a tie).
legacy=$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | grep -c '^-' )
nft=$( (timeout 5 sh -c 'iptables-nft-save; ip6tables-nft-save') 2>/dev/null | grep -c '^-' )
if [ "${legacy:-0}" -ge "${nft:-0}" ]; then mode=legacy; else mode=nft; fi
update-alternatives --set iptables /usr/sbin/iptables-$mode >/dev/null 2>&1
update-alternatives --set ip6tables /usr/sbin/ip6tables-$mode >/dev/null 2>&1
exec /usr/local/bin/kube-proxy.real "$@"
"#;

/// Keeps routes to the other nodes' pod CIDRs (`/etc/grove-conformance/routes`: lines
/// `NODE CIDR`, written by the harness once the nodes have their CIDRs). Node names are
/// container names, which Docker's DNS resolves, so a restarted peer's new address is followed.
const ROUTES_SCRIPT: &str = r#"#!/bin/sh
while :; do
  if [ -f /etc/grove-conformance/routes ]; then
    while read -r name cidr; do
      [ -n "$name" ] && [ -n "$cidr" ] || continue
      ip=$(getent ahostsv4 "$name" | awk 'NR==1 {print $1}')
      [ -n "$ip" ] || continue
      cur=$(ip -4 route show "$cidr" | awk '{for (i=1;i<NF;i++) if ($i=="via") print $(i+1)}')
      [ "$cur" = "$ip" ] || ip route replace "$cidr" via "$ip"
    done < /etc/grove-conformance/routes
  fi
  sleep 2
done
"#;

const ROUTES_UNIT: &str = "[Unit]
Description=grove-conformance: routes to other nodes' pod CIDRs
After=network.target

[Service]
ExecStart=/usr/local/bin/grove-conformance-routes
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
";

/// Replaces systemd-sysctl (masked: it would write host-global keys from a privileged
/// container): only network-namespace keys, kind's and IP forwarding.
const SYSCTL_UNIT: &str = "[Unit]
Description=grove-conformance: per-network-namespace sysctls
DefaultDependencies=no
Before=containerd.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for f in /etc/sysctl.d/10-*.conf; do sysctl -q -p \"$f\"; done; sysctl -q -w net.ipv4.ip_forward=1'

[Install]
WantedBy=multi-user.target
";

/// kind's base image files, from its module in the Go module cache.
fn kind_base_files(b: &mut Builder, work: &Path) -> Result<PathBuf, ProvisionError> {
    let mut go = cmd(
        "go",
        &[
            "mod",
            "download",
            "-json",
            &format!("sigs.k8s.io/kind@{KIND_VERSION}"),
        ],
    );
    go.current_dir(work);
    let info = b.command("locate kind's module", go, true)?;
    let info: serde_json::Value =
        serde_json::from_str(&info).map_err(|e| ProvisionError::Build {
            step: "read `go mod download` output".into(),
            log: b.log_path().to_path_buf(),
            tail: e.to_string(),
        })?;
    Ok(PathBuf::from(info["Dir"].as_str().unwrap_or_default()).join("images/base/files"))
}

fn node_image_build(
    b: &mut Builder,
    work: &Path,
    rootfs_tar: &Path,
    bin: &Path,
    preload: &[String],
    image: &str,
) -> Result<(), ProvisionError> {
    // 9. Packages.
    b.announce("node image: Debian packages (systemd, containerd, runc, CNI plugins, ...)");
    let rootfs = work.join("node");
    unpack(b, rootfs_tar, &rootfs)?;
    chroot_apt(b, &rootfs, NODE_PACKAGES)?;

    // 10. kind's files, the binaries, containerd's configuration, systemd units.
    b.announce("node image: kind's base files, Kubernetes binaries, containerd configuration");
    let files = kind_base_files(b, work)?;
    let d = rootfs.display().to_string();
    let f = files.display().to_string();
    b.command(
        "install kind's base files",
        sh(&format!(
            "set -e; chmod -R u+w '{f}' 2>/dev/null || true
             mkdir -p '{d}/kind/bin' '{d}/etc/containerd' '{d}/etc/default' '{d}/etc/sysctl.d' \
                      '{d}/etc/systemd/system/kubelet.service.d' '{d}/LICENSES' '{d}/usr/local/sbin' \
                      '{d}/opt/cni' '{d}/etc/kubernetes/manifests' '{d}/etc/cni/net.d' '{d}/etc/grove-conformance'
             install -m 0755 '{f}'/usr/local/bin/* '{d}/usr/local/bin/'
             install -m 0644 '{f}/kind/README.txt' '{d}/kind/'
             install -m 0755 '{f}'/kind/bin/* '{d}/kind/bin/'
             install -m 0644 '{f}'/LICENSES/* '{d}/LICENSES/'
             install -m 0644 '{f}/etc/crictl.yaml' '{d}/etc/'
             install -m 0644 '{f}/etc/containerd/config.toml' '{d}/etc/containerd/'
             install -m 0644 '{f}/etc/default/kubelet' '{d}/etc/default/'
             install -m 0644 '{f}'/etc/sysctl.d/* '{d}/etc/sysctl.d/'
             install -m 0644 '{f}'/etc/systemd/system/*.service '{f}'/etc/systemd/system/*.slice '{d}/etc/systemd/system/'
             install -m 0644 '{f}'/etc/systemd/system/kubelet.service.d/* '{d}/etc/systemd/system/kubelet.service.d/'
             find '{d}/lib/systemd/system/sysinit.target.wants/' -name systemd-tmpfiles-setup.service -delete
             rm -f '{d}'/lib/systemd/system/multi-user.target.wants/* '{d}'/etc/systemd/system/*.wants/* \
                   '{d}'/lib/systemd/system/local-fs.target.wants/* '{d}'/lib/systemd/system/sockets.target.wants/*udev* \
                   '{d}'/lib/systemd/system/sockets.target.wants/*initctl* '{d}'/lib/systemd/system/basic.target.wants/*
             echo ReadKMsg=no >> '{d}/etc/systemd/journald.conf'
             ln -sf /usr/lib/systemd/systemd '{d}/sbin/init'
             for x in containerd ctr containerd-shim-runc-v2; do ln -sf /usr/bin/$x '{d}/usr/local/bin/'$x; done
             ln -sf /usr/sbin/runc '{d}/usr/local/sbin/runc'
             rm -rf '{d}/opt/cni/bin'; ln -s /usr/lib/cni '{d}/opt/cni/bin'"
        )),
        false,
    )?;
    for name in ["kubelet", "kubeadm", "kubectl"] {
        let dest = rootfs.join("usr/bin").join(name);
        std::fs::copy(bin.join(name), &dest).map_err(io_err("copy", &dest))?;
    }
    let crictl = rootfs.join("usr/local/bin/crictl");
    std::fs::copy(bin.join("crictl"), &crictl).map_err(io_err("copy", &crictl))?;
    write(
        &rootfs.join("kind/version"),
        &format!("{KUBERNETES_VERSION}\n"),
    )?;
    // containerd: the base runtime spec kind expects, and quirk 2 of hosts whose root lacks
    // CAP_SYS_RESOURCE (runc cannot lower oom_score_adj: restrict it), and every registry
    // at a closed loopback port.
    let spec = chroot(b, "containerd's base OCI spec", &rootfs, "ctr oci spec")?;
    let mut spec: serde_json::Value =
        serde_json::from_str(&spec).map_err(|e| ProvisionError::Build {
            step: "read `ctr oci spec`".into(),
            log: b.log_path().to_path_buf(),
            tail: e.to_string(),
        })?;
    if let Some(process) = spec.get_mut("process").and_then(|p| p.as_object_mut()) {
        process.remove("rlimits");
    }
    let hooks = spec["hooks"]["createContainer"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut hooks = hooks;
    hooks.push(serde_json::json!({"path": "/kind/bin/mount-product-files.sh"}));
    spec["hooks"]["createContainer"] = serde_json::Value::Array(hooks);
    write(
        &rootfs.join("etc/containerd/cri-base.json"),
        &serde_json::to_string_pretty(&spec).expect("JSON serializes"),
    )?;
    let config_path = rootfs.join("etc/containerd/config.toml");
    let config = std::fs::read_to_string(&config_path).map_err(io_err("read", &config_path))?;
    let mut config = config.replace(
        "restrict_oom_score_adj = false",
        "restrict_oom_score_adj = true",
    );
    if !config.contains("restrict_oom_score_adj = true") {
        return Err(ProvisionError::Build {
            step: "containerd configuration".into(),
            log: b.log_path().to_path_buf(),
            tail: "kind's containerd config.toml has no `restrict_oom_score_adj` to turn on".into(),
        });
    }
    config.push_str(
        "\n# Offline node: every registry host resolves to a closed loopback port.\n\
         [plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
    );
    write(&config_path, &config)?;
    for registry in REGISTRIES {
        write(
            &rootfs.join(format!("etc/containerd/certs.d/{registry}/hosts.toml")),
            "server = \"http://127.0.0.1:1\"\n\n[host.\"http://127.0.0.1:1\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        )?;
    }
    let routes = rootfs.join("usr/local/bin/grove-conformance-routes");
    write(&routes, ROUTES_SCRIPT)?;
    set_mode(&routes, 0o755)?;
    write(
        &rootfs.join("etc/systemd/system/grove-conformance-routes.service"),
        ROUTES_UNIT,
    )?;
    write(
        &rootfs.join("etc/systemd/system/grove-conformance-sysctl.service"),
        SYSCTL_UNIT,
    )?;
    chroot(
        b,
        "enable and mask systemd units",
        &rootfs,
        "systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
         grove-conformance-routes.service grove-conformance-sysctl.service && \
         systemctl mask systemd-binfmt.service systemd-sysctl.service",
    )?;

    // 11. Preload the images into the node's containerd, then import and configure.
    b.announce(&format!(
        "node image: preload {} images, import as {image}",
        preload.len()
    ));
    let tar = rootfs.join("tmp/preload.tar");
    let mut save = cmd("docker", &["save", "-o", &tar.to_string_lossy()]);
    save.args(preload);
    b.command("docker save", save, false)?;
    write(
        &rootfs.join("tmp/preload.toml"),
        "version = 2\nroot = \"/var/lib/containerd\"\nstate = \"/run/preload/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"/run/preload/containerd.sock\"\n",
    )?;
    chroot(
        b,
        "import the images into the node's containerd",
        &rootfs,
        "mkdir -p /run/preload; containerd --config /tmp/preload.toml >/tmp/preload.log 2>&1 & pid=$!; \
         i=0; while [ ! -S /run/preload/containerd.sock ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
         ctr -a /run/preload/containerd.sock -n k8s.io images import --all-platforms --no-unpack /tmp/preload.tar; rc=$?; \
         kill $pid; wait $pid 2>/dev/null; rm -rf /run/preload /tmp/preload.tar /tmp/preload.toml /tmp/preload.log; exit $rc",
    )?;
    let staging = format!("{image}-rootfs");
    import(b, &rootfs, &staging, &[])?;
    // `docker import --change` cannot set STOPSIGNAL: a build that only adds configuration.
    let dockerfile = format!(
        "FROM {staging}\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT [\"/usr/local/bin/entrypoint\", \"/sbin/init\"]\n"
    );
    let mut docker_build = cmd("docker", &["build", "-q", "-t", image, "-"]);
    docker_build
        .env("DOCKER_BUILDKIT", "0")
        .stdin(Stdio::piped());
    let mut child = docker_build
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err("run", Path::new("docker")))?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(dockerfile.as_bytes())
        .map_err(io_err("write to", Path::new("docker build")))?;
    let output = child
        .wait_with_output()
        .map_err(io_err("wait for", Path::new("docker build")))?;
    if !output.status.success() {
        return Err(ProvisionError::Build {
            step: format!("docker build {image}"),
            log: b.log_path().to_path_buf(),
            tail: String::from_utf8_lossy(&output.stderr).to_string(),
        });
    }
    let _ = Command::new("docker")
        .args(["rmi", &staging])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    Ok(())
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
}
