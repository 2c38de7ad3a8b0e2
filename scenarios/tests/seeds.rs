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
    // The plan file carries the run (protocol, sink, seed): --plan alone replays it.
    let replay = json(&["replay", "--plan", &plan_path]);
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
        // Sampled steps included: 9 steps have more than 500 crash states.
        vec![
            "sweep",
            "--checkpoint-protocol",
            "in-place",
            "--power-loss-states-max",
            "500",
            "--quiet",
        ],
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
        // Sampled steps: the shards' points carry what the totals and the mark need.
        (
            "sampled-sweep",
            vec![
                "sweep",
                "--checkpoint-protocol",
                "in-place",
                "--sinks",
                "idempotent",
                "--faults",
                "power-loss",
                "--power-loss-states-max",
                "50",
                "--quiet",
            ],
        ),
    ] {
        let whole = keel(&command);
        if name == "sampled-sweep" {
            assert!(
                whole.stdout.contains(
                    "* sampled idempotent / power-loss: 1,300 of 77,472 crash states at 26 steps were drawn with seed 0 (--power-loss-states-max 50)"
                ),
                "{}",
                whole.stdout
            );
        }
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

/// The shards of a depth-2 sweep given `--counts FILE`: the first writes the count of pairs,
/// the others read it instead of counting, and each prints the very bytes it prints without
/// it. A file of another sweep, an edited one, one that is not a counts file, and `--counts`
/// at depth 1 are refused with the file and the reason, exit 2.
#[test]
fn shards_given_a_counts_file_count_once_and_print_what_they_print_without() {
    let sweep = [
        "sweep",
        "--depth",
        "2",
        "--faults",
        "process-crash,power-loss",
        "--power-loss-points",
        "classes",
        "--quiet",
    ];
    let counts = tmp("counts.json");
    let _ = std::fs::remove_file(&counts);
    for i in 0..3 {
        let shard = format!("{i}/3");
        let plain = with(&sweep, &["--shard", &shard]);
        let counted = with(&plain, &["--counts", &counts]);
        let exists = std::path::Path::new(&counts).exists();
        assert_eq!(exists, i > 0, "shard {i}");
        assert_eq!(keel(&counted).stdout, keel(&plain).stdout, "shard {i}");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&counts).unwrap()).unwrap();
        // Both sinks, each first kind: a row of first faults each.
        assert_eq!(file["counts"]["rows"].as_array().unwrap().len(), 4);
    }
    let refused = |args: &[&str], why: &str| {
        let (code, stdout, stderr) = keel_bin(args);
        assert_eq!(code, 2, "{args:?}: {stdout}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    };
    let with_counts = with(&sweep, &["--shard", "1/3", "--counts", &counts]);
    refused(
        &with(&with_counts, &["--sinks", "idempotent"]),
        "counted for another sweep",
    );
    refused(
        &with(&with_counts, &["--checkpoint-every", "5"]),
        "counted for another scenario or other options",
    );
    let text = std::fs::read_to_string(&counts).unwrap();
    let edited = tmp("counts-edited.json");
    let mut file: Value = serde_json::from_str(&text).unwrap();
    let first = &mut file["counts"]["rows"][0][0][0];
    *first = Value::from(n(first) + 1);
    std::fs::write(&edited, file.to_string()).unwrap();
    let edited_args = with(&sweep, &["--shard", "1/3", "--counts", &edited]);
    refused(&edited_args, "do not match their digest");
    std::fs::write(&edited, "{\"counts\": 3}").unwrap();
    refused(&edited_args, "not a counts file");
    refused(
        &["sweep", "--counts", &counts, "--quiet"],
        "--counts keeps a depth-2 sweep's count of pairs: it needs --depth 2",
    );
}

/// `--summary-only` tallies the seeds as they finish and keeps no row: its JSON report
/// holds none, and the rest of it (summary, failing seeds and their reproduce commands) is
/// the full report's, as is a merge of its shards with `--summary-only`.
#[test]
fn a_summary_only_exploration_is_the_full_report_without_its_rows() {
    let command = [
        "explore",
        "--seeds",
        "0..300",
        "--expect",
        "exactly-once",
        "--no-shrink",
        "--quiet",
        "--format",
        "json",
    ];
    let parse = |out: Output| -> Value {
        assert_eq!(out.exit_code, 1, "append breaks exactly-once");
        serde_json::from_str(&out.stdout).unwrap()
    };
    let full = parse(keel(&command));
    assert_eq!(full["rows"].as_array().unwrap().len(), 600);
    assert_eq!(full["failing"].as_array().unwrap().len(), 95);
    assert_eq!(n(&full["summary"][0]["with_duplicates"]), 95);
    assert_eq!(n(&full["summary"][1]["exactly_once"]), 300);
    let mut summary_only = command.to_vec();
    summary_only.push("--summary-only");
    let summary = parse(keel(&summary_only));
    let mut without_rows = full.clone();
    without_rows["rows"] = Value::Array(Vec::new());
    assert_eq!(summary, without_rows);
    let mut files = Vec::new();
    for i in 0..2 {
        let shard = format!("{i}/2");
        let args = [
            "explore",
            "--seeds",
            "0..300",
            "--expect",
            "exactly-once",
            "--quiet",
            "--shard",
            &shard,
        ];
        let path = tmp(&format!("summary-only-{i}.jsonl"));
        std::fs::write(&path, keel(&args).stdout).unwrap();
        files.push(path);
    }
    let merged = parse(keel(&[
        "merge",
        &files[1],
        &files[0],
        "--summary-only",
        "--no-shrink",
        "--format",
        "json",
    ]));
    assert_eq!(merged, without_rows);
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
    // 2,394: the two first crashes that fall between a checkpoint's rename and its cleanup
    // are followed by a recovery that removes the subsumed checkpoint, one step more each;
    // a recovery that finds the sink syncs it and the directory (2,269 before it did); and
    // one that finds a `.tmp` (a first crash between its create and its rename) removes it
    // (2,385 before it did).
    assert_eq!(n(&crash_crash["points"]), 2394);
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
    // The violation's reproduce command is judged as the sweep was, so it fails too.
    let violation = stdout.split("VIOLATION").nth(1).unwrap();
    let reproduce = violation
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: keel "))
        .unwrap();
    assert!(reproduce.ends_with(" --expect exactly-once"), "{reproduce}");
    let args: Vec<&str> = reproduce.split_whitespace().collect();
    let (code, _, _) = keel_bin(&args);
    assert_eq!(code, 1, "keel {reproduce}");
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
        let out = keel(&[
            "bench",
            "--seeds",
            "0..50",
            "--quiet",
            "--jobs",
            jobs,
            "--real-points",
            "0",
        ])
        .stdout;
        assert!(out.contains("runs=150 "), "{out}");
        out.lines()
            .find(|l| l.starts_with("fingerprint="))
            .unwrap()
            .to_string()
    };
    assert_eq!(fingerprint("1"), fingerprint("2"));
}

