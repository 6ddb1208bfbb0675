//! Who talks to the proxy: each client named by the credentials it presents (the pod a bound
//! ServiceAccount token was issued to, else its peer address), the connections each one has
//! open, and the clients cut off. Cutting a client off is what a crash looks like from the
//! apiserver's side: from that instant nothing it sends arrives, whatever the process is
//! still doing while its pod is torn down.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use base64::Engine;
use http::HeaderMap;
use http::header::AUTHORIZATION;
use tokio::task::AbortHandle;

/// The name of the client a request comes from: `pod NAMESPACE/NAME` when it carries a
/// bound ServiceAccount token (the claims name the pod it was issued to; the proxy reads
/// them, it does not check the signature: the apiserver does), `serviceaccount NS/NAME` for
/// another ServiceAccount token, else `peer ADDRESS`.
pub(crate) fn identify(headers: &HeaderMap, peer: IpAddr) -> String {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(token_subject)
        .unwrap_or_else(|| format!("peer {peer}"))
}

/// What a JWT's claims say it was issued to, if it is a Kubernetes ServiceAccount token.
fn token_subject(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let k8s = &claims["kubernetes.io"];
    let namespace = k8s["namespace"].as_str();
    if let (Some(ns), Some(pod)) = (namespace, k8s["pod"]["name"].as_str()) {
        return Some(format!("pod {ns}/{pod}"));
    }
    if let (Some(ns), Some(sa)) = (namespace, k8s["serviceaccount"]["name"].as_str()) {
        return Some(format!("serviceaccount {ns}/{sa}"));
    }
    let sub = claims["sub"].as_str()?;
    let rest = sub.strip_prefix("system:serviceaccount:")?;
    let (ns, sa) = rest.split_once(':')?;
    Some(format!("serviceaccount {ns}/{sa}"))
}

/// One open connection.
#[derive(Debug, Default)]
struct Connection {
    abort: Option<AbortHandle>,
    client: Option<String>,
}

/// The proxy's clients and their connections.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    connections: HashMap<u64, Connection>,
    requests: HashMap<String, u64>,
    cut: HashSet<String>,
}

impl Clients {
    /// Remembers how to close connection `id`.
    pub fn register(&mut self, id: u64, abort: AbortHandle) {
        self.connections.entry(id).or_default().abort = Some(abort);
    }

    /// Forgets connection `id` (it ended).
    pub fn finish(&mut self, id: u64) {
        self.connections.remove(&id);
    }

    /// Notes a request from `client` on connection `id`; `false` when that client is cut off
    /// (the request must go nowhere).
    pub fn request(&mut self, id: u64, client: &str) -> bool {
        if self.cut.contains(client) {
            return false;
        }
        let connection = self.connections.entry(id).or_default();
        if connection.client.as_deref() != Some(client) {
            connection.client = Some(client.to_string());
        }
        *self.requests.entry(client.to_string()).or_default() += 1;
        true
    }

    /// Cuts `client` off: its open connections are closed now and its requests from now on
    /// go nowhere. Returns how many connections were closed.
    pub fn cut_off(&mut self, client: &str) -> usize {
        self.cut.insert(client.to_string());
        let mut closed = 0;
        self.connections.retain(|_, c| {
            if c.client.as_deref() != Some(client) {
                return true;
            }
            if let Some(abort) = &c.abort {
                abort.abort();
            }
            closed += 1;
            false
        });
        closed
    }

    /// Lets a client cut off talk again (its name is in use by a new client).
    pub fn restore(&mut self, client: &str) {
        self.cut.remove(client);
    }

    /// How many requests each client sent, by name.
    pub fn counts(&self) -> HashMap<String, u64> {
        self.requests.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(claims: &serde_json::Value) -> HeaderMap {
        let part = |v: &serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let token = format!(
            "{}.{}.c2ln",
            part(&serde_json::json!({"alg": "RS256"})),
            part(claims)
        );
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        headers
    }

    #[test]
    fn clients_are_named_by_the_pod_their_token_was_bound_to() {
        let peer: IpAddr = "10.244.0.7".parse().unwrap();
        let bound = serde_json::json!({
            "sub": "system:serviceaccount:op:grove",
            "kubernetes.io": {
                "namespace": "op",
                "pod": {"name": "grove-7d9-x", "uid": "u"},
                "serviceaccount": {"name": "grove", "uid": "v"},
            },
        });
        assert_eq!(identify(&bearer(&bound), peer), "pod op/grove-7d9-x");
        let legacy = serde_json::json!({"sub": "system:serviceaccount:op:grove"});
        assert_eq!(identify(&bearer(&legacy), peer), "serviceaccount op/grove");
        let mut opaque = HeaderMap::new();
        opaque.insert(AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(identify(&opaque, peer), "peer 10.244.0.7");
        assert_eq!(identify(&HeaderMap::new(), peer), "peer 10.244.0.7");
    }

    #[tokio::test]
    async fn a_client_cut_off_loses_its_connections_and_its_requests() {
        let mut clients = Clients::default();
        let old = tokio::spawn(std::future::pending::<()>());
        let new = tokio::spawn(std::future::pending::<()>());
        clients.register(1, old.abort_handle());
        clients.register(2, new.abort_handle());
        assert!(clients.request(1, "pod a/old"));
        assert!(clients.request(2, "pod a/new"));
        assert_eq!(clients.cut_off("pod a/old"), 1);
        assert!(old.await.unwrap_err().is_cancelled());
        assert!(!clients.request(3, "pod a/old"));
        assert!(clients.request(2, "pod a/new"));
        assert_eq!(clients.counts()["pod a/new"], 2);
        assert_eq!(clients.counts()["pod a/old"], 1);
        clients.restore("pod a/old");
        assert!(clients.request(3, "pod a/old"));
        new.abort();
    }
}
