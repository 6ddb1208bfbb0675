//! Holding back what an implementation sees on its watches, the way a lagging watch cache or
//! informer would: the pure bookkeeping of the relayed watch streams and the holds on them.
//!
//! A hold names a kind (and optionally a namespace and object names) and starts *at* a
//! resourceVersion, the apiserver's when it began. The first event of a held object with a
//! newer resourceVersion freezes the stream it arrives on: it and everything after it on
//! that stream (other objects, bookmarks) wait in order, so what the client gets stays a
//! stream a real apiserver could send (resourceVersions only grow, no bookmark passes a held
//! event). A client that reconnects meanwhile is held again, since the apiserver replays the
//! same events on its new stream: the hold is per kind, not per connection. At release the
//! queue is delivered in order, or coalesced (each object's last state only; an object first
//! seen and gone inside the window never delivered), or dropped while the stream ends with
//! `410 Gone` so that the client lists again.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::request::{RequestInfo, glob_matches};

/// How reads of a held kind are answered while the hold stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reads {
    /// As the apiserver has them now: only the watch lags (an informer's cache behind a
    /// current apiserver).
    Current,
    /// As of the hold's resourceVersion: the GET and LIST a real apiserver serves from its
    /// watch cache (`resourceVersion=0`, or not newer than the hold) are answered by an exact
    /// read at it, as an apiserver whose cache lags would. Quorum reads (no resourceVersion)
    /// stay current, as on every apiserver; writes still go through.
    Stale,
}

/// What a release delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Release {
    /// Every held event, in order.
    Deliver,
    /// Each held object's last state only.
    Coalesce,
    /// Nothing: the held watches end with `410 Gone` and the client lists again.
    Relist,
}

/// A hold on the watch events of a kind, or of some of its objects.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Hold {
    /// API group (empty for the core group).
    pub group: String,
    /// API version, to read the kind's resourceVersion and stale reads with.
    pub version: String,
    /// Resource, plural and lowercase.
    pub resource: String,
    /// Only objects of this namespace; `None` for every namespace.
    pub namespace: Option<String>,
    /// Only objects whose name matches one of these globs; empty for every object.
    pub names: Vec<String>,
    /// How reads are answered meanwhile.
    pub reads: Reads,
    /// What the release delivers.
    pub release: Release,
}

impl Hold {
    /// A hold on every object of `group/resource`, reads current, delivered in order.
    pub fn kind(group: &str, version: &str, resource: &str) -> Hold {
        Hold {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            namespace: None,
            names: Vec::new(),
            reads: Reads::Current,
            release: Release::Deliver,
        }
    }

    fn same_kind(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }

    fn covers_object(&self, namespace: &str, name: &str) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == namespace)
            && (self.names.is_empty() || self.names.iter().any(|g| glob_matches(g, name)))
    }
}

/// `podcliquesets job in ns, reads stale, coalesced at release`.
impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.resource)?;
        if !self.names.is_empty() {
            write!(f, " {}", self.names.join(","))?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, " in {ns}")?;
        }
        if self.reads == Reads::Stale {
            f.write_str(", reads stale")?;
        }
        match self.release {
            Release::Deliver => Ok(()),
            Release::Coalesce => f.write_str(", coalesced at release"),
            Release::Relist => f.write_str(", relisted at release"),
        }
    }
}

/// What became of one hold, for the case's report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HoldRecord {
    /// Its number, from 1.
    pub id: u64,
    /// What it held.
    pub hold: Hold,
    /// The resourceVersion it started at.
    pub at: u64,
    /// Events it froze a stream on, or that waited behind one (counted once per stream).
    pub held: usize,
    /// Events delivered at its release (after coalescing); `None` while it stands.
    pub delivered: Option<usize>,
    /// Watches ended with `410 Gone` at its release.
    pub ended: usize,
}

/// `hold podcliquesets from rv 812: 5 events held, 2 delivered at release`.
impl fmt::Display for HoldRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hold {} from rv {}: {} event{} held",
            self.hold,
            self.at,
            self.held,
            if self.held == 1 { "" } else { "s" }
        )?;
        match self.delivered {
            None => f.write_str(", never released"),
            Some(_) if self.hold.release == Release::Relist => {
                write!(f, ", {} watch(es) ended with 410 at release", self.ended)
            }
            Some(n) => write!(f, ", {n} delivered at release"),
        }
    }
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    /// `ERROR` or anything the proxy does not read (it passes, in order).
    Other,
}

