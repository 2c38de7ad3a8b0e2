//! `keel sweep` and `keel sites` on the chapter scenario: every single fault at every step.

mod common;

use clap::Parser;
use common::PROTOCOLS;
use keel_scenarios::cli::{execute, Cli};
use serde_json::{json, Value};
use std::sync::OnceLock;

fn keel(args: &[&str]) -> String {
    let mut argv = vec!["keel"];
    argv.extend_from_slice(args);
    execute(&Cli::try_parse_from(&argv).expect("valid command line"))
        .expect("keel succeeds")
        .stdout
}

fn sweep_json(protocol: &str, extra: &[&str]) -> Value {
    if protocol == "in-place" && extra.is_empty() {
        // 155,334 runs: once for every test that reads it.
        static IN_PLACE: OnceLock<Value> = OnceLock::new();
        return IN_PLACE
            .get_or_init(|| run_sweep_json(protocol, extra))
            .clone();
    }
    run_sweep_json(protocol, extra)
}

fn run_sweep_json(protocol: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "sweep",
        "--checkpoint-protocol",
        protocol,
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    serde_json::from_str(&keel(&args)).unwrap()
}

fn rows(report: &Value) -> &Vec<Value> {
    report["rows"].as_array().unwrap()
}

fn row<'a>(report: &'a Value, sink: &str, fault: &str) -> &'a Value {
    rows(report)
        .iter()
        .find(|r| r["sink"] == sink && r["fault"] == fault)
        .unwrap_or_else(|| panic!("no row {sink}/{fault}"))
}

fn n(value: &Value) -> u64 {
    value.as_u64().unwrap()
}

/// The one helper: runs a point's reproduce command and returns its oracle verdict.
fn replay(reproduce: &str) -> Value {
    let args: Vec<&str> = reproduce.split_whitespace().skip(1).collect();
    let mut args = args.to_vec();
    args.extend_from_slice(&["--format", "json"]);
    let report: Value = serde_json::from_str(&keel(&args)).unwrap();
    report["oracle"].clone()
}

fn summary(oracle: &Value) -> String {
    let mut parts = Vec::new();
    for name in [
        "duplicates",
        "lost",
        "wrong",
        "corrupt",
        "stale_windows",
        "rolled_back",
    ] {
        if n(&oracle[name]) > 0 {
            parts.push(format!("{name}={}", oracle[name]));
        }
    }
    if oracle["recovery"] != "ok" {
        parts.push(format!("recovery={}", oracle["recovery"].as_str().unwrap()));
    } else if oracle["final_windows_match"] == false {
        parts.push("final_state_differs".to_string());
    }
    if parts.is_empty() {
        "exactly-once".to_string()
    } else {
        parts.join(" ")
    }
}

const FAULTS: [&str; 6] = [
    "process-crash",
    "power-loss",
    "disk-error",
    "sink-error",
    "ack-lost",
    "sink-unavailable",
];

#[test]
fn safe_idempotent_is_exactly_once_at_every_point_of_every_fault() {
    let report = sweep_json("safe", &["--sinks", "idempotent"]);
    assert_eq!(rows(&report).len(), FAULTS.len());
    for fault in FAULTS {
        let r = row(&report, "idempotent", fault);
        assert!(n(&r["points"]) > 0, "{fault}: no point tried");
        for field in [
            "duplicates",
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
        ] {
            assert_eq!(n(&r[field]), 0, "{fault}: {field}");
        }
        assert!(r["first_failure"].is_null(), "{fault}");
    }
}

