//! Fault rules and the pure decision of which of them apply to a request, plus the
//! Kubernetes `Status` bodies injected answers carry.
//!
//! Each rule counts the requests it matches from the moment it was set, independently of the
//! other rules. A rule is due on the requests numbered `nth ..= nth + times - 1` of its count
//! (a hook only on the `nth`). When several rules are due on one request, every due delay
//! applies (they add up) and the first due `Status` or `Hook` in list order decides what
//! happens after the delay; later due `Status` or `Hook` rules are shadowed: their occurrence
//! is used up without effect.

use std::fmt;
use std::time::Duration;

use super::request::{RequestInfo, RequestMatch};

/// Where a hook pins the request it fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookPosition {
    /// Before the request reaches the apiserver: it never does.
    Before,
    /// After the apiserver answered: the write happened, the client never learns it.
    After,
}

/// What a rule does to the requests it is due on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultAction {
    /// Answer with a Kubernetes `Status` of this code instead of forwarding (a 429 also
    /// carries `Retry-After: 1`).
    Status {
        /// The HTTP status code (100 to 999; anything else answers 500).
        code: u16,
        /// How many matching requests from the nth on; `None` for all of them.
        times: Option<u32>,
    },
    /// Hold the request this long before going on.
    Delay {
        /// The delay.
        #[serde(with = "millis")]
        by: Duration,
        /// How many matching requests from the nth on; `None` for all of them.
        times: Option<u32>,
    },
    /// Hold the request at `position`, run the proxy's hook callback and wait for it, then
    /// drop the connection without an answer. Fires once.
    Hook {
        /// Before forwarding, or after the apiserver's answer arrived.
        position: HookPosition,
    },
}

mod millis {
    pub fn serialize<S: serde::Serializer>(
        by: &std::time::Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_u128(by.as_millis())
    }
}

impl fmt::Display for FaultAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultAction::Status { code, .. } => write!(f, "status {code}"),
            FaultAction::Delay { by, .. } => write!(f, "delay {by:?}"),
            FaultAction::Hook {
                position: HookPosition::Before,
            } => f.write_str("hook before the apiserver"),
            FaultAction::Hook {
                position: HookPosition::After,
            } => f.write_str("hook after the apiserver"),
        }
    }
}

/// A fault: which requests, from which one on, and what happens to them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FaultRule {
    /// The requests the rule counts.
    pub matches: RequestMatch,
    /// The first matching request the action applies to, 1-based (0 is read as 1), counted
    /// from when the rules were set.
    pub nth: u32,
    /// What happens.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule applying `action` from the first request `matches` selects.
    pub fn new(matches: RequestMatch, action: FaultAction) -> FaultRule {
        FaultRule {
            matches,
            nth: 1,
            action,
        }
    }

    /// Starts at the `nth` matching request instead (1-based).
    pub fn nth(mut self, nth: u32) -> FaultRule {
        self.nth = nth;
        self
    }

    /// Whether the rule is due on the `count`th request it matched (1-based).
    fn due(&self, count: u32) -> bool {
        let first = self.nth.max(1);
        let times = match self.action {
            FaultAction::Status { times, .. } | FaultAction::Delay { times, .. } => times,
            FaultAction::Hook { .. } => Some(1),
        };
        count >= first && times.is_none_or(|t| count - first < t)
    }
}

/// A rule's effect on one request, as the request log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AppliedFault {
    /// The rule's index in the rule list in force at the time.
    pub rule: usize,
    /// What it did.
    pub action: FaultAction,
}

/// A rule that fired: what it did, and to which request. Hooks fire when their callback is
/// called; statuses and delays when the request arrives.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fired {
    /// The rule's index in the rule list in force at the time.
    pub rule: usize,
    /// What it did.
    pub action: FaultAction,
    /// The request's sequence number in the request log.
    pub seq: u64,
    /// The request.
    pub request: RequestInfo,
    /// For an `After` hook, the status the apiserver answered (and the client never saw);
    /// `None` otherwise, or when the apiserver could not be reached.
    pub upstream_status: Option<u16>,
}

/// `PATCH podcliques/status job-0-worker in ns (request #37)`.
impl fmt::Display for Fired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (request #{})", self.request, self.seq)
    }
}

/// What ends a request instead of a plain forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Terminal {
    /// Answer with this status code.
    Status { rule: usize, code: u16 },
    /// Hook at this position.
    Hook { rule: usize, position: HookPosition },
}

/// What to do with one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Sum of the due delays.
    pub delay: Duration,
    /// The first due status or hook.
    pub terminal: Option<Terminal>,
    /// Every rule with an effect, in rule order.
    pub applied: Vec<AppliedFault>,
}

