//! Finding, or building, the control-plane binaries: `etcd`, `kube-apiserver` and
//! `kube-controller-manager`.
//!
//! Resolution order, per binary (envtest's convention first, so existing setups just work):
//! 1. `TEST_ASSET_ETCD`, `TEST_ASSET_KUBE_APISERVER`, `TEST_ASSET_KUBE_CONTROLLER_MANAGER`;
//! 2. `$KUBEBUILDER_ASSETS/<binary>`;
//! 3. our cache, `$GROVE_CONFORMANCE_CACHE` or `<user cache dir>/grove-conformance`, keyed by
//!    version (`bin/k8s-<version>-etcd-<version>/`);
//! 4. a build with the local `go` from the Go module proxy at the pinned versions, under a
//!    file lock so concurrent processes build once (the others wait, then use the result).
//!
//! Otherwise resolution fails with a message saying how to supply the binaries.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Kubernetes version the embedded control plane runs.
pub const KUBERNETES_VERSION: &str = "v1.34.4";
/// The etcd version the embedded control plane runs (envtest pairs 1.34 with 3.6).
pub const ETCD_VERSION: &str = "v3.6.16";

/// One of the three binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// `etcd`.
    Etcd,
    /// `kube-apiserver`.
    KubeApiserver,
    /// `kube-controller-manager`.
    KubeControllerManager,
}

impl Component {
    /// All three, in start order.
    pub const ALL: [Component; 3] = [
        Component::Etcd,
        Component::KubeApiserver,
        Component::KubeControllerManager,
    ];

    /// The binary's file name.
    pub fn binary(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeControllerManager => "kube-controller-manager",
        }
    }

    /// The envtest-style override variable.
    pub fn env_var(self) -> &'static str {
        match self {
            Component::Etcd => "TEST_ASSET_ETCD",
            Component::KubeApiserver => "TEST_ASSET_KUBE_APISERVER",
            Component::KubeControllerManager => "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
        }
    }
}

/// Where a resolved binary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A `TEST_ASSET_*` variable.
    EnvOverride(&'static str),
    /// `$KUBEBUILDER_ASSETS`.
    KubebuilderAssets,
    /// Our version-keyed cache.
    Cache,
    /// Built just now from the Go module proxy.
    Built,
}

/// The three resolved binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// Path to `etcd`.
    pub etcd: PathBuf,
    /// Path to `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// Path to `kube-controller-manager`.
    pub kube_controller_manager: PathBuf,
    /// Where each came from, in [`Component::ALL`] order.
    pub origins: [Origin; 3],
}

impl Binaries {
    /// The path of one component.
    pub fn path(&self, component: Component) -> &Path {
        match component {
            Component::Etcd => &self.etcd,
            Component::KubeApiserver => &self.kube_apiserver,
            Component::KubeControllerManager => &self.kube_controller_manager,
        }
    }
}

/// How to resolve.
#[derive(Debug, Clone)]
pub struct ProvisionOptions {
    /// Build from the Go module proxy when nothing else has the binaries.
    pub allow_build: bool,
    /// Cache root; `None` means `$GROVE_CONFORMANCE_CACHE` or the user cache dir.
    pub cache_root: Option<PathBuf>,
    /// Print progress lines to stderr while building.
    pub progress: bool,
}

impl Default for ProvisionOptions {
    fn default() -> Self {
        ProvisionOptions {
            allow_build: true,
            cache_root: None,
            progress: true,
        }
    }
}

