//! The conformance report: implementation, revision, profile verdicts and per-clause
//! results, in YAML (for machines) and Markdown (for people).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::event::{Outcome, RunResults};
use super::provenance::Provenance;
use super::seal::digest_of;
use crate::catalog::{CLAUSES, Profile};
use crate::vocab::Revision;

/// The implementation under test, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Implementation {
    /// Name (`grove-reference-operator`).
    pub name: String,
    /// Version string it reports.
    pub version: String,
}

/// Case outcomes counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Tally {
    /// Passed.
    pub pass: usize,
    /// Failed.
    pub fail: usize,
    /// Skipped.
    pub skip: usize,
    /// Not applicable in the revision under test.
    pub not_applicable: usize,
    /// Could not be judged.
    pub error: usize,
    /// Repeated, passed some runs and failed others (left out when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub unstable: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Tally {
    fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail(_) => self.fail += 1,
            Outcome::Skip { .. } => self.skip += 1,
            Outcome::NotApplicable { .. } => self.not_applicable += 1,
            Outcome::Error { .. } => self.error += 1,
            Outcome::Unstable { .. } => self.unstable += 1,
        }
    }

    /// Cases that apply in the revision.
    fn total(self) -> usize {
        self.pass + self.fail + self.skip + self.error + self.unstable
    }
}

/// The verdict for one profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileVerdict {
    /// The profile.
    pub profile: Profile,
    /// Conformant iff at least one case of the profile ran and every one passed.
    pub conformant: bool,
    /// Its cases counted.
    pub cases: Tally,
}

/// The result for one clause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClauseVerdict {
    /// Clause id.
    pub clause: &'static str,
    /// Clause title.
    pub title: &'static str,
    /// Its profile.
    pub profile: Profile,
    /// `pass`, `fail`, `partial` (some passed, the rest skipped), `skip`, `n/a` (not
    /// applicable in the revision: every case citing it checks what the revision does not
    /// define) or `untested`.
    pub verdict: &'static str,
    /// Outcomes of the cases citing it.
    pub cases: Tally,
    /// Names of the cases citing it that did not pass.
    pub not_passed: Vec<String>,
}

/// The `apiVersion` of `conformance.yaml`.
pub const REPORT_API_VERSION: &str = "conformance.grove.io/v1alpha1";
/// The `kind` of `conformance.yaml`.
pub const REPORT_KIND: &str = "JobConformanceReport";

/// One case's result as the report lists it: enough to aggregate the report again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ReportedCase {
    /// The case.
    pub case: String,
    /// Its area.
    pub area: String,
    /// `core` or `extended`.
    pub profile: String,
    /// The clauses it cites.
    pub clauses: Vec<String>,
    /// Its verdict (`pass`, `fail`, `unstable`, `skip`, `n/a`, `error`).
    pub outcome: String,
    /// An unstable case's runs that passed, of [`ReportedCase::runs`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_runs: Option<u32>,
    /// An unstable case's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
    /// The clauses a failure names broken (an invariant violation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken: Vec<String>,
}

