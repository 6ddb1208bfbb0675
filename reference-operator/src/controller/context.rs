//! What every reconcile shares: the client, one cache per kind, the event recorder (what it
//! publishes, and when, is `events.rs`), and the requests every controller makes the same way:
//! status through the status subresource with one field manager, guarded deletes, idempotent
//! creates, live reads for the C4 guard.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::closed::{Closed, Seen};
use super::conditions;
use super::error::{Error, api_error};
use crate::api::{PodClique, PodCliqueScalingGroup, PodCliqueSet};
use crate::names::{
    API_VERSION, FIELD_MANAGER, KIND_PCLQ, KIND_PCS, KIND_PCSG, LABEL_PCS_REPLICA_INDEX,
    LABEL_PCSG_REPLICA_INDEX, LABEL_POD_INDEX, LABEL_PODCLIQUE, LABEL_RESTART_ATTEMPT,
};
use crate::semantics::{parse_attempt_label, restart_count};

/// The shared state of the three controllers.
pub struct Context {
    pub(super) client: Client,
    pub(super) pods: Store<Pod>,
    pub(super) podcliques: Store<PodClique>,
    pub(super) scaling_groups: Store<PodCliqueScalingGroup>,
    pub(super) podcliquesets: Store<PodCliqueSet>,
    pub(super) recorder: Recorder,
    /// One flag per cache, raised once it holds a complete first listing.
    pub(super) ready: Vec<tokio::sync::watch::Receiver<bool>>,
    /// The resourceVersion of each object's status as last written here, by uid: a cached
    /// copy older than that is behind our own write, and deciding on it would only conflict.
    pub(super) written: Mutex<HashMap<String, u64>>,
    /// Pod indices just created, or whose create got no answer, by PodClique uid, until the
    /// cache shows them or the pod watch saw them vanish: a cache that has not caught up with
    /// our own creates is not a reason to create again or to suspect a loss.
    pub(super) created: Mutex<HashMap<String, (Instant, Vec<u32>)>>,
    /// Pods that have vanished, as the pod watch last saw them.
    pub(super) vanished: Arc<Vanished>,
    /// The events this process published or found published, as (object uid, reason and
    /// marker): each is published at most once.
    pub(super) reported: Mutex<HashSet<(String, String)>>,
    /// The scopes this process knows closed, which no create is sent into (C4).
    pub(super) closed: Closed,
}

/// The indices of pods that have vanished, by PodClique uid, until the clique's status records
/// them: every one as created (E3: a pod that existed in the attempt and vanished before it
/// Succeeded is lost, also when this process never heard the answer to its create), and those
/// last observed Succeeded as succeeded (E1: only a pod that disappears *before* reaching
/// Succeeded is lost). Filled by the pod watch before the cache forgets the pod, so a
/// reconcile that finds the pod gone always finds it here or in the status.
#[derive(Debug, Default)]
pub(super) struct Vanished(Mutex<HashMap<String, GonePods>>);

/// The vanished pods of one PodClique, by index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct GonePods {
    /// Every vanished pod's index: a pod of it existed.
    pub created: BTreeSet<u32>,
    /// The indices whose pod was last observed Succeeded.
    pub succeeded: BTreeSet<u32>,
}

impl GonePods {
    fn is_empty(&self) -> bool {
        self.created.is_empty() && self.succeeded.is_empty()
    }
}

impl Vanished {
    /// Notes `pod`, in the last state observed before it vanished.
    pub(super) fn note(&self, pod: &Pod) {
        let succeeded = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        let index = label(&pod.metadata, LABEL_POD_INDEX).and_then(|i| i.parse::<u32>().ok());
        let (Some(index), Some(owner)) = (index, controller_of(&pod.metadata)) else {
            return;
        };
        let mut record = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let gone = record.entry(owner.uid.clone()).or_default();
        gone.created.insert(index);
        if succeeded {
            gone.succeeded.insert(index);
        }
    }

