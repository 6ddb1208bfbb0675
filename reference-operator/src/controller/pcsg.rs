//! The PodCliqueScalingGroup controller: one PodClique per clique per replica (B1, B3), gang
//! restarts of a replica (E8, E9, R1, R3, R4, R6, O2, O3), completion (E7, E10, E11, E12),
//! cleanup (C2, C4, C5), regular gang termination (R5) and upstream's aggregate
//! `MinAvailableBreached` on regular groups.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::conditions::{self, Desired};
use super::context::{Context, controller_of, owned_by};
use super::error::Error;
use super::events::Events;
use super::scope::{self, Existing, Plan, STALE_RETRY, Scope, Slot};
use crate::api::{
    PodClique, PodCliqueScalingGroup, PodCliqueScalingGroupStatus, PodCliqueSet, RunPolicy,
};
use crate::build;
use crate::names::{
    CONDITION_MIN_AVAILABLE_BREACHED, EVENT_PCSG_REPLICA_DELETE_SUCCESSFUL, LABEL_PCSG,
    REASON_INSUFFICIENT_AVAILABLE_PCSG_REPLICAS, REASON_INSUFFICIENT_SCHEDULED_PCSG_REPLICAS,
    REASON_SUFFICIENT_AVAILABLE_PCSG_REPLICAS,
};
use crate::semantics::restart_count;

/// Reconciles one PodCliqueScalingGroup.
pub(super) async fn reconcile(
    pcsg: Arc<PodCliqueScalingGroup>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    ctx.ready().await;
    if pcsg.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = pcsg.namespace().unwrap_or_default();
    let pcs = controller_of(&pcsg.metadata)
        .and_then(|o| Context::cached(&ctx.podcliquesets, &namespace, &o.name))
        .filter(|pcs| {
            controller_of(&pcsg.metadata).is_some_and(|o| Some(&o.uid) == pcs.metadata.uid.as_ref())
        });
    let Some(pcs) = pcs else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if ctx.behind(pcsg.as_ref()) {
        return Ok(Action::requeue(STALE_RETRY));
    }
    let scope = scope(&ctx, &pcs, &pcsg);
    let plan = scope.plan(Timestamp::now());
    if scope::stale_teardown(&ctx, &plan).await? {
        return Ok(Action::requeue(STALE_RETRY));
    }

    // 1. The decision is persisted first (O1, O2), on the version it was made from.
    let status = desired_status(&pcsg, &scope, &plan);
    if !same_status(&pcsg.status.clone().unwrap_or_default(), &status) {
        ctx.apply_status(pcsg.as_ref(), &status, true).await?;
    }
    scope::log(pcsg.as_ref(), &plan);
    // 2. What it reports.
    ctx.publish(scope::events(
        pcsg.as_ref(),
        pcsg.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default(),
        &plan,
    ))
    .await;
    let mut upstream = Events::on(pcs.as_ref());
    for (j, child) in &plan.gang_terminations {
        let note = format!(
            "replica {j} of {} terminated: {child} stayed below minAvailable",
            pcsg.name_any()
        );
        upstream.add(
            false,
            EVENT_PCSG_REPLICA_DELETE_SUCCESSFUL,
            note,
            None,
            None,
        );
    }
    ctx.publish(upstream).await;
    // 3. Then what it deletes, 4. then what it creates.
    let (ctx, pcs, plan) = (ctx.as_ref(), pcs.as_ref(), &plan);
    scope::delete_then_create(
        ctx,
        plan,
        open_group(ctx, &pcsg),
        |live, creates| async move { create(ctx, pcs, &live, plan, &creates).await },
    )
    .await
}