impl ReportedCase {
    fn of(r: &super::CaseResult) -> Self {
        let (passed_runs, runs) = match &r.outcome {
            Outcome::Unstable { passed, runs, .. } => (Some(*passed), Some(*runs)),
            _ => (None, None),
        };
        let broken = match &r.outcome {
            Outcome::Fail(f) | Outcome::Unstable { failure: f, .. } => f.broken.clone(),
            _ => Vec::new(),
        };
        ReportedCase {
            case: r.case.clone(),
            area: r.area.clone(),
            profile: r.profile.as_str().to_owned(),
            clauses: r.clauses.clone(),
            outcome: r.outcome.label().to_owned(),
            passed_runs,
            runs,
            broken,
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConformanceReport {
    /// [`REPORT_API_VERSION`].
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// [`REPORT_KIND`].
    pub kind: &'static str,
    /// The implementation.
    pub implementation: Implementation,
    /// The spec revision the run used.
    pub revision: String,
    /// When the run happened (RFC 3339), as given by the caller.
    pub date: String,
    /// What produced it (absent only in reports built by hand, as tests do).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// One verdict per profile (core first).
    pub profiles: Vec<ProfileVerdict>,
    /// One entry per clause of the spec, in spec order.
    pub clauses: Vec<ClauseVerdict>,
    /// Every case's result, by name.
    pub cases: Vec<ReportedCase>,
    /// Where each case's pinned crashes landed (cases with none are left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub crash_points: Vec<CrashPoints>,
    /// Where the run's time went.
    pub timing: Timing,
    /// The digest of everything above (see `seal`): an edit by hand shows.
    pub digest: String,
}

/// Where a run's time went, in milliseconds: the run's wall time, the cases' summed wall time
/// split into waiting on the implementation, `for:` holds and harness overhead, and the time
/// slots were held queued behind exclusive cases; then the same per case, slowest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timing {
    /// The run's wall time.
    pub run_ms: u64,
    /// The cases' summed split.
    #[serde(flatten)]
    pub totals: CaseTiming,
    /// Per case, slowest first.
    pub cases: Vec<NamedTiming>,
}

/// One time split, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct CaseTiming {
    /// Wall time (waiting + holding + overhead).
    pub wall_ms: u64,
    /// Waiting on the implementation.
    pub waiting_ms: u64,
    /// `for:` holds.
    pub holding_ms: u64,
    /// Harness overhead.
    pub overhead_ms: u64,
    /// Queued behind an exclusive case (before the wall time).
    pub queued_ms: u64,
}

/// The time split of one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedTiming {
    /// The case.
    pub case: String,
    /// Its split.
    #[serde(flatten)]
    pub time: CaseTiming,
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Timing {
    /// The split of `results`, each case's times taken to the millisecond first (the
    /// overhead the rest of its wall time, the totals the sums), so that a report read back
    /// from its milliseconds gives the same figures.
    fn of(results: &RunResults) -> Timing {
        let mut cases: Vec<NamedTiming> = results
            .cases
            .iter()
            .map(|r| {
                let (wall_ms, waiting_ms, holding_ms) = (
                    millis(r.duration),
                    millis(r.time.waiting),
                    millis(r.time.holding),
                );
                NamedTiming {
                    case: r.case.clone(),
                    time: CaseTiming {
                        wall_ms,
                        waiting_ms,
                        holding_ms,
                        overhead_ms: wall_ms.saturating_sub(waiting_ms + holding_ms),
                        queued_ms: millis(r.time.queued),
                    },
                }
            })
            .collect();
        let mut totals = CaseTiming::default();
        for c in &cases {
            totals.wall_ms += c.time.wall_ms;
            totals.waiting_ms += c.time.waiting_ms;
            totals.holding_ms += c.time.holding_ms;
            totals.overhead_ms += c.time.overhead_ms;
            totals.queued_ms += c.time.queued_ms;
        }
        cases.sort_by(|a, b| {
            b.time
                .wall_ms
                .cmp(&a.time.wall_ms)
                .then_with(|| a.case.cmp(&b.case))
        });
        Timing {
            run_ms: millis(results.duration),
            totals,
            cases,
        }
    }
}

/// Where the pinned crashes of one case landed, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CrashPoints {
    /// The case.
    pub case: String,
    /// One line per crash: before or after which request.
    pub points: Vec<String>,
}

impl Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What a case's `outcome` counts for clause `clause` (which the case cites or not), if
/// anything. A failure that names the clauses it broke (an invariant violation) is charged
/// to those, cited or not; for the others the case cites it stopped before they were judged,
/// so it counts as skipped there.
///
/// | failure names its broken clauses | clause among them | cited | counts as |
/// |---|---|---|---|
/// | no (or not a failure) | - | yes | the outcome |
/// | no (or not a failure) | - | no | nothing |
/// | yes | yes | - | fail |
/// | yes | no | yes | skipped |
/// | yes | no | no | nothing |
fn charged(outcome: &Outcome, cited: bool, clause: &str) -> Option<Outcome> {
    match outcome {
        Outcome::Fail(f) | Outcome::Unstable { failure: f, .. } if !f.broken.is_empty() => {
            if f.broken.iter().any(|b| b == clause) {
                Some(outcome.clone())
            } else if cited {
                Some(Outcome::Skip {
                    reason: format!(
                        "not judged: the case stopped on a violation of {}",
                        f.broken.join(", ")
                    ),
                })
            } else {
                None
            }
        }
        _ => cited.then(|| outcome.clone()),
    }
}

