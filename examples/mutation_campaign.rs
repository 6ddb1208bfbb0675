//! Mutation testing of the suite: does the catalog catch a wrong implementation?
//!
//! Mutants come from cargo-mutants (`cargo mutants --list --json -p grove-reference-operator`),
//! one per line of code it knows how to break. Each mutant is applied to a scratch git
//! worktree, the reference operator binary is built from it, and the whole catalog runs
//! against that binary with `--fail-fast` (and nothing else: the operator's unit tests are not
//! part of the verdict). A mutant is *killed* when some case fails or errors, *survived* when
//! every case passes, *unviable* when it does not compile. Results are appended to a JSON Lines
//! file as they come, so an interrupted campaign resumes where it stopped, and rendered as a
//! Markdown table. `--shard I/N` judges only every N-th selected mutant from the I-th (one
//! results file per machine; concatenated, they render as one campaign). `--explore SEED:RUNS`
//! judges by `grove-conformance explore` instead of the catalog: RUNS generated scenarios of
//! SEED, the first failing one named in the verdict (use a results file of its own).
//!
//! ```text
//! cargo install cargo-mutants --locked
//! cargo mutants --list --json -p grove-reference-operator > target/mutants.json
//! cargo build --bin grove-conformance
//! cargo run --example mutation_campaign -- --mutants target/mutants.json \
//!     --file reference-operator/src/semantics.rs --results target/mutation.jsonl
//! # the verdicts so far, as the Markdown of docs/src/mutation.md:
//! cargo run --example mutation_campaign -- --mutants target/mutants.json \
//!     --file reference-operator/src/semantics.rs --results target/mutation.jsonl --render
//! ```

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

#[derive(Debug)]
struct Options {
    mutants: PathBuf,
    files: Vec<String>,
    results: PathBuf,
    harness: PathBuf,
    work: PathBuf,
    limit: Option<usize>,
    /// Judge only this many of the selected mutants, a sample fixed by `seed`.
    sample: Option<usize>,
    seed: u64,
    /// Judge only the I-th of N shards of the selected mutants (dealt round-robin in their
    /// order, so each machine of a matrix takes its own and together they take all).
    shard: Option<grove_conformance::schedule::Shard>,
    /// Print the verdicts so far as Markdown instead of judging more mutants.
    render: bool,
    /// Judge by `explore` instead of the catalog: this many scenarios of this seed.
    explore: Option<(u64, usize)>,
}

fn parse_options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        mutants: PathBuf::from("target/mutants.json"),
        files: Vec::new(),
        results: PathBuf::from("target/mutation.jsonl"),
        harness: PathBuf::from("target/debug/grove-conformance"),
        work: std::env::temp_dir().join("grove-conformance-mutants"),
        limit: None,
        sample: None,
        seed: 1,
        shard: None,
        render: false,
        explore: None,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--mutants" => options.mutants = value()?.into(),
            "--file" => options.files.push(value()?),
            "--results" => options.results = value()?.into(),
            "--harness" => options.harness = value()?.into(),
            "--work" => options.work = value()?.into(),
            "--render" => options.render = true,
            "--limit" => {
                options.limit = Some(value()?.parse().map_err(|e| format!("--limit: {e}"))?)
            }
            "--sample" => {
                options.sample = Some(value()?.parse().map_err(|e| format!("--sample: {e}"))?)
            }
            "--seed" => options.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--shard" => {
                options.shard = Some(value()?.parse().map_err(|e| format!("--shard: {e}"))?)
            }
            "--explore" => {
                let v = value()?;
                let bad = || format!("--explore: expected SEED:RUNS, got `{v}`");
                let (seed, runs) = v.split_once(':').ok_or_else(bad)?;
                options.explore = Some((
                    seed.parse().map_err(|_| bad())?,
                    runs.parse().map_err(|_| bad())?,
                ));
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(options)
}

