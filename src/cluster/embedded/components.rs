//! The control plane's three processes: each started with its flags (loopback ports, the
//! certificates, a Go collector target), its log kept when it fails, and waited for.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::Api;

use super::certs::CertPaths;
use super::control_plane::{ControlPlaneError, ControlPlaneOptions, Ports, io};
use super::provision::Component;
use super::readiness::{client_for, insecure_client, plain_http_ok, wait_until, wait_until_async};
use crate::host::process::{self, Supervised};
use crate::host::write_private;

/// Keeps the logs in `log_dir` (a component failed), passing the error on.
pub(super) fn keep_logs(
    log_dir: &Path,
) -> impl FnOnce(ControlPlaneError) -> ControlPlaneError + '_ {
    move |err| {
        process::forget_dir(log_dir);
        err
    }
}

/// The Go garbage collector's target for the control plane's processes, unless the
/// environment sets `GOGC` itself: a heap may grow to five times what is live before it is
/// collected, against twice by default. The catalog keeps kube-apiserver busy with short-lived
/// objects (pod status patches, custom-resource status writes, watch events); at the default,
/// its collector took about a quarter of its CPU. Measured on 2 cores over the whole catalog:
/// kube-apiserver 88 s of CPU at the default, 64 s at 400; the process tree 144 s against
/// 114 s. Memory is what it costs (a few hundred MB more at peak), and the embedded cluster
/// lives only as long as the run.
pub const CONTROL_PLANE_GOGC: &str = "400";

/// Sets [`CONTROL_PLANE_GOGC`] on a control-plane process, unless `GOGC` is set already.
fn go_gc(command: &mut Command) {
    if std::env::var_os("GOGC").is_none() {
        command.env("GOGC", CONTROL_PLANE_GOGC);
    }
}

/// Starts etcd and waits until it answers `/health`; the logs are kept when it does not.
pub(super) async fn start_etcd(
    options: &ControlPlaneOptions,
    data_dir: &Path,
    log_dir: &Path,
    ports: &Ports,
) -> Result<Supervised, ControlPlaneError> {
    let mut etcd_cmd = Command::new(options.binaries.path(Component::Etcd));
    etcd_cmd.args(etcd_args(data_dir, ports));
    go_gc(&mut etcd_cmd);
    let etcd_log = log_dir.join("etcd.log");
    let mut etcd = Supervised::spawn("etcd", etcd_cmd, Some(&etcd_log))?;
    let port = ports.etcd;
    wait_until(options.ready_timeout, "etcd", log_dir, &mut etcd, || {
        plain_http_ok(port, "/health")
    })
    .await
    .map_err(keep_logs(log_dir))?;
    Ok(etcd)
}

/// Starts kube-apiserver, writes the admin kubeconfig and waits until the apiserver is ready
/// and has made the `default` namespace (the logs are kept when it does not); returns it, the
/// kubeconfig and a client.
pub(super) async fn start_apiserver(
    options: &ControlPlaneOptions,
    data_dir: &Path,
    log_dir: &Path,
    ports: &Ports,
    cert_paths: &CertPaths,
) -> Result<(Supervised, PathBuf, Client), ControlPlaneError> {
    let mut api_cmd = Command::new(options.binaries.path(Component::KubeApiserver));
    api_cmd.args(apiserver_args(cert_paths, &ports.etcd_url(), ports.api));
    go_gc(&mut api_cmd);
    let api_log = log_dir.join("kube-apiserver.log");
    let mut apiserver = Supervised::spawn("kube-apiserver", api_cmd, Some(&api_log))?;

    let kubeconfig = data_dir.join("kubeconfig");
    write_private(
        &kubeconfig,
        kubeconfig_yaml(&ports.server(), cert_paths).as_bytes(),
    )
    .map_err(io("write the kubeconfig"))?;
    let client = client_for(&kubeconfig).await?;

    let probe = client.clone();
    wait_until_async(
        options.ready_timeout,
        "kube-apiserver",
        log_dir,
        &mut apiserver,
        || {
            let probe = probe.clone();
            async move {
                let ready = probe
                    .request_text(
                        http::Request::get("/readyz")
                            .body(Vec::new())
                            .expect("valid request"),
                    )
                    .await
                    .is_ok_and(|t| t.trim() == "ok");
                ready
                    && Api::<Namespace>::all(probe)
                        .get_opt("default")
                        .await
                        .ok()
                        .flatten()
                        .is_some()
            }
        },
    )
    .await
    .map_err(keep_logs(log_dir))?;
    Ok((apiserver, kubeconfig, client))
}