impl ConformanceReport {
    /// Aggregates `results` per profile and clause.
    pub fn new(
        implementation: Implementation,
        revision: Revision,
        date: &str,
        results: &RunResults,
    ) -> Self {
        let profiles = [Profile::Core, Profile::Extended]
            .into_iter()
            .map(|profile| {
                let mut cases = Tally::default();
                for r in results.cases.iter().filter(|r| r.profile == profile) {
                    cases.add(&r.outcome);
                }
                ProfileVerdict {
                    profile,
                    conformant: cases.total() > 0 && cases.pass == cases.total(),
                    cases,
                }
            })
            .collect();
        let clauses = CLAUSES
            .iter()
            .map(|c| {
                let mut cases = Tally::default();
                let mut not_passed = Vec::new();
                for r in results.sorted() {
                    let cited = r.clauses.iter().any(|id| id == c.id);
                    let Some(outcome) = charged(&r.outcome, cited, c.id) else {
                        continue;
                    };
                    cases.add(&outcome);
                    if !matches!(outcome, Outcome::Pass | Outcome::NotApplicable { .. }) {
                        not_passed.push(r.case.clone());
                    }
                }
                // Cases not applicable in the revision are left out; a clause all of whose
                // cases are is `n/a`.
                // | cases | any fail/error | all pass | some pass | verdict |
                // |---|---|---|---|---|
                // | 0, some n/a | - | - | - | n/a |
                // | 0 | - | - | - | untested |
                // | >0 | yes | - | - | fail |
                // | >0 | no, but unstable | - | - | unstable |
                // | >0 | no | yes | - | pass |
                // | >0 | no | no | yes | partial |
                // | >0 | no | no | no | skip |
                let verdict = match (
                    cases.total(),
                    cases.fail + cases.error > 0,
                    cases.pass == cases.total(),
                    cases.pass > 0,
                ) {
                    (0, _, _, _) if cases.not_applicable > 0 => "n/a",
                    (0, _, _, _) => "untested",
                    (_, true, _, _) => "fail",
                    _ if cases.unstable > 0 => "unstable",
                    (_, false, true, _) => "pass",
                    (_, false, false, true) => "partial",
                    (_, false, false, false) => "skip",
                };
                ClauseVerdict {
                    clause: c.id,
                    title: c.title,
                    profile: c.profile(),
                    verdict,
                    cases,
                    not_passed,
                }
            })
            .collect();
        let crash_points = results
            .sorted()
            .into_iter()
            .filter(|r| !r.crash_points.is_empty() || !r.fault_points.is_empty())
            .map(|r| CrashPoints {
                case: r.case.clone(),
                points: [r.crash_points.clone(), r.fault_points.clone()].concat(),
            })
            .collect();
        ConformanceReport {
            api_version: REPORT_API_VERSION,
            kind: REPORT_KIND,
            implementation,
            revision: revision.id().to_owned(),
            date: date.to_owned(),
            provenance: None,
            profiles,
            clauses,
            cases: results.sorted().into_iter().map(ReportedCase::of).collect(),
            crash_points,
            timing: Timing::of(results),
            digest: String::new(),
        }
        .sealed()
    }

    /// The report saying what produced it.
    pub fn with_provenance(mut self, provenance: Option<Provenance>) -> Self {
        self.provenance = provenance;
        self.sealed()
    }

