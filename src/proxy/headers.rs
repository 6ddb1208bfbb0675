//! Header helpers: which headers go on between client and apiserver, the items of a list
//! header, reads steered to JSON, and connection upgrades recognised.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Drops the protobuf alternatives from a read's `Accept` when it also accepts JSON. The
/// apiserver then answers JSON, which the client said it takes (as it gets for every custom
/// resource), and which the proxy can read: a watch of any kind can then be held, and its
/// reads answered stale. A client that accepts protobuf only keeps its `Accept`.
pub(super) fn prefer_json(headers: &mut HeaderMap) {
    let accept = list_values(headers, &header::ACCEPT);
    let kept: Vec<&str> = accept
        .iter()
        .map(String::as_str)
        .filter(|r| !r.starts_with("application/vnd.kubernetes.protobuf"))
        .collect();
    let json = kept
        .iter()
        .any(|r| r.starts_with("application/json") || r.starts_with("*/*"));
    if !json || kept.len() == accept.len() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&kept.join(", ")) {
        headers.remove(header::ACCEPT);
        headers.insert(header::ACCEPT, value);
    }
}

/// The items of a comma-separated header over all its lines, trimmed, empty ones left out.
pub(super) fn list_values(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// Headers meaningful for one connection only (RFC 9110 section 7.6.1).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Copies every header except hop-by-hop ones, those `Connection` names, and `skip`.
pub(super) fn copy_end_to_end(from: &HeaderMap, to: &mut HeaderMap, skip: &[HeaderName]) {
    let named: Vec<String> = list_values(from, &header::CONNECTION)
        .into_iter()
        .map(|v| v.to_ascii_lowercase())
        .collect();
    for (name, value) in from {
        if HOP_BY_HOP.contains(name)
            || skip.contains(name)
            || named.iter().any(|n| n == name.as_str())
        {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

/// Whether the client asks to switch protocols (exec, attach, port-forward over SPDY or
/// WebSocket).
pub(super) fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_not_copied() {
        let mut from = HeaderMap::new();
        from.insert(header::CONNECTION, "keep-alive, X-Private".parse().unwrap());
        from.insert("x-private", "1".parse().unwrap());
        from.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        from.insert(header::AUTHORIZATION, "Bearer x".parse().unwrap());
        from.insert(
            header::CONTENT_TYPE,
            "application/apply-patch+yaml".parse().unwrap(),
        );
        from.append(header::ACCEPT, "application/json".parse().unwrap());
        from.append(
            header::ACCEPT,
            "application/vnd.kubernetes.protobuf".parse().unwrap(),
        );
        let mut to = HeaderMap::new();
        copy_end_to_end(&from, &mut to, &[header::AUTHORIZATION]);
        let mut names: Vec<&str> = to.keys().map(HeaderName::as_str).collect();
        names.sort();
        assert_eq!(names, ["accept", "content-type"]);
        assert_eq!(to.get_all(header::ACCEPT).iter().count(), 2);
    }

    #[test]
    fn a_read_that_also_accepts_json_is_answered_json() {
        let accept = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(header::ACCEPT, v.parse().unwrap());
            }
            prefer_json(&mut headers);
            headers
                .get_all(header::ACCEPT)
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        // client-go's typed clients of built-in kinds.
        assert_eq!(
            accept(&["application/vnd.kubernetes.protobuf, application/json"]),
            ["application/json"]
        );
        // Its metadata-only informers, over two header lines.
        assert_eq!(
            accept(&[
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ]),
            ["application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"]
        );
        // Protobuf only, JSON only, nothing: as they came.
        assert_eq!(
            accept(&["application/vnd.kubernetes.protobuf"]),
            ["application/vnd.kubernetes.protobuf"]
        );
        assert_eq!(accept(&["application/json"]), ["application/json"]);
        assert!(accept(&[]).is_empty());
    }

    #[test]
    fn upgrades_are_recognised() {
        let mut headers = HeaderMap::new();
        assert!(!is_upgrade(&headers));
        headers.insert(header::CONNECTION, "keep-alive, Upgrade".parse().unwrap());
        assert!(is_upgrade(&headers));
        let mut headers = HeaderMap::new();
        headers.insert(header::UPGRADE, "websocket".parse().unwrap());
        assert!(is_upgrade(&headers));
    }
}