#[test]
fn safe_append_duplicates_but_never_loses() {
    let report = sweep_json("safe", &["--sinks", "append"]);
    let mut duplicate_points = 0;
    for fault in FAULTS {
        let r = row(&report, "append", fault);
        for field in [
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
        ] {
            assert_eq!(n(&r[field]), 0, "{fault}: {field}");
        }
        duplicate_points += n(&r["points_with_duplicates"]);
    }
    // Exact figures, read off the sweep and checked by hand against the trace of a few points:
    // a crash between a record's write and the next checkpoint replays it.
    let crash = row(&report, "append", "process-crash");
    assert_eq!(
        (
            n(&crash["points"]),
            n(&crash["points_with_duplicates"]),
            n(&crash["duplicates"])
        ),
        (59, 17, 27)
    );
    let ack = row(&report, "append", "ack-lost");
    assert_eq!(
        (
            n(&ack["points"]),
            n(&ack["points_with_duplicates"]),
            n(&ack["duplicates"])
        ),
        (4, 4, 4)
    );
    let refused = row(&report, "append", "sink-error");
    assert_eq!((n(&refused["points"]), n(&refused["duplicates"])), (4, 0));
    assert!(duplicate_points > 0);
}

#[test]
fn ack_lost_duplicates_with_append_and_not_with_idempotent() {
    let report = sweep_json("safe", &["--faults", "ack-lost"]);
    assert_eq!(
        n(&row(&report, "append", "ack-lost")["points_with_duplicates"]),
        4
    );
    assert_eq!(n(&row(&report, "idempotent", "ack-lost")["duplicates"]), 0);
}

/// Every protocol with a full-checkpoint form but `safe`.
fn unsafe_protocols() -> impl Iterator<Item = &'static str> {
    PROTOCOLS.into_iter().filter(|&protocol| protocol != "safe")
}

#[test]
fn every_unsafe_protocol_is_caught_and_its_first_failure_replays_alone() {
    for protocol in unsafe_protocols() {
        let report = sweep_json(protocol, &[]);
        let caught: Vec<&Value> = rows(&report)
            .iter()
            .filter(|r| {
                n(&r["lost"]) + n(&r["wrong"]) + n(&r["rolled_back"]) + n(&r["failed_recoveries"])
                    > 0
            })
            .collect();
        assert!(!caught.is_empty(), "{protocol}: the oracle caught nothing");
        for r in caught {
            let first = &r["first_failure"];
            assert!(
                first.is_object(),
                "{protocol}: a caught row names its first failure"
            );
            let outcome = first["outcome"].as_str().unwrap();
            let reproduce = first["reproduce"].as_str().unwrap();
            assert_eq!(
                summary(&replay(reproduce)),
                outcome,
                "{protocol}: {reproduce}"
            );
        }
    }
}

#[test]
fn checkpoint_before_sink_sync_loses_records_even_with_the_idempotent_sink() {
    let report = sweep_json(
        "checkpoint-before-sink-sync",
        &["--sinks", "idempotent", "--faults", "power-loss"],
    );
    let r = row(&report, "idempotent", "power-loss");
    assert!(n(&r["points_with_loss"]) > 0);
    assert_eq!(n(&r["duplicates"]), 0);
    let first = &r["first_failure"];
    // Window 10's only record (13:10, sum 55) is lost: a consumer never sees window 10.
    assert_eq!(first["outcome"], "lost=1 stale_windows=1");
    assert_eq!(
        first["broken"],
        serde_json::json!(["no-loss", "consistent-view"])
    );
}