/// The mutants of `files` (a path, or a folder when it ends in `/`; every mutant when there
/// are none), in their listed order. With `sample`, only that many of them: those whose names
/// hash lowest under `seed` (see [`sample_keys`]), so the same sample comes back on every run and a campaign over
/// it resumes like any other.
fn select<'a>(
    mutants: &'a [Value],
    files: &[String],
    sample: Option<usize>,
    seed: u64,
) -> Vec<&'a Value> {
    let in_files = |m: &Value| {
        let file = m["file"].as_str().unwrap_or_default();
        files.is_empty()
            || files
                .iter()
                .any(|f| file == f || (f.ends_with('/') && file.starts_with(f.as_str())))
    };
    let selected: Vec<&Value> = mutants.iter().filter(|m| in_files(m)).collect();
    let Some(n) = sample else {
        return selected;
    };
    // FNV-1a: stable across platforms and Rust versions, unlike the std hasher.
    let hash = |key: &str| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
        for b in key.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h
    };
    let mut ranked: Vec<(u64, usize, &Value)> = sample_keys(&selected)
        .iter()
        .zip(selected)
        .enumerate()
        .map(|(i, (key, m))| (hash(key), i, m))
        .collect();
    ranked.sort_by_key(|&(h, i, _)| (h, i));
    ranked.truncate(n);
    ranked.sort_by_key(|&(_, i, _)| i);
    ranked.into_iter().map(|(_, _, m)| m).collect()
}

/// What names each mutant whatever line it is on, so that editing a file elsewhere leaves a
/// sample as it was: its file, its description (the name without `file:line:column: `), and
/// how many mutants of that file with that description come before it in the list.
fn sample_keys(mutants: &[&Value]) -> Vec<String> {
    let mut seen = std::collections::HashMap::<(String, String), usize>::new();
    mutants
        .iter()
        .map(|m| {
            let name = m["name"].as_str().unwrap_or_default();
            let file = m["file"].as_str().unwrap_or_default().to_string();
            let what = name
                .split_once(": ")
                .map_or(name, |(_, what)| what)
                .to_string();
            let nth = seen.entry((file.clone(), what.clone())).or_default();
            let key = format!("{file}: {what} #{nth}");
            *nth += 1;
            key
        })
        .collect()
}

/// The mutants of `selected` in `shard`: the I-th, (I+N)-th, ... of them (from 1).
fn in_shard(selected: Vec<&Value>, shard: grove_conformance::schedule::Shard) -> Vec<&Value> {
    selected
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % shard.count + 1 == shard.index)
        .map(|(_, m)| m)
        .collect()
}

/// Replaces the text between `span.start` and `span.end` (1-based lines and character
/// columns, end exclusive) with `replacement`.
fn apply(source: &str, span: &Value, replacement: &str) -> Option<String> {
    let pos = |p: &Value| -> Option<(usize, usize)> {
        Some((p["line"].as_u64()? as usize, p["column"].as_u64()? as usize))
    };
    let (start, end) = (pos(&span["start"])?, pos(&span["end"])?);
    let offset = |(line, column): (usize, usize)| -> Option<usize> {
        let mut at = 0;
        for (i, text) in source.split_inclusive('\n').enumerate() {
            if i + 1 == line {
                let chars: usize = text
                    .char_indices()
                    .nth(column - 1)
                    .map(|(b, _)| b)
                    .unwrap_or(text.len());
                return Some(at + chars);
            }
            at += text.len();
        }
        None
    };
    let (from, to) = (offset(start)?, offset(end)?);
    Some(format!("{}{replacement}{}", &source[..from], &source[to..]))
}

fn run(command: &mut Command) -> Result<String, String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{command:?}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// Builds the operator in the worktree; `Err` carries the compiler's output.
fn build(work: &Path) -> Result<PathBuf, String> {
    run(Command::new("cargo")
        .current_dir(work)
        .env("CARGO_TARGET_DIR", work.join("target"))
        .args([
            "build",
            "--quiet",
            "-p",
            "grove-reference-operator",
            "--bin",
            "grove-reference-operator",
        ]))?;
    Ok(work.join("target/debug/grove-reference-operator"))
}

