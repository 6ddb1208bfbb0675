//! Where a run's CPU goes: the CPU seconds of every supervised child, read from
//! `/proc/<pid>/stat` just before it is stopped and added up by component (its name at spawn:
//! `etcd`, `kube-apiserver`, `kube-controller-manager`, `implementation`), the
//! implementation's also by case class (the area of the case it served), and the harness's
//! own (`getrusage(RUSAGE_SELF)`: the simulated kubelets, the monitor, the API proxy and the
//! runner). `run` writes them to `cpu.json`; `bench` sets them side by side.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The CPU seconds of one run, by component.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    /// The harness process itself (user + system).
    pub harness: f64,
    /// Each supervised child's component: its processes' user + system seconds, their
    /// reaped children's included.
    pub components: BTreeMap<String, f64>,
    /// The implementation's seconds by the area of the case each instance served (per-case
    /// instances only; a shared instance is in `components` alone).
    pub implementation_by_class: BTreeMap<String, f64>,
}

#[derive(Default)]
struct Ledger {
    components: BTreeMap<String, Duration>,
    classes: BTreeMap<String, Duration>,
}

fn ledger() -> &'static Mutex<Ledger> {
    static LEDGER: OnceLock<Mutex<Ledger>> = OnceLock::new();
    LEDGER.get_or_init(Mutex::default)
}

/// Adds `spent` to `component`, and to `class` when the process served one.
pub(crate) fn record(component: &str, class: Option<&str>, spent: Duration) {
    let mut ledger = ledger().lock().unwrap_or_else(|p| p.into_inner());
    *ledger.components.entry(component.to_string()).or_default() += spent;
    if let Some(class) = class {
        *ledger.classes.entry(class.to_string()).or_default() += spent;
    }
}

/// The user + system time of process `pid` and of its children it has reaped, from
/// `/proc/<pid>/stat`; `None` when it is gone or the file cannot be read.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat, clock_ticks())
}

/// Fields 14–17 (utime, stime, cutime, cstime) of a `/proc/<pid>/stat` line, in ticks of
/// `ticks_per_second`. The command name (field 2) may hold spaces and parentheses: the fields
/// are counted from its last `)`.
fn parse_stat(stat: &str, ticks_per_second: u64) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (field 14) is the 12th here.
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 4 {
        return None;
    }
    let ticks: u64 = fields.iter().sum();
    Some(Duration::from_secs_f64(
        ticks as f64 / ticks_per_second.max(1) as f64,
    ))
}

#[allow(unsafe_code)]
fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).unwrap_or(100)
}

/// This process's own user + system time.
#[allow(unsafe_code)]
pub fn own_cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// What the run spent so far: the children already stopped, and the harness until now.
pub fn report() -> CpuReport {
    let ledger = ledger().lock().unwrap_or_else(|p| p.into_inner());
    let secs = |m: &BTreeMap<String, Duration>| {
        m.iter()
            .map(|(k, d)| (k.clone(), d.as_secs_f64()))
            .collect()
    };
    CpuReport {
        harness: own_cpu().as_secs_f64(),
        components: secs(&ledger.components),
        implementation_by_class: secs(&ledger.classes),
    }
}

/// Writes [`report`] to `path` as JSON.
pub fn write_report(path: &Path) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(&report()).map_err(std::io::Error::other)?;
    std::fs::write(path, json + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime ...
        let stat = "42 (a (weird) name) S 1 42 42 0 -1 4194560 10 0 0 0 150 50 30 20 20 0 1";
        assert_eq!(parse_stat(stat, 100), Some(Duration::from_millis(2500)));
        assert_eq!(parse_stat("42 (x) S 1", 100), None);
    }

    #[test]
    fn a_busy_child_is_accounted() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let spent = process_cpu(child.id()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(spent > Duration::ZERO, "{spent:?}");
        assert!(own_cpu() > Duration::ZERO);
    }
}
