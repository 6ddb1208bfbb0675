//! The kind node image: a Debian rootfs with systemd, containerd, runc and the CNI plugins,
//! kind's own base files, the Kubernetes binaries, an offline containerd configuration and
//! every image a node runs preloaded.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::cluster::embedded::provision::{Builder, KUBERNETES_VERSION, ProvisionError, io_err};
use crate::host::docker;

use super::assets::KIND_VERSION;
use super::images::{chroot, chroot_apt, cmd, import, set_mode, sh, unpack, write};

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

/// Builds the node image `image` from the Debian rootfs `rootfs_tar`, the binaries in `bin`
/// and the images `preload` (three steps).
pub(super) fn node_image_build(
    b: &mut Builder,
    work: &Path,
    rootfs_tar: &Path,
    bin: &Path,
    preload: &[String],
    image: &str,
) -> Result<(), ProvisionError> {
    let rootfs = node_rootfs(b, work, rootfs_tar)?;
    install_node_files(b, work, &rootfs, bin)?;
    preload_and_import(b, &rootfs, preload, image)
}

/// Step 9: the rootfs with the node's Debian packages.
fn node_rootfs(b: &mut Builder, work: &Path, rootfs_tar: &Path) -> Result<PathBuf, ProvisionError> {
    b.announce("node image: Debian packages (systemd, containerd, runc, CNI plugins, ...)");
    let rootfs = work.join("node");
    unpack(b, rootfs_tar, &rootfs)?;
    chroot_apt(b, &rootfs, NODE_PACKAGES)?;
    Ok(rootfs)
}

/// Step 10: kind's files, the binaries, containerd's configuration, systemd units.
fn install_node_files(
    b: &mut Builder,
    work: &Path,
    rootfs: &Path,
    bin: &Path,
) -> Result<(), ProvisionError> {
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
    configure_containerd(b, rootfs)?;
    install_units(b, rootfs)
}