/// The replicas of a PCSG and their PodCliques, from the caches.
fn scope(ctx: &Context, pcs: &PodCliqueSet, pcsg: &PodCliqueScalingGroup) -> Scope {
    let uid = pcsg.uid().unwrap_or_default();
    let name = pcsg.name_any();
    let owned = ctx.podcliques.state_filter(|p| owned_by(p.meta(), &uid));
    let template = &pcs.spec.template;
    let replicas: Vec<Vec<Slot>> = (0..u32::try_from(pcsg.spec.replicas).unwrap_or(0))
        .map(|j| {
            pcsg.spec
                .clique_names
                .iter()
                .map(|clique| {
                    let object_name = build::pcsg_podclique_name(&name, j, clique);
                    Slot {
                        template: clique.clone(),
                        aware: template
                            .clique(clique)
                            .is_some_and(|c| c.spec.is_completion_aware()),
                        existing: owned
                            .iter()
                            .find(|p| p.metadata.name.as_ref() == Some(&object_name))
                            .cloned()
                            .map(Existing::Clique),
                        object_name,
                    }
                })
                .collect()
        })
        .collect();
    let expected: HashSet<&str> = replicas
        .iter()
        .flatten()
        .map(|s| s.object_name.as_str())
        .collect();
    let extras = owned
        .iter()
        .filter(|p| !expected.contains(p.metadata.name.as_deref().unwrap_or_default()))
        .cloned()
        .map(Existing::Clique)
        .collect();
    let status = pcsg.status.clone().unwrap_or_default();
    let policy = pcsg.spec.policy.as_ref();
    Scope {
        aware: pcsg.spec.is_completion_aware(),
        terminal: conditions::terminal(status.conditions.as_deref().unwrap_or_default()),
        counts: status.replica_restart_counts.unwrap_or_default(),
        completed: status.completed_replicas.unwrap_or_default(),
        max_restarts: RunPolicy::max_restarts(policy),
        target_names: RunPolicy::target_names(policy).map(<[String]>::to_vec),
        termination_delay: build::termination_delay(pcs),
        replicas,
        extras,
    }
}

/// The group as a live read shows it, when it and its parents are open for new children (C4).
/// The owner chain comes from immutable metadata, so both reads go at once.
async fn open_group(
    ctx: &Context,
    pcsg: &PodCliqueScalingGroup,
) -> Result<Option<PodCliqueScalingGroup>, Error> {
    let namespace = pcsg.namespace().unwrap_or_default();
    let name = pcsg.name_any();
    let (live, parents_open) = futures::join!(
        ctx.get::<PodCliqueScalingGroup>(&namespace, &name),
        ctx.scope_open(&namespace, &pcsg.metadata)
    );
    let Some(live) = live? else {
        return Ok(None);
    };
    let status = live.status.clone().unwrap_or_default();
    let open = live.uid() == pcsg.uid()
        && live.metadata.deletion_timestamp.is_none()
        && conditions::terminal(status.conditions.as_deref().unwrap_or_default()).is_none()
        && parents_open?;
    Ok(open.then_some(live))
}

/// Creates the missing PodCliques of the given replicas from the group `live` (see
/// [`open_group`]), for the replicas that still run the attempt the plan was made for.
async fn create(
    ctx: &Context,
    pcs: &PodCliqueSet,
    live: &PodCliqueScalingGroup,
    plan: &Plan,
    creates: &[(usize, Vec<String>)],
) -> Result<(), Error> {
    let namespace = live.namespace().unwrap_or_default();
    let status = live.status.clone().unwrap_or_default();
    let counts = status.replica_restart_counts.unwrap_or_default();
    let completed = status.completed_replicas.unwrap_or_default();
    let mut objects: Vec<PodClique> = Vec::new();
    for (j, names) in creates {
        let attempt = restart_count(&counts, *j);
        if attempt != restart_count(&plan.counts, *j) {
            continue; // the cache is behind a restart: the next look creates
        }
        if scope::recorded_completed(&completed, *j) {
            continue; // a finished replica, which the cache did not show yet (C4)
        }
        let replica = u32::try_from(*j).unwrap_or(u32::MAX);
        let built =
            build::pcsg_replica_podcliques(pcs, live, replica, attempt).map_err(|source| {
                Error::Build {
                    name: live.name_any(),
                    source,
                }
            })?;
        objects.extend(built.into_iter().filter(|p| names.contains(&p.name_any())));
    }
    scope::create_all(ctx, &namespace, objects).await
}

