//! The proxy's journal: every request in arrival order with its answer, the rules in force,
//! and the rules that fired. One lock guards it all, so sequence numbers and rule counts
//! follow the same order.

use std::time::{Duration, SystemTime};

use super::faults::{AppliedFault, Decision, FaultAction, Fired, HookPosition, RuleSet};
use super::request::{RequestInfo, RequestMatch, Verb};

/// A request watched for, not touched: at its `nth` match the server runs the mark's
/// callback (before forwarding, or after the apiserver answered) and goes on. Fires once.
#[derive(Debug)]
pub(crate) struct Mark {
    id: u64,
    matches: RequestMatch,
    nth: u32,
    position: HookPosition,
    count: u32,
}

/// One request as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecordedRequest {
    /// Its number, from 1, in arrival order (never reused, even after clearing the log).
    pub seq: u64,
    /// When it arrived.
    pub at: SystemTime,
    /// What it was about.
    pub request: RequestInfo,
    /// The status the client received; `None` while it waits, when a hook dropped the
    /// connection, or when the client went away first.
    pub status: Option<u16>,
    /// From arrival to the response headers (or to the dropped connection); `None` while it
    /// waits or when the client went away first.
    pub duration: Option<Duration>,
    /// The rules that applied to it, in rule order.
    pub faults: Vec<AppliedFault>,
    /// For a create, update or patch the apiserver accepted: the `resourceVersion` of the
    /// object it answered with (the revision the write committed at).
    pub resource_version: Option<u64>,
    /// How many requests had arrived when its answer was recorded (the highest `seq` then):
    /// every request numbered above it arrived after this one's answer.
    pub answered_after: Option<u64>,
}

/// Requests, rules and firings.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    next_seq: u64,
    requests: Vec<RecordedRequest>,
    fired: Vec<Fired>,
    /// The fault rules in force.
    pub rules: RuleSet,
    marks: Vec<Mark>,
    next_mark: u64,
}

impl Journal {
    /// Numbers and records an arriving request and decides its faults (none when
    /// `faults_apply` is false: it is not counted against the rules either). Statuses and
    /// delays fire here; hooks fire when their callback is called ([`Journal::fire`]).
    pub fn arrive(&mut self, request: RequestInfo, faults_apply: bool) -> (u64, Decision) {
        self.next_seq += 1;
        let seq = self.next_seq;
        let decision = if faults_apply {
            self.rules.decide(&request)
        } else {
            Decision::default()
        };
        for applied in &decision.applied {
            if !matches!(applied.action, FaultAction::Hook { .. }) {
                self.fired.push(Fired {
                    rule: applied.rule,
                    action: applied.action.clone(),
                    seq,
                    request: request.clone(),
                    upstream_status: None,
                });
            }
        }
        self.requests.push(RecordedRequest {
            seq,
            at: SystemTime::now(),
            request,
            status: None,
            duration: None,
            faults: decision.applied.clone(),
            resource_version: None,
            answered_after: None,
        });
        (seq, decision)
    }

    /// Watches for the `nth` (1-based) request `matches` selects from now on; the mark's id.
    pub fn mark(&mut self, matches: RequestMatch, nth: u32, position: HookPosition) -> u64 {
        self.next_mark += 1;
        self.marks.push(Mark {
            id: self.next_mark,
            matches,
            nth: nth.max(1),
            position,
            count: 0,
        });
        self.next_mark
    }

    /// Counts `request` against every mark; the marks it is due on (each once), with where.
    pub fn due_marks(&mut self, request: &RequestInfo) -> Vec<(u64, HookPosition)> {
        let mut due = Vec::new();
        self.marks.retain_mut(|m| {
            if !m.matches.matches(request) {
                return true;
            }
            m.count += 1;
            if m.count == m.nth {
                due.push((m.id, m.position));
                return false;
            }
            true
        });
        due
    }

    /// Forgets every mark not yet due.
    pub fn clear_marks(&mut self) {
        self.marks.clear();
    }

    /// Records how request `seq` ended (unless the log was cleared since), and the revision
    /// its write committed at when the answer named one.
    pub fn answered(
        &mut self,
        seq: u64,
        status: Option<u16>,
        duration: Duration,
        resource_version: Option<u64>,
    ) {
        let latest = self.next_seq;
        // Requests are pushed in seq order, so the log stays sorted by seq.
        if let Ok(index) = self.requests.binary_search_by_key(&seq, |r| r.seq) {
            let record = &mut self.requests[index];
            record.status = status;
            record.duration = Some(duration);
            record.resource_version = resource_version;
            record.answered_after = Some(latest);
        }
    }

    /// The quorum reads of `resource` that could show the object `name`: GETs of it (of its
    /// `status` too) and LISTs of the resource, sent without a `resourceVersion` (answered
    /// from etcd, never from a cache), in arrival order.
    pub fn quorum_reads(&self, resource: &str, name: &str) -> Vec<RecordedRequest> {
        self.requests
            .iter()
            .filter(|r| {
                let q = &r.request;
                let shows = match q.verb {
                    Verb::Get => {
                        q.name == name && (q.subresource.is_empty() || q.subresource == "status")
                    }
                    // A LIST restricted by `metadata.name` names it; an unrestricted one
                    // holds it too.
                    Verb::List => q.name.is_empty() || q.name == name,
                    _ => false,
                };
                q.resource_request
                    && q.resource == resource
                    && shows
                    && !q
                        .query
                        .split('&')
                        .any(|kv| kv.starts_with("resourceVersion="))
            })
            .cloned()
            .collect()
    }

    /// The accepted writes whose answers named one of `revisions`, in arrival order.
    pub fn writes_at(&self, revisions: &[u64]) -> Vec<RecordedRequest> {
        self.requests
            .iter()
            .filter(|r| r.resource_version.is_some_and(|rv| revisions.contains(&rv)))
            .cloned()
            .collect()
    }

