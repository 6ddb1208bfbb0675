//! Smaller variants of a scenario, smallest change first: fewer steps, fewer actions, fewer
//! replicas, cliques and pods, smaller budgets, no targetNames. Each is still a scenario the
//! model can judge (admitted, or rejected for the same clause; every action on an active pod;
//! every step but the last on a state all allowed worlds agree on).

use std::collections::BTreeSet;

use super::generate::{Body, Scenario, predictions, settled};
use crate::model::{Completion, Shape, admit};

/// The valid smaller variants of `s`, each with its change appended to `shrink_path`.
pub fn candidates(s: &Scenario) -> Vec<Scenario> {
    let mut out = Vec::new();
    let mut push = |shape: Shape, body: Body, what: String| {
        let mut path = s.shrink_path.clone();
        path.push(what);
        let c = Scenario {
            seed: s.seed,
            index: s.index,
            shape,
            body,
            shrink_path: path,
            faults: s.faults,
        };
        if let Some(c) = revalidated(c, s) {
            out.push(c);
        }
    };
    if let Body::Rounds(steps) = &s.body {
        // Fewer steps: the tail first, then each step alone.
        for k in (0..steps.len()).rev() {
            let mut v = steps.clone();
            v.truncate(k);
            if k + 1 == steps.len() || k == 0 {
                push(
                    s.shape.clone(),
                    Body::Rounds(v),
                    format!("steps after {k} dropped"),
                );
            }
        }
        for k in 0..steps.len() {
            let mut v = steps.clone();
            v.remove(k);
            push(
                s.shape.clone(),
                Body::Rounds(v),
                format!("step {k} dropped"),
            );
        }
        // Fewer faults.
        for (k, round) in steps.iter().enumerate() {
            if round.faulted() {
                let mut v = steps.clone();
                v[k] = round.without_faults();
                push(
                    s.shape.clone(),
                    Body::Rounds(v),
                    format!("fault of step {k} dropped"),
                );
            }
        }
        // Fewer actions in a batch; a batch seen one action at a time.
        for (k, round) in steps.iter().enumerate() {
            let n = round.pods().count();
            if n > 1 {
                for a in 0..n {
                    let mut v = steps.clone();
                    v[k] = round.without_pod(a);
                    push(
                        s.shape.clone(),
                        Body::Rounds(v),
                        format!("action {a} of step {k} dropped"),
                    );
                }
            }
        }
    }
    // A smaller shape, the same steps.
    let body = s.body.clone();
    if s.shape.replicas > 1 {
        let mut sh = s.shape.clone();
        sh.replicas -= 1;
        push(sh, body.clone(), "one PodCliqueSet replica fewer".into());
    }
    for g in 0..s.shape.groups.len() {
        if s.shape.groups[g].replicas > 1 {
            let mut sh = s.shape.clone();
            sh.groups[g].replicas -= 1;
            push(
                sh,
                body.clone(),
                format!("group {} one replica fewer", s.shape.groups[g].name),
            );
        }
        if s.shape.groups[g].completion.is_some() {
            let mut sh = s.shape.clone();
            let c = sh.groups[g].completion.as_mut().unwrap();
            if c.target_names.is_some() {
                c.target_names = None;
                push(
                    sh,
                    body.clone(),
                    format!("group {} without targetNames", s.shape.groups[g].name),
                );
            }
            let mut sh = s.shape.clone();
            let c = sh.groups[g].completion.as_mut().unwrap();
            if let Some(m) = c.max_restarts.filter(|m| *m > 0) {
                c.max_restarts = Some(m - 1);
                push(
                    sh,
                    body.clone(),
                    format!("group {} budget {}", s.shape.groups[g].name, m - 1),
                );
            }
        }
    }
    if let Some(c) = &s.shape.completion {
        if c.target_names.is_some() {
            let mut sh = s.shape.clone();
            sh.completion = Some(Completion {
                target_names: None,
                ..c.clone()
            });
            push(sh, body.clone(), "PodCliqueSet without targetNames".into());
        }
        if let Some(m) = c.max_restarts.filter(|m| *m > 0) {
            let mut sh = s.shape.clone();
            sh.completion.as_mut().unwrap().max_restarts = Some(m - 1);
            push(sh, body.clone(), format!("PodCliqueSet budget {}", m - 1));
        }
    }
    for k in 0..s.shape.cliques.len() {
        let name = s.shape.cliques[k].name.clone();
        // Without the clique (and out of its group and any targetNames).
        let mut sh = s.shape.clone();
        sh.cliques.remove(k);
        for g in &mut sh.groups {
            g.members.retain(|m| *m != name);
        }
        sh.groups.retain(|g| !g.members.is_empty());
        push(sh, body.clone(), format!("clique {name} removed"));
        if s.shape.cliques[k].pods > 1 {
            let mut sh = s.shape.clone();
            sh.cliques[k].pods -= 1;
            push(sh, body.clone(), format!("clique {name} one pod fewer"));
        }
    }
    out
}

/// `c` when it is still a scenario the model judges like `orig` (same kind of body).
fn revalidated(c: Scenario, orig: &Scenario) -> Option<Scenario> {
    match (&c.body, &orig.body) {
        (Body::Rejected { clause, .. }, Body::Rejected { .. }) => {
            let due = admit(&c.shape);
            let [one] = due.as_slice() else {
                return None;
            };
            (one.clause == *clause).then(|| Scenario {
                body: Body::Rejected {
                    clause: one.clause,
                    field: one.field.clone(),
                },
                ..c.clone()
            })
        }
        (Body::Rounds(steps), Body::Rounds(_)) => {
            if !admit(&c.shape).is_empty() || c.shape.children().is_empty() {
                return None;
            }
            let worlds = predictions(&c.shape, steps).ok()?;
            // Every step but the last acts on one agreed state.
            if worlds[..worlds.len() - 1]
                .iter()
                .any(|w: &BTreeSet<_>| settled(w).is_none())
            {
                return None;
            }
            Some(c)
        }
        _ => None,
    }
}
