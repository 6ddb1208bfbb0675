//! A job shape: what a PodCliqueSet manifest says that the spec's clauses read, as plain data.
//! It can express invalid shapes too (for the V clauses); [`admit`](super::admit) says which
//! rejections are due.

/// A clique's `podSpec.restartPolicy`, when the manifest sets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RestartPolicy {
    /// `Always`.
    Always,
    /// `OnFailure`.
    OnFailure,
    /// `Never`.
    Never,
}

impl RestartPolicy {
    /// As written in a pod spec.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never => "Never",
        }
    }
}

/// `policy.completion` of a PCSG or the PCS: `success.targetNames` and `failure.maxRestarts`,
/// each optional.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Completion {
    /// `success.targetNames` (`None`: absent).
    pub target_names: Option<Vec<String>>,
    /// `failure.maxRestarts` (`None`: absent, meaning 0).
    pub max_restarts: Option<i32>,
}

impl Completion {
    /// The restart budget: `maxRestarts` omitted means 0 (Definitions); a negative one is
    /// rejected at admission (V3), so it never reaches evaluation.
    pub fn budget(&self) -> u32 {
        self.max_restarts.unwrap_or(0).max(0) as u32
    }
}

/// A clique template (`spec.template.cliques[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Clique {
    /// `name`.
    pub name: String,
    /// `spec.replicas`: pods of each PodClique made from it.
    pub pods: u32,
    /// `spec.policy.completion` (`Some` makes the clique completion-aware, `{}` included).
    /// On a clique only `failure.maxRestarts: 0` is valid (V1, V3).
    pub completion: Option<Completion>,
    /// `spec.podSpec.restartPolicy`, when set (V5, V6).
    pub restart_policy: Option<RestartPolicy>,
    /// `spec.autoScalingConfig` present (V7).
    pub autoscaling: bool,
}

impl Clique {
    /// Completion-aware: its `policy.completion` is present, any value (Definitions).
    pub fn aware(&self) -> bool {
        self.completion.is_some()
    }
}

/// A scaling group config (`spec.template.podCliqueScalingGroups[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Group {
    /// `name`.
    pub name: String,
    /// `replicas`.
    pub replicas: u32,
    /// `cliqueNames`.
    pub members: Vec<String>,
    /// `policy.completion`.
    pub completion: Option<Completion>,
    /// `scaleConfig` present (V7).
    pub scale_config: bool,
}

/// A PodCliqueSet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// `metadata.name`.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: u32,
    /// `spec.policy.completion`.
    pub completion: Option<Completion>,
    /// `spec.template.cliques`, in order.
    pub cliques: Vec<Clique>,
    /// `spec.template.podCliqueScalingGroups`, in order.
    pub groups: Vec<Group>,
}

/// A direct child of a PCS replica (Definitions): a standalone clique or a PCSG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child<'a> {
    /// A clique in no PCSG.
    Clique(&'a Clique),
    /// A PCSG.
    Group(&'a Group),
}

impl<'a> Child<'a> {
    /// Its template name.
    pub fn name(&self) -> &'a str {
        match self {
            Child::Clique(c) => &c.name,
            Child::Group(g) => &g.name,
        }
    }
}

impl Shape {
    /// The clique template named `name`.
    pub fn clique(&self, name: &str) -> Option<&Clique> {
        self.cliques.iter().find(|c| c.name == name)
    }

    /// The group whose `cliqueNames` lists `clique`.
    pub fn group_of(&self, clique: &str) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.members.iter().any(|m| m == clique))
    }

    /// A PCSG is completion-aware when at least one of its `cliqueNames` is (Definitions).
    pub fn group_aware(&self, group: &Group) -> bool {
        group
            .members
            .iter()
            .any(|m| self.clique(m).is_some_and(Clique::aware))
    }

    /// The direct children of a PCS replica: standalone cliques, then PCSGs (Definitions).
    pub fn children(&self) -> Vec<Child<'_>> {
        self.cliques
            .iter()
            .filter(|c| self.group_of(&c.name).is_none())
            .map(Child::Clique)
            .chain(self.groups.iter().map(Child::Group))
            .collect()
    }

    /// Whether a direct child is completion-aware.
    pub fn child_aware(&self, child: Child<'_>) -> bool {
        match child {
            Child::Clique(c) => c.aware(),
            Child::Group(g) => self.group_aware(g),
        }
    }

    /// A PCS is completion-aware when at least one direct child is (Definitions).
    pub fn aware(&self) -> bool {
        self.children().into_iter().any(|c| self.child_aware(c))
    }

    /// Name of the standalone PodClique of replica `i` (B1).
    pub fn standalone_name(&self, i: u32, clique: &str) -> String {
        format!("{}-{i}-{clique}", self.name)
    }

    /// Name of the PCSG object of replica `i` (B1).
    pub fn group_name(&self, i: u32, group: &str) -> String {
        format!("{}-{i}-{group}", self.name)
    }

    /// Name of the PodClique of PCSG replica `j` in PCS replica `i` (B1).
    pub fn member_name(&self, i: u32, group: &str, j: u32, clique: &str) -> String {
        format!("{}-{i}-{group}-{j}-{clique}", self.name)
    }

    /// Every pod the shape creates at first (B5).
    pub fn total_pods(&self) -> u32 {
        let per_replica: u32 = self
            .cliques
            .iter()
            .map(|c| c.pods * self.group_of(&c.name).map_or(1, |g| g.replicas))
            .sum();
        per_replica * self.replicas
    }
}