/// Errors while resolving or building.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// A `TEST_ASSET_*` variable or `$KUBEBUILDER_ASSETS` names something that is not there.
    #[error("{var} points at {}, which is not an executable file", path.display())]
    BadOverride {
        /// The variable.
        var: &'static str,
        /// What it named.
        path: PathBuf,
    },
    /// Nothing has the binaries and building is not possible or not allowed.
    #[error(
        "failed to find {missing}: set TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER and \
         TEST_ASSET_KUBE_CONTROLLER_MANAGER to the binaries, or KUBEBUILDER_ASSETS to a directory \
         holding all three, or put them in {} ({reason})",
        cache.display()
    )]
    NotFound {
        /// Which binaries are missing.
        missing: String,
        /// The cache directory that would be used.
        cache: PathBuf,
        /// Why no build happened.
        reason: String,
    },
    /// A build step failed.
    #[error("failed to build the control-plane binaries at step '{step}' (log: {})\n{tail}", log.display())]
    Build {
        /// The step.
        step: String,
        /// The full build log.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
    /// Filesystem trouble.
    #[error("failed to {what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io_err(
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> ProvisionError {
    let path = path.to_path_buf();
    move |source| ProvisionError::Io { what, path, source }
}

/// The cache root: `$GROVE_CONFORMANCE_CACHE`, else `<user cache dir>/grove-conformance`.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("GROVE_CONFORMANCE_CACHE") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("grove-conformance")
}

/// The version-keyed directory the binaries are cached in.
pub fn cache_bin_dir(root: &Path) -> PathBuf {
    root.join("bin")
        .join(format!("k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Looks a binary up in the overrides and `$KUBEBUILDER_ASSETS` (steps 1 and 2), given the
/// environment as a lookup function so the order can be tested without touching the process.
pub fn lookup_configured(
    component: Component,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(PathBuf, Origin)>, ProvisionError> {
    if let Some(value) = env(component.env_var()).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        if !is_executable(&path) {
            return Err(ProvisionError::BadOverride {
                var: component.env_var(),
                path,
            });
        }
        return Ok(Some((path, Origin::EnvOverride(component.env_var()))));
    }
    if let Some(dir) = env("KUBEBUILDER_ASSETS").filter(|v| !v.is_empty()) {
        let path = Path::new(&dir).join(component.binary());
        if is_executable(&path) {
            return Ok(Some((path, Origin::KubebuilderAssets)));
        }
    }
    Ok(None)
}

/// Resolves all three binaries, building them if needed and allowed.
pub fn resolve(options: &ProvisionOptions) -> Result<Binaries, ProvisionError> {
    let env = |name: &str| std::env::var(name).ok();
    let root = options
        .cache_root
        .clone()
        .unwrap_or_else(default_cache_root);
    let cache = cache_bin_dir(&root);
    let mut found: Vec<Option<(PathBuf, Origin)>> = Vec::new();
    for component in Component::ALL {
        let hit = match lookup_configured(component, &env)? {
            Some(hit) => Some(hit),
            None => {
                let path = cache.join(component.binary());
                is_executable(&path).then_some((path, Origin::Cache))
            }
        };
        found.push(hit);
    }
    if found.iter().any(Option::is_none) {
        let missing: Vec<Component> = Component::ALL
            .into_iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(c, _)| c)
            .collect();
        let names = missing
            .iter()
            .map(|c| c.binary())
            .collect::<Vec<_>>()
            .join(", ");
        if !options.allow_build {
            return Err(ProvisionError::NotFound {
                missing: names,
                cache,
                reason: "building was not allowed".into(),
            });
        }
        if which("go").is_none() {
            return Err(ProvisionError::NotFound {
                missing: names,
                cache,
                reason: "no `go` on PATH to build them with".into(),
            });
        }
        build(&root, options.progress)?;
        for (component, slot) in Component::ALL.into_iter().zip(found.iter_mut()) {
            if slot.is_none() {
                *slot = Some((cache.join(component.binary()), Origin::Built));
            }
        }
    }
    let mut it = found.into_iter().map(|f| f.expect("every slot is filled"));
    let (etcd, o1) = it.next().expect("three components");
    let (kube_apiserver, o2) = it.next().expect("three components");
    let (kube_controller_manager, o3) = it.next().expect("three components");
    Ok(Binaries {
        etcd,
        kube_apiserver,
        kube_controller_manager,
        origins: [o1, o2, o3],
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| is_executable(p))
    })
}

/// The replace lines a wrapper module needs: every staging module `k8s.io/X v0.0.0` that
/// `k8s.io/kubernetes` requires maps to `k8s.io/X v0.<minor>.<patch>`.
pub fn staging_replaces(kubernetes_go_mod: &str, kubernetes_version: &str) -> Vec<String> {
    let staging_version = kubernetes_version.replacen("v1.", "v0.", 1);
    let mut modules: Vec<&str> = kubernetes_go_mod
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let first = words.next()?;
            let (module, version) = if first == "require" {
                (words.next()?, words.next()?)
            } else {
                (first, words.next()?)
            };
            (module.starts_with("k8s.io/") && version == "v0.0.0").then_some(module)
        })
        .collect();
    modules.sort_unstable();
    modules.dedup();
    modules
        .into_iter()
        .map(|m| format!("replace {m} => {m} {staging_version}"))
        .collect()
}

