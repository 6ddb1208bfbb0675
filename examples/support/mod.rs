//! What the measuring examples share.

/// A memory figure of process `pid` (a number, or `self`) from `/proc/<pid>/status`, in KiB:
/// `field` is e.g. `VmRSS` (resident now) or `VmHWM` (peak resident). 0 when unreadable.
pub fn memory_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
