//! `conformance.html`: one self-contained page per run (inline CSS, SVG and a few lines of
//! script, nothing fetched), readable without script. It shows everything `junit.xml` and
//! `conformance.yaml` hold: the verdict per profile and revision, the clause matrix with links
//! to the cases citing each clause, the time split, where pinned faults landed, and per case
//! its result, clauses, time split, message, diff and timeline, drawn ([`lanes`]).

mod lanes;

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use lanes::{Row, WHOLE_TIMELINE};

use super::conformance::ConformanceReport;
use super::event::{CaseResult, Outcome, RunResults};
use crate::diff::Style;

/// Text made safe for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The id of a case's section (`case-<area>-<name>`).
pub fn case_anchor(r: &CaseResult) -> String {
    format!("case-{}-{}", r.area, r.case)
}

const STYLE: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 48px;color:#1d1d1f;background:#fff}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.v{font-weight:600;border-radius:3px;padding:0 5px}
.v.pass,.v.conformant{background:#d8f3dc;color:#1b5e20}.v.fail,.v.error,.v.not-conformant{background:#fde2e1;color:#9b1c1c}.v.unstable{background:#fff3cd;color:#8a4b00}
.v.skip,.v.partial,.v.untested{background:#fff4d6;color:#7a5a00}.v.n-a{background:#eceff3;color:#555}
.cases a{margin-right:6px}.meta{color:#555}
section.case{border:1px solid #ddd;border-radius:5px;margin:6px 0;padding:0 10px}
section.case[data-outcome=fail],section.case[data-outcome=error]{border-color:#e57373;background:#fffafa}
section.case summary{cursor:pointer;padding:5px 0}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:480px;font-size:12px}
pre .del{color:#b31d28;background:#ffeef0}pre .ins{color:#22863a;background:#f0fff4}
.lanes{overflow-x:auto;border:1px solid #eee;margin:4px 0}
svg text{font:11px ui-monospace,monospace;fill:#333}
.s{stroke:none}.s.pending{fill:#cfd8dc}.s.running{fill:#90caf9}.s.active{fill:#b3e5fc}.s.deleting{fill:#ffcc80}
.s.done{fill:#a5d6a7}.s.failed{fill:#ef9a9a}span.s{padding:0 4px;border-radius:2px}
span.s.pending{background:#cfd8dc}span.s.running{background:#90caf9}span.s.active{background:#b3e5fc}
span.s.deleting{background:#ffcc80}span.s.done{background:#a5d6a7}span.s.failed{background:#ef9a9a}
circle.m{fill:#37474f}circle.m.harness{fill:#8e24aa}circle.m.system{fill:#9e9e9e}
circle.m.evidence{fill:none;stroke:#d50000;stroke-width:2.5}
span.m.impl{color:#37474f}span.m.harness{color:#8e24aa}span.m.system{color:#9e9e9e}span.m.evidence{color:#d50000}
.violation{color:#b71c1c;font-weight:600}.failing-step{color:#b71c1c;font-weight:600}
.legend{color:#555;font-size:12px}.toolbar{margin:6px 0}
"#;

/// Widens or narrows every timeline; the page works without it.
const SCRIPT: &str = r#"
function zoom(f){document.querySelectorAll('.lanes svg').forEach(function(s){
var w=Math.max(300,Math.round(s.getAttribute('width')*f));s.setAttribute('width',w);});}
function only(o){document.querySelectorAll('section.case').forEach(function(s){
s.style.display=(!o||s.dataset.outcome===o)?'':'none';});}
window.addEventListener('load',function(){document.body.dataset.loadMs=Math.round(performance.now());});
"#;

const ZOOM: &str = "<p class=\"toolbar\">timelines: <button onclick=\"zoom(2)\">zoom in</button> <button onclick=\"zoom(0.5)\">zoom out</button></p>";

/// What produced the report, folded under the header: every provenance line and the digest.
fn provenance(out: &mut String, report: &ConformanceReport) {
    let Some(p) = &report.provenance else {
        return;
    };
    let _ = write!(
        out,
        "<details id=\"provenance\"><summary>What produced this report</summary><table>"
    );
    for (label, value) in p.lines() {
        let _ = write!(
            out,
            "<tr><th>{}</th><td><code>{}</code></td></tr>",
            escape(label),
            escape(&value)
        );
    }
    let _ = writeln!(
        out,
        "<tr><th>digest</th><td><code>{}</code></td></tr></table></details>",
        escape(&report.digest)
    );
}

/// The page for a run: `report` (the conformance report of `results`) and the results.
pub fn render(report: &ConformanceReport, results: &RunResults) -> String {
    let mut out = String::new();
    let verdict = if report.conformant() {
        "conformant"
    } else {
        "not conformant"
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Grove job support conformance: {} {}</title><style>{STYLE}</style><script>{SCRIPT}</script></head><body>\n",
        escape(&report.implementation.name),
        escape(&report.implementation.version)
    );
    let _ = writeln!(
        out,
        "<h1>Grove job support conformance report</h1><p class=\"meta\">implementation <b>{} {}</b> · spec revision <code>{}</code> · {} · <span class=\"v {}\" id=\"verdict\">{verdict}</span></p>",
        escape(&report.implementation.name),
        escape(&report.implementation.version),
        escape(&report.revision),
        escape(&report.date),
        class_of(verdict)
    );
    provenance(&mut out, report);
    profiles(&mut out, report);
    summary_counts(&mut out, results);
    // What needs attention first: the failed and errored cases, whole.
    let (failed, others): (Vec<&CaseResult>, Vec<&CaseResult>) = results
        .sorted()
        .into_iter()
        .partition(|r| !r.outcome.verdict().is_success());
    if !failed.is_empty() {
        let _ = writeln!(
            out,
            "<h2 id=\"failed\">Failed and errored cases ({})</h2>{ZOOM}",
            failed.len()
        );
        for r in failed {
            case(&mut out, r);
        }
    }
    clause_matrix(&mut out, report, results);
    timing(&mut out, report);
    fault_points(&mut out, report);
    let _ = writeln!(out, "<h2 id=\"cases\">Other cases ({})</h2>", others.len());
    for r in others {
        case(&mut out, r);
    }
    out.push_str("</body></html>\n");
    out
}

fn class_of(verdict: &str) -> String {
    verdict.replace(['/', ' '], "-")
}

fn profiles(out: &mut String, report: &ConformanceReport) {
    out.push_str("<h2>Profiles</h2><table><tr><th>profile</th><th>verdict</th><th>pass</th><th>unstable</th><th>fail</th><th>skip</th><th>error</th><th>not applicable in this revision</th></tr>\n");
    for p in &report.profiles {
        let v = if p.conformant {
            "conformant"
        } else {
            "not conformant"
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><span class=\"v {}\">{v}</span></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            p.profile.as_str(),
            class_of(v),
            p.cases.pass,
            p.cases.unstable,
            p.cases.fail,
            p.cases.skip,
            p.cases.error,
            p.cases.not_applicable
        );
    }
    out.push_str("</table>\n");
}

fn summary_counts(out: &mut String, results: &RunResults) {
    let mut counts: BTreeMap<super::Verdict, usize> = BTreeMap::new();
    for r in &results.cases {
        *counts.entry(r.outcome.verdict()).or_default() += 1;
    }
    let parts: Vec<String> = super::Verdict::ALL
        .iter()
        .map(|v| format!("{} {}", counts.get(v).copied().unwrap_or(0), v.counted()))
        .collect();
    let _ = writeln!(
        out,
        "<p class=\"toolbar\">{} cases: {} · show <a href=\"#cases\" onclick=\"only('')\">all</a> <a href=\"#cases\" onclick=\"only('fail')\">failed</a> <a href=\"#cases\" onclick=\"only('unstable')\">unstable</a> <a href=\"#cases\" onclick=\"only('error')\">errored</a></p>",
        results.cases.len(),
        parts.join(", ")
    );
}

fn clause_matrix(out: &mut String, report: &ConformanceReport, results: &RunResults) {
    out.push_str("<h2 id=\"clauses\">Clauses</h2><table><tr><th>clause</th><th>profile</th><th>title</th><th>verdict</th><th>pass</th><th>unstable</th><th>fail</th><th>skip</th><th>n/a</th><th>error</th><th>cases</th></tr>\n");
    for c in &report.clauses {
        let citing: Vec<&CaseResult> = results
            .sorted()
            .into_iter()
            .filter(|r| r.clauses.iter().any(|id| id == c.clause) || charged_to(r, c.clause))
            .collect();
        let link = |r: &&CaseResult| {
            format!(
                "<a class=\"{}\" href=\"#{}\" title=\"{}\">{}</a>",
                r.outcome.verdict().label().replace('/', "-"),
                escape(&case_anchor(r)),
                r.outcome.shown(),
                escape(&r.case)
            )
        };
        let (passed, not_passed): (Vec<&CaseResult>, Vec<&CaseResult>) = citing
            .iter()
            .partition(|r| r.outcome.verdict() == super::Verdict::Pass);
        let mut links: Vec<String> = not_passed.iter().map(link).collect();
        if !passed.is_empty() {
            links.push(format!(
                "<details><summary>{} passed</summary>{}</details>",
                passed.len(),
                passed.iter().map(link).collect::<Vec<_>>().join(" ")
            ));
        }
        let _ = writeln!(
            out,
            "<tr id=\"clause-{id}\"><td>{id}</td><td>{}</td><td>{}</td><td><span class=\"v {}\">{}</span></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"cases\">{}</td></tr>",
            c.profile.as_str(),
            escape(c.title),
            class_of(c.verdict),
            c.verdict,
            c.cases.pass,
            c.cases.unstable,
            c.cases.fail,
            c.cases.skip,
            c.cases.not_applicable,
            c.cases.error,
            links.join(" "),
            id = c.clause,
        );
    }
    out.push_str("</table>\n");
}

/// Whether a failure names `clause` among those it broke without the case citing it.
fn charged_to(r: &CaseResult, clause: &str) -> bool {
    r.outcome
        .failure()
        .is_some_and(|f| f.broken.iter().any(|b| b == clause))
}

fn secs(ms: u64) -> String {
    format!("{:.1}", ms as f64 / 1000.0)
}

fn timing(out: &mut String, report: &ConformanceReport) {
    let t = &report.timing;
    let _ = writeln!(
        out,
        "<h2 id=\"time\">Time</h2><p>run {} s wall; cases {} s in all: waiting on the implementation {} s, <code>for:</code> holds {} s, harness overhead {} s; queued behind exclusive cases {} s.</p>",
        secs(t.run_ms),
        secs(t.totals.wall_ms),
        secs(t.totals.waiting_ms),
        secs(t.totals.holding_ms),
        secs(t.totals.overhead_ms),
        secs(t.totals.queued_ms)
    );
    out.push_str("<details><summary>per case, slowest first</summary><table><tr><th>case</th><th>wall (s)</th><th>waiting</th><th>holds</th><th>overhead</th><th>queued</th></tr>\n");
    for c in &t.cases {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&c.case),
            secs(c.time.wall_ms),
            secs(c.time.waiting_ms),
            secs(c.time.holding_ms),
            secs(c.time.overhead_ms),
            secs(c.time.queued_ms)
        );
    }
    out.push_str("</table></details>\n");
}

fn fault_points(out: &mut String, report: &ConformanceReport) {
    if report.crash_points.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"faults\">Pinned fault points</h2><table><tr><th>case</th><th>where each landed</th></tr>\n");
    for c in &report.crash_points {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&c.case),
            c.points
                .iter()
                .map(|p| escape(p))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    out.push_str("</table>\n");
}

fn case(out: &mut String, r: &CaseResult) {
    let verdict = r.outcome.verdict();
    let label = r.outcome.shown();
    let outcome = verdict.label().replace('/', "-");
    let clauses: Vec<String> = r
        .clauses
        .iter()
        .map(|c| format!("<a href=\"#clause-{0}\">{0}</a>", escape(c)))
        .collect();
    let _ = writeln!(
        out,
        "<section class=\"case\" id=\"{}\" data-outcome=\"{outcome}\"><details{}><summary><span class=\"v {outcome}\">{label}</span> <b>{}/{}</b> · {} · {:.1} s</summary>",
        escape(&case_anchor(r)),
        if verdict.is_success() { "" } else { " open" },
        escape(&r.area),
        escape(&r.case),
        clauses.join(" "),
        r.duration.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "<p class=\"meta\">profile {} · waiting {:.1} s, holds {:.1} s, overhead {:.1} s, queued {:.1} s</p>",
        r.profile.as_str(),
        r.time.waiting.as_secs_f64(),
        r.time.holding.as_secs_f64(),
        r.time.overhead(r.duration).as_secs_f64(),
        r.time.queued.as_secs_f64()
    );
    if let Some(api) = &r.api {
        let by: Vec<String> = api
            .requests
            .iter()
            .map(|(request, n)| format!("{} {n}", escape(request)))
            .collect();
        let _ = writeln!(
            out,
            "<p class=\"meta\">API cost: {} · {}</p>",
            escape(&api.summary()),
            by.join(", ")
        );
        if let Some(finding) = api.restraint_finding() {
            let _ = writeln!(out, "<p class=\"failing-step\">{}</p>", escape(&finding));
        }
    }
    for (label, points) in [
        ("crash points", &r.crash_points),
        ("fault points", &r.fault_points),
    ] {
        if !points.is_empty() {
            let points: Vec<String> = points.iter().map(|p| escape(p)).collect();
            let _ = writeln!(out, "<p>{label}: {}</p>", points.join("; "));
        }
    }
    match &r.outcome {
        Outcome::Pass => {}
        Outcome::Skip { reason } => {
            let _ = writeln!(out, "<p>skipped: {}</p>", escape(reason));
        }
        Outcome::NotApplicable { reason } => {
            let _ = writeln!(
                out,
                "<p>not applicable in this revision: {}</p>",
                escape(reason)
            );
        }
        Outcome::Error { message } => {
            let _ = writeln!(
                out,
                "<p class=\"failing-step\">could not be judged: {}</p>",
                escape(message)
            );
        }
        Outcome::Fail(f) => failure(out, f),
        Outcome::Unstable {
            passed,
            runs,
            failure: f,
        } => {
            let _ = writeln!(
                out,
                "<p class=\"failing-step\">unstable: passed {passed} of {runs} runs</p>"
            );
            failure(out, f);
        }
    }
    out.push_str("</details></section>\n");
}

/// A failure: its message, the clauses it broke, the diff and the timeline drawn.
fn failure(out: &mut String, f: &super::event::Failure) {
    let _ = writeln!(out, "<p class=\"failing-step\">{}</p>", escape(&f.message));
    if !f.broken.is_empty() {
        let _ = writeln!(
            out,
            "<p>clauses broken: {}</p>",
            escape(&f.broken.join(", "))
        );
    }
    let diff = match (&f.compared, &f.diff) {
        (Some(c), _) => Some(c.diff(Style::Plain)),
        (None, Some(d)) => Some(d.clone()),
        (None, None) => None,
    };
    if let Some(diff) = diff.filter(|d| !d.is_empty()) {
        out.push_str("<pre class=\"diff\">");
        for line in diff.lines() {
            let class = match line.chars().next() {
                Some('-') if !line.starts_with("---") => Some("del"),
                Some('+') if !line.starts_with("+++") => Some("ins"),
                _ => None,
            };
            match class {
                Some(c) => {
                    let _ = writeln!(out, "<span class=\"{c}\">{}</span>", escape(line));
                }
                None => {
                    let _ = writeln!(out, "{}", escape(line));
                }
            }
        }
        out.push_str("</pre>\n");
    }
    if let Some(t) = &f.timeline {
        out.push_str("<div class=\"timeline\">");
        out.push_str(&lanes::draw(t));
        out.push_str("</div><details><summary>timeline as text</summary><pre>");
        out.push_str(&escape(t));
        out.push_str("</pre></details>\n");
    }
}
