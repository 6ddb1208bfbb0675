//! A case's timeline drawn: one lane per object (the PodCliqueSet, its scaling groups and
//! cliques, then the pods of each clique folded under it, then Events), the object's state as
//! coloured spans from one entry to the next, each entry a mark (the harness's writes and the
//! implementation's apart), the entries a violation cites highlighted, and the raw line on
//! hover (an SVG `<title>`, which needs no script).
//!
//! The input is the timeline text JUnit keeps ([`crate::monitor::render_entries`]'s lines,
//! `#N rv R actor EVENT Kind name [uid] state…`), so a page can be drawn from any run's
//! results, merged shards included. Lines that are not entries (a violation's heading) are
//! shown as they are.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::escape;

/// One timeline entry, read back from its rendered line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Its position in the case's timeline (`#N`).
    pub position: usize,
    /// Its resourceVersion.
    pub rv: u64,
    /// `harness`, `impl` or `system`.
    pub actor: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub event: String,
    /// The kind (`Pod`, `PodClique`, …).
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// What follows the uid: the state that matters (`phase=Running`, `Failed=True`, …).
    pub state: String,
    /// The line as rendered.
    pub raw: String,
}

impl Row {
    /// Reads one rendered timeline line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Row> {
        let mut words = line.split_whitespace();
        let position = words.next()?.strip_prefix('#')?.parse().ok()?;
        if words.next()? != "rv" {
            return None;
        }
        let rv = words.next()?.parse().ok()?;
        let actor = words.next()?.to_owned();
        let event = words.next()?.to_owned();
        let kind = words.next()?.to_owned();
        let name = words.next()?.to_owned();
        let uid = words.next()?;
        if !(uid.starts_with('[') && uid.ends_with(']')) {
            return None;
        }
        let state = words.collect::<Vec<_>>().join(" ");
        Some(Row {
            position,
            rv,
            actor,
            event,
            kind,
            name,
            state,
            raw: line.trim().to_owned(),
        })
    }

    /// The clique a pod belongs to (its `clique/index` word), if it is a pod.
    fn clique(&self) -> Option<&str> {
        (self.kind == "Pod")
            .then(|| self.state.split_whitespace().next()?.split_once('/'))
            .flatten()
            .map(|(c, _)| c)
    }

    /// The state class of the span that starts here: the terminal condition or the phase,
    /// `deleting`, or `gone` after a DELETED.
    fn class(&self) -> &'static str {
        let has = |w: &str| self.state.split_whitespace().any(|s| s == w);
        match () {
            () if self.event == "DELETED" => "gone",
            () if has("Failed=True") || has("phase=Failed") => "failed",
            () if has("Completed=True") || has("phase=Succeeded") || has("phase=Completed") => {
                "done"
            }
            () if has("deleting") => "deleting",
            () if has("phase=Running") => "running",
            () if has("phase=Pending") => "pending",
            () => "active",
        }
    }
}

/// The timeline's entries and the positions its violation slices cite. The failure text is
/// one or more violation paragraphs (a `CLAUSE: message` line, then its evidence), optionally
/// followed by `whole timeline:` and every entry; or just the entries.
pub fn read(timeline: &str) -> (Vec<Row>, BTreeSet<usize>, Vec<String>) {
    let (slices, whole) = match timeline.split_once(WHOLE_TIMELINE) {
        Some((slices, whole)) => (Some(slices), whole),
        None if timeline
            .lines()
            .next()
            .is_some_and(|l| Row::parse(l).is_none()) =>
        {
            (Some(timeline), timeline)
        }
        None => (None, timeline),
    };
    let mut evidence = BTreeSet::new();
    let mut notes = Vec::new();
    for line in slices.unwrap_or("").lines() {
        match Row::parse(line) {
            Some(row) => {
                evidence.insert(row.position);
            }
            None if !line.trim().is_empty() => notes.push(line.trim().to_owned()),
            None => {}
        }
    }
    let mut rows: Vec<Row> = whole.lines().filter_map(Row::parse).collect();
    rows.sort_by_key(|r| (r.position, r.rv));
    rows.dedup_by_key(|r| r.position);
    rows.sort_by_key(|r| (r.rv, r.position));
    (rows, evidence, notes)
}

/// The heading between a violation's slices and the whole timeline in a failure's text.
pub const WHOLE_TIMELINE: &str = "whole timeline:";

/// Pods of a clique shown at once; more are folded (opened by a click, no script needed).
const UNFOLDED_PODS: usize = 8;
const LANE_HEIGHT: usize = 14;
const LABEL_WIDTH: usize = 300;

