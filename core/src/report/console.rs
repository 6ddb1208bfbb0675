//! Terminal output: a live progress line and the end-of-run summary table.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

use super::event::{CaseResult, Outcome, RunEvent, RunResults};

/// Formats a duration as seconds with one decimal (`12.3s`).
pub fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// A live progress writer: on a terminal one line rewritten in place (`[3/45] case: step`),
/// elsewhere one line per finished case, so logs stay readable.
#[derive(Debug)]
pub struct ProgressLine<W: Write> {
    out: W,
    interactive: bool,
    total: usize,
    finished: usize,
}

impl<W: Write> ProgressLine<W> {
    /// A writer to `out`; `interactive` when `out` is a terminal.
    pub fn new(out: W, interactive: bool) -> Self {
        ProgressLine {
            out,
            interactive,
            total: 0,
            finished: 0,
        }
    }

    /// Consumes one event; an I/O error means the terminal went away.
    pub fn on_event(&mut self, event: &RunEvent) -> io::Result<()> {
        match event {
            RunEvent::RunStarted { cases } => {
                self.total = *cases;
                Ok(())
            }
            RunEvent::CaseStarted { case } => {
                if self.interactive {
                    self.rewrite(&format!("{case}: starting"))
                } else {
                    Ok(())
                }
            }
            RunEvent::StepStarted {
                case,
                index,
                description,
            } => {
                if self.interactive {
                    self.rewrite(&format!("{case}: step {} {description}", index + 1))
                } else {
                    Ok(())
                }
            }
            RunEvent::CaseFinished(r) => {
                self.finished += 1;
                let line = format!(
                    "{:<5} {} ({}){}",
                    r.outcome.shown().to_uppercase(),
                    r.case,
                    seconds(r.duration),
                    match &r.outcome {
                        Outcome::Pass => String::new(),
                        Outcome::Fail(f) => format!(": {}", f.message),
                        Outcome::Unstable { failure, .. } => format!(": {}", failure.message),
                        Outcome::Skip { reason } => format!(" skipped: {reason}"),
                        Outcome::NotApplicable { reason } => {
                            format!(" not applicable in this revision: {reason}")
                        }
                        Outcome::Error { message } => format!(": {message}"),
                    }
                );
                if self.interactive {
                    write!(self.out, "\r\x1b[2K")?;
                }
                writeln!(self.out, "[{}/{}] {line}", self.finished, self.total)?;
                for point in r.crash_points.iter().chain(&r.fault_points) {
                    writeln!(self.out, "        {point}")?;
                }
                if let Some(finding) = r.api.as_ref().and_then(|a| a.restraint_finding()) {
                    writeln!(self.out, "        {finding}")?;
                }
                self.out.flush()
            }
            RunEvent::RepeatFinished { run, result } => {
                if self.interactive {
                    let label = result.outcome.label();
                    self.rewrite(&format!("{}: run {run} {label}", result.case))
                } else {
                    Ok(())
                }
            }
            RunEvent::RunFinished { .. } => {
                if self.interactive {
                    write!(self.out, "\r\x1b[2K")?;
                }
                self.out.flush()
            }
        }
    }

    fn rewrite(&mut self, text: &str) -> io::Result<()> {
        write!(
            self.out,
            "\r\x1b[2K[{}/{}] {text}",
            self.finished + 1,
            self.total
        )?;
        self.out.flush()
    }
}

