//! The one way the harness talks to a Docker engine: the `docker` command line, never a socket
//! of its own. kind's nodes, the implementation image's containers and the kind assets' image
//! builds all go through here, so there is one answer to "does Docker work here?" and one
//! message saying what to do when it does not.

use std::io;
use std::process::{Command, Output, Stdio};

/// Why the Docker engine cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// There is no `docker` command.
    #[error(
        "no `docker` command: install Docker (`apt-get install docker.io`) and start `dockerd`"
    )]
    NoCommand(#[source] io::Error),
    /// The command runs but the engine does not answer.
    #[error(
        "Docker does not answer (`docker info`: {0}); start the engine: `dockerd > /tmp/dockerd.log 2>&1 &` (no systemd here), or `systemctl start docker`; install it with `apt-get install docker.io` if it is missing"
    )]
    NotAnswering(String),
    /// A `docker` command failed.
    #[error("`docker {args}` failed: {stderr}")]
    Failed {
        /// The arguments, space-separated.
        args: String,
        /// The first lines of its standard error.
        stderr: String,
    },
}

/// A `docker` command with standard input closed.
pub fn command() -> Command {
    let mut command = Command::new("docker");
    command.stdin(Stdio::null());
    command
}

/// The same, for async callers.
pub fn async_command() -> tokio::process::Command {
    let mut command = tokio::process::Command::new("docker");
    command.stdin(Stdio::null());
    command
}

/// Whether a Docker engine answers (`docker info`), with the reason and what to do when not.
pub fn available() -> Result<(), DockerError> {
    let output = command()
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .map_err(DockerError::NoCommand)?;
    if output.status.success() {
        Ok(())
    } else {
        Err(DockerError::NotAnswering(first_line(
            &output.stderr,
            "`docker info` failed",
        )))
    }
}

/// One field of `docker info` (a Go template such as `{{.DefaultRuntime}}`), if it answers.
pub fn info(format: &str) -> Option<String> {
    let output = command().args(["info", "--format", format]).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Whether the engine has an image of this tag.
pub fn image_exists(tag: &str) -> bool {
    command()
        .args(["image", "inspect", tag])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `docker ARGS` and returns its standard output, or the failure with its standard error.
pub fn output(args: &[&str]) -> Result<String, DockerError> {
    let out = command()
        .args(args)
        .output()
        .map_err(DockerError::NoCommand)?;
    checked(args, out)
}

/// Turns a finished `docker ARGS` into its standard output or a [`DockerError::Failed`].
pub fn checked(args: &[&str], out: Output) -> Result<String, DockerError> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(DockerError::Failed {
            args: args.join(" "),
            stderr: first_line(&out.stderr, "no output"),
        })
    }
}

/// Removes a container, whatever state it is in. Best effort.
pub fn remove(id: &str) {
    let _ = command().args(["rm", "-f", id]).output();
}

fn first_line(bytes: &[u8], default: &str) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(default)
        .trim()
        .to_string()
}
