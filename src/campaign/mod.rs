//! Work made of many runs of the catalog or of one case: [`bench`] (repeated whole runs, each
//! a fresh `grove-conformance run` process, to compare commits and find flakes; [`cost`] sets another
//! implementation's API counts beside the reference operator's), [`sweep`] (one
//! run per recorded write with a fault placed at it: a crash before or after it, or a stale or
//! unobserved view from its answer on), and [`explore`]'s generated scenarios as a catalog in
//! memory, with its shrunk cases written out.
//!
//! May use: [`crate::runner`], [`crate::cluster`], [`crate::kubelets`], [`crate::implementation`],
//! [`crate::proxy`], [`crate::host`], the pure core.

pub mod bench;
pub mod cost;
pub mod explore;
pub mod sweep;
