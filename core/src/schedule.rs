//! When and where each case runs: the durations of a previous run, the order cases start in,
//! and the partition of a selection into shards.
//!
//! - [`Durations`]: each case's wall time, read from a run's `conformance.yaml` (its
//!   `timing.cases`) or from a catalog's `durations.yaml` (the same shape, the median of
//!   several runs, written by `grove-conformance durations`);
//! - [`start_order`]: cases that need the cluster to themselves first, then the others, each
//!   part longest first, so that nothing waits behind a long or exclusive case at the end;
//! - [`Shard`] and [`partition`]: `--shard i/n`, every case in exactly one shard, shards
//!   balanced by duration (not by count), the same partition on every machine of a matrix.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How heavily a case that runs alone weighs in a shard, against one that shares the cluster:
/// while it runs nothing else does, so it costs its shard about as much as that many cases of
/// its length running side by side, the default number of cases at once on a 2-core machine:
/// 32 on the simulated kubelets, 4 on real ones. Constants, not the run's `-j`:
/// every shard of a matrix must compute the same partition, whatever machine it runs on.
pub const fn alone_weight(real_kubelets: bool) -> u64 {
    if real_kubelets { 4 } else { 32 }
}

/// Each case's wall time in a previous run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Durations {
    by_case: BTreeMap<String, Duration>,
}

/// The part of a `conformance.yaml` (or `durations.yaml`) that durations are read from.
#[derive(Debug, Deserialize, Serialize)]
struct File {
    timing: FileTiming,
}

#[derive(Debug, Deserialize, Serialize)]
struct FileTiming {
    cases: Vec<FileCase>,
}

#[derive(Debug, Deserialize, Serialize)]
struct FileCase {
    case: String,
    wall_ms: u64,
}

/// A durations file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DurationsError {
    /// The file is not YAML of the expected shape.
    #[error(
        "{file}: {message} (expected a conformance.yaml: `timing.cases` with `case` and `wall_ms`)"
    )]
    Shape {
        /// The file.
        file: String,
        /// What is wrong and where (line and column).
        message: String,
    },
    /// A case appears twice.
    #[error("{file}: timing.cases: case `{case}` appears more than once")]
    Duplicate {
        /// The file.
        file: String,
        /// The case.
        case: String,
    },
}

impl Durations {
    /// Reads the durations of a `conformance.yaml` or `durations.yaml` whose text is `text`;
    /// `file` names it in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Durations, DurationsError> {
        let parsed: File = serde_yaml::from_str(text).map_err(|e| DurationsError::Shape {
            file: file.display().to_string(),
            message: e.to_string(),
        })?;
        let mut by_case = BTreeMap::new();
        for c in parsed.timing.cases {
            if by_case
                .insert(c.case.clone(), Duration::from_millis(c.wall_ms))
                .is_some()
            {
                return Err(DurationsError::Duplicate {
                    file: file.display().to_string(),
                    case: c.case,
                });
            }
        }
        Ok(Durations { by_case })
    }

    /// Durations from `(case, wall time)` pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, Duration)>) -> Durations {
        Durations {
            by_case: pairs.into_iter().collect(),
        }
    }

    /// Per case, the median of its durations over `runs` (of an even number, the lower of the
    /// two middle ones: a duration some run really had). A case some runs lack takes the median
    /// of those that have it.
    pub fn median(runs: &[Durations]) -> Durations {
        let mut all: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
        for run in runs {
            for (case, d) in &run.by_case {
                all.entry(case).or_default().push(*d);
            }
        }
        Durations {
            by_case: all
                .into_iter()
                .map(|(case, mut ds)| {
                    ds.sort();
                    (case.to_owned(), ds[(ds.len() - 1) / 2])
                })
                .collect(),
        }
    }

    /// The recorded duration of `case`, if any.
    pub fn get(&self, case: &str) -> Option<Duration> {
        self.by_case.get(case).copied()
    }

    /// Whether no case has a duration.
    pub fn is_empty(&self) -> bool {
        self.by_case.is_empty()
    }

    /// How many cases have one.
    pub fn len(&self) -> usize {
        self.by_case.len()
    }

    /// The duration a case is planned with: its recorded one, or for a case the file does not
    /// know (new since it was written) the longest recorded one, so that it starts early rather
    /// than hold up the end of the run; zero when nothing is recorded.
    pub fn planned(&self, case: &str) -> Duration {
        self.get(case)
            .or_else(|| self.by_case.values().max().copied())
            .unwrap_or_default()
    }

    /// The cases of `names` the file does not know.
    pub fn unknown<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        names
            .into_iter()
            .filter(|n| !self.by_case.contains_key(*n))
            .collect()
    }

    /// The file `grove-conformance durations` writes: a comment saying what it is and how it
    /// is refreshed, then `timing.cases` sorted by case (readable as a `conformance.yaml`).
    pub fn to_yaml(&self, header: &str) -> String {
        let file = File {
            timing: FileTiming {
                cases: self
                    .by_case
                    .iter()
                    .map(|(case, d)| FileCase {
                        case: case.clone(),
                        wall_ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
                    })
                    .collect(),
            },
        };
        let mut out = String::new();
        for line in header.lines() {
            out.push_str(format!("# {line}").trim_end());
            out.push('\n');
        }
        out.push_str(&serde_yaml::to_string(&file).expect("durations serialize"));
        out
    }
}

