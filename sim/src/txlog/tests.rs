//! Tests of the two-phase-commit log (`txlog.rs`).

use super::*;

const TIMEOUT_MS: u64 = 1_000;

fn payloads(records: &[LogRecord]) -> Vec<&str> {
    records
        .iter()
        .map(|record| record.payload.as_str())
        .collect()
}

fn lines(log: &TxLog) -> Vec<String> {
    log.entries().iter().map(ToString::to_string).collect()
}

#[test]
fn commit_makes_records_visible_to_read_committed() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 0).unwrap();
    assert_eq!(log.send(&sink, "a", 1), Ok(0));
    assert_eq!(log.send(&sink, "b", 2), Ok(1));
    assert_eq!(log.read_committed(), vec![]);
    assert_eq!(log.last_stable_offset(), 0);
    assert_eq!(log.commit(&sink, 3), Ok(2));
    assert_eq!(log.last_stable_offset(), 3);
    assert_eq!(
        log.read_committed(),
        vec![
            LogRecord {
                offset: 0,
                transactional_id: "sink".to_string(),
                epoch: 0,
                payload: "a".to_string(),
                status: TxnStatus::Committed,
            },
            LogRecord {
                offset: 1,
                transactional_id: "sink".to_string(),
                epoch: 0,
                payload: "b".to_string(),
                status: TxnStatus::Committed,
            },
        ]
    );
    assert_eq!(
        lines(&log),
        vec![
            "0 data sink e0 \"a\"",
            "1 data sink e0 \"b\"",
            "2 commit sink e0"
        ]
    );
    assert_eq!(log.open_transactions(), vec![]);
}

#[test]
fn abort_hides_records_from_read_committed_but_read_uncommitted_shows_them() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 0).unwrap();
    log.send(&sink, "kept", 0).unwrap();
    log.commit(&sink, 0).unwrap();
    log.begin(&sink, 10).unwrap();
    log.send(&sink, "dropped", 10).unwrap();
    assert_eq!(log.abort(&sink, 11), Ok(3));
    assert_eq!(payloads(&log.read_committed()), vec!["kept"]);
    let dirty = log.read_uncommitted();
    assert_eq!(payloads(&dirty), vec!["kept", "dropped"]);
    assert_eq!(dirty[1].offset, 2);
    assert_eq!(dirty[1].status, TxnStatus::Aborted);
    assert_eq!(lines(&log)[3], "3 abort sink e0 (requested)");
}

#[test]
fn an_open_transaction_blocks_read_committed_at_the_lso() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let slow = log.init_producer("slow", 0);
    let fast = log.init_producer("fast", 0);
    log.begin(&fast, 0).unwrap();
    log.send(&fast, "f1", 0).unwrap(); // 0
    log.commit(&fast, 0).unwrap(); // 1
    log.begin(&slow, 0).unwrap();
    log.begin(&fast, 0).unwrap();
    assert_eq!(
        log.last_stable_offset(),
        2,
        "open transactions without records block nothing"
    );
    log.send(&slow, "s1", 1).unwrap(); // 2
    log.send(&fast, "f2", 1).unwrap(); // 3
    log.commit(&fast, 2).unwrap(); // 4
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(payloads(&log.read_committed()), vec!["f1"]);
    let uncommitted = log.read_uncommitted();
    assert_eq!(payloads(&uncommitted), vec!["f1", "s1", "f2"]);
    assert_eq!(
        uncommitted
            .iter()
            .map(|record| record.status)
            .collect::<Vec<_>>(),
        vec![TxnStatus::Committed, TxnStatus::Open, TxnStatus::Committed]
    );
    assert_eq!(
        log.open_transactions(),
        vec![OpenTransaction {
            transactional_id: "slow".to_string(),
            epoch: 0,
            started_ms: 0,
            first_offset: Some(2),
            records: 1,
        }]
    );
    assert_eq!(
        log.open_transactions()[0].to_string(),
        "slow e0 open since t=0ms, 1 records from offset 2"
    );
    log.commit(&slow, 3).unwrap(); // 5
    assert_eq!(log.last_stable_offset(), 6);
    assert_eq!(payloads(&log.read_committed()), vec!["f1", "s1", "f2"]);
}

