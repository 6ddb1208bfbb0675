//! The always-on invariant monitor over a case's timeline: E6 (terminal conditions sticky,
//! never both), R3 (restart counts grow by exactly one), C4 (nothing created in a terminal
//! scope), E3 (no replacement pod in a completion-aware clique) and O1/O2 (no deletion before
//! the persisted decision, or the regular gang termination, that justifies it).
//!
//! The runner turns every watch event of the case's namespace into an [`Entry`] (with the
//! [`Actor`] that made the write) and feeds it to [`Monitor::observe`] in resourceVersion
//! order; each returned [`Violation`] fails the case with the slice of the timeline that
//! proves it. `timeline` holds the entries and their rendering, `invariants` the monitor's
//! state and, in `invariants/checks.rs`, one check per clause in a table.

mod invariants;
mod timeline;

pub use invariants::{Monitor, SeenRequest, Undecided, Violation};
pub use timeline::{Actor, Entry, EntryError, EventType, render as render_entries};
