//! The kind target: the cluster ([`create_command`], [`set_up_nodes`], [`delete`]), the assets
//! it is built from offline ([`assets`]: the tools, the component images of `images` and the
//! node image of `node_image`) and the runc shim for hosts whose root lacks
//! `CAP_SYS_RESOURCE` ([`runc_shim`]).
//!
//! May use: [`crate::host`] (processes, files, docker), the pure core.

pub mod assets;
mod cluster;
mod images;
mod node_image;
pub mod runc_shim;

pub use cluster::*;
