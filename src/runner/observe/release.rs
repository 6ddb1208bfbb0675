//! Handing confirmed entries to the monitor in resourceVersion order, with the actor of each.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{Facts, HarnessWrites, Pending, State};
use crate::kubelets::simulated::Fleet;
use crate::monitor::{Actor, Entry, EventType};
use crate::vocab::Kind;

/// Who made the write an entry records.
pub(super) fn actor(
    entry: &Entry,
    facts: Facts,
    writes: &HarnessWrites,
    fleet: Option<&Fleet>,
) -> Actor {
    let harness_rv = writes.resource_versions.contains(&entry.resource_version);
    match entry.kind {
        Kind::Event => Actor::Implementation,
        Kind::Pod => {
            let harness_deletion = fleet.is_some_and(|f| f.initiated_deletion(&entry.uid))
                || writes.deleted_uids.contains(&entry.uid);
            if facts.owner_deleted_by_harness
                && (facts.deletion_started || entry.event == EventType::Deleted)
            {
                return Actor::System;
            }
            match entry.event {
                EventType::Added => Actor::Implementation,
                EventType::Deleted if harness_deletion => Actor::Harness,
                // A deletion the cluster started itself (a node gone NotReady, ...).
                EventType::Deleted if facts.disrupted_by_cluster => Actor::System,
                EventType::Deleted => Actor::Implementation,
                EventType::Modified if facts.deletion_started => {
                    if harness_deletion {
                        Actor::Harness
                    } else if facts.disrupted_by_cluster {
                        Actor::System
                    } else {
                        Actor::Implementation
                    }
                }
                EventType::Modified => {
                    if harness_rv
                        || facts.node_newly_set
                        || fleet.is_some_and(|f| f.wrote(entry.resource_version))
                    {
                        Actor::Harness
                    } else {
                        Actor::Implementation
                    }
                }
            }
        }
        _ => {
            if harness_rv
                || ((entry.event == EventType::Deleted || entry.deleting())
                    && writes.deleted_uids.contains(&entry.uid))
            {
                Actor::Harness
            } else {
                Actor::Implementation
            }
        }
    }
}

/// Takes the pending entries every gated watch has confirmed, in resourceVersion order.
fn releasable(state: &mut State) -> Vec<Pending> {
    let gate = state.gate();
    let (mut ready, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut state.pending)
        .into_iter()
        .partition(|p| p.entry.resource_version <= gate);
    state.pending = rest;
    ready.sort_by_key(|p| p.entry.resource_version);
    ready
}

/// Hands the monitor every entry the watches have confirmed; returns whether that revealed a
/// violation.
pub(super) fn release(
    state: &Mutex<State>,
    writes: &Mutex<HarnessWrites>,
    fleet: Option<&Fleet>,
) -> bool {
    let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
    let ready = releasable(&mut guard);
    if ready.is_empty() {
        return false;
    }
    let writes = writes.lock().unwrap_or_else(|p| p.into_inner());
    let entries: Vec<Entry> = ready
        .into_iter()
        .map(|mut p| {
            p.entry.actor = actor(&p.entry, p.facts, &writes, fleet);
            p.entry
        })
        .collect();
    drop(writes);
    let state = &mut *guard;
    let Some(monitor) = state.monitor.as_mut() else {
        return false;
    };
    let newest = entries.last().map_or(0, |e| e.resource_version);
    // An object entry older than one already judged: only a broken promise of the apiserver
    // gets here. Judge the whole timeline again in resource-version order, the order etcd
    // committed the writes in. A late Event (its watch does not gate, and lags under load)
    // needs no replay: the monitor judges no Event, so it is appended, and the rendered
    // timeline puts it in its place. Replaying for each one made a 256-pod case's monitor
    // quadratic: thousands of Events, each a copy and a re-judgement of the whole timeline.
    let late = entries
        .iter()
        .any(|e| e.kind != Kind::Event && e.resource_version < state.released_rv);
    let new = if late {
        *monitor = monitor.replayed_with(entries);
        let before = state.violations.len();
        state.violations = monitor.violations().to_vec();
        state.replays += 1;
        state.violations.len() > before
    } else {
        let mut found = Vec::new();
        for entry in entries {
            found.extend(monitor.observe(entry));
        }
        state.violations.extend(found.iter().cloned());
        !found.is_empty()
    };
    state.released_rv = state.released_rv.max(newest);
    new
}

pub(super) async fn release_loop(
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
    fleet: Option<Arc<Fleet>>,
    tx: Arc<watch::Sender<u64>>,
) {
    let mut changed = tx.subscribe();
    loop {
        // Woken by every watch event and every confirmed progress.
        if changed.changed().await.is_err() {
            return;
        }
        if release(&state, &writes, fleet.as_deref()) {
            tx.send_modify(|n| *n += 1);
        }
    }
}
