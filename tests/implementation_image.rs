//! An implementation run from a container image: the reference operator, packed into an image
//! built here from this very binary (`grove-conformance image --role reference-operator`, as
//! `reference-operator/deploy/` runs it, as user 65532), certified on the embedded cluster through
//! `--implementation-image` (testcontainers), including a pause (`docker pause`) and a crash
//! (kill and start of the container). Without a Docker engine the test says `skipped:` with
//! the reason and checks nothing else.

mod common;

use std::process::Command;

use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::implementation::container::{OWNER_LABEL, docker_available};
use grove_conformance::implementation::{Instance, Setup};
use grove_conformance::report::Outcome;
use grove_conformance::runner::{RunSettings, Selection};

#[test]
fn the_reference_operator_image_passes_cases_that_pause_and_crash_it() {
    if let Err(reason) = docker_available() {
        eprintln!("skipped: {reason}");
        return;
    }
    let tag = format!(
        "grove-conformance-test/reference-operator:{}",
        std::process::id()
    );
    grove_conformance::host::image::build(
        common::harness_binary(),
        &tag,
        grove_conformance::host::image::Role::ReferenceOperator,
        common::root(),
    )
    .unwrap();
    let _image = RemoveImage(tag.clone());

    let catalog = common::repository_catalog();
    let names = [
        "all-pods-succeed-completes-clique",
        "succeeded-pod-deleted-while-paused-still-completes",
        "pod-vanishes-while-controller-down-fails-clique",
    ];
    let selection = Selection {
        filters: names.iter().map(|n| (*n).to_string()).collect(),
        profile: None,
    };
    let cases: Vec<_> = catalog
        .cases
        .iter()
        .filter(|c| selection.selects(c) && names.contains(&c.name.as_str()))
        .cloned()
        .collect();
    assert_eq!(cases.len(), names.len());
    let logs = tempfile::tempdir().unwrap();
    let image = ImplementationSpec::Image {
        image: tag.clone(),
        args: Some("run --kubeconfig {kubeconfig} --namespace {namespace}".into()),
        setup: Setup::default(),
    };
    let settings = RunSettings {
        jobs: 3,
        ..common::settings(image, logs.path())
    };
    let runtime = grove_conformance::host::runtime("grove-test", None).unwrap();
    let (results, version_log) = runtime.block_on(async {
        let target = common::embedded_target().await;
        let results = grove_conformance::runner::run_cases(
            target.handles(),
            catalog.clone(),
            cases,
            &settings,
            |_| {},
        )
        .await
        .unwrap();
        // A container that ends on its own is noticed, and its output is kept in its log.
        let log = logs.path().join("version.log");
        let spec = ImplementationSpec::Image {
            image: tag.clone(),
            args: Some("--version".into()),
            setup: Setup::default(),
        };
        let mut instance = Instance::start(&spec, &target.handles().kubeconfig, None, &log)
            .await
            .unwrap();
        let mut exited = None;
        for _ in 0..100 {
            exited = instance.exited().await;
            if exited.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(exited.is_some(), "the container did not stop on its own");
        instance.stop().await;
        (results, std::fs::read_to_string(&log).unwrap())
    });
    let passed: Vec<&str> = results
        .cases
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Pass))
        .map(|r| r.case.as_str())
        .collect();
    assert_eq!(passed.len(), names.len(), "{:#?}", results.cases);
    assert!(
        version_log.contains(concat!(
            "grove-reference-operator ",
            env!("CARGO_PKG_VERSION")
        )),
        "{version_log}"
    );
    // Every container is gone.
    let left = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter"])
        .arg(format!("label={OWNER_LABEL}={}", std::process::id()))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// Removes the image when the test ends, passed or not.
struct RemoveImage(String);

impl Drop for RemoveImage {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}