/// The summary table: case, clauses, result, wall time and where it went (waiting on the
/// implementation, `for:` holds, harness overhead, queued behind an exclusive case); then
/// the totals.
pub fn summary_table(results: &RunResults) -> String {
    const COLUMNS: usize = 11;
    let rows: Vec<&CaseResult> = results.sorted();
    let header = [
        "case", "clauses", "result", "duration", "waiting", "holds", "overhead", "queued",
        "requests", "writes", "after",
    ];
    // What the implementation cost (`-` where no API proxy saw its requests): requests,
    // writes, and writes after the required state (L2).
    let api = |r: &CaseResult, f: fn(&super::ApiCost) -> Option<u64>| {
        r.api
            .as_ref()
            .and_then(f)
            .map_or_else(|| "-".to_owned(), |n| n.to_string())
    };
    let cells: Vec<[String; COLUMNS]> = rows
        .iter()
        .map(|r| {
            [
                r.case.clone(),
                r.clauses.join(","),
                r.outcome.shown(),
                seconds(r.duration),
                seconds(r.time.waiting),
                seconds(r.time.holding),
                seconds(r.time.overhead(r.duration)),
                seconds(r.time.queued),
                api(r, |a| Some(a.total)),
                api(r, |a| Some(a.writes)),
                api(r, |a| a.writes_after_required),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: [&str; COLUMNS]| {
        let mut text = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            // Names and words left, times right.
            if i < 3 {
                let _ = write!(text, "{cell:<width$}");
            } else {
                let _ = write!(text, "{cell:>width$}");
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut out, header);
    for row in &cells {
        line(&mut out, row.each_ref().map(String::as_str));
    }
    let t = results.time_totals();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "case time {}: waiting {}, holds {}, overhead {}; queued behind exclusive cases {}",
        seconds(t.cases),
        seconds(t.waiting),
        seconds(t.holding),
        seconds(t.overhead),
        seconds(t.queued)
    );
    let costs: Vec<&super::ApiCost> = rows.iter().filter_map(|r| r.api.as_ref()).collect();
    if !costs.is_empty() {
        let sum = |f: fn(&super::ApiCost) -> u64| costs.iter().map(|a| f(a)).sum::<u64>();
        let findings = costs.iter().filter(|a| !a.late_writes.is_empty()).count();
        let _ = writeln!(
            out,
            "API cost over {} case(s): {} requests, {} writes, {} after the required state; {findings} with writes past the restraint bound (L2)",
            costs.len(),
            sum(|a| a.total),
            sum(|a| a.writes),
            sum(|a| a.writes_after_required.unwrap_or(0)),
        );
    }
    let c = results.counts();
    // The closing line keeps the common `N passed, N failed, N skipped` form that CI
    // systems read; harness errors count as failures there and are detailed above it. Cases
    // the revision does not define are not applicable, as in the conformance report, never
    // skipped.
    if c.unstable > 0 {
        let _ = writeln!(
            out,
            "{} of the failed cases were unstable: they passed some of their runs and failed others",
            c.unstable
        );
    }
    if c.error > 0 {
        let _ = writeln!(
            out,
            "{} of the failed cases could not be judged (harness errors); total time {}",
            c.error,
            seconds(results.duration)
        );
    } else {
        let _ = writeln!(out, "total time {}", seconds(results.duration));
    }
    let _ = write!(
        out,
        "{} passed, {} failed, {} skipped",
        c.pass,
        c.fail + c.error + c.unstable,
        c.skip
    );
    if c.not_applicable > 0 {
        let _ = write!(
            out,
            ", {} not applicable in this revision",
            c.not_applicable
        );
    }
    let _ = writeln!(out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Profile;

    fn ended(case: &str, outcome: Outcome) -> CaseResult {
        CaseResult {
            case: case.into(),
            area: "a".into(),
            clauses: vec!["E1".into()],
            profile: Profile::Core,
            outcome,
            duration: Duration::from_secs(1),
            time: Default::default(),
            crash_points: Vec::new(),
            fault_points: Vec::new(),
            api: None,
        }
    }

    #[test]
    fn the_last_line_counts_cases_of_another_revision_as_not_applicable_not_skipped() {
        let not_applicable = || Outcome::NotApplicable {
            reason: "the revision has no PodCliqueSet outcomes".into(),
        };
        let results = RunResults {
            cases: vec![
                ended("a", Outcome::Pass),
                ended("b", not_applicable()),
                ended("c", not_applicable()),
                ended(
                    "d",
                    Outcome::Skip {
                        reason: "no simulated kubelet".into(),
                    },
                ),
            ],
            duration: Duration::from_secs(4),
        };
        let table = summary_table(&results);
        assert_eq!(
            table.lines().last(),
            Some("1 passed, 0 failed, 1 skipped, 2 not applicable in this revision"),
            "{table}"
        );
    }
}
