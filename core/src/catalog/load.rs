//! Loading the catalog (`cases/`, `fixtures/`), linting it and deciding which cases apply
//! to a revision.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::clauses::{CLAUSES, Profile};
use super::diagnostic::Diagnostic;
use super::model::{Addressee, Apply, Case, ObjectRef, StepKind};
use super::parse::parse_case_with_fixtures;
use super::patch::merge_patch;
use super::yaml::{self, Node, Pos};
use crate::vocab::{GROVE_API_VERSION, Kind, Revision, Unsupported, Vocabulary};

/// A reusable PodCliqueSet manifest under `fixtures/`, written in the default revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Fixture {
    /// The file stem, which cases use to name it.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// `metadata.name` of the PodCliqueSet it creates.
    pub object_name: String,
    /// The manifest.
    pub manifest: Value,
    /// Where its containers break the fixture container contract (see [`container_contract`]),
    /// so that they could not be driven on real kubelets; [`lint`] reports them.
    pub contract: Vec<Diagnostic>,
}

/// The FIFO a fixture container blocks on: it exits with the code the harness writes into it.
pub const EXIT_CODE_FILE: &str = "/tmp/exit-code";
/// While this file exists, a fixture container's readiness probe succeeds.
pub const READY_FILE: &str = "/tmp/www/ready";
/// The HTTP path and port of a fixture container's readiness probe (serving `/tmp/www`).
pub const READY_PROBE: (&str, u64) = ("/ready", 8080);

/// The fixture container contract: what a container of a fixture must do so that the harness
/// can drive it on real kubelets (kind, any cluster), where there is no simulated kubelet.
///
/// - its image is local to the nodes, so it is never pulled: `imagePullPolicy: IfNotPresent`
///   or `Never` (no policy means `Always` for an untagged or `:latest` image);
/// - it blocks reading the FIFO [`EXIT_CODE_FILE`] and exits with the code read there (an
///   `exit` step writes it through an exec);
/// - it serves [`READY_FILE`]'s folder over HTTP and has a readiness probe on
///   [`READY_PROBE`], so `unready` and `ready` remove and restore that file.
///
/// Init containers need a local image too. Returns a diagnostic per breach, at the field
/// concerned (or the nearest node of it the file has).
pub fn container_contract(path: &Path, root: &Node) -> Vec<Diagnostic> {
    contract_breaches(&root.to_json())
        .into_iter()
        .map(|(field, message)| Diagnostic::at(path, node_at(root, &field).pos, field, message))
        .collect()
}

/// The node at a dotted field path (`spec.template.cliques[0].spec`), or the deepest one on
/// the way that exists.
fn node_at<'a>(root: &'a Node, field: &str) -> &'a Node {
    let mut node = root;
    for part in field.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some(next) = node.get(key) else {
            return node;
        };
        node = next;
        if let Some(index) = index {
            match &node.value {
                yaml::NodeValue::Seq(items) if index < items.len() => node = &items[index],
                _ => return node,
            }
        }
    }
    node
}