/// `args` then `extra`.
fn with<'a>(args: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    [args, extra].concat()
}

/// `keel <args> --format json` through the real binary: exit code and the parsed output.
fn json_bin(args: &[&str]) -> (i32, Value) {
    let mut args = args.to_vec();
    args.extend_from_slice(&["--format", "json"]);
    let (code, stdout, stderr) = keel_bin(&args);
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("keel {args:?} printed no JSON ({e}): {stdout}{stderr}"));
    (code, value)
}

#[test]
fn a_saved_plan_carries_its_run_and_replays_alone() {
    let path = tmp("self-contained.json");
    let knobs = [
        "--checkpoint-protocol",
        "checkpoint-before-sink-sync",
        "--sink",
        "idempotent",
        "--checkpoint-every",
        "5",
    ];
    let mut args = vec!["run"];
    args.extend_from_slice(&knobs);
    args.extend_from_slice(&[
        "--fault",
        "power-loss",
        "--at-step",
        "35",
        "--crash-state",
        "18",
        "--save-plan",
        &path,
    ]);
    let (code, ran) = json_bin(&args);
    assert_eq!(code, 0);
    assert!(n(&ran["oracle"]["lost"]) > 0, "{ran}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["spec"]["scenario"], "ch04");
    assert_eq!(saved["spec"]["protocol"], "checkpoint-before-sink-sync");
    assert_eq!(saved["spec"]["checkpoint_every"], 5);
    assert_eq!(saved["sink"], "idempotent");
    assert_eq!(
        saved["faults"],
        serde_json::json!([{"step": 35, "fault": {"kind": "power-loss", "at": "after", "state": 18}}])
    );

    // --plan alone: the same run, fingerprint and verdict.
    let (code, replayed) = json_bin(&["replay", "--plan", &path]);
    assert_eq!(code, 0);
    assert_eq!(replayed["fingerprint"], ran["fingerprint"]);
    assert_eq!(replayed["oracle"], ran["oracle"]);
    assert_eq!(replayed["failures"], ran["failures"]);
    assert_eq!(replayed["protocol"], "checkpoint-before-sink-sync");
    assert_eq!(replayed["sink"], "idempotent");
    // Options that agree with the plan are fine; options that differ are an error.
    let mut agreeing = vec!["replay", "--plan", path.as_str()];
    agreeing.extend_from_slice(&knobs);
    assert_eq!(json_bin(&agreeing).1["fingerprint"], ran["fingerprint"]);
    let (code, stdout, stderr) = keel_bin(&[
        "replay",
        "--plan",
        &path,
        "--checkpoint-every",
        "8",
        "--sink",
        "append",
    ]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        format!(
            "error: {path} records the run it was saved from, and --checkpoint-every 8 (the plan's: 5), --sink append (the plan's: idempotent) differ: drop the options to replay the plan as saved (or edit the file to change the run)\n"
        )
    );
    // The same plan with faults only runs on the options given (here the defaults).
    let faults_only = tmp("faults-only.json");
    std::fs::write(
        &faults_only,
        serde_json::json!({"faults": saved["faults"]}).to_string(),
    )
    .unwrap();
    assert_eq!(
        keel_bin(&["replay", "--plan", &faults_only]),
        (
            2,
            String::new(),
            format!(
                "error: {faults_only}: crash state 18 does not exist at step 35: its crash states are 0..=1\n"
            )
        ),
        "on the default knobs, step 35 has 2 crash states"
    );
    let mut with_options = vec!["replay", "--plan", faults_only.as_str()];
    with_options.extend_from_slice(&knobs);
    assert_eq!(json_bin(&with_options).1["fingerprint"], ran["fingerprint"]);

    // The view of the transactional sink is part of the run.
    let view_path = tmp("view.json");
    let (_, ran) = json_bin(&[
        "run",
        "--sink",
        "transactional",
        "--view",
        "read_uncommitted",
        "--crash-after-event",
        "14",
        "--save-plan",
        &view_path,
    ]);
    let (_, replayed) = json_bin(&["replay", "--plan", &view_path]);
    assert_eq!(replayed["view"], "read_uncommitted");
    assert_eq!(replayed["oracle"], ran["oracle"]);
    assert_eq!(replayed["fingerprint"], ran["fingerprint"]);
}

/// A saved plan and a shard name their events by digest: the same plan on an events file
/// that changed since is refused with both digests (exit 2), as are shards of two event
/// files given to one merge; the two files' runs have two fingerprints.
#[test]
fn a_plan_or_a_shard_of_other_events_is_refused_with_both_digests() {
    use keel_engine::Event;
    use keel_scenarios::catalogue::events_digest;
    let events = tmp("changing.jsonl");
    let write = |value: i64| {
        std::fs::write(
            &events,
            format!("{{\"ts\":1,\"value\":{value}}}\n{{\"ts\":2,\"value\":2}}\n"),
        )
        .unwrap();
        events_digest(&[Event { ts: 1, value }, Event { ts: 2, value: 2 }]).to_string()
    };
    let before = write(1);
    let plan = tmp("changing-plan.json");
    let shard = |index: &str| {
        let out = tmp(&format!("changing-shard-{}.jsonl", &index[..1]));
        let args = [
            "sweep", "--events", &events, "--shard", index, "--out", &out,
        ];
        let (code, _, stderr) = keel_bin(&args);
        assert_eq!(code, 0, "{stderr}");
        out
    };
    let run = [
        "run",
        "--events",
        events.as_str(),
        "--crash-after-event",
        "1",
    ];
    let (code, ran) = json_bin(&with(&run, &["--save-plan", &plan]));
    assert_eq!(code, 0);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved["spec"]["events_digest"], before.as_str());
    assert_eq!(
        json_bin(&["replay", "--plan", &plan]).1["fingerprint"],
        ran["fingerprint"]
    );
    let first_shard = shard("0/2");

    let after = write(100);
    assert_ne!(json_bin(&run).1["fingerprint"], ran["fingerprint"]);
    assert_eq!(
        keel_bin(&["replay", "--plan", &plan]),
        (
            2,
            String::new(),
            format!(
                "error: {plan}: the events file {events} changed since it was recorded here: recorded events digest {before}, events digest now {after} (give back the events it was recorded with, or run again on these)\n"
            )
        )
    );
    let second_shard = shard("1/2");
    assert_eq!(
        keel_bin(&["merge", &first_shard, &second_shard]),
        (
            2,
            String::new(),
            format!(
                "error: {second_shard} is a shard of a run on other events than {first_shard} (events digest {after} against {before})\n"
            )
        )
    );
}

