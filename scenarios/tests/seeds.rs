//! Seeds: swarm exploration, replay, shrinking, double faults, jobs, shards and exit codes.

use clap::Parser;
use keel_scenarios::cli::{execute, Cli, Output};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn keel(args: &[&str]) -> Output {
    let mut argv = vec!["keel"];
    argv.extend_from_slice(args);
    execute(&Cli::try_parse_from(&argv).expect("valid command line")).expect("keel succeeds")
}

fn json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend_from_slice(&["--format", "json"]);
    serde_json::from_str(&keel(&args).stdout).unwrap()
}

fn n(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not a number"))
}

fn tmp(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("seeds-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

/// The real binary: (exit code, stdout, stderr).
fn keel_bin(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn explore_safe_thousand_seeds() {
    let report = json(&["explore", "--seeds", "0..1000", "--quiet"]);
    let summary = report["summary"].as_array().unwrap();
    let append = &summary[0];
    let idempotent = &summary[1];
    assert_eq!(append["sink"], "append");
    assert_eq!(idempotent["sink"], "idempotent");
    assert_eq!(n(&idempotent["seeds"]), 1000);
    assert_eq!(n(&idempotent["exactly_once"]), 1000);
    assert_eq!(idempotent["exactly_once_rate"], "100.0%");
    assert!(n(&append["with_duplicates"]) > 0);
    for field in [
        "with_loss",
        "with_wrong",
        "with_corrupt",
        "rolled_back",
        "failed_recoveries",
        "failing",
    ] {
        assert_eq!(n(&append[field]), 0, "append {field}");
        assert_eq!(n(&idempotent[field]), 0, "idempotent {field}");
    }
    assert!(report["failing"].as_array().unwrap().is_empty());
    let table = keel(&["explore", "--seeds", "0..1000", "--summary-only", "--quiet"]).stdout;
    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, description => "keel explore --seeds 0..1000 --summary-only"}, {
        insta::assert_snapshot!("explore_safe_0_1000_summary", table);
    });
}

#[test]
fn a_losing_seed_shrinks_to_one_power_loss_that_replays_the_same_loss() {
    let protocol = ["--checkpoint-protocol", "checkpoint-before-sink-sync"];
    let mut args = vec![
        "explore",
        "--seeds",
        "0..200",
        "--faults",
        "process-crash,power-loss",
        "--quiet",
    ];
    args.extend_from_slice(&protocol);
    let report = json(&args);
    let losing = report["failing"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["outcome"].as_str().unwrap().contains("lost="))
        .expect("explore finds a losing seed");
    let shrunk = &report["shrunk"];
    assert_eq!(shrunk["property"], "no-loss");
    let faults = shrunk["plan"]["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{shrunk}");
    assert_eq!(faults[0]["fault"]["kind"], "power-loss");

    // `keel shrink` on the losing seed gives a single power loss too, and replaying the
    // shrunk plan shows the same loss.
    let seed = losing["seed"].to_string();
    let sink = losing["sink"].as_str().unwrap();
    let plan_path = tmp("shrunk.json");
    let mut shrink_args = vec![
        "shrink",
        "--seed",
        &seed,
        "--sink",
        sink,
        "--faults",
        "process-crash,power-loss",
        "--save-plan",
        &plan_path,
    ];
    shrink_args.extend_from_slice(&protocol);
    let shrunk = json(&shrink_args);
    assert_eq!(shrunk["property"], "no-loss");
    assert_eq!(shrunk["plan"]["faults"].as_array().unwrap().len(), 1);
    assert_eq!(shrunk["plan"]["faults"][0]["fault"]["kind"], "power-loss");
    let mut replay_args = vec![
        "replay", "--plan", &plan_path, "--sink", sink, "--seed", &seed,
    ];
    replay_args.extend_from_slice(&protocol);
    let replay = json(&replay_args);
    assert_eq!(replay["oracle"], shrunk["oracle"]);
    assert!(n(&replay["oracle"]["lost"]) > 0);
    assert_eq!(replay["fingerprint"], shrunk["fingerprint"]);
}

#[test]
fn jobs_do_not_change_a_byte() {
    for command in [
        vec![
            "explore",
            "--seeds",
            "0..300",
            "--checkpoint-protocol",
            "no-tail-repair",
            "--quiet",
        ],
        vec!["sweep", "--checkpoint-protocol", "in-place", "--quiet"],
    ] {
        let mut one = command.clone();
        one.extend_from_slice(&["--jobs", "1"]);
        let mut two = command.clone();
        two.extend_from_slice(&["--jobs", "2"]);
        assert_eq!(keel(&one), keel(&two), "{command:?}");
    }
}

#[test]
fn shards_merge_into_the_unsharded_report() {
    for (name, command) in [
        (
            "explore",
            vec![
                "explore",
                "--seeds",
                "0..120",
                "--checkpoint-protocol",
                "checkpoint-before-sink-sync",
                "--quiet",
            ],
        ),
        (
            "sweep",
            vec![
                "sweep",
                "--checkpoint-protocol",
                "no-tail-repair",
                "--quiet",
            ],
        ),
    ] {
        let whole = keel(&command);
        let mut files = Vec::new();
        for i in 0..3 {
            let mut args = command.clone();
            let shard = format!("{i}/3");
            args.extend_from_slice(&["--shard", &shard]);
            let path = tmp(&format!("{name}-{i}.jsonl"));
            std::fs::write(&path, keel(&args).stdout).unwrap();
            files.push(path);
        }
        // Any order of files.
        let mut merge = vec![
            "merge",
            files[2].as_str(),
            files[0].as_str(),
            files[1].as_str(),
        ];
        assert_eq!(keel(&merge), whole, "{name}");
        merge.pop();
        let (code, _, stderr) = keel_bin(&merge);
        assert_eq!(code, 2);
        assert!(stderr.contains("missing shard files: 1/3"), "{stderr}");
    }
}

#[test]
fn replay_gives_one_fingerprint_twice_and_checks_determinism() {
    let first = json(&["replay", "--seed", "7", "--sink", "append"]);
    let second = json(&["replay", "--seed", "7", "--sink", "append"]);
    assert_eq!(first["fingerprint"], second["fingerprint"]);
    assert_eq!(first["trace"], second["trace"]);
    let out = keel(&["replay", "--seed", "7", "--check-determinism"]);
    assert_eq!(out.exit_code, 0);
    assert!(
        out.stdout
            .contains("determinism: two runs, identical traces"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!(
        "fingerprint={}",
        first["fingerprint"].as_str().unwrap()
    )));
}

#[test]
fn double_faults_keep_the_safe_protocol_exactly_once_for_the_idempotent_sink() {
    let report = json(&[
        "sweep",
        "--depth",
        "2",
        "--faults",
        "process-crash,disk-error,ack-lost",
        "--quiet",
    ]);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 9);
    for row in rows {
        for field in [
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
        ] {
            assert_eq!(n(&row[field]), 0, "{row}");
        }
        if row["sink"] == "idempotent" {
            assert_eq!(n(&row["duplicates"]), 0, "{row}");
        }
        assert!(n(&row["points"]) > 0);
    }
    let crash_crash = rows
        .iter()
        .find(|r| r["sink"] == "append" && r["fault"] == "process-crash+process-crash")
        .unwrap();
    assert_eq!(n(&crash_crash["points"]), 2267);
}