/// The rules in force and how many requests each has matched.
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    rules: Vec<(FaultRule, u32)>,
}

impl RuleSet {
    /// Replaces the rules; counts start again from zero.
    pub fn set(&mut self, rules: Vec<FaultRule>) {
        self.rules = rules.into_iter().map(|r| (r, 0)).collect();
    }

    /// The rules in force.
    pub fn rules(&self) -> Vec<FaultRule> {
        self.rules.iter().map(|(r, _)| r.clone()).collect()
    }

    /// Counts `request` against every rule and says what applies to it.
    pub fn decide(&mut self, request: &RequestInfo) -> Decision {
        let mut decision = Decision::default();
        for (index, (rule, count)) in self.rules.iter_mut().enumerate() {
            if !rule.matches.matches(request) {
                continue;
            }
            *count = count.saturating_add(1);
            if !rule.due(*count) {
                continue;
            }
            let terminal = match rule.action {
                FaultAction::Delay { by, .. } => {
                    decision.delay += by;
                    None
                }
                FaultAction::Status { code, .. } => Some(Terminal::Status { rule: index, code }),
                FaultAction::Hook { position } => Some(Terminal::Hook {
                    rule: index,
                    position,
                }),
            };
            match (terminal, decision.terminal) {
                // Shadowed by an earlier terminal rule: used up, no effect.
                (Some(_), Some(_)) => continue,
                (Some(t), None) => decision.terminal = Some(t),
                (None, _) => {}
            }
            decision.applied.push(AppliedFault {
                rule: index,
                action: rule.action.clone(),
            });
        }
        decision
    }
}

/// The apiserver's `reason` for a status code (`metav1.StatusReason`), empty when it has none.
pub fn status_reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

/// A `Status` object as the apiserver sends it for a failed request on `request`.
pub fn status_body(code: u16, request: &RequestInfo, message: &str) -> serde_json::Value {
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": status_reason(code),
        "code": code,
    });
    if request.resource_request {
        // As the apiserver fills it: `kind` holds the resource.
        let mut details = serde_json::json!({"group": request.group, "kind": request.resource});
        if !request.name.is_empty() {
            details["name"] = request.name.clone().into();
        }
        if code == 429 {
            details["retryAfterSeconds"] = 1.into();
        }
        body["details"] = details;
    }
    body
}

#[cfg(test)]
mod tests {
    use super::super::request::Verb;
    use super::*;

    fn patch(name: &str) -> RequestInfo {
        RequestInfo::parse(
            "PATCH",
            &format!("/apis/grove.io/v1alpha1/namespaces/ns/podcliques/{name}/status"),
            "",
        )
    }

    fn get(name: &str) -> RequestInfo {
        RequestInfo::parse("GET", &format!("/api/v1/namespaces/ns/pods/{name}"), "")
    }

    fn status(code: u16, times: Option<u32>) -> FaultAction {
        FaultAction::Status { code, times }
    }

    /// Which requests (1-based) of `n` identical ones each rule is applied to.
    fn applied_on(rules: Vec<FaultRule>, request: &RequestInfo, n: usize) -> Vec<Vec<usize>> {
        let mut set = RuleSet::default();
        set.set(rules);
        (1..=n)
            .map(|_| set.decide(request).applied.iter().map(|a| a.rule).collect())
            .collect()
    }

    #[test]
    fn a_rule_applies_from_the_nth_match_for_times_matches() {
        let rule = FaultRule::new(RequestMatch::any(), status(409, Some(2))).nth(3);
        let hits = applied_on(vec![rule], &patch("a"), 6);
        let on: Vec<usize> = (1..=6).filter(|i| !hits[i - 1].is_empty()).collect();
        assert_eq!(on, [3, 4]);
    }

    #[test]
    fn without_times_a_rule_applies_to_every_match_from_the_nth() {
        let rule = FaultRule::new(RequestMatch::any(), status(500, None)).nth(2);
        let hits = applied_on(vec![rule], &patch("a"), 5);
        let on: Vec<usize> = (1..=5).filter(|i| !hits[i - 1].is_empty()).collect();
        assert_eq!(on, [2, 3, 4, 5]);
    }

    #[test]
    fn nth_zero_is_the_first() {
        let rule = FaultRule::new(RequestMatch::any(), status(500, Some(1))).nth(0);
        let hits = applied_on(vec![rule], &patch("a"), 2);
        assert_eq!(hits, [vec![0], vec![]]);
    }

    #[test]
    fn zero_times_never_applies() {
        let rule = FaultRule::new(RequestMatch::any(), status(500, Some(0)));
        assert_eq!(
            applied_on(vec![rule], &patch("a"), 3),
            vec![Vec::<usize>::new(); 3]
        );
    }

