use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::builder::count_compiled;
use super::*;

#[test]
fn compiled_packages_are_counted_from_go_build_v_output() {
    let log = "$ \"go\" \"build\" \"-v\" \"k8s.io/kubernetes/cmd/kube-apiserver\"\n\
                   internal/goarch\n\
                   k8s.io/apimachinery/pkg/util/sets\n\
                   # k8s.io/some/pkg\n\
                   ./x.go:3:2: imported and not used\n\
                   go.etcd.io/etcd/server/v3\n\
                   \n";
    assert_eq!(count_compiled(log), 3);
}

fn fake_binary(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn overrides_win_over_kubebuilder_assets() {
    let dir = tempfile::tempdir().unwrap();
    let assets = dir.path().join("assets");
    std::fs::create_dir_all(&assets).unwrap();
    fake_binary(&assets, "etcd");
    let special = fake_binary(dir.path(), "my-etcd");
    let env: HashMap<&str, String> = [
        ("KUBEBUILDER_ASSETS", assets.display().to_string()),
        ("TEST_ASSET_ETCD", special.display().to_string()),
    ]
    .into();
    let lookup = |k: &str| env.get(k).cloned();
    let (path, origin) = lookup_configured(Component::Etcd, &lookup)
        .unwrap()
        .unwrap();
    assert_eq!(path, special);
    assert_eq!(origin, Origin::EnvOverride("TEST_ASSET_ETCD"));
    // kube-apiserver is not in the assets dir: not found there, no error.
    assert!(
        lookup_configured(Component::KubeApiserver, &lookup)
            .unwrap()
            .is_none()
    );
}

#[test]
fn kubebuilder_assets_are_used_when_no_override() {
    let dir = tempfile::tempdir().unwrap();
    let path = fake_binary(dir.path(), "kube-apiserver");
    let env: HashMap<&str, String> =
        [("KUBEBUILDER_ASSETS", dir.path().display().to_string())].into();
    let hit = lookup_configured(Component::KubeApiserver, &|k| env.get(k).cloned())
        .unwrap()
        .unwrap();
    assert_eq!(hit, (path, Origin::KubebuilderAssets));
}

#[test]
fn a_broken_override_is_an_error_naming_the_variable() {
    let env: HashMap<&str, String> =
        [("TEST_ASSET_KUBE_APISERVER", "/nonexistent/kas".to_string())].into();
    let err = lookup_configured(Component::KubeApiserver, &|k| env.get(k).cloned()).unwrap_err();
    assert!(
        err.to_string().contains("TEST_ASSET_KUBE_APISERVER"),
        "{err}"
    );
}

#[test]
fn not_found_without_build_says_how_to_supply_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let options = ProvisionOptions {
        allow_build: false,
        cache_root: Some(dir.path().to_path_buf()),
        progress: false,
    };
    // Only meaningful when the environment does not configure binaries itself.
    if Component::ALL
        .iter()
        .any(|c| std::env::var_os(c.env_var()).is_some())
        || std::env::var_os("KUBEBUILDER_ASSETS").is_some()
    {
        return;
    }
    let err = resolve(&options).unwrap_err().to_string();
    assert!(err.contains("KUBEBUILDER_ASSETS"), "{err}");
    assert!(
        err.contains("etcd, kube-apiserver, kube-controller-manager"),
        "{err}"
    );
}

#[test]
fn cached_binaries_resolve_without_building() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_bin_dir(dir.path());
    std::fs::create_dir_all(&cache).unwrap();
    for c in Component::ALL {
        fake_binary(&cache, c.binary());
    }
    if std::env::var_os("KUBEBUILDER_ASSETS").is_some()
        || Component::ALL
            .iter()
            .any(|c| std::env::var_os(c.env_var()).is_some())
    {
        return;
    }
    let options = ProvisionOptions {
        allow_build: false,
        cache_root: Some(dir.path().to_path_buf()),
        progress: false,
    };
    let bins = resolve(&options).unwrap();
    assert_eq!(bins.origins, [Origin::Cache, Origin::Cache, Origin::Cache]);
    assert_eq!(bins.etcd, cache.join("etcd"));
}

#[test]
fn staging_modules_become_replace_lines() {
    let go_mod = "module k8s.io/kubernetes\n\nrequire (\n\tk8s.io/api v0.0.0\n\tk8s.io/utils v0.0.0-20250604170112-4c0f3b243397\n\tk8s.io/client-go v0.0.0\n)\nrequire k8s.io/kubectl v0.0.0\n";
    assert_eq!(
        staging_replaces(go_mod, "v1.34.4"),
        vec![
            "replace k8s.io/api => k8s.io/api v0.34.4",
            "replace k8s.io/client-go => k8s.io/client-go v0.34.4",
            "replace k8s.io/kubectl => k8s.io/kubectl v0.34.4",
        ]
    );
}

#[test]
fn ldflags_carry_the_version() {
    let flags = version_ldflags("v1.34.4");
    assert!(flags.contains("k8s.io/component-base/version.gitVersion=v1.34.4"));
    assert!(flags.contains("k8s.io/client-go/pkg/version.gitMinor=34"));
}
