//! `results.json`: everything a run produced, for machines: what was run (catalog digest,
//! revision, implementation, selection, shard) and every case's result in full. It is what
//! `grove-conformance merge` reads: shards of one run merge into the results one run would
//! have given, from which every report is rendered again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{CaseResult, Failure, Outcome, RunResults, TimeSplit};
use super::failures::Compared;
use super::provenance::Provenance;
use super::seal::digest_of;
use super::{ApiCost, Implementation};
use crate::catalog::Profile;
use crate::schedule::Shard;

/// The format of `results.json` this build writes and reads.
pub const RECORD_FORMAT: u32 = 1;

/// What a run was asked to do, independently of its shard: shards of one run agree on all
/// of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// The implementation's name and version.
    pub implementation: RecordedImplementation,
    /// The spec revision.
    pub revision: String,
    /// A digest of every case and fixture file of the catalog.
    pub catalog: String,
    /// The cases selected before sharding, sorted by name.
    pub selected: Vec<String>,
}

/// [`Implementation`] as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedImplementation {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
}

impl From<&Implementation> for RecordedImplementation {
    fn from(i: &Implementation) -> Self {
        RecordedImplementation {
            name: i.name.clone(),
            version: i.version.clone(),
        }
    }
}

impl From<&RecordedImplementation> for Implementation {
    fn from(i: &RecordedImplementation) -> Self {
        Implementation {
            name: i.name.clone(),
            version: i.version.clone(),
        }
    }
}

/// A run's `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`RECORD_FORMAT`].
    pub format: u32,
    /// What was run.
    #[serde(flatten)]
    pub identity: RunIdentity,
    /// The shard this run was, if it was one.
    pub shard: Option<Shard>,
    /// The day of the run (`YYYY-MM-DD`).
    pub date: String,
    /// The run's wall time.
    pub run_ms: u64,
    /// Every case this run ran, in completion order.
    pub cases: Vec<CaseRecord>,
    /// What produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// The digest of everything above (see `seal`): an edit by hand shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// One case's result as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseRecord {
    /// Case name.
    pub case: String,
    /// Its area.
    pub area: String,
    /// The clauses it cites.
    pub clauses: Vec<String>,
    /// `core` or `extended`.
    pub profile: String,
    /// `pass`, `fail`, `skip`, `n/a` or `error`.
    pub outcome: String,
    /// The skip or not-applicable reason, the failure or error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A failure's plain diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// A failure's compared values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// A failure's compared values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Value>,
    /// A failure's timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<String>,
    /// The clauses a failure names broken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken: Vec<String>,
    /// Wall time.
    pub wall_ms: u64,
    /// Waiting on the implementation.
    pub waiting_ms: u64,
    /// `for:` holds.
    pub holding_ms: u64,
    /// Queued before it started.
    pub queued_ms: u64,
    /// Where its pinned crashes landed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crash_points: Vec<String>,
    /// Where its faults started and what they held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault_points: Vec<String>,
    /// What the implementation cost the apiserver, when an API proxy saw its requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<ApiCost>,
    /// An unstable case's runs that passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_runs: Option<u32>,
    /// An unstable case's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl From<&CaseResult> for CaseRecord {
    fn from(r: &CaseResult) -> Self {
        let mut record = CaseRecord {
            case: r.case.clone(),
            area: r.area.clone(),
            clauses: r.clauses.clone(),
            profile: r.profile.as_str().to_owned(),
            outcome: r.outcome.label().to_owned(),
            message: None,
            diff: None,
            expected: None,
            observed: None,
            timeline: None,
            broken: Vec::new(),
            wall_ms: millis(r.duration),
            waiting_ms: millis(r.time.waiting),
            holding_ms: millis(r.time.holding),
            queued_ms: millis(r.time.queued),
            crash_points: r.crash_points.clone(),
            fault_points: r.fault_points.clone(),
            api: r.api.clone(),
            passed_runs: None,
            runs: None,
        };
        match &r.outcome {
            Outcome::Pass => {}
            Outcome::Fail(f) | Outcome::Unstable { failure: f, .. } => {
                record.message = Some(f.message.clone());
                record.diff = f.diff.clone();
                record.expected = f.compared.as_ref().map(|c| c.expected.clone());
                record.observed = f.compared.as_ref().map(|c| c.observed.clone());
                record.timeline = f.timeline.clone();
                record.broken = f.broken.clone();
            }
            Outcome::Skip { reason } | Outcome::NotApplicable { reason } => {
                record.message = Some(reason.clone());
            }
            Outcome::Error { message } => record.message = Some(message.clone()),
        }
        if let Outcome::Unstable { passed, runs, .. } = &r.outcome {
            record.passed_runs = Some(*passed);
            record.runs = Some(*runs);
        }
        record
    }
}