#[test]
fn registering_again_fences_the_zombie() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let zombie = log.init_producer("sink", 0);
    log.begin(&zombie, 0).unwrap();
    log.send(&zombie, "z1", 0).unwrap(); // 0
    let fresh = log.init_producer("sink", 5); // aborts z1: 1
    assert_eq!(fresh.epoch, 1);
    assert_eq!(log.current_epoch("sink"), Some(1));
    let fenced = LogError::Fenced {
        transactional_id: "sink".to_string(),
        epoch: 0,
        current_epoch: 1,
    };
    assert_eq!(log.send(&zombie, "z2", 6), Err(fenced.clone()));
    assert_eq!(log.commit(&zombie, 6), Err(fenced.clone()));
    assert_eq!(log.abort(&zombie, 6), Err(fenced.clone()));
    assert_eq!(log.begin(&zombie, 6), Err(fenced.clone()));
    assert_eq!(log.entries().len(), 2, "fenced calls append nothing");
    log.begin(&fresh, 7).unwrap();
    log.send(&fresh, "f1", 7).unwrap(); // 2
    log.commit(&fresh, 8).unwrap(); // 3
    assert_eq!(log.commit(&zombie, 9), Err(fenced));
    let committed = log.read_committed();
    assert_eq!(payloads(&committed), vec!["f1"]);
    assert_eq!(
        committed.iter().filter(|record| record.epoch == 0).count(),
        0
    );
    assert_eq!(
        lines(&log),
        vec![
            "0 data sink e0 \"z1\"",
            "1 abort sink e0 (fenced by e1)",
            "2 data sink e1 \"f1\"",
            "3 commit sink e1",
        ]
    );
    // The zombie's pre-committed transaction cannot be resumed either.
    assert_eq!(
        log.commit_resumed("sink", 0, 10),
        Err(LogError::TransactionAborted {
            transactional_id: "sink".to_string(),
            epoch: 0,
            reason: AbortReason::Fenced { by_epoch: 1 },
        })
    );
}

#[test]
fn the_timeout_aborts_a_transaction_and_commit_resumed_then_fails() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 100).unwrap();
    log.send(&sink, "late", 100).unwrap(); // 0
    assert_eq!(
        log.expire(1_100),
        vec![],
        "exactly the timeout is not longer than it"
    );
    let markers = log.expire(1_101);
    assert_eq!(
        markers.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["1 abort sink e0 (timeout)"]
    );
    assert_eq!(log.read_committed(), vec![]);
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(
        log.commit_resumed("sink", 0, 1_200),
        Err(LogError::TransactionAborted {
            transactional_id: "sink".to_string(),
            epoch: 0,
            reason: AbortReason::Timeout,
        })
    );
    assert_eq!(log.entries().len(), 2, "a refused resume appends nothing");
}

#[test]
fn a_timed_out_producer_is_told_once_then_has_no_open_transaction() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 0).unwrap();
    log.send(&sink, "a", 0).unwrap();
    // The commit itself moves the clock past the timeout: the log expires first.
    assert_eq!(
        log.commit(&sink, 2_000),
        Err(LogError::TransactionTimedOut {
            transactional_id: "sink".to_string(),
            epoch: 0,
            started_ms: 0,
            transaction_timeout_ms: TIMEOUT_MS,
        })
    );
    assert_eq!(
        log.commit(&sink, 2_000),
        Err(LogError::NoOpenTransaction {
            transactional_id: "sink".to_string(),
            epoch: 0,
        })
    );
    assert_eq!(lines(&log)[1], "1 abort sink e0 (timeout)");
    log.begin(&sink, 2_001).unwrap();
    log.send(&sink, "b", 2_001).unwrap();
    log.commit(&sink, 2_002).unwrap();
    assert_eq!(payloads(&log.read_committed()), vec!["b"]);
}

#[test]
fn commit_resumed_commits_a_pre_committed_transaction_and_is_idempotent() {
    let mut log = TxLog::new(TIMEOUT_MS);
    // Process 1 pre-commits (its checkpoint names sink e0) and dies before committing.
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 0).unwrap();
    log.send(&sink, "a", 0).unwrap();
    // Process 2 commits it from the checkpoint, then a retry finds it committed.
    assert_eq!(
        log.commit_resumed("sink", 0, 500),
        Ok(ResumeOutcome::Committed)
    );
    assert_eq!(
        log.commit_resumed("sink", 0, 600),
        Ok(ResumeOutcome::AlreadyCommitted)
    );
    // Still idempotent after the id is registered again (the epoch is stale now).
    let next = log.init_producer("sink", 700);
    assert_eq!(next.epoch, 1);
    assert_eq!(
        log.commit_resumed("sink", 0, 800),
        Ok(ResumeOutcome::AlreadyCommitted)
    );
    assert_eq!(payloads(&log.read_committed()), vec!["a"]);
    assert_eq!(
        lines(&log),
        vec!["0 data sink e0 \"a\"", "1 commit sink e0"]
    );
}

