//! How a case's pod actions reach pods: [`PodDriver`] is the one interface a case uses, with
//! the simulated kubelet of the embedded target behind one variant and real kubelets (kind, or
//! any cluster) behind the other.

use std::sync::Arc;

use crate::catalog::{NodeLoss, PodAction};
use crate::kubelets::simulated::{self, Fleet};

use crate::kubelets::real::{RealPods, RealPodsError};

/// Why a pod action, or a node's loss or recovery, failed.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// The simulated kubelet could not do it.
    #[error(transparent)]
    Fleet(simulated::FleetError),
    /// Real kubelets could not do it.
    #[error(transparent)]
    Real(RealPodsError),
    /// The nodes could not be listed.
    #[error("failed to list the nodes")]
    Capacity(#[source] Box<kube::Error>),
    /// `lose-node` is not a pod action: a node is lost through [`PodDriver::lose_node`].
    #[error("a node is lost through `lose_node`, not as a pod action")]
    NotAPodAction,
}

/// The pod driver of a target.
#[derive(Clone)]
pub enum PodDriver {
    /// The embedded target's simulated kubelet.
    Simulated(Arc<Fleet>),
    /// Real kubelets: exits and readiness by exec, disruptions through the API,
    /// node loss through the node's container when the target has one.
    Real(RealPods),
}

impl std::fmt::Debug for PodDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PodDriver::Simulated(_) => f.write_str("PodDriver::Simulated"),
            PodDriver::Real(real) => f.debug_tuple("PodDriver::Real").field(real).finish(),
        }
    }
}

impl PodDriver {
    /// The simulated fleet, when pods are simulated.
    pub fn fleet(&self) -> Option<&Arc<Fleet>> {
        match self {
            PodDriver::Simulated(fleet) => Some(fleet),
            PodDriver::Real(_) => None,
        }
    }

    /// Why this driver cannot perform `action`, if it cannot: a capability the target truly
    /// lacks is a skip with this reason. (`terminal-phase: false` only comes with a graceful
    /// `evict`, `preempt` or `delete`, which every driver can carry out without a terminal
    /// phase.)
    pub fn unsupported(&self, action: PodAction) -> Option<String> {
        match self {
            PodDriver::Simulated(_) => None,
            PodDriver::Real(real) => match action {
                PodAction::LoseNode(_) if !real.can_lose_nodes() => Some(
                    "`lose-node` needs a target whose nodes the harness can stop: the embedded target or kind"
                        .into(),
                ),
                PodAction::LoseNode(_)
                | PodAction::Exit(_)
                | PodAction::Unready
                | PodAction::Ready
                | PodAction::Evict
                | PodAction::Preempt
                | PodAction::Delete
                | PodAction::ForceDelete => None,
            },
        }
    }

    /// Performs `action` on the pod `namespace/name` (any action but `lose-node`).
    pub async fn act(
        &self,
        namespace: &str,
        name: &str,
        action: PodAction,
        without_terminal_phase: bool,
    ) -> Result<(), PodError> {
        match self {
            PodDriver::Simulated(fleet) => {
                let e = PodError::Fleet;
                if without_terminal_phase {
                    fleet
                        .omit_terminal_phase(namespace, name)
                        .await
                        .map_err(e)?;
                }
                match action {
                    PodAction::Exit(code) => fleet.exit(namespace, name, code).await,
                    PodAction::Unready => fleet.set_ready(namespace, name, false).await,
                    PodAction::Ready => fleet.set_ready(namespace, name, true).await,
                    PodAction::Evict => fleet.evict(namespace, name).await,
                    PodAction::Preempt => fleet.preempt(namespace, name).await,
                    PodAction::Delete => fleet.delete(namespace, name).await,
                    PodAction::ForceDelete => fleet.force_delete(namespace, name).await,
                    PodAction::LoseNode(_) => return Err(PodError::NotAPodAction),
                }
                .map_err(e)
            }
            // A real kubelet writes the terminal phase of a pod it stops; without one, the
            // apiserver removes the pod at once (grace period 0), before any kubelet could,
            // and the container is stopped afterwards.
            PodDriver::Real(real) => match action {
                PodAction::Exit(code) => real
                    .exit(namespace, name, code)
                    .await
                    .map_err(PodError::Real),
                PodAction::Unready => real
                    .set_ready(namespace, name, false)
                    .await
                    .map_err(PodError::Real),
                PodAction::Ready => real
                    .set_ready(namespace, name, true)
                    .await
                    .map_err(PodError::Real),
                PodAction::Evict => real
                    .evict(namespace, name, without_terminal_phase)
                    .await
                    .map_err(PodError::Real),
                PodAction::Preempt => real
                    .preempt(namespace, name, without_terminal_phase)
                    .await
                    .map_err(PodError::Real),
                PodAction::Delete => real
                    .delete(namespace, name, without_terminal_phase)
                    .await
                    .map_err(PodError::Real),
                PodAction::ForceDelete => real
                    .delete(namespace, name, true)
                    .await
                    .map_err(PodError::Real),
                PodAction::LoseNode(_) => Err(PodError::NotAPodAction),
            },
        }
    }

