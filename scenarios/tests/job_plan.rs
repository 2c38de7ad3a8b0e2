//! A parallel job's plan file through the real `keel` binary: `keel job run --save-plan`
//! writes the run, its faults and its schedule; `keel replay --plan` replays it with the same
//! fingerprint; `keel shrink --plan` shrinks schedule and crash together; a plan whose events
//! changed, or an option beside it, is refused with exit 2.

use std::path::PathBuf;
use std::process::Command;

fn path(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("job-plan-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

/// `keel <args>`: exit code and stdout; a panic or an unexpected exit code fails.
fn check(args: &[&str], exit_code: i32) -> (String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .expect("keel runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "keel {args:?}: {stderr}");
    assert_eq!(
        output.status.code(),
        Some(exit_code),
        "keel {args:?}:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The value of `name=` on the line that has it.
fn field<'a>(stdout: &'a str, name: &str) -> &'a str {
    let at = stdout
        .find(&format!("{name}="))
        .unwrap_or_else(|| panic!("no {name}= in {stdout}"));
    stdout[at + name.len() + 1..]
        .split_whitespace()
        .next()
        .unwrap()
}

#[test]
fn a_saved_job_plan_replays_shrinks_and_guards_its_events() {
    let events = path("events.jsonl");
    let mut text = String::new();
    for i in 0..24 {
        text.push_str(&format!(
            "{{\"ts\": {}, \"key\": \"k{}\", \"value\": {}}}\n",
            i * 3 % 40,
            i % 3,
            i + 1
        ));
    }
    std::fs::write(&events, &text).unwrap();
    let plan = path("plan.json");
    // At-least-once with a crash at step 120 over-counts two windows in state.
    let (ran, _) = check(
        &[
            "job",
            "run",
            "--events",
            &events,
            "--checkpoint-mode",
            "at-least-once",
            "--seed",
            "3",
            "--fault",
            "process-crash",
            "--at-step",
            "120",
            "--save-plan",
            &plan,
        ],
        0,
    );
    let (replayed, _) = check(&["replay", "--plan", &plan, "--check-determinism"], 0);
    assert_eq!(field(&replayed, "fingerprint"), field(&ran, "fingerprint"));
    assert_eq!(
        field(&replayed, "over_counted"),
        field(&ran, "over_counted")
    );
    assert!(
        replayed.contains("determinism: two runs, the same"),
        "{replayed}"
    );
    assert!(replayed.contains("crash: "), "{replayed}");
    assert_eq!(field(&ran, "over_counted"), "2");

    let shrunk = path("shrunk.json");
    let (out, _) = check(&["shrink", "--plan", &plan, "--save-plan", &shrunk], 0);
    assert!(out.contains("state-exactly-once broken"), "{out}");
    let (again, _) = check(&["replay", "--plan", &shrunk], 0);
    assert_ne!(field(&again, "over_counted"), "0", "{again}");
    assert!(again.contains("state-exactly-once FAILED"), "{again}");

    // An option beside a job plan, and events that changed since it was saved.
    let (_, stderr) = check(&["replay", "--plan", &plan, "--window", "5"], 2);
    assert!(stderr.contains("--window does not apply"), "{stderr}");
    std::fs::write(&events, text.replace("\"value\": 7}", "\"value\": 8}")).unwrap();
    let (_, stderr) = check(&["replay", "--plan", &plan], 2);
    assert!(
        stderr.contains("the events changed since the plan was saved"),
        "{stderr}"
    );
}

#[test]
fn job_explore_draws_the_jobs_own_faults_and_each_failure_replays() {
    // Lost messages and slow channels alone never break exactly-once, aligned.
    let (out, _) = check(
        &[
            "job",
            "explore",
            "--seeds",
            "0..300",
            "--faults",
            "message-lost,slow-channel",
            "--sinks",
            "transactional,idempotent",
        ],
        0,
    );
    assert!(
        out.contains("one fault of message-lost, slow-channel"),
        "{out}"
    );
    assert!(out.contains("Transactional: seeds=300 failing=0 "), "{out}");
    assert!(out.contains("Idempotent: seeds=300 failing=0 "), "{out}");
    // With crashes among them, at-least-once over-counts: 41 of 300 seeds, the first
    // (seed 7) replayed by the line it prints.
    let (out, _) = check(
        &[
            "job",
            "explore",
            "--seeds",
            "0..300",
            "--faults",
            "process-crash,message-lost,slow-channel",
            "--checkpoint-mode",
            "at-least-once",
        ],
        0,
    );
    assert!(
        out.contains("Transactional: seeds=300 failing=41 "),
        "{out}"
    );
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: keel "))
        .expect("a reproduce line");
    let args: Vec<&str> = line.split_whitespace().collect();
    let (replayed, _) = check(&args, 0);
    assert!(replayed.contains("state-exactly-once FAILED"), "{replayed}");
}

#[test]
fn job_sweep_power_losses_every_sink_keeps_its_promise_after_tail_repair() {
    let (out, _) = check(
        &[
            "job",
            "sweep",
            "--schedules",
            "2",
            "--faults",
            "process-crash,power-loss",
            "--sinks",
            "transactional,idempotent,append",
            "--modes",
            "aligned",
        ],
        0,
    );
    // Exact rows: points, schedules, states, outcomes, failing, exhaustive.
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<&str>>())
        .filter(|f| f.len() == 8 && f[0] == "aligned" && f[2].parse::<u64>().is_ok())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec![
                "aligned",
                "transactional",
                "3830",
                "2",
                "0",
                "1",
                "0",
                "false"
            ],
            vec!["aligned", "idempotent", "5468", "2", "0", "1", "0", "false"],
            vec!["aligned", "append", "5468", "2", "0", "5", "0", "false"],
        ],
        "{out}"
    );
    // A step with more crash states than --power-loss-states-max says it was sampled.
    assert!(
        out.contains("power-loss: 2760 points (sampled: at most 16 crash states a step"),
        "{out}"
    );
    assert!(
        out.contains("aligned append: recovers, no-loss, no-wrong hold at every point run"),
        "{out}"
    );
    // Power loss is swept on seeded schedules only.
    let (_, stderr) = check(
        &[
            "job",
            "sweep",
            "--schedules",
            "all",
            "--faults",
            "power-loss",
        ],
        2,
    );
    assert!(
        stderr.contains("--faults power-loss is swept on seeded schedules"),
        "{stderr}"
    );
}

