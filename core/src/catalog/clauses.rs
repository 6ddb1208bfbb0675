//! The clause table of job-semantics.md: every clause id a case may cite.
//!
//! A settled clause belongs to the `core` profile, a provisional one to `extended`. Ids are
//! stable (the spec only ever adds), so this table only ever grows; a self-test compares it
//! with the spec text when the spec is available beside the repository.

use std::fmt;
use std::str::FromStr;

/// Whether the review settled a clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClauseStatus {
    /// Settled: part of the `core` profile.
    Settled,
    /// Provisional: part of the `extended` profile.
    Provisional,
}

/// A conformance profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    /// Settled behaviour; an implementation is conformant when every core case passes.
    Core,
    /// Provisional behaviour and open questions.
    Extended,
}

impl Profile {
    /// `core` or `extended`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Core => "core",
            Profile::Extended => "extended",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "core" => Ok(Profile::Core),
            "extended" => Ok(Profile::Extended),
            other => Err(format!(
                "unknown profile `{other}` (expected `core` or `extended`)"
            )),
        }
    }
}

/// One clause of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clause {
    /// Stable id (`E3`).
    pub id: &'static str,
    /// Short title.
    pub title: &'static str,
    /// Settled or provisional.
    pub status: ClauseStatus,
}

impl Clause {
    /// The profile the clause belongs to.
    pub fn profile(&self) -> Profile {
        match self.status {
            ClauseStatus::Settled => Profile::Core,
            ClauseStatus::Provisional => Profile::Extended,
        }
    }

    /// The clause family (`B`, `V`, `E`, `R`, `O`, `C`, `EV`, `L`).
    pub fn family(&self) -> &'static str {
        let end = self
            .id
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(self.id.len());
        &self.id[..end]
    }
}

const fn settled(id: &'static str, title: &'static str) -> Clause {
    Clause {
        id,
        title,
        status: ClauseStatus::Settled,
    }
}

const fn provisional(id: &'static str, title: &'static str) -> Clause {
    Clause {
        id,
        title,
        status: ClauseStatus::Provisional,
    }
}

/// Every clause of job-semantics.md, in spec order.
pub const CLAUSES: &[Clause] = &[
    settled("B1", "child names follow the Grove naming scheme"),
    settled("B2", "pods carry the podclique and pod-index labels"),
    settled(
        "B3",
        "controller ownerReferences; deleting a PCS removes everything",
    ),
    settled(
        "B4",
        "a regular PodClique replaces deleted pods, never terminal",
    ),
    settled("B5", "a PodClique has spec.replicas pods once created"),
    settled("V1", "success on a clique policy is rejected"),
    settled(
        "V2",
        "targetNames non-empty, unique, naming completion-aware children",
    ),
    settled(
        "V3",
        "clique maxRestarts other than 0, negative maxRestarts rejected",
    ),
    settled(
        "V4",
        "completion on a parent with no completion-aware child rejected",
    ),
    settled(
        "V5",
        "completion-aware clique restartPolicy Always/OnFailure rejected; default Never",
    ),
    settled(
        "V6",
        "regular clique with explicit Never/OnFailure rejected",
    ),
    settled(
        "V7",
        "autoscaling on completion-aware cliques/PCSGs rejected",
    ),
    settled(
        "V8",
        "changing replicas of completion-aware objects rejected",
    ),
    settled(
        "V9",
        "pod template changes of a completion-aware PCS rejected",
    ),
    settled("V10", "empty completion markers are valid defaults"),
    settled(
        "E1",
        "PodClique Completed when all pods of the attempt succeed",
    ),
    settled("E2", "PodClique Failed when a pod fails"),
    settled(
        "E3",
        "PodClique Failed when a pod vanishes; no replacement pod",
    ),
    settled(
        "E4",
        "no MinAvailableBreached on completion-aware PodCliques",
    ),
    settled("E5", "regular PodCliques never Completed or Failed"),
    settled("E6", "Completed and Failed never both True, and sticky"),
    settled("E7", "replica Completed when its required children are"),
    settled(
        "E8",
        "child failure with budget left triggers a gang restart",
    ),
    settled("E9", "child failure with budget spent fails the replica"),
    settled(
        "E10",
        "Option A: required completion wins over a simultaneous failure",
    ),
    settled(
        "E11",
        "PCSG/PCS Completed when all replicas are, Failed when one is",
    ),
    settled("E12", "regular children are ignored by evaluation"),
    settled("E13", "a PCS sees a PCSG child through its conditions"),
    settled(
        "R1",
        "a PCSG restart recreates every PodClique of the replica",
    ),
    settled(
        "R2",
        "a PCS restart recreates the replica's children, counts reset",
    ),
    settled(
        "R3",
        "replicaRestartCounts grows by one per restart, never decreases",
    ),
    settled("R4", "restarts fire promptly, no terminationDelay"),
    settled(
        "R5",
        "regular MinAvailableBreached gang termination consumes no budget",
    ),
    settled(
        "R6",
        "the nearest completion-aware parent handles a failure",
    ),
    provisional("R7", "recreated children carry the restart-attempt label"),
    provisional("R8", "the recreated attempt is placed as a gang"),
    settled(
        "O1",
        "terminal condition persisted before the deletions it causes",
    ),
    settled(
        "O2",
        "restart count persisted before the restart's deletions",
    ),
    settled("O3", "a controller crash never loses or doubles a restart"),
    settled(
        "C1",
        "a terminal PodClique's active pods are deleted, terminal pods kept",
    ),
    settled(
        "C2",
        "a terminal PCSG replica's non-terminal PodCliques are deleted",
    ),
    settled(
        "C3",
        "a terminal PCS replica's non-terminal children are deleted",
    ),
    settled("C4", "nothing is created inside a terminal scope"),
    settled("C5", "a gang restart deletes the old attempt entirely"),
    settled("C6", "cleanup honours terminationGracePeriodSeconds"),
    provisional(
        "C7",
        "terminal pods of a final scope remain until the workload is deleted",
    ),
    settled("EV1", "JobCompleted event on every resource that completes"),
    settled("EV2", "JobFailed event on every resource that fails"),
    settled("EV3", "GangRestartTriggered event at each restart"),
    settled("EV4", "RestartBudgetExhausted event when a budget runs out"),
    settled(
        "L1",
        "what the clauses require is acted on within a bound, also after a fault",
    ),
    provisional(
        "L2",
        "once every scope is as required, the implementation stops writing",
    ),
];

/// The clause with `id`, if the spec has it.
pub fn clause(id: &str) -> Option<&'static Clause> {
    CLAUSES.iter().find(|c| c.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_families_known() {
        for c in CLAUSES {
            assert_eq!(
                CLAUSES.iter().filter(|o| o.id == c.id).count(),
                1,
                "{}",
                c.id
            );
            assert!(
                ["B", "V", "E", "R", "O", "C", "EV", "L"].contains(&c.family()),
                "{}",
                c.id
            );
        }
        assert_eq!(clause("EV3").unwrap().family(), "EV");
        assert_eq!(clause("C7").unwrap().profile(), Profile::Extended);
        assert!(clause("E14").is_none());
    }
}