/// The breaches of the [`container_contract`] in a PodCliqueSet manifest: the field of each,
/// and what is wrong.
fn contract_breaches(manifest: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let items = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let cliques = items(manifest.pointer("/spec/template/cliques"));
    for (i, clique) in cliques.iter().enumerate() {
        let pod = clique.pointer("/spec/podSpec");
        for (list, must_block) in [("initContainers", false), ("containers", true)] {
            for (j, container) in items(pod.and_then(|p| p.get(list))).iter().enumerate() {
                let field = format!("spec.template.cliques[{i}].spec.podSpec.{list}[{j}]");
                let name = container.get("name").and_then(Value::as_str).unwrap_or("?");
                let mut breach = |sub: &str, message: String| {
                    found.push((
                        format!("{field}.{sub}"),
                        format!("container `{name}` {message}"),
                    ));
                };
                let image = container
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let untagged_or_latest = {
                    let last = image.rsplit('/').next().unwrap_or_default();
                    !image.contains('@')
                        && last.split_once(':').is_none_or(|(_, tag)| tag == "latest")
                };
                match container.get("imagePullPolicy").and_then(Value::as_str) {
                    Some("IfNotPresent" | "Never") => {}
                    None if !untagged_or_latest => {}
                    Some(other) => breach(
                        "imagePullPolicy",
                        format!(
                            "would pull its image (`imagePullPolicy: {other}`): fixture images are local to the nodes, say `IfNotPresent` or `Never`"
                        ),
                    ),
                    None => breach(
                        "imagePullPolicy",
                        format!(
                            "would pull its image (`{image}` without `imagePullPolicy` means `Always`): fixture images are local to the nodes, say `IfNotPresent` or `Never`"
                        ),
                    ),
                }
                if !must_block {
                    continue;
                }
                let command: String = ["command", "args"]
                    .iter()
                    .filter_map(|k| container.get(*k))
                    .map(Value::to_string)
                    .collect();
                if !command.contains(EXIT_CODE_FILE) {
                    breach(
                        "command",
                        format!(
                            "does not block on the FIFO {EXIT_CODE_FILE} and exit with the code read there, so an `exit` step cannot end it on real kubelets"
                        ),
                    );
                }
                let probe_ok = container
                    .pointer("/readinessProbe/httpGet")
                    .is_some_and(|p| {
                        p.get("path").and_then(Value::as_str) == Some(READY_PROBE.0)
                            && p.get("port").and_then(Value::as_u64) == Some(READY_PROBE.1)
                    });
                if !probe_ok || !command.contains(READY_FILE) {
                    breach(
                        "readinessProbe",
                        format!(
                            "needs a readiness probe on http port {} path {} served from {READY_FILE} (which its command creates), so `unready` and `ready` can flip it on real kubelets",
                            READY_PROBE.1, READY_PROBE.0
                        ),
                    );
                }
            }
        }
    }
    found
}

/// The breaches of the [`container_contract`] that a case's `apply` patches bring into the
/// fixtures they apply (a fixture's own breaches are reported at the fixture).
fn patched_contract_breaches(catalog: &Catalog) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    for case in &catalog.cases {
        for (index, step) in case.steps.iter().enumerate() {
            let StepKind::Apply(apply) = &step.kind else {
                continue;
            };
            let (Some(patch), Some(fixture)) = (&apply.patch, catalog.fixture(&apply.fixture))
            else {
                continue;
            };
            let own: BTreeSet<String> = contract_breaches(&fixture.manifest)
                .into_iter()
                .map(|(field, _)| field)
                .collect();
            let mut manifest = fixture.manifest.clone();
            merge_patch(&mut manifest, patch);
            for (field, message) in contract_breaches(&manifest) {
                if !own.contains(&field) {
                    diags.push(Diagnostic::at(
                        &case.path,
                        step.pos,
                        format!("steps[{index}].apply.patch"),
                        format!("the patched fixture's {field}: {message}"),
                    ));
                }
            }
        }
    }
    diags
}

/// The whole catalog: every case and fixture, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    /// The folder holding `cases/` and `fixtures/`.
    pub root: PathBuf,
    /// Cases, sorted by path.
    pub cases: Vec<Case>,
    /// Fixtures by name.
    pub fixtures: BTreeMap<String, Fixture>,
}

/// Whether a case runs under a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applicability {
    /// It runs.
    Applies,
    /// It is reported not applicable in this revision, with this reason.
    NotApplicable(String),
}