#[test]
fn trusting_the_page_cache_after_a_failed_fsync_loses_records() {
    // A failed sink fsync leaves its records in clean pages the disk does not hold. The
    // restarted process reads them back: the idempotent sink skips replaying them, the
    // append sink appends after them; when the pages go (here at the end of the run), the
    // records go too and a line of zeros swallows the next one.
    let report = sweep_json(
        "trust-page-cache-after-eio",
        &["--faults", "disk-error,page-eviction"],
    );
    assert_eq!(
        rows(&report).len(),
        2,
        "no page eviction applies without a disk error"
    );
    for (sink, lost, outcome) in [
        ("append", 2, "lost=1 corrupt=1 stale_windows=1"),
        ("idempotent", 5, "lost=2 corrupt=1 stale_windows=1"),
    ] {
        let r = row(&report, sink, "disk-error");
        assert_eq!(
            (
                n(&r["points"]),
                n(&r["points_with_loss"]),
                n(&r["lost"]),
                n(&r["corrupt"])
            ),
            (23, 2, lost, 2),
            "{sink}"
        );
        let first = &r["first_failure"];
        assert_eq!(
            (n(&first["step"]), first["outcome"].as_str()),
            (26, Some(outcome))
        );
        let reproduce = first["reproduce"].as_str().unwrap();
        assert_eq!(summary(&replay(reproduce)), outcome, "{reproduce}");
    }
    // Safe writes back what it reads at start-up: the same faults, and a second one after
    // each (an eviction wherever there is something to evict), lose nothing. A recovery
    // removes the `.tmp` a failed fsync left unpersisted, so after most of those first
    // faults nothing is left to evict (54 evictions a sink before it did).
    let safe = sweep_json(
        "safe",
        &["--faults", "disk-error,page-eviction", "--depth", "2"],
    );
    for (sink, fault, points) in [
        ("append", "disk-error+disk-error", 409),
        ("append", "disk-error+page-eviction", 20),
        ("idempotent", "disk-error+disk-error", 409),
        ("idempotent", "disk-error+page-eviction", 20),
    ] {
        let r = row(&safe, sink, fault);
        assert_eq!(n(&r["points"]), points, "{sink} / {fault}");
        for field in [
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
        ] {
            assert_eq!(n(&r[field]), 0, "{sink} / {fault}: {field}");
        }
    }
    assert_eq!(
        n(&row(&safe, "idempotent", "disk-error+page-eviction")["duplicates"]),
        0
    );
}

/// Every row ran every state: states_run and states_total are its points.
fn assert_exhaustive(report: &Value) {
    for r in rows(report) {
        let name = format!("{} / {}", r["sink"], r["fault"]);
        assert_eq!(r["exhaustive"], true, "{name}");
        assert_eq!(r["states_run"], r["points"], "{name}");
        assert_eq!(r["states_total"], r["points"], "{name}");
        assert!(r["sampled"].is_null(), "{name}");
    }
}

#[test]
fn the_safe_sweep_runs_every_crash_state() {
    let report = sweep_json("safe", &[]);
    assert_eq!(rows(&report).len(), 12);
    assert_exhaustive(&report);
    assert_eq!(
        n(&row(&report, "append", "power-loss")["states_total"]),
        483
    );
}

#[test]
fn the_in_place_sweep_runs_every_crash_state_at_the_default() {
    let report = sweep_json("in-place", &[]);
    assert_eq!(n(&report["power_loss_states_max"]), 65_536);
    assert_eq!(rows(&report).len(), 12);
    assert_exhaustive(&report);
    // 39 steps of at most 432 states (2,427), 2 of 2,592, 6 of 7,776 and 1 of 23,328: every
    // one an index below 65,536, so every one runs.
    for sink in ["append", "idempotent"] {
        let r = row(&report, sink, "power-loss");
        assert_eq!(
            n(&r["states_total"]),
            2_427 + 2 * 2_592 + 6 * 7_776 + 23_328
        );
        assert_eq!(n(&r["states_total"]), 77_595);
    }
}