#[test]
fn run_sweep_and_explore_with_sources_or_parallelism_are_the_job_commands() {
    for one in [
        &[
            "explore",
            "--sources",
            "2",
            "--parallelism",
            "4",
            "--seeds",
            "0..40",
        ][..],
        &[
            "run",
            "--parallelism=3",
            "--fault",
            "process-crash",
            "--at-step",
            "90",
        ],
        &["sweep", "--sources", "1", "--schedules", "1"],
    ] {
        let job: Vec<&str> = ["job"].into_iter().chain(one.iter().copied()).collect();
        assert_eq!(check(one, 0).0, check(&job, 0).0, "keel {one:?}");
    }
    // An option of the chapter's engine is not a job's.
    let (_, stderr) = check(&["sweep", "--sources", "2", "--checkpoint-every", "3"], 2);
    assert!(stderr.contains("--checkpoint-every"), "{stderr}");
    assert!(stderr.contains("keel job sweep"), "{stderr}");
}

#[test]
fn explore_draws_a_power_loss_state_and_its_line_replays_it() {
    let (stdout, _) = check(
        &[
            "job",
            "explore",
            "--faults",
            "power-loss",
            "--seeds",
            "0..200",
            "--checkpoint-mode",
            "at-least-once",
        ],
        0,
    );
    assert!(
        stdout.contains("Transactional: seeds=200 failing=60 "),
        "{stdout}"
    );
    // The first failing seed's power loss left the disk in its crash state 1, not 0.
    let line = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: keel "))
        .expect("a reproduce line");
    assert!(
        line.ends_with("--seed 6 --fault power-loss --at-step 118 --at after --crash-state 1"),
        "{line}"
    );
    let mut args: Vec<&str> = line.split_whitespace().collect();
    args.extend(["--expect", "state-exactly-once"]);
    let (replayed, _) = check(&args, 1);
    assert!(replayed.contains("over_counted=1"), "{replayed}");
    // Shrunk: the power loss becomes a simpler fault (a process crash), moved earlier.
    let shrunk = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce shrunk: keel "))
        .expect("a shrunk line");
    assert!(
        shrunk
            .contains("--seed 6 --fault process-crash --at-step 88 --at after --replay-schedule "),
        "{shrunk}"
    );
    let mut args: Vec<&str> = shrunk.split_whitespace().collect();
    args.extend(["--expect", "state-exactly-once"]);
    check(&args, 1);
}
