//! The one writer of the case language: a [`Case`] back to the text [`parse_case`] reads, and
//! any JSON value (a fixture's manifest) as block YAML. What explore generates and shrinks is
//! written here, so a generated case and a hand-written one are the same thing; a test reads
//! every case of the catalog, writes it and reads it again to the same [`Case`].
//!
//! [`parse_case`]: super::parse_case

use std::fmt::Write as _;

use serde_json::Value;

use super::{
    Addressee, Apply, Case, ConditionMatch, ConditionStatus, ConditionWrite, ControllerAction,
    ControllerStep, DeletionTarget, EventExpectation, Expectation, FaultStep, FaultStepAction,
    HoldRelease, NodeLoss, ObjectExpectation, ObjectRef, ObjectState, PodAction, PodCount,
    PodFilter, PodSelector, PodStep, RefuseStep, Request, RequestPin, StepKind, Subject,
    Subresource, Trigger, UidSubject, Update,
};

/// The text of `case`, as a case file.
pub fn write_case(case: &Case) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "name: {}", scalar(&case.name));
    let _ = writeln!(out, "summary: {}", quoted(&case.summary));
    let _ = writeln!(out, "clauses: {}", list(&case.clauses));
    let _ = writeln!(out, "profile: {}", case.profile);
    match case.fixtures.as_slice() {
        [one] => {
            let _ = writeln!(out, "fixture: {}", scalar(one));
        }
        many => {
            let _ = writeln!(out, "fixtures: {}", list(many));
        }
    }
    if let Some(revisions) = &case.revisions {
        let ids: Vec<String> = revisions.iter().map(|r| r.id().to_owned()).collect();
        let _ = writeln!(out, "revisions: {}", list(&ids));
    }
    if let Some(t) = case.timeout {
        let _ = writeln!(out, "timeout: {t}");
    }
    out.push_str("steps:\n");
    for step in &case.steps {
        out.push_str(&write_step(&step.kind));
    }
    out
}

/// One step as an entry of `steps:` (indented by two, ending in a newline).
pub fn write_step(step: &StepKind) -> String {
    let body = match step {
        StepKind::Expect(e) => return expect(e),
        StepKind::Apply(a) => apply(a),
        StepKind::Update(u) => update(u),
        StepKind::Delete(d) => target(&d.target),
        StepKind::Reject(r) => {
            let mut m = Flow::default();
            match &r.request {
                Request::Apply(a) => m.raw("apply", apply(a)),
                Request::Update(u) => m.raw("update", update(u)),
            }
            if let Some(c) = r.code {
                m.raw("code", c.to_string());
            }
            m.text("field", &r.field);
            m.finish()
        }
        StepKind::Pods(p) => pod_step(p),
        StepKind::Controller(c) => controller(c),
        StepKind::Fault(f) => fault(f),
        StepKind::Refuse(RefuseStep::Lift) => "lift".to_owned(),
        StepKind::Refuse(RefuseStep::Start(r)) => {
            let mut m = Flow::default();
            m.raw("verb", r.verb.as_str().to_owned());
            m.raw("kind", r.kind.to_string());
            if r.status {
                m.raw("subresource", "status".to_owned());
            }
            if let Some(d) = r.lasts {
                m.raw("for", d.to_string());
            }
            m.finish()
        }
        StepKind::Remember(r) => {
            let mut m = Flow::default();
            m.text("as", &r.label);
            match &r.subject {
                UidSubject::Object(o) => object_ref(&mut m, o),
                UidSubject::Pod { clique, index } => m.text("pod", &format!("{clique}/{index}")),
            }
            m.finish()
        }
    };
    format!("  - {}: {body}\n", step.keyword())
}

fn apply(a: &Apply) -> String {
    match &a.patch {
        None => scalar(&a.fixture),
        Some(p) => {
            let mut m = Flow::default();
            m.text("fixture", &a.fixture);
            m.raw("patch", json(p));
            m.finish()
        }
    }
}

fn target(t: &Addressee) -> String {
    let mut m = Flow::default();
    addressee(&mut m, t);
    m.finish()
}

fn addressee(m: &mut Flow, t: &Addressee) {
    match t {
        Addressee::Object(o) => object_ref(m, o),
        Addressee::Fixture(f) => m.text("fixture", f),
    }
}

