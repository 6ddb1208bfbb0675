//! The PodCliqueSet controller: the standalone PodCliques and PCSGs of every replica (B1, B3),
//! gang restarts of a replica (E8, E9, E13, R2, R3, R4, R6, O2, O3), completion (E7, E10,
//! E11, E12), cleanup (C3, C4, C5) and regular gang termination (R5).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::conditions;
use super::context::{Context, owned_by};
use super::error::Error;
use super::scope::{self, Existing, Plan, STALE_RETRY, Scope, Slot};
use crate::api::{PodCliqueSet, PodCliqueSetStatus, RunPolicy};
use crate::build;
use crate::names::EVENT_PCS_REPLICA_DELETE_SUCCESSFUL;
use crate::semantics::restart_count;

/// Reconciles one PodCliqueSet.
pub(super) async fn reconcile(pcs: Arc<PodCliqueSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.ready().await;
    if pcs.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if ctx.behind(pcs.as_ref()) {
        return Ok(Action::requeue(STALE_RETRY));
    }
    let scope = scope(&ctx, &pcs);
    let plan = scope.plan(Timestamp::now());
    if scope::stale_teardown(&ctx, &plan).await? {
        return Ok(Action::requeue(STALE_RETRY));
    }

    // 1. The decision is persisted first (O1, O2), on the version it was made from.
    let status = desired_status(&pcs, &scope, &plan);
    if !same_status(&pcs.status.clone().unwrap_or_default(), &status) {
        ctx.apply_status(pcs.as_ref(), &status, true).await?;
    }
    scope::log(pcs.as_ref(), &plan);
    // 2. What it reports.
    let mut events = scope::events(
        pcs.as_ref(),
        pcs.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default(),
        &plan,
    );
    for (i, child) in &plan.gang_terminations {
        let note = format!("replica {i} terminated: {child} stayed below minAvailable");
        events.add(false, EVENT_PCS_REPLICA_DELETE_SUCCESSFUL, note, None, None);
    }
    ctx.publish(events).await;
    // 3. Then what it deletes, 4. then what it creates.
    let (ctx, plan) = (ctx.as_ref(), &plan);
    scope::delete_then_create(ctx, plan, open_set(ctx, &pcs), |live, creates| async move {
        create(ctx, &live, plan, &creates).await
    })
    .await
}

