//! The case model: what a parsed case says, as plain data for the runner.
//!
//! Every name an implementation exposes is held as a [`Term`] (never as a string), so the
//! runner spells it through the [`Vocabulary`](crate::vocab::Vocabulary) of the selected
//! revision. Object names (`job-0-worker`) and fixture names are the case's own and stay
//! strings.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde_json::Value;

use super::clauses::Profile;
use super::expectation::{Expectation, Remember};
use super::yaml::Pos;
use crate::vocab::{Feature, Kind, Revision, Term};

/// A duration written `500ms`, `20s`, `2m`, `1h` or combined (`1m30s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// The duration as `std::time::Duration`.
    pub fn as_std(self) -> std::time::Duration {
        self.0
    }

    /// From whole seconds.
    pub fn from_secs(secs: u64) -> Self {
        Duration(std::time::Duration::from_secs(secs))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (m, rest) = (rest / 60_000, rest % 60_000);
        let (s, ms) = (rest / 1000, rest % 1000);
        for (n, unit) in [(h, "h"), (m, "m"), (s, "s"), (ms, "ms")] {
            if n > 0 {
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for Duration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            || format!("invalid duration `{s}` (expected e.g. `500ms`, `20s`, `2m`, `1m30s`)");
        if s.is_empty() {
            return Err(bad());
        }
        let mut total = std::time::Duration::ZERO;
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
            if digits == 0 {
                return Err(bad());
            }
            let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let unit = match &rest[..unit_len] {
                "ms" => std::time::Duration::from_millis(n),
                "s" => std::time::Duration::from_secs(n),
                "m" => std::time::Duration::from_secs(n * 60),
                "h" => std::time::Duration::from_secs(n * 3600),
                _ => return Err(bad()),
            };
            total += unit;
            rest = &rest[unit_len..];
        }
        Ok(Duration(total))
    }
}

/// One parsed case file.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Unique name; equals the file stem.
    pub name: String,
    /// The file it came from.
    pub path: PathBuf,
    /// The folder under `cases/` (`leader-driven`), or empty at the top level.
    pub area: String,
    /// One line a reader understands without the spec.
    pub summary: String,
    /// Clause ids it checks, as written (validated against the clause table).
    pub clauses: Vec<String>,
    /// Its profile.
    pub profile: Profile,
    /// The fixtures (file stems under `fixtures/`) its steps may use.
    pub fixtures: Vec<String>,
    /// The revisions it applies to, when restricted (`None`: all, subject to [`Case::features`]).
    pub revisions: Option<Vec<Revision>>,
    /// Upper bound for the whole case, when set.
    pub timeout: Option<Duration>,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Every vocabulary term the case relies on (a revision lacking one skips the case).
    pub terms: BTreeSet<Term>,
    /// Capabilities the case relies on (a revision lacking one skips the case).
    pub features: BTreeSet<Feature>,
}

/// One step of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Where the step starts in the case file (for messages).
    pub pos: Pos,
    /// What it does.
    pub kind: StepKind,
}

/// What a step does. Steps run in order; each waits for its own completion (an `expect`
/// until it holds, a request until answered), except a controller action with a trigger,
/// which is armed and fires later.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// `apply`: create objects from a fixture (with an optional patch).
    Apply(Apply),
    /// `update`: change a live object's spec, status or scale.
    Update(Update),
    /// `delete` / `force-delete` of an object (not a pod).
    Delete(Delete),
    /// `reject`: a request the implementation's admission must refuse.
    Reject(Reject),
    /// A pod action (`exit`, `evict`, `delete` with `pod:` ...).
    Pods(PodStep),
    /// `controller`: pause, resume or crash the implementation, or wait for armed actions.
    Controller(ControllerStep),
    /// `fault`: hold back, coalesce or relist what the implementation's watches see.
    Fault(FaultStep),
    /// `refuse`: the apiserver refuses a kind of write in the case's namespace, or stops.
    Refuse(RefuseStep),
    /// `remember`: record the UID of an object or pod under a label.
    Remember(Remember),
    /// `expect`: a predicate that must become true (`within`) and/or stay true (`for`).
    Expect(Expectation),
}

