//! Host helpers every other folder may use: supervised child processes that never outlive us
//! ([`process`]) and the CPU they and the harness spend ([`cpu`]), small filesystem helpers
//! (private files, a free port, finding an executable), the one way the harness talks to a
//! Docker engine ([`docker`]), images of this very executable built offline ([`image`]), what running inside a pod gives ([`in_cluster`]), where the
//! library's `tracing` output goes ([`logging`]), and the runtime every async part runs on
//! ([`runtime`]).
//!
//! May use: the standard library and the crates it needs; nothing else of the harness.

pub mod cpu;
pub mod docker;
mod fs;
pub mod image;
pub mod in_cluster;
pub mod logging;
pub mod process;
mod runtime;

pub use fs::{free_port, is_executable, which, write_private};
pub use runtime::{WORKER_STACK, runtime};
