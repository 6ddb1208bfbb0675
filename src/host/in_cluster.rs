//! Running inside a pod: whether we are, the pod's own IP, and a kubeconfig for the pod's
//! ServiceAccount (what in-cluster clients use), so that everything taking a kubeconfig works
//! unchanged there.

use std::net::{IpAddr, UdpSocket};
use std::path::{Path, PathBuf};

/// Where the kubelet mounts the pod's ServiceAccount credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The apiserver's in-cluster address, when this process runs in a pod.
fn service() -> Option<(String, u16)> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").ok()?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(443);
    Path::new(SERVICE_ACCOUNT_DIR)
        .join("token")
        .exists()
        .then_some((host, port))
}

/// Whether this process runs in a pod with a ServiceAccount token.
pub fn in_pod() -> bool {
    service().is_some()
}

/// The pod's IP: `POD_IP` (the downward API) when set, else the address the pod reaches the
/// apiserver from (a routing lookup: connecting a UDP socket sends nothing). `None` outside
/// a pod.
pub fn pod_ip() -> Option<IpAddr> {
    if let Some(ip) = std::env::var("POD_IP").ok().and_then(|v| v.parse().ok()) {
        return Some(ip);
    }
    let (host, port) = service()?;
    let socket = UdpSocket::bind(("0.0.0.0", 0)).ok()?;
    socket.connect((host.as_str(), port)).ok()?;
    Some(socket.local_addr().ok()?.ip())
}

/// Writes into `dir` a kubeconfig (mode 0600) for the pod's ServiceAccount: the in-cluster
/// apiserver, its CA and token files (read afresh by clients, so a rotated token is used).
pub fn write_kubeconfig(dir: &Path) -> std::io::Result<PathBuf> {
    let (host, port) = service().ok_or_else(|| {
        std::io::Error::other(
            "not in a pod: KUBERNETES_SERVICE_HOST or the ServiceAccount token is missing",
        )
    })?;
    let namespace = std::fs::read_to_string(Path::new(SERVICE_ACCOUNT_DIR).join("namespace"))
        .unwrap_or_else(|_| "default".into());
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: in-cluster
  cluster:
    server: https://{host}:{port}
    certificate-authority: {SERVICE_ACCOUNT_DIR}/ca.crt
users:
- name: in-cluster
  user:
    tokenFile: {SERVICE_ACCOUNT_DIR}/token
contexts:
- name: in-cluster
  context:
    cluster: in-cluster
    user: in-cluster
    namespace: {}
current-context: in-cluster
",
        namespace.trim()
    );
    let path = dir.join("in-cluster.kubeconfig");
    super::write_private(&path, text.as_bytes())?;
    Ok(path)
}