    /// The node the pod `namespace/name` is bound to.
    pub async fn node_of(&self, namespace: &str, name: &str) -> Result<String, PodError> {
        match self {
            PodDriver::Simulated(fleet) => fleet
                .node_of(namespace, name)
                .await
                .map_err(PodError::Fleet),
            PodDriver::Real(real) => real.node_of(namespace, name).await.map_err(PodError::Real),
        }
    }

    /// The UIDs of the pods on `node` whose deletion a loss of the node would cause and that
    /// the driver does not record itself (their deletions are the harness's doing).
    pub async fn pods_on(&self, node: &str) -> Result<Vec<String>, PodError> {
        match self {
            // The fleet records its own deletions.
            PodDriver::Simulated(_) => Ok(Vec::new()),
            PodDriver::Real(real) => real.pods_on(node).await.map_err(PodError::Real),
        }
    }

    /// Loses `node`. Returns the UIDs of the pods that were on it (their deletions are the
    /// harness's doing, not the implementation's).
    pub async fn lose_node(&self, node: &str, how: NodeLoss) -> Result<Vec<String>, PodError> {
        match self {
            PodDriver::Simulated(fleet) => {
                let how = match how {
                    NodeLoss::Vanish => simulated::NodeLoss::Vanish,
                    NodeLoss::FailFirst => simulated::NodeLoss::FailedFirst,
                };
                // The fleet records its own deletions.
                fleet
                    .lose_node(node, how)
                    .await
                    .map(|()| Vec::new())
                    .map_err(PodError::Fleet)
            }
            PodDriver::Real(real) => real.lose_node(node).await.map_err(PodError::Real),
        }
    }

    /// How many shared nodes the simulated fleet has and how many pods each holds; `None` for
    /// real kubelets, whose nodes are what the cluster has.
    pub fn fleet_shape(&self) -> Option<(usize, usize)> {
        match self {
            PodDriver::Simulated(fleet) => Some(fleet.shape()),
            PodDriver::Real(_) => None,
        }
    }

    /// How many pods the nodes a case's pods may run on hold at most, all of them empty: the
    /// allocatable pods of every node that is Ready and schedulable and has no `NoSchedule` or
    /// `NoExecute` taint. `None` where nodes are added as cases need them (the simulated
    /// fleet).
    pub async fn pod_capacity(&self) -> Result<Option<u64>, PodError> {
        match self {
            PodDriver::Simulated(_) => Ok(None),
            PodDriver::Real(real) => super::capacity::pod_capacity(real.client())
                .await
                .map(Some)
                .map_err(|e| PodError::Capacity(Box::new(e))),
        }
    }

    /// Whether a case can have nodes of its own, so that losing one touches no other case
    /// (the simulated fleet reserves nodes; a kind cluster's few workers are shared).
    pub fn private_nodes(&self) -> bool {
        matches!(self, PodDriver::Simulated(_))
    }

    /// Reserves `count` nodes for the pods of `namespace`, where [`private_nodes`] allows.
    ///
    /// [`private_nodes`]: PodDriver::private_nodes
    pub async fn reserve_nodes(&self, namespace: &str, count: usize) -> Result<(), PodError> {
        match self {
            PodDriver::Simulated(fleet) => fleet
                .reserve_nodes(namespace, count)
                .await
                .map(drop)
                .map_err(PodError::Fleet),
            PodDriver::Real(_) => Ok(()),
        }
    }

    /// Ends the reservations of `namespace`.
    pub fn release_nodes(&self, namespace: &str) {
        if let PodDriver::Simulated(fleet) = self {
            fleet.release_nodes(namespace);
        }
    }

    /// Brings a lost node back.
    pub async fn recover_node(&self, node: &str) -> Result<(), PodError> {
        match self {
            PodDriver::Simulated(fleet) => fleet.recover_node(node).await.map_err(PodError::Fleet),
            PodDriver::Real(real) => real.recover_node(node).await.map_err(PodError::Real),
        }
    }
}