fn object_ref(m: &mut Flow, o: &ObjectRef) {
    m.raw("kind", o.kind.to_string());
    m.text("name", &o.name);
}

fn update(u: &Update) -> String {
    let mut m = Flow::default();
    addressee(&mut m, &u.target);
    if u.subresource != Subresource::Main {
        m.raw("subresource", u.subresource.keyword().to_owned());
    }
    if let Some(p) = &u.patch {
        m.raw("patch", json(p));
    }
    if !u.conditions.is_empty() {
        let mut c = Flow::default();
        for ConditionWrite {
            condition,
            status,
            reason,
        } in &u.conditions
        {
            c.raw(condition.catalog_name(), condition_status(*status, *reason));
        }
        m.raw("conditions", c.finish());
    }
    m.finish()
}

fn condition_status(status: ConditionStatus, reason: Option<crate::vocab::Term>) -> String {
    match reason {
        None => quoted(status.as_str()),
        Some(r) => format!(
            "{{status: {}, reason: {}}}",
            quoted(status.as_str()),
            scalar(r.catalog_name())
        ),
    }
}

fn selector(m: &mut Flow, s: &PodSelector) {
    match s {
        PodSelector::Pod { clique, index } => m.text("pod", &format!("{clique}/{index}")),
        PodSelector::Clique(c) => m.text("clique", c),
        PodSelector::PodCliqueSet(p) => m.text("pcs", p),
    }
}

fn pod_step(p: &PodStep) -> String {
    let mut m = Flow::default();
    selector(&mut m, &p.selector);
    match p.action {
        PodAction::Exit(code) => m.raw("code", code.to_string()),
        PodAction::LoseNode(NodeLoss::FailFirst) => m.raw("mode", "fail".to_owned()),
        _ => {}
    }
    if p.without_terminal_phase {
        m.raw("terminal-phase", "false".to_owned());
    }
    if p.alone {
        m.raw("alone", "true".to_owned());
    }
    if p.if_present {
        m.raw("if-present", "true".to_owned());
    }
    m.finish()
}

fn controller_action(a: ControllerAction) -> &'static str {
    match a {
        ControllerAction::Pause => "pause",
        ControllerAction::Resume => "resume",
        ControllerAction::Crash => "crash",
        ControllerAction::Wait => "wait",
    }
}

fn controller(c: &ControllerStep) -> String {
    let action = controller_action(c.action);
    match &c.when {
        None => action.to_owned(),
        Some(t) => {
            let mut m = Flow::default();
            m.raw("action", action.to_owned());
            m.raw("when", trigger(t));
            m.finish()
        }
    }
}

fn fault(f: &FaultStep) -> String {
    let mut m = Flow::default();
    match &f.action {
        FaultStepAction::Release => return "release".to_owned(),
        FaultStepAction::Relist(kind) => m.raw("relist", kind.to_string()),
        FaultStepAction::Hold(h) => {
            m.raw("hold", h.kind.to_string());
            if let Some(n) = &h.name {
                m.text("name", n);
            }
            if h.stale_reads {
                m.raw("reads", "stale".to_owned());
            }
            if h.release != HoldRelease::Deliver {
                m.raw("release", h.release.keyword().to_owned());
            }
            if let Some(t) = &h.until {
                m.raw("until", trigger(t));
            }
            if let Some(d) = h.lasts {
                m.raw("for", d.to_string());
            }
        }
    }
    if let Some(t) = &f.when {
        m.raw("when", trigger(t));
    }
    m.finish()
}

fn trigger(t: &Trigger) -> String {
    let mut inner = Flow::default();
    let key = match t {
        Trigger::Changed { object, path } => {
            object_ref(&mut inner, object);
            inner.text("path", path);
            "changed"
        }
        Trigger::Deleted(DeletionTarget::Pod(s)) => {
            selector(&mut inner, s);
            "deleted"
        }
        Trigger::Deleted(DeletionTarget::Object(o)) => {
            object_ref(&mut inner, o);
            "deleted"
        }
        Trigger::Deleted(DeletionTarget::AnyOf(kind)) => {
            inner.raw("kind", kind.to_string());
            "deleted"
        }
        Trigger::Condition {
            object,
            condition,
            status,
        } => {
            object_ref(&mut inner, object);
            inner.raw("type", condition.catalog_name().to_owned());
            inner.raw("status", quoted(status.as_str()));
            "condition"
        }
        Trigger::Request(pin) => {
            request_pin(&mut inner, pin);
            "request"
        }
    };
    format!("{{{key}: {}}}", inner.finish())
}

