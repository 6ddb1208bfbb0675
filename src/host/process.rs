//! Child-process supervision: nothing we start outlives us.
//!
//! Every child runs in its own process group and gets `PR_SET_PDEATHSIG(SIGKILL)`, so even a
//! SIGKILL of our process takes the children with it. The kernel delivers the parent-death
//! signal when the *thread* that forked the child exits, not the process, so every spawn goes
//! through one spawner thread that lives as long as the process. Live children and temporary
//! directories are registered; an `atexit` hook (normal exit of a test binary, which never runs
//! destructors of statics) stops the children and removes the directories. Directories left by
//! a killed process are removed by [`reap_stale_dirs`] on the next start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Prefix of every temporary directory this crate creates (used by the stale-directory reaper).
pub const TEMP_PREFIX: &str = "grove-conformance-";

/// Errors while starting a child.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program could not be started.
    #[error("failed to start {program}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Its log file could not be opened.
    #[error("failed to open log file {}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

#[derive(Default)]
struct Registry {
    children: BTreeMap<u32, String>,
    dirs: Vec<PathBuf>,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        install_exit_hook();
        Mutex::new(Registry::default())
    })
}

fn lock_registry() -> std::sync::MutexGuard<'static, Registry> {
    registry()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("grove-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The channel's sender lives in a static, so this loop only ends at exit.
                loop {
                    std::thread::park();
                }
            })
            .expect("failed to start the spawner thread");
        Mutex::new(tx)
    })
}

#[allow(unsafe_code)]
fn set_parent_death_signal(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2),
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[allow(unsafe_code)]
fn install_exit_hook() {
    extern "C" fn on_exit() {
        cleanup_all();
    }
    // SAFETY: registering a plain `extern "C" fn` with atexit(3) has no preconditions.
    unsafe {
        libc::atexit(on_exit);
    }
}