/// The replicas of a PCS: its standalone PodCliques and PCSGs, from the caches.
fn scope(ctx: &Context, pcs: &PodCliqueSet) -> Scope {
    let uid = pcs.uid().unwrap_or_default();
    let name = pcs.name_any();
    let template = &pcs.spec.template;
    let cliques = ctx.podcliques.state_filter(|p| owned_by(p.meta(), &uid));
    let groups = ctx
        .scaling_groups
        .state_filter(|g| owned_by(g.meta(), &uid));
    let replicas: Vec<Vec<Slot>> = (0..u32::try_from(pcs.spec.replicas).unwrap_or(0))
        .map(|i| {
            let standalone = template.standalone_cliques().map(|c| {
                let object_name = build::podclique_name(&name, i, &c.name);
                Slot {
                    template: c.name.clone(),
                    aware: c.spec.is_completion_aware(),
                    existing: cliques
                        .iter()
                        .find(|p| p.metadata.name.as_ref() == Some(&object_name))
                        .cloned()
                        .map(Existing::Clique),
                    object_name,
                }
            });
            let scaling_groups = template.scaling_groups().iter().map(|g| {
                let object_name = build::pcsg_name(&name, i, &g.name);
                Slot {
                    template: g.name.clone(),
                    aware: template.is_scaling_group_completion_aware(g),
                    existing: groups
                        .iter()
                        .find(|p| p.metadata.name.as_ref() == Some(&object_name))
                        .cloned()
                        .map(Existing::Group),
                    object_name,
                }
            });
            standalone.chain(scaling_groups).collect()
        })
        .collect();
    let expected: HashSet<&str> = replicas
        .iter()
        .flatten()
        .map(|s| s.object_name.as_str())
        .collect();
    let extras = cliques
        .into_iter()
        .map(Existing::Clique)
        .chain(groups.into_iter().map(Existing::Group))
        .filter(|e| !expected.contains(e.name().as_str()))
        .collect();
    let status = pcs.status.clone().unwrap_or_default();
    let policy = pcs.spec.policy.as_ref();
    Scope {
        aware: template.is_completion_aware(),
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

/// The PodCliqueSet as a live read shows it, when it is open for new children (C4).
async fn open_set(ctx: &Context, pcs: &PodCliqueSet) -> Result<Option<PodCliqueSet>, Error> {
    let namespace = pcs.namespace().unwrap_or_default();
    let Some(live) = ctx.get::<PodCliqueSet>(&namespace, &pcs.name_any()).await? else {
        return Ok(None);
    };
    let status = live.status.clone().unwrap_or_default();
    let open = live.uid() == pcs.uid()
        && live.metadata.deletion_timestamp.is_none()
        && conditions::terminal(status.conditions.as_deref().unwrap_or_default()).is_none();
    Ok(open.then_some(live))
}

/// Creates the missing children of the planned replicas from the PodCliqueSet `live` (see
/// [`open_set`]), for the replicas that still run the attempt the plan was made for.
async fn create(
    ctx: &Context,
    live: &PodCliqueSet,
    plan: &Plan,
    creates: &[(usize, Vec<String>)],
) -> Result<(), Error> {
    let namespace = live.namespace().unwrap_or_default();
    let status = live.status.clone().unwrap_or_default();
    let counts = status.replica_restart_counts.unwrap_or_default();
    let completed = status.completed_replicas.unwrap_or_default();
    let (mut cliques, mut groups) = (Vec::new(), Vec::new());
    for (i, names) in creates {
        let attempt = restart_count(&counts, *i);
        if attempt != restart_count(&plan.counts, *i) {
            continue; // the cache is behind a restart: the next look creates
        }
        if scope::recorded_completed(&completed, *i) {
            continue; // a finished replica, which the cache did not show yet (C4)
        }
        let replica = u32::try_from(*i).unwrap_or(u32::MAX);
        let children =
            build::pcs_replica_children(live, replica, attempt).map_err(|source| Error::Build {
                name: live.name_any(),
                source,
            })?;
        let wanted = |n: &String| names.contains(n);
        cliques.extend(
            children
                .podcliques
                .into_iter()
                .filter(|c| c.metadata.name.as_ref().is_some_and(wanted)),
        );
        groups.extend(
            children
                .scaling_groups
                .into_iter()
                .filter(|g| g.metadata.name.as_ref().is_some_and(wanted)),
        );
    }
    let (a, b) = futures::join!(
        scope::create_all(ctx, &namespace, cliques),
        scope::create_all(ctx, &namespace, groups)
    );
    a.and(b)
}

fn desired_status(pcs: &PodCliqueSet, scope: &Scope, plan: &Plan) -> PodCliqueSetStatus {
    let current = pcs.status.clone().unwrap_or_default();
    PodCliqueSetStatus {
        observed_generation: pcs.metadata.generation,
        conditions: Some(conditions::merge(
            current.conditions.as_deref().unwrap_or_default(),
            scope.terminal_conditions(plan),
            pcs.metadata.generation,
            conditions::now(),
        )),
        replica_restart_counts: scope.aware.then(|| plan.counts.clone()),
        completed_replicas: (scope.aware && !plan.completed.is_empty())
            .then(|| plan.completed.clone()),
        replicas: Some(pcs.spec.replicas),
        ..PodCliqueSetStatus::default()
    }
}

fn same_status(a: &PodCliqueSetStatus, b: &PodCliqueSetStatus) -> bool {
    let strip = |s: &PodCliqueSetStatus| PodCliqueSetStatus {
        conditions: None,
        ..s.clone()
    };
    strip(a) == strip(b)
        && conditions::same(
            a.conditions.as_deref().unwrap_or_default(),
            b.conditions.as_deref().unwrap_or_default(),
        )
}
