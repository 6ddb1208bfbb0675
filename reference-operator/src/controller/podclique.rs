//! The PodClique controller: the pods of one clique (B2, B4, B5), its terminal condition
//! (E1–E6), the cleanup of a terminal clique (C1, C6) and, on regular cliques,
//! `MinAvailableBreached` (E4).
//!
//! Decisions are made on the caches. The two that a stale cache would turn into a wrong
//! action are confirmed on a live read first: creating pods (a cached view may lag behind
//! pods just created, or behind a scope that turned terminal: C4) and inferring a lost pod
//! from its absence (E3: the cache may not show a pod created a moment ago).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::conditions::{self, Desired};
use super::context::{Context, GonePods, Guard, LivePodClique, controller_of, label};
use super::error::Error;
use super::events::Events;
use super::scope::{PARALLEL_REQUESTS, STALE_RETRY};
use super::unanswered::Settled;
use crate::api::{PodClique, PodCliqueStatus};
use crate::build;
use crate::names::{
    CONDITION_MIN_AVAILABLE_BREACHED, EVENT_JOB_COMPLETED, EVENT_JOB_FAILED, KIND_PCSG,
    LABEL_POD_INDEX, LABEL_PODCLIQUE, REASON_POD_FAILED, REASON_POD_LOST,
};
use crate::semantics::{
    Breach, FailureCause, PodCliqueDecision, PodCliqueOutcome, PodCliqueView, PodPhase, PodView,
    evaluate_podclique, podclique_row,
};

/// How often a quiet object is looked at again anyway.
pub(super) const RESYNC: Duration = Duration::from_secs(300);

/// Reconciles one PodClique.
pub(super) async fn reconcile(pclq: Arc<PodClique>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.ready().await;
    if pclq.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if ctx.behind(pclq.as_ref()) {
        return Ok(Action::requeue(STALE_RETRY));
    }
    let uid = pclq.uid().unwrap_or_default();
    let cached = ctx.cached_pods(&uid);
    let pods: Vec<&Pod> = cached.iter().map(AsRef::as_ref).collect();
    // Only a completion-aware clique judges its vanished pods (E3); a regular one replaces
    // them (B4), and a replacement must not be taken for its predecessor.
    let vanished = if pclq.spec.is_completion_aware() {
        ctx.vanished.of(&uid)
    } else {
        GonePods::default()
    };
    let cached_view = view(&pclq, &pods, &vanished);
    let decision = evaluate_podclique(&cached_view);
    let lost =
        |d: &PodCliqueDecision| d.outcome == Some(PodCliqueOutcome::Failed(FailureCause::PodLost));
    let cached_lost = lost(&decision);
    // Also forgets our creates once the cache shows them all (or the watch saw them vanish),
    // so that a pod vanishing later is judged at once rather than taken for a create the
    // cache has not shown yet.
    let seen = cached_view
        .pods
        .iter()
        .map(|p| p.index)
        .chain(vanished.created.iter().copied())
        .collect();
    let awaiting = ctx.awaiting_created(&uid, &seen);
    if decision.create.is_empty() && !cached_lost {
        return act(&ctx, &pclq, &pods, &vanished, decision, Vec::new()).await;
    }
    if awaiting {
        // Our own creates are not in the cache yet; their watch events will bring us back.
        return Ok(Action::requeue(STALE_RETRY));
    }

    // Confirm on a live read, and guard creation (C4). The owner chain comes from immutable
    // metadata, so both reads can go at once.
    let namespace = pclq.namespace().unwrap_or_default();
    let name = pclq.name_any();
    let creating = !decision.create.is_empty();
    let (live, parents_open) = futures::join!(ctx.live_podclique(&namespace, &name), async {
        if creating {
            ctx.scope_open(&namespace, &pclq.metadata).await
        } else {
            Ok(false)
        }
    });
    let Some(LivePodClique {
        pclq: fresh,
        pods: live,
        listed_at,
    }) = live?
    else {
        return Ok(Action::await_change());
    };
    if fresh.uid() != pclq.uid() || fresh.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // What the cache saw Succeeded stays so (a live list may already miss a pod whose
    // deletion the watch has not delivered yet).
    let mut known = vanished;
    known.succeeded.extend(
        cached_view
            .pods
            .iter()
            .filter(|p| p.phase == PodPhase::Succeeded)
            .map(|p| p.index),
    );
    let pods: Vec<&Pod> = live.iter().collect();
    let mut decision = evaluate_podclique(&view(&fresh, &pods, &known));
    if lost(&decision) && !cached_lost {
        // A loss is judged on the watch, which carries a vanished pod's last phase; the live
        // read is ahead of it. Its events will bring us back.
        tracing::debug!("pod missing from the live list but not from the cache yet");
        return Ok(Action::requeue(STALE_RETRY));
    }
    let wanted = std::mem::take(&mut decision.create);
    let mut created = Vec::new();
    let mut settled = Settled::default();
    let open = wanted.is_empty() || parents_open?;
    if open && !wanted.is_empty() {
        let unanswered;
        (created, unanswered) = create_pods(&ctx, &fresh, &wanted).await?;
        if !unanswered.is_empty() {
            // A create without an answer may or may not have made its pod: find out which.
            settled = ctx
                .settle_pod_creates(&fresh, &listed_at, &unanswered)
                .await?;
            tracing::info!(?settled, "settled pod creates that got no answer");
            created.extend(&settled.landed);
        }
        // Until the cache shows them or the pod watch saw them vanish (E3), or the patience
        // runs out, these are not made again. A dropped create is not among them: it is made
        // again on the next look.
        ctx.note_created(&uid, &[created.as_slice(), &settled.unknown].concat());
    }
    tracing::debug!(?wanted, ?created, ?settled, open, "created pods");
    // Dropped creates are made again, and a vanished pod judged, on the next look.
    let short = open && created.len() < wanted.len();
    let action = act(&ctx, &fresh, &pods, &known, decision, created).await?;
    // Parents not cached yet, or a create failed: look again soon.
    Ok(if short {
        Action::requeue(Duration::from_secs(1))
    } else {
        action
    })
}