fn yaml_files(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if recursive {
                yaml_files(&path, recursive, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

/// Parses and validates one fixture file.
pub fn parse_fixture(path: &Path, text: &str) -> Result<Fixture, Vec<Diagnostic>> {
    let root = yaml::parse(text).map_err(|e| vec![Diagnostic::at(path, e.pos, "", e.message)])?;
    let mut diags = Vec::new();
    let pos_of = |node: Option<&Node>| node.map_or(root.pos, |n| n.pos);
    let manifest = root.to_json();
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut check = |ok: bool, node: Option<&Node>, field: &str, msg: String| {
        if !ok {
            diags.push(Diagnostic::at(path, pos_of(node), field, msg));
        }
    };
    check(
        manifest.is_object(),
        None,
        "",
        "expected a PodCliqueSet manifest (a mapping)".into(),
    );
    let api = manifest.get("apiVersion").and_then(Value::as_str);
    check(
        api == Some(GROVE_API_VERSION),
        root.get("apiVersion"),
        "apiVersion",
        format!(
            "expected `{GROVE_API_VERSION}`, found {}",
            api.map_or("nothing".into(), |a| format!("`{a}`"))
        ),
    );
    let kind = manifest.get("kind").and_then(Value::as_str);
    check(
        kind == Some(Kind::PodCliqueSet.as_str()),
        root.get("kind"),
        "kind",
        format!(
            "expected `PodCliqueSet`, found {}",
            kind.map_or("nothing".into(), |k| format!("`{k}`"))
        ),
    );
    let metadata = root.get("metadata");
    let name = manifest.pointer("/metadata/name").and_then(Value::as_str);
    let name_ok = name.is_some_and(|n| {
        !n.is_empty()
            && n.len() <= 63
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !n.starts_with('-')
            && !n.ends_with('-')
    });
    check(
        name_ok,
        metadata.and_then(|m| m.get("name")).or(metadata),
        "metadata.name",
        "expected a DNS label (lowercase letters, digits, `-`)".into(),
    );
    check(
        manifest.pointer("/metadata/namespace").is_none(),
        metadata.and_then(|m| m.get("namespace")),
        "metadata.namespace",
        "a fixture has no namespace: every case runs in a fresh one".into(),
    );
    let template = root.get("spec").and_then(|s| s.get("template"));
    let cliques = manifest
        .pointer("/spec/template/cliques")
        .and_then(Value::as_array);
    check(
        cliques.is_some_and(|c| !c.is_empty()),
        template.or(root.get("spec")),
        "spec.template.cliques",
        "expected a non-empty list of cliques".into(),
    );
    if let Some(cliques) = cliques {
        for (i, c) in cliques.iter().enumerate() {
            check(
                c.get("name").and_then(Value::as_str).is_some(),
                template.and_then(|t| t.get("cliques")),
                &format!("spec.template.cliques[{i}].name"),
                "every clique needs a name".into(),
            );
        }
    }
    if diags.is_empty() {
        Ok(Fixture {
            name: stem,
            path: path.to_path_buf(),
            object_name: name.unwrap_or_default().to_owned(),
            manifest,
            contract: container_contract(path, &root),
        })
    } else {
        Err(diags)
    }
}

/// Loads `root/fixtures/*.yaml` and `root/cases/**/*.yaml`, reporting every problem at once.
pub fn load_catalog(root: &Path) -> Result<Catalog, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut fixtures = BTreeMap::new();
    let fixtures_dir = root.join("fixtures");
    let mut fixture_files = Vec::new();
    if let Err(e) = yaml_files(&fixtures_dir, false, &mut fixture_files) {
        diags.push(Diagnostic::file(
            &fixtures_dir,
            format!("failed to read the fixtures folder: {e}"),
        ));
    }
    fixture_files.sort();
    for path in fixture_files {
        match fs::read_to_string(&path) {
            Err(e) => diags.push(Diagnostic::file(&path, format!("failed to read: {e}"))),
            Ok(text) => match parse_fixture(&path, &text) {
                Ok(f) => {
                    fixtures.insert(f.name.clone(), f);
                }
                Err(d) => diags.extend(d),
            },
        }
    }
    let mut by_object: BTreeMap<&str, &str> = BTreeMap::new();
    for f in fixtures.values() {
        let _ = by_object.entry(&f.object_name).or_insert(&f.name);
    }
    let known: BTreeSet<String> = fixtures.keys().cloned().collect();

    let cases_dir = root.join("cases");
    let mut case_files = Vec::new();
    if let Err(e) = yaml_files(&cases_dir, true, &mut case_files) {
        diags.push(Diagnostic::file(
            &cases_dir,
            format!("failed to read the cases folder: {e}"),
        ));
    }
    case_files.sort();
    let mut cases: Vec<Case> = Vec::new();
    let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in case_files {
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                diags.push(Diagnostic::file(&path, format!("failed to read: {e}")));
                continue;
            }
        };
        match parse_case_with_fixtures(&path, &text, &known) {
            Ok(mut case) => {
                case.area = path
                    .parent()
                    .and_then(|p| p.strip_prefix(&cases_dir).ok())
                    .map(|p| p.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                if let Some(first) = names.get(&case.name) {
                    diags.push(Diagnostic::at(
                        &path,
                        Pos { line: 1, column: 1 },
                        "name",
                        format!(
                            "case name `{}` is already used by {}",
                            case.name,
                            first.display()
                        ),
                    ));
                } else {
                    names.insert(case.name.clone(), path.clone());
                    cases.push(case);
                }
            }
            Err(d) => diags.extend(d),
        }
    }
    if diags.is_empty() {
        Ok(Catalog {
            root: root.to_path_buf(),
            cases,
            fixtures,
        })
    } else {
        diags.sort();
        Err(diags)
    }
}

/// Loads the catalog and checks it is complete (every `core` clause is cited by at least one
/// case) and that every fixture container keeps the [`container_contract`]. Returns the
/// catalog when it is valid and complete.
pub fn lint(root: &Path) -> Result<Catalog, Vec<Diagnostic>> {
    let catalog = load_catalog(root)?;
    let diags = lint_catalog(&catalog);
    if diags.is_empty() {
        Ok(catalog)
    } else {
        Err(diags)
    }
}

/// The checks of [`lint`] on an already loaded catalog.
pub fn lint_catalog(catalog: &Catalog) -> Vec<Diagnostic> {
    let mut diags: Vec<Diagnostic> = catalog
        .fixtures
        .values()
        .flat_map(|f| f.contract.iter().cloned())
        .collect();
    diags.extend(patched_contract_breaches(catalog));
    diags.extend(uncited_clauses(catalog));
    diags
}

/// A diagnostic naming the `core` clauses no case cites, if any.
fn uncited_clauses(catalog: &Catalog) -> Vec<Diagnostic> {
    let uncited: Vec<&str> = CLAUSES
        .iter()
        .filter(|c| c.profile() == Profile::Core)
        .filter(|c| catalog.cases_citing(c.id).is_empty())
        .map(|c| c.id)
        .collect();
    if uncited.is_empty() {
        Vec::new()
    } else {
        vec![Diagnostic::file(
            catalog.root.join("cases"),
            format!(
                "core clauses cited by no case: {} (every core clause needs at least one case)",
                uncited.join(", ")
            ),
        )]
    }
}

impl Catalog {
    /// The case named `name`.
    pub fn case(&self, name: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// The fixture named `name`.
    pub fn fixture(&self, name: &str) -> Option<&Fixture> {
        self.fixtures.get(name)
    }

    /// Cases citing clause `id`, sorted by name.
    pub fn cases_citing(&self, id: &str) -> Vec<&Case> {
        let mut out: Vec<&Case> = self
            .cases
            .iter()
            .filter(|c| c.clauses.iter().any(|k| k == id))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The object a step's target names (a fixture names its PodCliqueSet).
    pub fn resolve(&self, target: &Addressee) -> Option<ObjectRef> {
        match target {
            Addressee::Object(o) => Some(o.clone()),
            Addressee::Fixture(f) => self.fixture(f).map(|f| ObjectRef {
                kind: Kind::PodCliqueSet,
                name: f.object_name.clone(),
            }),
        }
    }

    /// The manifest an `apply` sends under `vocab`: fixture, then patch, then translation.
    pub fn manifest(&self, apply: &Apply, vocab: &Vocabulary) -> Result<Value, Unsupported> {
        let mut manifest = self
            .fixture(&apply.fixture)
            .map(|f| f.manifest.clone())
            .unwrap_or(Value::Null);
        if let Some(patch) = &apply.patch {
            merge_patch(&mut manifest, patch);
        }
        vocab.translate_manifest(Kind::PodCliqueSet, &manifest)
    }

    /// Whether `case` runs under `revision`, and if not, why.
    ///
    /// A case is not applicable when it lists `revisions` without this one, relies on a
    /// capability or name the revision lacks, or creates a manifest the revision cannot
    /// express.
    pub fn applicability(&self, case: &Case, revision: Revision) -> Applicability {
        if let Some(revisions) = &case.revisions
            && !revisions.contains(&revision)
        {
            let ids: Vec<&str> = revisions.iter().map(|r| r.id()).collect();
            return Applicability::NotApplicable(format!(
                "the case applies only to revisions {}",
                ids.join(", ")
            ));
        }
        let vocab = Vocabulary::new(revision);
        for feature in &case.features {
            if let Err(e) = vocab.require_feature(*feature) {
                return Applicability::NotApplicable(e.to_string());
            }
        }
        for term in &case.terms {
            if let Err(e) = vocab.require(*term) {
                return Applicability::NotApplicable(e.to_string());
            }
        }
        for step in &case.steps {
            let Some(apply) = step.kind.sent_manifest() else {
                continue;
            };
            if let Err(e) = self.manifest(apply, &vocab) {
                return Applicability::NotApplicable(e.to_string());
            }
        }
        Applicability::Applies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"apiVersion: grove.io/v1alpha1
kind: PodCliqueSet
metadata:
  name: job
spec:
  template:
    cliques:
      - name: worker
        spec:
          podSpec:
            containers:
              - name: main
                image: busybox
                imagePullPolicy: IfNotPresent
                command: ["sh", "-c", "mkfifo /tmp/exit-code && mkdir -p /tmp/www && echo ok > /tmp/www/ready && httpd -p 8080 -h /tmp/www && read code < /tmp/exit-code; exit $code"]
                readinessProbe:
                  httpGet: {path: /ready, port: 8080}
"#;

    fn catalog_of(fixture: Fixture) -> Catalog {
        Catalog {
            root: PathBuf::from("."),
            cases: Vec::new(),
            fixtures: BTreeMap::from([(fixture.name.clone(), fixture)]),
        }
    }

    fn contract_breaches(text: &str) -> Vec<String> {
        let fixture = parse_fixture(Path::new("fixtures/f.yaml"), text).unwrap();
        lint_catalog(&catalog_of(fixture))
            .iter()
            .filter(|d| !d.message.contains("core clauses"))
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn lint_rejects_fixture_containers_that_cannot_be_driven_on_real_kubelets() {
        assert_eq!(contract_breaches(GOOD), Vec::<String>::new());
        // `image: busybox` without a pull policy: kind's nodes would try a registry.
        let pulled = GOOD.replace("                imagePullPolicy: IfNotPresent\n", "");
        assert_eq!(
            contract_breaches(&pulled),
            [
                "fixtures/f.yaml:12:17: spec.template.cliques[0].spec.podSpec.containers[0].imagePullPolicy: container `main` would pull its image (`busybox` without `imagePullPolicy` means `Always`): fixture images are local to the nodes, say `IfNotPresent` or `Never`"
            ]
        );
        let always = GOOD.replace("IfNotPresent", "Always");
        assert_eq!(contract_breaches(&always).len(), 1, "{always}");
        // A tagged image defaults to IfNotPresent.
        let tagged = pulled.replace("image: busybox", "image: busybox:1.36");
        assert_eq!(contract_breaches(&tagged), Vec::<String>::new());
        // A container that neither blocks on the FIFO nor serves its readiness file.
        let sleeper = GOOD
            .replace(
                r#"["sh", "-c", "mkfifo /tmp/exit-code && mkdir -p /tmp/www && echo ok > /tmp/www/ready && httpd -p 8080 -h /tmp/www && read code < /tmp/exit-code; exit $code"]"#,
                r#"["sleep", "3600"]"#,
            )
            .replace("path: /ready", "path: /healthz");
        let breaches = contract_breaches(&sleeper);
        assert_eq!(breaches.len(), 2, "{breaches:?}");
        assert!(breaches[0].contains("does not block on the FIFO /tmp/exit-code"));
        assert!(breaches[1].contains("needs a readiness probe on http port 8080 path /ready"));
    }

    #[test]
    fn lint_rejects_a_case_whose_patch_makes_a_fixture_container_pull_its_image() {
        let fixture = parse_fixture(Path::new("fixtures/f.yaml"), GOOD).unwrap();
        let text = "name: one\nsummary: s\nclauses: [E1]\nprofile: core\nfixture: f\nsteps:\n  - apply: {fixture: f, patch: {spec: {template: {cliques: [{name: worker, spec: {podSpec: {containers: [{name: main, imagePullPolicy: Always}]}}}]}}}}\n";
        let known = BTreeSet::from(["f".to_string()]);
        let case = super::super::parse::parse_case_with_fixtures(
            Path::new("cases/a/one.yaml"),
            text,
            &known,
        )
        .unwrap();
        let mut catalog = catalog_of(fixture);
        catalog.cases.push(case);
        let breaches: Vec<String> = lint_catalog(&catalog)
            .iter()
            .filter(|d| !d.message.contains("core clauses"))
            .map(ToString::to_string)
            .collect();
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert!(
            breaches[0].starts_with("cases/a/one.yaml:7:5: steps[0].apply.patch: the patched fixture's spec.template.cliques[0].spec.podSpec.containers[0].imagePullPolicy: container `main` would pull its image (`imagePullPolicy: Always`)"),
            "{breaches:?}"
        );
    }
}