/// Starts kube-controller-manager and waits until it answers `/healthz`; the logs are kept
/// when it does not.
pub(super) async fn start_controller_manager(
    options: &ControlPlaneOptions,
    data_dir: &Path,
    log_dir: &Path,
    ports: &Ports,
    cert_paths: &CertPaths,
    kubeconfig: &Path,
) -> Result<Supervised, ControlPlaneError> {
    let mut kcm_cmd = Command::new(options.binaries.path(Component::KubeControllerManager));
    kcm_cmd.args(controller_manager_args(
        kubeconfig,
        &options.controllers,
        data_dir,
        ports,
        cert_paths,
    ));
    go_gc(&mut kcm_cmd);
    let kcm_log = log_dir.join("kube-controller-manager.log");
    let mut controller_manager =
        Supervised::spawn("kube-controller-manager", kcm_cmd, Some(&kcm_log))?;
    let health = insecure_client(ports.controller_manager)?;
    wait_until_async(
        options.ready_timeout,
        "kube-controller-manager",
        log_dir,
        &mut controller_manager,
        || {
            let health = health.clone();
            async move {
                health
                    .request_text(
                        http::Request::get("/healthz")
                            .body(Vec::new())
                            .expect("valid request"),
                    )
                    .await
                    .is_ok_and(|t| t.trim() == "ok")
            }
        },
    )
    .await
    .map_err(keep_logs(log_dir))?;
    Ok(controller_manager)
}

/// etcd's flags: a single member on loopback, data in `data_dir`, no fsync (the data is
/// thrown away).
fn etcd_args(data_dir: &Path, ports: &Ports) -> Vec<String> {
    let etcd_url = ports.etcd_url();
    let peer = ports.etcd_peer;
    vec![
        format!("--data-dir={}", data_dir.join("etcd").display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
        "--quota-backend-bytes=4294967296".into(),
    ]
}

/// kube-controller-manager's flags: `controllers` only, no leader election, on loopback.
fn controller_manager_args(
    kubeconfig: &Path,
    controllers: &[String],
    data_dir: &Path,
    ports: &Ports,
    cert_paths: &CertPaths,
) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--controllers={}", controllers.join(",")),
        "--leader-elect=false".into(),
        "--use-service-account-credentials=false".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", ports.controller_manager),
        format!("--cert-dir={}", data_dir.join("kcm-certs").display()),
        "--concurrent-gc-syncs=10".into(),
        "--concurrent-namespace-syncs=5".into(),
        // The default client rate (20 requests/s) makes the garbage collector take 13 s to
        // delete the 256 pods of one PodClique; the collector's speed is not what a case
        // tests, and one machine's apiserver has room for more.
        "--kube-api-qps=500".into(),
        "--kube-api-burst=1000".into(),
        format!(
            "--service-account-private-key-file={}",
            cert_paths.sa_private.display()
        ),
        format!("--root-ca-file={}", cert_paths.serving_ca.display()),
        "--v=1".into(),
    ]
}

fn apiserver_args(certs: &CertPaths, etcd_url: &str, port: u16) -> Vec<String> {
    vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--cert-dir={}", certs.dir.display()),
        format!("--tls-cert-file={}", certs.serving_cert.display()),
        format!("--tls-private-key-file={}", certs.serving_key.display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        "--endpoint-reconciler-type=none".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        "--authorization-mode=RBAC".into(),
        format!("--client-ca-file={}", certs.client_ca.display()),
        format!("--service-account-issuer=https://127.0.0.1:{port}/"),
        format!("--service-account-key-file={}", certs.sa_public.display()),
        format!(
            "--service-account-signing-key-file={}",
            certs.sa_private.display()
        ),
        "--disable-admission-plugins=ServiceAccount".into(),
        "--profiling=false".into(),
        "--watch-cache=true".into(),
        "--v=1".into(),
    ]
}

fn kubeconfig_yaml(server: &str, certs: &CertPaths) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: grove-conformance\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: grove-conformance\n  context:\n    cluster: grove-conformance\n    user: admin\n    namespace: default\ncurrent-context: grove-conformance\n",
        certs.serving_ca.display(),
        certs.admin_cert.display(),
        certs.admin_key.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_components_listen_on_their_own_loopback_ports() {
        let ports = Ports {
            etcd: 1,
            etcd_peer: 2,
            api: 3,
            controller_manager: 4,
        };
        let etcd = etcd_args(Path::new("/d"), &ports);
        assert!(etcd.contains(&"--data-dir=/d/etcd".to_string()), "{etcd:?}");
        assert!(etcd.contains(&"--listen-client-urls=http://127.0.0.1:1".to_string()));
        assert!(etcd.contains(&"--initial-cluster=default=http://127.0.0.1:2".to_string()));
        assert_eq!(ports.server(), "https://127.0.0.1:3");
        let pki = |name: &str| PathBuf::from("/d/pki").join(name);
        let certs = CertPaths {
            dir: pki(""),
            serving_ca: pki("ca.crt"),
            serving_cert: pki("apiserver.crt"),
            serving_key: pki("apiserver.key"),
            client_ca: pki("client-ca.crt"),
            admin_cert: pki("admin.crt"),
            admin_key: pki("admin.key"),
            sa_public: pki("sa.pub"),
            sa_private: pki("sa.key"),
        };
        let kcm = controller_manager_args(
            Path::new("/d/kubeconfig"),
            &["garbagecollector".into(), "podgc".into()],
            Path::new("/d"),
            &ports,
            &certs,
        );
        assert!(
            kcm.contains(&"--controllers=garbagecollector,podgc".to_string()),
            "{kcm:?}"
        );
        assert!(kcm.contains(&"--secure-port=4".to_string()), "{kcm:?}");
        assert!(kcm.contains(&"--leader-elect=false".to_string()), "{kcm:?}");
    }
}
