//! The chapter-04 figures, exactly: `keel run` against every number the chapter prints.

use clap::Parser;
use keel_scenarios::cli::{execute, Cli};
use serde_json::{json, Value};

/// Runs `keel run <args> --format json` in-process and returns the report.
fn run_json(args: &[&str]) -> Value {
    let mut argv = vec!["keel", "run", "--format", "json"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(&argv).expect("valid command line");
    let output = execute(&cli).expect("keel run succeeds").stdout;
    serde_json::from_str(&output).expect("keel run --format json prints one JSON object")
}

fn run_text(args: &[&str]) -> String {
    let mut argv = vec!["keel", "run"];
    argv.extend_from_slice(args);
    execute(&Cli::try_parse_from(&argv).unwrap())
        .unwrap()
        .stdout
}

/// Asserts that every field of `expected` is in `actual` with the same value (recursively
/// for objects; arrays and scalars compare whole).
fn assert_subset(actual: &Value, expected: &Value, path: &str) {
    match expected {
        Value::Object(fields) => {
            for (name, want) in fields {
                let got = actual
                    .get(name)
                    .unwrap_or_else(|| panic!("{path}.{name} is missing in {actual:#}"));
                assert_subset(got, want, &format!("{path}.{name}"));
            }
        }
        _ => assert_eq!(actual, expected, "at {path}"),
    }
}

/// The one helper of this file: run with `args`, check the figures in `expected`.
fn check(args: &[&str], expected: Value) {
    let report = run_json(args);
    assert_subset(&report, &expected, "report");
}

fn record(key: &str, window_end: i64, sum: i64, watermark: i64, kind: &str) -> Value {
    json!({"key": key, "window_end": window_end, "sum": sum, "watermark": watermark, "kind": kind})
}

fn baseline_sink() -> Value {
    json!([
        record("13:10", 10, 55, 10, "fire"),
        record("24:20", 20, 138, 21, "fire"),
        record("25:20", 20, 155, 21, "late-update"),
        record("flush:30", 30, 255, 24, "flush"),
    ])
}

fn baseline_windows() -> Value {
    json!({"10": 55, "20": 155, "30": 255})
}

#[test]
fn figure_1_baseline() {
    check(
        &[],
        json!({
            "processed_upto_index": 30,
            "written": 4,
            "final_windows": baseline_windows(),
            "sink": baseline_sink(),
            "tally": {"total_records": 4, "unique_keys": 4, "duplicates": 0, "lost": 0},
        }),
    );
    let report = run_json(&[]);
    assert!(report.get("crash").is_none());
    assert!(report.get("recovery").is_none());
}

#[test]
fn figure_2_crash_after_event_14_append_sink() {
    let mut sink = vec![record("13:10", 10, 55, 10, "fire")];
    sink.extend(baseline_sink().as_array().unwrap().iter().cloned());
    check(
        &[
            "--checkpoint-every",
            "8",
            "--sink",
            "append",
            "--crash-after-event",
            "14",
        ],
        json!({
            "crash": {
                "after_event": 14,
                "written": 1,
                "checkpoint": {"index": 8, "max_ts": 9, "windows": {"10": 40}},
            },
            "recovery": {"resume_from_index": 8, "watermark": 4, "written": 4, "skipped": 0},
            "tally": {"total_records": 5, "unique_keys": 4, "duplicates": 1, "lost": 0},
            "duplicated_keys": [{"key": "13:10", "count": 2}],
            "sink": sink,
            "final_windows": baseline_windows(),
            "baseline_final_windows": baseline_windows(),
            "final_windows_match": true,
        }),
    );
}

#[test]
fn figure_3_crash_after_event_14_idempotent_sink() {
    check(
        &["--sink", "idempotent", "--crash-after-event", "14"],
        json!({
            "crash": {
                "after_event": 14,
                "written": 1,
                "checkpoint": {"index": 8, "max_ts": 9, "windows": {"10": 40}},
            },
            "recovery": {"resume_from_index": 8, "watermark": 4, "written": 3, "skipped": 1},
            "tally": {"total_records": 4, "unique_keys": 4, "duplicates": 0, "lost": 0},
            "duplicated_keys": [],
            "sink": baseline_sink(),
            "final_windows_match": true,
        }),
    );
}

#[test]
fn figure_4_checkpoint_every_3_removes_the_duplicate() {
    check(
        &["--checkpoint-every", "3", "--crash-after-event", "14"],
        json!({
            "crash": {"after_event": 14, "written": 1, "checkpoint": {"index": 15}},
            "recovery": {"resume_from_index": 15, "watermark": 10, "written": 3, "skipped": 0},
            "tally": {"total_records": 4, "unique_keys": 4, "duplicates": 0, "lost": 0},
            "sink": baseline_sink(),
            "final_windows_match": true,
        }),
    );
}

#[test]
fn figure_5_kill_after_2600_ms() {
    check(
        &["--event-interval-ms", "300", "--crash-at-ms", "2600"],
        json!({
            "crash": {
                "after_event": 8,
                "at_ms": 2600,
                "written": 0,
                "checkpoint": {"index": 8, "max_ts": 9, "windows": {"10": 40}},
            },
            "recovery": {"resume_from_index": 8, "watermark": 4, "written": 4, "skipped": 0},
            "processed_upto_index": 30,
            "written": 4,
            "final_windows": baseline_windows(),
            "baseline_final_windows": baseline_windows(),
            "final_windows_match": true,
            "tally": {"total_records": 4, "duplicates": 0, "lost": 0},
        }),
    );
}

#[test]
fn a_crash_before_any_checkpoint_recovers_from_scratch() {
    check(
        &["--crash-after-event", "3"],
        json!({
            "crash": {"after_event": 3, "written": 0, "checkpoint": null},
            "recovery": {"resume_from_index": 0, "watermark": null, "written": 4},
            "tally": {"total_records": 4, "duplicates": 0, "lost": 0},
            "final_windows_match": true,
        }),
    );
}

#[test]
fn a_crash_after_the_last_event_replays_from_the_last_checkpoint() {
    // Event 29 is the last: the crash comes before the end of input is read and flushed.
    check(
        &["--crash-after-event", "29"],
        json!({
            "crash": {"after_event": 29, "written": 3, "checkpoint": {"index": 24}},
            "recovery": {"resume_from_index": 24, "watermark": 19, "written": 3},
            "tally": {"total_records": 6, "unique_keys": 4, "duplicates": 2, "lost": 0},
            "final_windows_match": true,
        }),
    );
}

/// Snapshots of the text output: the chapter's lines, byte for byte, fingerprints included.
#[test]
fn text_output_snapshots() {
    let cases: &[(&str, &[&str])] = &[
        ("run_baseline", &[]),
        ("run_crash_after_14_append", &["--crash-after-event", "14"]),
        (
            "run_crash_after_14_idempotent",
            &["--crash-after-event", "14", "--sink", "idempotent"],
        ),
        (
            "run_crash_after_14_every_3",
            &["--crash-after-event", "14", "--checkpoint-every", "3"],
        ),
        ("run_kill_at_2600ms", &["--crash-at-ms", "2600"]),
    ];
    for (name, args) in cases {
        insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, description => format!("keel run {}", args.join(" "))}, {
            insta::assert_snapshot!(*name, run_text(args));
        });
    }
}

/// The JSON report of the chapter's crash, whole: its field names are an interface.
#[test]
fn json_output_snapshot() {
    let output = execute(
        &Cli::try_parse_from([
            "keel",
            "run",
            "--crash-after-event",
            "14",
            "--format",
            "json",
        ])
        .unwrap(),
    )
    .unwrap()
    .stdout;
    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("run_crash_after_14_append_json", output);
    });
}