/// Where an entry sits on the x axis: its place in resourceVersion order, so the axis is what
/// etcd committed, scaled to the drawing's width.
struct Axis {
    order: BTreeMap<usize, usize>,
    entries: usize,
    width: usize,
}

impl Axis {
    fn new(rows: &[Row]) -> Axis {
        Axis {
            order: rows
                .iter()
                .enumerate()
                .map(|(x, r)| (r.position, x))
                .collect(),
            entries: rows.len().max(1),
            width: (rows.len() * 6).clamp(600, 24_000),
        }
    }

    fn x(&self, row: &Row) -> usize {
        LABEL_WIDTH + self.order[&row.position] * (self.width - LABEL_WIDTH - 10) / self.entries
    }
}

/// One object's lane: its label and its entries in order.
type Lane<'a> = (&'a String, &'a Vec<&'a Row>);

/// The lanes, grouped: the objects (PCS, PCSGs, PodCliques), each clique's pods, the Events.
type Grouped<'a> = (
    Vec<Lane<'a>>,
    BTreeMap<String, Vec<Lane<'a>>>,
    Vec<Lane<'a>>,
);

/// Every row in the lane of its object, keyed so that lanes sort parents first.
fn lanes_of(rows: &[Row]) -> BTreeMap<(u8, String, String), Vec<&Row>> {
    let mut lanes: BTreeMap<(u8, String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        let rank = match r.kind.as_str() {
            "PodCliqueSet" => 0,
            "PodCliqueScalingGroup" => 1,
            "PodClique" => 2,
            "Pod" => 3,
            _ => 4,
        };
        let group = r.clique().unwrap_or("").to_owned();
        let name = if rank == 4 {
            "Events".to_owned()
        } else {
            r.name.clone()
        };
        lanes.entry((rank, group, name)).or_default().push(r);
    }
    lanes
}

fn grouped<'a>(lanes: &'a BTreeMap<(u8, String, String), Vec<&'a Row>>) -> Grouped<'a> {
    let mut objects = Vec::new();
    let mut pods_of: BTreeMap<String, Vec<Lane<'a>>> = BTreeMap::new();
    let mut events = Vec::new();
    for ((rank, group, name), lane) in lanes {
        match rank {
            3 => pods_of.entry(group.clone()).or_default().push((name, lane)),
            4 => events.push((name, lane)),
            _ => objects.push((name, lane)),
        }
    }
    (objects, pods_of, events)
}

