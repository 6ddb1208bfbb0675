//! Holds on synthetic watch streams: what the client receives, line by line.

use serde_json::json;
use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::*;

fn watch(resource: &str) -> RequestInfo {
    RequestInfo::parse(
        "GET",
        &format!("/apis/grove.io/v1alpha1/namespaces/ns/{resource}"),
        "watch=true",
    )
}

fn event(kind: &str, name: &str, rv: u64) -> Bytes {
    let line = json!({
        "type": kind,
        "object": {
            "apiVersion": "grove.io/v1alpha1",
            "kind": "PodClique",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": format!("uid-{name}"),
                "resourceVersion": rv.to_string(),
            },
        },
    });
    Bytes::from(format!("{line}\n"))
}

fn bookmark(rv: u64) -> Bytes {
    let line = json!({
        "type": "BOOKMARK",
        "object": {"kind": "PodClique", "metadata": {"resourceVersion": rv.to_string()}},
    });
    Bytes::from(format!("{line}\n"))
}

/// `TYPE name@rv` of every line received so far.
fn received(rx: &mut UnboundedReceiver<Bytes>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(line) = rx.try_recv() {
        let v: Value = serde_json::from_slice(&line).unwrap();
        let meta = &v["object"]["metadata"];
        let name = meta["name"].as_str().unwrap_or("");
        let rv = meta["resourceVersion"].as_str().unwrap_or("");
        let code = v["object"]["code"].as_u64();
        out.push(match code {
            Some(code) => format!("{} {code}", v["type"].as_str().unwrap()),
            None => format!("{} {name}@{rv}", v["type"].as_str().unwrap()),
        });
    }
    out
}

fn hub_with_stream(resource: &str) -> (Hub, u64, UnboundedReceiver<Bytes>) {
    let mut hub = Hub::default();
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = hub.open(&watch(resource), tx);
    (hub, stream, rx)
}

fn pclq_hold() -> Hold {
    Hold::kind("grove.io", "v1alpha1", "podcliques")
}

/// The resourceVersions a client received, in order, must only grow.
fn assert_growing(lines: &[String]) {
    let rvs: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.rsplit_once('@')?.1.parse().ok())
        .collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "not growing: {lines:?}"
    );
}

#[test]
fn without_a_hold_every_line_passes_at_once() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    hub.line(s, event("ADDED", "a", 5));
    hub.line(s, bookmark(6));
    hub.line(s, Bytes::from_static(b"not json\n"));
    assert_eq!(rx.try_recv().unwrap(), event("ADDED", "a", 5));
    assert_eq!(rx.try_recv().unwrap(), bookmark(6));
    assert_eq!(rx.try_recv().unwrap(), Bytes::from_static(b"not json\n"));
}

#[test]
fn a_hold_keeps_back_newer_events_and_delivers_them_in_order() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    let id = hub.start(pclq_hold(), 10);
    // Older than the hold: the apiserver had it before, it passes.
    hub.line(s, event("MODIFIED", "a", 9));
    hub.line(s, event("MODIFIED", "a", 11));
    hub.line(s, event("ADDED", "b", 12));
    hub.line(s, bookmark(13));
    assert_eq!(received(&mut rx), ["MODIFIED a@9"]);
    let record = hub.release(id).unwrap();
    assert_eq!((record.held, record.delivered), (3, Some(3)));
    let after = received(&mut rx);
    assert_eq!(after, ["MODIFIED a@11", "ADDED b@12", "BOOKMARK @13"]);
    hub.line(s, event("MODIFIED", "b", 14));
    assert_eq!(received(&mut rx), ["MODIFIED b@14"]);
    assert!(hub.release(id).is_none(), "released once");
}

#[test]
fn a_hold_on_named_objects_freezes_the_stream_from_their_first_event() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    let mut hold = pclq_hold();
    hold.names = vec!["job-*-worker".into()];
    let id = hub.start(hold, 10);
    hub.line(s, event("MODIFIED", "job-0-leader", 11));
    hub.line(s, event("MODIFIED", "job-0-worker", 12));
    // Behind the held event: holding it back keeps resourceVersions growing.
    hub.line(s, event("MODIFIED", "job-0-leader", 13));
    let before = received(&mut rx);
    assert_eq!(before, ["MODIFIED job-0-leader@11"]);
    hub.release(id);
    let mut all = before;
    all.extend(received(&mut rx));
    assert_growing(&all);
    assert_eq!(all.len(), 3);
}

