//! An implementation run as a container from a local image, through `testcontainers`: on the
//! host network (so it reaches the apiserver and serves webhooks on loopback as a process
//! would), with its kubeconfig (made self-contained), certificates and configuration mounted at
//! the paths the placeholders name. Pause is `docker pause`, resume `docker unpause`, a crash a
//! SIGKILL followed by a start of the same container. Its output is kept in the instance's log
//! file when it stops.
//!
//! Every container carries the harness's pid in a label; containers left by a harness that was
//! killed are removed the next time one starts.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::host::docker;
use testcontainers::core::{AccessMode, Mount};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// Label naming the harness process that started a container.
pub const OWNER_LABEL: &str = "io.grove-conformance.owner-pid";

/// Errors while running an implementation image.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ContainerError {
    /// No Docker engine answers.
    #[error(
        "Docker is not available ({0}); install and start it (Debian: `apt-get install docker.io`, then `dockerd &`) or run the implementation as a command instead"
    )]
    NoDocker(String),
    /// The container could not be created or controlled.
    #[error("container of image {image}: {message}")]
    Docker {
        /// The image.
        image: String,
        /// What failed.
        message: String,
    },
    /// The kubeconfig could not be made self-contained.
    #[error("failed to prepare the kubeconfig for the container: {0}")]
    Kubeconfig(String),
}

/// Whether a Docker engine answers (`docker info`), with the reason when not.
pub fn docker_available() -> Result<(), ContainerError> {
    docker::available().map_err(|e| ContainerError::NoDocker(e.to_string()))
}

/// The engine answers, asked once per process; the first time, containers of killed harnesses
/// are removed too. Containers start once per case, and neither answer changes within a run.
fn engine_ready() -> Result<(), ContainerError> {
    static READY: std::sync::OnceLock<Result<(), ContainerError>> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            docker_available()?;
            reap_orphans();
            Ok(())
        })
        .clone()
}

/// Removes containers left by harness processes that no longer run (a SIGKILLed harness cannot
/// remove its own). Best effort.
pub fn reap_orphans() {
    let Ok(output) = docker::command()
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("label={OWNER_LABEL}"),
            "--format",
            &format!("{{{{.ID}}}} {{{{.Label \"{OWNER_LABEL}\"}}}}"),
        ])
        .output()
    else {
        return;
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let mut parts = line.split_whitespace();
        let (Some(id), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            docker::remove(id);
        }
    }
}

/// A kubeconfig with the files it names (CA, client certificate and key) inlined as data, so
/// the one file is all a container needs. Written with mode 0600.
pub fn self_contained_kubeconfig(source: &Path, out: &Path) -> Result<(), ContainerError> {
    let err = |e: &dyn std::fmt::Display| {
        ContainerError::Kubeconfig(format!("{}: {e}", source.display()))
    };
    let text = std::fs::read_to_string(source).map_err(|e| err(&e))?;
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| err(&e))?;
    let base = source.parent().unwrap_or(Path::new("/"));
    let inline = |map: &mut serde_yaml::Mapping, file_key: &str| -> Result<(), ContainerError> {
        let Some(path) = map
            .get(file_key)
            .and_then(|v| v.as_str())
            .map(PathBuf::from)
        else {
            return Ok(());
        };
        let path = if path.is_absolute() {
            path
        } else {
            base.join(path)
        };
        let bytes = std::fs::read(&path).map_err(|e| err(&format!("{}: {e}", path.display())))?;
        map.remove(file_key);
        map.insert(
            format!("{file_key}-data").into(),
            base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into(),
        );
        Ok(())
    };
    for (list, inner, keys) in [
        ("clusters", "cluster", &["certificate-authority"][..]),
        ("users", "user", &["client-certificate", "client-key"][..]),
    ] {
        let Some(items) = doc.get_mut(list).and_then(|v| v.as_sequence_mut()) else {
            continue;
        };
        for item in items {
            if let Some(map) = item.get_mut(inner).and_then(|v| v.as_mapping_mut()) {
                for key in keys {
                    inline(map, key)?;
                }
            }
        }
    }
    let text = serde_yaml::to_string(&doc).map_err(|e| err(&e))?;
    crate::host::write_private(out, text.as_bytes()).map_err(|e| err(&e))
}

