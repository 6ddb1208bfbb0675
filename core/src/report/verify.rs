//! `verify-report`'s judgement of a report against a checkout of the suite: that it reads as
//! a report (its schema), that its digest is its content's (no edit by hand), that it ran this
//! checkout's catalog (the digest of its case and fixture files) and exactly the cases its
//! recorded selection selects there, each with the area, profile and clauses the checkout
//! gives it, and, for `conformance.yaml`, that every count, profile verdict, clause verdict,
//! crash point and time total is what its own per-case results aggregate to. Each finding
//! names the field that differs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use super::conformance::{ConformanceReport, REPORT_API_VERSION, REPORT_KIND, ReportedCase};
use super::event::RunResults;
use super::provenance::Provenance;
use super::record::{CaseRecord, RunRecord};
use super::seal::{DIGEST_FIELD, digest_of};
use super::{CrashPoints, Implementation};
use crate::catalog::Profile;
use crate::schedule::Shard;
use crate::vocab::Revision;

/// Where the `catalog` of a report names generated cases (`explore`) rather than a digest.
const GENERATED: &str = "explore:";

/// What a checkout of the suite says about a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutCase {
    /// Its area.
    pub area: String,
    /// Its profile.
    pub profile: Profile,
    /// The clauses it cites.
    pub clauses: Vec<String>,
}

/// The checkout a report is verified against.
#[derive(Debug, Clone)]
pub struct Checkout {
    /// The digest of its catalog's case and fixture files.
    pub catalog: String,
    /// Its cases, by name.
    pub cases: BTreeMap<String, CheckoutCase>,
}

/// One thing a report gets wrong: the field, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The field (`profiles[core].cases.pass`), or what was checked (`schema`, `digest`).
    pub at: String,
    /// What differs.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

fn finding(at: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding {
        at: at.into(),
        message: message.into(),
    }
}

/// Which report a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    /// `conformance.yaml`.
    Conformance,
    /// `results.json`.
    Results,
}

impl ReportKind {
    /// The name the suite writes it under.
    pub fn file_name(self) -> &'static str {
        match self {
            ReportKind::Conformance => "conformance.yaml",
            ReportKind::Results => "results.json",
        }
    }
}

/// A report as read, before it is judged: its content as values (what its digest covers) and
/// as the suite's type.
#[derive(Debug, Clone)]
pub struct ReportFile {
    value: Value,
    parsed: Parsed,
}

/// A report read as its type.
#[derive(Debug, Clone)]
enum Parsed {
    Conformance(Box<ConformanceFile>),
    Results(Box<RunRecord>),
}

/// `conformance.yaml` as it reads back (the fields it aggregates from are typed, the
/// aggregates are compared as values).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConformanceFile {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    implementation: Implementation,
    revision: String,
    date: String,
    #[serde(default)]
    provenance: Option<Provenance>,
    #[allow(dead_code)]
    profiles: Value,
    #[allow(dead_code)]
    clauses: Value,
    cases: Vec<ReportedCase>,
    #[serde(default)]
    crash_points: Vec<CrashPoints>,
    timing: FileTiming,
    /// Required here; judged on the whole value.
    #[allow(dead_code)]
    digest: String,
}

#[derive(Debug, Clone, Deserialize)]
struct FileTiming {
    run_ms: u64,
    cases: Vec<FileCaseTiming>,
}

#[derive(Debug, Clone, Deserialize)]
struct FileCaseTiming {
    case: String,
    wall_ms: u64,
    waiting_ms: u64,
    holding_ms: u64,
    queued_ms: u64,
}