/// One line of a JSON watch stream, with what the holds look at.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    line: Bytes,
    kind: EventType,
    uid: String,
    namespace: String,
    name: String,
    rv: Option<u64>,
}

impl Event {
    /// Reads one line (its trailing newline included, or not).
    pub fn parse(line: Bytes) -> Event {
        let mut event = Event {
            line,
            kind: EventType::Other,
            uid: String::new(),
            namespace: String::new(),
            name: String::new(),
            rv: None,
        };
        let Ok(value) = serde_json::from_slice::<Value>(&event.line) else {
            return event;
        };
        event.kind = match value["type"].as_str() {
            Some("ADDED") => EventType::Added,
            Some("MODIFIED") => EventType::Modified,
            Some("DELETED") => EventType::Deleted,
            Some("BOOKMARK") => EventType::Bookmark,
            _ => EventType::Other,
        };
        let meta = &value["object"]["metadata"];
        let text = |key: &str| meta[key].as_str().unwrap_or_default().to_string();
        event.uid = text("uid");
        event.namespace = text("namespace");
        event.name = text("name");
        event.rv = meta["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok());
        event
    }

    fn is_object(&self) -> bool {
        matches!(
            self.kind,
            EventType::Added | EventType::Modified | EventType::Deleted
        )
    }

    /// The object's identity across its events.
    fn key(&self) -> (String, String, String) {
        (self.uid.clone(), self.namespace.clone(), self.name.clone())
    }

    /// The same event, announced as `ADDED`.
    fn as_added(&self) -> Event {
        let mut event = self.clone();
        if let Ok(mut value) = serde_json::from_slice::<Value>(&self.line) {
            value["type"] = "ADDED".into();
            let mut line = value.to_string().into_bytes();
            line.push(b'\n');
            event.line = Bytes::from(line);
        }
        event.kind = EventType::Added;
        event
    }
}

/// Each object's last state, in the order of those last states: an object first `ADDED`
/// inside the window is announced as added in its last state, or not at all when its last
/// event deleted it; an object the client had already is `MODIFIED` or `DELETED` as its last
/// event says. A trailing bookmark stays (it passes nothing); earlier ones would pass later
/// events and go. Lines the proxy cannot read stay, after the objects.
pub(crate) fn coalesce(queue: Vec<Event>) -> Vec<Event> {
    let trailing_bookmark = queue
        .last()
        .filter(|e| e.kind == EventType::Bookmark)
        .cloned();
    let mut first: HashMap<(String, String, String), EventType> = HashMap::new();
    let mut last: HashMap<(String, String, String), usize> = HashMap::new();
    let mut other = Vec::new();
    for (i, event) in queue.iter().enumerate() {
        if event.is_object() {
            first.entry(event.key()).or_insert(event.kind);
            last.insert(event.key(), i);
        } else if event.kind == EventType::Other {
            other.push(event.clone());
        }
    }
    let mut out = Vec::new();
    for (i, event) in queue.iter().enumerate() {
        if !event.is_object() || last.get(&event.key()) != Some(&i) {
            continue;
        }
        match (first[&event.key()], event.kind) {
            (EventType::Added, EventType::Deleted) => {}
            (EventType::Added, _) => out.push(event.as_added()),
            _ => out.push(event.clone()),
        }
    }
    out.extend(other);
    out.extend(trailing_bookmark);
    out
}

/// The `ERROR` event of a watch whose resourceVersion the apiserver no longer serves.
pub(crate) fn gone_line(rv: u64) -> Bytes {
    let event = serde_json::json!({
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("too old resource version: {rv}"),
            "reason": "Expired",
            "code": 410,
        },
    });
    let mut line = event.to_string().into_bytes();
    line.push(b'\n');
    Bytes::from(line)
}

/// Cuts a watch body into its lines, however the frames split them.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    partial: Vec<u8>,
}

