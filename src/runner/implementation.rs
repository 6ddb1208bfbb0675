//! The implementation under test: the reference operator (default), any command, or one that
//! is already running. Started as supervised child processes, so a case can pause (SIGSTOP),
//! resume (SIGCONT) or crash (SIGKILL, then start again) it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cluster::process::{SpawnError, Supervised};

/// Which implementation runs, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImplementationSpec {
    /// The reference operator, run from this very binary (`grove-conformance
    /// reference-operator`), one instance per case watching only the case's namespace.
    Reference {
        /// The executable to run (normally the current one).
        program: PathBuf,
    },
    /// Any command, run through `sh -c` with `KUBECONFIG` set. `{namespace}` and
    /// `{kubeconfig}` in it are replaced, and so are `placeholders`; with `{namespace}` each
    /// case gets its own instance, without it one instance serves every case and cases that
    /// pause or crash the implementation run alone.
    Command {
        /// The command line template.
        template: String,
        /// Further `{name}` → value replacements (`{cert_dir}`, `{webhook_port}`, `{config}`).
        placeholders: Vec<(String, String)>,
        /// A loopback port it serves admission webhooks on: it is ready once that port
        /// accepts connections (after every start and restart).
        ready_port: Option<u16>,
        /// Resources (plural) whose writes its admission webhooks reject while it does not
        /// answer (`failurePolicy: Fail`).
        fail_closed: Vec<String>,
    },
    /// Already running (deployed in the cluster); controller actions are unavailable.
    External,
}

impl ImplementationSpec {
    /// Any command line, with no further placeholders and no readiness port.
    pub fn command_line(template: impl Into<String>) -> Self {
        ImplementationSpec::Command {
            template: template.into(),
            placeholders: Vec::new(),
            ready_port: None,
            fail_closed: Vec::new(),
        }
    }

    /// Resources whose writes fail while the implementation is paused or restarting.
    pub fn fail_closed(&self) -> &[String] {
        match self {
            ImplementationSpec::Command { fail_closed, .. } => fail_closed,
            _ => &[],
        }
    }

    /// The loopback port that tells when an instance is ready, if any.
    pub fn ready_port(&self) -> Option<u16> {
        match self {
            ImplementationSpec::Command { ready_port, .. } => *ready_port,
            _ => None,
        }
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
            ImplementationSpec::External => false,
        }
    }

    /// Whether the harness can pause, resume and crash it.
    pub fn controllable(&self) -> bool {
        !matches!(self, ImplementationSpec::External)
    }

    /// A short name for reports.
    pub fn display_name(&self) -> String {
        match self {
            ImplementationSpec::Reference { .. } => "grove-reference-operator".into(),
            ImplementationSpec::Command { template, .. } => template.clone(),
            ImplementationSpec::External => "external".into(),
        }
    }

    /// The command that starts one instance (`None` for an external implementation).
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
            ImplementationSpec::Command {
                template,
                placeholders,
                ..
            } => {
                let line = super::admission::render(template, placeholders)
                    .replace("{kubeconfig}", &kubeconfig.to_string_lossy())
                    .replace("{namespace}", namespace.unwrap_or(""));
                let mut command = Command::new("sh");
                command.arg("-c").arg(format!("exec {line}"));
                command.env("KUBECONFIG", kubeconfig);
                Some(command)
            }
            ImplementationSpec::External => None,
        }
    }
}

/// How long an implementation with a readiness port may take to listen after a start.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running instance of the implementation, with the controls cases use.
#[derive(Debug)]
pub struct Instance {
    spec: ImplementationSpec,
    kubeconfig: PathBuf,
    namespace: Option<String>,
    log: PathBuf,
    child: Option<Supervised>,
    paused: bool,
    restarts: u32,
}

impl Instance {
    /// Starts an instance, its output appended to `log`.
    pub fn start(
        spec: &ImplementationSpec,
        kubeconfig: &Path,
        namespace: Option<&str>,
        log: &Path,
    ) -> Result<Instance, SpawnError> {
        let mut instance = Instance {
            spec: spec.clone(),
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: namespace.map(str::to_string),
            log: log.to_path_buf(),
            child: None,
            paused: false,
            restarts: 0,
        };
        instance.spawn()?;
        Ok(instance)
    }

    fn spawn(&mut self) -> Result<(), SpawnError> {
        if let Some(command) = self
            .spec
            .command(&self.kubeconfig, self.namespace.as_deref())
        {
            self.child = Some(Supervised::spawn(
                "implementation",
                command,
                Some(&self.log),
            )?);
        }
        Ok(())
    }

    /// Freezes it (SIGSTOP): it observes and does nothing until resumed.
    pub fn pause(&mut self) {
        if let Some(child) = &self.child {
            child.pause();
            self.paused = true;
        }
    }

    /// Thaws it (SIGCONT).
    pub fn resume(&mut self) {
        if let Some(child) = &self.child {
            child.resume();
            self.paused = false;
        }
    }

    /// SIGKILLs it and starts a fresh instance.
    pub fn crash_and_restart(&mut self) -> Result<(), SpawnError> {
        if let Some(mut child) = self.child.take() {
            child.kill();
        }
        self.paused = false;
        self.restarts += 1;
        self.spawn()
    }

    /// Waits until the instance is ready: its webhook port accepts connections, when the
    /// implementation has one (after a start or a restart); at once otherwise.
    pub async fn ready(&self) -> Result<(), String> {
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
    pub fn exited(&mut self) -> Option<String> {
        self.child
            .as_mut()
            .and_then(|c| c.exited())
            .map(|status| format!("the implementation exited on its own ({status})"))
    }

    /// Where its output goes.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Stops it (SIGTERM, then SIGKILL).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.stop(Duration::from_secs(5));
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop();
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
            placeholders: vec![("cert_dir".into(), "/c".into())],
            ready_port: None,
            fail_closed: Vec::new(),
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

    #[test]
    fn an_instance_can_be_paused_crashed_and_restarted() {
        let spec = ImplementationSpec::command_line("sleep 30 # {namespace}");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("impl.log");
        let mut instance =
            Instance::start(&spec, Path::new("/dev/null"), Some("ns"), &log).unwrap();
        instance.pause();
        instance.resume();
        assert!(instance.exited().is_none());
        instance.crash_and_restart().unwrap();
        assert_eq!(instance.restarts(), 1);
        assert!(instance.exited().is_none());
        instance.stop();
    }
}