    /// Records a firing.
    pub fn fire(&mut self, fired: Fired) {
        self.fired.push(fired);
    }

    /// The requests so far.
    pub fn requests(&self) -> &[RecordedRequest] {
        &self.requests
    }

    /// The firings so far.
    pub fn fired(&self) -> &[Fired] {
        &self.fired
    }

    /// Forgets the requests and firings (sequence numbers go on; rules and counts stay).
    pub fn clear(&mut self) {
        self.requests.clear();
        self.fired.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::faults::{FaultRule, HookPosition};
    use super::super::request::RequestMatch;
    use super::*;

    fn create() -> RequestInfo {
        RequestInfo::parse("POST", "/api/v1/namespaces/ns/configmaps", "")
    }

    #[test]
    fn requests_are_numbered_in_order_and_answers_land_on_theirs() {
        let mut journal = Journal::default();
        let (first, _) = journal.arrive(create(), true);
        let (second, _) = journal.arrive(create(), true);
        assert_eq!((first, second), (1, 2));
        journal.answered(second, Some(201), Duration::from_millis(3), Some(17));
        let (third, _) = journal.arrive(create(), true);
        journal.answered(first, Some(201), Duration::from_millis(5), None);
        let requests = journal.requests();
        assert_eq!(requests[0].status, Some(201));
        assert_eq!(requests[0].answered_after, Some(third));
        assert_eq!(requests[0].resource_version, None);
        assert_eq!(requests[1].status, Some(201));
        assert_eq!(requests[1].duration, Some(Duration::from_millis(3)));
        assert_eq!(requests[1].answered_after, Some(second));
        assert_eq!(requests[2].status, None);
        assert_eq!(requests[2].answered_after, None);
        let at: Vec<u64> = journal.writes_at(&[17, 3]).iter().map(|r| r.seq).collect();
        assert_eq!(at, [second]);
        // Quorum reads of one object: a GET of it or of its status, a LIST of its kind, never
        // a read a cache may answer, nor another object's.
        let reads = [
            (
                "GET",
                "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/a",
                "",
            ),
            (
                "GET",
                "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/a/status",
                "",
            ),
            (
                "GET",
                "/apis/grove.io/v1alpha1/namespaces/ns/podcliques",
                "",
            ),
            (
                "GET",
                "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/a",
                "resourceVersion=0",
            ),
            (
                "GET",
                "/apis/grove.io/v1alpha1/namespaces/ns/podcliques",
                "resourceVersion=0",
            ),
            (
                "GET",
                "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/b",
                "",
            ),
            ("GET", "/api/v1/namespaces/ns/pods/a", ""),
        ];
        let first_read = journal.next_seq + 1;
        for (method, path, query) in reads {
            journal.arrive(RequestInfo::parse(method, path, query), true);
        }
        let quorum: Vec<u64> = journal
            .quorum_reads("podcliques", "a")
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(quorum, [first_read, first_read + 1, first_read + 2]);
    }

    #[test]
    fn clearing_keeps_the_numbering() {
        let mut journal = Journal::default();
        let (first, _) = journal.arrive(create(), true);
        journal.clear();
        journal.answered(first, Some(201), Duration::ZERO, None);
        assert!(journal.requests().is_empty());
        let (next, _) = journal.arrive(create(), true);
        assert_eq!(next, 2);
        assert_eq!(journal.requests().len(), 1);
    }

    #[test]
    fn statuses_fire_on_arrival_and_hooks_do_not() {
        let mut journal = Journal::default();
        journal.rules.set(vec![
            FaultRule::new(
                RequestMatch::any(),
                FaultAction::Status {
                    code: 409,
                    times: Some(1),
                },
            ),
            FaultRule::new(
                RequestMatch::any(),
                FaultAction::Hook {
                    position: HookPosition::Before,
                },
            )
            .nth(2),
        ]);
        let (seq, decision) = journal.arrive(create(), true);
        assert_eq!(decision.applied.len(), 1);
        assert_eq!(journal.fired().len(), 1);
        assert_eq!(journal.fired()[0].seq, seq);
        assert_eq!(journal.requests()[0].faults, decision.applied);
        let (_, decision) = journal.arrive(create(), true);
        assert_eq!(decision.applied[0].rule, 1);
        assert_eq!(journal.fired().len(), 1, "a hook fires when called");
    }

    #[test]
    fn requests_outside_the_rules_are_not_counted() {
        let mut journal = Journal::default();
        journal.rules.set(vec![FaultRule::new(
            RequestMatch::any(),
            FaultAction::Status {
                code: 500,
                times: Some(1),
            },
        )]);
        let (_, skipped) = journal.arrive(create(), false);
        assert!(skipped.terminal.is_none());
        let (_, counted) = journal.arrive(create(), true);
        assert!(counted.terminal.is_some());
    }

    #[test]
    fn a_mark_is_due_once_at_its_nth_match() {
        let mut journal = Journal::default();
        let id = journal.mark(
            RequestMatch::any().resource("configmaps"),
            2,
            HookPosition::After,
        );
        let other = RequestInfo::parse("GET", "/api/v1/namespaces/ns/pods/p", "");
        assert!(journal.due_marks(&other).is_empty());
        assert!(journal.due_marks(&create()).is_empty());
        assert_eq!(journal.due_marks(&create()), [(id, HookPosition::After)]);
        assert!(journal.due_marks(&create()).is_empty());
        journal.mark(RequestMatch::any(), 1, HookPosition::Before);
        journal.clear_marks();
        assert!(journal.due_marks(&create()).is_empty());
    }
}