#[test]
fn a_sweep_with_fewer_states_a_step_says_what_it_sampled() {
    let report = sweep_json("in-place", &["--power-loss-states-max", "1000"]);
    assert_eq!(n(&report["power_loss_states_max"]), 1_000);
    for sink in ["append", "idempotent"] {
        for fault in FAULTS {
            let r = row(&report, sink, fault);
            if fault != "power-loss" {
                assert_eq!(r["exhaustive"], true, "{sink} / {fault}");
                assert_eq!(r["states_total"], r["points"], "{sink} / {fault}");
                continue;
            }
            // 39 steps of at most 432 states run all 2,427; the 9 steps of 2,592 to 23,328
            // states (75,168) run 1,000 each.
            assert_eq!(r["exhaustive"], false, "{sink}");
            assert_eq!(
                (n(&r["points"]), n(&r["states_run"]), n(&r["states_total"])),
                (11_427, 11_427, 77_595),
                "{sink}"
            );
            assert_eq!(
                r["sampled"],
                json!({"steps": 9, "states": 75_168, "drawn": 9_000}),
                "{sink}"
            );
        }
    }
    let text = keel(&[
        "sweep",
        "--checkpoint-protocol",
        "in-place",
        "--power-loss-states-max",
        "1000",
        "--seed",
        "7",
        "--sinks",
        "idempotent",
        "--faults",
        "power-loss,ack-lost",
    ]);
    let points = |fault: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with("idempotent") && l.contains(fault))
            .unwrap_or_else(|| panic!("no {fault} row: {text}"));
        line.split_whitespace().nth(2).unwrap().to_string()
    };
    assert_eq!(points("power-loss"), "11427*");
    assert_eq!(points("ack-lost"), "4");
    assert!(
        text.contains(
            "\n* sampled idempotent / power-loss: 9,000 of 75,168 crash states at 9 steps were drawn with seed 7 (--power-loss-states-max 1000)\n"
        ),
        "{text}"
    );
    assert_eq!(text.matches("* sampled").count(), 1, "{text}");
}

#[test]
fn sweep_tables_of_every_protocol() {
    for protocol in PROTOCOLS {
        let table = keel(&["sweep", "--checkpoint-protocol", protocol]);
        insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, description => format!("keel sweep --checkpoint-protocol {protocol}")}, {
            insta::assert_snapshot!(format!("sweep_{protocol}"), table);
        });
    }
}

#[test]
fn a_sweep_run_twice_is_identical() {
    let first = keel(&[
        "sweep",
        "--checkpoint-protocol",
        "no-tail-repair",
        "--format",
        "json",
    ]);
    let second = keel(&[
        "sweep",
        "--checkpoint-protocol",
        "no-tail-repair",
        "--format",
        "json",
    ]);
    assert_eq!(first, second);
    let fingerprint = |s: &str| serde_json::from_str::<Value>(s).unwrap()["fingerprint"].clone();
    assert_eq!(fingerprint(&first), fingerprint(&second));
    assert_ne!(
        fingerprint(&first),
        fingerprint(&keel(&[
            "sweep",
            "--checkpoint-protocol",
            "safe",
            "--format",
            "json"
        ]))
    );
}

#[test]
fn sites_list_every_step_and_the_faults_that_apply() {
    let table = keel(&["sites"]);
    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, description => "keel sites"}, {
        insta::assert_snapshot!("sites_ch04_safe_append", table);
    });
    let json: Value = serde_json::from_str(&keel(&["sites", "--format", "json"])).unwrap();
    let sites = json.as_array().unwrap();
    assert_eq!(sites.len(), 59);
    let write = sites.iter().find(|s| s["op"] == "sink.write").unwrap();
    assert_eq!(write["target"], "13:10");
    assert_eq!(
        write["faults"],
        serde_json::json!([
            "process-crash",
            "power-loss",
            "sink-error",
            "ack-lost",
            "sink-unavailable",
            "zombie"
        ])
    );
}

#[test]
fn a_rename_without_data_fsync_leaves_a_zero_length_checkpoint() {
    // no-fsync-rename, power loss right after the first checkpoint's directory fsync (step
    // 15), crash state 0: nothing pending survives, so the renamed name survives without its
    // data. Recovery must reject the empty file and start again from event 0.
    let out = keel(&[
        "run",
        "--checkpoint-protocol",
        "no-fsync-rename",
        "--fault",
        "power-loss",
        "--at-step",
        "15",
        "--crash-state",
        "0",
        "--trace",
    ]);
    assert!(
        out.contains("step 15 t=2100ms p0 disk.fsync-dir . !power-loss after state 0"),
        "{out}"
    );
    assert!(
        out.contains("recovery: skip state-8.json: empty file"),
        "{out}"
    );
    assert!(out.contains("resume_from_index=0 watermark=none"), "{out}");
}
