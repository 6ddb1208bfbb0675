use rstest::rstest;

use super::*;

fn get(path: &str) -> RequestInfo {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    RequestInfo::parse("GET", path, query)
}

/// `METHOD url` and what it reads as: `verb group resource subresource namespace name`,
/// `-` for an empty part.
const RESOURCE_URLS: &[(&str, &str)] = &[
    ("GET /api/v1/namespaces/ns/pods/p", "get - pods - ns p"),
    ("GET /api/v1/namespaces/ns/pods", "list - pods - ns -"),
    ("GET /api/v1/pods", "list - pods - - -"),
    (
        "GET /api/v1/namespaces/ns/pods?watch=true&resourceVersion=5",
        "watch - pods - ns -",
    ),
    (
        "GET /api/v1/namespaces/ns/pods?watch=1&fieldSelector=metadata.name%3Dp",
        "watch - pods - ns p",
    ),
    (
        "GET /api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3D%3Dp",
        "list - pods - ns p",
    ),
    ("GET /api/v1/pods?watch=false", "list - pods - - -"),
    (
        "GET /api/v1/watch/namespaces/ns/pods/p",
        "watch - pods - ns p",
    ),
    ("GET /api/v1/watch/pods", "watch - pods - - -"),
    (
        "PATCH /api/v1/namespaces/ns/pods/p/status",
        "patch - pods status ns p",
    ),
    (
        "POST /api/v1/namespaces/ns/configmaps",
        "create - configmaps - ns -",
    ),
    (
        "PUT /api/v1/namespaces/ns/configmaps/c",
        "update - configmaps - ns c",
    ),
    (
        "DELETE /api/v1/namespaces/ns/configmaps/c",
        "delete - configmaps - ns c",
    ),
    (
        "DELETE /api/v1/namespaces/ns/configmaps",
        "deletecollection - configmaps - ns -",
    ),
    (
        "POST /api/v1/namespaces/ns/pods/p/eviction",
        "create - pods eviction ns p",
    ),
    (
        "POST /api/v1/namespaces/ns/pods/p/binding",
        "create - pods binding ns p",
    ),
    ("GET /api/v1/namespaces/ns", "get - namespaces - ns ns"),
    ("GET /api/v1/namespaces", "list - namespaces - - -"),
    ("POST /api/v1/namespaces", "create - namespaces - - -"),
    (
        "PUT /api/v1/namespaces/ns/status",
        "update - namespaces status ns ns",
    ),
    (
        "PUT /api/v1/namespaces/ns/finalize",
        "update - namespaces finalize ns ns",
    ),
    ("GET /api/v1/nodes/n1", "get - nodes - - n1"),
    (
        "PATCH /apis/grove.io/v1alpha1/namespaces/ns/podcliques/job-0-worker/status",
        "patch grove.io podcliques status ns job-0-worker",
    ),
    (
        "GET /apis/apps/v1/deployments",
        "list apps deployments - - -",
    ),
    (
        "DELETE /apis/apiextensions.k8s.io/v1/customresourcedefinitions/w.x.io",
        "delete apiextensions.k8s.io customresourcedefinitions - - w.x.io",
    ),
    (
        "GET /apis/coordination.k8s.io/v1/namespaces/ns/leases?watch=true",
        "watch coordination.k8s.io leases - ns -",
    ),
    (
        "PUT /apis/apps/v1/namespaces/ns/deployments/d/scale",
        "update apps deployments scale ns d",
    ),
    (
        "PATCH /apis/apps/v1/namespaces/ns/deployments/d",
        "patch apps deployments - ns d",
    ),
    ("HEAD /api/v1/namespaces/ns/pods/p", "get - pods - ns p"),
    (
        "GET /api/v1/proxy/namespaces/ns/pods/p/some/path",
        "proxy - pods - ns p",
    ),
    (
        "GET /api/v1/namespaces/ns/pods/p/proxy/x",
        "get - pods proxy ns p",
    ),
    (
        "GET /api/v1/namespaces/ns/pods/p/log",
        "get - pods log ns p",
    ),
    ("GET /api/v1/namespaces/ns/pods/", "list - pods - ns -"),
    (
        "GET /api/v1/namespaces/ns/configmaps/a%3Ab",
        "get - configmaps - ns a:b",
    ),
];

#[test]
fn resource_urls_are_read_like_the_apiserver() {
    for (request, expected) in RESOURCE_URLS {
        let (method, url) = request.split_once(' ').unwrap();
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let info = RequestInfo::parse(method, path, query);
        assert!(info.resource_request, "{request}");
        let read = [
            info.verb.as_str(),
            &info.group,
            &info.resource,
            &info.subresource,
            &info.namespace,
            &info.name,
        ]
        .map(|p| if p.is_empty() { "-" } else { p })
        .join(" ");
        assert_eq!(&read, expected, "{request}");
        assert_eq!((info.path.as_str(), info.query.as_str()), (path, query));
        assert_eq!(info.method, method);
    }
}

#[rstest]
#[case("/")]
#[case("/api")]
#[case("/api/v1")]
#[case("/apis")]
#[case("/apis/apps")]
#[case("/apis/apps/v1")]
#[case("/version")]
#[case("/healthz/etcd")]
#[case("/openapi/v3/apis/apps/v1")]
#[case("/api/v1/watch")]
fn non_resource_urls_are_recognised(#[case] path: &str) {
    let info = get(path);
    assert!(!info.resource_request, "{path}");
    assert!(!RequestMatch::any().matches(&info), "{path}");
    assert_eq!(info.to_string(), format!("GET {path}"));
}

