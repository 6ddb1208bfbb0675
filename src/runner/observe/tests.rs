use super::record::record;
use super::release::release;
use super::watches::WatchProgress;
use super::*;
use crate::monitor::Actor;
use serde_json::json;

fn pod(uid: &str, rv: u64) -> Value {
    json!({"kind": "Pod", "metadata": {"name": uid, "uid": uid, "resourceVersion": rv.to_string()}})
}

fn object(kind: Kind, name: &str, rv: u64) -> Value {
    json!({"kind": kind.as_str(), "metadata": {
        "name": name, "uid": name, "namespace": "ns", "resourceVersion": rv.to_string()}})
}

/// A state whose monitor judges, with every gated watch at `rv`.
fn judged_state(rv: u64) -> Mutex<State> {
    let mut state = State {
        monitor: Some(Monitor::new(Vocabulary::default())),
        ..State::default()
    };
    for kind in GATED {
        state.progressed(kind, rv);
    }
    Mutex::new(state)
}

fn arrive(state: &Arc<Mutex<State>>, kind: Kind, name: &str, rv: u64) {
    let writes = Arc::new(Mutex::new(HarnessWrites::default()));
    let tx = watch::channel(0).0;
    record(kind, object(kind, name, rv), false, state, &writes, &tx);
}

#[test]
fn a_pod_failing_without_a_step_of_the_harness_is_noted_with_its_reason() {
    let state = Arc::new(judged_state(0));
    let writes = Arc::new(Mutex::new(HarnessWrites::default()));
    writes.lock().unwrap().touched_uids.insert("exited".into());
    writes.lock().unwrap().deleted_uids.insert("evicted".into());
    let tx = watch::channel(0).0;
    let arrive_pod = |pod: Value| record(Kind::Pod, pod, false, &state, &writes, &tx);
    let failed = |name: &str, rv: u64, deleting: bool| {
        let mut p = pod(name, rv);
        p["status"] = json!({"phase": "Failed", "containerStatuses": [{"name": "main",
            "state": {"terminated": {"exitCode": 128, "reason": "StartError",
                "message": "context deadline exceeded"}}}]});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        p
    };
    // Made to exit, evicted, or killed by a deletion (the implementation's or the
    // harness's): prompted.
    arrive_pod(failed("exited", 1, false));
    arrive_pod(failed("evicted", 2, false));
    arrive_pod(failed("deleted", 3, true));
    // Failed by itself, reported twice: noted once.
    arrive_pod(pod("alone", 4));
    arrive_pod(failed("alone", 5, false));
    arrive_pod(failed("alone", 6, false));
    let noted: Vec<String> = state
        .lock()
        .unwrap()
        .failed_unprompted
        .iter()
        .map(|(_, what)| what.clone())
        .collect();
    assert_eq!(
        noted,
        ["alone (StartError exit code 128 context deadline exceeded)"]
    );
}

fn released(state: &Mutex<State>) -> Vec<u64> {
    release(state, &Mutex::new(HarnessWrites::default()), None);
    let state = state.lock().unwrap();
    let monitor = state.monitor.as_ref().unwrap();
    monitor
        .timeline()
        .iter()
        .map(|e| e.resource_version)
        .collect()
}

#[test]
fn an_entry_waits_until_every_gated_watch_has_confirmed_it() {
    let state = Arc::new(judged_state(5));
    arrive(&state, Kind::Pod, "p", 10);
    arrive(&state, Kind::PodClique, "c", 12);
    // Every watch but the PCSG one is past both entries: nothing is judged yet.
    for kind in [Kind::Pod, Kind::PodClique, Kind::PodCliqueSet] {
        state.lock().unwrap().progressed(kind, 12);
    }
    assert!(state.lock().unwrap().held_by(Kind::PodCliqueScalingGroup));
    assert!(!state.lock().unwrap().held_by(Kind::Pod));
    assert_eq!(released(&state), Vec::<u64>::new());
    // Its bookmark at 11 releases the first entry only.
    state
        .lock()
        .unwrap()
        .progressed(Kind::PodCliqueScalingGroup, 11);
    assert_eq!(released(&state), vec![10]);
    state
        .lock()
        .unwrap()
        .progressed(Kind::PodCliqueScalingGroup, 12);
    assert_eq!(released(&state), vec![10, 12]);
    assert_eq!(state.lock().unwrap().replays, 0);
}

#[test]
fn a_lagging_watch_delays_its_entries_but_never_reorders_them() {
    let state = Arc::new(judged_state(1));
    // The PodClique watch delivers 12 first; the pod watch lags and delivers 10 later.
    arrive(&state, Kind::PodClique, "c", 12);
    state.lock().unwrap().progressed(Kind::PodClique, 12);
    for kind in [Kind::PodCliqueScalingGroup, Kind::PodCliqueSet] {
        state.lock().unwrap().progressed(kind, 30);
    }
    assert_eq!(released(&state), Vec::<u64>::new());
    arrive(&state, Kind::Pod, "p", 10);
    state.lock().unwrap().progressed(Kind::Pod, 10);
    assert_eq!(released(&state), vec![10]);
    state.lock().unwrap().progressed(Kind::Pod, 20);
    assert_eq!(released(&state), vec![10, 12]);
    // Judged in the order etcd committed the writes, without a replay.
    assert_eq!(state.lock().unwrap().replays, 0);
}

