//! What an implementation costs beside the reference operator: when `bench` runs another
//! implementation, it also runs the same selection once with the reference operator, and sets
//! each case's API counts (requests, writes, writes after the required state, from each run's
//! `results.json`) beside the reference operator's.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

/// One case's API counts in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct ApiCount {
    /// Every request the implementation sent.
    pub total: u64,
    /// Its writes (create, update, patch, delete).
    pub writes: u64,
    /// Its writes after the case's required state was reached.
    pub writes_after_required: u64,
}

#[derive(Deserialize)]
struct Results {
    #[serde(default)]
    cases: Vec<CaseResult>,
}

#[derive(Deserialize)]
struct CaseResult {
    case: String,
    area: String,
    outcome: String,
    api: Option<ApiCount>,
}

/// The API counts of a run's passing cases, by `area/name`, from its `results.json` (empty
/// when it wrote none). A case that did not pass is left out: its counts measure a different
/// path.
pub fn read_counts(dir: &Path) -> BTreeMap<String, ApiCount> {
    let Ok(text) = std::fs::read_to_string(dir.join("results.json")) else {
        return BTreeMap::new();
    };
    let Ok(results) = serde_json::from_str::<Results>(&text) else {
        return BTreeMap::new();
    };
    results
        .cases
        .into_iter()
        .filter(|c| c.outcome == "pass")
        .filter_map(|c| Some((format!("{}/{}", c.area, c.case), c.api?)))
        .collect()
}

/// The `run` arguments that choose the implementation (a value follows those that take one).
const IMPLEMENTATION_FLAGS: &[&str] = &[
    "--implementation",
    "--implementation-cmd",
    "--implementation-image",
    "--implementation-deployment",
    "--implementation-container",
    "--implementation-name",
    "--implementation-crds",
    "--implementation-webhooks",
    "--implementation-config",
    "--proxy-address",
];

/// `run_args` split into the arguments that keep the selection and target, and those that
/// choose the implementation, as `(flag, value)` (a value given as `--flag=value` or as the
/// next argument).
fn split_implementation(run_args: &[OsString]) -> (Vec<OsString>, Vec<(String, String)>) {
    let mut kept = Vec::new();
    let mut chosen = Vec::new();
    let mut args = run_args.iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        let (flag, inline) = match text.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (&*text, None),
        };
        if IMPLEMENTATION_FLAGS.contains(&flag) {
            let value = inline
                .or_else(|| args.next().map(|v| v.to_string_lossy().into_owned()))
                .unwrap_or_default();
            chosen.push((flag.to_string(), value));
        } else {
            kept.push(arg.clone());
        }
    }
    (kept, chosen)
}

/// Whether `run_args` choose an implementation other than the reference operator.
pub fn other_implementation(run_args: &[OsString]) -> bool {
    split_implementation(run_args)
        .1
        .iter()
        .any(|(flag, value)| flag != "--implementation" || value != "reference")
}

/// `run_args` without the arguments that choose the implementation: the same selection and
/// target, for the reference operator.
pub fn reference_args(run_args: &[OsString]) -> Vec<OsString> {
    split_implementation(run_args).0
}

/// The median of each case's counts over `runs` (the lower middle of an even number).
pub fn medians(runs: &[BTreeMap<String, ApiCount>]) -> BTreeMap<String, ApiCount> {
    let mut by_case: BTreeMap<&String, Vec<ApiCount>> = BTreeMap::new();
    for run in runs {
        for (case, count) in run {
            by_case.entry(case).or_default().push(*count);
        }
    }
    by_case
        .into_iter()
        .map(|(case, counts)| {
            let median = |f: fn(&ApiCount) -> u64| {
                let mut xs: Vec<u64> = counts.iter().map(f).collect();
                xs.sort_unstable();
                xs[(xs.len() - 1) / 2]
            };
            let count = ApiCount {
                total: median(|c| c.total),
                writes: median(|c| c.writes),
                writes_after_required: median(|c| c.writes_after_required),
            };
            (case.clone(), count)
        })
        .collect()
}

