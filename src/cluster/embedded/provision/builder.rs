//! Running the steps of a build: one log, a progress line per step, a heartbeat, a lock.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::resolve::{ProvisionError, io_err};

/// Runs the steps of a build with their output in a log, a progress line per step and a
/// heartbeat while a step runs.
pub(crate) struct Builder {
    title: &'static str,
    log_path: PathBuf,
    progress: bool,
    started: Instant,
    steps: usize,
    step: usize,
    /// While `go build -v` runs: how many packages it may compile at most.
    counting: Option<usize>,
}

/// `go` with `args` in `dir`, as every build step runs it.
fn go(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("go");
    command
        .args(args)
        .current_dir(dir)
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod -buildvcs=false");
    command
}

/// How many packages `go build -v` reported compiled in the log after byte `start`.
fn compiled_since(log: &Path, start: u64) -> usize {
    use std::io::{Read, Seek, SeekFrom};
    let mut text = String::new();
    let read = std::fs::File::open(log).and_then(|mut f| {
        f.seek(SeekFrom::Start(start))?;
        f.read_to_string(&mut text)
    });
    if read.is_err() {
        return 0;
    }
    count_compiled(&text)
}

/// The lines of `go build -v` output that name a package (one per package compiled), not
/// the command line logged before it, `# package` headers or compiler messages.
pub(super) fn count_compiled(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-/~+".contains(c))
        })
        .count()
}

impl Builder {
    /// A build called `title` of `steps` steps, logging to `log_path`.
    pub(crate) fn new(
        title: &'static str,
        log_path: PathBuf,
        steps: usize,
        progress: bool,
    ) -> Self {
        Builder {
            title,
            log_path,
            progress,
            started: Instant::now(),
            steps,
            step: 0,
            counting: None,
        }
    }

    /// The log every step appends to.
    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Time since the build started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Prints the progress line of the next step.
    pub(crate) fn announce(&mut self, what: &str) {
        self.step += 1;
        if self.progress {
            tracing::info!(
                "{}, step {}/{} ({:.0?} so far): {what}",
                self.title,
                self.step,
                self.steps,
                self.started.elapsed()
            );
        }
    }

    /// Runs `go` with `args` in `dir` as the next step (see [`Builder::command`]).
    pub(super) fn run(
        &mut self,
        step: &str,
        dir: &Path,
        args: &[&str],
        capture: bool,
    ) -> Result<String, ProvisionError> {
        self.announce(step);
        self.command(step, go(dir, args), capture)
    }

    /// Runs `go build -v` with `args` (which end with the packages to build) in `dir` as the
    /// next step, its heartbeat saying how many packages are compiled out of the packages
    /// the build depends on (`go list -deps`; those already in Go's build cache are not
    /// compiled again, so the count may end below the total).
    pub(super) fn compile(
        &mut self,
        step: &str,
        dir: &Path,
        args: &[&str],
        packages: &[&str],
    ) -> Result<(), ProvisionError> {
        self.announce(step);
        let mut list = vec!["list", "-deps", "-f", "{{.ImportPath}}"];
        list.extend(packages);
        let deps = self.command(step, go(dir, &list), true)?;
        let mut build = vec!["build", "-v"];
        build.extend(args);
        build.extend(packages);
        self.counting = Some(deps.lines().count());
        let result = self.command(step, go(dir, &build), false);
        self.counting = None;
        result.map(drop)
    }

    /// Runs `command` with its output appended to the build log, printing a heartbeat while
    /// it runs; returns stdout when `capture` is set. Does not announce a step.
    pub(crate) fn command(
        &mut self,
        step: &str,
        mut command: Command,
        capture: bool,
    ) -> Result<String, ProvisionError> {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(io_err("open", &self.log_path))?;
        let _ = writeln!(log, "$ {command:?}");
        let stderr_log = log.try_clone().map_err(io_err("open", &self.log_path))?;
        command.stdin(Stdio::null()).stderr(stderr_log);
        if capture {
            command.stdout(Stdio::piped());
        } else {
            command.stdout(log.try_clone().map_err(io_err("open", &self.log_path))?);
        }
        let program = PathBuf::from(command.get_program());
        // Where this command's output starts in the log (for counting compiled packages).
        let log_start = log.metadata().map_or(0, |m| m.len());
        let mut child = command.spawn().map_err(io_err("run", &program))?;
        let mut stdout = String::new();
        if let Some(out) = child.stdout.take() {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                stdout.push_str(&line);
                stdout.push('\n');
            }
        }
        let mut last_beat = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(io_err("wait for", &program))? {
                break status;
            }
            let beat = if self.counting.is_some() { 15 } else { 30 };
            if self.progress && last_beat.elapsed() >= Duration::from_secs(beat) {
                match self.counting {
                    Some(total) => tracing::info!(
                        "  compiling: {} of up to {total} packages ({:.0?} so far)",
                        compiled_since(&self.log_path, log_start),
                        self.started.elapsed()
                    ),
                    None => tracing::info!(
                        "  still at '{step}' ({:.0?} so far)",
                        self.started.elapsed()
                    ),
                }
                last_beat = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if !status.success() {
            return Err(ProvisionError::Build {
                step: step.to_string(),
                log: self.log_path.clone(),
                tail: log_tail(&self.log_path, 30),
            });
        }
        Ok(stdout)
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Takes the exclusive lock `dir/build.lock` (creating `dir`), saying so when another process
/// holds it and is building `what`; the lock is released when the file is dropped.
pub(crate) fn lock_build(
    dir: &Path,
    what: &str,
    progress: bool,
) -> Result<std::fs::File, ProvisionError> {
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let lock_path = dir.join("build.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err("open", &lock_path))?;
    if lock.try_lock().is_err() {
        if progress {
            tracing::info!(
                "another process is building {what}; waiting for {}",
                lock_path.display()
            );
        }
        lock.lock().map_err(io_err("lock", &lock_path))?;
    }
    Ok(lock)
}