#[test]
fn events_never_hold_the_timeline_back_but_wait_their_turn() {
    let state = Arc::new(judged_state(10));
    // No Event watch progress at all: the gated entries are still judged.
    arrive(&state, Kind::Pod, "p", 8);
    arrive(&state, Kind::Event, "e", 9);
    arrive(&state, Kind::Event, "late", 11);
    assert!(!state.lock().unwrap().held_by(Kind::Event));
    assert_eq!(released(&state), vec![8, 9]);
    // An event past the gate waits like any entry.
    assert_eq!(state.lock().unwrap().pending.len(), 1);
}

#[test]
fn a_late_event_is_judged_without_a_replay_and_rendered_in_its_place() {
    let state = Arc::new(judged_state(10));
    arrive(&state, Kind::Pod, "p", 8);
    arrive(&state, Kind::Pod, "q", 10);
    assert_eq!(released(&state), vec![8, 10]);
    // The Event watch lags: an Event committed between the two pods arrives after both.
    arrive(&state, Kind::Event, "e", 9);
    assert_eq!(released(&state), vec![8, 10, 9]);
    assert_eq!(state.lock().unwrap().replays, 0);
    let rendered = state
        .lock()
        .unwrap()
        .monitor
        .as_ref()
        .unwrap()
        .render_timeline();
    let order: Vec<&str> = rendered
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(order, ["#0", "#2", "#1"], "{rendered}");
    // A late object entry is still judged again in resource-version order.
    arrive(&state, Kind::Pod, "r", 7);
    assert_eq!(released(&state), vec![7, 8, 9, 10]);
    assert_eq!(state.lock().unwrap().replays, 1);
}

#[test]
fn a_watch_going_back_in_time_makes_the_timeline_unjudgeable() {
    let state = Mutex::new(State::default());
    let mut progress = WatchProgress::default();
    progress.streamed(Kind::Pod, &pod("a", 10), &state);
    progress.streamed(Kind::Pod, &pod("b", 12), &state);
    assert_eq!(state.lock().unwrap().unjudgeable, None);
    progress.streamed(Kind::Pod, &pod("c", 11), &state);
    let why = state.lock().unwrap().unjudgeable.clone().unwrap();
    assert!(
        why.contains("resourceVersion 11") && why.contains("after 12"),
        "{why}"
    );
}

#[test]
fn a_relist_reports_the_objects_it_no_longer_has_as_deleted() {
    let state = Mutex::new(State::default());
    state.lock().unwrap().snapshot.pods = vec![pod("kept", 5), pod("gone", 7)];
    let mut progress = WatchProgress {
        listing: Some(HashSet::new()),
        ..WatchProgress::default()
    };
    progress.listed(&pod("kept", 5));
    progress.listed(&pod("new", 20));
    let gone = progress.relisted(Kind::Pod, &state);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0]["metadata"]["uid"], "gone");
    assert_eq!(gone[0]["metadata"]["resourceVersion"], "20");
    // Nothing more once the list is done; relist items never count as going backwards.
    assert!(progress.relisted(Kind::Pod, &state).is_empty());
    assert_eq!(state.lock().unwrap().unjudgeable, None);
}

#[test]
fn a_container_the_target_cannot_start_is_named_with_its_reason() {
    let waiting = |reason: &str, message: &str| {
        json!({"metadata": {"name": "job-0-w-abcde"}, "status": {"phase": "Pending",
            "containerStatuses": [{"name": "main",
                "state": {"waiting": {"reason": reason, "message": message}}}]}})
    };
    assert_eq!(
        cannot_start(&waiting(
            "ErrImagePull",
            "failed to pull image \"busybox\": connection refused"
        ))
        .as_deref(),
        Some("main: ErrImagePull: failed to pull image \"busybox\": connection refused")
    );
    assert_eq!(
        cannot_start(&waiting("ImagePullBackOff", "")).as_deref(),
        Some("main: ImagePullBackOff")
    );
    // On the way, or after an exit the harness made: not a failure to start.
    for reason in ["ContainerCreating", "PodInitializing", "CrashLoopBackOff"] {
        assert_eq!(cannot_start(&waiting(reason, "x")), None, "{reason}");
    }
    let init = json!({"status": {"initContainerStatuses": [{"name": "setup",
        "state": {"waiting": {"reason": "InvalidImageName"}}}]}});
    assert_eq!(
        cannot_start(&init).as_deref(),
        Some("setup: InvalidImageName")
    );
}