/// containerd: the base runtime spec kind expects ([`cri_base_spec`]), quirk 2 of hosts whose
/// root lacks CAP_SYS_RESOURCE and every registry at a closed loopback port
/// ([`offline_containerd_config`]).
fn configure_containerd(b: &mut Builder, rootfs: &Path) -> Result<(), ProvisionError> {
    let spec = chroot(b, "containerd's base OCI spec", rootfs, "ctr oci spec")?;
    let spec: Value = serde_json::from_str(&spec).map_err(|e| ProvisionError::Build {
        step: "read `ctr oci spec`".into(),
        log: b.log_path().to_path_buf(),
        tail: e.to_string(),
    })?;
    write(
        &rootfs.join("etc/containerd/cri-base.json"),
        &serde_json::to_string_pretty(&cri_base_spec(spec)).expect("JSON serializes"),
    )?;
    let config_path = rootfs.join("etc/containerd/config.toml");
    let config = std::fs::read_to_string(&config_path).map_err(io_err("read", &config_path))?;
    let config = offline_containerd_config(&config).ok_or_else(|| ProvisionError::Build {
        step: "containerd configuration".into(),
        log: b.log_path().to_path_buf(),
        tail: "kind's containerd config.toml has no `restrict_oom_score_adj` to turn on".into(),
    })?;
    write(&config_path, &config)?;
    for registry in REGISTRIES {
        write(
            &rootfs.join(format!("etc/containerd/certs.d/{registry}/hosts.toml")),
            "server = \"http://127.0.0.1:1\"\n\n[host.\"http://127.0.0.1:1\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        )?;
    }
    Ok(())
}

/// The base OCI spec of the node's containers from containerd's default: without rlimits
/// and with kind's `mount-product-files.sh` as one more `createContainer` hook.
pub(super) fn cri_base_spec(mut spec: Value) -> Value {
    if let Some(process) = spec.get_mut("process").and_then(|p| p.as_object_mut()) {
        process.remove("rlimits");
    }
    let mut hooks = spec["hooks"]["createContainer"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    hooks.push(serde_json::json!({"path": "/kind/bin/mount-product-files.sh"}));
    spec["hooks"]["createContainer"] = Value::Array(hooks);
    spec
}

// `restrict_oom_score_adj = false` | `restrict_oom_score_adj = true` | the configuration
// ---------------------------------+--------------------------------+------------------------
// present                          | -                              | turned on, registries off
// absent                           | present                        | kept, registries off
// absent                           | absent                         | None: nothing to turn on
/// kind's containerd configuration with `restrict_oom_score_adj` turned on (runc cannot
/// lower oom_score_adj where root lacks CAP_SYS_RESOURCE) and the registries configured from
/// `/etc/containerd/certs.d` (each a closed loopback port); `None` when there is no
/// `restrict_oom_score_adj` to turn on.
pub(super) fn offline_containerd_config(config: &str) -> Option<String> {
    let mut config = config.replace(
        "restrict_oom_score_adj = false",
        "restrict_oom_score_adj = true",
    );
    if !config.contains("restrict_oom_score_adj = true") {
        return None;
    }
    config.push_str(
        "\n# Offline node: every registry host resolves to a closed loopback port.\n\
         [plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
    );
    Some(config)
}

/// The node's own systemd units (pod-CIDR routes, per-namespace sysctls), enabled with
/// kind's, and the units that must not run in a container masked.
fn install_units(b: &mut Builder, rootfs: &Path) -> Result<(), ProvisionError> {
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
        rootfs,
        "systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
         grove-conformance-routes.service grove-conformance-sysctl.service && \
         systemctl mask systemd-binfmt.service systemd-sysctl.service",
    )?;
    Ok(())
}

/// Step 11: preloads the images into the node's containerd, then imports the rootfs and
/// configures it as `image`.
fn preload_and_import(
    b: &mut Builder,
    rootfs: &Path,
    preload: &[String],
    image: &str,
) -> Result<(), ProvisionError> {
    b.announce(&format!(
        "node image: preload {} images, import as {image}",
        preload.len()
    ));
    let tar = rootfs.join("tmp/preload.tar");
    let mut save = docker::command();
    save.args(["save", "-o", &tar.to_string_lossy()])
        .args(preload);
    b.command("docker save", save, false)?;
    write(
        &rootfs.join("tmp/preload.toml"),
        "version = 2\nroot = \"/var/lib/containerd\"\nstate = \"/run/preload/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"/run/preload/containerd.sock\"\n",
    )?;
    chroot(
        b,
        "import the images into the node's containerd",
        rootfs,
        "mkdir -p /run/preload; containerd --config /tmp/preload.toml >/tmp/preload.log 2>&1 & pid=$!; \
         i=0; while [ ! -S /run/preload/containerd.sock ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
         ctr -a /run/preload/containerd.sock -n k8s.io images import --all-platforms --no-unpack /tmp/preload.tar; rc=$?; \
         kill $pid; wait $pid 2>/dev/null; rm -rf /run/preload /tmp/preload.tar /tmp/preload.toml /tmp/preload.log; exit $rc",
    )?;
    let staging = format!("{image}-rootfs");
    import(b, rootfs, &staging, &[])?;
    docker_build(b, &node_dockerfile(&staging), image)?;
    let _ = docker::command()
        .args(["rmi", &staging])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    Ok(())
}

/// The build that turns the imported rootfs `staging` into the node image: `docker import
/// --change` cannot set STOPSIGNAL, so a build that only adds configuration.
pub(super) fn node_dockerfile(staging: &str) -> String {
    format!(
        "FROM {staging}\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT [\"/usr/local/bin/entrypoint\", \"/sbin/init\"]\n"
    )
}

/// `docker build -t image -` of `dockerfile` (no context), without BuildKit.
fn docker_build(b: &Builder, dockerfile: &str, image: &str) -> Result<(), ProvisionError> {
    let mut docker_build = docker::command();
    docker_build
        .args(["build", "-q", "-t", image, "-"])
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_base_spec_drops_rlimits_and_adds_kinds_hook() {
        let spec = json!({
            "process": {"rlimits": [{"type": "RLIMIT_NOFILE"}], "cwd": "/"},
            "hooks": {"createContainer": [{"path": "/a"}]},
        });
        assert_eq!(
            cri_base_spec(spec),
            json!({
                "process": {"cwd": "/"},
                "hooks": {"createContainer": [
                    {"path": "/a"}, {"path": "/kind/bin/mount-product-files.sh"},
                ]},
            })
        );
        assert_eq!(
            cri_base_spec(json!({})),
            json!({"hooks": {"createContainer": [{"path": "/kind/bin/mount-product-files.sh"}]}})
        );
    }

    #[test]
    fn the_containerd_configuration_restricts_oom_score_adj_and_points_at_certs_d() {
        let registries = "config_path = \"/etc/containerd/certs.d\"";
        let turned = offline_containerd_config("a\n  restrict_oom_score_adj = false\n").unwrap();
        assert!(
            turned.starts_with("a\n  restrict_oom_score_adj = true\n"),
            "{turned}"
        );
        assert!(turned.contains(registries), "{turned}");
        let kept = offline_containerd_config("restrict_oom_score_adj = true\n").unwrap();
        assert!(
            kept.starts_with("restrict_oom_score_adj = true\n"),
            "{kept}"
        );
        assert!(kept.contains(registries), "{kept}");
        assert_eq!(offline_containerd_config("no such key\n"), None);
    }

    #[test]
    fn the_node_image_stops_with_systemds_signal_and_boots_init() {
        let dockerfile = node_dockerfile("img-rootfs");
        assert!(dockerfile.starts_with("FROM img-rootfs\n"), "{dockerfile}");
        assert!(
            dockerfile.contains("STOPSIGNAL SIGRTMIN+3\n"),
            "{dockerfile}"
        );
        assert!(dockerfile.contains("\"/sbin/init\"]"), "{dockerfile}");
    }
}