    /// The pods noted for the PodClique with `uid`.
    pub(super) fn of(&self, uid: &str) -> GonePods {
        let record = self.0.lock().unwrap_or_else(|e| e.into_inner());
        record.get(uid).cloned().unwrap_or_default()
    }

    /// Forgets the indices of `uid` that its status now records, or all of them once the
    /// PodClique is gone (`recorded`: `None`).
    pub(super) fn forget(&self, uid: &str, recorded: Option<&GonePods>) {
        let mut record = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let emptied = match (record.get_mut(uid), recorded) {
            (Some(gone), Some(recorded)) => {
                gone.created.retain(|i| !recorded.created.contains(i));
                gone.succeeded.retain(|i| !recorded.succeeded.contains(i));
                gone.is_empty()
            }
            (Some(_), None) => true,
            (None, _) => false,
        };
        if emptied {
            record.remove(uid);
        }
    }
}

/// A PodClique and its pods as the apiserver has them (see [`Context::live_podclique`]).
pub(super) struct LivePodClique {
    /// The PodClique.
    pub pclq: PodClique,
    /// Its pods.
    pub pods: Vec<Pod>,
    /// The resourceVersion of the pod list: a watch from it shows what happened since.
    pub listed_at: String,
}

/// Above this many entries a record of our own writes or creates is dropped (it only saves
/// requests).
const WRITTEN_LIMIT: usize = 10_000;

/// How long pods just created may take to show in the cache before the cache is believed.
/// A watch delivers every event in order, however late, so waiting for it is what keeps a
/// pod that Succeeded and vanished before the cache showed it from being read as lost (E3);
/// the patience only bounds the wait for a create whose pod the watch will never show (one
/// that made nothing, or a relist that skipped it). Watches lag by seconds on a loaded
/// cluster, so it is long.
const CREATED_PATIENCE: Duration = Duration::from_secs(30);

/// What a delete must still find to go ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Guard {
    /// The same object (uid): never a successor created under the same name.
    Uid,
    /// The same object at the version that was evaluated: a child that reached a terminal
    /// state since is re-evaluated instead of deleted.
    Version,
    /// As [`Guard::Version`], and the plan's children of this guard are read live before its
    /// events and deletes (`scope::stale_teardown`): when any of them changed since it was
    /// evaluated, none is deleted.
    Live,
}

/// A namespaced kind the controllers read and write.
pub(super) trait Kind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<K> Kind for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

fn kind<K: Kind>() -> String {
    K::kind(&()).into_owned()
}

impl Context {
    /// Waits until every cache holds a complete first listing: deciding on a partial view
    /// would create what exists or count as lost what was never seen.
    pub(super) async fn ready(&self) {
        for flag in &self.ready {
            let _ = flag.clone().wait_for(|ready| *ready).await;
        }
    }

    fn api<K: Kind>(&self, namespace: &str) -> Api<K> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The cached object `namespace/name`.
    pub(super) fn cached<K: Kind>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>> {
        store.get(&ObjectRef::new(name).within(namespace))
    }

    /// The cached pods whose controller is the PodClique with `uid`.
    pub(super) fn cached_pods(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.pods.state_filter(|p| owned_by(p.meta(), uid))
    }

