//! `keel sweep --power-loss-points classes` against a sweep of every crash state: where the
//! states sweep is exhaustive, the classes stand for exactly its states, and the states
//! with duplicates, with loss and failing are exactly its points with them, outcome for
//! outcome (the same distinct outcomes); and the class sweep prints the same report with
//! `--naive`. On ch04 under every protocol and file-system profile, with processing-time
//! keys, on random streams with incremental checkpoints, and at depth 2 (classes split by
//! tail: whether the sink file comes back with bytes after its kept lines) on random streams.

mod common;

use clap::Parser;
#[cfg(feature = "long-tests")]
use common::PROTOCOLS;
use common::{keel_stdout, random_stream};
use keel_scenarios::cli::{execute, Cli};
use serde_json::Value;
use std::path::PathBuf;

fn keel(args: &[String]) -> String {
    keel_stdout(args)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The one helper: the power-loss sweep `args` describe, of states and of classes (by
/// default and `--naive`, the same report). Every row of states must be exhaustive, and its
/// row of classes must stand for the same states with the same figures. Returns the rows of
/// states and of classes.
fn check(args: &[String]) -> (Vec<Value>, Vec<Value>) {
    let mut sweep = strings(&[
        "sweep",
        "--quiet",
        "--format",
        "json",
        "--faults",
        "power-loss",
    ]);
    sweep.extend_from_slice(args);
    let states: Value = serde_json::from_str(&keel(&sweep)).unwrap();
    sweep.extend(strings(&["--power-loss-points", "classes"]));
    let classes_text = keel(&sweep);
    sweep.push("--naive".to_string());
    let naive = keel(&sweep);
    assert!(
        classes_text == naive,
        "{args:?}:\n{classes_text}\n---- naive:\n{naive}"
    );
    let classes: Value = serde_json::from_str(&classes_text).unwrap();
    let states = states["rows"].as_array().unwrap().clone();
    let classes = classes["rows"].as_array().unwrap().clone();
    assert_eq!(states.len(), classes.len(), "{args:?}");
    for (state, class) in states.iter().zip(&classes) {
        let what = format!("{args:?} {} {}", state["sink"], state["view"]);
        if class["crash_states"].is_null() {
            // No power loss in the row (process crashes at depth 2): the same pairs.
            assert_eq!(state, class, "{what}");
            continue;
        }
        assert_eq!(
            state["exhaustive"], true,
            "{what}: the states sweep ran them all"
        );
        assert_eq!(class["exhaustive"], true, "{what}");
        let counted = &class["crash_states"];
        let decimal = |v: &Value| v.as_u64().unwrap().to_string();
        assert_eq!(counted["states"], decimal(&state["states_total"]), "{what}");
        assert_eq!(
            counted["with_duplicates"],
            decimal(&state["points_with_duplicates"]),
            "{what}"
        );
        assert_eq!(
            counted["with_loss"],
            decimal(&state["points_with_loss"]),
            "{what}"
        );
        assert_eq!(
            counted["failing"],
            decimal(&state["failing_points"]),
            "{what}"
        );
        assert_eq!(
            state["distinct_outcomes"], class["distinct_outcomes"],
            "{what}: a class holds one outcome"
        );
        assert!(
            class["points"].as_u64() <= state["points"].as_u64(),
            "{what}"
        );
    }
    (states, classes)
}

#[cfg(feature = "long-tests")]
fn points(rows: &[Value]) -> Vec<u64> {
    rows.iter()
        .map(|row| row["points"].as_u64().unwrap())
        .collect()
}

#[cfg(feature = "long-tests")]
#[test]
fn long_ch04_classes_stand_for_every_state_under_every_protocol() {
    // The chapter's stream: 483 crash states at its power-loss steps, 143 of them with
    // duplicates on the append sink; 140 classes (the sink file's whole lines kept, the
    // temporary checkpoint's bytes unread).
    let (states, classes) = check(&strings(&["--sinks", "append,idempotent"]));
    assert_eq!(points(&states), [483, 483]);
    assert_eq!(points(&classes), [140, 140]);
    assert_eq!(classes[0]["crash_states"]["with_duplicates"], "143");
    for protocol in PROTOCOLS {
        check(&strings(&[
            "--checkpoint-protocol",
            protocol,
            "--sinks",
            "append,idempotent",
        ]));
    }
    // The log sink has no file: only the temporary checkpoint's bytes fall into classes
    // (181 states, 68 of them with duplicates in the read_uncommitted view).
    let (states, classes) = check(&strings(&["--sinks", "transactional"]));
    assert_eq!(points(&states), [181, 181]);
    assert_eq!(points(&classes), [131, 131]);
    assert_eq!(classes[1]["crash_states"]["with_duplicates"], "68");
}

#[test]
fn every_profile_and_processing_time_keys_keep_the_same_states() {
    for fs_model in ["posix", "ext4", "xfs", "btrfs"] {
        check(&strings(&[
            "--fs-model",
            fs_model,
            "--checkpoint-protocol",
            "no-dir-fsync",
        ]));
    }
    // The key observes the clock; a class's states crash at the same step, so the same time.
    check(&strings(&["--key", "processing-time", "--fs-model", "xfs"]));
}

fn write(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("power-loss-classes");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn random_streams_with_incremental_checkpoints_keep_the_same_states() {
    for seed in 0..6u64 {
        let events = write(&format!("s{seed}.jsonl"), &random_stream(seed, 40));
        let mode = if seed % 2 == 0 { "incremental" } else { "full" };
        // Protocols whose states a sweep of states can run them all of on 40 events.
        let protocol =
            ["safe", "delete-then-rename", "checkpoint-before-sink-sync"][seed as usize % 3];
        let every = (5 + seed % 4).to_string();
        check(&strings(&[
            "--events",
            &events,
            "--checkpoint-every",
            &every,
            "--state-backend",
            mode,
            "--checkpoint-protocol",
            protocol,
        ]));
    }
}

#[test]
fn a_failing_class_replays_alone() {
    // no-fsync-rename on ch04: a renamed checkpoint whose bytes were lost is trusted.
    let args = strings(&[
        "sweep",
        "--quiet",
        "--format",
        "json",
        "--faults",
        "power-loss",
        "--sinks",
        "append",
        "--checkpoint-protocol",
        "no-fsync-rename",
        "--power-loss-points",
        "classes",
    ]);
    let report: Value = serde_json::from_str(&keel(&args)).unwrap();
    let row = &report["rows"][0];
    let first = &row["first_failure"];
    let class = first["crash_state_class"].as_u64().expect("a class failed");
    let reproduce = first["reproduce"].as_str().unwrap();
    assert!(
        reproduce.contains(&format!("--crash-state-class {class}")),
        "{reproduce}"
    );
    let argv: Vec<String> = reproduce
        .split_whitespace()
        .skip(1)
        .map(String::from)
        .collect();
    let replay = keel(&argv);
    assert!(
        replay.contains(&format!("power_loss_state_class={class}")),
        "{replay}"
    );
    let outcome = first["outcome"].as_str().unwrap();
    assert!(replay.contains(outcome), "{outcome} in:\n{replay}");
    // The replay's own reproduce command names the class too.
    let line = replay
        .lines()
        .find(|line| line.starts_with("reproduce: "))
        .expect("a reproduce line");
    assert!(
        line.contains(&format!("--crash-state-class {class}")),
        "{line}"
    );

    // A class that does not exist at the step is named as such.
    let mut wrong = argv.clone();
    let at = wrong
        .iter()
        .position(|a| a == "--crash-state-class")
        .unwrap();
    wrong[at + 1] = "999999".to_string();
    let mut argv = vec!["keel".to_string()];
    argv.extend(wrong);
    let error = execute(&Cli::try_parse_from(&argv).unwrap()).unwrap_err();
    assert!(
        format!("{error:?}").contains("--crash-state-class 999999 does not exist at step"),
        "{error:?}"
    );

    // At depth 2, classes pair with process crashes and power losses only.
    let mut depth_two = args.clone();
    depth_two.extend(strings(&["--depth", "2", "--faults", "disk-error"]));
    let error = execute(
        &Cli::try_parse_from(std::iter::once("keel".to_string()).chain(depth_two)).unwrap(),
    )
    .unwrap_err();
    assert!(
        format!("{error:?}").contains(
            "--power-loss-points classes at --depth 2 pairs process-crash and power-loss only, not disk-error"
        ),
        "{error:?}"
    );
}

#[cfg(feature = "long-tests")]
#[test]
fn long_depth_two_classes_split_by_tail_stand_for_every_pair_of_states() {
    // Process crashes and power losses at depth 2: every pair of crash states is counted
    // exactly by pairs of classes split by tail (a class's clean states from its torn ones:
    // recovery cuts a torn tail by steps of its own, where a second fault lands). Not so
    // split, a class counted 8,598 pairs too few on a 40-event stream.
    for seed in 0..3u64 {
        let events = write(&format!("d{seed}.jsonl"), &random_stream(seed, 24));
        let protocol = ["safe", "checkpoint-before-sink-sync", "no-dir-fsync"][seed as usize];
        let fs_model = ["posix", "ext4", "btrfs"][seed as usize];
        let every = (5 + seed).to_string();
        let (states, classes) = check(&strings(&[
            "--events",
            &events,
            "--depth",
            "2",
            "--faults",
            "process-crash",
            "--checkpoint-every",
            &every,
            "--checkpoint-protocol",
            protocol,
            "--fs-model",
            fs_model,
        ]));
        assert_eq!(states.len(), 8, "four rows a sink");
        assert!(points(&classes) < points(&states), "seed {seed}");
    }
}

#[test]
fn a_failing_pair_of_classes_replays_from_its_plan() {
    // checkpoint-before-sink-sync loses records when a power loss takes the sink's unsynced
    // lines behind a committed checkpoint.
    let events = write("replay.jsonl", &random_stream(7, 30));
    let args = strings(&[
        "sweep",
        "--quiet",
        "--format",
        "json",
        "--events",
        &events,
        "--checkpoint-every",
        "5",
        "--faults",
        "power-loss",
        "--sinks",
        "append",
        "--checkpoint-protocol",
        "checkpoint-before-sink-sync",
        "--depth",
        "2",
        "--power-loss-points",
        "classes",
    ]);
    let report: Value = serde_json::from_str(&keel(&args)).unwrap();
    let row = &report["rows"][0];
    assert_eq!(row["fault"], "power-loss+power-loss");
    let first = &row["first_failure"];
    let reproduce = first["reproduce"].as_str().unwrap();
    let json = reproduce
        .strip_prefix("echo '")
        .and_then(|rest| rest.split_once("' | keel replay --plan -"))
        .map(|(json, _)| json)
        .unwrap_or_else(|| panic!("a plan on stdin: {reproduce}"));
    let plan: Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        plan["faults"][0]["fault"]["kind"], "power-loss-class",
        "{plan:#}"
    );
    assert_eq!(plan["faults"][0]["fault"]["by_tail"], true, "{plan:#}");
    // The reproduce line as a user runs it, in a shell, writing no file.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_keel"));
    let path_var = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let scratch = std::env::temp_dir().join(format!("keel-reproduce-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let output = std::process::Command::new("sh")
        .args(["-c", reproduce])
        .env("PATH", path_var)
        .current_dir(&scratch)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let replay = String::from_utf8(output.stdout).unwrap();
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(left.is_empty(), "the reproduce line wrote {left:?}");
    std::fs::remove_dir(&scratch).unwrap();
    // The replay shows the pair's figures ("lost=1 stale_windows=1": each of them).
    let outcome = first["outcome"].as_str().unwrap();
    assert!(outcome.contains("lost="), "{outcome}");
    for figure in outcome.split_whitespace() {
        assert!(replay.contains(figure), "{figure} in:\n{replay}");
    }
    assert!(replay.contains("verdict: FAILS"), "{replay}");
}
