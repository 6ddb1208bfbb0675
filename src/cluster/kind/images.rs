//! The images the kind assets build besides the node image: the `busybox` fixture, the pod
//! sandbox, and the component images kubeadm lists (one static binary each, and kube-proxy on
//! Debian with iptables), with the helpers every image build shares (rootfs files, chroot,
//! `docker import`).

use std::path::Path;
use std::process::Command;

use crate::cluster::embedded::provision::{
    Binaries, Builder, Component, KUBERNETES_VERSION, ProvisionError, io_err,
};
use crate::host::docker;

use super::assets::{BUSYBOX_IMAGE, SANDBOX_IMAGE};

/// A command whose output goes to the build log.
pub(super) fn cmd(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// `sh -c script` (for pipes between two programs and mounts with cleanup).
pub(super) fn sh(script: &str) -> Command {
    cmd("sh", &["-c", script])
}

pub(super) fn write(path: &Path, text: &str) -> Result<(), ProvisionError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    std::fs::write(path, text).map_err(io_err("write", path))
}

pub(super) fn set_mode(path: &Path, mode: u32) -> Result<(), ProvisionError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_err("chmod", path))
}

/// `/bin/busybox` and a symlink per applet, `/tmp`, `/etc/passwd`.
pub(super) fn busybox_rootfs(b: &mut Builder, rootfs: &Path) -> Result<(), ProvisionError> {
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
pub(super) fn import(
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
pub(super) fn scratch_image(
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
pub(super) fn pause_image(b: &mut Builder, work: &Path, tag: &str) -> Result<(), ProvisionError> {
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
pub(super) fn chroot(
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
pub(super) fn chroot_apt(
    b: &mut Builder,
    rootfs: &Path,
    packages: &[&str],
) -> Result<(), ProvisionError> {
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

pub(super) fn unpack(b: &mut Builder, tar: &Path, rootfs: &Path) -> Result<(), ProvisionError> {
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
pub(super) fn kube_proxy_image(
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

/// What makes an image `kubeadm config images list` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ComponentImage {
    /// Not needed, neither built nor preloaded: DNS (fixtures talk to nothing, the
    /// implementation runs on the host).
    NotNeeded,
    /// One control-plane binary as its entrypoint ([`scratch_image`]).
    ControlPlane(Component),
    /// One node-side binary of the kind assets as its entrypoint ([`scratch_image`]).
    NodeBinary(&'static str),
    /// The pod sandbox ([`pause_image`]).
    Pause,
    /// kube-proxy on Debian with iptables ([`kube_proxy_image`]).
    KubeProxy,
    /// An image this setup does not know how to build.
    Unknown,
}

// the tag names                 | the image is
// ------------------------------+------------------------------------
// `/coredns:`                   | NotNeeded
// `/kube-apiserver:`            | ControlPlane(KubeApiserver)
// `/kube-controller-manager:`   | ControlPlane(KubeControllerManager)
// `/kube-scheduler:`            | NodeBinary("kube-scheduler")
// `/etcd:`                      | ControlPlane(Etcd)
// `/pause:`                     | Pause
// `/kube-proxy:`                | KubeProxy
// anything else                 | Unknown
/// How the image `tag` of kubeadm's list is made.
pub(super) fn component_image(tag: &str) -> ComponentImage {
    if tag.contains("/coredns:") {
        ComponentImage::NotNeeded
    } else if tag.contains("/kube-apiserver:") {
        ComponentImage::ControlPlane(Component::KubeApiserver)
    } else if tag.contains("/kube-controller-manager:") {
        ComponentImage::ControlPlane(Component::KubeControllerManager)
    } else if tag.contains("/kube-scheduler:") {
        ComponentImage::NodeBinary("kube-scheduler")
    } else if tag.contains("/etcd:") {
        ComponentImage::ControlPlane(Component::Etcd)
    } else if tag.contains("/pause:") {
        ComponentImage::Pause
    } else if tag.contains("/kube-proxy:") {
        ComponentImage::KubeProxy
    } else {
        ComponentImage::Unknown
    }
}

/// The images preloaded into every node, given kubeadm's list: the sandbox, the fixture and
/// every listed image that is needed, sorted, each once.
pub(super) fn preload_list(listed: &str) -> Vec<String> {
    let mut preload = vec![SANDBOX_IMAGE.to_string(), BUSYBOX_IMAGE.to_string()];
    preload.extend(
        listed
            .split_whitespace()
            .filter(|tag| component_image(tag) != ComponentImage::NotNeeded)
            .map(str::to_string),
    );
    preload.sort();
    preload.dedup();
    preload
}

/// How the sandbox image containerd's configuration names is made when it is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SandboxImage {
    /// Built as a pause image of that tag.
    Build,
    /// The pause image kubeadm lists, tagged again.
    Tag(String),
}

// kubeadm lists a pause image | it is the sandbox image | the sandbox image is
// ----------------------------+-------------------------+---------------------
// no                          | -                       | Build
// yes                         | yes                     | Build
// yes                         | no                      | Tag(that image)
/// How the missing sandbox image is made, given kubeadm's list.
pub(super) fn sandbox_image(listed: &str) -> SandboxImage {
    match listed.split_whitespace().find(|t| t.contains("/pause:")) {
        Some(pause) if pause != SANDBOX_IMAGE => SandboxImage::Tag(pause.to_string()),
        _ => SandboxImage::Build,
    }
}

/// The component images, tagged as `kubeadm config images list` prints them, built when
/// missing, and the sandbox image; returns the images to preload into the node image.
pub(super) fn component_images(
    b: &mut Builder,
    work: &Path,
    bin: &Path,
    rootfs_tar: &Path,
    control_plane: &Binaries,
) -> Result<Vec<String>, ProvisionError> {
    b.announce("component images (as `kubeadm config images list` prints them)");
    let listed = b.command(
        "kubeadm config images list",
        cmd(
            &format!("{}/kubeadm", bin.to_string_lossy()),
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
    for tag in listed.split_whitespace() {
        let image = component_image(tag);
        if image == ComponentImage::NotNeeded || docker::image_exists(tag) {
            continue;
        }
        match image {
            ComponentImage::NotNeeded => {}
            ComponentImage::ControlPlane(component) => {
                scratch_image(b, work, tag, control_plane.path(component))?;
            }
            ComponentImage::NodeBinary(name) => scratch_image(b, work, tag, &bin.join(name))?,
            ComponentImage::Pause => pause_image(b, work, tag)?,
            ComponentImage::KubeProxy => {
                kube_proxy_image(b, work, rootfs_tar, tag, &bin.join("kube-proxy"))?;
            }
            ComponentImage::Unknown => {
                return Err(ProvisionError::Build {
                    step: "component images".into(),
                    log: b.log_path().to_path_buf(),
                    tail: format!(
                        "kubeadm lists an image this setup does not know how to build: {tag}"
                    ),
                });
            }
        }
    }
    if !docker::image_exists(SANDBOX_IMAGE) {
        match sandbox_image(&listed) {
            SandboxImage::Build => pause_image(b, work, SANDBOX_IMAGE)?,
            SandboxImage::Tag(pause) => {
                let mut tag = docker::command();
                tag.args(["tag", &pause, SANDBOX_IMAGE]);
                b.command("tag the sandbox image", tag, false)?;
            }
        }
    }
    Ok(preload_list(&listed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_listed_component_image_has_one_recipe() {
        let cases = [
            (
                "registry.k8s.io/coredns/coredns:v1.12.1",
                ComponentImage::NotNeeded,
            ),
            (
                "registry.k8s.io/kube-apiserver:v1.34.4",
                ComponentImage::ControlPlane(Component::KubeApiserver),
            ),
            (
                "registry.k8s.io/kube-controller-manager:v1.34.4",
                ComponentImage::ControlPlane(Component::KubeControllerManager),
            ),
            (
                "registry.k8s.io/kube-scheduler:v1.34.4",
                ComponentImage::NodeBinary("kube-scheduler"),
            ),
            (
                "registry.k8s.io/etcd:3.6.4-0",
                ComponentImage::ControlPlane(Component::Etcd),
            ),
            ("registry.k8s.io/pause:3.10.1", ComponentImage::Pause),
            (
                "registry.k8s.io/kube-proxy:v1.34.4",
                ComponentImage::KubeProxy,
            ),
            ("registry.k8s.io/something-new:v1", ComponentImage::Unknown),
        ];
        for (tag, image) in cases {
            assert_eq!(component_image(tag), image, "{tag}");
        }
    }

    #[test]
    fn the_preload_list_has_the_sandbox_and_fixture_and_no_dns() {
        let listed = "registry.k8s.io/kube-apiserver:v1.34.4\n\
                      registry.k8s.io/coredns/coredns:v1.12.1\n\
                      registry.k8s.io/pause:3.10\n";
        assert_eq!(
            preload_list(listed),
            vec![
                BUSYBOX_IMAGE.to_string(),
                "registry.k8s.io/kube-apiserver:v1.34.4".to_string(),
                SANDBOX_IMAGE.to_string(),
            ]
        );
    }

    #[test]
    fn the_sandbox_image_is_tagged_from_a_different_listed_pause_or_built() {
        assert_eq!(sandbox_image(""), SandboxImage::Build);
        assert_eq!(
            sandbox_image(&format!("x/etcd:1 {SANDBOX_IMAGE}")),
            SandboxImage::Build
        );
        assert_eq!(
            sandbox_image("registry.k8s.io/pause:3.10.1"),
            SandboxImage::Tag("registry.k8s.io/pause:3.10.1".into())
        );
    }
}