/// One case to schedule: its index in the caller's list, its planned duration and whether it
/// needs the cluster to itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// Position in the caller's list.
    pub index: usize,
    /// Planned duration.
    pub duration: Duration,
    /// Runs alone.
    pub alone: bool,
}

/// The order cases start in, as indices into `cases`: those that run alone first (nothing is
/// running yet, so nothing has to drain before them and nothing waits behind them at the end),
/// then the others, each part longest first (so the last to start are the shortest, and the
/// run ends with every slot busy as long as possible). Equal durations keep the caller's order,
/// so without durations this is the catalog order with the exclusive cases moved to the front.
pub fn start_order(cases: &[Planned]) -> Vec<usize> {
    let mut order: Vec<Planned> = cases.to_vec();
    // A stable sort: the caller's order among equals.
    order.sort_by(|a, b| {
        b.alone
            .cmp(&a.alone)
            .then_with(|| b.duration.cmp(&a.duration))
    });
    order.into_iter().map(|p| p.index).collect()
}

/// `--shard i/n`: the `index`-th (from 1) of `count` shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// From 1 to `count`.
    pub index: usize,
    /// How many shards.
    pub count: usize,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A shard written wrong: not `i/n` with `1 <= i <= n`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a shard: expected i/n with 1 <= i <= n (as in 2/4)")]
pub struct BadShard(pub String);

impl std::str::FromStr for Shard {
    type Err = BadShard;