/// Writes the status, publishes the event of a new outcome, then deletes (O1).
async fn act(
    ctx: &Context,
    pclq: &PodClique,
    pods: &[&Pod],
    known: &GonePods,
    decision: PodCliqueDecision,
    created: Vec<u32>,
) -> Result<Action, Error> {
    let status = desired_status(pclq, pods, known, &decision, &created);
    let current = pclq.status.clone().unwrap_or_default();
    if !same_status(&current, &status) {
        ctx.apply_status(pclq, &status, true).await?;
    }
    if let (Some(created), Some(succeeded)) =
        (&status.created_pod_indices, &status.succeeded_pod_indices)
    {
        let set = |list: &[i32]| list.iter().filter_map(|&i| u32::try_from(i).ok()).collect();
        let recorded = GonePods {
            created: set(created),
            succeeded: set(succeeded),
        };
        ctx.vanished
            .forget(&pclq.uid().unwrap_or_default(), Some(&recorded));
    }
    let mut events = Events::on(pclq);
    let completed = || format!("all {} pods succeeded", pclq.spec.replicas);
    match decision.outcome {
        Some(PodCliqueOutcome::Completed) => {
            events.add(false, EVENT_JOB_COMPLETED, completed(), None, None);
        }
        Some(PodCliqueOutcome::Failed(cause)) => {
            let note = failure_message(cause, pods, known, pclq);
            events.add(true, EVENT_JOB_FAILED, note, None, None);
        }
        None => {
            // Terminal before this reconcile: the event may not have made it out (EV1, EV2).
            let conditions = status.conditions.as_deref().unwrap_or_default();
            events.owe_terminal(conditions, completed(), str::to_string);
        }
    }
    ctx.publish(events).await;
    let doomed: Vec<Pod> = pods
        .iter()
        .filter(|p| decision.delete.contains(&p.name_any()))
        .map(|&p| p.clone())
        .collect();
    if decision.outcome.is_some() || !created.is_empty() || !doomed.is_empty() {
        tracing::info!(
            object = %format!("PodClique {}/{}", pclq.namespace().unwrap_or_default(), pclq.name_any()),
            row = podclique_row(&view(pclq, pods, known), &decision),
            outcome = ?decision.outcome,
            created = ?created,
            delete = ?doomed.iter().map(ResourceExt::name_any).collect::<Vec<_>>(),
            succeeded = ?status.succeeded_pod_indices,
            "decision"
        );
    }
    let results: Vec<Result<bool, Error>> = futures::stream::iter(doomed)
        .map(|p| async move { ctx.delete(&p, Guard::Version).await })
        .buffer_unordered(PARALLEL_REQUESTS)
        .collect()
        .await;
    match results.into_iter().find_map(Result::err) {
        Some(e) if e.is_conflict() => Ok(Action::requeue(STALE_RETRY)),
        Some(e) => Err(e),
        None => Ok(Action::requeue(RESYNC)),
    }
}

