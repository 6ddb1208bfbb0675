//! Every step kind of the case language, defined once: its keyword, how it is written, what it
//! does and what it needs of a run. The parser takes its keywords from here, the runner its
//! requirements, the fuzzer its words, and the book its table of steps ([`steps_table`]).

use super::model::StepKind;
use super::parse::Parser;
use super::yaml::Node;

/// How a step of one kind is read: from the parser, the keyword it is written with, its body
/// and the body's path, to the step, or `None` with the problems reported.
pub(in crate::catalog) type ParseStep = fn(&mut Parser<'_>, &str, &Node, &str) -> Option<StepKind>;

/// What a step kind needs of a run, beyond a cluster and an implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// The implementation reaches the apiserver through the harness's API proxy (its
    /// watches are held back or its requests counted there).
    pub api_proxy: bool,
    /// The harness may pause, resume, crash and restart the implementation.
    pub controllable: bool,
    /// It changes what the implementation as a whole does or sees, so an implementation that
    /// serves every case at once gives the case the cluster to itself.
    pub whole_implementation: bool,
}

/// One step kind.
#[derive(Debug, Clone, Copy)]
pub struct StepDefinition {
    /// The key a step of this kind is written with.
    pub keyword: &'static str,
    /// How it is written (the table's first column).
    pub syntax: &'static str,
    /// What it does (the table's second column).
    pub does: &'static str,
    /// What it needs of a run.
    pub needs: Needs,
    /// How it is read.
    pub(in crate::catalog) parse: ParseStep,
}

const NOTHING: Needs = Needs {
    api_proxy: false,
    controllable: false,
    whole_implementation: false,
};

/// The pod actions share one reader, which the keyword steers.
const POD_STEP: ParseStep = |p, keyword, n, path| p.pod_step(keyword, n, path).map(StepKind::Pods);

const POD_SELECTOR: &str = "`{pod: <podclique>/<index> | clique: C | pcs: P}`";