/// Stops every registered child and removes every registered directory. Idempotent; runs at
/// process exit and may be called from a signal-handling task before exiting.
pub fn cleanup_all() {
    let (children, dirs) = {
        let mut registry = lock_registry();
        (
            std::mem::take(&mut registry.children),
            std::mem::take(&mut registry.dirs),
        )
    };
    for pid in children.keys() {
        signal_group(*pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    for pid in children.keys() {
        while group_alive(*pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        signal_group(*pid, libc::SIGKILL);
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn signal_group(pgid: u32, signal: libc::c_int) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        // kill(2) on a negative pid signals the process group.
        send_signal(-pgid, signal);
    }
}

#[allow(unsafe_code)]
fn send_signal(pid: libc::pid_t, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Whether every thread of every process in the group `pgid` has stopped (or exited). A
/// SIGSTOP is only queued by kill(2): each thread stops when it next runs in the kernel, and on
/// a busy machine a thread woken meanwhile (by an answer, a closed connection) may act first.
fn group_stopped(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| stat_fields(&e.path().join("stat")).is_some_and(|(_, group)| group == pgid))
        .all(|e| {
            let Ok(tasks) = std::fs::read_dir(e.path().join("task")) else {
                // It exited meanwhile.
                return true;
            };
            tasks.filter_map(Result::ok).all(|t| {
                // A task gone meanwhile has nothing left to do.
                stat_fields(&t.path().join("stat"))
                    .is_none_or(|(state, _)| matches!(state, 'T' | 't' | 'Z' | 'X'))
            })
        })
}

/// The state and the process group of a `/proc/…/stat` file.
fn stat_fields(path: &Path) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name may hold spaces and parentheses: the fields follow its last `)`.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

fn group_alive(pgid: u32) -> bool {
    libc::pid_t::try_from(pgid).is_ok_and(|pgid| send_signal(-pgid, 0))
}

/// Registers a directory to be removed at exit (unless [`forget_dir`] is called first).
pub fn register_dir(dir: &Path) {
    lock_registry().dirs.push(dir.to_path_buf());
}

/// Keeps a directory at exit (for logs worth reading after a failure).
pub fn forget_dir(dir: &Path) {
    lock_registry().dirs.retain(|d| d != dir);
}

/// Creates a fresh temporary directory named `grove-conformance-<pid>-<tag>-XXXX`, registered
/// for removal at exit.
pub fn temp_dir(tag: &str) -> std::io::Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-{tag}-", std::process::id()))
        .tempdir()?
        .keep();
    register_dir(&dir);
    Ok(dir)
}

/// Removes temporary directories left behind by processes of ours that no longer exist
/// (a SIGKILLed harness cannot clean up after itself). Returns how many were removed.
pub fn reap_stale_dirs() -> usize {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// A supervised child process: its own process group, killed with us, stopped on drop.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    child: Child,
    log: Option<PathBuf>,
    /// The case class its CPU is also accounted to ([`super::cpu`]).
    class: Option<String>,
    /// Whether its CPU has been accounted (once, when it is stopped).
    accounted: bool,
}

impl Supervised {
    /// Starts `command` as a supervised child named `name`, stdout and stderr appended to `log`
    /// (or inherited when `None`).
    pub fn spawn(
        name: &str,
        mut command: Command,
        log: Option<&Path>,
    ) -> Result<Supervised, SpawnError> {
        use std::os::unix::process::CommandExt;
        let program = command.get_program().to_string_lossy().into_owned();
        if let Some(path) = log {
            let open = || {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
            };
            let out = open().map_err(|source| SpawnError::Log {
                path: path.to_path_buf(),
                source,
            })?;
            let err = open().map_err(|source| SpawnError::Log {
                path: path.to_path_buf(),
                source,
            })?;
            command.stdout(out).stderr(err);
        }
        command.stdin(Stdio::null()).process_group(0);
        set_parent_death_signal(&mut command);
        // Register before spawning so the exit hook exists even for the first child.
        drop(lock_registry());
        let (tx, rx) = mpsc::channel();
        let sent = spawner()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((command, tx));
        let spawned = match sent {
            Ok(()) => rx
                .recv()
                .unwrap_or_else(|_| Err(std::io::Error::other("spawner thread is gone"))),
            Err(_) => Err(std::io::Error::other("spawner thread is gone")),
        };
        let child = spawned.map_err(|source| SpawnError::Spawn { program, source })?;
        lock_registry()
            .children
            .insert(child.id(), name.to_string());
        Ok(Supervised {
            name: name.to_string(),
            child,
            log: log.map(Path::to_path_buf),
            class: None,
            accounted: false,
        })
    }

    /// The child's pid (also its process-group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Accounts its CPU to case class `class` too, besides its name ([`super::cpu`]).
    pub fn account_as(&mut self, class: &str) {
        self.class = Some(class.to_string());
    }

    /// Adds its CPU so far to the run's ledger, once: just before it is signalled to stop,
    /// while `/proc` still has it. A child already reaped is not read: its pid may name
    /// another process by now.
    fn account(&mut self) {
        if std::mem::replace(&mut self.accounted, true)
            || self.child.try_wait().ok().flatten().is_some()
        {
            return;
        }
        if let Some(spent) = super::cpu::process_cpu(self.pid()) {
            super::cpu::record(&self.name, self.class.as_deref(), spent);
        }
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its output goes, if anywhere.
    pub fn log(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// `Some(status)` when the child has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Freezes the whole process group (SIGSTOP): the child observes nothing and acts on
    /// nothing until [`Supervised::resume`]. The signal is only sent: see
    /// [`Supervised::stopped`].
    pub fn pause(&self) {
        signal_group(self.pid(), libc::SIGSTOP);
    }

    /// Whether every thread of the process group has stopped since [`Supervised::pause`]:
    /// until then, a thread may still act on what it has just received.
    pub fn stopped(&self) -> bool {
        group_stopped(self.pid())
    }

    /// Thaws the process group (SIGCONT).
    pub fn resume(&self) {
        signal_group(self.pid(), libc::SIGCONT);
    }

    /// SIGKILLs the whole process group and reaps the child.
    pub fn kill(&mut self) {
        self.account();
        signal_group(self.pid(), libc::SIGKILL);
        let _ = self.child.wait();
        self.unregister();
    }

    /// SIGTERM, then SIGKILL after `grace`; reaps the child.
    pub fn stop(&mut self, grace: Duration) {
        self.account();
        if self.exited().is_none() {
            signal_group(self.pid(), libc::SIGCONT);
            signal_group(self.pid(), libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while self.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        signal_group(self.pid(), libc::SIGKILL);
        let _ = self.child.wait();
        self.unregister();
    }

    fn unregister(&self) {
        lock_registry().children.remove(&self.child.id());
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_child_leaves_no_process() {
        let mut command = Command::new("sleep");
        command.arg("30");
        let mut child = Supervised::spawn("sleeper", command, None).unwrap();
        let pid = child.pid();
        assert!(group_alive(pid));
        child.stop(Duration::from_secs(1));
        assert!(!group_alive(pid));
    }

    #[test]
    fn a_paused_child_is_stopped_and_resumes() {
        let mut command = Command::new("sleep");
        command.arg("30");
        let child = Supervised::spawn("pausable", command, None).unwrap();
        child.pause();
        let deadline = Instant::now() + Duration::from_secs(2);
        while !child.stopped() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(child.stopped());
        let state = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
                .flatten()
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while state(child.pid()) != Some('T') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(state(child.pid()), Some('T'));
        child.resume();
        let deadline = Instant::now() + Duration::from_secs(2);
        while state(child.pid()) == Some('T') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_ne!(state(child.pid()), Some('T'));
        assert!(!child.stopped());
    }

    #[test]
    fn stale_directories_of_dead_processes_are_reaped() {
        // pid 0 never names a live process of ours: its directory is stale.
        let stale = std::env::temp_dir().join(format!("{TEMP_PREFIX}999999999-test"));
        std::fs::create_dir_all(&stale).unwrap();
        reap_stale_dirs();
        assert!(!stale.exists());
        let ours = temp_dir("alive").unwrap();
        reap_stale_dirs();
        assert!(ours.exists());
        std::fs::remove_dir_all(ours).unwrap();
    }
}
