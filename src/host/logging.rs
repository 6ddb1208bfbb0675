//! Where the library's `tracing` output goes: stderr, with a default filter that shows the
//! harness's own progress (info) and only warnings of everything else. `RUST_LOG` overrides
//! it. The binary and the test binaries install it the same way.

use std::io::IsTerminal;

/// The harness's default: its progress at info, other crates' warnings; readiness probes
/// fail by design while components start, and kube's client logs each failure.
pub const DEFAULT_FILTER: &str = "warn,grove_conformance=info,kube_client::client::builder=off,kube_client::client::tls=error,kube_client::client=error";

/// The reference operator's default: its decisions, and warnings of everything else.
pub const OPERATOR_FILTER: &str = "warn,grove_reference_operator=info";

/// Installs the subscriber (once per process; later calls do nothing).
pub fn init(default_filter: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .try_init();
}