/// Reads `text` as a report: `results.json` (JSON with a `format`) or `conformance.yaml`.
/// `Err` is the schema finding (with line and column where the parser gives them).
pub fn read_report(text: &str) -> Result<ReportFile, Finding> {
    let schema = |e: &dyn fmt::Display| finding("schema", e.to_string());
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && value.get("format").is_some()
    {
        let record = RunRecord::from_json(text).map_err(|e| schema(&e))?;
        return Ok(ReportFile {
            value,
            parsed: Parsed::Results(Box::new(record)),
        });
    }
    let value: Value = serde_yaml::from_str(text).map_err(|e| schema(&e))?;
    // From the text, not the value: the schema's errors then name its line and column.
    let file: ConformanceFile = serde_yaml::from_str(text).map_err(|e| schema(&e))?;
    if file.api_version != REPORT_API_VERSION || file.kind != REPORT_KIND {
        return Err(finding(
            "schema",
            format!(
                "apiVersion `{}` kind `{}`: not a report of this suite (`{REPORT_API_VERSION}` `{REPORT_KIND}`)",
                file.api_version, file.kind
            ),
        ));
    }
    Ok(ReportFile {
        value,
        parsed: Parsed::Conformance(Box::new(file)),
    })
}

impl ReportFile {
    /// Which report it is.
    pub fn kind(&self) -> ReportKind {
        match self.parsed {
            Parsed::Conformance(_) => ReportKind::Conformance,
            Parsed::Results(_) => ReportKind::Results,
        }
    }

    /// What produced it, when it says.
    pub fn provenance(&self) -> Option<&Provenance> {
        match &self.parsed {
            Parsed::Conformance(file) => file.provenance.as_ref(),
            Parsed::Results(record) => record.provenance.as_ref(),
        }
    }

