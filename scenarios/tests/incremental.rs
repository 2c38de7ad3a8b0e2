//! Incremental checkpoints (`--state-backend incremental`): the ch04 sweep under every
//! default fault holds what each sink promises with the safe protocol and catches the two
//! unsafe variants, with exact figures; and a fault-free run writes the same records and
//! ends with the same windows as with full checkpoints, on generated streams.

use clap::Parser;
use keel_engine::{parse_events, SinkKind, StateBackend};
use keel_scenarios::cli::{execute, Cli};
use keel_scenarios::gen::{generate, GenSpec};
use keel_scenarios::observation::Observation;
use keel_scenarios::runner::run;
use keel_scenarios::spec::ScenarioSpec;
use keel_sim::FaultPlan;
use serde_json::Value;

fn sweep(extra: &[&str]) -> Value {
    let mut argv = vec![
        "keel",
        "sweep",
        "--scenario",
        "ch04",
        "--state-backend",
        "incremental",
        "--format",
        "json",
    ];
    argv.extend_from_slice(extra);
    let output =
        execute(&Cli::try_parse_from(&argv).expect("valid command line")).expect("keel succeeds");
    serde_json::from_str(&output.stdout).expect("one JSON object")
}

/// The one helper: every row of `report` as "sink fault [view] points failing", in order.
fn figures(report: &Value) -> Vec<String> {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let view = row["view"]
                .as_str()
                .map_or(String::new(), |v| format!(" {v}"));
            format!(
                "{} {}{view} {} {}",
                row["sink"].as_str().unwrap(),
                row["fault"].as_str().unwrap(),
                row["points"],
                row["failing_points"]
            )
        })
        .collect()
}