/// The table of `implementation`'s counts beside `reference`'s, on the cases both passed: a
/// row per case, most requests over the reference operator's first, and a total.
pub fn beside(
    implementation: &BTreeMap<String, ApiCount>,
    reference: &BTreeMap<String, ApiCount>,
) -> String {
    let mut rows: Vec<(&String, ApiCount, ApiCount)> = implementation
        .iter()
        .filter_map(|(case, c)| Some((case, *c, *reference.get(case)?)))
        .collect();
    let mut out = String::from("\n## API cost beside the reference operator\n\n");
    if rows.is_empty() {
        out.push_str("no case passed with both implementations\n");
        return out;
    }
    rows.sort_by(|a, b| {
        ratio(b.1.total, b.2.total)
            .total_cmp(&ratio(a.1.total, a.2.total))
            .then(a.0.cmp(b.0))
    });
    let _ = writeln!(
        out,
        "| case | requests | reference | ratio | writes | reference | writes after the required state | reference |\n|---|---|---|---|---|---|---|---|"
    );
    let mut sum = (ApiCount::default(), ApiCount::default());
    for (case, c, r) in &rows {
        out.push_str(&row(case, c, r));
        for (s, x) in [(&mut sum.0, c), (&mut sum.1, r)] {
            s.total += x.total;
            s.writes += x.writes;
            s.writes_after_required += x.writes_after_required;
        }
    }
    out.push_str(&row(
        &format!("total over {} case(s)", rows.len()),
        &sum.0,
        &sum.1,
    ));
    out
}

/// One row of [`beside`]'s table.
fn row(label: &str, c: &ApiCount, r: &ApiCount) -> String {
    format!(
        "| {label} | {} | {} | {:.2} | {} | {} | {} | {} |\n",
        c.total,
        r.total,
        ratio(c.total, r.total),
        c.writes,
        r.writes,
        c.writes_after_required,
        r.writes_after_required
    )
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        if a == 0 { 1.0 } else { f64::INFINITY }
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_implementation_arguments_are_found_and_dropped() {
        let args = os(&[
            "--filter",
            "crash",
            "--implementation-cmd",
            "op --ns {namespace}",
            "--implementation-crds=/c",
            "-j",
            "2",
        ]);
        assert!(other_implementation(&args));
        assert_eq!(reference_args(&args), os(&["--filter", "crash", "-j", "2"]));
        assert!(!other_implementation(&os(&["--filter", "x"])));
        assert!(!other_implementation(&os(&[
            "--implementation",
            "reference"
        ])));
        assert!(!other_implementation(&os(&["--implementation=reference"])));
        assert!(other_implementation(&os(&["--implementation", "external"])));
    }

    #[test]
    fn counts_are_set_beside_the_reference_on_cases_both_passed() {
        let count = |total, writes, after| ApiCount {
            total,
            writes,
            writes_after_required: after,
        };
        let runs = [
            BTreeMap::from([("a/x".to_string(), count(10, 4, 0))]),
            BTreeMap::from([("a/x".to_string(), count(30, 9, 2))]),
            BTreeMap::from([
                ("a/x".to_string(), count(20, 6, 1)),
                ("a/y".to_string(), count(5, 1, 0)),
            ]),
        ];
        let implementation = medians(&runs);
        assert_eq!(implementation["a/x"], count(20, 6, 1));
        let reference = BTreeMap::from([
            ("a/x".to_string(), count(10, 3, 0)),
            ("a/z".to_string(), count(7, 2, 0)),
        ]);
        let table = beside(&implementation, &reference);
        assert!(
            table.contains("| a/x | 20 | 10 | 2.00 | 6 | 3 | 1 | 0 |"),
            "{table}"
        );
        assert!(!table.contains("a/y"), "{table}");
        assert!(
            table.contains("| total over 1 case(s) | 20 | 10 | 2.00 |"),
            "{table}"
        );
    }
}
