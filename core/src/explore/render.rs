//! A scenario written as an ordinary case file and fixture: the case language is what runs,
//! so a generated scenario, run by `explore`, and its file, run by `run`, are the same case.
//! After each step the case expects what every state the model allows agrees on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::generate::{Act, Body, Scenario, Step, predictions, settled};
use crate::model::{Child, Cond, EventReason, ObjectKind, PodState, Shape, World};

/// How long each step may take to reach the predicted state.
const WITHIN: &str = "30s";
/// How long the last predicted state must then hold (nothing else happens: C4, R3, E6).
const HOLD: &str = "1s";

/// The fixture container: the fixture container contract of the README.
const CONTAINER: &str = r#"            terminationGracePeriodSeconds: 2
            containers:
              - name: main
                image: busybox
                imagePullPolicy: IfNotPresent
                command: ["sh", "-c", "mkfifo /tmp/exit-code && mkdir -p /tmp/www && echo ok > /tmp/www/ready && httpd -p 8080 -h /tmp/www && read code < /tmp/exit-code; exit $code"]
                readinessProbe:
                  httpGet: {path: /ready, port: 8080}
                  periodSeconds: 1
"#;

/// The fixture (a PodCliqueSet manifest) of `scenario`, named like the case.
pub fn fixture(scenario: &Scenario) -> String {
    let s = &scenario.shape;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# The job of `grove-conformance explore --seed {} --runs {}` (scenario {}).",
        scenario.seed,
        scenario.index + 1,
        scenario.index
    );
    out.push_str("apiVersion: grove.io/v1alpha1\nkind: PodCliqueSet\nmetadata:\n");
    let _ = writeln!(out, "  name: {}", s.name);
    out.push_str("spec:\n");
    let _ = writeln!(out, "  replicas: {}", s.replicas);
    if let Some(c) = &s.completion {
        let _ = writeln!(out, "  policy:\n    completion: {}", completion(c));
    }
    // A regular clique's MinAvailableBreached gang termination (R5) is outside what is
    // generated: its terminationDelay never runs out within a scenario.
    out.push_str("  template:\n    terminationDelay: 1h\n    cliques:\n");
    for c in &s.cliques {
        let _ = writeln!(out, "      - name: {}\n        spec:", c.name);
        let _ = writeln!(out, "          roleName: {}", c.name);
        let _ = writeln!(out, "          replicas: {}", c.pods);
        if let Some(p) = &c.completion {
            // On a clique only `failure` is valid (V1); a breach may put `success` there.
            let _ = writeln!(
                out,
                "          policy:\n            completion: {}",
                completion(p)
            );
        }
        if c.autoscaling {
            out.push_str("          autoScalingConfig: {minReplicas: 1, maxReplicas: 4}\n");
        }
        out.push_str("          podSpec:\n");
        if let Some(r) = c.restart_policy {
            let _ = writeln!(out, "            restartPolicy: {}", r.as_str());
        }
        out.push_str(CONTAINER);
    }
    if !s.groups.is_empty() {
        out.push_str("    podCliqueScalingGroups:\n");
        for g in &s.groups {
            let _ = writeln!(out, "      - name: {}", g.name);
            let _ = writeln!(out, "        cliqueNames: {}", names(&g.members));
            let _ = writeln!(out, "        replicas: {}", g.replicas);
            out.push_str("        minAvailable: 1\n");
            if let Some(c) = &g.completion {
                let _ = writeln!(
                    out,
                    "        policy:\n          completion: {}",
                    completion(c)
                );
            }
            if g.scale_config {
                out.push_str("        scaleConfig: {minReplicas: 1, maxReplicas: 3}\n");
            }
        }
    }
    out
}

fn completion(c: &crate::model::Completion) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &c.target_names {
        parts.push(format!("success: {{targetNames: {}}}", names(t)));
    }
    if let Some(m) = c.max_restarts {
        parts.push(format!("failure: {{maxRestarts: {m}}}"));
    }
    format!("{{{}}}", parts.join(", "))
}

