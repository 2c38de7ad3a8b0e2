//! Sweeps a user can afford (issue 54): counts that never overflow or vanish on a stream
//! whose in-place checkpoints never sync (past 2^64 crash states at a step), and a budget
//! that stops a sweep where it says and resumes it there.

mod common;

use common::keel_stdout;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("keel-budget-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn keel(args: &[&str]) -> String {
    keel_stdout(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
}

/// The stream: 117 generated events, swept with W=5 D=7 K=8 in place.
fn stream_117(dir: &Path) -> Vec<String> {
    let events = dir.join("events.jsonl");
    let events = events.to_str().unwrap();
    keel(&["gen", "--events", "117", "--out", events]);
    [
        "--events",
        events,
        "--window",
        "5",
        "--out-of-orderness",
        "7",
        "--checkpoint-every",
        "8",
        "--checkpoint-protocol",
        "in-place",
    ]
    .map(str::to_string)
    .to_vec()
}

/// The keys a report may hold null under: an absent part (no sampled steps, no failure, no
/// view, no model mismatch, no crash state for a fault that is not a power loss), never a
/// count.
const ABSENT_PARTS: [&str; 6] = [
    "sampled",
    "first_failure",
    "view",
    "model_mismatch",
    "crash_state",
    "crash_state_class",
];

/// The paths of `value` that hold null under a key not in [`ABSENT_PARTS`].
fn null_counts(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                let here = format!("{path}.{key}");
                if field.is_null() && !ABSENT_PARTS.contains(&key.as_str()) {
                    found.push(here.clone());
                }
                null_counts(field, &here, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                null_counts(item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// Runs `keel args` (JSON out), checks that no count in it is null, and returns it.
fn check(args: &[String]) -> Value {
    let json: Value = serde_json::from_str(&keel_stdout(args)).unwrap();
    let mut found = Vec::new();
    null_counts(&json, "", &mut found);
    assert!(found.is_empty(), "keel {args:?}: null counts at {found:?}");
    json
}

/// A count as JSON holds it: a number up to 2^53, else a decimal string.
fn count(value: &Value) -> u128 {
    match value {
        Value::Number(n) => {
            let n = n.as_u64().expect("a count");
            assert!(n <= 1 << 53, "{n} past 2^53 is written as a string");
            u128::from(n)
        }
        Value::String(text) => {
            let n: u128 = text.parse().expect("a decimal count");
            assert!(n > 1 << 53, "{n} up to 2^53 is written as a number");
            n
        }
        other => panic!("not a count: {other}"),
    }
}

#[test]
fn no_count_is_null_in_any_report_of_the_in_place_117_event_stream() {
    let dir = scratch("counts");
    let stream = stream_117(&dir);
    let with = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = vec![extra[0].to_string()];
        args.extend(stream.iter().cloned());
        args.extend(extra[1..].iter().map(|a| a.to_string()));
        args
    };
    // `keel sites`: every step's crash states, past 2^64 on the last ones.
    for sink in ["append", "idempotent", "transactional"] {
        let sites = check(&with(&["sites", "--sink", sink, "--format", "json"]));
        let states: Vec<u128> = sites
            .as_array()
            .unwrap()
            .iter()
            .map(|site| count(&site["power_loss_states"]))
            .collect();
        assert!(
            states.iter().any(|&n| n > u128::from(u64::MAX)),
            "{sink}: no step past 2^64"
        );
    }
    // Sweeps (states and classes; each step sampled to one point, so that it is quick):
    // every row's total exact, past 2^64 on the power-loss rows.
    let sweep = [
        "sweep",
        "--sinks",
        "append,idempotent,transactional",
        "--faults",
        "power-loss,process-crash",
        "--power-loss-states-max",
        "1",
        "--format",
        "json",
        "-q",
    ];
    for points in ["states", "classes"] {
        let mut args = sweep.to_vec();
        args.extend(["--power-loss-points", points]);
        let report = check(&with(&args));
        for row in report["rows"].as_array().unwrap() {
            let total = count(&row["states_total"]);
            if row["fault"] == "power-loss" {
                assert!(total > u128::from(u64::MAX), "{points}: {row}");
                assert_eq!(row["exhaustive"], false);
            } else {
                assert_eq!(total, u128::from(n(&row["points"])), "{points}: {row}");
            }
        }
    }
    // Shards and their merge.
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let file = dir.join(format!("shard-{}.jsonl", &shard[..1]));
        let file = file.to_str().unwrap().to_string();
        let mut args = sweep[..sweep.len() - 3].to_vec();
        args.extend(["-q", "--shard", shard, "--out", &file]);
        keel_stdout(&with(&args));
        files.push(file);
    }
    let mut merge = vec!["merge".to_string()];
    merge.extend(files);
    merge.extend(["--format".to_string(), "json".to_string()]);
    let merged = check(&merge);
    let whole = check(&with(&sweep));
    assert_eq!(merged, whole);
    // `keel explore`.
    check(&with(&[
        "explore",
        "--sinks",
        "append,idempotent,transactional",
        "--seeds",
        "0..20",
        "--format",
        "json",
        "-q",
    ]));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `keel sweep` of the chapter's stream, its first part stopped by `--points-max` and its
/// rest run by the command the stop names, merged: the report of one uninterrupted sweep,
/// byte for byte, in every format; and the same of a shard stopped and resumed.
#[test]
fn a_sweep_stopped_by_its_budget_and_resumed_merges_to_the_uninterrupted_report() {
    let dir = scratch("resume");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let sweep = [
        "sweep",
        "--sinks",
        "append,transactional",
        "--faults",
        "process-crash,power-loss,sink-error",
        "--power-loss-states-max",
        "3",
        "-q",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        sweep.iter().chain(extra).map(|a| a.to_string()).collect()
    };
    let whole: Vec<String> = ["table", "json", "csv"]
        .iter()
        .map(|format| keel_stdout(&with(&["--format", format])))
        .collect();
    let merged = |files: &[String]| -> Vec<String> {
        ["table", "json", "csv"]
            .iter()
            .map(|format| {
                let mut args = vec!["merge".to_string()];
                args.extend(files.iter().cloned());
                args.extend(["--format".to_string(), format.to_string()]);
                keel_stdout(&args)
            })
            .collect()
    };
    // The report of the stopped run names the stop and the command that resumes it.
    let stopped = keel_stdout(&with(&["--points-max", "250"]));
    let resume = stopped
        .lines()
        .find_map(|line| line.strip_prefix("resume: "))
        .unwrap_or_else(|| panic!("no resume line: {stopped}"));
    assert!(
        stopped.contains("stopped by --points-max 250 after 250 of "),
        "{stopped}"
    );
    let report: Value = serde_json::from_str(&keel_stdout(&with(&[
        "--points-max",
        "250",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(report["stopped"]["points_run"], 250);
    for row in report["rows"].as_array().unwrap() {
        let left = n(&row["points_left"]);
        assert_eq!(
            row["exhaustive"] == true,
            left == 0 && row["sampled"].is_null(),
            "{row}"
        );
    }
    // Its points kept (`--points 0..`), then the rest as the resume line says.
    let first = path("first.jsonl");
    keel_stdout(&with(&[
        "--points",
        "0..",
        "--points-max",
        "250",
        "--out",
        &first,
    ]));
    let rest = path("rest.jsonl");
    let resume: Vec<String> = resume
        .replace("--out FILE", &format!("--out {rest}"))
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .chain(["-q".to_string()])
        .collect();
    assert!(resume.contains(&"--points".to_string()), "{resume:?}");
    keel_stdout(&resume);
    assert_eq!(merged(&[rest.clone(), first.clone()]), whole);
    // Alone, the stopped part does not merge, and says why.
    let alone = keel_scenarios::cli::execute(
        &<keel_scenarios::cli::Cli as clap::Parser>::try_parse_from(["keel", "merge", &first])
            .unwrap(),
    );
    let error = format!("{:?}", alone.expect_err("a part is not the sweep"));
    assert!(error.contains("stopped at point 250"), "{error}");
    // A shard stopped and resumed, with the other shard.
    let (zero, one, one_rest) = (path("0.jsonl"), path("1.jsonl"), path("1-rest.jsonl"));
    keel_stdout(&with(&["--shard", "0/2", "--out", &zero]));
    keel_stdout(&with(&[
        "--shard",
        "1/2",
        "--points-max",
        "40",
        "--out",
        &one,
    ]));
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&one)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let total = n(&header["total"]);
    let start = total / 2;
    keel_stdout(&with(&[
        "--shard",
        "1/2",
        "--points",
        &format!("{}..", start + 40),
        "--out",
        &one_rest,
    ]));
    assert_eq!(merged(&[one_rest, zero, one]), whole);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--fail-fast` on the in-place protocol, whose first power loss after a checkpoint write
/// rolls back: it stops at the end of the sweep's chunk (1,024 points) that holds the first
/// failing point, the same on one thread or two, with the failure's reproduce line; its part
/// kept and the rest resumed merge to the whole sweep's report.
#[test]
fn fail_fast_stops_after_the_chunk_of_the_first_failure_and_resumes() {
    let dir = scratch("fail-fast");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let mut sweep = vec!["sweep".to_string()];
    sweep.extend(stream_117(&dir));
    sweep.extend(
        [
            "--sinks",
            "append,idempotent",
            "--faults",
            "process-crash,power-loss",
            "--power-loss-states-max",
            "4",
            "-q",
        ]
        .map(str::to_string),
    );
    let with = |extra: &[&str]| -> Vec<String> {
        sweep
            .iter()
            .cloned()
            .chain(extra.iter().map(|a| a.to_string()))
            .collect()
    };
    let fast = keel_stdout(&with(&["--fail-fast", "--format", "json", "--jobs", "1"]));
    assert_eq!(
        keel_stdout(&with(&["--fail-fast", "--format", "json", "--jobs", "2"])),
        fast
    );
    let report: Value = serde_json::from_str(&fast).unwrap();
    let stopped = &report["stopped"];
    assert!(
        stopped["by"].as_str().unwrap().starts_with("--fail-fast"),
        "{stopped}"
    );
    assert_eq!(stopped["points_run"], 1024);
    assert!(n(&stopped["points_total"]) > 1024);
    let failed = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| !row["first_failure"].is_null())
        .expect("a failure stopped it");
    assert!(failed["first_failure"]["reproduce"]
        .as_str()
        .unwrap()
        .starts_with("keel run "));
    // Its part, kept, and the rest, as the resume command says: the whole sweep.
    let first = path("first.jsonl");
    keel_stdout(&with(&["--fail-fast", "--points", "0..", "--out", &first]));
    let rest = path("rest.jsonl");
    let resume: Vec<String> = stopped["resume"]
        .as_str()
        .unwrap()
        .replace("--out FILE", &format!("--out {rest}"))
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .chain(["-q".to_string()])
        .collect();
    keel_stdout(&resume);
    let merge: Vec<String> = ["merge", &first, &rest, "--format", "json"]
        .map(str::to_string)
        .to_vec();
    assert_eq!(
        keel_stdout(&merge),
        keel_stdout(&with(&["--format", "json"]))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn n(value: &Value) -> u64 {
    value.as_u64().unwrap()
}