/// Creates the pods of `indices`; returns the indices created, and those whose create got no
/// answer (it may have made the pod). Pods of a completion-aware clique are recorded in status
/// right after, so a pod that vanishes later is known lost.
async fn create_pods(
    ctx: &Context,
    pclq: &PodClique,
    indices: &[u32],
) -> Result<(Vec<u32>, Vec<u32>), Error> {
    let namespace = pclq.namespace().unwrap_or_default();
    let Some(pod_context) = pod_context(ctx, pclq)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let pods = indices
        .iter()
        .map(|&i| build::pod(pclq, i, &pod_context).map(|p| (i, p)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| Error::Build {
            name: pclq.name_any(),
            source,
        })?;
    let results: Vec<(u32, Result<Option<Pod>, Error>)> = futures::stream::iter(pods)
        .map(|(i, pod)| {
            let namespace = &namespace;
            async move { (i, ctx.create(namespace, &pod).await) }
        })
        .buffer_unordered(PARALLEL_REQUESTS)
        .collect()
        .await;
    let (mut created, mut unanswered) = (Vec::new(), Vec::new());
    for (i, result) in results {
        match result {
            Ok(_) => created.push(i),
            Err(error) => {
                if error.unanswered() {
                    unanswered.push(i);
                }
                tracing::warn!(pod_index = i, %error, "failed to create a pod");
            }
        }
    }
    Ok((created, unanswered))
}

/// Where the clique sits, from the cached parents; `None` while they are not cached yet.
fn pod_context(ctx: &Context, pclq: &PodClique) -> Result<Option<build::PodContext>, Error> {
    let namespace = pclq.namespace().unwrap_or_default();
    let Some(owner) = controller_of(&pclq.metadata) else {
        return Ok(None);
    };
    let (pcs_name, pcsg) = if owner.kind == KIND_PCSG {
        let Some(group) = Context::cached(&ctx.scaling_groups, &namespace, &owner.name) else {
            return Ok(None);
        };
        let Some(pcs_owner) = controller_of(&group.metadata) else {
            return Ok(None);
        };
        (pcs_owner.name.clone(), Some(group))
    } else {
        (owner.name.clone(), None)
    };
    let Some(pcs) = Context::cached(&ctx.podcliquesets, &namespace, &pcs_name) else {
        return Ok(None);
    };
    build::pod_context(&pcs, pclq, pcsg.as_deref())
        .map(Some)
        .map_err(|source| Error::Build {
            name: pclq.name_any(),
            source,
        })
}

/// The semantics module's view of a clique and its pods (pods of this PodClique object only:
/// an older PodClique of the same name owned other pods). `known`: indices whose pod was seen
/// to exist, or to have Succeeded, before it vanished, which the status may not record yet
/// (E1, E3).
pub(super) fn view(pclq: &PodClique, pods: &[&Pod], known: &GonePods) -> PodCliqueView {
    let status = pclq.status.as_ref();
    let recorded = |list: Option<&Vec<i32>>| -> BTreeSet<u32> {
        list.into_iter()
            .flatten()
            .filter_map(|&i| u32::try_from(i).ok())
            .collect()
    };
    let pods: Vec<PodView> = pods.iter().filter_map(|p| pod_view(p)).collect();
    let mut created_indices = recorded(status.and_then(|s| s.created_pod_indices.as_ref()));
    created_indices.extend(pods.iter().map(|p| p.index));
    created_indices.extend(&known.created);
    PodCliqueView {
        completion_aware: pclq.spec.is_completion_aware(),
        replicas: u32::try_from(pclq.spec.replicas).unwrap_or(0),
        min_available: u32::try_from(pclq.spec.effective_min_available()).unwrap_or(0),
        terminal: conditions::terminal(
            status
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default(),
        ),
        pods,
        created_indices,
        succeeded_indices: recorded(status.and_then(|s| s.succeeded_pod_indices.as_ref()))
            .union(&known.succeeded)
            .copied()
            .collect(),
    }
}

fn pod_view(pod: &Pod) -> Option<PodView> {
    let status = pod.status.as_ref();
    Some(PodView {
        name: pod.name_any(),
        index: label(&pod.metadata, LABEL_POD_INDEX)?.parse().ok()?,
        phase: PodPhase::parse(status.and_then(|s| s.phase.as_deref())),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        scheduled: pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
    })
}

/// The status after `decision`: conditions, pod counts and, on a completion-aware clique, the
/// record of created and succeeded indices.
fn desired_status(
    pclq: &PodClique,
    pods: &[&Pod],
    known: &GonePods,
    decision: &PodCliqueDecision,
    created: &[u32],
) -> PodCliqueStatus {
    let current = pclq.status.clone().unwrap_or_default();
    let aware = pclq.spec.is_completion_aware();
    let mut desired = Vec::new();
    match decision.outcome {
        Some(PodCliqueOutcome::Completed) => desired.push(Desired::completed(format!(
            "all {} pods succeeded",
            pclq.spec.replicas
        ))),
        Some(PodCliqueOutcome::Failed(cause)) => desired.push(Desired::failed(
            match cause {
                FailureCause::PodFailed => REASON_POD_FAILED,
                FailureCause::PodLost => REASON_POD_LOST,
            },
            failure_message(cause, pods, known, pclq),
        )),
        None => {}
    }
    let breach = |status, reason: &str| Desired {
        type_: CONDITION_MIN_AVAILABLE_BREACHED,
        status,
        reason: reason.into(),
        message: format!("minAvailable is {}", pclq.spec.effective_min_available()),
    };
    match decision.min_available_breached {
        Breach::Absent => {}
        Breach::Breached(reason) => desired.push(breach("True", reason)),
        Breach::Sufficient(reason) => desired.push(breach("False", reason)),
    }
    let views: Vec<PodView> = pods.iter().filter_map(|p| pod_view(p)).collect();
    let count = |f: &dyn Fn(&PodView) -> bool| {
        Some(
            i32::try_from(views.iter().filter(|p| p.is_active() && f(p)).count())
                .unwrap_or(i32::MAX),
        )
    };
    let gated = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty())
        })
        .count();
    let view = view(pclq, pods, known);
    let indices = |set: BTreeSet<u32>| -> Option<Vec<i32>> {
        aware.then(|| {
            set.into_iter()
                .filter_map(|i| i32::try_from(i).ok())
                .collect()
        })
    };
    let mut created_indices = view.created_indices.clone();
    created_indices.extend(created);
    let mut succeeded = view.succeeded_indices.clone();
    succeeded.extend(&decision.newly_succeeded);
    PodCliqueStatus {
        observed_generation: pclq.metadata.generation,
        replicas: count(&|_| true),
        ready_replicas: count(&|p| p.ready),
        scheduled_replicas: count(&|p| p.scheduled),
        schedule_gated_replicas: Some(i32::try_from(gated).unwrap_or(i32::MAX)),
        hpa_pod_selector: Some(format!("{LABEL_PODCLIQUE}={}", pclq.name_any())),
        conditions: Some(conditions::merge(
            current.conditions.as_deref().unwrap_or_default(),
            desired,
            pclq.metadata.generation,
            conditions::now(),
        )),
        created_pod_indices: indices(created_indices),
        succeeded_pod_indices: indices(succeeded),
        ..PodCliqueStatus::default()
    }
}