fn names(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// The case file of `scenario`; its fixture has the case's name.
pub fn case(scenario: &Scenario) -> Result<String, String> {
    case_named(scenario, &scenario.name())
}

/// The case file of `scenario` under another name (and fixture name).
pub fn case_named(scenario: &Scenario, name: &str) -> Result<String, String> {
    let name = name.to_owned();
    let mut out = String::new();
    let _ = writeln!(out, "name: {name}");
    let summary = summary(scenario);
    let _ = writeln!(out, "summary: {}", yaml_string(&summary));
    match &scenario.body {
        Body::Rejected { clause, field } => {
            let _ = writeln!(out, "clauses: [{clause}]");
            out.push_str("profile: core\n");
            let _ = writeln!(out, "fixture: {name}");
            out.push_str("revisions: [grep-0285-review]\nsteps:\n");
            let _ = writeln!(out, "  - reject: {{apply: {name}, field: \"{field}\"}}");
            out.push_str("  - expect:\n      for: 1s\n      objects:\n");
            let _ = writeln!(
                out,
                "        - {{kind: PodCliqueSet, name: {}, absent: true}}",
                scenario.shape.name
            );
        }
        Body::Steps(steps) => {
            let worlds = predictions(&scenario.shape, steps)?;
            let crashes = steps.iter().any(|s| matches!(s, Step::Crash));
            let clauses = clauses(&scenario.shape, &worlds, crashes);
            let _ = writeln!(out, "clauses: [{}]", clauses.join(", "));
            out.push_str("profile: core\n");
            let _ = writeln!(out, "fixture: {name}");
            out.push_str("revisions: [grep-0285-review]\n");
            let _ = writeln!(out, "timeout: {}s", 90 + 40 * steps.len());
            out.push_str("steps:\n");
            let _ = writeln!(out, "  - apply: {name}");
            let total = scenario.shape.total_pods();
            out.push_str("  - expect:\n      within: 60s\n      pods:\n");
            let _ = writeln!(
                out,
                "        - {{pcs: {}, phase: Running, count: {total}}}",
                scenario.shape.name
            );
            let mut expect = Expect::new(&scenario.shape, &worlds[0], crashes);
            out.push_str(&expect.render(WITHIN, true, &[], &[]));
            for (k, step) in steps.iter().enumerate() {
                let before = &worlds[k];
                let after = &worlds[k + 1];
                match step {
                    Step::Crash => {
                        out.push_str("  - controller: crash\n");
                    }
                    Step::Batch { actions, together } => {
                        let (mut recreated, unchanged) = remembered(k, before, after);
                        for (label, kind, object) in recreated.iter().chain(&unchanged) {
                            let _ = writeln!(
                                out,
                                "  - remember: {{as: {label}, kind: {kind}, name: {object}}}"
                            );
                        }
                        // B4: a regular pod that goes is replaced with the same index; its new
                        // UID is what tells the replacement happened.
                        let state = settled(before).ok_or("diverged before a step")?;
                        for a in actions {
                            let replaced = !state.cliques[&a.clique].aware
                                && !matches!(a.act, Act::Exit(_))
                                && after.iter().all(|w| {
                                    w.incarnations[&a.clique]
                                        == before_incarnation(before, &a.clique)
                                        && w.cliques.contains_key(&a.clique)
                                });
                            if replaced {
                                let label = format!("s{k}-pod-{}-{}", a.clique, a.index);
                                let _ = writeln!(
                                    out,
                                    "  - remember: {{as: {label}, pod: {}/{}}}",
                                    a.clique, a.index
                                );
                                recreated.push((label, "Pod", String::new()));
                            }
                        }
                        if *together {
                            out.push_str("  - controller: pause\n");
                        }
                        let before_state = settled(before).ok_or("diverged before a step")?;
                        for a in actions {
                            out.push_str(&action(&a.clique, a.index, a.act));
                        }
                        if *together {
                            // The kubelet's side of every action, seen while paused.
                            let mut seen = String::new();
                            for a in actions {
                                let aware = before_state.cliques[&a.clique].aware;
                                let line = match a.act {
                                    Act::Exit(_) if !aware => continue,
                                    Act::Exit(0) => "phase: Succeeded, count: 1",
                                    Act::Exit(_) => "phase: Failed, count: 1",
                                    _ => "count: 0",
                                };
                                let _ = writeln!(
                                    seen,
                                    "        - {{pod: {}/{}, {line}}}",
                                    a.clique, a.index
                                );
                            }
                            if !seen.is_empty() {
                                out.push_str("  - expect:\n      within: 20s\n      pods:\n");
                                out.push_str(&seen);
                            }
                            out.push_str("  - controller: resume\n");
                        }
                        let labels = |v: &[(String, &str, String)]| {
                            v.iter().map(|(l, _, _)| l.clone()).collect::<Vec<_>>()
                        };
                        expect = Expect::new(&scenario.shape, after, crashes);
                        out.push_str(&expect.render(
                            WITHIN,
                            true,
                            &labels(&recreated),
                            &labels(&unchanged),
                        ));
                        continue;
                    }
                }
                expect = Expect::new(&scenario.shape, after, crashes);
                out.push_str(&expect.render(WITHIN, true, &[], &[]));
            }
            out.push_str(&expect.render(HOLD, false, &[], &[]));
        }
    }
    Ok(out)
}

fn summary(scenario: &Scenario) -> String {
    let mut s = match &scenario.body {
        Body::Rejected { clause, .. } => format!(
            "A generated PodCliqueSet that breaks {clause} is rejected and nothing is created"
        ),
        Body::Steps(steps) => format!(
            "A generated job ({} replica(s), {} clique(s), {} scaling group(s)) under {} step(s) reaches the states the spec model allows",
            scenario.shape.replicas,
            scenario.shape.cliques.len(),
            scenario.shape.groups.len(),
            steps.len()
        ),
    };
    let _ = write!(
        s,
        " (explore --seed {} scenario {}",
        scenario.seed, scenario.index
    );
    if !scenario.shrink_path.is_empty() {
        let _ = write!(s, "; shrunk: {}", scenario.shrink_path.join(", "));
    }
    s.push_str(").");
    s
}

fn yaml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn action(clique: &str, index: u32, act: Act) -> String {
    let pod = format!("pod: {clique}/{index}");
    let tp = |t: bool| if t { "" } else { ", terminal-phase: false" };
    match act {
        Act::Exit(code) => format!("  - exit: {{{pod}, code: {code}}}\n"),
        Act::Evict { terminal_phase } => format!("  - evict: {{{pod}{}}}\n", tp(terminal_phase)),
        Act::Preempt { terminal_phase } => {
            format!("  - preempt: {{{pod}{}}}\n", tp(terminal_phase))
        }
        Act::Delete { terminal_phase } => {
            format!("  - delete: {{{pod}{}}}\n", tp(terminal_phase))
        }
        Act::ForceDelete => format!("  - force-delete: {{{pod}}}\n"),
        Act::LoseNode { fail_first } => format!(
            "  - lose-node: {{{pod}, mode: {}, alone: true}}\n",
            if fail_first { "fail" } else { "vanish" }
        ),
    }
}

/// Objects every allowed state recreates in a step (remembered before it, expected recreated
/// after), and the PCSGs every one keeps (expected unchanged).
#[allow(clippy::type_complexity)]
fn remembered(
    step: usize,
    before: &BTreeSet<World>,
    after: &BTreeSet<World>,
) -> (
    Vec<(String, &'static str, String)>,
    Vec<(String, &'static str, String)>,
) {
    let Some(b) = settled(before) else {
        return (Vec::new(), Vec::new());
    };
    let mut recreated = Vec::new();
    let mut unchanged = Vec::new();
    let objects = b
        .cliques
        .keys()
        .map(|n| ("PodClique", n))
        .chain(b.groups.keys().map(|n| ("PodCliqueScalingGroup", n)));
    for (kind, name) in objects {
        let present_after = |w: &World| {
            if kind == "PodClique" {
                w.cliques.contains_key(name)
            } else {
                w.groups.contains_key(name)
            }
        };
        if !after.iter().all(present_after) {
            continue;
        }
        let was = b.incarnations[name];
        if after.iter().all(|w| w.incarnations[name] > was) {
            recreated.push((label(step, name), kind, name.clone()));
        } else if kind == "PodCliqueScalingGroup"
            && after.iter().all(|w| w.incarnations[name] == was)
        {
            unchanged.push((label(step, name), kind, name.clone()));
        }
    }
    (recreated, unchanged)
}

fn before_incarnation(before: &BTreeSet<World>, name: &str) -> u32 {
    before
        .iter()
        .next()
        .and_then(|w| w.incarnations.get(name).copied())
        .unwrap_or(0)
}

/// A label unique within a case: the step's number and the object's name.
fn label(step: usize, name: &str) -> String {
    format!("s{step}-{name}")
}

/// Every PCSG and PodClique of the shape, with whether it is completion-aware (B1).
fn objects(shape: &Shape) -> Vec<(&'static str, String, bool)> {
    let mut out = Vec::new();
    for i in 0..shape.replicas {
        for child in shape.children() {
            match child {
                Child::Clique(c) => {
                    out.push(("PodClique", shape.standalone_name(i, &c.name), c.aware()));
                }
                Child::Group(g) => {
                    out.push((
                        "PodCliqueScalingGroup",
                        shape.group_name(i, &g.name),
                        shape.group_aware(g),
                    ));
                    for j in 0..g.replicas {
                        for m in &g.members {
                            let aware = shape.clique(m).is_some_and(|c| c.aware());
                            out.push(("PodClique", shape.member_name(i, &g.name, j, m), aware));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The facts every allowed state agrees on, as one `expect` step.
struct Expect {
    lines: Vec<String>,
    pods: Vec<String>,
    events: Vec<String>,
}

impl Expect {
    fn new(shape: &Shape, worlds: &BTreeSet<World>, crashes: bool) -> Self {
        let mut lines = Vec::new();
        let mut pods = Vec::new();
        let all = |f: &dyn Fn(&World) -> bool| worlds.iter().all(f);
        // The PodCliqueSet.
        let set_conds: BTreeSet<Cond> = worlds.iter().map(|w| w.set).collect();
        let counts: BTreeSet<Vec<u32>> = worlds
            .iter()
            .map(|w| w.set_replicas.iter().map(|r| r.restarts).collect())
            .collect();
        lines.push(object(
            "PodCliqueSet",
            &shape.name,
            &conditions(&set_conds, true, shape.aware()),
            one(&counts),
        ));
        // Every PCSG and PodClique of the shape (all exist from the start).
        let objects = objects(shape);
        let names: BTreeSet<(&'static str, String)> =
            objects.iter().map(|(k, n, _)| (*k, n.clone())).collect();
        for (kind, name) in &names {
            if worlds.iter().any(|w| w.uncertain.contains(name)) {
                continue;
            }
            let exists = |w: &World| {
                if *kind == "PodClique" {
                    w.cliques.contains_key(name)
                } else {
                    w.groups.contains_key(name)
                }
            };
            if all(&|w| !exists(w)) {
                lines.push(format!(
                    "        - {{kind: {kind}, name: {name}, absent: true}}"
                ));
                if *kind == "PodClique" {
                    pods.push(format!("        - {{clique: {name}, count: 0}}"));
                }
                continue;
            }
            if !all(&exists) {
                continue;
            }
            if *kind == "PodCliqueScalingGroup" {
                let conds: BTreeSet<Cond> = worlds.iter().map(|w| w.groups[name].cond).collect();
                let counts: BTreeSet<Vec<u32>> = worlds
                    .iter()
                    .map(|w| w.groups[name].replicas.iter().map(|r| r.restarts).collect())
                    .collect();
                let template = &worlds.iter().next().unwrap().groups[name].template;
                let aware = shape
                    .groups
                    .iter()
                    .find(|g| &g.name == template)
                    .is_some_and(|g| shape.group_aware(g));
                lines.push(object(
                    kind,
                    name,
                    &conditions(&conds, true, aware),
                    one(&counts),
                ));
            } else {
                let conds: BTreeSet<Cond> = worlds.iter().map(|w| w.cliques[name].cond).collect();
                let aware = worlds.iter().next().unwrap().cliques[name].aware;
                let mut c = conditions(&conds, false, aware);
                if aware {
                    // E4: never MinAvailableBreached on a completion-aware PodClique.
                    c.push("MinAvailableBreached: absent".to_owned());
                }
                lines.push(object(kind, name, &c, None));
                let pod_sets: BTreeSet<&BTreeMap<u32, PodState>> =
                    worlds.iter().map(|w| &w.cliques[name].pods).collect();
                if let [p] = pod_sets.into_iter().collect::<Vec<_>>().as_slice() {
                    let n = |s: PodState| p.values().filter(|v| **v == s).count();
                    pods.push(format!(
                        "        - {{clique: {name}, active: {}}}",
                        n(PodState::Active)
                    ));
                    // Active pods settle Running (bound and started) before the next action.
                    pods.push(format!(
                        "        - {{clique: {name}, phase: Running, count: {}}}",
                        n(PodState::Active)
                    ));
                    pods.push(format!(
                        "        - {{clique: {name}, phase: Succeeded, count: {}}}",
                        n(PodState::Succeeded)
                    ));
                    pods.push(format!(
                        "        - {{clique: {name}, phase: Failed, count: {}}}",
                        n(PodState::Failed)
                    ));
                    pods.push(format!("        - {{clique: {name}, count: {}}}", p.len()));
                    // Every pod of a settled state is the current PodClique's (C5: a restart
                    // deletes the old attempt's pods with its cliques): a pod of the clique
                    // this one replaced, still there, must not stand in for it (B3).
                    pods.push(format!("        - {{clique: {name}, owned: {}}}", p.len()));
                }
            }
        }
        // Events: on every aware object the shape has ever had.
        let mut events = Vec::new();
        let mut keys: BTreeSet<(EventReason, ObjectKind, String)> = BTreeSet::new();
        if shape.aware() {
            for r in [
                EventReason::JobCompleted,
                EventReason::JobFailed,
                EventReason::GangRestartTriggered,
                EventReason::RestartBudgetExhausted,
            ] {
                keys.insert((r, ObjectKind::Set, shape.name.clone()));
            }
        }
        for (kind, name) in &names {
            let aware_obj = objects
                .iter()
                .any(|(k, n, aware)| k == kind && n == name && *aware);
            if !aware_obj {
                continue;
            }
            let reasons: &[EventReason] = if *kind == "PodClique" {
                &[EventReason::JobCompleted, EventReason::JobFailed]
            } else {
                &[
                    EventReason::JobCompleted,
                    EventReason::JobFailed,
                    EventReason::GangRestartTriggered,
                    EventReason::RestartBudgetExhausted,
                ]
            };
            let k = if *kind == "PodClique" {
                ObjectKind::Clique
            } else {
                ObjectKind::Group
            };
            for r in reasons {
                keys.insert((*r, k, name.clone()));
            }
        }
        for (reason, kind, name) in keys {
            let n: BTreeSet<u32> = worlds
                .iter()
                .map(|w| {
                    w.events
                        .get(&(reason, kind, name.clone()))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            let lo = *n.iter().next().unwrap();
            let exact = n.len() == 1;
            let reason_s = match reason {
                EventReason::JobCompleted => "JobCompleted",
                EventReason::JobFailed => "JobFailed",
                EventReason::GangRestartTriggered => "GangRestartTriggered",
                EventReason::RestartBudgetExhausted => "RestartBudgetExhausted",
            };
            let kind_s = match kind {
                ObjectKind::Clique => "PodClique",
                ObjectKind::Group => "PodCliqueScalingGroup",
                ObjectKind::Set => "PodCliqueSet",
            };
            // EV1/EV2 say an event is owed when an object becomes terminal, not that it is
            // sent once; EV3/EV4 are one per restart and per exhausted budget, except that a
            // crash may lose or repeat an event the spec does not make crash-safe.
            let restart_event = matches!(
                reason,
                EventReason::GangRestartTriggered | EventReason::RestartBudgetExhausted
            );
            let count = if exact && lo == 0 {
                Some(0)
            } else if exact && restart_event && !crashes {
                Some(lo)
            } else if lo >= 1 {
                None
            } else {
                continue;
            };
            events.push(match count {
                Some(c) => format!(
                    "        - {{reason: {reason_s}, kind: {kind_s}, name: {name}, count: {c}}}"
                ),
                None => format!("        - {{reason: {reason_s}, kind: {kind_s}, name: {name}}}"),
            });
        }
        Expect {
            lines,
            pods,
            events,
        }
    }

    fn render(
        &self,
        time: &str,
        within: bool,
        recreated: &[String],
        unchanged: &[String],
    ) -> String {
        let mut out = String::from("  - expect:\n");
        let _ = writeln!(
            out,
            "      {}: {time}",
            if within { "within" } else { "for" }
        );
        out.push_str("      objects:\n");
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        if !self.pods.is_empty() {
            out.push_str("      pods:\n");
            for l in &self.pods {
                out.push_str(l);
                out.push('\n');
            }
        }
        if !recreated.is_empty() {
            let _ = writeln!(out, "      recreated: [{}]", recreated.join(", "));
        }
        if !unchanged.is_empty() {
            let _ = writeln!(out, "      unchanged: [{}]", unchanged.join(", "));
        }
        if !self.events.is_empty() {
            out.push_str("      events:\n");
            for l in &self.events {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

fn one<T: Clone>(set: &BTreeSet<T>) -> Option<T> {
    (set.len() == 1).then(|| set.iter().next().unwrap().clone())
}

/// The condition expectations for an object whose allowed terminal conditions are `conds`.
fn conditions(conds: &BTreeSet<Cond>, parent: bool, aware: bool) -> Vec<String> {
    if !aware && !parent {
        // E5: a regular PodClique never carries Completed or Failed.
        return vec!["Completed: absent".into(), "Failed: absent".into()];
    }
    let failed_reason = if parent {
        "{status: \"True\", reason: RestartBudgetExhausted}"
    } else {
        "\"True\""
    };
    match one(conds) {
        Some(Cond::Completed) => vec![
            "Completed: {status: \"True\", reason: CompletionCriteriaMet}".into(),
            "Failed: not-true".into(),
        ],
        Some(Cond::Failed) => vec![
            format!("Failed: {failed_reason}"),
            "Completed: not-true".into(),
        ],
        _ => {
            let mut v = Vec::new();
            if !conds.contains(&Cond::Completed) {
                v.push("Completed: not-true".into());
            }
            if !conds.contains(&Cond::Failed) {
                v.push("Failed: not-true".into());
            }
            v
        }
    }
}

fn object(kind: &str, name: &str, conditions: &[String], counts: Option<Vec<u32>>) -> String {
    let mut s = format!("        - {{kind: {kind}, name: {name}");
    if !conditions.is_empty() {
        let _ = write!(s, ", conditions: {{{}}}", conditions.join(", "));
    }
    if let Some(c) = counts
        && kind != "PodClique"
    {
        let c: Vec<String> = c.iter().map(u32::to_string).collect();
        let _ = write!(s, ", status: {{replicaRestartCounts: [{}]}}", c.join(", "));
    }
    s.push('}');
    s
}

/// The clauses a scenario's expectations check.
fn clauses(shape: &Shape, worlds: &[BTreeSet<World>], crashes: bool) -> Vec<&'static str> {
    let mut c: BTreeSet<&'static str> = BTreeSet::from(["B1", "B5", "E6"]);
    let last = worlds.last().expect("at least the initial state");
    if shape.cliques.iter().any(|c| c.aware()) {
        c.insert("E4");
    }
    if shape.cliques.iter().any(|c| !c.aware()) {
        c.extend(["E5", "E12"]);
    }
    for w in last {
        for ((reason, kind, _), n) in &w.events {
            if *n == 0 {
                continue;
            }
            match (reason, kind) {
                (EventReason::JobCompleted, ObjectKind::Clique) => {
                    c.extend(["E1", "EV1", "C1"]);
                }
                (EventReason::JobFailed, ObjectKind::Clique) => {
                    c.extend(["E2", "EV2", "C1"]);
                }
                (EventReason::JobCompleted, _) => {
                    c.extend(["E7", "E11", "EV1"]);
                }
                (EventReason::JobFailed, _) => {
                    c.extend(["E9", "E11", "EV2"]);
                }
                (EventReason::GangRestartTriggered, ObjectKind::Group) => {
                    c.extend(["E8", "R1", "R3", "EV3", "C5"]);
                }
                (EventReason::GangRestartTriggered, _) => {
                    c.extend(["E8", "R2", "R3", "EV3", "C5"]);
                }
                (EventReason::RestartBudgetExhausted, _) => {
                    c.extend(["E9", "EV4"]);
                }
            }
        }
        if !w.groups.is_empty() && w.set.terminal() {
            c.insert("E13");
        }
    }
    if crashes {
        c.insert("O3");
    }
    c.into_iter().collect()
}