#[test]
fn no_bookmark_passes_a_held_event() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    hub.start(pclq_hold(), 10);
    hub.line(s, event("MODIFIED", "a", 11));
    hub.line(s, bookmark(20));
    assert!(received(&mut rx).is_empty());
}

#[test]
fn other_kinds_and_namespaces_are_not_held() {
    let (mut hub, s, mut rx) = hub_with_stream("pods");
    let mut hold = pclq_hold();
    hold.namespace = Some("other".into());
    hub.start(hold.clone(), 10);
    hub.line(s, event("MODIFIED", "a", 11));
    assert_eq!(received(&mut rx), ["MODIFIED a@11"]);
    let (tx, mut rx2) = mpsc::unbounded_channel();
    let s2 = hub.open(&watch("podcliques"), tx);
    hub.line(s2, event("MODIFIED", "a", 12));
    assert_eq!(
        received(&mut rx2),
        ["MODIFIED a@12"],
        "namespace ns is not held"
    );
}

#[test]
fn a_client_that_reconnects_is_held_again() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    let id = hub.start(pclq_hold(), 10);
    hub.line(s, event("MODIFIED", "a", 11));
    // The connection ends; what it held goes with it.
    hub.close(s);
    assert!(received(&mut rx).is_empty());
    // The client resumes from rv 10 and the apiserver replays.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let s = hub.open(&watch("podcliques"), tx);
    hub.line(s, event("MODIFIED", "a", 11));
    hub.line(s, event("MODIFIED", "a", 12));
    assert!(received(&mut rx).is_empty());
    hub.release(id);
    assert_eq!(received(&mut rx), ["MODIFIED a@11", "MODIFIED a@12"]);
}

#[test]
fn coalescing_delivers_each_objects_last_state_only() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    let mut hold = pclq_hold();
    hold.release = Release::Coalesce;
    let id = hub.start(hold, 10);
    hub.line(s, event("MODIFIED", "a", 11));
    hub.line(s, event("ADDED", "b", 12));
    hub.line(s, event("MODIFIED", "a", 13));
    hub.line(s, event("ADDED", "gone", 14));
    hub.line(s, event("MODIFIED", "b", 15));
    hub.line(s, event("DELETED", "gone", 16));
    hub.line(s, bookmark(17));
    hub.line(s, event("DELETED", "c", 18));
    let record = hub.release(id).unwrap();
    let lines = received(&mut rx);
    // `gone` was created and deleted inside the window: never seen. `b` was never delivered
    // before, so it is announced as added, in its last state.
    assert_eq!(lines, ["MODIFIED a@13", "ADDED b@15", "DELETED c@18"]);
    assert_growing(&lines);
    assert_eq!((record.held, record.delivered), (8, Some(3)));
}

#[test]
fn coalescing_keeps_only_a_trailing_bookmark() {
    let queue = vec![
        Event::parse(bookmark(11)),
        Event::parse(event("MODIFIED", "a", 12)),
        Event::parse(bookmark(13)),
    ];
    let kinds: Vec<EventType> = coalesce(queue).iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventType::Modified, EventType::Bookmark]);
    let queue = vec![
        Event::parse(bookmark(11)),
        Event::parse(event("MODIFIED", "a", 12)),
    ];
    assert_eq!(coalesce(queue).len(), 1);
}

#[test]
fn a_relist_release_ends_the_watch_with_410_and_drops_what_it_held() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    let mut hold = pclq_hold();
    hold.release = Release::Relist;
    let id = hub.start(hold, 10);
    hub.line(s, event("MODIFIED", "a", 9));
    hub.line(s, event("DELETED", "a", 11));
    let record = hub.release(id).unwrap();
    assert_eq!(record.ended, 1);
    assert_eq!(received(&mut rx), ["MODIFIED a@9", "ERROR 410"]);
    assert!(!hub.is_open(s), "the stream is over");
    // Nothing more reaches it.
    hub.line(s, event("ADDED", "b", 12));
    assert!(rx.try_recv().is_err());
    let text = String::from_utf8(gone_line(9).to_vec()).unwrap();
    assert!(text.contains("\"reason\":\"Expired\"") && text.ends_with('\n'));
}