    /// The PodClique and its pods, read from the apiserver (not the caches). Both reads go at
    /// once: pods are only created by a reconcile of this PodClique, and reconciles of one
    /// object never overlap, so no pod can appear between them that the list should show.
    pub(super) async fn live_podclique(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<LivePodClique>, Error> {
        let selector = format!("{LABEL_PODCLIQUE}={name}");
        let list_params = ListParams::default().labels(&selector);
        let pods_api = self.api::<Pod>(namespace);
        let (pclq, pods) = futures::join!(
            self.get::<PodClique>(namespace, name),
            pods_api.list(&list_params)
        );
        let Some(pclq) = pclq? else {
            return Ok(None);
        };
        let uid = pclq.uid().unwrap_or_default();
        let list = pods.map_err(api_error("list pods of", "PodClique".into(), name))?;
        let listed_at = list.metadata.resource_version.unwrap_or_default();
        let pods = list
            .items
            .into_iter()
            .filter(|p| owned_by(p.meta(), &uid))
            .collect();
        Ok(Some(LivePodClique {
            pclq,
            pods,
            listed_at,
        }))
    }

    /// `namespace/name`, read from the apiserver; `None` when it does not exist.
    pub(super) async fn get<K: Kind>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, Error> {
        self.api::<K>(namespace)
            .get_opt(name)
            .await
            .map_err(api_error("get", kind::<K>(), name))
    }

    /// Creates `obj`; `None` when an object of that name already exists (creation by
    /// deterministic name is idempotent).
    pub(super) async fn create<K: Kind>(
        &self,
        namespace: &str,
        obj: &K,
    ) -> Result<Option<K>, Error> {
        let name = obj
            .meta()
            .name
            .clone()
            .or_else(|| obj.meta().generate_name.clone())
            .unwrap_or_default();
        if self.known_closed(namespace, obj.meta()) {
            return Err(Error::ScopeClosed {
                kind: kind::<K>(),
                name,
            });
        }
        match self
            .api::<K>(namespace)
            .create(&PostParams::default(), obj)
            .await
        {
            Ok(created) => Ok(Some(created)),
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => Ok(None),
            Err(e) => Err(api_error("create", kind::<K>(), &name)(e)),
        }
    }

    /// Whether the cached `obj` is older than a status write of ours (its watch event is on
    /// the way and will trigger another look).
    pub(super) fn behind<K: Kind>(&self, obj: &K) -> bool {
        let (Some(uid), Some(version)) = (obj.uid(), version(obj)) else {
            return false;
        };
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        match written.get(&uid) {
            Some(&w) if version < w => true,
            Some(_) => {
                written.remove(&uid);
                false
            }
            None => false,
        }
    }

    /// Records that pods of `indices` were just created for the PodClique with `uid`.
    pub(super) fn note_created(&self, uid: &str, indices: &[u32]) {
        if indices.is_empty() {
            return;
        }
        remember(
            &self.created,
            uid.to_string(),
            (Instant::now(), indices.to_vec()),
        );
    }

    /// Whether the cache does not show yet some pods just created for the PodClique with
    /// `uid` (`seen`: the indices it shows). An index the cache has shown is no longer awaited,
    /// so its pod vanishing later is not mistaken for a create still on its way.
    pub(super) fn awaiting_created(&self, uid: &str, seen: &BTreeSet<u32>) -> bool {
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        let awaiting = created.get_mut(uid).is_some_and(|(at, indices)| {
            indices.retain(|i| !seen.contains(i));
            at.elapsed() < CREATED_PATIENCE && !indices.is_empty()
        });
        if !awaiting {
            created.remove(uid);
        }
        awaiting
    }

    /// Replaces the status of `obj` by `status` (server-side apply on the status subresource,
    /// one field manager). With `guarded`, the write carries `obj`'s resourceVersion, so a
    /// decision made on a stale read fails with [`Error::Conflict`] instead of landing.
    pub(super) async fn apply_status<K: Kind>(
        &self,
        obj: &K,
        status: &impl Serialize,
        guarded: bool,
    ) -> Result<K, Error> {
        let name = obj.name_any();
        let mut metadata = serde_json::json!({ "name": name });
        if guarded {
            metadata["resourceVersion"] = obj.resource_version().into();
        }
        let patch = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": kind::<K>(),
            "metadata": metadata,
            "status": status,
        });
        let written = self
            .api::<K>(&obj.namespace().unwrap_or_default())
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(api_error("write the status of", kind::<K>(), &name))?;
        if let (Some(uid), Some(version)) = (written.uid(), version(&written)) {
            self.closed.learn(&uid, &Seen::of_status(&patch["status"]));
            remember(&self.written, uid, version);
        }
        Ok(written)
    }

    /// Deletes `obj` gracefully (its own grace period, never forced: C6). An object already
    /// gone, or replaced by another of the same name, counts as deleted; with
    /// [`Guard::Version`] an object that changed since it was read is [`Error::Conflict`].
    /// Returns whether the object is gone (not held by a finalizer or a grace period).
    pub(super) async fn delete<K: Kind>(&self, obj: &K, guard: Guard) -> Result<bool, Error> {
        let name = obj.name_any();
        let preconditions = Preconditions {
            uid: obj.uid(),
            resource_version: (guard != Guard::Uid)
                .then(|| obj.resource_version())
                .flatten(),
        };
        let params = DeleteParams {
            preconditions: Some(preconditions),
            ..DeleteParams::default()
        };
        let result = self
            .api::<K>(&obj.namespace().unwrap_or_default())
            .delete(&name, &params)
            .await;
        match result {
            // The object as deleted (gone), or as it still is: held by a finalizer or a grace period.
            Ok(response) => Ok(response.left().is_none_or(|o| {
                let meta = o.meta();
                meta.deletion_timestamp.is_none()
                    || (o.finalizers().is_empty()
                        && meta.deletion_grace_period_seconds.unwrap_or(0) == 0)
            })),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 && guard == Guard::Uid => Ok(true),
            Err(e) => Err(api_error("delete", kind::<K>(), &name)(e)),
        }
    }

    /// C4: whether the scope that `meta` lives in is open for creation, read live up the
    /// ownership chain: every parent exists with the owner's uid, is not being deleted, is not
    /// terminal, has not recorded `meta`'s replica Completed, and still runs the attempt that
    /// `meta` carries (a restart persisted since
    /// means `meta` is an old attempt whose children must not be made).
    pub(super) async fn scope_open(
        &self,
        namespace: &str,
        meta: &ObjectMeta,
    ) -> Result<bool, Error> {
        let Some(parent) = parent_link(meta) else {
            return Ok(true);
        };
        // The hierarchy is at most two parents deep. Owner references and labels never change,
        // so the grandparent can be named from the cached parent and both read at once.
        let grandparent = Some(&parent)
            .filter(|p| p.kind == KIND_PCSG)
            .and_then(|p| Self::cached(&self.scaling_groups, namespace, &p.name))
            .filter(|g| g.uid().as_deref() == Some(parent.uid.as_str()))
            .and_then(|g| parent_link(&g.metadata));
        let (first, second) = futures::join!(self.live_parent(namespace, &parent), async {
            match &grandparent {
                Some(link) => self.live_parent(namespace, link).await.map(Some),
                None => Ok(None),
            }
        });
        let Some(parent_meta) = first? else {
            return Ok(false);
        };
        Ok(match (parent_link(&parent_meta), second?) {
            (None, _) => true,
            (Some(_), Some(checked)) => checked.is_some(),
            (Some(link), None) => self.live_parent(namespace, &link).await?.is_some(),
        })
    }

    /// Whether this process already knows that the scope `meta` would be created in is
    /// closed: a pod's PodClique terminal, or the replica its parent or (through the cached
    /// parents) its grandparent holds it in.
    fn known_closed(&self, namespace: &str, meta: &ObjectMeta) -> bool {
        if let Some(owner) = controller_of(meta).filter(|o| o.kind == KIND_PCLQ) {
            return self.closed.knows_closed(&owner.uid, usize::MAX, None)
                || Self::cached(&self.podcliques, namespace, &owner.name)
                    .filter(|c| c.uid().as_deref() == Some(owner.uid.as_str()))
                    .is_some_and(|c| self.known_closed(namespace, &c.metadata));
        }
        let Some(parent) = parent_link(meta) else {
            return false;
        };
        let closed = |l: &ParentLink| self.closed.knows_closed(&l.uid, l.replica, l.attempt);
        closed(&parent)
            || (parent.kind == KIND_PCSG
                && Self::cached(&self.scaling_groups, namespace, &parent.name)
                    .filter(|g| g.uid().as_deref() == Some(parent.uid.as_str()))
                    .and_then(|g| parent_link(&g.metadata))
                    .is_some_and(|grandparent| closed(&grandparent)))
    }

    /// The live metadata of the parent `link` names, if it is open for `link`'s attempt.
    async fn live_parent(
        &self,
        namespace: &str,
        link: &ParentLink,
    ) -> Result<Option<ObjectMeta>, Error> {
        let (parent, conditions, (counts, completed)) = if link.kind == KIND_PCSG {
            let Some(g) = self
                .get::<PodCliqueScalingGroup>(namespace, &link.name)
                .await?
            else {
                return Ok(None);
            };
            let s = g.status.unwrap_or_default();
            let record = (s.replica_restart_counts, s.completed_replicas);
            (g.metadata, s.conditions, record)
        } else {
            let Some(p) = self.get::<PodCliqueSet>(namespace, &link.name).await? else {
                return Ok(None);
            };
            let s = p.status.unwrap_or_default();
            let record = (s.replica_restart_counts, s.completed_replicas);
            (p.metadata, s.conditions, record)
        };
        if parent.uid.as_deref() == Some(link.uid.as_str()) {
            let seen = Seen::of(
                parent.deletion_timestamp.is_some(),
                conditions.as_deref().unwrap_or_default(),
                counts.as_deref().unwrap_or_default(),
                completed.as_deref().unwrap_or_default(),
            );
            self.closed.learn(&link.uid, &seen);
        }
        let open = parent.uid.as_deref() == Some(link.uid.as_str())
            && parent.deletion_timestamp.is_none()
            && conditions::terminal(conditions.as_deref().unwrap_or_default()).is_none()
            && Some(restart_count(
                counts.as_deref().unwrap_or_default(),
                link.replica,
            )) == link.attempt
            && !completed
                .unwrap_or_default()
                .iter()
                .any(|&j| usize::try_from(j).is_ok_and(|j| j == link.replica));
        Ok(open.then_some(parent))
    }
}