    fn from_str(s: &str) -> Result<Shard, BadShard> {
        let bad = || BadShard(s.to_owned());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// One case to partition: its name (the tie-breaker, so that every machine computes the same
/// partition whatever order it listed the cases in) and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighted<'a> {
    /// Case name.
    pub name: &'a str,
    /// Its planned duration, times [`alone_weight`] when it runs alone.
    pub weight: Duration,
}

impl<'a> Weighted<'a> {
    /// The weight of case `name`: its planned duration, times `factor` (1 when it shares the
    /// cluster, [`alone_weight`] when it runs alone).
    pub fn new(name: &'a str, duration: Duration, factor: u64) -> Weighted<'a> {
        Weighted {
            name,
            weight: duration.saturating_mul(u32::try_from(factor).unwrap_or(u32::MAX)),
        }
    }
}

/// The shard (from 1) of each of `cases`, in their order: heaviest first, each to the shard
/// with the least weight so far (on a tie the one with fewest cases, then the lowest-numbered),
/// so the shards come out within
/// one case of each other. Deterministic: the result depends only on the names, weights and
/// `count`, never on the order the cases are given in. Every case gets exactly one shard.
pub fn partition(cases: &[Weighted<'_>], count: usize) -> Vec<usize> {
    let count = count.max(1);
    let mut order: Vec<usize> = (0..cases.len()).collect();
    order.sort_by(|&a, &b| {
        cases[b]
            .weight
            .cmp(&cases[a].weight)
            .then_with(|| cases[a].name.cmp(cases[b].name))
    });
    let mut load = vec![(Duration::ZERO, 0usize); count];
    let mut shard = vec![0; cases.len()];
    for i in order {
        // The lightest shard; of equally light ones the one with fewest cases (so cases of no
        // known duration are dealt evenly), then the lowest-numbered.
        let (lightest, _) = load
            .iter()
            .enumerate()
            .min_by_key(|(s, l)| (**l, *s))
            .expect("at least one shard");
        load[lightest].0 += cases[i].weight;
        load[lightest].1 += 1;
        shard[i] = lightest + 1;
    }
    shard
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn durations_are_read_from_a_conformance_report() {
        let text = "implementation: {name: x, version: y}\ntiming:\n  run_ms: 9\n  wall_ms: 5\n  cases:\n  - case: a\n    wall_ms: 3000\n    waiting_ms: 1\n  - case: b\n    wall_ms: 2000\n";
        let d = Durations::parse(Path::new("c.yaml"), text).unwrap();
        assert_eq!(d.get("a"), Some(ms(3000)));
        assert_eq!(d.get("b"), Some(ms(2000)));
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn a_malformed_durations_file_names_the_file_and_the_place() {
        let text = "timing:\n  cases:\n  - case: a\n    wall_ms: soon\n";
        let e = Durations::parse(Path::new("d.yaml"), text)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("d.yaml: "), "{e}");
        assert!(e.contains("wall_ms"), "{e}");
        assert!(e.contains("line 4"), "{e}");
        let dup = "timing:\n  cases:\n  - {case: a, wall_ms: 1}\n  - {case: a, wall_ms: 2}\n";
        let e = Durations::parse(Path::new("d.yaml"), dup)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`a` appears more than once"), "{e}");
        let e = Durations::parse(Path::new("d.yaml"), "cases: []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("timing"), "{e}");
    }

    #[test]
    fn the_median_of_runs_is_a_duration_some_run_had() {
        let run = |a: u64, b: Option<u64>| {
            Durations::from_pairs(
                [("a".to_string(), ms(a))]
                    .into_iter()
                    .chain(b.map(|b| ("b".to_string(), ms(b)))),
            )
        };
        let m = Durations::median(&[run(5, Some(1)), run(1, None), run(3, Some(9)), run(4, None)]);
        assert_eq!(m.get("a"), Some(ms(3)));
        assert_eq!(m.get("b"), Some(ms(1)));
    }

    #[test]
    fn written_durations_read_back_the_same() {
        let d = Durations::from_pairs([("x".to_string(), ms(1234)), ("a".to_string(), ms(7))]);
        let text = d.to_yaml("what this is\nhow to refresh it");
        assert!(
            text.starts_with("# what this is\n# how to refresh it\n"),
            "{text}"
        );
        assert_eq!(Durations::parse(Path::new("f"), &text).unwrap(), d);
    }

    #[test]
    fn an_unknown_case_is_planned_as_the_longest_known() {
        let d = Durations::from_pairs([("a".to_string(), ms(10)), ("b".to_string(), ms(30))]);
        assert_eq!(d.planned("a"), ms(10));
        assert_eq!(d.planned("new"), ms(30));
        assert_eq!(d.unknown(["a", "new"]), ["new"]);
        assert_eq!(Durations::default().planned("any"), Duration::ZERO);
    }

    #[test]
    fn alone_cases_start_first_then_the_longest() {
        let p = |index, d, alone| Planned {
            index,
            duration: ms(d),
            alone,
        };
        let order = start_order(&[
            p(0, 5, false),
            p(1, 9, false),
            p(2, 3, true),
            p(3, 9, false),
            p(4, 8, true),
        ]);
        assert_eq!(order, [4, 2, 1, 3, 0]);
        // Without durations: the catalog order, alone cases moved to the front.
        let flat = start_order(&[p(0, 0, false), p(1, 0, true), p(2, 0, false)]);
        assert_eq!(flat, [1, 0, 2]);
    }

    #[test]
    fn shards_parse_as_i_of_n() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
        for bad in ["0/3", "4/3", "1/0", "3", "a/b", "", "1/2/3"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.to_string().contains("expected i/n"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_case_lands_in_exactly_one_shard_and_shards_balance_by_duration() {
        let names: Vec<String> = (0..40).map(|i| format!("case-{i:02}")).collect();
        let cases: Vec<Weighted<'_>> = names
            .iter()
            .enumerate()
            .map(|(i, n)| Weighted::new(n, ms(1000 + (i as u64 * 7919) % 20_000), 1))
            .collect();
        let shards = partition(&cases, 3);
        assert!(shards.iter().all(|s| (1..=3).contains(s)));
        let load = |s: usize| -> Duration {
            cases
                .iter()
                .zip(&shards)
                .filter(|(_, x)| **x == s)
                .map(|(c, _)| c.weight)
                .sum()
        };
        let loads = [load(1), load(2), load(3)];
        let max = loads.iter().max().unwrap().as_secs_f64();
        let min = loads.iter().min().unwrap().as_secs_f64();
        let biggest = cases.iter().map(|c| c.weight).max().unwrap().as_secs_f64();
        assert!(max - min <= biggest, "{loads:?}");
        // By duration, not by count: one long case balances many short ones.
        let a = ["long", "s1", "s2", "s3", "s4"];
        let uneven: Vec<Weighted<'_>> = a
            .iter()
            .map(|n| Weighted::new(n, ms(if *n == "long" { 40 } else { 10 }), 1))
            .collect();
        assert_eq!(partition(&uneven, 2), [1, 2, 2, 2, 2]);
    }

    #[test]
    fn the_partition_does_not_depend_on_the_order_cases_are_listed_in() {
        let names: Vec<String> = (0..25).map(|i| format!("c{i}")).collect();
        let mut cases: Vec<Weighted<'_>> = names
            .iter()
            .map(|n| {
                Weighted::new(
                    n,
                    ms(500 * (n.len() as u64)),
                    if n.ends_with('7') { 16 } else { 1 },
                )
            })
            .collect();
        let before: BTreeMap<String, usize> = cases
            .iter()
            .zip(partition(&cases, 4))
            .map(|(c, s)| (c.name.to_owned(), s))
            .collect();
        cases.reverse();
        let after: BTreeMap<String, usize> = cases
            .iter()
            .zip(partition(&cases, 4))
            .map(|(c, s)| (c.name.to_owned(), s))
            .collect();
        assert_eq!(before, after);
    }

    #[test]
    fn cases_of_no_known_duration_are_dealt_evenly() {
        let names: Vec<String> = (0..7).map(|i| format!("c{i}")).collect();
        let cases: Vec<Weighted<'_>> = names
            .iter()
            .map(|n| Weighted::new(n, Duration::ZERO, 1))
            .collect();
        let shards = partition(&cases, 3);
        let count = |s: usize| shards.iter().filter(|x| **x == s).count();
        assert_eq!([count(1), count(2), count(3)], [3, 2, 2]);
    }

    #[test]
    fn a_case_that_runs_alone_weighs_as_many_running_side_by_side() {
        let alone = Weighted::new("big", ms(10), alone_weight(false));
        assert_eq!(alone.weight, ms(320));
        assert_eq!(
            Weighted::new("big", ms(10), alone_weight(true)).weight,
            ms(40)
        );
        let shared = Weighted::new("small", ms(10), 1);
        assert_eq!(shared.weight, ms(10));
    }
}
