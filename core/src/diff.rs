//! Expected-vs-observed diffs as YAML text.
//!
//! Patience algorithm, three lines of context, and changed words highlighted inside changed
//! lines: with ANSI colour for a terminal ([`Style::Color`]) or with `[-old-]`/`{+new+}`
//! markers for plain text such as JUnit ([`Style::Plain`]).

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style as Ansi};
use serde_json::Value;
use similar::{Algorithm, ChangeTag, TextDiff};

/// How a diff is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Plain text: `-`/`+` lines, changed words wrapped in `[-…-]` / `{+…+}`.
    Plain,
    /// ANSI colours: red/green lines, changed words underlined.
    Color,
}

/// Lines of context around each change.
pub const CONTEXT_LINES: usize = 3;

/// A value as YAML text (the form diffs compare).
pub fn to_yaml(value: &Value) -> String {
    match serde_yaml::to_string(value) {
        Ok(s) => s,
        Err(_) => format!("{value:#}\n"),
    }
}

/// The diff of two values rendered as YAML; empty when they render the same.
pub fn diff_values(expected: &Value, observed: &Value, style: Style) -> String {
    diff_text(&to_yaml(expected), &to_yaml(observed), style)
}

/// The diff of two texts (`--- expected` / `+++ observed`); empty when they are equal.
pub fn diff_text(expected: &str, observed: &str, style: Style) -> String {
    if expected == observed {
        return String::new();
    }
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .diff_lines(expected, observed);
    let red = Ansi::new().fg_color(Some(AnsiColor::Red.into()));
    let green = Ansi::new().fg_color(Some(AnsiColor::Green.into()));
    let dim = Ansi::new().dimmed();
    let emph = |s: Ansi| s.underline().bold();
    let mut out = String::new();
    let _ = writeln!(out, "--- expected");
    let _ = writeln!(out, "+++ observed");
    for (i, group) in diff.grouped_ops(CONTEXT_LINES).iter().enumerate() {
        if i > 0 {
            out.push_str("...\n");
        }
        for op in group {
            for change in diff.iter_inline_changes(op) {
                let (sign, base) = match change.tag() {
                    ChangeTag::Delete => ('-', red),
                    ChangeTag::Insert => ('+', green),
                    ChangeTag::Equal => (' ', dim),
                };
                let partial = change.values().iter().any(|(e, _)| *e)
                    && change
                        .values()
                        .iter()
                        .any(|(e, v)| !*e && !v.trim().is_empty());
                let mut line = String::new();
                for (emphasized, value) in change.iter_strings_lossy() {
                    let value = value.trim_end_matches('\n');
                    match (style, emphasized && partial) {
                        (Style::Plain, true) => match change.tag() {
                            ChangeTag::Delete => {
                                let _ = write!(line, "[-{value}-]");
                            }
                            ChangeTag::Insert => {
                                let _ = write!(line, "{{+{value}+}}");
                            }
                            ChangeTag::Equal => line.push_str(value),
                        },
                        (Style::Plain, false) => line.push_str(value),
                        (Style::Color, true) => {
                            let s = emph(base);
                            let _ = write!(line, "{s}{value}{s:#}");
                        }
                        (Style::Color, false) => {
                            let _ = write!(line, "{base}{value}{base:#}");
                        }
                    }
                }
                match style {
                    Style::Plain => {
                        let _ = writeln!(out, "{sign}{line}");
                    }
                    Style::Color => {
                        let _ = writeln!(out, "{base}{sign}{base:#}{line}");
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_values_have_no_diff() {
        let v = json!({"a": 1});
        assert_eq!(diff_values(&v, &v, Style::Plain), "");
    }

    #[test]
    fn plain_diff_marks_changed_words() {
        let expected = json!({"status": {"conditions": [{"type": "Completed", "status": "True"}], "replicaRestartCounts": [0]}});
        let observed = json!({"status": {"conditions": [{"type": "Completed", "status": "False"}], "replicaRestartCounts": [0]}});
        let d = diff_values(&expected, &observed, Style::Plain);
        assert_eq!(
            d,
            "--- expected\n+++ observed\n \
             status:\n   conditions:\n   - status: [-'True'-]\n+  - status: {+'False'+}\n     type: Completed\n   replicaRestartCounts:\n   - 0\n"
                .replace("   - status: [-'True'-]\n", "-  - status: [-'True'-]\n")
        );
    }

    #[test]
    fn colour_diff_uses_ansi() {
        let d = diff_text("a: 1\n", "a: 2\n", Style::Color);
        assert!(d.contains("\u{1b}["));
    }

    #[test]
    fn far_apart_changes_are_grouped_with_context() {
        let a: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let b = a
            .replace("line 2\n", "line two\n")
            .replace("line 17\n", "line seventeen\n");
        let d = diff_text(&a, &b, Style::Plain);
        assert!(d.contains("...\n"), "{d}");
        assert!(!d.contains("line 10"), "{d}");
    }
}
