//! Stickiness (E6), timestamps kept while a status stays, and comparison without timestamps.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::names::{CONDITION_MIN_AVAILABLE_BREACHED, REASON_POD_FAILED};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).expect("valid")
}

fn condition(type_: &str, status: &str, reason: &str, second: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        last_transition_time: Time(at(second)),
        observed_generation: Some(1),
    }
}

fn breach(status: &'static str) -> Desired {
    Desired {
        type_: CONDITION_MIN_AVAILABLE_BREACHED,
        status,
        reason: "R".into(),
        message: String::new(),
    }
}

#[test]
fn a_true_terminal_condition_is_never_replaced() {
    let existing = vec![condition(CONDITION_FAILED, "True", REASON_POD_FAILED, 10)];
    let merged = merge(
        &existing,
        vec![Desired::completed("x".into())],
        Some(2),
        at(20),
    );
    assert_eq!(merged, existing, "E6: Failed stays, Completed is not added");
    assert_eq!(terminal(&merged), Some(Terminal::Failed));
}

#[test]
fn an_unchanged_status_keeps_its_transition_time() {
    let existing = vec![condition(CONDITION_MIN_AVAILABLE_BREACHED, "True", "R", 10)];
    let kept = merge(&existing, vec![breach("True")], Some(1), at(20));
    assert_eq!(kept[0].last_transition_time, Time(at(10)));
    assert_eq!(breached_since(&kept), Some(at(10)));
    let flipped = merge(&existing, vec![breach("False")], Some(1), at(20));
    assert_eq!(flipped[0].last_transition_time, Time(at(20)));
    assert_eq!(breached_since(&flipped), None);
}

#[test]
fn conditions_not_desired_are_dropped_but_terminal_ones_kept() {
    let existing = vec![
        condition(
            CONDITION_COMPLETED,
            "True",
            REASON_COMPLETION_CRITERIA_MET,
            5,
        ),
        condition(CONDITION_MIN_AVAILABLE_BREACHED, "False", "R", 5),
    ];
    let merged = merge(&existing, Vec::new(), Some(1), at(20));
    assert_eq!(merged.len(), 1);
    assert_eq!(terminal(&merged), Some(Terminal::Completed));
}

#[test]
fn same_ignores_order_and_timestamps() {
    let a = vec![
        condition(CONDITION_COMPLETED, "True", "A", 1),
        condition(CONDITION_MIN_AVAILABLE_BREACHED, "False", "B", 1),
    ];
    let b = vec![
        condition(CONDITION_MIN_AVAILABLE_BREACHED, "False", "B", 9),
        condition(CONDITION_COMPLETED, "True", "A", 9),
    ];
    assert!(same(&a, &b));
    assert!(!same(&a, &b[..1]));
}