    /// The report as JSON values, as `verify-report` compares them.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a conformance report serializes")
    }

    /// With `digest` that of the rest ([`digest_of`] leaves the field out).
    fn sealed(mut self) -> Self {
        self.digest = digest_of(&self.to_value());
        self
    }

    /// Whether the implementation is conformant (the core profile's verdict).
    pub fn conformant(&self) -> bool {
        self.profiles
            .iter()
            .any(|p| p.profile == Profile::Core && p.conformant)
    }

    /// The report as YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_else(|e| format!("# failed to render: {e}\n"))
    }

    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# Grove job support conformance report\n");
        let _ = writeln!(
            out,
            "- implementation: {} {}",
            self.implementation.name, self.implementation.version
        );
        let _ = writeln!(out, "- spec revision: `{}`", self.revision);
        let _ = writeln!(out, "- date: {}", self.date);
        for (label, value) in self.provenance.iter().flat_map(Provenance::lines) {
            let _ = writeln!(out, "- {label}: {value}");
        }
        let _ = writeln!(out, "- digest: `{}`\n", self.digest);
        let _ = writeln!(
            out,
            "| profile | verdict | pass | unstable | fail | skip | error | not applicable in this revision |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for p in &self.profiles {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                p.profile,
                if p.conformant {
                    "conformant"
                } else {
                    "not conformant"
                },
                p.cases.pass,
                p.cases.unstable,
                p.cases.fail,
                p.cases.skip,
                p.cases.error,
                p.cases.not_applicable
            );
        }
        let _ = writeln!(
            out,
            "\n| clause | profile | title | verdict | pass | unstable | fail | skip | error | not passed |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
        for c in &self.clauses {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.clause,
                c.profile,
                c.title,
                c.verdict,
                c.cases.pass,
                c.cases.unstable,
                c.cases.fail,
                c.cases.skip,
                c.cases.error,
                c.not_passed.join(", ")
            );
        }
        if !self.crash_points.is_empty() {
            let _ = writeln!(out, "\n## Pinned crash points\n");
            let _ = writeln!(out, "| case | where the crash landed |");
            let _ = writeln!(out, "|---|---|");
            for c in &self.crash_points {
                let _ = writeln!(out, "| {} | {} |", c.case, c.points.join("; "));
            }
        }
        let s = |ms: u64| format!("{:.1} s", Duration::from_millis(ms).as_secs_f64());
        let t = &self.timing;
        let _ = writeln!(out, "\n## Where the time went\n");
        let _ = writeln!(
            out,
            "Run: {}. Cases, summed: {}: waiting on the implementation {}, `for:` holds {}, harness overhead {}; slots queued behind exclusive cases {}.\n",
            s(t.run_ms),
            s(t.totals.wall_ms),
            s(t.totals.waiting_ms),
            s(t.totals.holding_ms),
            s(t.totals.overhead_ms),
            s(t.totals.queued_ms)
        );
        let _ = writeln!(
            out,
            "| slowest cases | wall | waiting | holds | overhead | queued |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for c in t.cases.iter().take(10) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                c.case,
                s(c.time.wall_ms),
                s(c.time.waiting_ms),
                s(c.time.holding_ms),
                s(c.time.overhead_ms),
                s(c.time.queued_ms)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::event::{CaseResult, Failure};

    fn result(case: &str, clauses: &[&str], outcome: Outcome) -> CaseResult {
        CaseResult {
            case: case.into(),
            area: "a".into(),
            clauses: clauses.iter().map(|c| c.to_string()).collect(),
            profile: Profile::Core,
            outcome,
            duration: Duration::ZERO,
            time: crate::report::TimeSplit::default(),
            crash_points: Vec::new(),
            fault_points: Vec::new(),
            api: None,
        }
    }

    fn report_of(results: &RunResults) -> ConformanceReport {
        let implementation = Implementation {
            name: "x".into(),
            version: "1".into(),
        };
        ConformanceReport::new(implementation, Revision::default(), "2026-12-01", results)
    }

    fn verdict<'a>(report: &'a ConformanceReport, clause: &str) -> &'a ClauseVerdict {
        report.clauses.iter().find(|c| c.clause == clause).unwrap()
    }

    #[test]
    fn an_invariant_violation_is_charged_to_the_clause_broken_not_to_every_clause_cited() {
        let violation = Outcome::Fail(Failure {
            message: "invariant violated: O1: ...".into(),
            broken: vec!["O1".into()],
            ..Failure::default()
        });
        let expectation = Outcome::Fail(Failure {
            message: "not true within 30s".into(),
            ..Failure::default()
        });
        let results = RunResults {
            cases: vec![
                result("stopped-early", &["E8", "R3"], violation),
                result("fine", &["E8"], Outcome::Pass),
                result("wrong-count", &["R6"], expectation),
            ],
            duration: Duration::ZERO,
        };
        let report = report_of(&results);
        let o1 = verdict(&report, "O1");
        assert_eq!((o1.verdict, o1.cases.fail), ("fail", 1));
        assert_eq!(o1.not_passed, vec!["stopped-early".to_string()]);
        let e8 = verdict(&report, "E8");
        assert_eq!(
            (e8.verdict, e8.cases.pass, e8.cases.skip),
            ("partial", 1, 1)
        );
        assert_eq!(verdict(&report, "R3").verdict, "skip");
        // A failed expectation still counts against every clause its case cites.
        assert_eq!(verdict(&report, "R6").verdict, "fail");
    }

    #[test]
    fn an_unstable_case_makes_its_clauses_unstable_and_its_profile_not_conformant() {
        let unstable = Outcome::Unstable {
            passed: 6,
            runs: 8,
            failure: Failure::default(),
        };
        let results = RunResults {
            cases: vec![
                result("lucky", &["E8", "R3"], unstable),
                result("fine", &["E8"], Outcome::Pass),
                result("wrong", &["R3"], Outcome::Fail(Failure::default())),
            ],
            duration: Duration::ZERO,
        };
        let report = report_of(&results);
        let e8 = verdict(&report, "E8");
        assert_eq!(
            (e8.verdict, e8.cases.unstable, e8.cases.pass),
            ("unstable", 1, 1)
        );
        assert_eq!(e8.not_passed, ["lucky"]);
        assert_eq!(
            verdict(&report, "R3").verdict,
            "fail",
            "a failure outweighs it"
        );
        assert!(!report.conformant());
        assert!(report.to_yaml().contains("unstable: 1"));
        assert!(report.to_markdown().contains("| unstable |"));
    }
}