/// The numeric user (and group) `image` runs as, when it names one other than root.
fn image_user(image: &str) -> Option<(u32, u32)> {
    let user =
        crate::host::docker::output(&["image", "inspect", "--format", "{{.Config.User}}", image])
            .ok()?;
    numeric_user(user.trim())
}

/// `uid[:gid]`, numeric and not root (the group defaults to the uid).
fn numeric_user(user: &str) -> Option<(u32, u32)> {
    let (uid, gid) = match user.split_once(':') {
        Some((u, g)) => (u.parse().ok()?, g.parse().ok()?),
        None => {
            let uid = user.parse().ok()?;
            (uid, uid)
        }
    };
    (uid != 0).then_some((uid, gid))
}

/// A running implementation container.
pub struct Container {
    image: String,
    inner: Option<ContainerAsync<GenericImage>>,
    log: PathBuf,
    /// Holds the self-contained kubeconfig.
    _scratch: tempfile::TempDir,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("image", &self.image)
            .field("id", &self.inner.as_ref().map(|c| c.id().to_string()))
            .finish_non_exhaustive()
    }
}

impl Container {
    /// Starts `image` (`name[:tag]`, local) with `args` (none: its own command), a
    /// self-contained copy of `kubeconfig` mounted at its path (and named by `KUBECONFIG`), and
    /// every existing path of `mounts` mounted read-only at the same path.
    pub async fn start(
        image: &str,
        args: Option<Vec<String>>,
        kubeconfig: &Path,
        mounts: &[PathBuf],
        log: &Path,
    ) -> Result<Container, ContainerError> {
        engine_ready()?;
        let scratch = tempfile::Builder::new()
            .prefix("grove-conformance-container-")
            .tempdir()
            .map_err(|e| ContainerError::Kubeconfig(e.to_string()))?;
        let config = scratch.path().join("kubeconfig");
        self_contained_kubeconfig(kubeconfig, &config)?;
        // An image that runs as another user (distroless `nonroot`, say) must still read its
        // copy, which stays 0600: it is handed to that user.
        if let Some((uid, gid)) = image_user(image) {
            let _ = std::os::unix::fs::chown(scratch.path(), Some(uid), Some(gid));
            let _ = std::os::unix::fs::chown(&config, Some(uid), Some(gid));
        }
        let (name, tag) = match image.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => (name, tag),
            _ => (image, "latest"),
        };
        let docker = |message: String| ContainerError::Docker {
            image: image.to_string(),
            message,
        };
        // The self-contained copy is mounted where the original is, so `{kubeconfig}` and
        // `KUBECONFIG` name the same path inside as outside.
        let kubeconfig_path = kubeconfig.to_string_lossy();
        let mut request = GenericImage::new(name, tag)
            .with_network("host")
            .with_label(OWNER_LABEL, std::process::id().to_string())
            .with_env_var("KUBECONFIG", kubeconfig_path.clone())
            .with_mount(
                Mount::bind_mount(config.to_string_lossy(), kubeconfig_path)
                    .with_access_mode(AccessMode::ReadOnly),
            );
        for path in mounts.iter().filter(|p| p.exists()) {
            let path = path.to_string_lossy();
            request = request.with_mount(
                Mount::bind_mount(path.clone(), path).with_access_mode(AccessMode::ReadOnly),
            );
        }
        if let Some(args) = args {
            request = request.with_cmd(args);
        }
        let inner = request.start().await.map_err(|e| {
            let text = e.to_string();
            docker(if text.contains("pull") || text.contains("404") {
                format!("{text} (only local images can be used: no registry is reachable; build or load it first)")
            } else {
                text
            })
        })?;
        Ok(Container {
            image: image.to_string(),
            inner: Some(inner),
            log: log.to_path_buf(),
            _scratch: scratch,
        })
    }

    fn inner(&self) -> Result<&ContainerAsync<GenericImage>, ContainerError> {
        self.inner.as_ref().ok_or_else(|| ContainerError::Docker {
            image: self.image.clone(),
            message: "the container was removed".into(),
        })
    }

    fn docker(&self, what: &str, e: impl std::fmt::Display) -> ContainerError {
        ContainerError::Docker {
            image: self.image.clone(),
            message: format!("{what}: {e}"),
        }
    }

    /// `docker pause`.
    pub async fn pause(&self) -> Result<(), ContainerError> {
        self.inner()?
            .pause()
            .await
            .map_err(|e| self.docker("pause", e))
    }

    /// `docker unpause`.
    pub async fn unpause(&self) -> Result<(), ContainerError> {
        self.inner()?
            .unpause()
            .await
            .map_err(|e| self.docker("unpause", e))
    }

    /// SIGKILL, then start the same container again.
    pub async fn crash_and_restart(&self) -> Result<(), ContainerError> {
        let inner = self.inner()?;
        inner
            .stop_with_timeout(Some(0))
            .await
            .map_err(|e| self.docker("kill", e))?;
        inner.start().await.map_err(|e| self.docker("start", e))
    }

    /// Whether it still runs.
    pub async fn running(&self) -> bool {
        match &self.inner {
            Some(c) => c.is_running().await.unwrap_or(false),
            None => false,
        }
    }

    /// Stops and removes it, keeping its output in the log file.
    pub async fn stop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let _ = inner.unpause().await;
        let _ = inner.stop_with_timeout(Some(5)).await;
        let mut text = inner.stdout_to_vec().await.unwrap_or_default();
        text.extend(inner.stderr_to_vec().await.unwrap_or_default());
        if let Err(e) = append(&self.log, &text) {
            tracing::warn!(log = %self.log.display(), error = %e, "failed to keep the container's output");
        }
        if let Err(e) = inner.rm().await {
            tracing::warn!(error = %e, "failed to remove the implementation container");
        }
    }
}

fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_numeric_users_other_than_root_are_handed_the_kubeconfig() {
        assert_eq!(numeric_user("65532:65532"), Some((65532, 65532)));
        assert_eq!(numeric_user("1000"), Some((1000, 1000)));
        assert_eq!(numeric_user("0"), None);
        assert_eq!(numeric_user(""), None);
        assert_eq!(numeric_user("nonroot"), None);
    }

    use super::*;

    #[test]
    fn a_kubeconfig_is_made_self_contained_and_private() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pki")).unwrap();
        std::fs::write(dir.path().join("pki/ca.crt"), "CA").unwrap();
        std::fs::write(dir.path().join("pki/admin.crt"), "CERT").unwrap();
        std::fs::write(dir.path().join("pki/admin.key"), "KEY").unwrap();
        let source = dir.path().join("kubeconfig");
        std::fs::write(
            &source,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:6443', certificate-authority: {}/pki/ca.crt}}\nusers:\n- name: u\n  user: {{client-certificate: pki/admin.crt, client-key: pki/admin.key}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let out = dir.path().join("inline");
        self_contained_kubeconfig(&source, &out).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("certificate-authority-data: Q0E="), "{text}");
        assert!(text.contains("client-certificate-data: Q0VSVA=="), "{text}");
        assert!(text.contains("client-key-data: S0VZ"), "{text}");
        assert!(!text.contains("pki/"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::remove_file(dir.path().join("pki/admin.key")).unwrap();
        let err = self_contained_kubeconfig(&source, &out)
            .unwrap_err()
            .to_string();
        assert!(err.contains("admin.key"), "{err}");
    }
}
