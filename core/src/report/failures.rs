//! What a person reads in the terminal when cases did not pass: per failed or errored case
//! its message, the expected-vs-observed diff (coloured on a terminal, plain otherwise) and
//! its timeline capped at [`TIMELINE_LINES`] lines, with where the rest is. JUnit keeps the
//! whole of each.

use std::fmt::Write as _;

use serde_json::Value;

use super::event::{CaseResult, Outcome, RunResults};
use super::html::WHOLE_TIMELINE;
use crate::diff::{Style, diff_values};

/// Timeline lines shown per failed case; the rest is in the file the caller names.
pub const TIMELINE_LINES: usize = 40;

/// What an expectation compared, kept so that each reporter renders the diff in its own style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compared {
    /// What was expected.
    pub expected: Value,
    /// What was observed, projected to the same shape.
    pub observed: Value,
}

impl Compared {
    /// The diff in `style`.
    pub fn diff(&self, style: Style) -> String {
        diff_values(&self.expected, &self.observed, style)
    }
}

/// The failure details of every case of `results` that failed or errored, in the summary's
/// order; empty when every case passed. `timeline_file` names where a case's whole timeline
/// is, for the line that says how many entries were left out.
pub fn failure_details(
    results: &RunResults,
    style: Style,
    timeline_file: impl Fn(&CaseResult) -> String,
) -> String {
    let mut out = String::new();
    for r in results.sorted() {
        let (label, message, failure) = match &r.outcome {
            Outcome::Fail(f) => ("FAIL", f.message.as_str(), Some(f)),
            Outcome::Unstable { failure: f, .. } => ("UNSTABLE", f.message.as_str(), Some(f)),
            Outcome::Error { message } => ("ERROR", message.as_str(), None),
            Outcome::Pass | Outcome::Skip { .. } | Outcome::NotApplicable { .. } => continue,
        };
        let _ = writeln!(out, "{}", heading(label, &r.case, style));
        let _ = writeln!(out, "{message}");
        let Some(f) = failure else {
            let _ = writeln!(out);
            continue;
        };
        let diff = match (&f.compared, &f.diff) {
            (Some(c), _) => Some(c.diff(style)),
            (None, Some(d)) => Some(d.clone()),
            (None, None) => None,
        };
        if let Some(diff) = diff.filter(|d| !d.is_empty()) {
            let _ = writeln!(out, "\n{}", diff.trim_end());
        }
        match f.timeline.as_deref().map(|t| t.split_once(WHOLE_TIMELINE)) {
            // A violation: its evidence in full, the whole timeline only counted.
            Some(Some((slices, whole))) => {
                let _ = writeln!(out, "\n{}", slices.trim_end());
                let entries = whole.lines().filter(|l| !l.trim().is_empty()).count();
                let _ = writeln!(
                    out,
                    "\nwhole timeline: {entries} entries in {}",
                    timeline_file(r)
                );
            }
            Some(None) => {
                let timeline = f.timeline.as_deref().unwrap_or_default();
                if !timeline.trim().is_empty() {
                    let _ = writeln!(out, "\ntimeline:");
                    out.push_str(&capped(timeline, TIMELINE_LINES, &timeline_file(r)));
                }
            }
            None => {}
        }
        let _ = writeln!(out);
    }
    out
}

/// The last `limit` lines of `timeline`, after a line saying how many came before and where
/// they are.
pub fn capped(timeline: &str, limit: usize, file: &str) -> String {
    let lines: Vec<&str> = timeline.lines().collect();
    let mut out = String::new();
    let skipped = lines.len().saturating_sub(limit);
    if skipped > 0 {
        let _ = writeln!(out, "  ... {skipped} more entries in {file}");
    }
    for line in &lines[skipped..] {
        let _ = writeln!(out, "{line}");
    }
    out
}

fn heading(label: &str, case: &str, style: Style) -> String {
    let text = format!("── {label} {case} ");
    let rule = "─".repeat(72usize.saturating_sub(text.chars().count()));
    match style {
        Style::Plain => format!("{text}{rule}"),
        Style::Color => {
            let red = anstyle::Style::new()
                .fg_color(Some(anstyle::AnsiColor::Red.into()))
                .bold();
            format!("{red}{text}{red:#}{rule}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_timeline_is_capped_with_where_the_rest_is() {
        let timeline: String = (0..100).map(|i| format!("#{i}\n")).collect();
        let text = capped(&timeline, 40, "out/junit.xml");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 41);
        assert_eq!(lines[0], "  ... 60 more entries in out/junit.xml");
        assert_eq!(lines[1], "#60");
        assert_eq!(lines[40], "#99");
        assert_eq!(capped("#0\n#1\n", 40, "f"), "#0\n#1\n");
    }

    #[test]
    fn a_diff_is_coloured_only_for_a_terminal() {
        let c = Compared {
            expected: serde_json::json!({"a": 1}),
            observed: serde_json::json!({"a": 2}),
        };
        assert!(c.diff(Style::Color).contains("\x1b["));
        assert!(!c.diff(Style::Plain).contains("\x1b["));
        assert!(
            c.diff(Style::Plain).contains("-a: [-1-]"),
            "{}",
            c.diff(Style::Plain)
        );
    }
}
