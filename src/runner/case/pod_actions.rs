//! Pod actions through the pod driver: exits, readiness, evictions, preemptions and deletions
//! of the pods a selector addresses, and the loss of the nodes they run on. Pods the harness
//! takes away are recorded with the observer, so the monitor never counts their deletion
//! against the implementation.

use futures::StreamExt;
use serde_json::Value;

use super::expect::DEFAULT_WITHIN;
use super::steps::{CaseRun, StepError, fail};
use crate::catalog::{PodAction, PodSelector, PodStep};
use crate::kubelets::PodError;
use crate::snapshot::uid;

/// How many pod actions of one step are in flight at once.
const PARALLEL_POD_ACTIONS: usize = 32;

impl CaseRun<'_> {
    /// The names of the pods a selector addresses now
    /// ([`addressed_pods`](crate::snapshot::Snapshot::addressed_pods)); waits (watch-driven)
    /// for at least one to exist, and for all of them to be Running when `running` is set.
    async fn selected_pods(
        &self,
        selector: &PodSelector,
        running: bool,
    ) -> Result<Vec<String>, StepError> {
        let begun = std::time::Instant::now();
        let selected = self.await_selected_pods(selector, running).await;
        self.spent(begun.elapsed(), std::time::Duration::ZERO);
        selected
    }

    /// The names of the pods a selector addresses now, without waiting for any.
    fn addressed_now(&self, selector: &PodSelector) -> Vec<String> {
        self.observer
            .with_snapshot(|s| pod_names(&s.addressed_pods(selector, self.vocab())))
    }

    /// [`selected_pods`](Self::selected_pods), untimed.
    async fn await_selected_pods(
        &self,
        selector: &PodSelector,
        running: bool,
    ) -> Result<Vec<String>, StepError> {
        let mut changes = self.observer.subscribe();
        let deadline = tokio::time::Instant::now() + DEFAULT_WITHIN;
        loop {
            let (names, ready) = self.observer.with_snapshot(|s| {
                let pods = s.addressed_pods(selector, self.vocab());
                let ready = !pods.is_empty()
                    && (!running
                        || pods.iter().all(|p| {
                            p.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
                        }));
                (pod_names(&pods), ready)
            });
            if ready {
                return Ok(names);
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return Err(fail(format!(
                    "{selector} never {} within {DEFAULT_WITHIN:?}",
                    if running { "was Running" } else { "existed" }
                )));
            }
        }
    }

    /// A pod step: an action on the pods its selector addresses, or the loss of their nodes.
    pub(super) async fn pods(&mut self, step: &PodStep) -> Result<(), StepError> {
        let driver = self.run.pods.clone();
        // A node is lost whatever its pods' phases (a Succeeded pod goes with it too).
        let running = matches!(
            step.action,
            PodAction::Exit(_) | PodAction::Unready | PodAction::Ready
        );
        let names = if step.if_present {
            // The pods may be gone already (`if-present`): only those there now are acted on.
            let names = self.addressed_now(&step.selector);
            if names.is_empty() {
                tracing::info!(
                    "{} {}: no such pod, nothing to do (if-present)",
                    step.action.keyword(),
                    step.selector
                );
                return Ok(());
            }
            names
        } else {
            self.selected_pods(&step.selector, running).await?
        };
        let ns = self.namespace.clone();
        let failed = |e: PodError| {
            fail(format!(
                "failed to {} {}: {}",
                step.action.keyword(),
                step.selector,
                crate::errors::chain(&e)
            ))
        };
        if let PodAction::LoseNode(how) = step.action {
            let mut nodes = Vec::new();
            for name in &names {
                let node = driver.node_of(&ns, name).await.map_err(failed)?;
                if !nodes.contains(&node) {
                    nodes.push(node);
                }
            }
            if step.alone {
                let others: Vec<String> = self.observer.with_snapshot(|s| {
                    pod_names(&s.pods_on_nodes(&nodes))
                        .into_iter()
                        .filter(|n| !names.contains(n))
                        .collect()
                });
                if !others.is_empty() {
                    return Err(StepError::Skip(format!(
                        "the case needs {} alone on {} to lose it, but this target placed other pods of the case there too ({}), which the node would take with it",
                        step.selector,
                        nodes.join(", "),
                        others.join(", ")
                    )));
                }
            }
            for node in nodes {
                // Known before the node goes, so that no deletion it causes is ever taken
                // for the implementation's.
                for uid in driver.pods_on(&node).await.map_err(failed)? {
                    self.observer.harness_deleted(&uid);
                }
                self.lost_nodes.push(node.clone());
                for uid in driver.lose_node(&node, how).await.map_err(failed)? {
                    self.observer.harness_deleted(&uid);
                }
            }
            return Ok(());
        }
        let disrupts = !matches!(
            step.action,
            PodAction::Exit(_) | PodAction::Ready | PodAction::Unready
        );
        for name in &names {
            let uid = self.observer.with_snapshot(|s| {
                s.pod_named(name)
                    .and_then(uid)
                    .unwrap_or_default()
                    .to_string()
            });
            self.observer.harness_touched(&uid);
            if disrupts {
                self.observer.harness_deleted(&uid);
            }
        }
        // The pods a step addresses act at once, as a whole clique exiting does (a few at a
        // time in flight: 256 one after the other took seconds).
        let (action, without_terminal_phase) = (step.action, step.without_terminal_phase);
        let results: Vec<Result<(), PodError>> = futures::stream::iter(names)
            .map(|name| {
                let (driver, ns) = (driver.clone(), ns.clone());
                async move { driver.act(&ns, &name, action, without_terminal_phase).await }
            })
            .buffer_unordered(PARALLEL_POD_ACTIONS)
            .collect()
            .await;
        let result = results.into_iter().collect::<Result<(), PodError>>();
        match result {
            // Gone between the look and the delete: what `if-present` allows.
            Err(_) if step.if_present && self.addressed_now(&step.selector).is_empty() => Ok(()),
            other => other.map_err(failed),
        }
    }
}

/// The names of `pods`, in their order.
fn pod_names(pods: &[&Value]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}
