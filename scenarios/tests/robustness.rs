//! Robustness: every crash the fuzz targets (`fuzz/`) found, as a regression test; the same
//! seeds on two threads at once; keel's own files (atomic `--out`, truncated shard files,
//! SIGKILL while writing) and Ctrl-C, through the real binary.

use clap::Parser;
use keel_scenarios::cli::{execute, Cli, Output};
use keel_scenarios::error::KeelError;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn keel(args: &[&str]) -> Result<Output, KeelError> {
    let mut argv = vec!["keel"];
    argv.extend_from_slice(args);
    execute(&Cli::try_parse_from(&argv).expect("valid command line"))
}

fn stdout(args: &[&str]) -> String {
    keel(args).expect("keel succeeds").stdout
}

fn tmp(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("robustness-tests");
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
        out.status.code().expect("keel exits, it is not killed"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn usage_error(args: &[&str]) -> String {
    let error = keel(args).expect_err("bad input is an error");
    assert_eq!(error.exit_code, 2, "{error}");
    error.message
}

/// A saved plan of the chapter's run with one field of its spec replaced.
fn plan_with_spec(name: &str, field: &str, value: Value) -> String {
    let path = tmp(name);
    stdout(&[
        "run",
        "--sink",
        "idempotent",
        "--crash-after-event",
        "14",
        "--save-plan",
        &path,
    ]);
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    plan["spec"][field] = value;
    std::fs::write(&path, plan.to_string()).unwrap();
    path
}

/// Fuzz target 2 (files): a plan file whose spec has a sector size the disk cannot have
/// panicked in `Disk::with_sector_size`; `ScenarioSpec::config` now checks it.
#[test]
fn a_plan_file_with_an_impossible_sector_size_is_an_error() {
    for (value, shown) in [(0_u64, "0"), (2_097_153, "2097153")] {
        let path = plan_with_spec(
            &format!("sector-{value}.json"),
            "sector_size_bytes",
            value.into(),
        );
        assert_eq!(
            usage_error(&["replay", "--plan", &path]),
            format!("{path}: --sector-size-bytes must be between 1 and 2097152, got {shown}")
        );
    }
}

/// Fuzz target 4 (runner): a swarm plan can aim a fault at a step where it does not apply
/// (a sink fault on a disk step); the trace marked it there, so the plan that ran (which
/// rightly omits it) replayed with another fingerprint. Seed 12 draws such a plan on ch04.
#[test]
fn a_saved_plan_replays_with_the_fingerprint_of_the_seed_it_came_from() {
    let path = tmp("seed-12.json");
    let seed: Value = serde_json::from_str(&stdout(&[
        "replay",
        "--seed",
        "12",
        "--sink",
        "append",
        "--save-plan",
        &path,
        "--format",
        "json",
    ]))
    .unwrap();
    // Two faults planned, one ran.
    assert_eq!(seed["plan"]["faults"].as_array().unwrap().len(), 2);
    assert_eq!(seed["injected"]["faults"].as_array().unwrap().len(), 1);
    let plan: Value =
        serde_json::from_str(&stdout(&["replay", "--plan", &path, "--format", "json"])).unwrap();
    assert_eq!(plan["fingerprint"], seed["fingerprint"]);
    assert_eq!(plan["trace"], seed["trace"]);
    assert_eq!(plan["oracle"], seed["oracle"]);
}

/// Fuzz target 4 (runner): processing-time keys with `--event-interval-ms 0` gave every
/// record of one window the same key, so the idempotent sink dropped distinct records in a
/// fault-free run. The processing clock now has microsecond resolution and never hands out
/// the same timestamp twice, so every emission has a key of its own.
#[test]
fn processing_time_keys_at_one_instant_stay_distinct_on_the_idempotent_sink() {
    let run: Value = serde_json::from_str(&stdout(&[
        "run",
        "--sink",
        "idempotent",
        "--key",
        "processing-time",
        "--event-interval-ms",
        "0",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(run["failures"], serde_json::json!([]));
    let keys: Vec<&str> = run["sink"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    assert_eq!(
        keys,
        ["pt0.014:10", "pt0.025:20", "pt0.026:20", "pt0.031:30"],
        "one timestamp per event read (and one for the flush), in order"
    );
}

/// Fuzz target 4 (runner): `keel run --at before --crash-state N` checked N against the crash
/// states the disk has after the step, not before it, where the power loss strikes: on ch04,
/// step 14 (the fsync of a checkpoint) leaves 2 states and is entered with 12, so the
/// reproduce command of a run that lost power in state 7 there was rejected.
#[test]
fn a_power_loss_before_a_step_takes_the_crash_states_before_it() {
    let run: Value = serde_json::from_str(&stdout(&[
        "run",
        "--fault",
        "power-loss",
        "--at-step",
        "14",
        "--at",
        "before",
        "--crash-state",
        "7",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        run["plan"]["faults"][0]["fault"],
        serde_json::json!({"kind": "power-loss", "at": "before", "state": 7})
    );
    assert_eq!(
        usage_error(&[
            "run",
            "--fault",
            "power-loss",
            "--at-step",
            "14",
            "--at",
            "before",
            "--crash-state",
            "12",
        ]),
        "--crash-state 12 does not exist at step 14: its crash states are 0..=11"
    );
    // After the step: its own count.
    assert_eq!(
        usage_error(&[
            "run",
            "--fault",
            "power-loss",
            "--at-step",
            "14",
            "--crash-state",
            "2",
        ]),
        "--crash-state 2 does not exist at step 14: its crash states are 0..=1"
    );
}

/// A sweep shard of the chapter's sink-error points on the append sink, as lines of JSON.
fn sweep_shard() -> Vec<Value> {
    stdout(&[
        "sweep",
        "--faults",
        "sink-error",
        "--sinks",
        "append",
        "--shard",
        "0/1",
        "--quiet",
    ])
    .lines()
    .map(|line| serde_json::from_str(line).unwrap())
    .collect()
}

fn explore_shard() -> Vec<Value> {
    stdout(&["explore", "--seeds", "0..2", "--shard", "0/1", "--quiet"])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn write_lines(name: &str, lines: &[Value]) -> String {
    let path = tmp(name);
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// Fuzz target 2 (files): a shard file whose counts no run can reach overflowed the sums of
/// `keel merge` (a panic in debug builds, a wrong table in release); such a line is now an
/// error naming the file, the line and the value.
#[test]
fn merge_rejects_shard_lines_no_run_writes() {
    let mut lines = sweep_shard();
    lines[2]["duplicates"] = u64::MAX.into();
    let path = write_lines("huge-count.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        format!("{path}: line 3: not what keel writes: duplicates 18446744073709551615 is more than a run can count (at most 50000000, the most steps a run takes)")
    );

    let mut lines = sweep_shard();
    lines[1]["faults"] = Value::Array(Vec::new());
    let path = write_lines("no-fault.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        format!(
            "{path}: line 2: not what keel writes: a sweep point with 0 faults (it has 1 or 2)"
        )
    );

    // A record standing for more points than a chunk holds (its counts would be multiplied
    // past what a run can count), or for fewer than two.
    for runs in [1u64, 1025, u64::MAX] {
        let mut lines = sweep_shard();
        lines[1]["span"] = serde_json::json!({"terms": 7, "runs": runs});
        let path = write_lines("long-span.jsonl", &lines);
        assert_eq!(
            usage_error(&["merge", &path]),
            format!(
                "{path}: line 2: not what keel writes: a span of {runs} points (it has 2 to 1024)"
            )
        );
    }
    // A span that covers the points after it: they are then given twice.
    let mut lines = sweep_shard();
    lines[1]["span"] = serde_json::json!({"terms": 7, "runs": 2});
    let path = write_lines("overlapping-span.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        "the shard files hold 5 results, the run has 4"
    );

    // An exploration header whose seed range is backwards, or bigger than its rows: merge
    // would underflow, or enumerate 2^64 seeds.
    let mut lines = explore_shard();
    lines[0]["explore"]["seeds_start"] = 5.into();
    let path = write_lines("backwards.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        format!("{path}: line 1: not what keel writes: seeds 5..2 end before they start")
    );
    let mut lines = explore_shard();
    lines[0]["explore"]["seeds_end"] = u64::MAX.into();
    let path = write_lines("endless.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        format!("{path}: line 1: not what keel writes: total 4 is not the number of rows of seeds 0..18446744073709551615 on 2 sinks")
    );
    // A header claiming 2^64 - 1 shards: merge listed every missing one (out of memory).
    let mut lines = sweep_shard();
    lines[0]["shard"]["count"] = u64::MAX.into();
    let path = write_lines("many-shards.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        "missing shard files: 1/18446744073709551615, 2/18446744073709551615, 3/18446744073709551615, 4/18446744073709551615, 5/18446744073709551615, 6/18446744073709551615, 7/18446744073709551615, 8/18446744073709551615"
    );
    let mut lines = explore_shard();
    lines[0]["shard"]["count"] = 0.into();
    let path = write_lines("no-shards.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &path]),
        format!(
            "{path}: line 1: not what keel writes: shard 0/0: the index must be below the count"
        )
    );
}

/// A sweep shard's lines go out as they are made (through stdout, or into the `--out`
/// file, committed whole at the end): the same bytes as the shard kept and returned in
/// process on one thread, and `keel merge` of the streamed files prints the unsharded report. A file
/// that does not start with a shard header is named.
#[test]
fn a_streamed_sweep_shard_is_the_shard_and_merges_to_the_sweep() {
    let sweep = [
        "sweep",
        "--faults",
        "process-crash,power-loss",
        "--depth",
        "2",
        "--sinks",
        "append",
        "--power-loss-states-max",
        "2",
        "--quiet",
        "--jobs",
        "2",
    ];
    let (code, whole, _) = keel_bin(&sweep);
    assert_eq!(code, 0);
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let mut args = sweep.to_vec();
        args.extend_from_slice(&["--shard", shard]);
        // On one thread: the lines do not depend on --jobs (nor on which thread composed a
        // pair first, which once decided which pairs shared a record).
        let mut one_thread = args.clone();
        let jobs = one_thread.iter().position(|&arg| arg == "--jobs").unwrap();
        one_thread[jobs + 1] = "1";
        let kept = stdout(&one_thread);
        assert!(
            kept.lines().count() > 1_000,
            "{shard}: {} lines",
            kept.lines().count()
        );
        let (code, streamed, stderr) = keel_bin(&args);
        assert_eq!((code, stderr.as_str()), (0, ""));
        assert!(
            streamed == kept,
            "{shard}: stdout differs from the shard kept in process"
        );
        let path = tmp(&format!("streamed-{}.jsonl", &shard[..1]));
        let _ = std::fs::remove_file(&path);
        args.extend_from_slice(&["--out", &path]);
        let (code, printed, _) = keel_bin(&args);
        assert_eq!((code, printed.as_str()), (0, ""));
        assert!(
            std::fs::read_to_string(&path).unwrap() == kept,
            "{shard}: --out differs"
        );
        files.push(path);
    }
    assert_eq!(keel_bin(&["merge", &files[1], &files[0]]).1, whole);
    // An exploration's shard streams its rows the same way.
    let explore = ["explore", "--seeds", "0..50", "--shard", "0/1", "--quiet"];
    let (code, streamed, _) = keel_bin(&explore);
    assert_eq!(code, 0);
    // A header, then a row a seed on each default sink (append and idempotent).
    assert_eq!(streamed.lines().count(), 1 + 50 * 2);
    assert!(streamed == stdout(&explore));

    // Files that are not shards: empty, or points without their header.
    let empty = tmp("empty-shard.jsonl");
    std::fs::write(&empty, "").unwrap();
    assert_eq!(
        usage_error(&["merge", &files[0], &empty]),
        format!("{empty}: no shard header: the file is empty (was the command that wrote it interrupted?)")
    );
    let headless = write_lines("headless.jsonl", &sweep_shard()[1..]);
    assert_eq!(
        usage_error(&["merge", &headless]),
        format!(
            "{headless}: line 1: not a shard header (keel writes one as a shard file's first line)"
        )
    );
    // A second header in a file.
    let mut lines = sweep_shard();
    lines.insert(2, lines[0].clone());
    let twice = write_lines("two-headers.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &twice]),
        format!("{twice}: line 3: a header after the first line")
    );
    // Points out of order within a file.
    let mut lines = sweep_shard();
    lines.swap(1, 2);
    let swapped = write_lines("swapped.jsonl", &lines);
    assert_eq!(
        usage_error(&["merge", &swapped]),
        "the shard files' points are not exactly the sweep's points"
    );
}

/// `--out` where no file can be written fails before the sweep runs, naming the path.
#[test]
fn a_shard_out_path_that_cannot_be_written_fails_at_once() {
    let path = tmp("no-such-dir/shard.jsonl");
    let error = usage_error(&["sweep", "--shard", "0/2", "--out", &path, "--quiet"]);
    assert!(
        error.starts_with(&format!("cannot write {path}: ")),
        "{error}"
    );
}

/// A shard file cut short (its writer killed) is an error naming the file and the line.
#[test]
fn merge_rejects_a_truncated_shard_file_naming_the_file_and_line() {
    let whole: String = sweep_shard().iter().map(|l| l.to_string() + "\n").collect();
    // The last line without its newline: whole JSON, but the file may have had more lines.
    let path = tmp("no-final-newline.jsonl");
    std::fs::write(&path, whole.trim_end()).unwrap();
    let lines = whole.lines().count();
    let (code, out, err) = keel_bin(&["merge", &path]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!("error: {path}: line {lines}: the last line has no newline: the file is truncated (was the command that wrote it interrupted?)\n")
    );
    // Cut in the middle of a line, then a newline: not a shard line.
    let cut = whole.find("\"duplicates\"").unwrap();
    let path = tmp("cut.jsonl");
    std::fs::write(&path, format!("{}\n", &whole[..cut])).unwrap();
    let (code, _, err) = keel_bin(&["merge", &path]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with(&format!("error: {path}: line 2: not a keel shard line: ")),
        "{err}"
    );
    // The whole file merges.
    let path = tmp("whole.jsonl");
    std::fs::write(&path, &whole).unwrap();
    assert_eq!(keel_bin(&["merge", &path]).0, 0);
}

/// Shared state or statics that leak between runs would show here: the same commands on two
/// threads at once give the same reports, byte for byte, as one at a time.
#[test]
fn the_same_seeds_on_two_threads_at_once_give_the_same_reports() {
    let commands: [&[&str]; 3] = [
        &[
            "explore", "--seeds", "0..300", "--jobs", "1", "--format", "json",
        ],
        &[
            "sweep",
            "--faults",
            "process-crash,power-loss,ack-lost",
            "--jobs",
            "1",
            "--format",
            "json",
        ],
        &[
            "replay", "--seed", "412", "--sink", "append", "--format", "json",
        ],
    ];
    for command in commands {
        let alone = stdout(command);
        let (first, second) = std::thread::scope(|scope| {
            let first = scope.spawn(|| stdout(command));
            let second = scope.spawn(|| stdout(command));
            (first.join().unwrap(), second.join().unwrap())
        });
        assert_eq!(first, alone, "{command:?}");
        assert_eq!(second, alone, "{command:?}");
        assert!(alone.contains("\"fingerprint\""), "{command:?}");
    }
}

/// `--out FILE` writes exactly what stdout would have held, and prints nothing.
#[test]
fn out_writes_the_report_to_a_file_and_nothing_to_stdout() {
    for command in [
        vec!["explore", "--seeds", "0..50", "--quiet"],
        vec!["explore", "--seeds", "0..50", "--quiet", "--shard", "1/2"],
        vec![
            "sweep",
            "--faults",
            "sink-error",
            "--quiet",
            "--format",
            "csv",
        ],
    ] {
        let expected = stdout(&command);
        let path = tmp("out-report.txt");
        let _ = std::fs::remove_file(&path);
        let mut with_out = command.clone();
        with_out.extend_from_slice(&["--out", &path]);
        let (code, out, err) = keel_bin(&with_out);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (0, "", ""),
            "{command:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    }
    let (code, _, err) = keel_bin(&[
        "explore",
        "--seeds",
        "0..2",
        "--out",
        "/nonexistent/dir/r.txt",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: cannot write /nonexistent/dir/r.txt: "),
        "{err}"
    );
}

/// A keel killed with SIGKILL at any moment, while it runs or while it writes its shard file,
/// leaves no file or a complete one: `keel merge` never reads half a shard.
#[cfg(unix)]
#[test]
fn a_keel_killed_while_writing_leaves_no_file_or_a_complete_one() {
    let path = tmp("killed-shard.jsonl");
    let args = [
        "explore", "--seeds", "0..3000", "--shard", "0/1", "--quiet", "--jobs", "2", "--out", &path,
    ];
    let _ = std::fs::remove_file(&path);
    let started = Instant::now();
    assert_eq!(keel_bin(&args).0, 0);
    let whole_run = started.elapsed();
    let complete = std::fs::read(&path).unwrap();
    assert!(complete.ends_with(b"\n") && complete.len() > 100_000);
    let (mut absent, mut whole) = (0, 0);
    // Kills spread over the whole run, the last ones around the write itself.
    for eighth in 1..=10_u32 {
        let _ = std::fs::remove_file(&path);
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(whole_run * eighth / 9);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        match std::fs::read(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => absent += 1,
            Err(error) => panic!("{error}"),
            Ok(bytes) => {
                assert!(
                    bytes == complete,
                    "a partial shard file of {} bytes",
                    bytes.len()
                );
                whole += 1;
                assert_eq!(keel_bin(&["merge", &path]).0, 0);
            }
        }
    }
    assert_eq!(absent + whole, 10);
}

/// Ctrl-C during a long exploration: it stops at the next run boundary, prints no report and
/// exits 130.
#[cfg(unix)]
#[test]
fn ctrl_c_stops_a_long_exploration_cleanly_with_exit_130() {
    let path = tmp("interrupted.jsonl");
    let _ = std::fs::remove_file(&path);
    for out in [false, true] {
        let mut args = vec!["explore", "--seeds", "0..1000000", "--jobs", "2"];
        if out {
            args.extend_from_slice(&["--shard", "0/1", "--out", &path]);
        }
        let child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let output = ctrl_c(child);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{stderr}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "");
        assert!(
            stderr.starts_with("error: interrupted (Ctrl-C)"),
            "{stderr}"
        );
        assert!(!std::path::Path::new(&path).exists());
    }
}

/// Sends `child` a Ctrl-C (SIGINT) and waits for it to end.
#[cfg(unix)]
fn ctrl_c(child: std::process::Child) -> std::process::Output {
    let signalled = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    // The bound only turns a keel that ignores Ctrl-C into a failure instead of a hang.
    wait_at_most(child, Duration::from_secs(120))
}

#[cfg(unix)]
fn wait_at_most(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!("keel did not stop within {limit:?} of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Ctrl-C during a sweep shard that streams its lines to stdout: it stops at the next run
/// boundary and exits 130, saying that the lines printed are not all of them, and `keel
/// merge` refuses them.
#[cfg(unix)]
#[test]
fn ctrl_c_during_a_streamed_sweep_shard_leaves_lines_merge_refuses() {
    let lines = tmp("interrupted-sweep.jsonl");
    // The chapter at depth 2 with every default fault kind, on one thread: a few seconds.
    let child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["sweep", "--depth", "2", "--shard", "0/1", "--jobs", "1"])
        // A file, not a pipe: nobody reads a pipe here, and a full one would block the writes.
        .stdout(std::fs::File::create(&lines).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once lines come (the count is done, and the sweep is seconds before its end): a
    // Ctrl-C while counting ends keel at once, with nothing printed.
    let started = Instant::now();
    while std::fs::metadata(&lines).unwrap().len() == 0 {
        assert!(started.elapsed() < Duration::from_secs(120), "no lines");
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = ctrl_c(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    // The plan's line first (the points planned and the estimate), then the error.
    let stderr_lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(stderr_lines.len(), 2, "{stderr}");
    assert!(
        stderr_lines[0].starts_with("sweep: 361,470 points planned ("),
        "{stderr}"
    );
    assert!(
        stderr_lines[1].starts_with("error: interrupted (Ctrl-C) after ")
            && stderr_lines[1].ends_with(
                " (the shard's lines printed so far are not all of them: keel merge refuses them)"
            ),
        "{stderr}"
    );
    let (code, _, merged) = keel_bin(&["merge", &lines]);
    assert_eq!(code, 2, "{merged}");
    assert!(
        merged.starts_with("error: the shard files hold ")
            && merged.ends_with(" results, the run has 361470\n"),
        "{merged}"
    );
}