impl CaseRecord {
    /// The result it records; `Err` names what does not read.
    pub fn to_result(&self) -> Result<CaseResult, RecordError> {
        let profile: Profile = self
            .profile
            .parse()
            .map_err(|_| RecordError::UnknownProfile {
                case: self.case.clone(),
                profile: self.profile.clone(),
            })?;
        let message = self.message.clone().unwrap_or_default();
        let failure = || Failure {
            message: message.clone(),
            diff: self.diff.clone(),
            compared: match (&self.expected, &self.observed) {
                (Some(expected), Some(observed)) => Some(Box::new(Compared {
                    expected: expected.clone(),
                    observed: observed.clone(),
                })),
                _ => None,
            },
            timeline: self.timeline.clone(),
            broken: self.broken.clone(),
        };
        let outcome = match self.outcome.as_str() {
            "pass" => Outcome::Pass,
            "fail" => Outcome::Fail(failure()),
            "unstable" => match (self.passed_runs, self.runs) {
                (Some(passed), Some(runs)) if 0 < passed && passed < runs => Outcome::Unstable {
                    passed,
                    runs,
                    failure: failure(),
                },
                _ => {
                    return Err(RecordError::UnstableRuns {
                        case: self.case.clone(),
                    });
                }
            },
            "skip" => Outcome::Skip { reason: message },
            "n/a" => Outcome::NotApplicable { reason: message },
            "error" => Outcome::Error { message },
            other => {
                return Err(RecordError::UnknownOutcome {
                    case: self.case.clone(),
                    outcome: other.to_owned(),
                });
            }
        };
        Ok(CaseResult {
            case: self.case.clone(),
            area: self.area.clone(),
            clauses: self.clauses.clone(),
            profile,
            outcome,
            duration: Duration::from_millis(self.wall_ms),
            time: TimeSplit {
                waiting: Duration::from_millis(self.waiting_ms),
                holding: Duration::from_millis(self.holding_ms),
                queued: Duration::from_millis(self.queued_ms),
            },
            crash_points: self.crash_points.clone(),
            fault_points: self.fault_points.clone(),
            api: self.api.clone(),
        })
    }
}

impl RunRecord {
    /// The record of `results`.
    pub fn new(
        identity: RunIdentity,
        shard: Option<Shard>,
        date: &str,
        results: &RunResults,
    ) -> RunRecord {
        RunRecord {
            format: RECORD_FORMAT,
            identity,
            shard,
            date: date.to_owned(),
            run_ms: millis(results.duration),
            cases: results.cases.iter().map(CaseRecord::from).collect(),
            provenance: None,
            digest: None,
        }
        .sealed()
    }

    /// The record saying what produced it.
    pub fn with_provenance(mut self, provenance: Option<Provenance>) -> Self {
        self.provenance = provenance;
        self.sealed()
    }

    /// With `digest` that of the rest ([`digest_of`] leaves the field out).
    fn sealed(mut self) -> Self {
        let value = serde_json::to_value(&self).expect("a run record serializes");
        self.digest = Some(digest_of(&value));
        self
    }

    /// The results it records.
    pub fn results(&self) -> Result<RunResults, RecordError> {
        Ok(RunResults {
            cases: self
                .cases
                .iter()
                .map(CaseRecord::to_result)
                .collect::<Result<_, _>>()?,
            duration: Duration::from_millis(self.run_ms),
        })
    }

    /// As JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a run record serializes")
    }

    /// Reads a record; `Err` says what is wrong (with line and column).
    pub fn from_json(text: &str) -> Result<RunRecord, RecordError> {
        let value: Value = serde_json::from_str(text)?;
        match value.get("format").and_then(Value::as_u64) {
            Some(f) if f == u64::from(RECORD_FORMAT) => {}
            Some(f) => return Err(RecordError::Format { found: f }),
            None => return Err(RecordError::NoFormat),
        }
        Ok(serde_json::from_str(text)?)
    }
}