#[test]
fn a_pod_that_cannot_start_is_noted_once_and_a_deleted_one_not_at_all() {
    let state = Arc::new(judged_state(0));
    let writes = Arc::new(Mutex::new(HarnessWrites::default()));
    let tx = watch::channel(0).0;
    let pulling = |name: &str, rv: u64, deleting: bool| {
        let mut p = pod(name, rv);
        p["status"] = json!({"phase": "Pending", "containerStatuses": [{"name": "main",
            "state": {"waiting": {"reason": "ErrImagePull", "message": "no registry"}}}]});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        p
    };
    for p in [
        pulling("a", 1, false),
        pulling("a", 2, false),
        pulling("b", 3, true),
    ] {
        record(Kind::Pod, p, false, &state, &writes, &tx);
    }
    let noted: Vec<String> = state
        .lock()
        .unwrap()
        .cannot_start
        .iter()
        .map(|(_, what)| what.clone())
        .collect();
    assert_eq!(noted, ["a (main: ErrImagePull: no registry)"]);
}

#[test]
fn the_rendered_timeline_notes_watch_errors_and_replays() {
    let state = Arc::new(judged_state(10));
    arrive(&state, Kind::Pod, "p", 8);
    assert_eq!(released(&state), vec![8]);
    arrive(&state, Kind::Pod, "q", 7);
    assert_eq!(released(&state), vec![7, 8]);
    {
        let mut s = state.lock().unwrap();
        s.watch_errors.push("Pod: connection reset".into());
        s.watch_errors.push("Pod: connection reset".into());
        s.watch_errors
            .push("PodClique: resourceVersion 5 is too old for the apiserver".into());
    }
    let rendered = state.lock().unwrap().rendered();
    let notes: Vec<&str> = rendered
        .lines()
        .filter(|l| l.starts_with("note: "))
        .collect();
    assert_eq!(
        notes,
        [
            "note: watch error, resumed by itself: Pod: connection reset (2 times)",
            "note: watch error, resumed by itself: PodClique: resourceVersion 5 is too old for the apiserver",
            "note: the monitor judged the whole timeline again 1 time: object entries arrived after later ones had been judged",
        ],
        "{rendered}"
    );
    assert!(rendered.starts_with("#0"), "{rendered}");
}

#[test]
fn a_pod_the_cluster_evicts_by_itself_is_its_doing_and_noted_unless_the_harness_asked() {
    let state = Arc::new(judged_state(0));
    let writes = Arc::new(Mutex::new(HarnessWrites::default()));
    writes
        .lock()
        .unwrap()
        .deleted_uids
        .insert("asked".to_owned());
    let tx = watch::channel(0).0;
    let evicted = |name: &str, rv: u64, reason: &str| {
        let mut p = pod(name, rv);
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        p["status"] = json!({"phase": "Running", "conditions": [{"type": "DisruptionTarget",
            "status": "True", "reason": reason,
            "message": "Taint manager: deleting due to NoExecute taint key node.kubernetes.io/not-ready"}]});
        p
    };
    for p in [
        pod("by-itself", 1),
        pod("asked", 2),
        pod("api", 3),
        evicted("by-itself", 4, "DeletionByTaintManager"),
        evicted("asked", 5, "DeletionByTaintManager"),
        evicted("api", 6, "EvictionByEvictionAPI"),
    ] {
        record(Kind::Pod, p, false, &state, &writes, &tx);
    }
    let s = state.lock().unwrap();
    let noted: Vec<&str> = s
        .disrupted_by_cluster
        .iter()
        .map(|(_, what)| what.as_str())
        .collect();
    assert_eq!(
        noted,
        [
            "by-itself (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint key node.kubernetes.io/not-ready)"
        ]
    );
    let w = writes.lock().unwrap();
    let actors: Vec<(u64, Actor)> = s
        .pending
        .iter()
        .map(|p| {
            (
                p.entry.resource_version,
                super::release::actor(&p.entry, p.facts, &w, None),
            )
        })
        .collect();
    assert_eq!(
        actors,
        [
            (1, Actor::Implementation),
            (2, Actor::Implementation),
            (3, Actor::Implementation),
            (4, Actor::System),
            (5, Actor::Harness),
            // Whoever calls the Eviction API is a client like any other.
            (6, Actor::Implementation),
        ]
    );
}

#[test]
fn a_watch_behind_the_awaited_revision_holds_it_though_no_entry_waits() {
    let state = Arc::new(judged_state(10));
    arrive(&state, Kind::Pod, "p", 8);
    assert_eq!(released(&state), vec![8]);
    // Nothing pending: no watch holds anything back.
    assert!(GATED.iter().all(|&k| !state.lock().unwrap().held_by(k)));
    // The end of the case awaits 14, written by a kind no gated watch delivers: every gated
    // watch behind it holds it, so its next session brings its cache up to date first.
    state.lock().unwrap().awaited = 14;
    state.lock().unwrap().progressed(Kind::PodClique, 14);
    assert!(!state.lock().unwrap().held_by(Kind::PodClique));
    for kind in [Kind::Pod, Kind::PodCliqueScalingGroup, Kind::PodCliqueSet] {
        assert!(state.lock().unwrap().held_by(kind), "{kind}");
    }
    assert!(!state.lock().unwrap().held_by(Kind::Event));
}