/// Every step kind, in the order the book lists them.
pub const STEP_KINDS: &[StepDefinition] = &[
    StepDefinition {
        keyword: "apply",
        syntax: "`apply: F` / `apply: {fixture: F, patch: {...}}`",
        does: "creates the fixture's PodCliqueSet (lists of named items merge by name)",
        needs: NOTHING,
        parse: |p, _, n, path| p.apply(n, path).map(StepKind::Apply),
    },
    StepDefinition {
        keyword: "update",
        syntax: "`update: {kind, name | fixture, subresource: main|status|scale, patch, conditions}`",
        does: "changes a live object; `conditions` writes conditions by type (the harness's writes are attributed to it). A finalizer a case adds this way (another controller's, in the case's story) is named `conformance.grove.io/…`; whatever the case leaves of them is removed when it ends, so its namespace goes (unless `--keep-namespaces`)",
        needs: NOTHING,
        parse: |p, _, n, path| p.update(n, path).map(StepKind::Update),
    },
    StepDefinition {
        keyword: "delete",
        syntax: "`delete: {kind, name}` or a pod selector",
        does: "deletes an object, or pods; `terminal-phase: false` makes the kubelet remove the pod without ever writing a terminal phase (a kubelet that is gone, a watch that coalesced the update; on real kubelets, a grace period of 0 does it); `if-present: true` lets the pods be gone already (an implementation may delete them itself, as C1–C3 allow): the step then acts on those still there, or does nothing and logs so, instead of failing for want of a pod",
        needs: NOTHING,
        parse: |p, _, n, path| p.delete(n, path, false),
    },
    StepDefinition {
        keyword: "force-delete",
        syntax: "`force-delete: {kind, name}` or a pod selector",
        does: "deletes at once (grace period 0); `if-present: true` as for `delete`",
        needs: NOTHING,
        parse: |p, _, n, path| p.delete(n, path, true),
    },
    StepDefinition {
        keyword: "reject",
        syntax: "`reject: {apply | update: ..., field: spec..., code: N}`",
        does: "the request must fail with a 4xx (422 from CRD validation, 403/400 from a webhook; `code` pins one), its message naming the field: its whole path, a suffix of at least two segments (`failure.maxRestarts`), or a path below it (`targetNames[1]`); CEL's `[]` matches any index; nothing is created",
        needs: NOTHING,
        parse: |p, _, n, path| p.reject(n, path).map(StepKind::Reject),
    },
    StepDefinition {
        keyword: "exit",
        syntax: "`exit: {pod: <podclique>/<index> | clique: C | pcs: P, code: N}`",
        does: "the pods' containers exit with N",
        needs: NOTHING,
        parse: POD_STEP,
    },
    StepDefinition {
        keyword: "unready",
        syntax: POD_SELECTOR,
        does: "the pods' readiness probes start failing",
        needs: NOTHING,
        parse: POD_STEP,
    },
    StepDefinition {
        keyword: "ready",
        syntax: POD_SELECTOR,
        does: "the pods' readiness probes pass again",
        needs: NOTHING,
        parse: POD_STEP,
    },
    StepDefinition {
        keyword: "evict",
        syntax: POD_SELECTOR,
        does: "evicts the pods through the Eviction API; `terminal-phase: false` as for `delete`",
        needs: NOTHING,
        parse: POD_STEP,
    },
    StepDefinition {
        keyword: "preempt",
        syntax: POD_SELECTOR,
        does: "sets the pods' `DisruptionTarget` condition, then deletes them; `terminal-phase: false` as for `delete`",
        needs: NOTHING,
        parse: POD_STEP,
    },
    StepDefinition {
        keyword: "lose-node",
        syntax: "`lose-node: {pod: ..., mode: vanish | fail, alone}`",
        does: "the pod's node is lost: its pods vanish without a terminal phase (or show Failed first, as pod GC does), and the node comes back after the case. On the simulated fleet the case gets nodes of its own (one per pod, up to 8), so it runs beside other cases; on a cluster whose nodes are shared (kind) it runs alone; with `alone: true` the case is skipped, saying why, when the target placed other pods of the case on that node (a real scheduler may)",
        needs: NOTHING,
        parse: POD_STEP,
    },
    StepDefinition {
        keyword: "controller",
        syntax: "`controller: pause | resume | crash | wait`",
        does: "SIGSTOP / SIGCONT / SIGKILL and restart the implementation (a pause returns once every thread has stopped); `{action: crash, when: {changed: {kind, name, path}}}` arms it for the moment a watched value changes (also `deleted:` and `condition:` triggers); `when: {request: {verb, resource, subresource, name, nth, at: before | after}}` pins the crash (or, with `action: pause`, the pause) to the implementation's Nth matching API request (counted from the step; `name` a glob) through the API proxy; `controller: wait` waits until every action armed before it has been carried out (a case that acts while a pinned pause holds says so; an action that never fires within 30 s makes the case skipped)",
        needs: Needs {
            api_proxy: false,
            controllable: true,
            whole_implementation: true,
        },
        parse: |p, _, n, path| p.controller(n, path).map(StepKind::Controller),
    },
    StepDefinition {
        keyword: "fault",
        syntax: "`fault: {hold: K, name, reads: current | stale, release: deliver | coalesce | relist, when, until, for}`",
        does: "holds back the implementation's watch events of kind K (a Grove kind or `Pod`) in the case's namespace, or those of the objects whose name matches the glob `name`, through the API proxy: at once, or when the `when:` trigger fires (the same `changed`, `deleted`, `condition` and `request` triggers as `controller`; a `request:` here only watches the request, which goes on); released by `until:` (a trigger armed when the hold starts), after `for:` (at most 4m), by a later `fault: release`, or at the end of the case. `fault: {relist: K, when}` ends the implementation's watches of K with `410 Gone`; `fault: release` releases every hold now. An armed fault that never starts makes a passing case skipped, saying so",
        needs: Needs {
            api_proxy: true,
            controllable: false,
            whole_implementation: true,
        },
        parse: |p, _, n, path| p.fault(n, path).map(StepKind::Fault),
    },
    StepDefinition {
        keyword: "refuse",
        syntax: "`refuse: {verb: create | update | delete, kind: K, subresource: status, for}` / `refuse: lift`",
        does: "from now on the apiserver answers every write of that verb to kind K (a Grove kind or `Pod`; `subresource: status` with `update`: status writes only) in the case's namespace with `403 Forbidden`, as an admission policy or a quota of a real cluster does, to every client (the harness's own steps included); the step ends once the apiserver applies it. Lifted after `for:`, by `refuse: lift` (which ends once no refusal applies any more), or when the case ends. It needs no API proxy, so it works for every implementation, deployed ones included, on every target. A refusal is a `ValidatingAdmissionPolicy` with its binding, named after the namespace (label `app.kubernetes.io/managed-by: grove-conformance`); a cluster that does not serve them, or credentials that may not create them, make the case skipped, saying so",
        needs: NOTHING,
        parse: |p, _, n, path| p.refuse(n, path).map(StepKind::Refuse),
    },
    StepDefinition {
        keyword: "remember",
        syntax: "`remember: {as: L, kind, name | pod}`",
        does: "records a UID, for `recreated: [L]` / `unchanged: [L]`",
        needs: NOTHING,
        parse: |p, _, n, path| p.remember(n, path).map(StepKind::Remember),
    },
    StepDefinition {
        keyword: "expect",
        syntax: "`expect: {within, for, objects, pods, recreated, unchanged, events}`",
        does: "`within`: must become true in time; `for`: must stay true; an event is `{reason, kind, name, count, mentions: [words]}`",
        needs: NOTHING,
        parse: |p, _, n, path| p.expect(n, path).map(StepKind::Expect),
    },
];