    /// The names of the cases it has results for.
    pub fn case_names(&self) -> Vec<String> {
        self.value
            .get("cases")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("case").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    /// Whether its cases were generated (`explore`) rather than read from a catalog.
    pub fn generated(&self) -> bool {
        self.provenance()
            .is_some_and(|p| p.catalog.starts_with(GENERATED))
    }

    /// Judges it against `checkout`; `selected` is what its recorded selection selects in the
    /// checkout (every case of the run, before sharding). Empty when it holds.
    pub fn verify(&self, checkout: &Checkout, selected: &[String]) -> Vec<Finding> {
        let mut findings = Vec::new();
        let stated = self.value.get(DIGEST_FIELD).and_then(Value::as_str);
        let content = digest_of(&self.value);
        match stated {
            None => findings.push(finding("digest", "missing: the report cannot be checked")),
            Some(d) if d != content => findings.push(finding(
                "digest",
                format!(
                    "the content's digest is {content}, the report says {d}: it was edited after it was written"
                ),
            )),
            Some(_) => {}
        }
        let Some(provenance) = self.provenance() else {
            findings.push(finding(
                "provenance",
                "missing: the report does not say what produced it",
            ));
            return findings;
        };
        if !self.generated() && provenance.catalog != checkout.catalog {
            findings.push(finding(
                "provenance.catalog",
                format!(
                    "the report ran catalog {}, this checkout's is {}",
                    provenance.catalog, checkout.catalog
                ),
            ));
        }
        let cases = match &self.parsed {
            Parsed::Results(record) => record_cases(record, &mut findings),
            Parsed::Conformance(file) => {
                match rebuild(file) {
                    Ok(report) => compare(&self.value, &report, &mut findings),
                    Err(f) => findings.push(f),
                }
                file.cases.clone()
            }
        };
        if !self.generated() {
            check_cases(&cases, checkout, &mut findings);
        }
        check_selection(&cases, selected, provenance, &mut findings);
        findings
    }
}

/// The cases of `results.json` (area, profile, clauses), its record checked.
fn record_cases(record: &RunRecord, findings: &mut Vec<Finding>) -> Vec<ReportedCase> {
    if let Err(e) = record.results() {
        findings.push(finding("cases", e.to_string()));
    }
    let reported: BTreeSet<&String> = record.identity.selected.iter().collect();
    for c in &record.cases {
        if !reported.contains(&c.case) {
            findings.push(finding(
                format!("cases[{}]", c.case),
                "not among the report's own `selected`",
            ));
        }
    }
    record
        .cases
        .iter()
        .map(|c| ReportedCase {
            case: c.case.clone(),
            area: c.area.clone(),
            profile: c.profile.clone(),
            clauses: c.clauses.clone(),
            outcome: c.outcome.clone(),
            passed_runs: c.passed_runs,
            runs: c.runs,
            broken: c.broken.clone(),
        })
        .collect()
}

/// Every place where `actual` (a report's values) differs from `expected`, the digests left
/// out (they differ whenever anything else does, and are judged on their own).
fn compare(actual: &Value, expected: &ConformanceReport, findings: &mut Vec<Finding>) {
    let mut expected = expected.to_value();
    let mut actual = actual.clone();
    for v in [&mut expected, &mut actual] {
        if let Some(map) = v.as_object_mut() {
            map.remove(DIGEST_FIELD);
        }
    }
    differences("", &actual, &expected, findings);
}

/// The findings where `conformance` (a `conformance.yaml`) is not what `results` (the
/// `results.json` written beside it) renders to; each field named as
/// `conformance.yaml` has it.
pub fn agree(conformance: &ReportFile, results: &ReportFile) -> Vec<Finding> {
    let Parsed::Results(record) = &results.parsed else {
        return vec![finding("results.json", "does not read as a results record")];
    };
    let rendered =
        record
            .results()
            .map_err(|e| finding("results.json", e.to_string()))
            .and_then(|r| {
                let revision: Revision = record.identity.revision.parse().map_err(
                    |e: crate::vocab::UnknownRevision| finding("revision", e.to_string()),
                )?;
                let implementation = Implementation::from(&record.identity.implementation);
                Ok(
                    ConformanceReport::new(implementation, revision, &record.date, &r)
                        .with_provenance(record.provenance.clone()),
                )
            });
    let mut findings = Vec::new();
    match rendered {
        Ok(report) => compare(&conformance.value, &report, &mut findings),
        Err(f) => findings.push(f),
    }
    findings
}

/// The report `file`'s own per-case results aggregate to.
fn rebuild(file: &ConformanceFile) -> Result<ConformanceReport, Finding> {
    let revision: Revision = file
        .revision
        .parse()
        .map_err(|e: crate::vocab::UnknownRevision| finding("revision", e.to_string()))?;
    let timing: BTreeMap<&str, &FileCaseTiming> = file
        .timing
        .cases
        .iter()
        .map(|t| (t.case.as_str(), t))
        .collect();
    let points: BTreeMap<&str, &Vec<String>> = file
        .crash_points
        .iter()
        .map(|c| (c.case.as_str(), &c.points))
        .collect();
    let mut cases = Vec::new();
    for c in &file.cases {
        let t = timing.get(c.case.as_str());
        let ms = |f: fn(&FileCaseTiming) -> u64| t.map_or(0, |t| f(t));
        let record = CaseRecord {
            case: c.case.clone(),
            area: c.area.clone(),
            clauses: c.clauses.clone(),
            profile: c.profile.clone(),
            outcome: c.outcome.clone(),
            message: None,
            diff: None,
            expected: None,
            observed: None,
            timeline: None,
            broken: c.broken.clone(),
            wall_ms: ms(|t| t.wall_ms),
            waiting_ms: ms(|t| t.waiting_ms),
            holding_ms: ms(|t| t.holding_ms),
            queued_ms: ms(|t| t.queued_ms),
            crash_points: points
                .get(c.case.as_str())
                .cloned()
                .cloned()
                .unwrap_or_default(),
            fault_points: Vec::new(),
            api: None,
            passed_runs: c.passed_runs,
            runs: c.runs,
        };
        cases.push(
            record
                .to_result()
                .map_err(|e| finding(format!("cases[{}]", c.case), e.to_string()))?,
        );
    }
    let results = RunResults {
        cases,
        duration: std::time::Duration::from_millis(file.timing.run_ms),
    };
    Ok(
        ConformanceReport::new(file.implementation.clone(), revision, &file.date, &results)
            .with_provenance(file.provenance.clone()),
    )
}

/// Each case as the checkout defines it.
fn check_cases(cases: &[ReportedCase], checkout: &Checkout, findings: &mut Vec<Finding>) {
    for c in cases {
        let at = format!("cases[{}]", c.case);
        let Some(known) = checkout.cases.get(&c.case) else {
            findings.push(finding(at, "no case of this checkout's catalog"));
            continue;
        };
        if c.area != known.area {
            findings.push(finding(
                format!("{at}.area"),
                format!("the report says `{}`, the catalog `{}`", c.area, known.area),
            ));
        }
        if c.profile != known.profile.as_str() {
            findings.push(finding(
                format!("{at}.profile"),
                format!(
                    "the report says `{}`, the catalog `{}`",
                    c.profile, known.profile
                ),
            ));
        }
        if c.clauses != known.clauses {
            findings.push(finding(
                format!("{at}.clauses"),
                format!(
                    "the report says {}, the catalog {}",
                    c.clauses.join(", "),
                    known.clauses.join(", ")
                ),
            ));
        }
    }
}

/// The cases are the selection's: all of it, or, for a shard, a part of it.
fn check_selection(
    cases: &[ReportedCase],
    selected: &[String],
    provenance: &Provenance,
    findings: &mut Vec<Finding>,
) {
    let selected: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    let reported: BTreeSet<&str> = cases.iter().map(|c| c.case.as_str()).collect();
    for c in reported.difference(&selected) {
        findings.push(finding(
            format!("cases[{c}]"),
            "not selected by the report's selection in this checkout",
        ));
    }
    if !whole(provenance) {
        return;
    }
    for c in selected.difference(&reported) {
        findings.push(finding(
            format!("cases[{c}]"),
            "selected by the report's selection, but the report has no result for it",
        ));
    }
}

/// Whether the results cover the whole selection: no shard, or every shard of it.
fn whole(provenance: &Provenance) -> bool {
    let shards = &provenance.settings.shards;
    match shards.first().and_then(|s| s.parse::<Shard>().ok()) {
        Some(first) => shards.len() == first.count,
        None => shards.is_empty(),
    }
}

/// Every place where `actual` (the report) differs from `expected` (what its cases give).
fn differences(at: &str, actual: &Value, expected: &Value, findings: &mut Vec<Finding>) {
    const MAX: usize = 20;
    if findings.len() >= MAX || actual == expected {
        return;
    }
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            for (k, ev) in e {
                let path = join(at, k);
                match a.get(k) {
                    Some(av) => differences(&path, av, ev, findings),
                    None => findings.push(finding(path, format!("missing; its results give {ev}"))),
                }
            }
            for k in a.keys().filter(|k| !e.contains_key(*k)) {
                findings.push(finding(join(at, k), "not a field of the report"));
            }
        }
        (Value::Array(a), Value::Array(e)) if a.len() == e.len() => {
            for (i, (av, ev)) in a.iter().zip(e).enumerate() {
                differences(
                    &format!("{at}[{}]", key_of(ev).unwrap_or(i.to_string())),
                    av,
                    ev,
                    findings,
                );
            }
        }
        (Value::Array(a), Value::Array(e)) => findings.push(finding(
            at,
            format!(
                "the report has {} entries, its results give {}",
                a.len(),
                e.len()
            ),
        )),
        _ => findings.push(finding(
            at,
            format!("the report says {actual}; its results give {expected}"),
        )),
    }
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

/// An entry's name, for a path: its `profile`, `clause` or `case`.
fn key_of(entry: &Value) -> Option<String> {
    ["clause", "case", "profile"]
        .iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str).map(str::to_owned))
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