/// The `-ldflags` that make `/version` report the real version instead of v0.0.0-master.
pub fn version_ldflags(kubernetes_version: &str) -> String {
    let minor = kubernetes_version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .unwrap_or("0");
    let mut flags = String::from("-s -w");
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        flags.push_str(&format!(
            " -X {package}.gitVersion={kubernetes_version} -X {package}.gitMajor=1 \
             -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
    }
    flags
}

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
fn count_compiled(text: &str) -> usize {
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
            eprintln!(
                "[grove-conformance] {}, step {}/{} ({:.0?} so far): {what}",
                self.title,
                self.step,
                self.steps,
                self.started.elapsed()
            );
        }
    }

    /// Runs `go` with `args` in `dir` as the next step (see [`Builder::command`]).
    fn run(
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
    fn compile(
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
                    Some(total) => eprintln!(
                        "[grove-conformance]   compiling: {} of up to {total} packages ({:.0?} so far)",
                        compiled_since(&self.log_path, log_start),
                        self.started.elapsed()
                    ),
                    None => eprintln!(
                        "[grove-conformance]   still at '{step}' ({:.0?} so far)",
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

/// Builds the commands `commands` (`k8s.io/kubernetes/cmd/<name>`) at [`KUBERNETES_VERSION`]
/// into `out`, in `dir` (three steps). A wrapper module, because k8s.io/kubernetes replaces
/// its staging modules with local paths and replaces only apply in the main module.
pub(crate) fn build_kubernetes(
    builder: &mut Builder,
    dir: &Path,
    commands: &[&str],
    out: &Path,
) -> Result<(), ProvisionError> {
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let seed = "module local/grove-conformance-seed\n\ngo 1.24.0\n";
    std::fs::write(dir.join("go.mod"), seed).map_err(io_err("write", dir))?;
    let info = builder.run(
        &format!("resolve k8s.io/kubernetes@{KUBERNETES_VERSION}"),
        dir,
        &[
            "mod",
            "download",
            "-json",
            &format!("k8s.io/kubernetes@{KUBERNETES_VERSION}"),
        ],
        true,
    )?;
    let info: serde_json::Value =
        serde_json::from_str(&info).map_err(|e| ProvisionError::Build {
            step: "read `go mod download` output".into(),
            log: builder.log_path.clone(),
            tail: e.to_string(),
        })?;
    let go_mod_path = info["GoMod"].as_str().unwrap_or_default().to_string();
    let upstream_go_mod =
        std::fs::read_to_string(&go_mod_path).map_err(io_err("read", Path::new(&go_mod_path)))?;
    let mut go_mod = format!(
        "module local/grove-conformance-kubernetes\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes {KUBERNETES_VERSION}\n\n"
    );
    for line in staging_replaces(&upstream_go_mod, KUBERNETES_VERSION) {
        go_mod.push_str(&line);
        go_mod.push('\n');
    }
    std::fs::write(dir.join("go.mod"), go_mod).map_err(io_err("write", dir))?;
    let mut tools = String::from("//go:build tools\n\npackage tools\n\nimport (\n");
    for command in commands {
        tools.push_str(&format!("\t_ \"k8s.io/kubernetes/cmd/{command}\"\n"));
    }
    tools.push_str(")\n");
    std::fs::write(dir.join("tools.go"), tools).map_err(io_err("write", dir))?;
    builder.run(
        "download Kubernetes modules (go mod tidy)",
        dir,
        &["mod", "tidy"],
        false,
    )?;
    let ldflags = version_ldflags(KUBERNETES_VERSION);
    let out = format!("{}/", out.display());
    let packages: Vec<String> = commands
        .iter()
        .map(|c| format!("k8s.io/kubernetes/cmd/{c}"))
        .collect();
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    builder.compile(
        &format!(
            "compile {} (the long step: 10-30 minutes on 2 cores when nothing is cached)",
            commands.join(", ")
        ),
        dir,
        &["-trimpath", "-ldflags", &ldflags, "-o", &out],
        &packages,
    )?;
    Ok(())
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
            eprintln!(
                "[grove-conformance] another process is building {what}; waiting for {}",
                lock_path.display()
            );
        }
        lock.lock().map_err(io_err("lock", &lock_path))?;
    }
    Ok(lock)
}

/// Builds the three binaries into the cache under an exclusive file lock. Another process
/// that holds the lock is waited for; if it produced the binaries, nothing is built again.
fn build(root: &Path, progress: bool) -> Result<(), ProvisionError> {
    let _lock = lock_build(root, "the control-plane binaries", progress)?;
    let cache = cache_bin_dir(root);
    if Component::ALL
        .iter()
        .all(|c| is_executable(&cache.join(c.binary())))
    {
        return Ok(());
    }
    let work = root.join("build-work");
    let _ = std::fs::remove_dir_all(&work);
    let k8s_dir = work.join("kubernetes");
    let etcd_dir = work.join("etcd");
    let out_dir = work.join("out");
    for dir in [&k8s_dir, &etcd_dir, &out_dir] {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    let log_path = root.join("build.log");
    let _ = std::fs::remove_file(&log_path);
    let mut builder = Builder::new("building control-plane binaries", log_path, 5, progress);

    build_kubernetes(
        &mut builder,
        &k8s_dir,
        &["kube-apiserver", "kube-controller-manager"],
        &out_dir,
    )?;

    // etcd: `go.etcd.io/etcd/server/v3` is itself the main package.
    std::fs::write(
        etcd_dir.join("go.mod"),
        "module local/grove-conformance-etcd\n\ngo 1.24.0\n",
    )
    .map_err(io_err("write", &etcd_dir))?;
    builder.run(
        &format!("download etcd {ETCD_VERSION} modules"),
        &etcd_dir,
        &["get", &format!("go.etcd.io/etcd/server/v3@{ETCD_VERSION}")],
        false,
    )?;
    let etcd_out = out_dir.join("etcd");
    builder.compile(
        "compile etcd",
        &etcd_dir,
        &[
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            &etcd_out.to_string_lossy(),
        ],
        &["go.etcd.io/etcd/server/v3"],
    )?;

    std::fs::create_dir_all(&cache).map_err(io_err("create", &cache))?;
    for component in Component::ALL {
        let from = out_dir.join(component.binary());
        let to = cache.join(component.binary());
        std::fs::rename(&from, &to)
            .or_else(|_| std::fs::copy(&from, &to).map(|_| ()))
            .map_err(io_err("install", &to))?;
    }
    let _ = std::fs::remove_dir_all(&work);
    if progress {
        eprintln!(
            "[grove-conformance] built the control-plane binaries in {:.0?}: {}",
            builder.elapsed(),
            cache.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn compiled_packages_are_counted_from_go_build_v_output() {
        let log = "$ \"go\" \"build\" \"-v\" \"k8s.io/kubernetes/cmd/kube-apiserver\"\n\
                   internal/goarch\n\
                   k8s.io/apimachinery/pkg/util/sets\n\
                   # k8s.io/some/pkg\n\
                   ./x.go:3:2: imported and not used\n\
                   go.etcd.io/etcd/server/v3\n\
                   \n";
        assert_eq!(count_compiled(log), 3);
    }

    fn fake_binary(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn overrides_win_over_kubebuilder_assets() {
        let dir = tempfile::tempdir().unwrap();
        let assets = dir.path().join("assets");
        std::fs::create_dir_all(&assets).unwrap();
        fake_binary(&assets, "etcd");
        let special = fake_binary(dir.path(), "my-etcd");
        let env: HashMap<&str, String> = [
            ("KUBEBUILDER_ASSETS", assets.display().to_string()),
            ("TEST_ASSET_ETCD", special.display().to_string()),
        ]
        .into();
        let lookup = |k: &str| env.get(k).cloned();
        let (path, origin) = lookup_configured(Component::Etcd, &lookup)
            .unwrap()
            .unwrap();
        assert_eq!(path, special);
        assert_eq!(origin, Origin::EnvOverride("TEST_ASSET_ETCD"));
        // kube-apiserver is not in the assets dir: not found there, no error.
        assert!(
            lookup_configured(Component::KubeApiserver, &lookup)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn kubebuilder_assets_are_used_when_no_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = fake_binary(dir.path(), "kube-apiserver");
        let env: HashMap<&str, String> =
            [("KUBEBUILDER_ASSETS", dir.path().display().to_string())].into();
        let hit = lookup_configured(Component::KubeApiserver, &|k| env.get(k).cloned())
            .unwrap()
            .unwrap();
        assert_eq!(hit, (path, Origin::KubebuilderAssets));
    }

    #[test]
    fn a_broken_override_is_an_error_naming_the_variable() {
        let env: HashMap<&str, String> =
            [("TEST_ASSET_KUBE_APISERVER", "/nonexistent/kas".to_string())].into();
        let err =
            lookup_configured(Component::KubeApiserver, &|k| env.get(k).cloned()).unwrap_err();
        assert!(
            err.to_string().contains("TEST_ASSET_KUBE_APISERVER"),
            "{err}"
        );
    }

    #[test]
    fn not_found_without_build_says_how_to_supply_binaries() {
        let dir = tempfile::tempdir().unwrap();
        let options = ProvisionOptions {
            allow_build: false,
            cache_root: Some(dir.path().to_path_buf()),
            progress: false,
        };
        // Only meaningful when the environment does not configure binaries itself.
        if Component::ALL
            .iter()
            .any(|c| std::env::var_os(c.env_var()).is_some())
            || std::env::var_os("KUBEBUILDER_ASSETS").is_some()
        {
            return;
        }
        let err = resolve(&options).unwrap_err().to_string();
        assert!(err.contains("KUBEBUILDER_ASSETS"), "{err}");
        assert!(
            err.contains("etcd, kube-apiserver, kube-controller-manager"),
            "{err}"
        );
    }

    #[test]
    fn cached_binaries_resolve_without_building() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache_bin_dir(dir.path());
        std::fs::create_dir_all(&cache).unwrap();
        for c in Component::ALL {
            fake_binary(&cache, c.binary());
        }
        if std::env::var_os("KUBEBUILDER_ASSETS").is_some()
            || Component::ALL
                .iter()
                .any(|c| std::env::var_os(c.env_var()).is_some())
        {
            return;
        }
        let options = ProvisionOptions {
            allow_build: false,
            cache_root: Some(dir.path().to_path_buf()),
            progress: false,
        };
        let bins = resolve(&options).unwrap();
        assert_eq!(bins.origins, [Origin::Cache, Origin::Cache, Origin::Cache]);
        assert_eq!(bins.etcd, cache.join("etcd"));
    }

    #[test]
    fn staging_modules_become_replace_lines() {
        let go_mod = "module k8s.io/kubernetes\n\nrequire (\n\tk8s.io/api v0.0.0\n\tk8s.io/utils v0.0.0-20250604170112-4c0f3b243397\n\tk8s.io/client-go v0.0.0\n)\nrequire k8s.io/kubectl v0.0.0\n";
        assert_eq!(
            staging_replaces(go_mod, "v1.34.4"),
            vec![
                "replace k8s.io/api => k8s.io/api v0.34.4",
                "replace k8s.io/client-go => k8s.io/client-go v0.34.4",
                "replace k8s.io/kubectl => k8s.io/kubectl v0.34.4",
            ]
        );
    }

    #[test]
    fn ldflags_carry_the_version() {
        let flags = version_ldflags("v1.34.4");
        assert!(flags.contains("k8s.io/component-base/version.gitVersion=v1.34.4"));
        assert!(flags.contains("k8s.io/client-go/pkg/version.gitMinor=34"));
    }
}