#[test]
fn commit_resumed_without_a_transaction_is_fenced_or_has_nothing_open() {
    let mut log = TxLog::new(TIMEOUT_MS);
    assert_eq!(
        log.commit_resumed("sink", 0, 0),
        Err(LogError::UnknownProducer {
            transactional_id: "sink".to_string(),
            epoch: 0,
            current_epoch: None,
        })
    );
    log.init_producer("sink", 0);
    assert_eq!(
        log.commit_resumed("sink", 0, 0),
        Err(LogError::NoOpenTransaction {
            transactional_id: "sink".to_string(),
            epoch: 0,
        })
    );
    log.init_producer("sink", 0);
    assert_eq!(
        log.commit_resumed("sink", 0, 0),
        Err(LogError::Fenced {
            transactional_id: "sink".to_string(),
            epoch: 0,
            current_epoch: 1,
        })
    );
    assert_eq!(
        log.commit_resumed("sink", 2, 0),
        Err(LogError::UnknownProducer {
            transactional_id: "sink".to_string(),
            epoch: 2,
            current_epoch: Some(1),
        })
    );
    assert!(log.entries().is_empty());
}

#[test]
fn expire_aborts_in_begin_time_order_then_by_transactional_id() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let c = log.init_producer("c", 0);
    let b = log.init_producer("b", 0);
    let a = log.init_producer("a", 0);
    let d = log.init_producer("d", 0);
    log.begin(&c, 10).unwrap();
    log.begin(&b, 20).unwrap();
    log.begin(&a, 20).unwrap();
    log.begin(&d, 500).unwrap();
    let markers = log.expire(1_021);
    assert_eq!(
        markers.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            "0 abort c e0 (timeout)",
            "1 abort a e0 (timeout)",
            "2 abort b e0 (timeout)",
        ]
    );
    assert_eq!(log.open_transactions().len(), 1);
    assert_eq!(log.open_transactions()[0].transactional_id, "d");
}

#[test]
fn transaction_state_errors() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    assert_eq!(
        log.send(&sink, "x", 0),
        Err(LogError::NoOpenTransaction {
            transactional_id: "sink".to_string(),
            epoch: 0,
        })
    );
    log.begin(&sink, 5).unwrap();
    assert_eq!(
        log.begin(&sink, 6),
        Err(LogError::TransactionAlreadyOpen {
            transactional_id: "sink".to_string(),
            epoch: 0,
            started_ms: 5,
        })
    );
    let forged = Producer {
        transactional_id: "other".to_string(),
        epoch: 0,
    };
    assert_eq!(
        log.begin(&forged, 6),
        Err(LogError::UnknownProducer {
            transactional_id: "other".to_string(),
            epoch: 0,
            current_epoch: None,
        })
    );
    assert!(log.entries().is_empty());
}

#[test]
fn errors_name_the_transactional_id_and_epochs() {
    let fenced = LogError::Fenced {
        transactional_id: "sink".to_string(),
        epoch: 1,
        current_epoch: 2,
    };
    assert_eq!(
        fenced.to_string(),
        "producer sink e1 is fenced: sink was registered again with e2"
    );
    let timed_out = LogError::TransactionTimedOut {
        transactional_id: "sink".to_string(),
        epoch: 2,
        started_ms: 100,
        transaction_timeout_ms: 900,
    };
    assert_eq!(
        timed_out.to_string(),
        "the transaction of sink e2 begun at t=100ms was aborted by the log after the \
         transaction timeout of 900ms"
    );
    let aborted = LogError::TransactionAborted {
        transactional_id: "sink".to_string(),
        epoch: 1,
        reason: AbortReason::Fenced { by_epoch: 2 },
    };
    assert_eq!(
        aborted.to_string(),
        "the transaction of sink e1 was aborted (fenced by e2); it cannot be committed"
    );
}

#[test]
fn payloads_print_on_one_line_by_this_files_rules() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 0).unwrap();
    log.send(&sink, "{\"k\":\"a\\b\"}\n\t\u{1}é", 0).unwrap();
    assert_eq!(
        lines(&log),
        vec!["0 data sink e0 \"{\\\"k\\\":\\\"a\\\\b\\\"}\\n\\t\\u{1}é\""]
    );
}

#[test]
fn a_clone_forks_the_log() {
    let mut log = TxLog::new(TIMEOUT_MS);
    let sink = log.init_producer("sink", 0);
    log.begin(&sink, 0).unwrap();
    log.send(&sink, "a", 0).unwrap();
    let mut fork = log.clone();
    assert_eq!(fork, log);
    fork.commit(&sink, 1).unwrap();
    log.abort(&sink, 1).unwrap();
    assert_ne!(fork, log);
    assert_eq!(payloads(&fork.read_committed()), vec!["a"]);
    assert_eq!(log.read_committed(), vec![]);
}

#[test]
#[should_panic(expected = "time went backwards")]
fn time_going_backwards_is_a_bug() {
    let mut log = TxLog::new(TIMEOUT_MS);
    log.expire(10);
    log.expire(9);
}
