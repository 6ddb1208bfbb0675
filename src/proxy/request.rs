//! What a request is about, read from its method and URL the way the apiserver reads it
//! (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`), and the patterns fault rules
//! select requests with.

use std::fmt;
use std::str::FromStr;

use percent_encoding::percent_decode_str;

/// The apiserver's verb for a request: from the method, whether the URL names an object and
/// whether it asks for a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// GET of one object (or HEAD, or any GET of a non-resource URL).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection (or of one object by `fieldSelector=metadata.name=`) with
    /// `watch=true`, or under the legacy `/watch/` prefix.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (merge, JSON, strategic-merge and server-side apply alike).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// Anything under the `/proxy/` prefix (node, service and pod proxying).
    Proxy,
    /// A method the apiserver gives no verb (OPTIONS, CONNECT, ...).
    Other,
}

impl Verb {
    /// Every verb, in declaration order.
    pub const ALL: [Verb; 10] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Proxy,
        Verb::Other,
    ];

    /// The apiserver's (and RBAC's) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Proxy => "proxy",
            Verb::Other => "other",
        }
    }

    /// Whether requests with this verb change stored state.
    pub fn is_mutating(self) -> bool {
        match self {
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection => {
                true
            }
            Verb::Get | Verb::List | Verb::Watch | Verb::Proxy | Verb::Other => false,
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verb name no request carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown verb {0:?} (expected a verb of the apiserver, such as get, patch or deletecollection)"
)]
pub struct UnknownVerb(pub String);

impl FromStr for Verb {
    type Err = UnknownVerb;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Verb::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVerb(s.to_string()))
    }
}

/// What a request is about. Absent parts are empty strings, as in the apiserver.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RequestInfo {
    /// The HTTP method.
    pub method: String,
    /// The URL path as sent.
    pub path: String,
    /// The raw query string (empty when there is none).
    pub query: String,
    /// The apiserver's verb.
    pub verb: Verb,
    /// False for discovery, `/version`, `/healthz`, `/openapi/...` and other non-resource
    /// URLs: only the method, path and verb are meaningful then.
    pub resource_request: bool,
    /// API group (empty for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource, plural and lowercase.
    pub resource: String,
    /// Subresource (`status`, `scale`, ...).
    pub subresource: String,
    /// Namespace (for a Namespace object, its own name).
    pub namespace: String,
    /// Object name; for a list or watch restricted by `fieldSelector=metadata.name=x`, `x`.
    pub name: String,
}

/// Prefixes under which the apiserver serves resources; only `api` is groupless.
const API_PREFIXES: [&str; 2] = ["api", "apis"];
/// Path steps that turn the rest of the URL into a verb's argument.
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];
/// Subresources of a namespace, which keep `namespaces` the resource.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

impl RequestInfo {
    /// Reads a request's method, path and raw query (without the `?`).
    pub fn parse(method: &str, path: &str, query: &str) -> RequestInfo {
        let mut info = RequestInfo {
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            verb: method_verb(method),
            resource_request: false,
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
        };
        let parts: Vec<String> = path
            .trim_matches('/')
            .split('/')
            .map(|p| percent_decode_str(p).decode_utf8_lossy().into_owned())
            .collect();
        // Non-resource forms: shorter than `/api/v1/x` or not under an API prefix.
        if parts.len() < 3 || !API_PREFIXES.contains(&parts[0].as_str()) {
            return info;
        }
        let mut rest = &parts[1..];
        if parts[0] != "api" {
            // `/apis/{group}/{version}` alone is discovery.
            if rest.len() < 3 {
                return info;
            }
            info.group = rest[0].clone();
            rest = &rest[1..];
        }
        info.resource_request = true;
        info.version = rest[0].clone();
        rest = &rest[1..];

        if SPECIAL_VERBS.contains(&rest[0].as_str()) {
            if rest.len() < 2 {
                // The apiserver rejects `/api/v1/watch` outright: it names no resource.
                info.resource_request = false;
                return info;
            }
            info.verb = if rest[0] == "watch" {
                Verb::Watch
            } else {
                Verb::Proxy
            };
            rest = &rest[1..];
        }

        if rest[0] == "namespaces" && rest.len() > 1 {
            info.namespace = rest[1].clone();
            // `namespaces/{ns}/{resource}/...`: the resource is what follows, unless it is
            // one of the namespace's own subresources.
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2].as_str()) {
                rest = &rest[2..];
            }
        }

        // rest: resource / name / subresource / (anything else, not interpreted)
        if rest.len() >= 3 && info.verb != Verb::Proxy {
            info.subresource = rest[2].clone();
        }
        if rest.len() >= 2 {
            info.name = rest[1].clone();
        }
        info.resource = rest[0].clone();

        if info.name.is_empty() && info.verb == Verb::Get {
            let (watch, name) = list_options(query);
            info.verb = if watch { Verb::Watch } else { Verb::List };
            if let Some(name) = name {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == Verb::Delete {
            info.verb = Verb::DeleteCollection;
        }
        info
    }

    /// `group/resource`, or `resource` for the core group.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.group, self.resource)
        }
    }
}