#[test]
fn the_safe_incremental_protocol_holds_every_promise_at_every_point() {
    let report = sweep(&["--sinks", "append,idempotent,transactional"]);
    assert_eq!(report["state_backend"], "incremental");
    assert_eq!(
        figures(&report),
        [
            "append process-crash 73 0",
            "append power-loss 891 0",
            "append disk-error 37 0",
            "append sink-error 4 0",
            "append ack-lost 4 0",
            "append sink-unavailable 4 0",
            "idempotent process-crash 73 0",
            "idempotent power-loss 891 0",
            "idempotent disk-error 37 0",
            "idempotent sink-error 4 0",
            "idempotent ack-lost 4 0",
            "idempotent sink-unavailable 4 0",
            "transactional process-crash read_committed 89 0",
            "transactional process-crash read_uncommitted 89 0",
            "transactional power-loss read_committed 296 0",
            "transactional power-loss read_uncommitted 296 0",
            "transactional disk-error read_committed 41 0",
            "transactional disk-error read_uncommitted 41 0",
            "transactional sink-error read_committed 16 0",
            "transactional sink-error read_uncommitted 16 0",
            "transactional ack-lost read_committed 16 0",
            "transactional ack-lost read_uncommitted 16 0",
            "transactional sink-unavailable read_committed 16 0",
            "transactional sink-unavailable read_uncommitted 16 0",
        ]
    );
    // Nothing is lost or rolled back anywhere; the append sink only duplicates.
    for row in report["rows"].as_array().unwrap() {
        for figure in [
            "lost",
            "points_with_loss",
            "rolled_back",
            "failed_recoveries",
        ] {
            assert_eq!(row[figure], 0, "{row}");
        }
    }
    // Exactly-once on the idempotent sink, and the disk stays bounded: the manifest, its
    // chain and the sink, at every point.
    let bounded = sweep(&[
        "--sinks",
        "idempotent",
        "--expect",
        "exactly-once,bounded-disk",
    ]);
    let failing: Vec<u64> = bounded["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["failing_points"].as_u64().unwrap())
        .collect();
    assert_eq!(failing, [0, 0, 0, 0, 0, 0]);
}

#[test]
fn deleting_the_old_chain_before_the_new_manifest_is_caught() {
    let report = sweep(&[
        "--checkpoint-protocol",
        "delete-then-rename",
        "--faults",
        "process-crash,power-loss,disk-error",
    ]);
    assert_eq!(
        figures(&report),
        [
            "append process-crash 73 10",
            "append power-loss 389 65",
            "append disk-error 37 10",
            "idempotent process-crash 73 10",
            "idempotent power-loss 389 65",
            "idempotent disk-error 37 10",
        ]
    );
    let first = &report["rows"][0]["first_failure"];
    assert_eq!(first["step"], 35);
    assert_eq!(first["broken"][0], "no-rollback");
}

#[test]
fn a_manifest_naming_a_delta_never_fsynced_is_caught() {
    let report = sweep(&[
        "--checkpoint-protocol",
        "no-delta-fsync",
        "--faults",
        "process-crash,power-loss",
        "--power-loss-states-max",
        "16",
    ]);
    assert_eq!(
        figures(&report),
        [
            "append process-crash 70 0",
            "append power-loss 821 530",
            "idempotent process-crash 70 0",
            "idempotent power-loss 821 530",
        ]
    );
    // The first: a power loss right after the first manifest is durable (step 20, the
    // directory fsync after its rename), whose base never was: recovery rejects the
    // manifest and starts from event 0 (16 of the 821 states drawn at a step, seed 0).
    let first = &report["rows"][1]["first_failure"];
    assert_eq!(first["step"], 20);
    assert_eq!(first["crash_state"], 0);
    assert_eq!(first["broken"][0], "no-rollback");
    assert_eq!(report["rows"][1]["exhaustive"], false);
}

/// Fault-free, incremental checkpoints change what is on disk, never what the run emits:
/// the same observation (every record in sink order, final windows, dropped count, and no
/// stray file) as full checkpoints, on `keel gen` streams with random knobs, every sink.
#[test]
fn incremental_and_full_checkpoints_emit_the_same_records() {
    let mut cases = 0;
    for seed in 0..24_u64 {
        let gen = GenSpec {
            events: 50 + seed * 37,
            seed,
            out_of_orderness: (seed % 6) as i64,
            late_fraction: [0.0, 0.1, 0.3][(seed % 3) as usize],
            late_by_max: 1 + (seed as i64 * 7) % 60,
            value_max: 100,
            keys: 0,
        };
        let events = parse_events(&generate(&gen)).unwrap();
        let mut spec = ScenarioSpec {
            scenario: None,
            events: Some(format!("gen-{seed}.jsonl")),
            window: 1 + (seed as i64 * 5) % 17,
            out_of_orderness: (seed % 6) as i64,
            checkpoint_every: 1 + seed % 9,
            allowed_lateness: (seed % 4 == 3).then_some((seed % 7) as i64),
            ..scenario_defaults()
        };
        for sink in [
            SinkKind::Append,
            SinkKind::Idempotent,
            SinkKind::Transactional,
        ] {
            let observe = |spec: &ScenarioSpec| {
                let run_spec = spec.run_spec(&events, sink, FaultPlan::none()).unwrap();
                let result = run(&run_spec);
                (
                    Observation::of(&result, &run_spec.config),
                    result.final_state,
                )
            };
            spec.state_backend = StateBackend::Full;
            let full = observe(&spec);
            spec.state_backend = StateBackend::Incremental;
            let incremental = observe(&spec);
            assert_eq!(full, incremental, "seed {seed}, {sink}");
            assert!(full.0.stray_files.is_empty(), "seed {seed}, {sink}");
            cases += 1;
        }
    }
    assert_eq!(cases, 72);
}

/// ch04's knobs with the defaults of the command line.
fn scenario_defaults() -> ScenarioSpec {
    serde_json::from_value(serde_json::json!({
        "scenario": "ch04",
        "events": null,
        "window": 10,
        "out_of_orderness": 5,
        "checkpoint_every": 8,
        "event_interval_ms": 300,
        "restart_delay_ms": 500,
        "protocol": "safe",
        "key": "event-index",
        "transaction_timeout_ms": 60000,
        "seed": 0,
        "sector_size_bytes": 512
    }))
    .unwrap()
}
