//! The implementation under test: the reference operator (default), any command, a container
//! image, or one that is already running. Commands run as supervised child processes and
//! images as containers, so a case can pause (SIGSTOP / `docker pause`), resume (SIGCONT /
//! `docker unpause`) or crash (SIGKILL, then start again) it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::container::{Container, ContainerError};
use super::deployment::{Deployed, DeploymentError, DeploymentRef};
use crate::host::process::{SpawnError, Supervised};

/// What an implementation started by the harness gets besides its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    /// `{name}` → value replacements (`{cert_dir}`, `{webhook_port}`, `{config}`).
    pub placeholders: Vec<(String, String)>,
    /// A loopback port it serves admission webhooks on: it is ready once that port accepts
    /// connections (after every start and restart).
    pub ready_port: Option<u16>,
    /// Resources (plural) whose writes its admission webhooks reject while it does not answer
    /// (`failurePolicy: Fail`).
    pub fail_closed: Vec<String>,
}

/// Which implementation runs, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImplementationSpec {
    /// The reference operator, run from this very binary (`grove-conformance
    /// reference-operator`), one instance per case watching only the case's namespace.
    Reference {
        /// The executable to run (normally the current one).
        program: PathBuf,
    },
    /// Any command, run through `sh -c` with `KUBECONFIG` set. `{namespace}`, `{kubeconfig}`
    /// and the setup's placeholders in it are replaced; with `{namespace}` each case gets its
    /// own instance, without it one instance serves every case and cases that pause or crash
    /// the implementation run alone.
    Command {
        /// The command line template.
        template: String,
        /// What it gets besides.
        setup: Setup,
    },
    /// A local container image, run on the host network with `KUBECONFIG` set; `args` (the
    /// same placeholders; split on whitespace) replace its command when given.
    Image {
        /// `name[:tag]`.
        image: String,
        /// Arguments template.
        args: Option<String>,
        /// What it gets besides.
        setup: Setup,
    },
    /// Deployed in the cluster as a Deployment, which the harness points at its API proxy
    /// (listening on `proxy_address`, forwarding with the operator's own credentials) for the
    /// run: pause freezes its traffic there, a crash cuts it off and deletes its pod without
    /// grace ([`super::deployment`]). One instance serves every case.
    Deployment {
        /// Which Deployment, which container.
        deployment: DeploymentRef,
        /// An address of the harness's machine (or pod) the cluster's pods reach.
        proxy_address: std::net::IpAddr,
    },
    /// Already running (deployed in the cluster); controller actions are unavailable.
    External,
}

impl ImplementationSpec {
    /// Any command line, with no further placeholders and no readiness port.
    pub fn command_line(template: impl Into<String>) -> Self {
        ImplementationSpec::Command {
            template: template.into(),
            setup: Setup::default(),
        }
    }

    fn setup(&self) -> Option<&Setup> {
        match self {
            ImplementationSpec::Command { setup, .. } | ImplementationSpec::Image { setup, .. } => {
                Some(setup)
            }
            _ => None,
        }
    }

    /// Resources whose writes fail while the implementation is paused or restarting.
    pub fn fail_closed(&self) -> &[String] {
        self.setup().map_or(&[], |s| &s.fail_closed)
    }

    /// The loopback port that tells when an instance is ready, if any.
    pub fn ready_port(&self) -> Option<u16> {
        self.setup().and_then(|s| s.ready_port)
    }

    /// The reference operator, run from the current executable.
    pub fn reference_from_current_exe() -> std::io::Result<Self> {
        Ok(ImplementationSpec::Reference {
            program: std::env::current_exe()?,
        })
    }

    /// Whether one instance runs per case (namespace-scoped).
    pub fn per_case(&self) -> bool {
        match self {
            ImplementationSpec::Reference { .. } => true,
            ImplementationSpec::Command { template, .. } => template.contains("{namespace}"),
            ImplementationSpec::Image { args, .. } => {
                args.as_deref().is_some_and(|a| a.contains("{namespace}"))
            }
            ImplementationSpec::Deployment { .. } | ImplementationSpec::External => false,
        }
    }

    /// Whether the harness starts it (and can pause, resume and crash it).
    pub fn controllable(&self) -> bool {
        !matches!(self, ImplementationSpec::External)
    }

    /// A short name for reports.
    pub fn display_name(&self) -> String {
        match self {
            ImplementationSpec::Reference { .. } => "grove-reference-operator".into(),
            ImplementationSpec::Command { template, .. } => template.clone(),
            ImplementationSpec::Image { image, .. } => image.clone(),
            ImplementationSpec::Deployment { deployment, .. } => {
                format!("{}/{}", deployment.namespace, deployment.name)
            }
            ImplementationSpec::External => "external".into(),
        }
    }

    /// `template` with every placeholder replaced.
    fn render(template: &str, setup: &Setup, kubeconfig: &Path, namespace: Option<&str>) -> String {
        super::admission::render(template, &setup.placeholders)
            .replace("{kubeconfig}", &kubeconfig.to_string_lossy())
            .replace("{namespace}", namespace.unwrap_or(""))
    }

