//! Pod creates that got no answer: the request may have been dropped before it reached the
//! apiserver (no pod, B5 wants one made) or carried out with its answer lost (a pod exists, or
//! existed and vanished: E3). The error alone cannot tell them apart, and a pod's name is
//! generated, so creating again is not idempotent. What happened is read back instead: a fresh
//! list shows a pod that exists, and a watch resumed at the resourceVersion the create was
//! decided at replays a pod that was made and has vanished since (L1: a dropped create must
//! not leave the clique waiting for a pod that will never exist).

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt};

use super::context::{Context, label, owned_by};
use super::error::{Error, api_error};
use crate::api::PodClique;
use crate::names::{LABEL_POD_INDEX, LABEL_PODCLIQUE};

/// How long the replay of a pod watch is read. The apiserver sends what happened since the
/// resourceVersion at once; the watch then stays open for new events, which are not needed.
const REPLAY_SECONDS: u32 = 2;

/// What became of the unanswered creates of one clique, by pod index.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Settled {
    /// A pod of the index exists: the create landed.
    pub landed: Vec<u32>,
    /// A pod of the index was made and has vanished since (it is noted as vanished, E3).
    pub vanished: Vec<u32>,
    /// No pod of the index was ever made: the create never landed and is to be made again.
    pub dropped: Vec<u32>,
    /// The replay was refused (the resourceVersion is too old): unknown, so treated as
    /// landed, and left to the patience for creates the cache has not shown.
    pub unknown: Vec<u32>,
}

impl Context {
    /// Finds out what the creates of `indices` for `pclq`, decided on a pod list at
    /// `decided_at`, made.
    pub(super) async fn settle_pod_creates(
        &self,
        pclq: &PodClique,
        decided_at: &str,
        indices: &[u32],
    ) -> Result<Settled, Error> {
        let namespace = pclq.namespace().unwrap_or_default();
        let name = pclq.name_any();
        let uid = pclq.uid().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let selector = format!("{LABEL_PODCLIQUE}={name}");
        let of_index = |pod: &Pod, wanted: &BTreeSet<u32>| {
            owned_by(pod.meta(), &uid)
                .then(|| label(pod.meta(), LABEL_POD_INDEX)?.parse::<u32>().ok())
                .flatten()
                .filter(|i| wanted.contains(i))
        };
        let mut open: BTreeSet<u32> = indices.iter().copied().collect();
        let mut settled = Settled::default();

        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(api_error("list pods of", "PodClique".into(), &name))?;
        for pod in &list.items {
            if let Some(i) = of_index(pod, &open) {
                open.remove(&i);
                settled.landed.push(i);
            }
        }
        if open.is_empty() {
            return Ok(settled);
        }
        if decided_at.is_empty() {
            // A watch without a resourceVersion starts now and would replay nothing.
            settled.unknown = open.into_iter().collect();
            return Ok(settled);
        }
        let now: u64 = list
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX);

        let params = WatchParams::default()
            .labels(&selector)
            .timeout(REPLAY_SECONDS);
        let stream = match api.watch(&params, decided_at).await {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "cannot replay the pod watch; creates left unknown");
                settled.unknown = open.into_iter().collect();
                return Ok(settled);
            }
        };
        let mut stream = std::pin::pin!(stream.into_stream());
        let mut seen: Vec<(u32, Pod)> = Vec::new();
        let deadline = tokio::time::sleep(Duration::from_secs(u64::from(REPLAY_SECONDS) + 1));
        let mut deadline = std::pin::pin!(deadline);
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                () = &mut deadline => None,
            };
            let pod = match event {
                None => break,
                Some(Ok(
                    WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p),
                )) => p,
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    if b.metadata
                        .resource_version
                        .parse::<u64>()
                        .is_ok_and(|v| v >= now)
                    {
                        break;
                    }
                    continue;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    tracing::warn!(code = status.code, message = %status.message, "cannot replay the pod watch; creates left unknown");
                    settled.unknown = open.into_iter().collect();
                    return Ok(settled);
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "the pod watch replay broke off; creates left unknown");
                    settled.unknown = open.into_iter().collect();
                    return Ok(settled);
                }
            };
            let at: Option<u64> = pod.resource_version().and_then(|v| v.parse().ok());
            if let Some(i) = of_index(&pod, &open) {
                // The last state wins: a pod that Succeeded before it went is not lost (E1).
                seen.retain(|(j, _)| *j != i);
                seen.push((i, pod));
            }
            if at.is_some_and(|v| v >= now) {
                break;
            }
        }
        for (i, pod) in seen {
            open.remove(&i);
            self.vanished.note(&pod);
            settled.vanished.push(i);
        }
        settled.dropped = open.into_iter().collect();
        Ok(settled)
    }
}
