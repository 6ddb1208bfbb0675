//! One word for a case's outcome, the same in `run`, `bench` and `sweep`: [`Verdict`] is an
//! [`Outcome`] without its details, matched exhaustively wherever outcomes are counted.

use super::event::Outcome;

/// An outcome without its details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Every expectation held and the monitor found nothing.
    Pass,
    /// An expectation or an invariant did not hold.
    Fail,
    /// The harness could not judge the case.
    Error,
    /// The case could not run here (a capability the target or implementation lacks).
    Skip,
    /// The case does not apply to the revision.
    NotApplicable,
    /// Repeated, the case passed some runs and failed others.
    Unstable,
}

/// Prefix of a JUnit `<skipped>` message for a case that does not apply to the revision.
pub const NOT_APPLICABLE_PREFIX: &str = "not applicable in this revision: ";

impl Verdict {
    /// Every verdict, in report order.
    pub const ALL: [Verdict; 6] = [
        Verdict::Pass,
        Verdict::Unstable,
        Verdict::Fail,
        Verdict::Error,
        Verdict::Skip,
        Verdict::NotApplicable,
    ];

    /// `pass`, `unstable`, `fail`, `error`, `skip` or `n/a`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::Skip => "skip",
            Verdict::NotApplicable => "n/a",
            Verdict::Unstable => "unstable",
        }
    }

    /// The words for a count of them: `passed`, `unstable`, `failed`, `errored`, `skipped`,
    /// `not applicable`.
    pub fn counted(self) -> &'static str {
        match self {
            Verdict::Pass => "passed",
            Verdict::Fail => "failed",
            Verdict::Error => "errored",
            Verdict::Skip => "skipped",
            Verdict::NotApplicable => "not applicable",
            Verdict::Unstable => "unstable",
        }
    }

    /// Whether a run with this outcome passes (a pass, or a case that cannot apply).
    pub fn is_success(self) -> bool {
        match self {
            Verdict::Pass | Verdict::Skip | Verdict::NotApplicable => true,
            Verdict::Fail | Verdict::Error | Verdict::Unstable => false,
        }
    }
}

impl Outcome {
    /// The outcome's verdict.
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::Pass => Verdict::Pass,
            Outcome::Fail(_) => Verdict::Fail,
            Outcome::Error { .. } => Verdict::Error,
            Outcome::Skip { .. } => Verdict::Skip,
            Outcome::NotApplicable { .. } => Verdict::NotApplicable,
            Outcome::Unstable { .. } => Verdict::Unstable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_one_verdict_and_label() {
        let outcomes = [
            Outcome::Pass,
            Outcome::Unstable {
                passed: 1,
                runs: 2,
                failure: Default::default(),
            },
            Outcome::Fail(Default::default()),
            Outcome::Error {
                message: "e".into(),
            },
            Outcome::Skip { reason: "s".into() },
            Outcome::NotApplicable { reason: "n".into() },
        ];
        for (outcome, verdict) in outcomes.iter().zip(Verdict::ALL) {
            assert_eq!(outcome.verdict(), verdict);
            assert_eq!(outcome.label(), verdict.label());
        }
    }
}