    #[test]
    fn a_hook_fires_once_at_the_nth_match() {
        let rule = FaultRule::new(
            RequestMatch::any(),
            FaultAction::Hook {
                position: HookPosition::After,
            },
        )
        .nth(2);
        let mut set = RuleSet::default();
        set.set(vec![rule]);
        let terminals: Vec<Option<Terminal>> =
            (0..4).map(|_| set.decide(&patch("a")).terminal).collect();
        assert_eq!(
            terminals,
            [
                None,
                Some(Terminal::Hook {
                    rule: 0,
                    position: HookPosition::After
                }),
                None,
                None
            ]
        );
    }

    #[test]
    fn only_matching_requests_count() {
        let matches = RequestMatch::any()
            .verb(Verb::Patch)
            .resource("podcliques")
            .subresource("status")
            .name("job-*-worker");
        let rule = FaultRule::new(matches, status(409, Some(1))).nth(2);
        let mut set = RuleSet::default();
        set.set(vec![rule]);
        assert_eq!(set.decide(&patch("job-0-worker")).terminal, None);
        assert_eq!(set.decide(&get("job-0-worker")).terminal, None);
        assert_eq!(set.decide(&patch("job-0-leader")).terminal, None);
        assert_eq!(
            set.decide(&patch("job-1-worker")).terminal,
            Some(Terminal::Status { rule: 0, code: 409 })
        );
        assert_eq!(set.decide(&patch("job-2-worker")).terminal, None);
    }

    #[test]
    fn setting_rules_restarts_the_counts() {
        let rule = FaultRule::new(RequestMatch::any(), status(409, Some(1))).nth(2);
        let mut set = RuleSet::default();
        set.set(vec![rule.clone()]);
        assert_eq!(set.decide(&patch("a")).terminal, None);
        set.set(vec![rule]);
        assert_eq!(set.decide(&patch("a")).terminal, None);
        assert!(set.decide(&patch("a")).terminal.is_some());
        assert_eq!(set.rules().len(), 1);
    }

    #[test]
    fn delays_add_up_and_the_first_terminal_rule_wins() {
        let ms = Duration::from_millis;
        let rules = vec![
            FaultRule::new(
                RequestMatch::any(),
                FaultAction::Delay {
                    by: ms(10),
                    times: None,
                },
            ),
            FaultRule::new(RequestMatch::any(), status(409, Some(1))),
            FaultRule::new(
                RequestMatch::any(),
                FaultAction::Hook {
                    position: HookPosition::Before,
                },
            ),
            FaultRule::new(
                RequestMatch::any(),
                FaultAction::Delay {
                    by: ms(5),
                    times: Some(1),
                },
            ),
        ];
        let mut set = RuleSet::default();
        set.set(rules);
        let first = set.decide(&patch("a"));
        assert_eq!(first.delay, ms(15));
        assert_eq!(
            first.terminal,
            Some(Terminal::Status { rule: 1, code: 409 })
        );
        let applied: Vec<usize> = first.applied.iter().map(|a| a.rule).collect();
        // The hook was due too, but shadowed: it is used up.
        assert_eq!(applied, [0, 1, 3]);
        let second = set.decide(&patch("a"));
        assert_eq!(second.delay, ms(10));
        assert_eq!(second.terminal, None);
    }

    #[test]
    fn status_bodies_look_like_the_apiservers() {
        let body = status_body(409, &patch("job-0-worker"), "injected");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["status"], "Failure");
        assert_eq!(body["reason"], "Conflict");
        assert_eq!(body["code"], 409);
        assert_eq!(body["message"], "injected");
        assert_eq!(body["details"]["name"], "job-0-worker");
        assert_eq!(body["details"]["group"], "grove.io");
        assert_eq!(body["details"]["kind"], "podcliques");
        assert!(body["details"].get("retryAfterSeconds").is_none());
        let throttled = status_body(429, &patch("a"), "slow down");
        assert_eq!(throttled["reason"], "TooManyRequests");
        assert_eq!(throttled["details"]["retryAfterSeconds"], 1);
        let status: kube::core::Status = serde_json::from_value(throttled).unwrap();
        assert_eq!(status.code, 429);
        assert_eq!(status_reason(500), "InternalError");
        assert_eq!(status_reason(418), "");
    }

    #[test]
    fn fired_rules_say_where_they_landed() {
        let fired = Fired {
            rule: 0,
            action: FaultAction::Hook {
                position: HookPosition::Before,
            },
            seq: 37,
            request: patch("job-0-worker"),
            upstream_status: None,
        };
        assert_eq!(
            fired.to_string(),
            "PATCH podcliques/status job-0-worker in ns (request #37)"
        );
        assert_eq!(fired.action.to_string(), "hook before the apiserver");
    }
}