/// Equal but for condition timestamps (no write then).
fn same_status(a: &PodCliqueStatus, b: &PodCliqueStatus) -> bool {
    let strip = |s: &PodCliqueStatus| PodCliqueStatus {
        conditions: None,
        ..s.clone()
    };
    strip(a) == strip(b)
        && conditions::same(
            a.conditions.as_deref().unwrap_or_default(),
            b.conditions.as_deref().unwrap_or_default(),
        )
}

fn failure_message(
    cause: FailureCause,
    pods: &[&Pod],
    known: &GonePods,
    pclq: &PodClique,
) -> String {
    match cause {
        FailureCause::PodFailed => {
            let failed = pods
                .iter()
                .filter_map(|p| pod_view(p))
                .find(|p| p.phase == PodPhase::Failed);
            match failed {
                Some(p) => format!("pod {} (index {}) failed", p.name, p.index),
                None => "a pod failed".into(),
            }
        }
        FailureCause::PodLost => {
            let view = view(pclq, pods, known);
            let present: BTreeSet<u32> = view.pods.iter().map(|p| p.index).collect();
            let lost = view
                .created_indices
                .iter()
                .find(|i| !present.contains(i) && !view.succeeded_indices.contains(i));
            match lost {
                Some(i) => format!("the pod of index {i} vanished before it succeeded"),
                None => "a pod vanished before it succeeded".into(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clique() -> PodClique {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "grove.io/v1alpha1", "kind": "PodClique",
            "metadata": {"name": "job-0-worker", "namespace": "ns", "uid": "clique-1"},
            "spec": {"roleName": "worker", "replicas": 4, "policy": {"completion": {}},
                "podSpec": {"containers": [{"name": "main", "image": "busybox"}]}},
            "status": {"createdPodIndices": [0, 1, 2, 3], "succeededPodIndices": []}
        }))
        .unwrap()
    }

    fn pod(index: u32, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p{index}"), "namespace": "ns",
                "labels": {"grove.io/podclique": "job-0-worker", "grove.io/podclique-pod-index": index.to_string()}},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    /// E1/E3: a pod known to have Succeeded before it vanished is not lost, counts towards
    /// completion, and its success is written into the status.
    #[test]
    fn a_pod_known_to_have_succeeded_before_it_vanished_is_not_lost() {
        let pclq = clique();
        let running: Vec<Pod> = (1..4).map(|i| pod(i, "Running")).collect();
        let pods: Vec<&Pod> = running.iter().collect();
        let unknown = evaluate_podclique(&view(&pclq, &pods, &GonePods::default()));
        assert_eq!(
            unknown.outcome,
            Some(PodCliqueOutcome::Failed(FailureCause::PodLost)),
            "without the record the pod is lost"
        );
        let known = GonePods {
            created: BTreeSet::from([0]),
            succeeded: BTreeSet::from([0]),
        };
        let decision = evaluate_podclique(&view(&pclq, &pods, &known));
        assert_eq!(decision.outcome, None);

        let done: Vec<Pod> = (1..4).map(|i| pod(i, "Succeeded")).collect();
        let pods: Vec<&Pod> = done.iter().collect();
        let decision = evaluate_podclique(&view(&pclq, &pods, &known));
        assert_eq!(decision.outcome, Some(PodCliqueOutcome::Completed));
        let status = desired_status(&pclq, &pods, &known, &decision, &[]);
        assert_eq!(status.succeeded_pod_indices, Some(vec![0, 1, 2, 3]));
    }
}