/// `PATCH podcliques/status job-0-worker in ns`, or `GET /version` for non-resource URLs.
impl fmt::Display for RequestInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.resource_request {
            return write!(f, "{} {}", self.method, self.path);
        }
        write!(f, "{} {}", self.verb.as_str().to_uppercase(), self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        // A Namespace object's namespace is its own name: saying so again adds nothing.
        let own_namespace = self.resource == "namespaces" && !self.name.is_empty();
        if !self.namespace.is_empty() && !own_namespace {
            write!(f, " in {}", self.namespace)?;
        }
        Ok(())
    }
}

/// The verb a method gets before the URL is looked at.
fn method_verb(method: &str) -> Verb {
    match method {
        "POST" => Verb::Create,
        "GET" | "HEAD" => Verb::Get,
        "PUT" => Verb::Update,
        "PATCH" => Verb::Patch,
        "DELETE" => Verb::Delete,
        _ => Verb::Other,
    }
}

/// Whether the query asks for a watch, and the name an exact `metadata.name` field selector
/// restricts it to.
fn list_options(query: &str) -> (bool, Option<String>) {
    let mut watch = false;
    let mut name = None;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            // Go's strconv.ParseBool, which the apiserver decodes the parameter with.
            "watch" => watch = matches!(value.as_ref(), "1" | "t" | "T" | "true" | "TRUE" | "True"),
            "fieldSelector" => name = exact_name(&value),
            _ => {}
        }
    }
    (watch, name)
}

/// `x` when a field selector requires `metadata.name` to be exactly `x`.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (key, value) = match term.split_once("==") {
            Some(kv) => kv,
            None if term.contains("!=") => return None,
            None => term.split_once('=')?,
        };
        let value = value.trim();
        (key.trim() == "metadata.name" && !value.is_empty()).then(|| value.to_string())
    })
}

/// Which requests a fault rule applies to. Every field left `None` matches anything; only
/// resource requests match (discovery and other non-resource URLs never do).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RequestMatch {
    /// The verb.
    pub verb: Option<Verb>,
    /// `resource` (plural, lowercase, any group) or `group/resource`; `core/pods` or `/pods`
    /// for the core group only.
    pub resource: Option<String>,
    /// The subresource; `Some("")` matches only requests without one.
    pub subresource: Option<String>,
    /// The namespace; `Some("")` matches only cluster-scoped requests.
    pub namespace: Option<String>,
    /// A glob over the object name, `*` standing for any run of characters. Requests
    /// naming no object (lists, creates) have the empty name, which `*` matches.
    pub name: Option<String>,
}

impl RequestMatch {
    /// Matches every resource request.
    pub fn any() -> RequestMatch {
        RequestMatch::default()
    }

    /// Restricts to a verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Restricts to a resource (`resource` or `group/resource`).
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Restricts to a subresource (`""` for none).
    pub fn subresource(mut self, subresource: impl Into<String>) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// Restricts to a namespace (`""` for cluster-scoped).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Restricts to names matching a glob.
    pub fn name(mut self, glob: impl Into<String>) -> Self {
        self.name = Some(glob.into());
        self
    }

    /// Whether `request` is one of the requests this selects.
    pub fn matches(&self, request: &RequestInfo) -> bool {
        request.resource_request
            && self.verb.is_none_or(|v| v == request.verb)
            && self
                .resource
                .as_deref()
                .is_none_or(|r| resource_matches(r, request))
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == request.subresource)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| n == request.namespace)
            && self
                .name
                .as_deref()
                .is_none_or(|g| glob_matches(g, &request.name))
    }
}

fn resource_matches(pattern: &str, request: &RequestInfo) -> bool {
    match pattern.rsplit_once('/') {
        None => pattern == request.resource,
        Some((group, resource)) => {
            let group = if group == "core" { "" } else { group };
            group == request.group && resource == request.resource
        }
    }
}

/// Whether `text` matches `glob`, where `*` matches any run of characters (none included)
/// and every other character itself.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let mut pieces = glob.split('*');
    // Without a `*`, split yields the glob whole: the first piece is all there is.
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    // The last piece anchors at the end; it must not overlap what the middle consumed.
    rest.ends_with(last)
}

#[cfg(test)]
mod tests;
