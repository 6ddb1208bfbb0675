//! What an implementation cost the apiserver in one case, from the API proxy's request log,
//! and the restraint clause (L2) judged on it: once the case's required state was reached,
//! writes stop within [`RESTRAINT_BOUND`] and stay stopped.
//!
//! The required state is the one the case's last step, an `expect`, waited for: the moment it
//! first held. A case that ends on another step (an action, a release) states no final
//! required state, and L2 is not judged on it. Writes are creates, updates, patches and
//! deletes, Events included; a write the apiserver answered without changing anything counts
//! all the same (the apiserver did the work).

use std::collections::BTreeMap;
use std::time::Duration;

/// L2's bound: writes may go on this long after the required state is reached.
pub const RESTRAINT_BOUND: Duration = Duration::from_secs(30);

/// One request of the implementation, as the cost needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// When it arrived, from the start of the case.
    pub at: Duration,
    /// The apiserver's verb (`get`, `list`, `watch`, `create`, `patch`, ...).
    pub verb: String,
    /// The resource, with its subresource (`pods`, `podcliques/status`).
    pub resource: String,
    /// The object's name (empty for a collection).
    pub object: String,
    /// Whether it is a write (create, update, patch, delete, deletecollection).
    pub write: bool,
}

/// The writes to one object with one verb after the bound, for an L2 finding.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LateWrites {
    /// The verb.
    pub verb: String,
    /// The resource (with its subresource).
    pub resource: String,
    /// The object's name.
    pub object: String,
    /// How many.
    pub count: u64,
    /// The first, in milliseconds after the required state was reached.
    pub first_ms: u64,
    /// The last, likewise.
    pub last_ms: u64,
}

impl std::fmt::Display for LateWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}: {} write(s), {:.1}–{:.1} s after the required state",
            self.verb,
            self.resource,
            if self.object.is_empty() {
                "(collection)"
            } else {
                &self.object
            },
            self.count,
            self.first_ms as f64 / 1000.0,
            self.last_ms as f64 / 1000.0
        )
    }
}

/// What one case cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApiCost {
    /// Requests by `verb resource`, e.g. `patch podcliques/status`.
    pub requests: BTreeMap<String, u64>,
    /// All requests.
    pub total: u64,
    /// The writes among them.
    pub writes: u64,
    /// Writes after the required state was reached (`None`: the case states none).
    pub writes_after_required: Option<u64>,
    /// From the last write to the end of the case, in milliseconds (`None`: no write).
    pub quiet_tail_ms: Option<u64>,
    /// Writes later than [`RESTRAINT_BOUND`] after the required state: each is an L2 finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_writes: Vec<LateWrites>,
}

impl ApiCost {
    /// The cost of `requests` in a case that reached its required state at `required` (from
    /// the case's start) and ended at `ended`.
    pub fn of(requests: &[ApiRequest], required: Option<Duration>, ended: Duration) -> Self {
        let mut cost = ApiCost::default();
        let mut late: BTreeMap<(String, String, String), LateWrites> = BTreeMap::new();
        let mut last_write: Option<Duration> = None;
        let mut after = 0;
        for r in requests {
            cost.total += 1;
            *cost
                .requests
                .entry(format!("{} {}", r.verb, r.resource))
                .or_default() += 1;
            if !r.write {
                continue;
            }
            cost.writes += 1;
            last_write = Some(last_write.map_or(r.at, |l| l.max(r.at)));
            let Some(required) = required else {
                continue;
            };
            let Some(since) = r.at.checked_sub(required) else {
                continue;
            };
            after += 1;
            if since <= RESTRAINT_BOUND {
                continue;
            }
            let ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
            let key = (r.verb.clone(), r.resource.clone(), r.object.clone());
            let entry = late.entry(key).or_insert_with(|| LateWrites {
                verb: r.verb.clone(),
                resource: r.resource.clone(),
                object: r.object.clone(),
                count: 0,
                first_ms: ms,
                last_ms: ms,
            });
            entry.count += 1;
            entry.first_ms = entry.first_ms.min(ms);
            entry.last_ms = entry.last_ms.max(ms);
        }
        cost.writes_after_required = required.map(|_| after);
        cost.quiet_tail_ms = last_write
            .map(|l| u64::try_from(ended.saturating_sub(l).as_millis()).unwrap_or(u64::MAX));
        cost.late_writes = late.into_values().collect();
        cost
    }