/// The definition of the step kind written with `keyword`.
pub fn step_definition(keyword: &str) -> Option<&'static StepDefinition> {
    STEP_KINDS.iter().find(|d| d.keyword == keyword)
}

impl StepKind {
    /// The definition of this step's kind.
    pub fn definition(&self) -> &'static StepDefinition {
        let keyword = self.keyword();
        step_definition(keyword)
            .unwrap_or_else(|| panic!("the step kind `{keyword}` has no definition in STEP_KINDS"))
    }
}

/// The book's table of steps (`docs/src/steps-table.md`), one row per step kind.
pub fn steps_table() -> String {
    let mut out = String::from(
        "<!-- Generated from core/src/catalog/step_kinds.rs; the test docs_steps_table checks it. -->\n\n| step | written | what it does |\n|---|---|---|\n",
    );
    for d in STEP_KINDS {
        let syntax = d.syntax.replace('|', "\\|");
        let mut does = d.does.replace('|', "\\|");
        let needs: Vec<&str> = [
            (d.needs.api_proxy, "the implementation behind the API proxy"),
            (
                d.needs.controllable,
                "an implementation the harness controls",
            ),
            (
                d.needs.whole_implementation,
                "the cluster to itself when one implementation serves every case",
            ),
        ]
        .into_iter()
        .filter_map(|(needed, what)| needed.then_some(what))
        .collect();
        if !needs.is_empty() {
            does.push_str(&format!(". Needs {}", needs.join("; ")));
        }
        out.push_str(&format!("| `{}` | {syntax} | {does} |\n", d.keyword));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyword_is_defined_once() {
        for (i, d) in STEP_KINDS.iter().enumerate() {
            assert!(
                STEP_KINDS[..i].iter().all(|e| e.keyword != d.keyword),
                "`{}` is defined twice",
                d.keyword
            );
        }
    }

    #[test]
    fn the_table_has_a_row_per_step_kind() {
        let table = steps_table();
        for d in STEP_KINDS {
            assert!(
                table.contains(&format!("| `{}` | ", d.keyword)),
                "{}",
                d.keyword
            );
        }
    }
}
