//! Allowed lateness (`--allowed-lateness L`, Flink's allowedLateness): exact records for a
//! hand-made stream at L = 0, L = 2 and unbounded, recovery dropping what the fault-free run
//! drops, and a sweep that stays exactly-once on the idempotent sink at every point.

use clap::Parser;
use keel_scenarios::cli::{execute, Cli};
use serde_json::{json, Value};
use std::path::PathBuf;

/// W = 10, D = 2: window 10 fires at event 1 (watermark 10); events 2 and 4 are late for
/// it, event 6 is late for window 20 (watermark 23).
const HAND_MADE: &str = "{\"ts\": 1, \"value\": 1}
{\"ts\": 12, \"value\": 2}
{\"ts\": 5, \"value\": 4}
{\"ts\": 14, \"value\": 8}
{\"ts\": 3, \"value\": 16}
{\"ts\": 25, \"value\": 32}
{\"ts\": 18, \"value\": 64}
";

fn events_file(name: &str, contents: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lateness-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.to_string_lossy().into_owned()
}

fn keel_json(args: &[&str]) -> Value {
    let mut argv = vec!["keel"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--format", "json"]);
    let cli = Cli::try_parse_from(&argv).expect("valid command line");
    let output = execute(&cli).expect("keel succeeds");
    assert_eq!(output.exit_code, 0, "keel {args:?}: {}", output.stdout);
    serde_json::from_str(&output.stdout).expect("one JSON object")
}

fn record(key: &str, window_end: i64, sum: i64, watermark: i64, kind: &str) -> Value {
    json!({"key": key, "window_end": window_end, "sum": sum, "watermark": watermark, "kind": kind})
}

/// The one helper: `keel run` on the hand-made stream with `extra` options; the sink, the
/// final windows and the count of dropped events must be exactly these, and the run must
/// agree with the independent model (a mismatch would fail the command).
fn check(extra: &[&str], sink: Value, final_windows: Value, dropped_late: u64) {
    let path = events_file("hand-made.jsonl", HAND_MADE);
    let mut args = vec![
        "run",
        "--events",
        &path,
        "--window",
        "10",
        "--out-of-orderness",
        "2",
        "--checkpoint-every",
        "3",
    ];
    args.extend_from_slice(extra);
    let report = keel_json(&args);
    assert_eq!(report["sink"], sink, "{extra:?}");
    assert_eq!(report["final_windows"], final_windows, "{extra:?}");
    assert_eq!(report["dropped_late"], dropped_late, "{extra:?}");
    assert_eq!(report["baseline_final_windows"], final_windows, "{extra:?}");
    assert!(report["oracle"]["model_mismatch"].is_null(), "{report:#}");
    assert_eq!(report["failures"], json!([]), "{extra:?}");
}

#[test]
fn the_hand_made_stream_under_l_0_l_2_and_unbounded() {
    let fire_10 = record("1:10", 10, 1, 10, "fire");
    let late_2 = record("2:10", 10, 5, 10, "late-update");
    let late_4 = record("4:10", 10, 21, 12, "late-update");
    let fire_20 = record("5:20", 20, 10, 23, "fire");
    let late_6 = record("6:20", 20, 74, 23, "late-update");
    let flush_30 = record("flush:30", 30, 32, 23, "flush");
    // L = 0: a window is purged as it fires; every later event for it is dropped.
    check(
        &["--allowed-lateness", "0"],
        json!([fire_10, fire_20, flush_30]),
        json!({"30": 32}),
        3,
    );
    // L = 2: event 2 is a late update (10 + 2 > watermark 10); window 10 is purged at
    // watermark 12 (event 3), so event 4 is dropped, and so is event 6 (20 + 2 <= 23).
    check(
        &["--allowed-lateness", "2"],
        json!([fire_10, late_2, fire_20, flush_30]),
        json!({"30": 32}),
        2,
    );
    // A lateness beyond every watermark: the unbounded run's records, nothing purged.
    let unbounded = json!([fire_10, late_2, late_4, fire_20, late_6, flush_30]);
    let every_window = json!({"10": 21, "20": 74, "30": 32});
    check(
        &["--allowed-lateness", "1000"],
        unbounded.clone(),
        every_window.clone(),
        0,
    );
    check(&[], unbounded, every_window, 0);
}

#[test]
fn a_recovered_run_drops_what_the_fault_free_run_drops() {
    // The checkpoint after event 2 holds dropped_late = 1 (event 2) at L = 0; the crash
    // after event 4 replays events 3 and 4 (event 4 dropped again) from it.
    let path = events_file("hand-made-crash.jsonl", HAND_MADE);
    for (lateness, dropped) in [("0", 3), ("2", 2)] {
        let report = keel_json(&[
            "run",
            "--events",
            &path,
            "--window",
            "10",
            "--out-of-orderness",
            "2",
            "--checkpoint-every",
            "3",
            "--allowed-lateness",
            lateness,
            "--sink",
            "idempotent",
            "--crash-after-event",
            "4",
        ]);
        assert_eq!(report["recovery"]["resume_from_index"], 3, "L = {lateness}");
        assert_eq!(report["dropped_late"], dropped, "L = {lateness}");
        assert_eq!(report["final_windows_match"], true, "L = {lateness}");
        assert_eq!(report["failures"], json!([]), "L = {lateness}");
        assert_eq!(
            report["config"]["allowed_lateness"],
            json!(lateness.parse::<i64>().unwrap())
        );
    }
}

#[test]
fn a_sweep_with_allowed_lateness_is_exactly_once_on_idempotent_at_every_point() {
    let stream = keel_scenarios::gen::generate(&keel_scenarios::gen::GenSpec {
        events: 40,
        seed: 7,
        out_of_orderness: 3,
        late_fraction: 0.25,
        late_by_max: 12,
        value_max: 9,
        keys: 0,
    });
    let path = events_file("gen-40.jsonl", &stream);
    let knobs = [
        "--events",
        &path,
        "--window",
        "5",
        "--out-of-orderness",
        "3",
        "--checkpoint-every",
        "4",
        "--allowed-lateness",
        "4",
    ];
    let mut run = vec!["run"];
    run.extend_from_slice(&knobs);
    let fault_free = keel_json(&run);
    assert_eq!(fault_free["dropped_late"], 3, "{fault_free:#}");
    let report = keel_json(&[
        "sweep",
        "--events",
        &path,
        "--window",
        "5",
        "--out-of-orderness",
        "3",
        "--checkpoint-every",
        "4",
        "--allowed-lateness",
        "4",
        "--sinks",
        "idempotent",
        "--quiet",
    ]);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{report:#}");
    for row in rows {
        assert!(row["points"].as_u64().unwrap() > 0, "{row:#}");
        for field in [
            "duplicates",
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
        ] {
            assert_eq!(row[field], 0, "{}: {field}", row["fault"]);
        }
        assert!(row["first_failure"].is_null(), "{row:#}");
    }
}

#[test]
fn a_saved_plan_carries_the_allowed_lateness_and_replays_alone() {
    let events = events_file("hand-made-plan.jsonl", HAND_MADE);
    let plan = events_file("lateness-plan.json", "");
    let run = keel_json(&[
        "run",
        "--events",
        &events,
        "--window",
        "10",
        "--out-of-orderness",
        "2",
        "--checkpoint-every",
        "3",
        "--allowed-lateness",
        "2",
        "--crash-after-event",
        "4",
        "--save-plan",
        &plan,
    ]);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved["spec"]["allowed_lateness"], 2, "{saved:#}");
    let replayed = keel_json(&["replay", "--plan", &plan]);
    assert_eq!(replayed["fingerprint"], run["fingerprint"]);
    assert!(run["reproduce"]
        .as_str()
        .unwrap()
        .contains("--allowed-lateness 2"));
}
