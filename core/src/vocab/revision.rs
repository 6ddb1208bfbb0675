//! Spec revisions: the [`Revision`] an implementation claims, and parsing its id.

use std::fmt;
use std::str::FromStr;

/// A revision of the job-support spec an implementation can claim (job-semantics.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Revision {
    /// `grep-0285-review`: the GREP as settled in review (the default).
    #[default]
    Grep0285Review,
    /// `grep-0285-2026-08`: the GREP text of 2026-08-13 (`completedNames`, no empty markers).
    Grep0285ProposalText,
    /// `grove-pr-728`: the first partial implementation upstream (PodClique level only).
    GrovePr728,
}

impl Revision {
    /// Every revision, default first (the column order of [`TABLE`](super::TABLE)).
    pub const ALL: [Revision; 3] = [
        Revision::Grep0285Review,
        Revision::Grep0285ProposalText,
        Revision::GrovePr728,
    ];

    /// The stable id used on the command line, in cases and in reports.
    pub fn id(self) -> &'static str {
        match self {
            Revision::Grep0285Review => "grep-0285-review",
            Revision::Grep0285ProposalText => "grep-0285-2026-08",
            Revision::GrovePr728 => "grove-pr-728",
        }
    }

    /// One line saying what the revision is.
    pub fn description(self) -> &'static str {
        match self {
            Revision::Grep0285Review => "the GREP as settled in review",
            Revision::Grep0285ProposalText => "the GREP text of 2026-08-13",
            Revision::GrovePr728 => "the first partial implementation upstream",
        }
    }

    /// The revision's column in [`TABLE`](super::TABLE).
    pub(super) fn column(self) -> usize {
        match self {
            Revision::Grep0285Review => 0,
            Revision::Grep0285ProposalText => 1,
            Revision::GrovePr728 => 2,
        }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A revision id that is not one of [`Revision::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown spec revision `{0}` (expected one of grep-0285-review, grep-0285-2026-08, grove-pr-728)"
)]
pub struct UnknownRevision(pub String);

impl FromStr for Revision {
    type Err = UnknownRevision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Revision::ALL
            .into_iter()
            .find(|r| r.id() == s)
            .ok_or_else(|| UnknownRevision(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_ids_round_trip() {
        for r in Revision::ALL {
            assert_eq!(r.id().parse::<Revision>().unwrap(), r);
            assert_eq!(r.to_string(), r.id());
        }
        assert_eq!(Revision::default(), Revision::Grep0285Review);
        let err = "grep-0285".parse::<Revision>().unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown spec revision `grep-0285`")
        );
    }
}