fn request_pin(m: &mut Flow, pin: &RequestPin) {
    for (key, value) in [
        ("verb", &pin.verb),
        ("resource", &pin.resource),
        ("subresource", &pin.subresource),
        ("name", &pin.name),
    ] {
        if let Some(v) = value {
            m.text(key, v);
        }
    }
    if pin.nth != 1 {
        m.raw("nth", pin.nth.to_string());
    }
    if pin.after {
        m.raw("at", "after".to_owned());
    }
}

fn expect(e: &Expectation) -> String {
    let mut out = String::from("  - expect:\n");
    if let Some(w) = e.within {
        let _ = writeln!(out, "      within: {w}");
    }
    if let Some(h) = e.hold {
        let _ = writeln!(out, "      for: {h}");
    }
    let mut entries = |key: &str, items: Vec<String>| {
        if !items.is_empty() {
            let _ = writeln!(out, "      {key}:");
            for i in items {
                let _ = writeln!(out, "        - {i}");
            }
        }
    };
    entries(
        "objects",
        e.objects.iter().map(object_expectation).collect(),
    );
    entries("pods", e.pods.iter().map(pod_count).collect());
    if !e.recreated.is_empty() {
        let _ = writeln!(out, "      recreated: {}", list(&e.recreated));
    }
    if !e.unchanged.is_empty() {
        let _ = writeln!(out, "      unchanged: {}", list(&e.unchanged));
    }
    let events: Vec<String> = e.events.iter().map(event).collect();
    if !events.is_empty() {
        out.push_str("      events:\n");
        for i in events {
            let _ = writeln!(out, "        - {i}");
        }
    }
    out
}

fn object_expectation(o: &ObjectExpectation) -> String {
    let mut m = Flow::default();
    match &o.subject {
        Subject::Object(r) => object_ref(&mut m, r),
        Subject::Pod { clique, index } => m.text("pod", &format!("{clique}/{index}")),
    }
    match &o.state {
        ObjectState::Absent => m.raw("absent", "true".to_owned()),
        ObjectState::Present {
            conditions,
            labels,
            spec,
            status,
            owner,
        } => {
            if !conditions.is_empty() {
                let mut c = Flow::default();
                for e in conditions {
                    let v = match e.expect {
                        ConditionMatch::Absent => "absent".to_owned(),
                        ConditionMatch::NotTrue => "not-true".to_owned(),
                        ConditionMatch::Status { status, reason } => {
                            condition_status(status, reason)
                        }
                    };
                    c.raw(e.condition.catalog_name(), v);
                }
                m.raw("conditions", c.finish());
            }
            if !labels.is_empty() {
                let mut l = Flow::default();
                for (term, value) in labels {
                    l.text(term.catalog_name(), value);
                }
                m.raw("labels", l.finish());
            }
            if let Some(s) = spec {
                m.raw("spec", json(s));
            }
            if let Some(s) = status {
                m.raw("status", json(s));
            }
            if let Some(owner) = owner {
                let mut r = Flow::default();
                object_ref(&mut r, owner);
                m.raw("owner", r.finish());
            }
        }
    }
    m.finish()
}

fn pod_count(p: &PodCount) -> String {
    let mut m = Flow::default();
    selector(&mut m, &p.scope);
    let n = p.count.to_string();
    match p.filter {
        PodFilter::All => m.raw("count", n),
        PodFilter::Phase(phase) => {
            m.raw("phase", phase.as_str().to_owned());
            m.raw("count", n);
        }
        PodFilter::Active => m.raw("active", n),
        PodFilter::Terminal => m.raw("terminal", n),
        PodFilter::Ready => m.raw("ready", n),
        PodFilter::Owned => m.raw("owned", n),
    }
    m.finish()
}

fn event(e: &EventExpectation) -> String {
    let mut m = Flow::default();
    m.raw("reason", e.reason.catalog_name().to_owned());
    if let Some(k) = e.kind {
        m.raw("kind", k.to_string());
    }
    if let Some(n) = &e.name {
        m.text("name", n);
    }
    if let Some(c) = e.count {
        m.raw("count", c.to_string());
    }
    if !e.mentions.is_empty() {
        m.raw("mentions", list(&e.mentions));
    }
    m.finish()
}

