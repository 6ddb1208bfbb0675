//! The one way the harness builds a Tokio runtime ([`runtime`]).

/// The stack each worker thread gets. Tokio's default (2 MiB) is not enough for an unoptimised
/// build: deserialising a list of pods while a case's step waits inside its timeout, its fault
/// and its restraint watch nests deep enough to overflow it (seen on kind, where the real
/// kubelets' exits wait on a pod watch). 16 MiB of address space costs nothing until touched.
pub const WORKER_STACK: usize = 16 * 1024 * 1024;

/// A multi-threaded runtime with I/O and timers, `workers` threads (the number of cores when
/// `None`) named `name`, each with a [`WORKER_STACK`] stack.
pub fn runtime(name: &str, workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = workers {
        builder.worker_threads(workers);
    }
    builder
        .enable_all()
        .thread_name(name)
        .thread_stack_size(WORKER_STACK)
        .build()
}
