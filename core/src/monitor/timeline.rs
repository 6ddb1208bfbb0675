//! The timeline: watch events of one case, in resourceVersion order, with their actor.

use crate::walk::Walk;
use std::fmt::Write as _;

use serde_json::Value;

use crate::vocab::{Kind, Term, Vocabulary, condition_status};

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `ADDED`: the object was created (or first seen).
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`: the object is gone.
    Deleted,
}

impl EventType {
    /// As in the watch protocol (`ADDED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// Who made the write an entry shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Actor {
    /// The harness: its requests, and its simulated node fleet (pod phases, evictions,
    /// finishing graceful deletions). Never held against the implementation.
    Harness,
    /// The implementation under test (the default for anything the harness did not do).
    Implementation,
    /// The cluster itself when the runner knows it (garbage collector cascades); not
    /// attributed to either side.
    System,
}

impl Actor {
    /// A short label for timelines.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Harness => "harness",
            Actor::Implementation => "impl",
            Actor::System => "system",
        }
    }
}

/// One watch event of the case's namespace.
///
/// The runner builds entries from its watches on pods, PodCliques, PCSGs, PCSs and Events
/// (dynamic objects as `serde_json::Value`) with [`Entry::new`], and feeds them to the
/// [`Monitor`](super::Monitor) in resourceVersion order (an etcd revision, comparable across
/// kinds). The actor is [`Actor::Harness`] when the write's resourceVersion is one returned
/// to a harness request (or made by its node fleet), else [`Actor::Implementation`].
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `metadata.resourceVersion` of the object in this event.
    pub resource_version: u64,
    /// The kind.
    pub kind: Kind,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// ADDED, MODIFIED or DELETED.
    pub event: EventType,
    /// Who made the write.
    pub actor: Actor,
    /// The object as the event carried it.
    pub object: Value,
}

/// An object that cannot become an [`Entry`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// A metadata field is missing or malformed.
    #[error("failed to read `metadata.{0}` of a watched {1} object")]
    Metadata(&'static str, Kind),
}

impl Entry {
    /// An entry from a watched object; name, uid and resourceVersion come from its metadata.
    pub fn new(
        kind: Kind,
        event: EventType,
        object: Value,
        actor: Actor,
    ) -> Result<Entry, EntryError> {
        let meta = |f: &'static str| {
            object
                .pointer(&format!("/metadata/{f}"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(EntryError::Metadata(f, kind))
        };
        let name = meta("name")?;
        let uid = meta("uid")?;
        let resource_version = meta("resourceVersion")?
            .parse::<u64>()
            .map_err(|_| EntryError::Metadata("resourceVersion", kind))?;
        Ok(Entry {
            resource_version,
            kind,
            name,
            uid,
            event,
            actor,
            object,
        })
    }

    /// Whether the object carries a deletionTimestamp.
    pub fn deleting(&self) -> bool {
        self.object
            .walk(&["metadata", "deletionTimestamp"])
            .is_some_and(|t| !t.is_null())
    }

    /// One readable line: revision, actor, event, kind, name, short uid and the state that
    /// matters to the invariants.
    pub fn summary(&self, vocab: &Vocabulary) -> String {
        let mut s = format!(
            "rv {:<8} {:<7} {:<8} {} {} [{}]",
            self.resource_version,
            self.actor.as_str(),
            self.event.as_str(),
            self.kind,
            self.name,
            self.uid.get(..8).unwrap_or(&self.uid)
        );
        let o = &self.object;
        let label = |t: Term| {
            vocab
                .name(t)
                .and_then(|k| o.walk(&["metadata", "labels"])?.get(k)?.as_str())
        };
        match self.kind {
            Kind::Pod => {
                if let (Some(c), Some(i)) =
                    (label(Term::LabelPodClique), label(Term::LabelPodIndex))
                {
                    let _ = write!(s, " {c}/{i}");
                }
                if let Some(p) = o.walk(&["status", "phase"]).and_then(Value::as_str) {
                    let _ = write!(s, " phase={p}");
                }
            }
            Kind::PodClique | Kind::PodCliqueScalingGroup | Kind::PodCliqueSet => {
                for t in [Term::Completed, Term::Failed, Term::MinAvailableBreached] {
                    if let Some(name) = vocab.name(t)
                        && let Some(status) = condition_status(o, name)
                    {
                        let _ = write!(s, " {name}={status}");
                    }
                }
                if let Some(p) = o.walk(&["status", "phase"]).and_then(Value::as_str) {
                    let _ = write!(s, " phase={p}");
                }
                if let Some(f) = vocab.name(Term::ReplicaRestartCounts)
                    && let Some(c) = o.get("status").and_then(|st| st.get(f))
                {
                    let _ = write!(s, " {f}={c}");
                }
            }
            Kind::Event => {
                let reason = o.get("reason").and_then(Value::as_str).unwrap_or("?");
                let involved = o.get("involvedObject").or_else(|| o.get("regarding"));
                let _ = write!(
                    s,
                    " reason={reason} on {} {}",
                    involved
                        .and_then(|i| i.get("kind"))
                        .and_then(Value::as_str)
                        .unwrap_or("?"),
                    involved
                        .and_then(|i| i.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                );
            }
        }
        if self.deleting() && self.event != EventType::Deleted {
            s.push_str(" deleting");
        }
        s
    }
}

/// Renders entries one per line, each prefixed with its position in the timeline.
pub fn render(entries: &[(usize, &Entry)], vocab: &Vocabulary) -> String {
    let mut out = String::new();
    for (i, e) in entries {
        let _ = writeln!(out, "#{i:<4} {}", e.summary(vocab));
    }
    out
}
