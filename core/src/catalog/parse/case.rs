//! The case header: `name`, `summary`, `clauses`, `profile`, `fixture`/`fixtures`,
//! `revisions`, `timeout`, and the list of `steps`.

use super::Parser;
use crate::catalog::clauses::{self, ClauseStatus, Profile};
use crate::catalog::model::Case;
use crate::catalog::yaml::Node;
use crate::vocab::Revision;

const CASE_KEYS: &[&str] = &[
    "name",
    "summary",
    "clauses",
    "profile",
    "fixture",
    "fixtures",
    "revisions",
    "timeout",
    "steps",
];

/// A case's name is the value of a label on its namespace, and label values have at most 63
/// characters.
const MAX_CASE_NAME: usize = 63;

impl Parser<'_> {
    pub(super) fn case(&mut self, root: &Node) -> Option<Case> {
        let f = self.fields(root, "", CASE_KEYS)?;

        let name = self
            .required(&f, "name")
            .and_then(|n| self.name(n, "name").map(|s| (s, n.pos)));
        if let Some((name, pos)) = &name {
            let stem = self
                .file
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            if name != stem {
                self.error(
                    *pos,
                    "name",
                    format!("name `{name}` must equal the file name `{stem}`"),
                );
            }
            if name.len() > MAX_CASE_NAME {
                self.error(
                    *pos,
                    "name",
                    format!(
                        "name `{name}` has {} characters; a case's name labels its namespace, so it may have at most {MAX_CASE_NAME}",
                        name.len()
                    ),
                );
            }
        }

        let summary = self.required(&f, "summary").and_then(|n| {
            let s = self.string(n, "summary")?;
            if s.trim().is_empty() || s.contains('\n') {
                self.error(n.pos, "summary", "expected a single non-empty line");
                return None;
            }
            Some(s.trim().to_owned())
        });

        let profile = self.required(&f, "profile").and_then(|n| {
            let s = self.string(n, "profile")?;
            match s.parse::<Profile>() {
                Ok(p) => Some(p),
                Err(e) => {
                    self.error(n.pos, "profile", e);
                    None
                }
            }
        });

        let clauses = self
            .required(&f, "clauses")
            .and_then(|n| self.clauses(n, profile));

        let fixtures = match (f.get("fixture"), f.get("fixtures")) {
            (Some(_), Some(n)) => {
                self.error(
                    n.pos,
                    "fixtures",
                    "use either `fixture` or `fixtures`, not both",
                );
                None
            }
            (Some(n), None) => self.name(n, "fixture").map(|s| vec![(s, n.pos)]),
            (None, Some(n)) => self.seq(n, "fixtures").map(|items| {
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| {
                        self.name(item, &format!("fixtures[{i}]"))
                            .map(|s| (s, item.pos))
                    })
                    .collect()
            }),
            (None, None) => {
                self.error(f.pos, "", "missing required key `fixture` (or `fixtures`)");
                None
            }
        };
        let fixtures: Vec<String> = fixtures
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, pos)| {
                if self.declared_fixtures.contains(&name) {
                    self.error(pos, "fixtures", format!("fixture `{name}` listed twice"));
                    return None;
                }
                if let Some(known) = self.known_fixtures
                    && !known.contains(&name)
                {
                    self.error(
                        pos,
                        "fixtures",
                        format!("unknown fixture `{name}` (no fixtures/{name}.yaml)"),
                    );
                }
                self.declared_fixtures.push(name.clone());
                Some(name)
            })
            .collect();

        let revisions = f.get("revisions").and_then(|n| {
            let items = self.seq(n, "revisions")?;
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let path = format!("revisions[{i}]");
                let s = self.string(item, &path)?;
                match s.parse::<Revision>() {
                    Ok(r) if out.contains(&r) => {
                        self.error(item.pos, &path, format!("revision `{r}` listed twice"));
                    }
                    Ok(r) => out.push(r),
                    Err(e) => self.error(item.pos, &path, e.to_string()),
                }
            }
            if out.is_empty() && items.is_empty() {
                self.error(n.pos, "revisions", "expected at least one revision");
            }
            Some(out)
        });

        let timeout = f.get("timeout").and_then(|n| self.duration(n, "timeout"));

        let steps = self.required(&f, "steps").and_then(|n| {
            let items = self.seq(n, "steps")?;
            if items.is_empty() {
                self.error(n.pos, "steps", "expected at least one step");
            }
            Some(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.step(item, &format!("steps[{i}]")))
                    .collect::<Vec<_>>(),
            )
        });

        Some(Case {
            name: name?.0,
            path: self.file.to_path_buf(),
            area: String::new(),
            summary: summary?,
            clauses: clauses?,
            profile: profile?,
            fixtures,
            revisions,
            timeout,
            steps: steps?,
            terms: std::mem::take(&mut self.terms),
            features: std::mem::take(&mut self.features),
        })
    }

    fn clauses(&mut self, node: &Node, profile: Option<Profile>) -> Option<Vec<String>> {
        let items = self.seq(node, "clauses")?;
        if items.is_empty() {
            self.error(node.pos, "clauses", "expected at least one clause id");
        }
        let mut out: Vec<String> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("clauses[{i}]");
            let Some(id) = self.string(item, &path) else {
                continue;
            };
            match clauses::clause(&id) {
                None => self.error(
                    item.pos,
                    &path,
                    format!("unknown clause `{id}` (not in job-semantics.md)"),
                ),
                Some(_) if out.contains(&id) => {
                    self.error(item.pos, &path, format!("clause `{id}` listed twice"));
                }
                Some(c) => {
                    if profile == Some(Profile::Core) && c.status == ClauseStatus::Provisional {
                        self.error(
                            item.pos,
                            &path,
                            format!(
                                "clause `{id}` is provisional; a case citing it belongs in profile `extended`"
                            ),
                        );
                    }
                    out.push(id);
                }
            }
        }
        Some(out)
    }
}
