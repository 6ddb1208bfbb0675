//! What each step kind does to a run, beside its definition in `step_kinds`: how the run log
//! describes it, what it writes through the API, which manifest it sends, and which faults a
//! sweep may place beside it. Every match here is exhaustive, so a new step kind is named by
//! the compiler in this file, not in the runner, the loader or the sweeps.

use std::fmt;

use super::model::{
    Addressee, Apply, ControllerAction, FaultStepAction, RefuseStep, Reject, Request, StepKind,
    Subresource, Trigger,
};
use crate::vocab::Kind;

impl fmt::Display for Addressee {
    /// `PodClique job-0-worker`, or `fixture job` for the PodCliqueSet a fixture creates.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addressee::Object(o) => write!(f, "{o}"),
            Addressee::Fixture(fixture) => write!(f, "fixture {fixture}"),
        }
    }
}

/// The fault a sweep places at each recorded write of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweptFault {
    /// A crash pinned to a request of the implementation.
    Crash,
    /// A hold of the implementation's view (stale or unobserved).
    Hold,
}

impl StepKind {
    /// The step as the run log names it: `apply job`, `evict pod job-0-worker/0 (if present)`.
    pub fn describe(&self) -> String {
        match self {
            StepKind::Apply(a) => format!("apply {}", a.fixture),
            StepKind::Update(u) => format!("update {}", u.target),
            StepKind::Delete(d) => format!("{} {}", self.keyword(), d.target),
            StepKind::Reject(_) => "reject".into(),
            StepKind::Pods(p) => {
                let notes: Vec<&str> = [
                    (p.without_terminal_phase, "no terminal phase"),
                    (p.if_present, "if present"),
                ]
                .into_iter()
                .filter_map(|(on, note)| on.then_some(note))
                .collect();
                let mut line = format!("{} {}", p.action.keyword(), p.selector);
                if !notes.is_empty() {
                    line.push_str(&format!(" ({})", notes.join(", ")));
                }
                line
            }
            StepKind::Controller(c) => format!("controller {:?}", c.action).to_lowercase(),
            StepKind::Fault(f) => match &f.action {
                FaultStepAction::Hold(h) => format!("fault hold {}", h.kind),
                FaultStepAction::Relist(k) => format!("fault relist {k}"),
                FaultStepAction::Release => "fault release".into(),
            },
            StepKind::Refuse(RefuseStep::Start(r)) => format!("refuse {r}"),
            StepKind::Refuse(RefuseStep::Lift) => "refuse lift".into(),
            StepKind::Remember(r) => format!("remember {}", r.label),
            StepKind::Expect(_) => "expect".into(),
        }
    }

    /// The resource (plural, main resource only) the step writes through the API, if any:
    /// what an admission webhook that fails closed rejects while the implementation is paused.
    pub fn written_resource(&self) -> Option<&'static str> {
        let of_target = |target: &Addressee| match target {
            Addressee::Object(o) => o.kind.plural(),
            Addressee::Fixture(_) => Kind::PodCliqueSet.plural(),
        };
        let of_update = |u: &super::model::Update| {
            (u.subresource == Subresource::Main).then(|| of_target(&u.target))
        };
        match self {
            StepKind::Apply(_) => Some(Kind::PodCliqueSet.plural()),
            StepKind::Update(u) => of_update(u),
            StepKind::Delete(d) => Some(of_target(&d.target)),
            StepKind::Reject(r) => match &r.request {
                Request::Apply(_) => Some(Kind::PodCliqueSet.plural()),
                Request::Update(u) => of_update(u),
            },
            StepKind::Pods(_)
            | StepKind::Controller(_)
            | StepKind::Fault(_)
            | StepKind::Refuse(_)
            | StepKind::Remember(_)
            | StepKind::Expect(_) => None,
        }
    }

    /// The fixture the step sends, created (`apply`) or meant to be refused (`reject: {apply}`).
    pub fn sent_manifest(&self) -> Option<&Apply> {
        match self {
            StepKind::Apply(a)
            | StepKind::Reject(Reject {
                request: Request::Apply(a),
                ..
            }) => Some(a),
            StepKind::Reject(Reject {
                request: Request::Update(_),
                ..
            })
            | StepKind::Update(_)
            | StepKind::Delete(_)
            | StepKind::Pods(_)
            | StepKind::Controller(_)
            | StepKind::Fault(_)
            | StepKind::Refuse(_)
            | StepKind::Remember(_)
            | StepKind::Expect(_) => None,
        }
    }

    /// The fixture the step creates (`apply`; a rejected one creates nothing).
    pub fn created_fixture(&self) -> Option<&Apply> {
        match self {
            StepKind::Apply(a) => Some(a),
            StepKind::Update(_)
            | StepKind::Delete(_)
            | StepKind::Reject(_)
            | StepKind::Pods(_)
            | StepKind::Controller(_)
            | StepKind::Fault(_)
            | StepKind::Refuse(_)
            | StepKind::Remember(_)
            | StepKind::Expect(_) => None,
        }
    }

    /// Why a sweep placing `fault` at the case's writes cannot run beside this step, if it
    /// cannot: crashes of the case's own would fight a pinned one, the proxy holds one pin at
    /// a time, and the sweep's release of its hold releases every hold. Pausing and resuming
    /// is fine: a paused implementation makes no request to pin.
    pub fn sweep_conflict(&self, fault: SweptFault) -> Option<&'static str> {
        match (self, fault) {
            (StepKind::Fault(_), SweptFault::Hold) => Some(
                "the case holds the implementation's view itself, and releasing one hold releases every hold",
            ),
            (StepKind::Controller(c), SweptFault::Crash) if c.action == ControllerAction::Crash => {
                Some("the case crashes the implementation itself")
            }
            (StepKind::Controller(c), SweptFault::Crash)
                if matches!(c.when, Some(Trigger::Request(_))) =>
            {
                Some("the case pins its own requests, and the API proxy holds one pin at a time")
            }
            (
                StepKind::Apply(_)
                | StepKind::Update(_)
                | StepKind::Delete(_)
                | StepKind::Reject(_)
                | StepKind::Pods(_)
                | StepKind::Controller(_)
                | StepKind::Fault(_)
                | StepKind::Refuse(_)
                | StepKind::Remember(_)
                | StepKind::Expect(_),
                SweptFault::Crash | SweptFault::Hold,
            ) => None,
        }
    }
}