#[test]
fn a_saved_plan_holds_the_crash_states_that_ran() {
    let mut power_losses = 0;
    for seed in 0..12 {
        let seed = seed.to_string();
        let path = tmp(&format!("seed-{seed}.json"));
        let (_, replay) = json_bin(&["replay", "--seed", &seed, "--save-plan", &path]);
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved["faults"], replay["injected"]["faults"], "seed {seed}");
        power_losses += saved["faults"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["fault"]["kind"] == "power-loss")
            .count();
        let (_, again) = json_bin(&["replay", "--plan", &path]);
        assert_eq!(again["fingerprint"], replay["fingerprint"], "seed {seed}");
        assert_eq!(again["oracle"], replay["oracle"], "seed {seed}");
        // The trace names the state that ran, not the 64-bit number the seed drew.
        for fault in saved["faults"].as_array().unwrap() {
            if fault["fault"]["kind"] == "power-loss" {
                let (step, at, state) = (
                    &fault["step"],
                    fault["fault"]["at"].as_str().unwrap(),
                    &fault["fault"]["state"],
                );
                let prefix = format!("step {step} ");
                let marked = format!("!power-loss {at} state {state}");
                assert!(
                    replay["trace"].as_array().unwrap().iter().any(|line| {
                        let line = line.as_str().unwrap();
                        line.starts_with(&prefix) && line.ends_with(&marked)
                    }),
                    "seed {seed}: no trace line {prefix}... {marked}"
                );
            }
        }
    }
    assert!(power_losses > 0, "no seed drew a power loss");

    // A plan file, like --crash-state, names a state that exists (step 13 has 12).
    let path = tmp("no-such-state.json");
    std::fs::write(
        &path,
        r#"{"faults": [{"step": 13, "fault": {"kind": "power-loss", "at": "after", "state": 15}}]}"#,
    )
    .unwrap();
    assert_eq!(
        keel_bin(&["replay", "--plan", &path]),
        (
            2,
            String::new(),
            format!(
                "error: {path}: crash state 15 does not exist at step 13: its crash states are 0..=11\n"
            )
        )
    );
    assert_eq!(
        keel_bin(&[
            "run",
            "--fault",
            "power-loss",
            "--at-step",
            "13",
            "--crash-state",
            "15"
        ]),
        (
            2,
            String::new(),
            "error: --crash-state 15 does not exist at step 13: its crash states are 0..=11\n"
                .to_string()
        )
    );
}