impl Lines {
    /// The lines `data` completes, each with its newline.
    pub fn push(&mut self, data: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut rest = data;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            self.partial.extend_from_slice(&rest[..=at]);
            out.push(Bytes::from(std::mem::take(&mut self.partial)));
            rest = &rest[at + 1..];
        }
        self.partial.extend_from_slice(rest);
        out
    }

    /// What is left when the body ends (a last line without its newline).
    pub fn finish(&mut self) -> Option<Bytes> {
        (!self.partial.is_empty()).then(|| Bytes::from(std::mem::take(&mut self.partial)))
    }
}

/// A hold in force.
#[derive(Debug)]
struct ActiveHold {
    record: HoldRecord,
    started: Instant,
}

/// One relayed watch.
#[derive(Debug)]
struct Stream {
    group: String,
    resource: String,
    /// Where its lines go; dropped to end it.
    tx: Option<UnboundedSender<Bytes>>,
    /// Waiting lines, in order.
    queue: Vec<Event>,
    /// The hold that froze it.
    frozen_by: Option<u64>,
    /// The newest resourceVersion delivered on it.
    last_rv: u64,
}

/// Every relayed watch and every hold.
#[derive(Debug, Default)]
pub(crate) struct Hub {
    next_stream: u64,
    next_hold: u64,
    streams: HashMap<u64, Stream>,
    holds: Vec<ActiveHold>,
    records: Vec<HoldRecord>,
    errors: Vec<String>,
    /// Kinds a watch was answered for in a form the proxy cannot read (Table, protobuf).
    unreadable: HashSet<(String, String)>,
}

impl Hub {
    /// Starts relaying a watch of `info`'s kind; its lines go to `tx`.
    pub fn open(&mut self, info: &RequestInfo, tx: UnboundedSender<Bytes>) -> u64 {
        self.next_stream += 1;
        self.streams.insert(
            self.next_stream,
            Stream {
                group: info.group.clone(),
                resource: info.resource.clone(),
                tx: Some(tx),
                queue: Vec::new(),
                frozen_by: None,
                last_rv: 0,
            },
        );
        self.next_stream
    }

    /// Forgets a watch whose upstream or client went away (what it held is lost with the
    /// connection, as on a real cluster; a client that resumes gets it again and held again).
    pub fn close(&mut self, stream: u64) {
        self.streams.remove(&stream);
    }

    /// Whether the watch is still wanted (its client is there and no release ended it).
    pub fn is_open(&self, stream: u64) -> bool {
        self.streams
            .get(&stream)
            .and_then(|s| s.tx.as_ref())
            .is_some_and(|tx| !tx.is_closed())
    }

    /// Starts `hold` at resourceVersion `at`; returns its number.
    pub fn start(&mut self, hold: Hold, at: u64) -> u64 {
        self.next_hold += 1;
        self.holds.push(ActiveHold {
            record: HoldRecord {
                id: self.next_hold,
                hold,
                at,
                held: 0,
                delivered: None,
                ended: 0,
            },
            started: Instant::now(),
        });
        self.next_hold
    }

    /// The holds in force, oldest first, with when each started.
    pub fn active(&self) -> Vec<(u64, Instant)> {
        self.holds
            .iter()
            .map(|h| (h.record.id, h.started))
            .collect()
    }

    /// Every hold started so far, released or not, in order.
    pub fn records(&self) -> Vec<HoldRecord> {
        let mut all = self.records.clone();
        all.extend(self.holds.iter().map(|h| h.record.clone()));
        all.sort_by_key(|r| r.id);
        all
    }

    /// Notes a watch of `info`'s kind relayed untouched, in a form holds cannot read.
    pub fn unreadable(&mut self, info: &RequestInfo) {
        self.unreadable
            .insert((info.group.clone(), info.resource.clone()));
    }

    /// Why `hold` cannot stand, if a watch of its kind went by unreadable.
    pub fn unreadable_watch(&self, hold: &Hold) -> Option<String> {
        self.unreadable
            .contains(&(hold.group.clone(), hold.resource.clone()))
            .then(|| {
                format!(
                    "a watch of {} was answered in a form other than a JSON event stream \
                     (Table or protobuf), which the proxy cannot hold events of",
                    hold.resource
                )
            })
    }

