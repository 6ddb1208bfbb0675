//! What the monitor reports: a [`Violation`] with the timeline slice that proves it, or an
//! [`Undecided`] creation that only the implementation's requests ([`SeenRequest`]) can judge.

/// A broken invariant, with the slice of the timeline that proves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The clause id (`O1`).
    pub clause: &'static str,
    /// What happened, in one sentence.
    pub message: String,
    /// Positions in the timeline of the entries that prove it, ascending.
    pub evidence: Vec<usize>,
    /// Those entries rendered, one per line.
    pub slice: String,
}

impl Violation {
    /// The violation as a paragraph: clause, message and the timeline slice.
    pub fn render(&self) -> String {
        format!("{}: {}\n{}", self.clause, self.message, self.slice)
    }
}

/// A request of the implementation as its API proxy saw it: where it and its answer fell in
/// the proxy's arrival order, and what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The request's number in arrival order.
    pub arrived: u64,
    /// How many requests had arrived when its answer went back: every request numbered
    /// above it was sent after the client had the answer.
    pub answered_after: Option<u64>,
    /// For an accepted create, update or patch: the `resourceVersion` its answer named.
    pub revision: Option<u64>,
    /// For a quorum read (a GET, or a LIST, without `resourceVersion`): the resource
    /// (plural) and the object name (empty for a LIST).
    pub read: Option<(String, String)>,
}

/// A creation the timeline alone cannot judge: a pod created in a PodClique that is not
/// terminal, of a replica whose terminal condition was already persisted. C4 allows a pod
/// create already under way in a child clique at that moment (C2 and C3 clean it up). No
/// implementation can check a parent and create a pod in one step, so a create sent just
/// after the terminal write may still rest on a check made before it; only the requests show
/// that it did not ([`Undecided::judge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided {
    /// The clause (`C4`).
    pub clause: &'static str,
    /// What happened, in one sentence.
    pub message: String,
    /// Positions in the timeline of the terminal write and the creation.
    pub evidence: Vec<usize>,
    /// Those entries rendered, one per line.
    pub slice: String,
    /// The revision the creation committed at.
    pub created: u64,
    /// The revision of the write that made the replica terminal.
    pub terminal: u64,
    /// The terminal parent: its resource (plural) and name.
    pub parent: (String, String),
}

impl Undecided {
    /// The revisions whose writes decide it.
    pub fn revisions(&self) -> [u64; 2] {
        [self.created, self.terminal]
    }

    /// The violation, if `requests` show that the create was not under way: after the
    /// answer to the terminal write, the implementation read the parent afresh (a quorum
    /// read sent after that answer, so it showed the terminal state), had that answer, and
    /// only then sent the create. `None` otherwise: the create may rest on a check made
    /// before the write, or one of the writes is not among `requests` (made past the proxy,
    /// or answered in a form it could not read), and nothing then shows a breach.
    pub fn judge(&self, requests: &[SeenRequest]) -> Option<Violation> {
        let write = |revision: u64| requests.iter().find(|r| r.revision == Some(revision));
        let created = write(self.created)?;
        let terminal = write(self.terminal)?;
        let answered = terminal.answered_after?;
        let (resource, name) = &self.parent;
        let read = requests.iter().find(|r| {
            r.read
                .as_ref()
                .is_some_and(|(res, n)| res == resource && (n.is_empty() || n == name))
                && r.arrived > answered
                && r.answered_after.is_some_and(|a| a < created.arrived)
        })?;
        Some(Violation {
            clause: self.clause,
            message: format!(
                "{}: the implementation read {resource} {name} afresh after the write that made it terminal (request #{}) was answered, had that answer (request #{}), then sent the create (request #{}), so it was not under way then",
                self.message, terminal.arrived, read.arrived, created.arrived
            ),
            evidence: self.evidence.clone(),
            slice: self.slice.clone(),
        })
    }
}