#[test]
fn exit_codes_say_what_was_found() {
    // 0: the expectation holds.
    let (code, _, _) = keel_bin(&[
        "explore",
        "--seeds",
        "0..50",
        "--sinks",
        "idempotent",
        "--expect",
        "exactly-once",
        "--quiet",
    ]);
    assert_eq!(code, 0);
    // 1: a violation, printed with its reproduce command.
    let (code, stdout, _) = keel_bin(&[
        "explore",
        "--seeds",
        "0..1000",
        "--checkpoint-protocol",
        "checkpoint-before-sink-sync",
        "--expect",
        "no-loss",
        "--summary-only",
        "--no-shrink",
        "--quiet",
    ]);
    assert_eq!(code, 1);
    assert!(stdout.contains("VIOLATION of --expect no-loss"), "{stdout}");
    assert!(stdout.contains("reproduce: keel replay"), "{stdout}");
    let (code, stdout, _) = keel_bin(&["sweep", "--expect", "exactly-once", "--quiet"]);
    assert_eq!(code, 1, "the append sink duplicates");
    assert!(
        stdout.contains("VIOLATION of --expect exactly-once: append"),
        "{stdout}"
    );
    // 2: usage.
    let (code, _, stderr) = keel_bin(&["explore", "--seeds", "5..5"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("empty"), "{stderr}");
    let (code, _, stderr) = keel_bin(&["sweep", "--shard", "3/3"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("0 <= i < n"), "{stderr}");
}

#[test]
fn bad_plan_files_are_rejected_with_the_file_and_the_reason() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "garbage.json",
            "{not json",
            &["garbage.json", "not a fault plan"],
        ),
        (
            "unknown-kind.json",
            r#"{"faults": [{"step": 3, "fault": {"kind": "meteor"}}]}"#,
            &["unknown-kind.json", "meteor"],
        ),
        (
            "twice.json",
            r#"{"faults": [{"step": 3, "fault": {"kind": "disk-error"}}, {"step": 3, "fault": {"kind": "ack-lost"}}]}"#,
            &["twice.json", "more than one fault at step 3"],
        ),
        (
            "inapplicable.json",
            r#"{"faults": [{"step": 0, "fault": {"kind": "ack-lost"}}]}"#,
            &[
                "inapplicable.json",
                "did not take effect",
                "step 0 is disk.list",
            ],
        ),
        (
            "beyond.json",
            r#"{"faults": [{"step": 100000, "fault": {"kind": "process-crash", "at": "after"}}]}"#,
            &["beyond.json", "never reached step 100000"],
        ),
    ];
    for (name, contents, fragments) in cases {
        let path = tmp(name);
        std::fs::write(&path, contents).unwrap();
        let (code, stdout, stderr) = keel_bin(&["replay", "--plan", &path]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stdout.is_empty());
        for fragment in *fragments {
            assert!(
                stderr.contains(fragment),
                "{name}: stderr lacks {fragment:?}: {stderr}"
            );
        }
    }
    let (code, _, stderr) = keel_bin(&["replay", "--plan", "/no/such/plan.json"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read plan file /no/such/plan.json"),
        "{stderr}"
    );
}