    /// The L2 finding, when writes went on past the bound.
    pub fn restraint_finding(&self) -> Option<String> {
        if self.late_writes.is_empty() {
            return None;
        }
        let list: Vec<String> = self.late_writes.iter().map(ToString::to_string).collect();
        Some(format!(
            "L2: the implementation kept writing more than {} s after the required state was reached: {}",
            RESTRAINT_BOUND.as_secs(),
            list.join("; ")
        ))
    }

    /// One line for a report: `412 requests, 37 writes (3 after the required state), quiet
    /// for the last 2.3 s`.
    pub fn summary(&self) -> String {
        let after = match self.writes_after_required {
            Some(n) => format!(" ({n} after the required state)"),
            None => String::new(),
        };
        let tail = match self.quiet_tail_ms {
            Some(ms) => format!(", quiet for the last {:.1} s", ms as f64 / 1000.0),
            None => ", no write".to_owned(),
        };
        format!(
            "{} requests, {} writes{after}{tail}",
            self.total, self.writes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(at_ms: u64, verb: &str, resource: &str, object: &str) -> ApiRequest {
        ApiRequest {
            at: Duration::from_millis(at_ms),
            verb: verb.into(),
            resource: resource.into(),
            object: object.into(),
            write: matches!(verb, "create" | "update" | "patch" | "delete"),
        }
    }

    #[test]
    fn counts_requests_by_verb_and_resource_and_the_writes_after_the_required_state() {
        let log = [
            req(100, "list", "pods", ""),
            req(200, "create", "pods", "a"),
            req(300, "create", "pods", "b"),
            req(5_000, "patch", "podcliques/status", "c"),
        ];
        let cost = ApiCost::of(
            &log,
            Some(Duration::from_millis(250)),
            Duration::from_secs(7),
        );
        assert_eq!(cost.total, 4);
        assert_eq!(cost.writes, 3);
        assert_eq!(cost.requests["create pods"], 2);
        assert_eq!(cost.requests["list pods"], 1);
        assert_eq!(cost.writes_after_required, Some(2));
        assert_eq!(cost.quiet_tail_ms, Some(2_000));
        assert!(cost.restraint_finding().is_none());
        assert_eq!(
            cost.summary(),
            "4 requests, 3 writes (2 after the required state), quiet for the last 2.0 s"
        );
    }

    #[test]
    fn writes_past_the_bound_are_an_l2_finding_naming_them() {
        let mut log = vec![req(0, "get", "podcliques", "c")];
        for k in 0..5 {
            log.push(req(31_000 + k * 200, "patch", "podcliques/status", "c"));
        }
        log.push(req(40_000, "create", "events", ""));
        let cost = ApiCost::of(&log, Some(Duration::ZERO), Duration::from_secs(41));
        let finding = cost.restraint_finding().expect("a finding");
        assert!(
            finding.contains("patch podcliques/status c: 5 write(s), 31.0–31.8 s"),
            "{finding}"
        );
        assert!(
            finding.contains("create events (collection): 1 write(s)"),
            "{finding}"
        );
        // Reads never count against it.
        let reads: Vec<ApiRequest> = (0..50)
            .map(|k| req(35_000 + k, "list", "pods", ""))
            .collect();
        let cost = ApiCost::of(&reads, Some(Duration::ZERO), Duration::from_secs(40));
        assert!(cost.restraint_finding().is_none());
        assert_eq!(cost.quiet_tail_ms, None);
    }

    #[test]
    fn without_a_required_state_nothing_is_judged() {
        let log = [req(60_000, "patch", "pods", "p")];
        let cost = ApiCost::of(&log, None, Duration::from_secs(61));
        assert_eq!(cost.writes_after_required, None);
        assert!(cost.restraint_finding().is_none());
        assert_eq!(cost.writes, 1);
    }
}