    /// The command that starts one instance (`None` for an image or an external one).
    pub fn command(&self, kubeconfig: &Path, namespace: Option<&str>) -> Option<Command> {
        match self {
            ImplementationSpec::Reference { program } => {
                let mut command = Command::new(program);
                command
                    .arg("reference-operator")
                    .arg("--kubeconfig")
                    .arg(kubeconfig);
                if let Some(ns) = namespace {
                    command.arg("--namespace").arg(ns);
                }
                command.env("KUBECONFIG", kubeconfig);
                Some(command)
            }
            ImplementationSpec::Command { template, setup } => {
                let line = Self::render(template, setup, kubeconfig, namespace);
                let mut command = Command::new("sh");
                command.arg("-c").arg(format!("exec {line}"));
                command.env("KUBECONFIG", kubeconfig);
                Some(command)
            }
            ImplementationSpec::Image { .. }
            | ImplementationSpec::Deployment { .. }
            | ImplementationSpec::External => None,
        }
    }
}

/// Why an instance could not be started or controlled.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// The process could not be spawned.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The container could not be run or controlled.
    #[error(transparent)]
    Container(#[from] ContainerError),
    /// The deployed implementation could not be set up or controlled.
    #[error(transparent)]
    Deployment(#[from] DeploymentError),
    /// A paused process did not stop in time.
    #[error("the implementation's process group had not stopped {0:?} after SIGSTOP")]
    NotStopped(Duration),
}

/// How long the threads of a paused implementation may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an implementation with a readiness port may take to listen after a start.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What runs.
#[derive(Debug)]
enum Running {
    Process(Supervised),
    Container(Box<Container>),
    Deployed(Box<Deployed>),
}

/// A running instance of the implementation, with the controls cases use.
#[derive(Debug)]
pub struct Instance {
    spec: ImplementationSpec,
    kubeconfig: PathBuf,
    namespace: Option<String>,
    log: PathBuf,
    running: Option<Running>,
    restarts: u32,
    /// The case class its processes' CPU is accounted to.
    class: Option<String>,
}

impl Instance {
    /// Starts an instance, its output appended to `log`.
    pub async fn start(
        spec: &ImplementationSpec,
        kubeconfig: &Path,
        namespace: Option<&str>,
        log: &Path,
    ) -> Result<Instance, InstanceError> {
        let mut instance = Instance {
            spec: spec.clone(),
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: namespace.map(str::to_string),
            log: log.to_path_buf(),
            running: None,
            restarts: 0,
            class: None,
        };
        instance.spawn().await?;
        Ok(instance)
    }

    /// Points `deployment` at `proxy` (a proxy forwarding with the client's credentials,
    /// listening at `proxy_address`, which its pods reach), with `client` and `kubeconfig` the
    /// target's admin access; its pods' output is appended to `log` as they go.
    pub async fn start_deployed(
        deployment: &DeploymentRef,
        proxy_address: std::net::IpAddr,
        client: kube::Client,
        kubeconfig: &Path,
        proxy: std::sync::Arc<crate::proxy::ApiProxy>,
        log: &Path,
    ) -> Result<Instance, InstanceError> {
        let deployed = Deployed::start(client, kubeconfig, deployment, proxy, log).await?;
        Ok(Instance {
            spec: ImplementationSpec::Deployment {
                deployment: deployment.clone(),
                proxy_address,
            },
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: None,
            log: log.to_path_buf(),
            running: Some(Running::Deployed(Box::new(deployed))),
            restarts: 0,
            class: None,
        })
    }

    /// From each crash of a deployed implementation to its replacement serving again.
    pub fn restart_times(&self) -> &[Duration] {
        match &self.running {
            Some(Running::Deployed(d)) => d.restart_times(),
            _ => &[],
        }
    }

    async fn spawn(&mut self) -> Result<(), InstanceError> {
        if let ImplementationSpec::Image { image, args, setup } = &self.spec {
            let args = args.as_deref().map(|a| {
                ImplementationSpec::render(a, setup, &self.kubeconfig, self.namespace.as_deref())
                    .split_whitespace()
                    .map(str::to_string)
                    .collect()
            });
            // Every path a placeholder names (certificates, the rendered configuration) is
            // mounted where the placeholder says.
            let mounts: Vec<PathBuf> = setup
                .placeholders
                .iter()
                .map(|(_, value)| PathBuf::from(value))
                .filter(|p| p.is_absolute())
                .collect();
            let container =
                Container::start(image, args, &self.kubeconfig, &mounts, &self.log).await?;
            self.running = Some(Running::Container(Box::new(container)));
        } else if let Some(command) = self
            .spec
            .command(&self.kubeconfig, self.namespace.as_deref())
        {
            let mut child = Supervised::spawn("implementation", command, Some(&self.log))?;
            if let Some(class) = &self.class {
                child.account_as(class);
            }
            self.running = Some(Running::Process(child));
        }
        Ok(())
    }

    /// Accounts the CPU of its processes, this one and those of its restarts, to case class
    /// `class` ([`crate::host::cpu`]).
    pub fn account_as(&mut self, class: &str) {
        self.class = Some(class.to_string());
        if let Some(Running::Process(child)) = &mut self.running {
            child.account_as(class);
        }
    }

    /// Freezes it (SIGSTOP, `docker pause`): it observes and does nothing until resumed.
    /// Returns once it is frozen, so that nothing it is sent from then on (a dropped answer)
    /// is acted on before the resume.
    pub async fn pause(&mut self) -> Result<(), InstanceError> {
        match &self.running {
            Some(Running::Process(child)) => {
                child.pause();
                let deadline = tokio::time::Instant::now() + STOP_TIMEOUT;
                while !child.stopped() {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(InstanceError::NotStopped(STOP_TIMEOUT));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Some(Running::Container(c)) => c.pause().await?,
            Some(Running::Deployed(d)) => d.pause(),
            None => {}
        }
        Ok(())
    }

    /// Thaws it (SIGCONT, `docker unpause`).
    pub async fn resume(&mut self) -> Result<(), InstanceError> {
        match &self.running {
            Some(Running::Process(child)) => child.resume(),
            Some(Running::Container(c)) => c.unpause().await?,
            Some(Running::Deployed(d)) => d.resume(),
            None => {}
        }
        Ok(())
    }

    /// SIGKILLs it and starts it again.
    pub async fn crash_and_restart(&mut self) -> Result<(), InstanceError> {
        self.restarts += 1;
        match self.running.take() {
            Some(Running::Process(mut child)) => {
                child.kill();
                self.spawn().await
            }
            Some(Running::Container(c)) => {
                let result = c.crash_and_restart().await;
                self.running = Some(Running::Container(c));
                Ok(result?)
            }
            Some(Running::Deployed(mut d)) => {
                let result = d.crash_and_restart().await;
                self.running = Some(Running::Deployed(d));
                Ok(result?)
            }
            None => self.spawn().await,
        }
    }

    /// Waits until the instance is ready: its webhook port accepts connections, when the
    /// implementation has one (after a start or a restart); at once otherwise.
    pub async fn ready(&self) -> Result<(), super::admission::NotListening> {
        match self.spec.ready_port() {
            Some(port) => super::admission::wait_listening(port, READY_TIMEOUT).await,
            None => Ok(()),
        }
    }

    /// How many times it was crashed and restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// `Some(reason)` when it exited on its own.
    pub async fn exited(&mut self) -> Option<String> {
        match &mut self.running {
            Some(Running::Process(child)) => child
                .exited()
                .map(|status| format!("the implementation exited on its own ({status})")),
            Some(Running::Container(c)) => (!c.running().await)
                .then(|| "the implementation's container stopped on its own".to_string()),
            Some(Running::Deployed(d)) => d.exited().await,
            None => None,
        }
    }

    /// Where its output goes.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Stops it (SIGTERM, then SIGKILL; a container is stopped, its output kept in the log, and
    /// removed).
    pub async fn stop(&mut self) {
        match self.running.take() {
            Some(Running::Process(mut child)) => child.stop(Duration::from_secs(5)),
            Some(Running::Container(mut c)) => c.stop().await,
            Some(Running::Deployed(mut d)) => d.stop().await,
            None => {}
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // A process is stopped here; a container not stopped explicitly is removed by its own
        // drop (without its output).
        if let Some(Running::Process(mut child)) = self.running.take() {
            child.stop(Duration::from_secs(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_templated_and_scoped() {
        let spec = ImplementationSpec::Command {
            template: "my-operator --watch {namespace} --config {kubeconfig} --certs {cert_dir}"
                .into(),
            setup: Setup {
                placeholders: vec![("cert_dir".into(), "/c".into())],
                ..Setup::default()
            },
        };
        assert!(spec.per_case());
        let cmd = spec
            .command(Path::new("/k/config"), Some("case-1"))
            .unwrap();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "-c",
                "exec my-operator --watch case-1 --config /k/config --certs /c"
            ]
        );
        let shared = ImplementationSpec::command_line("my-operator");
        assert!(!shared.per_case());
        assert!(!ImplementationSpec::External.controllable());
        assert!(
            ImplementationSpec::External
                .command(Path::new("k"), None)
                .is_none()
        );
    }

    #[test]
    fn the_reference_operator_runs_namespace_scoped() {
        let spec = ImplementationSpec::Reference {
            program: PathBuf::from("/bin/grove-conformance"),
        };
        let cmd = spec.command(Path::new("/k"), Some("ns1")).unwrap();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "reference-operator",
                "--kubeconfig",
                "/k",
                "--namespace",
                "ns1"
            ]
        );
    }

    #[tokio::test]
    async fn an_instance_can_be_paused_crashed_and_restarted() {
        let spec = ImplementationSpec::command_line("sleep 30 # {namespace}");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("impl.log");
        let mut instance = Instance::start(&spec, Path::new("/dev/null"), Some("ns"), &log)
            .await
            .unwrap();
        instance.pause().await.unwrap();
        instance.resume().await.unwrap();
        assert!(instance.exited().await.is_none());
        instance.crash_and_restart().await.unwrap();
        assert_eq!(instance.restarts(), 1);
        assert!(instance.exited().await.is_none());
        instance.stop().await;
    }
}
