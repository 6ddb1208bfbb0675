//! Work made of many runs of the catalog or of one case: [`bench`] (repeated whole runs, each
//! a fresh `grove-conformance run` process, to compare commits and find flakes) and [`sweep`]
//! (one run per recorded write with a crash pinned at it); [`explore`]'s generated scenarios
//! as a catalog in memory and its shrunk cases written out.
//!
//! May use: [`crate::runner`], [`crate::cluster`], [`crate::implementation`], [`crate::proxy`],
//! [`crate::host`], the pure core.

pub mod bench;
pub mod explore;
pub mod sweep;