#[test]
fn ending_watches_reaches_every_stream_of_the_kind_only() {
    let mut hub = Hub::default();
    let (tx1, mut rx1) = mpsc::unbounded_channel();
    let (tx2, mut rx2) = mpsc::unbounded_channel();
    let (tx3, mut rx3) = mpsc::unbounded_channel();
    hub.open(&watch("podcliques"), tx1);
    hub.open(&watch("podcliques"), tx2);
    let pods = hub.open(&watch("pods"), tx3);
    assert_eq!(hub.end_watches("grove.io", "podcliques"), 2);
    assert_eq!(received(&mut rx1), ["ERROR 410"]);
    assert_eq!(received(&mut rx2), ["ERROR 410"]);
    assert!(received(&mut rx3).is_empty());
    assert!(hub.is_open(pods));
    // Watches already ended, their relays not yet gone, are not ended (nor counted) again.
    assert_eq!(hub.end_watches("grove.io", "podcliques"), 0);
    assert!(received(&mut rx1).is_empty());
}

#[test]
fn two_holds_on_one_kind_release_independently() {
    let (mut hub, s, mut rx) = hub_with_stream("podcliques");
    let mut early = pclq_hold();
    early.names = vec!["a".into()];
    let mut late = pclq_hold();
    late.names = vec!["b".into()];
    let first = hub.start(early, 10);
    let second = hub.start(late, 10);
    hub.line(s, event("MODIFIED", "a", 11));
    hub.line(s, event("MODIFIED", "b", 12));
    hub.line(s, event("MODIFIED", "c", 13));
    hub.release(first);
    // `b` is still held by the other hold, and `c` waits behind it.
    assert_eq!(received(&mut rx), ["MODIFIED a@11"]);
    hub.release(second);
    assert_eq!(received(&mut rx), ["MODIFIED b@12", "MODIFIED c@13"]);
}

#[test]
fn stale_reads_answer_at_the_oldest_stale_hold_of_the_kind() {
    let mut hub = Hub::default();
    let get = RequestInfo::parse(
        "GET",
        "/apis/grove.io/v1alpha1/namespaces/ns/podcliques/a",
        "",
    );
    let current = hub.start(pclq_hold(), 5);
    assert_eq!(hub.stale_at(&get), None, "reads current");
    let mut stale = pclq_hold();
    stale.reads = Reads::Stale;
    stale.namespace = Some("ns".into());
    let id = hub.start(stale.clone(), 20);
    hub.start(stale, 30);
    assert_eq!(hub.stale_at(&get), Some(20));
    let elsewhere = RequestInfo::parse(
        "GET",
        "/apis/grove.io/v1alpha1/namespaces/other/podcliques/a",
        "",
    );
    assert_eq!(hub.stale_at(&elsewhere), None);
    hub.release(id);
    assert_eq!(hub.stale_at(&get), Some(30));
    hub.release(current);
    assert_eq!(hub.records().len(), 3);
}

#[test]
fn records_say_what_each_hold_did() {
    let (mut hub, s, _rx) = hub_with_stream("podcliques");
    let mut hold = pclq_hold();
    hold.names = vec!["job".into()];
    hold.namespace = Some("ns".into());
    hold.reads = Reads::Stale;
    hold.release = Release::Coalesce;
    let id = hub.start(hold, 10);
    hub.line(s, event("MODIFIED", "job", 11));
    assert_eq!(
        hub.records()[0].to_string(),
        "hold podcliques job in ns, reads stale, coalesced at release from rv 10: \
         1 event held, never released"
    );
    hub.release(id);
    assert_eq!(
        hub.records()[0].to_string(),
        "hold podcliques job in ns, reads stale, coalesced at release from rv 10: \
         1 event held, 1 delivered at release"
    );
}

#[test]
fn lines_are_cut_wherever_the_frames_split_them() {
    let mut lines = Lines::default();
    assert!(lines.push(b"{\"a\"").is_empty());
    assert_eq!(
        lines.push(b":1}\n{\"b\":2}\n{"),
        [
            Bytes::from_static(b"{\"a\":1}\n"),
            Bytes::from_static(b"{\"b\":2}\n")
        ]
    );
    assert_eq!(lines.push(b"}"), Vec::<Bytes>::new());
    assert_eq!(lines.finish(), Some(Bytes::from_static(b"{}")));
    assert_eq!(lines.finish(), None);
}