/// Lanes as one SVG: per lane its label, a span per state and a mark per entry.
fn svg(lanes: &[Lane<'_>], class: &str, axis: &Axis, evidence: &BTreeSet<usize>) -> String {
    let width = axis.width;
    let height = lanes.len() * LANE_HEIGHT + 4;
    let mut s = format!(
        "<div class=\"lanes\"><svg class=\"{class}\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">"
    );
    for (i, (name, lane)) in lanes.iter().enumerate() {
        let y = i * LANE_HEIGHT + 2;
        let _ = write!(
            s,
            "<g class=\"lane\" data-object=\"{}\"><text x=\"2\" y=\"{}\">{}</text>",
            escape(name),
            y + 10,
            escape(&truncate(name, 44))
        );
        for (k, r) in lane.iter().enumerate() {
            let x0 = axis.x(r);
            let x1 = lane.get(k + 1).map_or(width - 10, |n| axis.x(n));
            if r.kind != "Event" && r.event != "DELETED" {
                let _ = write!(
                    s,
                    "<rect class=\"s {}\" x=\"{x0}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
                    r.class(),
                    y + 2,
                    x1.saturating_sub(x0).max(1),
                    LANE_HEIGHT - 4
                );
            }
        }
        for r in lane.iter() {
            let cited = evidence.contains(&r.position);
            let actor = match r.actor.as_str() {
                "harness" => "harness",
                "system" => "system",
                _ => "impl",
            };
            let _ = write!(
                s,
                "<circle class=\"m {actor}{}\" data-position=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\"><title>{}</title></circle>",
                if cited { " evidence" } else { "" },
                r.position,
                axis.x(r),
                y + LANE_HEIGHT / 2,
                if cited { 5 } else { 3 },
                escape(&r.raw)
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</svg></div>\n");
    s
}

/// A clique's pods: those a violation cites in view, all of them in a `<details>`, open when
/// the clique is small.
fn pods(clique: &str, pods: &[Lane<'_>], axis: &Axis, evidence: &BTreeSet<usize>) -> String {
    let mut out = String::new();
    let clique = if clique.is_empty() {
        "no clique"
    } else {
        clique
    };
    let cited: Vec<Lane<'_>> = pods
        .iter()
        .filter(|(_, lane)| lane.iter().any(|r| evidence.contains(&r.position)))
        .copied()
        .collect();
    let open = pods.len() <= UNFOLDED_PODS;
    if !open && !cited.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"pods-cited\">pods of {} cited by a violation ({} of {})</p>",
            escape(clique),
            cited.len(),
            pods.len()
        );
        out.push_str(&svg(&cited, "pods cited", axis, evidence));
    }
    let _ = writeln!(
        out,
        "<details class=\"pods\"{}><summary>pods of {} ({})</summary>",
        if open { " open" } else { "" },
        escape(clique),
        pods.len()
    );
    out.push_str(&svg(pods, "pods", axis, evidence));
    out.push_str("</details>\n");
    out
}

const LEGEND: &str = "<span class=\"s pending\">pending</span> <span class=\"s running\">running</span> <span class=\"s active\">active</span> <span class=\"s deleting\">deleting</span> <span class=\"s done\">completed / succeeded</span> <span class=\"s failed\">failed</span> · marks: <span class=\"m impl\">●</span> implementation <span class=\"m harness\">●</span> harness <span class=\"m system\">●</span> system <span class=\"m evidence\">◯</span> cited by a violation";

/// The timeline drawn as HTML: a legend, then lane groups (the objects, each clique's pods in
/// a `<details>`, the Events).
pub fn draw(timeline: &str) -> String {
    let (rows, evidence, notes) = read(timeline);
    if rows.is_empty() {
        return format!("<pre class=\"timeline-text\">{}</pre>\n", escape(timeline));
    }
    let axis = Axis::new(&rows);
    let lanes = lanes_of(&rows);
    let (objects, pods_of, events) = grouped(&lanes);
    let mut out = format!(
        "<p class=\"legend\">{LEGEND} · {} entries, hover a mark for the raw entry</p>\n",
        rows.len()
    );
    for note in &notes {
        let _ = writeln!(out, "<p class=\"violation\">{}</p>", escape(note));
    }
    out.push_str(&svg(&objects, "objects", &axis, &evidence));
    for (clique, lanes) in &pods_of {
        out.push_str(&pods(clique, lanes, &axis, &evidence));
    }
    if !events.is_empty() {
        out.push_str(&svg(&events, "events", &axis, &evidence));
    }
    out
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let head: String = s.chars().take(n - 1).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::{Actor, Entry, EventType, render_entries};
    use crate::vocab::{Kind, Vocabulary};

    fn pod(name: &str, rv: u64, phase: &str, actor: Actor) -> Entry {
        Entry::new(
            Kind::Pod,
            EventType::Modified,
            serde_json::json!({
                "metadata": {"name": name, "uid": "0123456789", "resourceVersion": rv.to_string(),
                    "labels": {"grove.io/podclique": "job-0-worker", "grove.io/podclique-pod-index": "0"}},
                "status": {"phase": phase}
            }),
            actor,
        )
        .unwrap()
    }

    #[test]
    fn a_rendered_entry_reads_back() {
        let e = pod("job-0-worker-abc", 42, "Failed", Actor::Harness);
        let text = render_entries(&[(7, &e)], &Vocabulary::default());
        let row = Row::parse(text.lines().next().unwrap()).expect("parses");
        assert_eq!(row.position, 7);
        assert_eq!(row.rv, 42);
        assert_eq!(row.actor, "harness");
        assert_eq!(row.event, "MODIFIED");
        assert_eq!(row.kind, "Pod");
        assert_eq!(row.name, "job-0-worker-abc");
        assert!(row.state.contains("phase=Failed"), "{}", row.state);
        assert_eq!(row.class(), "failed");
        assert!(Row::parse("E3: replacement pod created").is_none());
    }

    #[test]
    fn lanes_fold_pods_under_their_clique_and_highlight_the_evidence() {
        let a = pod("job-0-worker-a", 10, "Running", Actor::Harness);
        let b = pod("job-0-worker-a", 12, "Failed", Actor::Harness);
        let whole = render_entries(&[(0, &a), (1, &b)], &Vocabulary::default());
        let slice = render_entries(&[(1, &b)], &Vocabulary::default());
        let text = format!("E2: the pod failed\n{slice}\n{WHOLE_TIMELINE}\n{whole}");
        let (rows, evidence, notes) = read(&text);
        assert_eq!(rows.len(), 2);
        assert_eq!(evidence, BTreeSet::from([1]));
        assert_eq!(notes, ["E2: the pod failed"]);
        let html = draw(&text);
        assert!(html.contains("pods of job-0-worker (1)"), "{html}");
        assert!(html.contains("class=\"m harness evidence\" data-position=\"1\""));
        assert!(html.contains("class=\"s running\""));
        assert!(html.contains("<title>#1"));
    }
}