    /// Records something that makes a fault not one a real cluster could produce.
    pub fn error(&mut self, message: String) {
        self.errors.push(message);
    }

    /// What made faults invalid, in order.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The resourceVersion reads of `info` are answered at: that of the oldest stale-read
    /// hold on its kind and namespace.
    pub fn stale_at(&self, info: &RequestInfo) -> Option<u64> {
        self.holds
            .iter()
            .filter(|h| h.record.hold.reads == Reads::Stale)
            .filter(|h| h.record.hold.same_kind(&info.group, &info.resource))
            .filter(|h| {
                info.namespace.is_empty()
                    || h.record
                        .hold
                        .namespace
                        .as_deref()
                        .is_none_or(|n| n == info.namespace)
            })
            .map(|h| h.record.at)
            .min()
    }

    /// Takes one line from the apiserver on `stream` and passes or holds it.
    pub fn line(&mut self, stream: u64, line: Bytes) {
        let event = Event::parse(line);
        self.take(stream, event);
    }

    fn take(&mut self, stream: u64, event: Event) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        if let Some(id) = s.frozen_by {
            s.queue.push(event);
            if let Some(h) = self.holds.iter_mut().find(|h| h.record.id == id) {
                h.record.held += 1;
            }
            return;
        }
        let holder = event.is_object().then(|| {
            self.holds.iter_mut().find(|h| {
                h.record.hold.same_kind(&s.group, &s.resource)
                    && h.record.hold.covers_object(&event.namespace, &event.name)
                    && event.rv.is_none_or(|rv| rv > h.record.at)
            })
        });
        if let Some(Some(h)) = holder {
            h.record.held += 1;
            s.frozen_by = Some(h.record.id);
            s.queue.push(event);
            return;
        }
        if let Some(rv) = event.rv {
            s.last_rv = s.last_rv.max(rv);
        }
        if let Some(tx) = &s.tx {
            // A client gone is noticed by the relay, which closes the stream.
            let _ = tx.send(event.line);
        }
    }

    /// Ends hold `id`: what it froze is delivered as its release says (another hold on the
    /// same events freezes them again). Returns its record; `None` when no such hold stands.
    pub fn release(&mut self, id: u64) -> Option<HoldRecord> {
        let at = self.holds.iter().position(|h| h.record.id == id)?;
        let mut record = self.holds.remove(at).record;
        let frozen: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| s.frozen_by == Some(id))
            .map(|(k, _)| *k)
            .collect();
        let mut delivered = 0;
        if record.hold.release == Release::Relist {
            let kind: Vec<u64> = self
                .streams
                .iter()
                .filter(|(_, s)| record.hold.same_kind(&s.group, &s.resource))
                .map(|(k, _)| *k)
                .collect();
            record.ended = kind.len();
            for stream in kind {
                self.end_gone(stream);
            }
        } else {
            for stream in frozen {
                let Some(s) = self.streams.get_mut(&stream) else {
                    continue;
                };
                s.frozen_by = None;
                let mut queue = std::mem::take(&mut s.queue);
                if record.hold.release == Release::Coalesce {
                    queue = coalesce(queue);
                }
                delivered += queue.len();
                for event in queue {
                    self.take(stream, event);
                }
            }
        }
        record.delivered = Some(delivered);
        self.records.push(record.clone());
        Some(record)
    }

    /// Ends every relayed watch of `group/resource` with `410 Gone`, dropping what they
    /// held; returns how many.
    pub fn end_watches(&mut self, group: &str, resource: &str) -> usize {
        let kind: Vec<u64> = self
            .streams
            .iter()
            // A watch an earlier release or relist ended waits for its relay to notice: it
            // is not open any more, and not counted again.
            .filter(|(_, s)| {
                s.group == group
                    && s.resource == resource
                    && s.tx.as_ref().is_some_and(|tx| !tx.is_closed())
            })
            .map(|(k, _)| *k)
            .collect();
        for stream in &kind {
            self.end_gone(*stream);
        }
        kind.len()
    }

    fn end_gone(&mut self, stream: u64) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.queue.clear();
            s.frozen_by = None;
            if let Some(tx) = s.tx.take() {
                let _ = tx.send(gone_line(s.last_rv));
            }
        }
    }
}

#[cfg(test)]
mod tests;