impl StepKind {
    /// The step keyword as written in a case.
    pub fn keyword(&self) -> &'static str {
        match self {
            StepKind::Apply(_) => "apply",
            StepKind::Update(_) => "update",
            StepKind::Delete(d) if d.force => "force-delete",
            StepKind::Delete(_) => "delete",
            StepKind::Reject(_) => "reject",
            StepKind::Pods(p) => p.action.keyword(),
            StepKind::Controller(_) => "controller",
            StepKind::Fault(_) => "fault",
            StepKind::Refuse(_) => "refuse",
            StepKind::Remember(_) => "remember",
            StepKind::Expect(_) => "expect",
        }
    }
}

/// A Grove object named by kind and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// Kind (Grove kinds only; pods are addressed through [`PodSelector`]).
    pub kind: Kind,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// `apply`: create the PodCliqueSet of a fixture.
#[derive(Debug, Clone, PartialEq)]
pub struct Apply {
    /// Fixture name (file stem under `fixtures/`, declared in the case header).
    pub fixture: String,
    /// Merged into the fixture before sending; see [`merge_patch`](super::merge_patch).
    pub patch: Option<Value>,
}

/// What an `update` or `delete` addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addressee {
    /// An object by kind and name.
    Object(ObjectRef),
    /// The PodCliqueSet a fixture creates.
    Fixture(String),
}

/// Which part of an object an `update` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself (spec, metadata).
    Main,
    /// The `status` subresource (e.g. the harness writing PodClique conditions).
    Status,
    /// The `scale` subresource (`patch: {spec: {replicas: N}}`).
    Scale,
}

impl Subresource {
    /// Every subresource, the default (`main`) first.
    pub const ALL: [Subresource; 3] = [Subresource::Main, Subresource::Status, Subresource::Scale];

    /// The word a case writes it with.
    pub fn keyword(self) -> &'static str {
        match self {
            Subresource::Main => "main",
            Subresource::Status => "status",
            Subresource::Scale => "scale",
        }
    }
}

/// A condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// As written in a condition (`"True"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A condition the harness writes through `update` (subresource `status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionWrite {
    /// Condition type ([`Term::Completed`], [`Term::Failed`], ...).
    pub condition: Term,
    /// Status to write.
    pub status: ConditionStatus,
    /// Reason to write, if any.
    pub reason: Option<Term>,
}

/// `update`: read the live object, merge `patch` (and `conditions`), write it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The object.
    pub target: Addressee,
    /// Which part is written.
    pub subresource: Subresource,
    /// Merged into the live object; see [`merge_patch`](super::merge_patch).
    pub patch: Option<Value>,
    /// Conditions set by type (status subresource only); spelled through the vocabulary.
    pub conditions: Vec<ConditionWrite>,
}

/// `delete` / `force-delete` of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// The object.
    pub target: Addressee,
    /// Grace period 0 (force) instead of the default.
    pub force: bool,
}

/// The request a `reject` step sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A create (as `apply`).
    Apply(Apply),
    /// An update (as `update`).
    Update(Update),
}

/// `reject`: the request must fail with a 4xx whose message names `field`; nothing changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    /// The request.
    pub request: Request,
    /// Expected HTTP status code (`None`: any 4xx).
    pub code: Option<u16>,
    /// The field the error message must name, default-revision spelling (translate with
    /// [`Vocabulary::translate_field_path`](crate::vocab::Vocabulary::translate_field_path)).
    pub field: String,
}

/// Pods addressed by PodClique name and `grove.io/podclique-pod-index`, never by pod name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodSelector {
    /// `pod: <podclique>/<index>`: the (current) pod with that index.
    Pod {
        /// PodClique name.
        clique: String,
        /// Pod index label value.
        index: u32,
    },
    /// `clique: <podclique>`: every pod of the PodClique.
    Clique(String),
    /// `pcs: <podcliqueset>`: every pod of the PodCliqueSet (label `app.kubernetes.io/part-of`).
    PodCliqueSet(String),
}

impl fmt::Display for PodSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodSelector::Pod { clique, index } => write!(f, "pod {clique}/{index}"),
            PodSelector::Clique(c) => write!(f, "pods of PodClique {c}"),
            PodSelector::PodCliqueSet(p) => write!(f, "pods of PodCliqueSet {p}"),
        }
    }
}

/// How a lost node's pods disappear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeLoss {
    /// The pods vanish without ever showing a terminal phase (`mode: vanish`, default).
    Vanish,
    /// The pods first show phase Failed, then vanish (`mode: fail`).
    FailFirst,
}