/// A flow mapping built entry by entry.
#[derive(Default)]
struct Flow(Vec<String>);

impl Flow {
    /// An entry whose value is already YAML.
    fn raw(&mut self, key: &str, value: String) {
        self.0.push(format!("{}: {value}", scalar(key)));
    }

    /// An entry whose value is a string (quoted where YAML would read it otherwise).
    fn text(&mut self, key: &str, value: &str) {
        self.raw(key, scalar(value));
    }

    fn finish(self) -> String {
        format!("{{{}}}", self.0.join(", "))
    }
}

/// A flow sequence of strings.
fn list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| scalar(s)).collect();
    format!("[{}]", items.join(", "))
}

/// A string as a plain scalar where YAML reads it back as the same string, else quoted.
fn scalar(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        )
        && s.parse::<f64>().is_err();
    if plain { s.to_owned() } else { quoted(s) }
}

/// A double-quoted scalar (a JSON string is one).
fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A JSON value as a YAML flow node (JSON is YAML's flow style).
fn json(v: &Value) -> String {
    v.to_string()
}

/// `value` as block YAML: mappings and sequences one entry a line, scalars as JSON would write
/// them (quoted strings, plain numbers and booleans), preceded by `comment` lines (`# ...`).
pub fn write_yaml(comment: &[String], value: &Value) -> String {
    let mut out = String::new();
    for line in comment {
        let _ = writeln!(out, "# {line}");
    }
    block(&mut out, value, 0);
    out
}

fn block(out: &mut String, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let _ = write!(out, "{pad}{}:", scalar(k));
                nested(out, v, indent + 2);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                let _ = write!(out, "{pad}-");
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // The first entry on the dash's line, the rest under it.
                        let mut first = true;
                        for (k, v) in m {
                            if first {
                                let _ = write!(out, " {}:", scalar(k));
                                first = false;
                            } else {
                                let _ = write!(out, "{pad}  {}:", scalar(k));
                            }
                            nested(out, v, indent + 4);
                        }
                    }
                    _ => nested(out, item, indent + 2),
                }
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", json(other));
        }
    }
}

/// The value of a key or a sequence item: on the same line when a scalar (or empty), else on
/// the lines below, indented.
fn nested(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            block(out, v, indent);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            block(out, v, indent);
        }
        Value::String(s) => {
            let _ = writeln!(out, " {}", scalar(s));
        }
        other => {
            let _ = writeln!(out, " {}", json(other));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{write_case, write_yaml};
    use crate::catalog::{Pos, load_catalog, parse_case, parse_fixture};

    /// Every case of the catalog, written and read again, is the case it was; so is every
    /// fixture's manifest.
    #[test]
    fn the_catalog_reads_back_as_written() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let catalog = load_catalog(&root).expect("the catalog loads");
        assert!(catalog.cases.len() > 100, "{}", catalog.cases.len());
        let mut kinds = std::collections::BTreeSet::new();
        for case in &catalog.cases {
            let text = write_case(case);
            let mut again = parse_case(&case.path, &text)
                .unwrap_or_else(|d| panic!("{}: {d:?}\n{text}", case.name));
            again.area = case.area.clone();
            let mut expected = case.clone();
            for s in expected.steps.iter_mut().chain(again.steps.iter_mut()) {
                kinds.insert(s.kind.keyword());
                s.pos = Pos::default();
            }
            assert_eq!(again, expected, "{}:\n{text}", case.name);
        }
        assert!(kinds.len() >= 15, "{kinds:?}");
        for fixture in catalog.fixtures.values() {
            let text = write_yaml(&["a comment".to_owned()], &fixture.manifest);
            let again = parse_fixture(&fixture.path, &text)
                .unwrap_or_else(|d| panic!("{}: {d:?}\n{text}", fixture.name));
            assert_eq!(
                again.manifest, fixture.manifest,
                "{}:\n{text}",
                fixture.name
            );
        }
    }

    #[test]
    fn strings_that_yaml_would_read_otherwise_are_quoted() {
        for s in [
            "true", "No", "1", "1.5", "1e3", "*glob", "a: b", "", "x y", "[0]", "~",
        ] {
            assert!(super::scalar(s).starts_with('"'), "{s}");
        }
        for s in ["worker", "job-0-leader/1", "status.replicaRestartCounts"] {
            assert_eq!(super::scalar(s), s);
        }
    }
}