fn desired_status(
    pcsg: &PodCliqueScalingGroup,
    scope: &Scope,
    plan: &Plan,
) -> PodCliqueScalingGroupStatus {
    let current = pcsg.status.clone().unwrap_or_default();
    let mut desired = scope.terminal_conditions(plan);
    // Availability drives regular gang termination only; a job group leaves it out rather
    // than rewriting its status each time a pod of it starts or ends.
    let available = (!scope.aware).then(|| {
        let (available, breach) = availability(pcsg, scope);
        desired.push(breach);
        available
    });
    PodCliqueScalingGroupStatus {
        observed_generation: pcsg.metadata.generation,
        conditions: Some(conditions::merge(
            current.conditions.as_deref().unwrap_or_default(),
            desired,
            pcsg.metadata.generation,
            conditions::now(),
        )),
        replica_restart_counts: scope.aware.then(|| plan.counts.clone()),
        completed_replicas: (scope.aware && !plan.completed.is_empty())
            .then(|| plan.completed.clone()),
        replicas: Some(pcsg.spec.replicas),
        available_replicas: available,
        selector: Some(format!("{LABEL_PCSG}={}", pcsg.name_any())),
        ..PodCliqueScalingGroupStatus::default()
    }
}

/// Upstream's availability of a group: a replica is scheduled when each of its PodCliques has
/// `minAvailable` pods scheduled, available when none of them breached `minAvailable`; the
/// group breaches when fewer than its `minAvailable` replicas are available.
fn availability(pcsg: &PodCliqueScalingGroup, scope: &Scope) -> (i32, Desired) {
    let min = pcsg.spec.min_available.unwrap_or(1);
    let (mut scheduled, mut available) = (0, 0);
    for slots in &scope.replicas {
        let cliques: Vec<&PodClique> = slots
            .iter()
            .filter_map(|s| match &s.existing {
                Some(Existing::Clique(c)) => Some(c.as_ref()),
                _ => None,
            })
            .collect();
        let status = |c: &PodClique| c.status.clone().unwrap_or_default();
        if cliques.len() == slots.len()
            && cliques.iter().all(|c| {
                status(c).scheduled_replicas.unwrap_or(0) >= c.spec.effective_min_available()
            })
        {
            scheduled += 1;
            if !cliques.iter().any(|c| {
                conditions::is_true(
                    status(c).conditions.as_deref().unwrap_or_default(),
                    CONDITION_MIN_AVAILABLE_BREACHED,
                )
            }) {
                available += 1;
            }
        }
    }
    let (status, reason) = if scheduled < min {
        ("False", REASON_INSUFFICIENT_SCHEDULED_PCSG_REPLICAS)
    } else if available < min {
        ("True", REASON_INSUFFICIENT_AVAILABLE_PCSG_REPLICAS)
    } else {
        ("False", REASON_SUFFICIENT_AVAILABLE_PCSG_REPLICAS)
    };
    let desired = Desired {
        type_: CONDITION_MIN_AVAILABLE_BREACHED,
        status,
        reason: reason.into(),
        message: format!("{available} of {min} required replicas available"),
    };
    (available, desired)
}

fn same_status(a: &PodCliqueScalingGroupStatus, b: &PodCliqueScalingGroupStatus) -> bool {
    let strip = |s: &PodCliqueScalingGroupStatus| PodCliqueScalingGroupStatus {
        conditions: None,
        ..s.clone()
    };
    strip(a) == strip(b)
        && conditions::same(
            a.conditions.as_deref().unwrap_or_default(),
            b.conditions.as_deref().unwrap_or_default(),
        )
}
