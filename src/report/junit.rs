//! JUnit XML: a testsuite per area, a testcase per case, clauses as properties, the diff and
//! timeline in the failure and in system-out.

use std::fs;
use std::path::Path;

use junit_report::{OffsetDateTime, ReportBuilder, TestCase, TestSuiteBuilder};

use super::event::{CaseResult, Outcome, RunResults};

/// A failure to write the JUnit file.
#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    /// Rendering the XML failed.
    #[error("failed to render JUnit XML")]
    Render(#[source] junit_report::Error),
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

fn duration(r: &CaseResult) -> junit_report::Duration {
    junit_report::Duration::milliseconds(i64::try_from(r.duration.as_millis()).unwrap_or(i64::MAX))
}

fn testcase(r: &CaseResult) -> TestCase {
    let mut tc = match &r.outcome {
        Outcome::Pass => TestCase::success(&r.case, duration(r)),
        Outcome::Fail(f) => {
            let mut cause = String::new();
            if let Some(d) = &f.diff {
                cause.push_str(d);
            }
            if let Some(t) = &f.timeline {
                if !cause.is_empty() {
                    cause.push('\n');
                }
                cause.push_str("timeline:\n");
                cause.push_str(t);
            }
            let mut tc = TestCase::failure(&r.case, duration(r), "fail", &f.message);
            if let Some(t) = &f.timeline {
                tc.set_system_out(&cdata_safe(t));
            }
            if let junit_report::TestResult::Failure { cause: c, .. } = &mut tc.result {
                *c = (!cause.is_empty()).then(|| cdata_safe(&cause));
            }
            tc
        }
        Outcome::Skip { reason } => TestCase::skipped_with_cause(&r.case, "skip", reason),
        Outcome::NotApplicable { reason } => TestCase::skipped_with_cause(
            &r.case,
            "not-applicable",
            &format!("not applicable in this revision: {reason}"),
        ),
        Outcome::Error { message } => TestCase::error(&r.case, duration(r), "error", message),
    };
    tc.set_classname(&format!("grove-conformance.{}", r.area));
    tc
}

fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders JUnit XML for `results`; `timestamp` stamps every testsuite (pass a fixed one in
/// tests).
pub fn junit(results: &RunResults, timestamp: OffsetDateTime) -> Result<String, JunitError> {
    let mut areas: Vec<&str> = results.cases.iter().map(|r| r.area.as_str()).collect();
    areas.sort_unstable();
    areas.dedup();
    let mut report = ReportBuilder::new();
    let mut order: Vec<&CaseResult> = Vec::new();
    for area in areas {
        let mut cases: Vec<&CaseResult> = results.cases.iter().filter(|r| r.area == area).collect();
        cases.sort_by(|a, b| a.case.cmp(&b.case));
        let name = if area.is_empty() {
            "grove-conformance".to_owned()
        } else {
            format!("grove-conformance.{area}")
        };
        let suite = TestSuiteBuilder::new(&name)
            .set_timestamp(timestamp)
            .add_testcases(cases.iter().map(|r| testcase(r)))
            .build();
        report.add_testsuite(suite);
        order.extend(cases);
    }
    let mut out = Vec::new();
    report
        .build()
        .write_xml(&mut out)
        .map_err(JunitError::Render)?;
    let xml = String::from_utf8_lossy(&out).into_owned();
    Ok(insert_properties(&xml, &order))
}

/// junit-report has no testcase properties: insert `<properties>` (clauses, profile) as the
/// first child of each `<testcase>`, in document order.
fn insert_properties(xml: &str, order: &[&CaseResult]) -> String {
    let mut out = String::with_capacity(xml.len() + order.len() * 128);
    let mut rest = xml;
    for r in order {
        let Some(at) = rest.find("<testcase ") else {
            break;
        };
        let Some(end) = rest[at..].find('>').map(|e| at + e) else {
            break;
        };
        let mut props = String::from("<properties>");
        for c in &r.clauses {
            props.push_str(&format!(
                "<property name=\"clause\" value=\"{}\"/>",
                escape_attr(c)
            ));
        }
        props.push_str(&format!(
            "<property name=\"profile\" value=\"{}\"/></properties>",
            r.profile
        ));
        let self_closing = rest[..end].ends_with('/');
        if self_closing {
            out.push_str(&rest[..end - 1]);
            out.push('>');
            out.push_str(&props);
            out.push_str("</testcase>");
        } else {
            out.push_str(&rest[..=end]);
            out.push_str(&props);
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Writes [`junit`] output to `path` (the `--junit PATH` option).
pub fn write_junit(
    path: &Path,
    results: &RunResults,
    timestamp: OffsetDateTime,
) -> Result<(), JunitError> {
    let xml = junit(results, timestamp)?;
    fs::write(path, xml).map_err(|source| JunitError::Write {
        path: path.display().to_string(),
        source,
    })
}