#[test]
fn every_json_report_is_json() {
    let explore_shards: Vec<String> = (0..2)
        .map(|i| {
            let shard = format!("{i}/2");
            let (code, stdout, _) = keel_bin(&[
                "explore",
                "--seeds",
                "0..40",
                "--checkpoint-protocol",
                "checkpoint-before-sink-sync",
                "--shard",
                &shard,
                "--quiet",
            ]);
            assert_eq!(code, 0);
            let path = tmp(&format!("json-explore-{i}.jsonl"));
            std::fs::write(&path, stdout).unwrap();
            path
        })
        .collect();
    let (_, sweep_shard, _) = keel_bin(&[
        "sweep",
        "--faults",
        "process-crash",
        "--shard",
        "0/1",
        "--quiet",
    ]);
    let sweep_shard_path = tmp("json-sweep-0.jsonl");
    std::fs::write(&sweep_shard_path, sweep_shard).unwrap();
    let unsafe_protocol = ["--checkpoint-protocol", "checkpoint-before-sink-sync"];
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["run"], 0),
        (vec!["run", "--crash-after-event", "14", "--trace"], 0),
        (vec!["sites"], 0),
        (vec!["sweep", "--faults", "process-crash", "--quiet"], 0),
        (
            with(
                &[
                    "sweep",
                    "--faults",
                    "power-loss",
                    "--expect",
                    "no-loss",
                    "--quiet",
                ],
                &unsafe_protocol,
            ),
            1,
        ),
        (vec!["explore", "--seeds", "0..20", "--quiet"], 0),
        (
            with(
                &[
                    "explore",
                    "--seeds",
                    "430..440",
                    "--sinks",
                    "idempotent",
                    "--expect",
                    "no-loss",
                    "--quiet",
                ],
                &unsafe_protocol,
            ),
            1,
        ),
        (vec!["replay", "--seed", "4"], 0),
        (vec!["replay", "--seed", "4", "--check-determinism"], 0),
        (vec!["shrink", "--seed", "4"], 0),
        (
            with(
                &["shrink", "--seed", "435", "--sink", "idempotent"],
                &unsafe_protocol,
            ),
            0,
        ),
        // The same plan breaks no-loss: asked for with --expect, the rule of every command
        // applies (exit 1).
        (
            with(
                &[
                    "shrink",
                    "--seed",
                    "435",
                    "--sink",
                    "idempotent",
                    "--expect",
                    "no-loss",
                ],
                &unsafe_protocol,
            ),
            1,
        ),
        (
            vec![
                "merge",
                explore_shards[0].as_str(),
                explore_shards[1].as_str(),
                "--summary-only",
            ],
            0,
        ),
        (vec!["merge", sweep_shard_path.as_str()], 0),
    ];
    for (args, expected_code) in cases {
        let (code, report) = json_bin(&args);
        assert_eq!(code, expected_code, "keel {args:?}: {report}");
        assert!(
            report.is_object() || report.is_array(),
            "keel {args:?}: {report}"
        );
    }
    let (_, nothing) = json_bin(&["shrink", "--seed", "4"]);
    assert_eq!(nothing["shrunk"], false, "{nothing}");
    let (_, checked) = json_bin(&["replay", "--seed", "4", "--check-determinism"]);
    assert_eq!(checked["determinism"]["identical"], true);
    let (_, traced) = json_bin(&["run", "--crash-after-event", "14", "--trace"]);
    assert!(!traced["trace"].as_array().unwrap().is_empty());
}
