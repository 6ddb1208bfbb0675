//! The always-on invariant monitor over a case's timeline (E6, R3, C4, E3, O1, O2).
//!
//! The runner turns every watch event of the case's namespace into an [`Entry`] (with the
//! [`Actor`] that made the write) and feeds it to [`Monitor::observe`] in resourceVersion
//! order; each returned [`Violation`] fails the case with the slice of the timeline that
//! proves it.

mod invariants;
mod timeline;

pub use invariants::{Monitor, SeenRequest, Undecided, Violation};
pub use timeline::{Actor, Entry, EntryError, EventType, render as render_entries};
