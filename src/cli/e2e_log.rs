//! The Ginkgo-style log `--e2e-log` writes, line by line as the run goes, for a runner that
//! follows an e2e log while the run is on (Hydrophone does).

use std::path::PathBuf;

use grove_conformance::report;

/// The Ginkgo-style log `--e2e-log` writes, line by line as the run goes (a runner reads it
/// while the run is on).
pub(crate) struct E2eLog {
    file: Option<std::fs::File>,
    total: usize,
    counts: [usize; 3],
}

impl E2eLog {
    pub(crate) fn new(path: PathBuf, total: usize) -> Self {
        let file = std::fs::File::create(&path)
            .map_err(|e| eprintln!("warning: failed to write {}: {e}", path.display()))
            .ok();
        E2eLog {
            file,
            total,
            counts: [0; 3],
        }
    }

    fn write(&mut self, line: &str) {
        use std::io::Write;
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
    }

    pub(crate) fn on_event(&mut self, event: &report::RunEvent) {
        match event {
            report::RunEvent::RunStarted { cases } => {
                let line = format!(
                    "grove-conformance {}\nWill run {cases} of {} specs",
                    env!("CARGO_PKG_VERSION"),
                    self.total
                );
                self.write(&line);
            }
            report::RunEvent::CaseFinished(result) => {
                let slot = match &result.outcome {
                    report::Outcome::Pass => 0,
                    report::Outcome::Fail(_)
                    | report::Outcome::Unstable { .. }
                    | report::Outcome::Error { .. } => 1,
                    report::Outcome::Skip { .. } | report::Outcome::NotApplicable { .. } => 2,
                };
                self.counts[slot] += 1;
                let detail = match &result.outcome {
                    report::Outcome::Fail(f) | report::Outcome::Unstable { failure: f, .. } => {
                        format!(": {}", f.message)
                    }
                    report::Outcome::Error { message } => format!(": {message}"),
                    report::Outcome::Skip { reason }
                    | report::Outcome::NotApplicable { reason } => {
                        format!(": {reason}")
                    }
                    report::Outcome::Pass => String::new(),
                };
                let line = format!(
                    "• [{}] {} ({:.1}s){detail}",
                    result.outcome.label().to_uppercase(),
                    result.case,
                    result.duration.as_secs_f64()
                );
                self.write(&line);
            }
            report::RunEvent::RunFinished { duration } => {
                let [passed, failed, skipped] = self.counts;
                let verdict = if failed == 0 { "SUCCESS!" } else { "FAIL!" };
                let line = format!(
                    "Ran {} of {} Specs in {:.1} seconds\n{verdict} -- {passed} Passed | {failed} Failed | 0 Pending | {skipped} Skipped",
                    passed + failed,
                    self.total,
                    duration.as_secs_f64()
                );
                self.write(&line);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use grove_conformance::catalog::Profile;
    use grove_conformance::report;

    use super::E2eLog;

    #[test]
    fn the_e2e_log_counts_a_bullet_per_finished_case() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e2e.log");
        let mut log = E2eLog::new(path.clone(), 10);
        log.on_event(&report::RunEvent::RunStarted { cases: 2 });
        let result = |name: &str, outcome: report::Outcome| {
            report::RunEvent::CaseFinished(Box::new(report::CaseResult {
                case: name.into(),
                area: "a".into(),
                clauses: vec![],
                profile: Profile::Core,
                outcome,
                duration: Duration::from_millis(1500),
                time: Default::default(),
                crash_points: vec![],
                fault_points: vec![],
                api: None,
            }))
        };
        log.on_event(&result("one", report::Outcome::Pass));
        log.on_event(&result(
            "two",
            report::Outcome::Skip {
                reason: "why".into(),
            },
        ));
        log.on_event(&report::RunEvent::RunFinished {
            duration: Duration::from_secs(3),
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("Will run 2 of 10 specs\n"), "{text}");
        assert_eq!(text.matches('•').count(), 2, "{text}");
        assert!(text.contains("• [PASS] one (1.5s)"), "{text}");
        assert!(text.contains("• [SKIP] two (1.5s): why"), "{text}");
        assert!(
            text.contains("SUCCESS! -- 1 Passed | 0 Failed | 0 Pending | 1 Skipped"),
            "{text}"
        );
    }
}
