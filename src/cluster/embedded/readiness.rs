//! Waiting for the control plane's components: clients for the apiserver and the controller
//! manager's health port, a plain HTTP probe for etcd, and the wait that gives up, with the
//! log's last lines, when a component exits or its time is out.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::control_plane::ControlPlaneError;
use crate::host::process::Supervised;

/// Builds a client from a kubeconfig file (its current context).
pub async fn client_for(kubeconfig: &Path) -> Result<Client, ControlPlaneError> {
    let file =
        Kubeconfig::read_from(kubeconfig).map_err(|e| ControlPlaneError::Client(Box::new(e)))?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| ControlPlaneError::Client(Box::new(e)))?;
    Client::try_from(config).map_err(|e| ControlPlaneError::Client(Box::new(e)))
}

pub(super) fn insecure_client(port: u16) -> Result<Client, ControlPlaneError> {
    let uri: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e: http::uri::InvalidUri| ControlPlaneError::Client(Box::new(e)))?;
    let mut config = Config::new(uri);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    Client::try_from(config).map_err(|e| ControlPlaneError::Client(Box::new(e)))
}

/// A GET over plain HTTP/1.0 on 127.0.0.1, true on a 200 answer (etcd's `/health`).
pub(super) fn plain_http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}

fn not_ready(
    component: &'static str,
    log_dir: &Path,
    child: &mut Supervised,
    timeout: Duration,
) -> ControlPlaneError {
    let log = child
        .log()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let state = match child.exited() {
        Some(status) => format!("exited with {status}"),
        None => format!("not ready after {timeout:?}"),
    };
    ControlPlaneError::NotReady {
        component,
        detail: format!("{state}; last log lines:\n{}", tail.join("\n")),
        logs: log_dir.to_path_buf(),
    }
}

pub(super) async fn wait_until(
    timeout: Duration,
    component: &'static str,
    log_dir: &Path,
    child: &mut Supervised,
    mut ready: impl FnMut() -> bool,
) -> Result<(), ControlPlaneError> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        if child.exited().is_some() || Instant::now() >= deadline {
            return Err(not_ready(component, log_dir, child, timeout));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub(super) async fn wait_until_async<F, Fut>(
    timeout: Duration,
    component: &'static str,
    log_dir: &Path,
    child: &mut Supervised,
    mut ready: F,
) -> Result<(), ControlPlaneError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if ready().await {
            return Ok(());
        }
        if child.exited().is_some() || Instant::now() >= deadline {
            return Err(not_ready(component, log_dir, child, timeout));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