#[test]
fn saved_plans_replay_byte_for_byte() {
    for (name, fault) in [
        ("after14.json", vec!["--crash-after-event", "14"]),
        ("kill2600.json", vec!["--crash-at-ms", "2600"]),
        (
            "power.json",
            vec![
                "--fault",
                "power-loss",
                "--at-step",
                "23",
                "--crash-state",
                "3",
            ],
        ),
    ] {
        let path = tmp(name);
        let mut args = vec!["run", "--sink", "idempotent", "--save-plan", path.as_str()];
        args.extend_from_slice(&fault);
        let ran = json(&args);
        let replayed = json(&["replay", "--sink", "idempotent", "--plan", &path]);
        assert_eq!(ran["fingerprint"], replayed["fingerprint"], "{name}");
        assert_eq!(ran["oracle"], replayed["oracle"], "{name}");
    }
}

#[test]
fn bench_runs_the_same_simulations_whatever_the_jobs() {
    let fingerprint = |jobs: &str| {
        let out = keel(&["bench", "--seeds", "0..50", "--quiet", "--jobs", jobs]).stdout;
        assert!(out.contains("runs=150 "), "{out}");
        out.lines()
            .find(|l| l.starts_with("fingerprint="))
            .unwrap()
            .to_string()
    };
    assert_eq!(fingerprint("1"), fingerprint("2"));
}
