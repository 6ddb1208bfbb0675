//! `in-cluster`: the suite run inside a pod the way a conformance runner (Hydrophone) starts
//! its conformance image: selection and options from the environment, results where the
//! runner collects them, the verdict as the exit code.
//!
//! | variable                | meaning                                                       |
//! |-------------------------|---------------------------------------------------------------|
//! | `E2E_FOCUS`             | `run --focus` (Hydrophone's default `\[Conformance\]`: core)  |
//! | `E2E_SKIP`              | `run --skip`                                                  |
//! | `E2E_DRYRUN=true`       | `run --list`: print the plan, run nothing                     |
//! | `E2E_EXTRA_ARGS`        | more `run` options, `--key=value` separated by spaces         |
//! | `E2E_EXTRA_GINKGO_ARGS` | `--procs=N` becomes `-j N`; the rest is ignored               |
//! | `RESULTS_DIR`           | where results go (default `/tmp/results`)                     |
//!
//! The target is the pod's own cluster (its ServiceAccount), the catalog the one in the image
//! (`/catalog`) unless `E2E_EXTRA_ARGS` names another. `e2e.log` and `junit_01.xml` are
//! written in `RESULTS_DIR`, every other report under `RESULTS_DIR/grove-conformance/`, and
//! last `RESULTS_DIR/done`, holding the JUnit file's path (Sonobuoy's plugin contract). The
//! last line on standard output is `Ginkgo ran 1 suite in …`, the line Hydrophone waits for
//! before it collects the results.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use grove_conformance::host::in_cluster;
use grove_conformance::report::Exit;

use super::error::{CliError, CliResult, finish};
use super::run::{self, RunArgs};

/// The `run` command line the environment makes (after the program and `run`).
#[derive(Debug, Parser)]
#[command(name = "grove-conformance run")]
struct RunLine {
    #[command(flatten)]
    args: RunArgs,
}

/// Where the image keeps its catalog.
pub(crate) const IMAGE_CATALOG: &str = "/catalog";

/// The `run` command line the environment `env` asks for.
fn run_argv(env: &dyn Fn(&str) -> Option<String>, kubeconfig: &str, results: &str) -> Vec<String> {
    let mut argv: Vec<String> = ["grove-conformance", "run", "--kubeconfig", kubeconfig]
        .into_iter()
        .map(String::from)
        .collect();
    let extra: Vec<String> = env("E2E_EXTRA_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    if !extra.iter().any(|a| a.starts_with("--catalog")) {
        argv.extend(["--catalog".into(), IMAGE_CATALOG.into()]);
    }
    argv.extend([
        "--out".into(),
        format!("{results}/grove-conformance"),
        "--junit".into(),
        format!("{results}/junit_01.xml"),
        "--e2e-log".into(),
        format!("{results}/e2e.log"),
    ]);
    for (var, flag) in [("E2E_FOCUS", "--focus"), ("E2E_SKIP", "--skip")] {
        if let Some(value) = env(var).filter(|v| !v.is_empty()) {
            argv.push(format!("{flag}={value}"));
        }
    }
    for arg in env("E2E_EXTRA_GINKGO_ARGS")
        .unwrap_or_default()
        .split_whitespace()
    {
        if let Some(n) = arg.strip_prefix("--procs=") {
            argv.push(format!("--jobs={n}"));
        }
    }
    if env("E2E_DRYRUN").as_deref() == Some("true") {
        argv.push("--list".into());
    }
    argv.extend(extra);
    argv
}

pub(crate) fn in_cluster() -> CliResult {
    let started = Instant::now();
    let results = std::env::var("RESULTS_DIR").unwrap_or_else(|_| "/tmp/results".into());
    let code = finish(run_in_cluster(&results));
    // Everything is written: the `done` file names the results, as Sonobuoy's plugins say it.
    let junit = format!("{results}/junit_01.xml");
    if let Err(e) = std::fs::write(format!("{results}/done"), &junit) {
        eprintln!("warning: failed to write {results}/done: {e}");
    }
    // The line conformance runners (Hydrophone) wait for in the log before collecting.
    println!(
        "Ginkgo ran 1 suite in {:.1}s (grove-conformance exited {code})",
        started.elapsed().as_secs_f64()
    );
    Ok(code)
}

fn run_in_cluster(results: &str) -> CliResult {
    std::fs::create_dir_all(results).map_err(|e| {
        CliError::context(Exit::SetupFailed, format!("failed to create {results}"), e)
    })?;
    let scratch = run::scratch_dir()?;
    let kubeconfig = in_cluster::write_kubeconfig(scratch.path())
        .map_err(|e| CliError::context(Exit::SetupFailed, "in-cluster runs inside a pod", e))?;
    let argv = run_argv(
        &|k| std::env::var(k).ok(),
        &kubeconfig.to_string_lossy(),
        results,
    );
    println!("grove-conformance in-cluster: {}", argv[1..].join(" "));
    let args = match RunLine::try_parse_from(run_line(&argv)) {
        Ok(line) => line.args,
        Err(e) => {
            // Hydrophone fetches both files whatever happened: say it there too.
            let _ = std::fs::write(PathBuf::from(results).join("e2e.log"), e.to_string());
            let _ = std::fs::write(
                PathBuf::from(results).join("junit_01.xml"),
                "<testsuites/>\n",
            );
            return Err(CliError::context(
                Exit::Usage,
                "E2E_EXTRA_ARGS or E2E_FOCUS/E2E_SKIP",
                e,
            ));
        }
    };
    // The runner reads the log for progress from the start: it says at once what will run.
    if let Ok(catalog) = super::load(&args.catalog)
        && let Ok(selected) = run::select(&catalog, &args)
    {
        let _ = std::fs::write(
            PathBuf::from(results).join("e2e.log"),
            format!(
                "Will run {} of {} specs\n",
                selected.len(),
                catalog.cases.len()
            ),
        );
    }
    run::run(&args)
}

/// The arguments of `run` in `argv` (`grove-conformance run ...`): the program, then the rest.
fn run_line(argv: &[String]) -> impl Iterator<Item = &String> {
    argv.iter().take(1).chain(argv.iter().skip(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_becomes_a_run_command_line() {
        let vars = [
            ("E2E_FOCUS", "\\[Conformance\\]"),
            ("E2E_SKIP", ""),
            (
                "E2E_EXTRA_ARGS",
                "--implementation-deployment=grove/op --revision=grove-pr-728",
            ),
            ("E2E_EXTRA_GINKGO_ARGS", "--procs=4 --timeout=1h"),
        ];
        let env = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let argv = run_argv(&env, "/k", "/tmp/results");
        assert_eq!(
            argv,
            [
                "grove-conformance",
                "run",
                "--kubeconfig",
                "/k",
                "--catalog",
                "/catalog",
                "--out",
                "/tmp/results/grove-conformance",
                "--junit",
                "/tmp/results/junit_01.xml",
                "--e2e-log",
                "/tmp/results/e2e.log",
                "--focus=\\[Conformance\\]",
                "--jobs=4",
                "--implementation-deployment=grove/op",
                "--revision=grove-pr-728",
            ]
        );
        assert_eq!(argv[1], "run");
        assert!(RunLine::try_parse_from(run_line(&argv)).is_ok());
        let dry = |k: &str| (k == "E2E_DRYRUN").then(|| "true".to_string());
        assert!(run_argv(&dry, "/k", "/r").contains(&"--list".to_string()));
    }
}