/// Why a results record does not read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not JSON, or not a record's shape (with line and column).
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A record of another format.
    #[error("format {found}, this build reads format {RECORD_FORMAT}")]
    Format {
        /// The record's format.
        found: u64,
    },
    /// No format at all.
    #[error("no `format`: not a grove-conformance results.json")]
    NoFormat,
    /// A case's profile is not one this build knows.
    #[error("case `{case}`: unknown profile `{profile}`")]
    UnknownProfile {
        /// The case.
        case: String,
        /// Its profile as recorded.
        profile: String,
    },
    /// An unstable case without the runs it passed and ran (`0 < passed_runs < runs`).
    #[error(
        "case `{case}`: outcome `unstable` needs `passed_runs` and `runs`, 0 < passed_runs < runs"
    )]
    UnstableRuns {
        /// The case.
        case: String,
    },
    /// A case's outcome is not one this build knows.
    #[error("case `{case}`: unknown outcome `{outcome}`")]
    UnknownOutcome {
        /// The case.
        case: String,
        /// Its outcome as recorded.
        outcome: String,
    },
}

/// Why shard records do not merge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no results to merge")]
    Empty,
    /// Two records ran different things.
    #[error("{first} and {other} are not shards of one run: their {what} differ ({a} vs {b})")]
    Different {
        /// One record.
        first: String,
        /// The other.
        other: String,
        /// `catalog`, `revision`, `implementation`, `selection` or `shard count`.
        what: &'static str,
        /// The first's.
        a: String,
        /// The other's.
        b: String,
    },
    /// Shards or cases missing or given twice.
    #[error("the shards do not make up the run:\n{}", .problems.join("\n"))]
    Incomplete {
        /// One line per problem.
        problems: Vec<String>,
    },
}

/// Merges the records of the shards of one run, each named by where it came from, into the
/// results one run of the whole selection would have given (its wall time the longest
/// shard's, as when the shards run side by side). Refuses records of different catalogs,
/// revisions, implementations or selections, and names every missing or repeated shard and
/// case.
pub fn merge(records: &[(String, RunRecord)]) -> Result<(RunIdentity, RunResults), MergeError> {
    let (first_name, first) = records.first().ok_or(MergeError::Empty)?;
    for (name, r) in &records[1..] {
        let differ = |what, a: String, b: String| MergeError::Different {
            first: first_name.clone(),
            other: name.clone(),
            what,
            a,
            b,
        };
        let (fi, ri) = (&first.identity, &r.identity);
        if fi.catalog != ri.catalog {
            return Err(differ("catalog", fi.catalog.clone(), ri.catalog.clone()));
        }
        if fi.revision != ri.revision {
            return Err(differ("revision", fi.revision.clone(), ri.revision.clone()));
        }
        if fi.implementation != ri.implementation {
            let show = |i: &RecordedImplementation| format!("{}@{}", i.name, i.version);
            return Err(differ(
                "implementation",
                show(&fi.implementation),
                show(&ri.implementation),
            ));
        }
        if fi.selected != ri.selected {
            return Err(differ(
                "selection",
                format!("{} cases", fi.selected.len()),
                format!("{} cases", ri.selected.len()),
            ));
        }
        let count = |s: Option<Shard>| s.map_or("none".to_owned(), |s| s.count.to_string());
        if first.shard.map(|s| s.count) != r.shard.map(|s| s.count) {
            return Err(differ("shard count", count(first.shard), count(r.shard)));
        }
    }
    let mut problems = Vec::new();
    let count = first.shard.map_or(1, |s| s.count);
    let mut shards: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (name, r) in records {
        shards
            .entry(r.shard.map_or(1, |s| s.index))
            .or_default()
            .push(name);
    }
    for index in 1..=count {
        match shards.get(&index).map(Vec::as_slice) {
            None | Some([]) => problems.push(format!("shard {index}/{count} is missing")),
            Some([_]) => {}
            Some(many) => problems.push(format!(
                "shard {index}/{count} is given more than once: {}",
                many.join(", ")
            )),
        }
    }
    let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, r) in records {
        for c in &r.cases {
            seen.entry(&c.case).or_default().push(name);
        }
    }
    let selected: BTreeSet<&str> = first.identity.selected.iter().map(String::as_str).collect();
    for (case, from) in &seen {
        if !selected.contains(case) {
            problems.push(format!(
                "case `{case}` ({}) was not selected",
                from.join(", ")
            ));
        } else if from.len() > 1 {
            problems.push(format!(
                "case `{case}` is in more than one result: {}",
                from.join(", ")
            ));
        }
    }
    let missing: Vec<&str> = selected
        .iter()
        .filter(|c| !seen.contains_key(*c))
        .copied()
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} selected case(s) have no result: {}",
            missing.len(),
            missing.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(MergeError::Incomplete { problems });
    }
    let mut merged = RunResults::default();
    for (name, r) in records {
        let results = r.results().map_err(|e| MergeError::Incomplete {
            problems: vec![format!("{name}: {e}")],
        })?;
        merged.duration = merged.duration.max(results.duration);
        merged.cases.extend(results.cases);
    }
    Ok((first.identity.clone(), merged))
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