/// Runs the catalog against `operator`: `(all passed, the first failing case and why)`.
fn judge(options: &Options, operator: &Path, out: &Path) -> (bool, Option<(String, String)>) {
    let template = format!("{} run --namespace {{namespace}}", operator.display());
    let mut harness = Command::new(&options.harness);
    match options.explore {
        None => harness.arg("run"),
        // Generated scenarios (their first failure named like `explore-<seed>-<index>`),
        // written as generated: the verdict needs no shrinking.
        Some((seed, runs)) => harness.args([
            "explore",
            "--seed",
            &seed.to_string(),
            "--runs",
            &runs.to_string(),
            "--no-shrink",
        ]),
    };
    let result = harness
        .args(["--fail-fast", "--implementation-cmd", &template])
        .arg("--out")
        .arg(out)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output();
    let Ok(output) = result else {
        return (false, Some(("(harness)".into(), "did not start".into())));
    };
    // Progress lines (`[i/n] FAIL  case (…): why`) go to stderr.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stderr.lines().find_map(|line| {
        let rest = line.split_once("] ")?.1;
        let rest = rest
            .strip_prefix("FAIL  ")
            .or_else(|| rest.strip_prefix("ERROR "))?;
        let (case, why) = rest.split_once(' ').unwrap_or((rest, ""));
        let why: String = why.chars().take(300).collect();
        Some((case.to_string(), why))
    });
    (output.status.success(), first)
}

/// The verdicts of `results` for the `selected` mutants, in their listed order: a count per
/// outcome, then one row per judged mutant (`| line | mutant | outcome |`).
fn render(selected: &[&Value], results: &str) -> String {
    let verdicts: std::collections::BTreeMap<String, Value> = results
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| Some((v["name"].as_str()?.to_string(), v)))
        .collect();
    let files: BTreeSet<&str> = selected
        .iter()
        .map(|m| m["file"].as_str().unwrap_or_default())
        .collect();
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    let mut rows = String::new();
    for mutant in selected {
        let name = mutant["name"].as_str().unwrap_or_default();
        let Some(verdict) = verdicts.get(name) else {
            continue;
        };
        let outcome = verdict["outcome"].as_str().unwrap_or("?");
        *counts.entry(outcome).or_default() += 1;
        let what = name.split_once(": ").map_or(name, |(_, what)| what);
        let line = mutant["span"]["start"]["line"].as_u64().unwrap_or(0);
        // Several files: say which one (by its name; the folder is in the doc's text).
        let line = match mutant["file"].as_str() {
            Some(file) if files.len() > 1 => {
                format!("{}:{line}", file.rsplit('/').next().unwrap_or(file))
            }
            _ => line.to_string(),
        };
        let judged = match outcome {
            "killed" => {
                let why = verdict["why"].as_str().unwrap_or("");
                // The progress line's `(12.3s): ` before the reason says nothing about it.
                let why = why
                    .strip_prefix('(')
                    .and_then(|w| w.split_once("): "))
                    .map_or(why, |(_, w)| w);
                let why: String = why.chars().take(120).collect();
                format!(
                    "killed by `{}`: {}…",
                    verdict["case"].as_str().unwrap_or("?"),
                    why.replace('|', "\\|")
                )
            }
            "unviable" => "unviable (does not compile)".to_string(),
            other => other.to_string(),
        };
        rows.push_str(&format!("| {line} | {what} | {judged} |\n"));
    }
    let judged: usize = counts.values().sum();
    let count = |o: &str| counts.get(o).copied().unwrap_or(0);
    format!(
        "| mutants judged | killed | survived | unviable |\n|---|---|---|---|\n| {judged} of {} | {} | {} | {} |\n\n| line | mutant | outcome |\n|---|---|---|\n{rows}",
        selected.len(),
        count("killed"),
        count("survived"),
        count("unviable"),
    )
}