/// What the harness does to selected pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodAction {
    /// `exit`: the container exits with this code (0 → Succeeded, else Failed).
    Exit(i32),
    /// `unready`: the pod stays Running but not Ready.
    Unready,
    /// `ready`: the pod becomes Ready again.
    Ready,
    /// `evict`: the Eviction API.
    Evict,
    /// `preempt`: condition `DisruptionTarget` then delete.
    Preempt,
    /// `delete`: a plain delete (default grace period).
    Delete,
    /// `force-delete`: a delete with grace period 0.
    ForceDelete,
    /// `lose-node`: the node of the selected pods is lost.
    LoseNode(NodeLoss),
}

impl PodAction {
    /// The step keyword.
    pub fn keyword(&self) -> &'static str {
        match self {
            PodAction::Exit(_) => "exit",
            PodAction::Unready => "unready",
            PodAction::Ready => "ready",
            PodAction::Evict => "evict",
            PodAction::Preempt => "preempt",
            PodAction::Delete => "delete",
            PodAction::ForceDelete => "force-delete",
            PodAction::LoseNode(_) => "lose-node",
        }
    }
}

/// A pod step: an action on the selected pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStep {
    /// Which pods.
    pub selector: PodSelector,
    /// What happens to them.
    pub action: PodAction,
    /// `terminal-phase: false` on a graceful `evict`, `preempt` or `delete`: the kubelet
    /// removes the pod without ever writing a terminal phase (a kubelet that is gone, or a
    /// watch that coalesced the update), so only the pod's absence tells it ended (E3).
    pub without_terminal_phase: bool,
    /// `alone: true` on `lose-node`: the case needs the selected pods to be the only pods of
    /// the case on their nodes (a real cluster may place others there, which the node
    /// would take with it); where they are not, the case is skipped, saying so.
    pub alone: bool,
    /// `if-present: true` on `delete` / `force-delete`: the selected pods may already be gone
    /// (an implementation may delete them itself, which the spec allows); then the step does
    /// nothing and says so, where it would otherwise fail for want of a pod.
    pub if_present: bool,
}

/// What the harness does to the implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerAction {
    /// Stop it reconciling (SIGSTOP, or scale to zero).
    Pause,
    /// Let it reconcile again.
    Resume,
    /// SIGKILL it and start it again.
    Crash,
    /// Wait until every action armed with `when` has been carried out (a pinned pause has
    /// landed), before the case goes on.
    Wait,
}

/// A `fault` step: a fault on what the implementation sees through the harness's API proxy,
/// now or when a trigger fires.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultStep {
    /// What it does.
    pub action: FaultStepAction,
    /// When it starts; `None` for at once.
    pub when: Option<Trigger>,
}

/// What a [`FaultStep`] does.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultStepAction {
    /// `hold: <kind>`: keep the implementation's watch events of the kind back.
    Hold(HoldFault),
    /// `relist: <kind>`: end the implementation's watches of the kind with `410 Gone`.
    Relist(Kind),
    /// `release`: release every hold of the case now.
    Release,
}

/// A hold on the watch events of a kind in the case's namespace ([`FaultStepAction::Hold`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HoldFault {
    /// The kind (a Grove kind or `Pod`).
    pub kind: Kind,
    /// Only objects whose name matches this glob (`*` for any run of characters).
    pub name: Option<String>,
    /// `reads: stale`: GET and LIST of the kind are answered as of the hold's start.
    pub stale_reads: bool,
    /// What the release delivers.
    pub release: HoldRelease,
    /// `until:`: released when this trigger fires (armed when the hold starts).
    pub until: Option<Trigger>,
    /// `for:`: released this long after it started.
    pub lasts: Option<Duration>,
}

/// What releasing a hold delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldRelease {
    /// Every held event, in order.
    Deliver,
    /// Each held object's last state only.
    Coalesce,
    /// Nothing: the watches end with `410 Gone` and the implementation lists again.
    Relist,
}

impl HoldRelease {
    /// Every release, the default (`deliver`) first.
    pub const ALL: [HoldRelease; 3] = [
        HoldRelease::Deliver,
        HoldRelease::Coalesce,
        HoldRelease::Relist,
    ];

    /// The word a case writes it with.
    pub fn keyword(self) -> &'static str {
        match self {
            HoldRelease::Deliver => "deliver",
            HoldRelease::Coalesce => "coalesce",
            HoldRelease::Relist => "relist",
        }
    }
}