/// An object's place under its parent: which parent, which replica of it, which attempt.
struct ParentLink {
    kind: String,
    name: String,
    uid: String,
    replica: usize,
    attempt: Option<u32>,
}

fn parent_link(meta: &ObjectMeta) -> Option<ParentLink> {
    let owner = controller_of(meta)?;
    let label = match owner.kind.as_str() {
        KIND_PCSG => LABEL_PCSG_REPLICA_INDEX,
        KIND_PCS => LABEL_PCS_REPLICA_INDEX,
        _ => return None,
    };
    let labels = meta.labels.as_ref();
    Some(ParentLink {
        kind: owner.kind.clone(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
        replica: labels
            .and_then(|l| l.get(label))
            .and_then(|v| v.parse().ok())
            .unwrap_or(usize::MAX),
        attempt: parse_attempt_label(
            labels
                .and_then(|l| l.get(LABEL_RESTART_ATTEMPT))
                .map(String::as_str),
        ),
    })
}

/// Records `key` in one of the records that only save requests; past [`WRITTEN_LIMIT`]
/// entries the record starts over.
fn remember<V>(record: &Mutex<HashMap<String, V>>, key: String, value: V) {
    let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
    if record.len() >= WRITTEN_LIMIT {
        record.clear();
    }
    record.insert(key, value);
}

/// The resourceVersion as a number (etcd revisions are).
fn version<K: Resource>(obj: &K) -> Option<u64> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

/// The controller owner reference of an object.
pub(super) fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// Whether the object's controller is the object with `uid`.
pub(super) fn owned_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|o| o.uid == uid)
}

/// A label value of an object.
pub(super) fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}