fn main() -> Result<(), String> {
    let options = parse_options()?;
    let mutants: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(&options.mutants)
            .map_err(|e| format!("{}: {e}", options.mutants.display()))?,
    )
    .map_err(|e| format!("{}: {e}", options.mutants.display()))?;
    let selected = select(&mutants, &options.files, options.sample, options.seed);
    let done: BTreeSet<String> = std::fs::read_to_string(&options.results)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect();
    if options.render {
        let results = std::fs::read_to_string(&options.results)
            .map_err(|e| format!("{}: {e}", options.results.display()))?;
        print!("{}", render(&selected, &results));
        return Ok(());
    }
    let selected = match options.shard {
        Some(shard) => in_shard(selected, shard),
        None => selected,
    };
    eprintln!(
        "{} mutants selected, {} already judged",
        selected.len(),
        selected
            .iter()
            .filter(|m| done.contains(m["name"].as_str().unwrap_or("")))
            .count()
    );

    // A scratch worktree of HEAD, with its own target directory.
    let work = &options.work;
    if !work.join(".git").exists() {
        run(Command::new("git")
            .args(["worktree", "add", "--detach"])
            .arg(work))?;
    }
    let baseline =
        build(work).map_err(|e| format!("the unmutated operator does not build:\n{e}"))?;
    let results_dir = work.join("results");
    if done.is_empty() {
        let started = Instant::now();
        let (passed, first) = judge(&options, &baseline, &results_dir.join("baseline"));
        if !passed {
            return Err(format!(
                "the unmutated operator does not pass the catalog ({first:?}); a campaign needs a green baseline"
            ));
        }
        eprintln!("baseline: all cases pass ({:.0?})", started.elapsed());
    }

    let mut results = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&options.results)
        .map_err(|e| format!("{}: {e}", options.results.display()))?;
    let mut judged = 0;
    for (index, mutant) in selected.into_iter().enumerate() {
        let name = mutant["name"].as_str().unwrap_or_default().to_string();
        let out = mutant_out(&results_dir, index, &name);
        if done.contains(&name) {
            continue;
        }
        if options.limit.is_some_and(|l| judged >= l) {
            break;
        }
        judged += 1;
        let file = work.join(mutant["file"].as_str().unwrap_or_default());
        let original = std::fs::read_to_string(&file).map_err(|e| format!("{e}"))?;
        let mutated = apply(
            &original,
            &mutant["span"],
            mutant["replacement"].as_str().unwrap_or_default(),
        )
        .ok_or(format!("{name}: its span is not in {}", file.display()))?;
        std::fs::write(&file, mutated).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let built = build(work);
        std::fs::write(&file, &original).map_err(|e| e.to_string())?;
        let record = match built {
            Err(_) => json!({"name": name, "outcome": "unviable"}),
            Ok(binary) => {
                let (passed, first) = judge(&options, &binary, &out);
                match (passed, first) {
                    (true, _) => json!({"name": name, "outcome": "survived"}),
                    (false, Some((case, why))) => {
                        json!({"name": name, "outcome": "killed", "case": case, "why": why, "out": out})
                    }
                    (false, None) => {
                        json!({"name": name, "outcome": "killed", "case": "(run)", "why": "the run failed before any case", "out": out})
                    }
                }
            }
        };
        eprintln!(
            "{name}: {} ({:.0?})",
            record["outcome"].as_str().unwrap_or(""),
            started.elapsed()
        );
        writeln!(results, "{record}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The results folder of the `index`-th mutant selected: its own, so that the timeline that
/// killed it is kept (`results/<index>-<its name, made a file name>`).
fn mutant_out(results: &Path, index: usize, name: &str) -> PathBuf {
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let slug: String = slug.chars().take(80).collect();
    results.join(format!("{index:03}-{slug}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_gets_its_own_results_folder() {
        let results = Path::new("/w/results");
        let names = [
            "src/a.rs:3:1: replace a -> bool with true",
            "src/a.rs:3:1: replace a -> bool with false",
            "src/a.rs:3:1: replace a -> bool with true",
        ];
        let outs: std::collections::BTreeSet<PathBuf> = names
            .iter()
            .enumerate()
            .map(|(i, n)| mutant_out(results, i, n))
            .collect();
        assert_eq!(outs.len(), names.len(), "{outs:?}");
        assert_eq!(
            mutant_out(results, 1, names[1]),
            results.join("001-src-a-rs-3-1-replace-a-bool-with-false")
        );
        assert!(outs.iter().all(|o| o != &results.join("baseline")));
    }

    #[test]
    fn verdicts_render_in_listed_order_with_counts() {
        let a = json!({"name": "f.rs:3:1: replace a -> bool with true", "span": {"start": {"line": 3}}});
        let b = json!({"name": "f.rs:9:5: delete ! in b", "span": {"start": {"line": 9}}});
        let c = json!({"name": "f.rs:12:5: replace c with ()", "span": {"start": {"line": 12}}});
        let results = [
            json!({"name": "f.rs:9:5: delete ! in b", "outcome": "killed", "case": "one", "why": "(1.5s): a | b"}),
            json!({"name": "f.rs:3:1: replace a -> bool with true", "outcome": "survived"}),
        ]
        .map(|v| v.to_string())
        .join("\n");
        let text = render(&[&a, &b, &c], &results);
        assert!(text.contains("| 2 of 3 | 1 | 1 | 0 |"), "{text}");
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("| 3 ") || l.starts_with("| 9 "))
            .collect();
        assert_eq!(
            rows,
            [
                "| 3 | replace a -> bool with true | survived |",
                "| 9 | delete ! in b | killed by `one`: a \\| b… |"
            ]
        );
        assert!(!text.contains("replace c with ()"), "{text}");
    }

    #[test]
    fn shards_deal_the_selected_mutants_round_robin_each_to_one_shard() {
        let mutants: Vec<Value> = (0..7).map(|i| json!({"name": format!("m{i}")})).collect();
        let all: Vec<&Value> = mutants.iter().collect();
        let names = |shard: &str| -> Vec<String> {
            in_shard(all.clone(), shard.parse().unwrap())
                .iter()
                .map(|m| m["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names("1/3"), ["m0", "m3", "m6"]);
        assert_eq!(names("2/3"), ["m1", "m4"]);
        assert_eq!(names("3/3"), ["m2", "m5"]);
        assert_eq!(names("1/1").len(), 7);
    }

    #[test]
    fn a_sample_is_fixed_by_its_seed_and_keeps_the_listed_order() {
        let mutants: Vec<Value> = (0..40)
            .map(|i| {
                let file = if i % 2 == 0 { "c/a.rs" } else { "s.rs" };
                json!({"name": format!("{file}:{i}:1: m{i}"), "file": file})
            })
            .collect();
        let names = |v: Vec<&Value>| {
            v.iter()
                .map(|m| m["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let folder = ["c/".to_string()];
        assert_eq!(select(&mutants, &folder, None, 1).len(), 20);
        let a = names(select(&mutants, &folder, Some(5), 1));
        assert_eq!(a.len(), 5);
        assert!(a.iter().all(|n| n.starts_with("c/a.rs")), "{a:?}");
        assert_eq!(a, names(select(&mutants, &folder, Some(5), 1)));
        assert_ne!(a, names(select(&mutants, &folder, Some(5), 2)));
        let line = |n: &String| n.split(':').nth(1).unwrap().parse::<u32>().unwrap();
        assert!(a.windows(2).all(|w| line(&w[0]) < line(&w[1])), "{a:?}");
        // A sample of a larger one holds the smaller one: raising `--sample` only adds.
        let more = names(select(&mutants, &folder, Some(8), 1));
        assert!(a.iter().all(|n| more.contains(n)), "{a:?} {more:?}");
    }

    #[test]
    fn a_sample_stays_when_lines_move() {
        let list = |shift: u32| -> Vec<Value> {
            (0..30)
                .map(|i| {
                    // Three mutants share each description, told apart by their order.
                    let line = 10 * i + if i > 12 { shift } else { 0 };
                    json!({"name": format!("f.rs:{line}:5: replace m{} with true", i / 3), "file": "f.rs"})
                })
                .collect()
        };
        let (before, after) = (list(0), list(7));
        let picked = |mutants: &[Value]| -> Vec<usize> {
            select(mutants, &[], Some(9), 3)
                .iter()
                .map(|m| mutants.iter().position(|x| std::ptr::eq(x, *m)).unwrap())
                .collect()
        };
        assert_eq!(picked(&before).len(), 9);
        assert_eq!(picked(&before), picked(&after));
    }

    #[test]
    fn a_span_is_replaced_by_character_columns() {
        let source = "fn a() -> bool {\n    x == 1\n}\n";
        let span = json!({"start": {"line": 2, "column": 7}, "end": {"line": 2, "column": 9}});
        assert_eq!(
            apply(source, &span, "!=").unwrap(),
            "fn a() -> bool {\n    x != 1\n}\n"
        );
    }
}
