//! JUnit XML: a testsuite per area, a testcase per case, clauses as properties, the diff and
//! timeline in the failure and in system-out.

use std::fs;
use std::path::Path;

use jiff::Timestamp;
use quick_xml::Writer;
use quick_xml::events::{BytesCData, BytesDecl, BytesEnd, BytesStart, Event};

use super::event::{CaseResult, Outcome, RunResults};
use super::provenance::Provenance;
use super::verdict::NOT_APPLICABLE_PREFIX;

/// A failure to write the JUnit file.
#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    /// Rendering the XML failed.
    #[error("failed to render JUnit XML")]
    Render(#[source] std::io::Error),
    /// Writing the file failed.
    #[error("failed to write {path}")]
    Write {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// CDATA cannot contain `]]>`; split it so the text survives unchanged when read back.
fn cdata_safe(s: &str) -> String {
    s.replace("]]>", "]] >")
}

fn seconds(r: &CaseResult) -> String {
    format!("{:.3}", r.duration.as_secs_f64())
}

/// The property names of a time split, in [`time_properties`] order.
pub const TIME_PROPERTIES: [&str; 4] = [
    "time-waiting",
    "time-holding",
    "time-overhead",
    "time-queued",
];

/// A time split as properties, in seconds: waiting on the implementation, `for:` holds,
/// harness overhead, queued behind an exclusive case.
fn time_properties(w: &mut Xml, split: [std::time::Duration; 4]) -> std::io::Result<()> {
    for (name, d) in TIME_PROPERTIES.iter().zip(split) {
        let value = format!("{:.3}", d.as_secs_f64());
        empty(w, "property", &[("name", name), ("value", &value)])?;
    }
    Ok(())
}

/// What the implementation cost the apiserver: `api-requests`, `api-writes`,
/// `api-writes-after-required` (when the case states a required state), `api-quiet-tail`
/// (seconds from the last write to the end, when there was one), one `api-request` per
/// `verb resource` with its count (`patch podcliques/status=12`), and one
/// `restraint-finding` (L2) per object written past the bound.
fn api_properties(w: &mut Xml, api: &super::ApiCost) -> std::io::Result<()> {
    let mut put =
        |name: &str, value: &str| empty(w, "property", &[("name", name), ("value", value)]);
    put("api-requests", &api.total.to_string())?;
    put("api-writes", &api.writes.to_string())?;
    if let Some(n) = api.writes_after_required {
        put("api-writes-after-required", &n.to_string())?;
    }
    if let Some(ms) = api.quiet_tail_ms {
        put("api-quiet-tail", &format!("{:.3}", ms as f64 / 1000.0))?;
    }
    for (request, count) in &api.requests {
        put("api-request", &format!("{request}={count}"))?;
    }
    for late in &api.late_writes {
        put("restraint-finding", &late.to_string())?;
    }
    Ok(())
}

/// Counts of a set of results as JUnit names them: (tests, failures, errors, skipped).
fn tally(cases: &[&CaseResult]) -> [(&'static str, String); 4] {
    let count = |f: fn(&Outcome) -> bool| cases.iter().filter(|r| f(&r.outcome)).count();
    [
        ("tests", cases.len().to_string()),
        (
            "failures",
            count(|o| matches!(o, Outcome::Fail(_) | Outcome::Unstable { .. })).to_string(),
        ),
        (
            "errors",
            count(|o| matches!(o, Outcome::Error { .. })).to_string(),
        ),
        (
            "skipped",
            count(|o| matches!(o, Outcome::Skip { .. } | Outcome::NotApplicable { .. }))
                .to_string(),
        ),
    ]
}

type Xml = Writer<Vec<u8>>;

fn start(w: &mut Xml, name: &str, attrs: &[(&str, &str)]) -> std::io::Result<()> {
    let mut e = BytesStart::new(name);
    for (k, v) in attrs {
        e.push_attribute((*k, *v));
    }
    w.write_event(Event::Start(e))
}

fn empty(w: &mut Xml, name: &str, attrs: &[(&str, &str)]) -> std::io::Result<()> {
    let mut e = BytesStart::new(name);
    for (k, v) in attrs {
        e.push_attribute((*k, *v));
    }
    w.write_event(Event::Empty(e))
}

fn end(w: &mut Xml, name: &str) -> std::io::Result<()> {
    w.write_event(Event::End(BytesEnd::new(name)))
}

/// An element holding `text` as CDATA.
fn cdata(w: &mut Xml, name: &str, attrs: &[(&str, &str)], text: &str) -> std::io::Result<()> {
    start(w, name, attrs)?;
    w.write_event(Event::CData(BytesCData::new(cdata_safe(text))))?;
    end(w, name)
}

/// One `<testcase>`: its clauses and profile as `<properties>`, then its outcome
/// (`<failure>` with the diff and timeline, `<error>`, `<skipped>`), then the timeline again as
/// `<system-out>`; the order the JUnit schema gives.
fn testcase(w: &mut Xml, r: &CaseResult) -> std::io::Result<()> {
    let classname = format!("grove-conformance.{}", r.area);
    let time = seconds(r);
    start(
        w,
        "testcase",
        &[
            ("name", &r.case),
            ("classname", &classname),
            ("time", &time),
        ],
    )?;
    start(w, "properties", &[])?;
    for c in &r.clauses {
        empty(w, "property", &[("name", "clause"), ("value", c)])?;
    }
    empty(
        w,
        "property",
        &[("name", "profile"), ("value", r.profile.as_str())],
    )?;
    for point in &r.crash_points {
        empty(w, "property", &[("name", "crash-point"), ("value", point)])?;
    }
    for point in &r.fault_points {
        empty(w, "property", &[("name", "fault-point"), ("value", point)])?;
    }
    let overhead = r.time.overhead(r.duration);
    time_properties(w, [r.time.waiting, r.time.holding, overhead, r.time.queued])?;
    if let Some(api) = &r.api {
        api_properties(w, api)?;
    }
    if let Some(stability) = r.outcome.stability() {
        empty(
            w,
            "property",
            &[("name", "unstable"), ("value", &stability)],
        )?;
    }
    end(w, "properties")?;
    match &r.outcome {
        Outcome::Pass => {}
        Outcome::Fail(f) | Outcome::Unstable { failure: f, .. } => {
            let mut cause = f.diff.clone().unwrap_or_default();
            if let Some(t) = &f.timeline {
                if !cause.is_empty() {
                    cause.push('\n');
                }
                cause.push_str("timeline:\n");
                cause.push_str(t);
            }
            let kind = r.outcome.label();
            let attrs = [("type", kind), ("message", f.message.as_str())];
            if cause.is_empty() {
                empty(w, "failure", &attrs)?;
            } else {
                cdata(w, "failure", &attrs, &cause)?;
            }
            if let Some(t) = &f.timeline {
                cdata(w, "system-out", &[], t)?;
            }
        }
        Outcome::Skip { reason } => empty(w, "skipped", &[("message", reason)])?,
        Outcome::NotApplicable { reason } => {
            let message = format!("{NOT_APPLICABLE_PREFIX}{reason}");
            empty(w, "skipped", &[("message", &message)])?;
        }
        Outcome::Error { message } => {
            empty(w, "error", &[("type", "error"), ("message", message)])?;
        }
    }
    end(w, "testcase")
}

/// Renders JUnit XML for `results`: a `<testsuite>` per area, a `<testcase>` per case, written
/// as XML elements (attributes escaped by the writer); `timestamp` stamps every testsuite
/// (pass a fixed one in tests).
pub fn junit(results: &RunResults, timestamp: Timestamp) -> Result<String, JunitError> {
    junit_with(results, timestamp, None)
}

/// [`junit`], every testsuite also carrying what produced the run as properties
/// ([`provenance_properties`]).
pub fn junit_with(
    results: &RunResults,
    timestamp: Timestamp,
    provenance: Option<&Provenance>,
) -> Result<String, JunitError> {
    let bytes = render(results, timestamp, provenance).map_err(JunitError::Render)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// What produced a run, as JUnit properties: `harness-version`, `harness-commit`,
/// `catalog-digest`, `target`, `kubernetes-version`, `implementation-mode`,
/// `implementation-command`, `implementation-image`, `implementation-image-digest`,
/// `implementation-deployment`, `selection-profile`, `selection-filter`, `selection-focus`,
/// `selection-skip`, `jobs`, `repeat`, `shard`, `api-proxy`, `fail-fast`, `started`,
/// `command-line` (one per shard when merged), and the implementer's `organization`,
/// `project`, `url`, `implementation-version` and `contact`, each when given.
pub fn provenance_properties(p: &Provenance) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut put = |name: &'static str, value: Option<&String>| {
        if let Some(v) = value {
            out.push((name, v.clone()));
        }
    };
    let who = &p.implementer;
    put("organization", who.organization.as_ref());
    put("project", who.project.as_ref());
    put("url", who.url.as_ref());
    put("implementation-version", who.version.as_ref());
    for c in &who.contact {
        put("contact", Some(c));
    }
    put("harness-version", Some(&p.harness.version));
    put("harness-commit", Some(&p.harness.commit));
    put("catalog-digest", Some(&p.catalog));
    put("target", Some(&p.target.kind));
    put("kubernetes-version", p.target.kubernetes.as_ref());
    let i = &p.implementation;
    put("implementation-mode", Some(&i.mode));
    put("implementation-command", i.command.as_ref());
    put("implementation-image", i.image.as_ref());
    put("implementation-image-digest", i.image_digest.as_ref());
    put("implementation-deployment", i.deployment.as_ref());
    let sel = &p.selection;
    put("selection-profile", sel.profile.as_ref());
    for f in &sel.filter {
        put("selection-filter", Some(f));
    }
    put("selection-focus", sel.focus.as_ref());
    put("selection-skip", sel.skip.as_ref());
    let s = &p.settings;
    put("jobs", Some(&s.jobs.to_string()));
    put("repeat", Some(&s.repeat.to_string()));
    for shard in &s.shards {
        put("shard", Some(shard));
    }
    put("api-proxy", Some(&s.api_proxy.to_string()));
    put("fail-fast", Some(&s.fail_fast.to_string()));
    put("started", Some(&p.started));
    for c in &p.commands {
        put("command-line", Some(c));
    }
    out
}

fn render(
    results: &RunResults,
    timestamp: Timestamp,
    provenance: Option<&Provenance>,
) -> std::io::Result<Vec<u8>> {
    let provenance = provenance.map(provenance_properties).unwrap_or_default();
    let mut areas: Vec<&str> = results.cases.iter().map(|r| r.area.as_str()).collect();
    areas.sort_unstable();
    areas.dedup();
    let stamp = timestamp.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let mut w = Writer::new(Vec::new());
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let all: Vec<&CaseResult> = results.cases.iter().collect();
    let counts = tally(&all);
    let time = format!("{:.3}", results.duration.as_secs_f64());
    let mut attrs: Vec<(&str, &str)> = vec![("name", "grove-conformance")];
    attrs.extend(counts.iter().map(|(k, v)| (*k, v.as_str())));
    attrs.push(("time", &time));
    start(&mut w, "testsuites", &attrs)?;
    for (id, area) in areas.iter().enumerate() {
        let mut cases: Vec<&CaseResult> =
            results.cases.iter().filter(|r| r.area == *area).collect();
        cases.sort_by(|a, b| a.case.cmp(&b.case));
        let name = if area.is_empty() {
            "grove-conformance".to_owned()
        } else {
            format!("grove-conformance.{area}")
        };
        let id = id.to_string();
        let counts = tally(&cases);
        let time = format!(
            "{:.3}",
            cases.iter().map(|r| r.duration.as_secs_f64()).sum::<f64>()
        );
        let mut attrs: Vec<(&str, &str)> = vec![("name", &name)];
        attrs.extend(counts.iter().map(|(k, v)| (*k, v.as_str())));
        attrs.extend([
            ("time", time.as_str()),
            ("timestamp", stamp.as_str()),
            ("hostname", "localhost"),
            ("id", id.as_str()),
        ]);
        start(&mut w, "testsuite", &attrs)?;
        let mut split = [std::time::Duration::ZERO; 4];
        for r in &cases {
            let overhead = r.time.overhead(r.duration);
            for (sum, d) in
                split
                    .iter_mut()
                    .zip([r.time.waiting, r.time.holding, overhead, r.time.queued])
            {
                *sum += d;
            }
        }
        start(&mut w, "properties", &[])?;
        for (name, value) in &provenance {
            empty(&mut w, "property", &[("name", name), ("value", value)])?;
        }
        time_properties(&mut w, split)?;
        end(&mut w, "properties")?;
        for r in cases {
            testcase(&mut w, r)?;
        }
        end(&mut w, "testsuite")?;
    }
    end(&mut w, "testsuites")?;
    Ok(w.into_inner())
}

/// Writes [`junit`] output to `path` (the `--junit PATH` option).
pub fn write_junit(
    path: &Path,
    results: &RunResults,
    timestamp: Timestamp,
    provenance: Option<&Provenance>,
) -> Result<(), JunitError> {
    let xml = junit_with(results, timestamp, provenance)?;
    fs::write(path, xml).map_err(|source| JunitError::Write {
        path: path.display().to_string(),
        source,
    })
}