/// A `refuse` step: from now on the apiserver refuses one kind of write in the case's
/// namespace (an admission policy a real cluster may have: a policy engine, a quota), to every
/// client, until the refusal is lifted; or the lifting of every refusal of the case.
#[derive(Debug, Clone, PartialEq)]
pub enum RefuseStep {
    /// `refuse: {verb, kind, subresource, for}`: start refusing.
    Start(Refusal),
    /// `refuse: lift`: stop every refusal of the case now.
    Lift,
}

/// The writes a [`RefuseStep::Start`] refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Which writes.
    pub verb: RefusedVerb,
    /// Of which kind (a Grove kind or `Pod`).
    pub kind: Kind,
    /// `subresource: status`: only writes of the status subresource (`update` only).
    pub status: bool,
    /// `for:`: lifted this long after it started (otherwise by `refuse: lift` or the case's end).
    pub lasts: Option<Duration>,
}

/// A write a [`Refusal`] refuses: the admission operation it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedVerb {
    /// `create`.
    Create,
    /// `update`: an update or a patch (server-side apply included).
    Update,
    /// `delete`: a delete, whatever its grace period (a pod's eviction is not one).
    Delete,
}

impl fmt::Display for Refusal {
    /// What is refused, as in `create Pod` or `update PodClique status`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb.as_str(), self.kind)?;
        if self.status {
            f.write_str(" status")?;
        }
        Ok(())
    }
}

impl RefusedVerb {
    /// As written in a case.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusedVerb::Create => "create",
            RefusedVerb::Update => "update",
            RefusedVerb::Delete => "delete",
        }
    }
}

/// A watch event that fires an armed controller action.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// `changed: {kind, name, path}`: the value at `path` (dotted, e.g.
    /// `status.replicaRestartCounts`) differs from its value when the step ran.
    Changed {
        /// The watched object.
        object: ObjectRef,
        /// Dotted field path, default-revision spelling.
        path: String,
    },
    /// `deleted: {...}`: the first deletion (deletionTimestamp set, or gone) the
    /// implementation makes of a matching object after the step ran.
    Deleted(DeletionTarget),
    /// `condition: {kind, name, type, status}`: a condition reaches a status.
    Condition {
        /// The watched object.
        object: ObjectRef,
        /// The condition type.
        condition: Term,
        /// The status it reaches.
        status: ConditionStatus,
    },
    /// `request: {verb, resource, subresource, name, nth, at}`: the implementation's Nth
    /// API request matching the pattern, held by the harness's API proxy: the crash lands just
    /// before the request reaches the apiserver (`at: before`) or just after it was
    /// persisted, before the answer is delivered (`at: after`).
    Request(RequestPin),
}

/// A pinned point in the implementation's API traffic ([`Trigger::Request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPin {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: Option<String>,
    /// Plural resource (`pods`, `podcliques`, ...).
    pub resource: Option<String>,
    /// Subresource (`status`, `scale`, ...).
    pub subresource: Option<String>,
    /// Object name, a glob with `*`.
    pub name: Option<String>,
    /// Which matching request, counted from when the step ran (1 = the first).
    pub nth: u32,
    /// Crash after the apiserver answered (the write persisted) rather than before.
    pub after: bool,
}

impl fmt::Display for RequestPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nth = match self.nth {
            1 => "1st".to_owned(),
            2 => "2nd".to_owned(),
            3 => "3rd".to_owned(),
            n => format!("{n}th"),
        };
        write!(
            f,
            "{} the {nth} {} {}",
            if self.after { "after" } else { "before" },
            self.verb.as_deref().unwrap_or("request"),
            self.resource.as_deref().unwrap_or("of any resource")
        )?;
        if let Some(s) = &self.subresource {
            write!(f, "/{s}")?;
        }
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        Ok(())
    }
}

/// What a [`Trigger::Deleted`] waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionTarget {
    /// `{pod: <podclique>/<index>}` or `{clique: <podclique>}` (any of its pods).
    Pod(PodSelector),
    /// `{kind, name}`.
    Object(ObjectRef),
    /// `{kind}` alone: any object of that kind (`Pod` allowed).
    AnyOf(Kind),
}

/// `controller`: an action on the implementation, now or when `when` fires.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerStep {
    /// The action.
    pub action: ControllerAction,
    /// When set, the step only arms the trigger and the case moves on.
    pub when: Option<Trigger>,
}