#[test]
fn versions_are_read() {
    assert_eq!(get("/api/v1/pods").version, "v1");
    assert_eq!(
        get("/apis/grove.io/v1alpha1/namespaces/n/podcliques").version,
        "v1alpha1"
    );
}

#[test]
fn field_selectors_name_only_exact_matches() {
    assert_eq!(
        get("/api/v1/pods?fieldSelector=metadata.name!%3Dp").name,
        ""
    );
    assert_eq!(
        get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn,metadata.name%3Dp").name,
        "p"
    );
    assert_eq!(get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn").name, "");
    // A name from the selector does not make a list a get.
    assert_eq!(
        get("/api/v1/pods?fieldSelector=metadata.name%3Dp").verb,
        Verb::List
    );
}

#[test]
fn other_methods_have_no_verb() {
    let info = RequestInfo::parse("OPTIONS", "/api/v1/pods", "");
    assert_eq!(info.verb, Verb::Other);
    assert!(!info.verb.is_mutating());
}

#[test]
fn mutating_verbs_are_the_writes() {
    let mutating: Vec<&str> = Verb::ALL
        .into_iter()
        .filter(|v| v.is_mutating())
        .map(Verb::as_str)
        .collect();
    assert_eq!(
        mutating,
        ["create", "update", "patch", "delete", "deletecollection"]
    );
}

#[test]
fn verbs_round_trip_through_their_names() {
    for verb in Verb::ALL {
        assert_eq!(verb.as_str().parse::<Verb>(), Ok(verb));
        assert_eq!(
            serde_json::to_value(verb).unwrap(),
            serde_json::json!(verb.as_str())
        );
    }
    assert!("PATCH".parse::<Verb>().is_err());
}

#[test]
fn requests_display_like_a_log_line() {
    let info = RequestInfo::parse(
        "PATCH",
        "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/job-0-worker/status",
        "",
    );
    assert_eq!(
        info.to_string(),
        "PATCH podcliques/status job-0-worker in ns"
    );
    assert_eq!(info.group_resource(), "grove.io/podcliques");
    assert_eq!(
        get("/api/v1/namespaces/ns").to_string(),
        "GET namespaces ns"
    );
    assert_eq!(get("/api/v1/nodes").to_string(), "LIST nodes");
    assert_eq!(get("/api/v1/nodes").group_resource(), "nodes");
}

#[rstest]
#[case("", "", true)]
#[case("", "a", false)]
#[case("*", "", true)]
#[case("*", "anything", true)]
#[case("job-0-worker", "job-0-worker", true)]
#[case("job-0-worker", "job-0-worker-1", false)]
#[case("job-*", "job-0-worker", true)]
#[case("job-*", "ajob-0", false)]
#[case("*-worker", "job-0-worker", true)]
#[case("*-worker", "job-0-worker-x", false)]
#[case("job-*-worker", "job-12-worker", true)]
#[case("job-*-worker", "job-worker", false)]
#[case("a*b*c", "abc", true)]
#[case("a*b*c", "aXbYbZc", true)]
#[case("a*b*c", "acb", false)]
#[case("ab*ba", "aba", false)]
#[case("**", "x", true)]
fn globs_match_runs_of_characters(#[case] glob: &str, #[case] text: &str, #[case] ok: bool) {
    assert_eq!(glob_matches(glob, text), ok, "{glob:?} vs {text:?}");
}

#[test]
fn every_field_of_a_match_restricts() {
    let status = RequestInfo::parse(
        "PATCH",
        "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/job-0-worker/status",
        "",
    );
    let main = RequestInfo::parse(
        "PATCH",
        "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/job-0-worker",
        "",
    );
    let any = RequestMatch::any();
    assert!(any.matches(&status));
    assert!(any.clone().verb(Verb::Patch).matches(&status));
    assert!(!any.clone().verb(Verb::Update).matches(&status));
    assert!(any.clone().resource("podcliques").matches(&status));
    assert!(any.clone().resource("grove.io/podcliques").matches(&status));
    assert!(!any.clone().resource("apps/podcliques").matches(&status));
    assert!(!any.clone().resource("core/podcliques").matches(&status));
    assert!(!any.clone().resource("pods").matches(&status));
    assert!(any.clone().subresource("status").matches(&status));
    assert!(!any.clone().subresource("status").matches(&main));
    assert!(any.clone().subresource("").matches(&main));
    assert!(!any.clone().subresource("").matches(&status));
    assert!(any.clone().namespace("ns").matches(&status));
    assert!(!any.clone().namespace("other").matches(&status));
    assert!(!any.clone().namespace("").matches(&status));
    assert!(any.clone().name("job-*-worker").matches(&status));
    assert!(!any.clone().name("job-1-*").matches(&status));
}

#[test]
fn core_resources_match_with_or_without_a_group() {
    let pod = get("/api/v1/namespaces/ns/pods/p");
    let node = get("/api/v1/nodes/n");
    let deployment = get("/apis/apps/v1/namespaces/ns/deployments/d");
    for pattern in ["pods", "core/pods", "/pods"] {
        assert!(
            RequestMatch::any().resource(pattern).matches(&pod),
            "{pattern}"
        );
    }
    assert!(RequestMatch::any().namespace("").matches(&node));
    assert!(!RequestMatch::any().namespace("").matches(&pod));
    assert!(
        !RequestMatch::any()
            .resource("core/deployments")
            .matches(&deployment)
    );
    assert!(
        RequestMatch::any()
            .resource("deployments")
            .matches(&deployment)
    );
}
