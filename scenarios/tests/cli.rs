//! Bad input through the real `keel` binary: a clear error naming what and where, exit 2, no panic.

use std::path::PathBuf;
use std::process::Command;

/// Writes `contents` to a file under cargo's per-test temp dir and returns its path.
fn events_file(name: &str, contents: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.to_string_lossy().into_owned()
}

/// The one helper: `keel <args>` must fail with exit code 2 and a stderr naming `fragments`.
fn check_rejected(args: &[&str], fragments: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .expect("keel runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "keel {args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "keel {args:?} printed a result");
    assert!(
        !stderr.contains("panicked"),
        "keel {args:?} panicked: {stderr}"
    );
    for fragment in fragments {
        assert!(
            stderr.contains(fragment),
            "keel {args:?}: stderr lacks {fragment:?}: {stderr}"
        );
    }
}

#[test]
fn bad_options_are_rejected_by_name() {
    check_rejected(
        &["run", "--checkpoint-every", "0"],
        &["--checkpoint-every", "at least 1"],
    );
    check_rejected(&["run", "--window", "0"], &["--window", "got 0"]);
    check_rejected(&["run", "--window", "-10"], &["--window", "got -10"]);
    check_rejected(
        &["run", "--out-of-orderness", "-1"],
        &["--out-of-orderness", "got -1"],
    );
    check_rejected(
        &["run", "--scenario", "ch99"],
        &["unknown scenario 'ch99'", "known: ch04"],
    );
    check_rejected(
        &["run", "--crash-after-event", "30"],
        &["--crash-after-event 30", "0..=29"],
    );
    check_rejected(
        &["run", "--crash-at-ms", "100000"],
        &["--crash-at-ms 100000", "8700ms"],
    );
    check_rejected(
        &["run", "--sink", "exactly-once"],
        &["--sink", "append", "idempotent"],
    );
    check_rejected(
        &["run", "--crash-after-event", "3", "--crash-at-ms", "5"],
        &["cannot be used with"],
    );
    // A sweep's budget and part (issue 54).
    check_rejected(
        &["sweep", "--time-budget", "0s"],
        &["--time-budget", "no time at all"],
    );
    check_rejected(
        &["sweep", "--time-budget", "60"],
        &["--time-budget", "expected a duration such as 60s"],
    );
    check_rejected(
        &["sweep", "--time-budget", "1.5m"],
        &["--time-budget", "expected a duration"],
    );
    check_rejected(&["sweep", "--points-max", "0"], &["--points-max", "0"]);
    check_rejected(&["sweep", "--points", "9..3"], &["--points", "empty"]);
    check_rejected(
        &["sweep", "--points", "0..", "--format", "json"],
        &["cannot be used with"],
    );
    check_rejected(
        &[
            "sweep",
            "--faults",
            "process-crash",
            "--points",
            "10..100000",
        ],
        &["--points 10..100000 is not a part of the sweep's points, 0.."],
    );
    check_rejected(
        &[
            "sweep",
            "--faults",
            "process-crash",
            "--shard",
            "1/2",
            "--points",
            "0..10",
        ],
        &["--points 0..10 is not a part of shard 1/2's points"],
    );
    check_rejected(
        &["run", "--checkpoint-every", "eight"],
        &["--checkpoint-every", "eight"],
    );
    // The state backend's old name, and the parallel job's barrier alignment.
    check_rejected(
        &["sweep", "--checkpoint-mode", "incremental"],
        &["use --state-backend incremental"],
    );
    check_rejected(
        &["run", "--checkpoint-mode", "unaligned"],
        &["keel job run --checkpoint-mode unaligned"],
    );
}

#[test]
fn bad_event_files_are_rejected_with_file_and_line() {
    let good = "{\"ts\": 1, \"value\": 2}\n";
    let cases: &[(&str, String, &[&str])] = &[
        (
            "malformed.jsonl",
            format!("{good}{{\"ts\": 3, \"value\": \n"),
            &["malformed.jsonl", "line 2", "not valid JSON"],
        ),
        (
            "missing.jsonl",
            format!("{good}{good}{{\"ts\": 3}}\n"),
            &["missing.jsonl", "line 3", "missing field \"value\""],
        ),
        (
            "float.jsonl",
            "{\"ts\": 1.5, \"value\": 2}\n".to_string(),
            &[
                "float.jsonl",
                "line 1",
                "ts must be an integer from -9007199254740991 to 9007199254740991, found 1.5",
            ],
        ),
        (
            "string.jsonl",
            format!("{good}{{\"ts\": 3, \"value\": \"7\"}}\n"),
            &[
                "string.jsonl",
                "line 2",
                "value must be an integer from -9007199254740991 to 9007199254740991, found \"7\"",
            ],
        ),
        (
            "array.jsonl",
            "[1, 2]\n".to_string(),
            &["array.jsonl", "line 1", "expected a JSON object"],
        ),
    ];
    for (name, contents, fragments) in cases {
        let path = events_file(name, contents);
        check_rejected(&["run", "--events", &path], fragments);
    }
    check_rejected(
        &["run", "--events", "/no/such/events.jsonl"],
        &["/no/such/events.jsonl", "cannot read"],
    );
    let short = events_file("short.jsonl", good);
    check_rejected(
        &["run", "--events", &short, "--crash-after-event", "1"],
        &["--crash-after-event 1", "0..=0"],
    );
}

/// `keel <args>`: exit code, stdout, stderr.
fn keel(args: &[&str]) -> (Option<i32>, String, String) {
    keel_with_stdin(args, b"")
}

/// `keel <args>` with `stdin` on its standard input: exit code, stdout, stderr.
fn keel_with_stdin(args: &[&str], stdin: &[u8]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("keel runs");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // keel may stop reading early (a bad line): a closed pipe is not the test's concern.
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut input, &stdin));
    let output = child.wait_with_output().expect("keel runs");
    let _ = writer.join().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_events_file_without_events_is_an_error_for_every_command() {
    for (name, contents) in [("empty.jsonl", ""), ("blank.jsonl", "\n  \n\t\n\n")] {
        let path = events_file(name, contents);
        for command in [
            "run", "sites", "sweep", "explore", "replay", "shrink", "teach", "bench",
        ] {
            assert_eq!(
                keel(&[command, "--events", &path]),
                (
                    Some(2),
                    String::new(),
                    format!("error: no events in {path}\n")
                ),
                "keel {command} --events {name}"
            );
        }
    }
}

#[test]
fn event_fields_out_of_range_name_the_range() {
    let rule = |name: &str| {
        format!("{name} must be an integer from -9007199254740991 to 9007199254740991")
    };
    let good = "{\"ts\": 1, \"value\": 2}\n";
    let cases = [
        (
            "ts_u64_max.jsonl",
            format!("{good}{good}{{\"ts\": 18446744073709551615, \"value\": 1}}\n"),
            format!(
                "line 3: ts 18446744073709551615 is out of range: {}",
                rule("ts")
            ),
        ),
        (
            "ts_i64_min.jsonl",
            "{\"ts\": -9223372036854775808, \"value\": 1}\n".to_string(),
            format!(
                "line 1: ts -9223372036854775808 is out of range: {}",
                rule("ts")
            ),
        ),
        (
            "ts_2_53.jsonl",
            format!("{good}{{\"ts\": 9007199254740992, \"value\": 1}}\n"),
            format!(
                "line 2: ts 9007199254740992 is out of range: {}",
                rule("ts")
            ),
        ),
        (
            "value_i64_max.jsonl",
            "{\"ts\": 1, \"value\": 9223372036854775807}\n".to_string(),
            format!(
                "line 1: value 9223372036854775807 is out of range: {}",
                rule("value")
            ),
        ),
        // Beyond u64 serde_json keeps a double (1.2345678901234568e+28): shown as written.
        (
            "value_29_digits.jsonl",
            "{\"ts\":1,\"value\":12345678901234567890123456789}\n".to_string(),
            format!(
                "line 1: value 12345678901234567890123456789 is out of range: {}",
                rule("value")
            ),
        ),
        (
            "ts_exponent.jsonl",
            "{\"ts\": 1e3, \"value\": 1}\n".to_string(),
            format!("line 1: {}, found 1e3", rule("ts")),
        ),
    ];
    for (name, contents, message) in cases {
        let path = events_file(name, &contents);
        assert_eq!(
            keel(&["run", "--events", &path]),
            (
                Some(2),
                String::new(),
                format!("error: {path}: {message}\n")
            ),
        );
    }
    // The limits themselves are events like any other, with W and D at their limits too.
    let extremes = events_file(
        "extremes.jsonl",
        "{\"ts\": 9007199254740991, \"value\": 9007199254740991}\n\
         {\"ts\": -9007199254740991, \"value\": -9007199254740991}\n",
    );
    for (window, ooo) in [("10", "5"), ("9007199254740991", "9007199254740991")] {
        let (code, stdout, stderr) = keel(&[
            "run",
            "--events",
            &extremes,
            "--window",
            window,
            "--out-of-orderness",
            ooo,
            "--crash-after-event",
            "0",
        ]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("final_windows={"), "{stdout}");
    }
    let (code, help, _) = keel(&["run", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        help.contains(
            "ts and value are integers from -9007199254740991 to 9007199254740991 (±(2^53 - 1))"
        ),
        "{help}"
    );
}

#[test]
fn bench_has_no_shard() {
    // A benchmark of a slice is not mergeable: bench runs whole, and says so by not taking it.
    assert_eq!(
        keel(&["bench", "--seeds", "0..1000", "--shard", "0/2"]),
        (
            Some(2),
            String::new(),
            "error: unexpected argument '--shard' found\n\n\
             Usage: keel bench --seeds <A..B>\n\n\
             For more information, try '--help'.\n"
                .to_string()
        )
    );
    let (code, help, _) = keel(&["bench", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        help.contains("--jobs <N>") && help.contains("--quiet"),
        "{help}"
    );
    assert!(!help.contains("--shard"), "{help}");
}

#[test]
fn an_events_file_runs_like_a_scenario() {
    let path = events_file(
        "tiny.jsonl",
        "{\"ts\": 1, \"value\": 1}\n\n{\"ts\": 12, \"value\": 2}\n{\"ts\": 16, \"value\": 3}\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args([
            "run",
            "--events",
            &path,
            "--checkpoint-every",
            "1",
            "--crash-after-event",
            "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("checkpoint_at_crash: index=2 max_ts=12 windows={\"10\": 1, \"20\": 2}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("final_windows={\"10\": 1, \"20\": 5}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("total_records=2 unique_keys=2 duplicates=0 lost=0"),
        "{stdout}"
    );
}

/// `keel <args>` fails with exit 2, prints nothing on stdout, and exactly `stderr`.
fn check_exact(args: &[&str], stderr: &str) {
    assert_eq!(
        keel(args),
        (Some(2), String::new(), stderr.to_string()),
        "keel {args:?}"
    );
}

/// clap's error when `option` needs `--fault KIND --at-step N`.
fn needs_fault(option_usage: &str) -> String {
    format!(
        "error: the following required arguments were not provided:\n  --at-step <N>\n  --fault <FAULT>\n\n\
         Usage: keel run --at-step <N> --fault <FAULT> {option_usage}\n\n\
         For more information, try '--help'.\n"
    )
}

/// clap's error for two options that cannot go together.
fn conflict(command: &str, first: &str, second: &str) -> String {
    format!(
        "error: the argument '{first}' cannot be used with '{second}'\n\n\
         Usage: keel {command} {first}\n\n\
         For more information, try '--help'.\n"
    )
}

#[test]
fn options_that_would_do_nothing_are_rejected_with_the_reason() {
    let plan = events_file(
        "faults-only-plan.json",
        r#"{"faults": [{"step": 23, "fault": {"kind": "process-crash", "at": "after"}}]}"#,
    );
    // A range of seeds: each seed is its own run's seed.
    for command in ["explore", "bench"] {
        check_exact(
            &[command, "--seeds", "0..10", "--seed", "5"],
            &format!(
                "error: --seed has no effect on `keel {command}`: every seed of --seeds A..B is the seed of its own run; use --seeds 5..6 to run seed 5 alone\n"
            ),
        );
    }
    check_exact(
        &["sites", "--seed", "5"],
        "error: --seed has no effect on `keel sites`: it lists the steps of the fault-free run, which draws nothing from a seed\n",
    );
    // The options of one fault need that fault.
    check_exact(
        &["run", "--crash-state", "5"],
        &needs_fault("--crash-state <S>"),
    );
    check_exact(&["run", "--at", "before"], &needs_fault("--at <AT>"));
    check_exact(
        &["run", "--outage-ms", "100"],
        &needs_fault("--outage-ms <MS>"),
    );
    check_exact(
        &["run", "--crash-after-event", "14", "--at", "before"],
        &needs_fault("--crash-after-event <C> --at <AT>"),
    );
    check_exact(
        &["run", "--fault", "process-crash", "--at-step", "23", "--crash-state", "5"],
        "error: --crash-state applies to --fault power-loss only (it picks the disk state a power loss leaves); a process-crash leaves the disk as it is\n",
    );
    check_exact(
        &["run", "--fault", "disk-error", "--at-step", "11", "--at", "before"],
        "error: --at applies to --fault process-crash and --fault power-loss only (a crash before or after the step's effect); a disk-error has no before or after\n",
    );
    check_exact(
        &["run", "--fault", "power-loss", "--at-step", "23", "--outage-ms", "100"],
        "error: --outage-ms applies to --fault sink-unavailable only (it is the length of the outage), not to a power-loss\n",
    );
    // A plan file replaces the seed's plan, and everything that draws it.
    for command in ["replay", "shrink"] {
        for (option, value, usage) in [
            ("--seed", "5", "--seed <SEED>"),
            ("--faults", "process-crash", "--faults <FAULTS>"),
            ("--max-faults", "2", "--max-faults <N>"),
            ("--outage-ms", "100", "--outage-ms <MS>"),
        ] {
            check_exact(
                &[command, "--plan", &plan, option, value],
                &conflict(command, "--plan <FILE.json>", usage),
            );
        }
    }
    for command in ["sweep", "explore", "replay", "shrink"] {
        check_exact(
            &[command, "--faults", "process-crash", "--outage-ms", "100"],
            "error: --outage-ms is the length of a sink-unavailable fault, and --faults does not include sink-unavailable: drop --outage-ms or add sink-unavailable to --faults\n",
        );
    }
    // --shard prints JSON lines for `keel merge`, which renders, summarises and shrinks.
    check_exact(
        &["sweep", "--shard", "0/2", "--format", "csv"],
        &conflict("sweep", "--shard <i/n>", "--format <FORMAT>"),
    );
    for (option, usage) in [
        (&["--format", "json"][..], "--format <FORMAT>"),
        (&["--summary-only"][..], "--summary-only"),
        (&["--no-shrink"][..], "--no-shrink"),
    ] {
        let mut args = vec!["explore", "--shard", "0/2"];
        args.extend_from_slice(option);
        check_exact(&args, &conflict("explore", "--shard <i/n>", usage));
    }
    // A sweep's shards have no seeds to summarise or shrink.
    let (code, shard, _) = keel(&[
        "sweep",
        "--faults",
        "process-crash",
        "--shard",
        "0/1",
        "--quiet",
    ]);
    assert_eq!(code, Some(0));
    let shard_path = events_file("sweep-shard.jsonl", &shard);
    for option in ["--summary-only", "--no-shrink"] {
        check_exact(
            &["merge", &shard_path, option],
            &format!(
                "error: {option} applies to explore shards only; these are shards of a sweep, which has no seeds to shrink or summarise\n"
            ),
        );
    }
}

/// `keel fidelity power-cut` checks its options before it looks for the user-mode Linux
/// kernel, so these hold on a machine without it.
#[test]
fn power_cut_rejects_a_step_the_run_lacks_a_long_delay_a_profile_and_the_transactional_sink() {
    let power_cut = |extra: &[&str]| -> Vec<String> {
        ["fidelity", "power-cut", "--scenario", "ch04"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let check = |extra: &[&str], stderr: &str| {
        let args = power_cut(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        check_exact(&args, stderr);
    };
    check(
        &["--points", "3,59"],
        "error: --points 59: the append sink's fault-free run has no such step (it has 0 to 58)\n",
    );
    check(
        &["--delays-s", "0,61"],
        "error: --delays-s 61: at most 60 seconds\n",
    );
    check(
        &["--sinks", "transactional"],
        "error: keel fidelity power-cut: the transactional sink is simulation-only (its log is simulated)\n",
    );
    check(
        &["--fs-model", "xfs"],
        "error: keel fidelity power-cut takes no --fs-model xfs: it checks each file system against its own profile and against posix\n",
    );
    check(
        &["--shard", "0/2"],
        "error: keel fidelity power-cut takes no --shard: its wall times do not merge\n",
    );
}

/// `keel fidelity disk-error` checks its options before it looks for the user-mode Linux
/// kernel, so these hold on a machine without it.
#[test]
fn disk_error_rejects_a_step_that_is_no_fsync_a_profile_and_the_transactional_sink() {
    let check = |extra: &[&str], stderr: &str| {
        let args: Vec<&str> = ["fidelity", "disk-error", "--scenario", "ch04"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        check_exact(&args, stderr);
    };
    check(
        &["--points", "14,15"],
        "error: --points 15: not an fsync of a file in the append sink's fault-free run (those are steps 11,14,26,29,41,44,58)\n",
    );
    check(
        &["--fs", "ext4,btrfs", "--fs-model", "btrfs"],
        "error: keel fidelity disk-error takes no --fs-model btrfs: it checks each file system against its own profile\n",
    );
    check(
        &["--sinks", "transactional"],
        "error: keel fidelity disk-error: the transactional sink is simulation-only (its log is simulated)\n",
    );
    check(
        &["--shard", "0/2"],
        "error: keel fidelity disk-error takes no --shard: its wall times do not merge\n",
    );
}

/// `keel gen`: pinned bytes for a small seed, the same bytes twice, to a file or stdout.
#[test]
fn gen_writes_the_same_stream_for_the_same_seed() {
    let (code, stdout, stderr) = keel(&["gen", "--events", "5", "--seed", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "{\"ts\": 0, \"value\": 60}\n\
         {\"ts\": 0, \"value\": 72}\n\
         {\"ts\": 2, \"value\": 88}\n\
         {\"ts\": 1, \"value\": 58}\n\
         {\"ts\": -54, \"value\": 46}\n"
    );
    let (_, first, _) = keel(&["gen", "--events", "2000", "--seed", "9"]);
    let (_, second, _) = keel(&["gen", "--events", "2000", "--seed", "9"]);
    assert_eq!(first, second);
    let (_, other, _) = keel(&["gen", "--events", "2000", "--seed", "10"]);
    assert_ne!(first, other);
    let path = events_file("gen-out.jsonl", "");
    let (code, stdout, stderr) = keel(&["gen", "--events", "2000", "--seed", "9", "--out", &path]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
    // What gen writes, run reads.
    let (code, _, stderr) = keel(&["run", "--events", &path, "--allowed-lateness", "10"]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn gen_rejects_bad_options_by_name() {
    check_rejected(&["gen", "--events", "0"], &["--events", "got 0"]);
    check_rejected(
        &["gen", "--events", "1000001"],
        &["--events", "1000000", "got 1000001"],
    );
    check_rejected(&["gen"], &["--events"]);
    for fraction in ["1.5", "-0.1", "NaN"] {
        check_rejected(
            &["gen", "--events", "3", "--late-fraction", fraction],
            &["--late-fraction must be between 0 and 1"],
        );
    }
    check_rejected(
        &["gen", "--events", "3", "--out-of-orderness", "-1"],
        &["--out-of-orderness", "got -1"],
    );
    check_rejected(
        &["gen", "--events", "3", "--value-max", "0"],
        &["--value-max", "got 0"],
    );
    check_rejected(
        &["gen", "--events", "3", "--late-by-max", "0"],
        &["--late-by-max", "got 0"],
    );
    check_rejected(
        &["run", "--allowed-lateness", "-1"],
        &["--allowed-lateness", "got -1"],
    );
}

/// `keel bench --run-sizes`: one line per size, a child `keel run` timed with its peak RSS.
#[test]
fn bench_times_keel_run_on_each_size() {
    let (code, stdout, stderr) = keel(&[
        "bench",
        "--seeds",
        "0..1",
        "--real-points",
        "0",
        "--quiet",
        "--allowed-lateness",
        "100",
        "--run-sizes",
        "1000,2000",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("run ")).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, events) in lines.iter().zip(["1000", "2000"]) {
        assert!(
            line.starts_with(&format!("run events={events} elapsed=")),
            "{line}"
        );
        let rss: f64 = line
            .rsplit_once("peak_rss_mb=")
            .and_then(|(_, mb)| mb.parse().ok())
            .unwrap_or_else(|| panic!("no peak RSS in {line}"));
        assert!(rss > 0.0, "{line}");
    }
    check_rejected(&["bench", "--run-sizes", "0"], &["--run-sizes"]);
    check_rejected(&["bench", "--run-sizes", "1000001"], &["--run-sizes"]);
}

/// The `count` "sweep" lines `keel bench` prints with `extra` (its --sweep sizes and
/// options): no simulated seeds to speak of, no real sample, one job, and the naive sweep up
/// to 60 events.
fn bench_sweep_lines(extra: &[&str], count: usize) -> Vec<String> {
    let mut args = vec![
        "bench",
        "--seeds",
        "0..1",
        "--real-points",
        "0",
        "--quiet",
        "--jobs",
        "1",
        "--sweep-naive-max",
        "60",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = keel(&args);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with("sweep "))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), count, "{stdout}");
    lines
}

/// `keel bench --sweep`: one line per size, a child `keel sweep` of the process-crash points
/// timed with its peak RSS (the median of five where it is short), and up to --sweep-naive-max the naive sweep too, whose report
/// must be the same.
#[test]
fn bench_times_keel_sweep_on_each_size_and_the_naive_one_on_the_small() {
    let lines = bench_sweep_lines(&["--sweep", "60,120"], 2);
    for (line, start) in lines.iter().zip([
        "sweep events=60 faults=process-crash points=256 elapsed=",
        "sweep events=120 faults=process-crash points=516 elapsed=",
    ]) {
        assert!(line.starts_with(start), "{line}");
        assert!(line.contains(" peak_rss_mb="), "{line}");
        // Sweeps this short are timed as the median of five runs (each the same report).
        assert!(line.contains("s (median of 5 runs) "), "{line}");
    }
    assert!(
        lines[0].contains(" speed_up=") && lines[0].ends_with(" reports=identical"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].ends_with(" naive=not-run (more than --sweep-naive-max 60 events)"),
        "{}",
        lines[1]
    );
    check_rejected(&["bench", "--sweep", "0"], &["--sweep"]);
    check_rejected(&["bench", "--sweep", "1000001"], &["--sweep"]);
}

/// `--sweep-faults` and `--sweep-power-loss-points` reach the child sweep: 60 events have
/// 416 power-loss classes a sink (what `keel sweep --faults power-loss --power-loss-points
/// classes` counts on the same stream), and the naive sweep prints the same report.
#[test]
fn bench_sweeps_the_fault_kinds_it_is_given() {
    let lines = bench_sweep_lines(
        &[
            "--sweep",
            "60",
            "--sweep-faults",
            "power-loss",
            "--sweep-power-loss-points",
            "classes",
        ],
        1,
    );
    assert!(
        lines[0].starts_with(
            "sweep events=60 faults=power-loss power_loss_points=classes points=832 elapsed="
        ),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(" reports=identical"), "{}", lines[0]);
    check_rejected(&["bench", "--sweep-faults", "meteor"], &["--sweep-faults"]);
}

/// `--sweep-scenario` times `keel sweep` of the scenario itself, and `--sweep-depth` reaches
/// every child sweep: ch04 has 2,394 process-crash pairs a sink at depth 2 (what `keel sweep
/// --depth 2 --faults process-crash` counts), 60 generated events 19,480 in all, and each
/// naive sweep prints the same report. Classes at depth 2 pair process crashes and power
/// losses only, as in `keel sweep`.
#[test]
fn bench_sweeps_the_scenario_itself_and_at_depth_2() {
    let lines = bench_sweep_lines(
        &["--sweep-scenario", "--sweep", "60", "--sweep-depth", "2"],
        2,
    );
    for (line, start) in lines.iter().zip([
        "sweep events=60 faults=process-crash depth=2 points=19480 elapsed=",
        "sweep scenario=ch04 faults=process-crash depth=2 points=4788 elapsed=",
    ]) {
        assert!(line.starts_with(start), "{line}");
        assert!(line.ends_with(" reports=identical"), "{line}");
    }
    check_rejected(
        &[
            "bench",
            "--sweep",
            "60",
            "--sweep-depth",
            "2",
            "--sweep-faults",
            "process-crash,sink-error",
            "--sweep-power-loss-points",
            "classes",
        ],
        &["pairs process-crash and power-loss only, not sink-error"],
    );
    check_rejected(&["bench", "--sweep-depth", "3"], &["--sweep-depth"]);
}

/// A reader that stops early (`keel sweep | head -c 0`) closes the pipe before the report is
/// written: keel prints nothing more, does not panic, and keeps the verdict's exit code.
#[test]
fn a_closed_stdout_keeps_the_exit_code_and_does_not_panic() {
    for (command, code) in [
        ("sweep --faults process-crash --quiet", 0),
        (
            "sweep --checkpoint-protocol in-place --sinks idempotent --faults process-crash \
             --expect exactly-once --quiet",
            1,
        ),
    ] {
        let args: Vec<&str> = command.split_whitespace().collect();
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(&args)
            .stdout(writer)
            .output()
            .expect("keel runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "keel {args:?}: {stderr}");
        assert_eq!(stderr, "", "keel {args:?}");
    }
}

#[test]
fn a_lost_acknowledgement_shows_as_a_declined_checkpoint_and_replays() {
    // ch04 over two sources, seed 0: step 141 is the sink's acknowledgement of checkpoint 2
    // (`keel job run --trace`).
    let args = [
        "job",
        "run",
        "--fault",
        "message-lost",
        "--at-step",
        "141",
        "--checkpoint-timeout-ms",
        "100",
        "--expect",
        "exactly-once",
    ];
    let (code, stdout, stderr) = keel(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("fault: message-lost at step 141\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("checkpoints: completed=2 declined=1 "),
        "{stdout}"
    );
    assert!(
        stdout.contains("sink: written=3 skipped=0 committed_transactions=2\n"),
        "{stdout}"
    );
    let reproduce = stdout
        .lines()
        .find_map(|l| l.strip_prefix("reproduce: keel "))
        .expect("a reproduce line");
    assert!(
        reproduce.ends_with("--fault message-lost --at-step 141"),
        "{reproduce}"
    );
    let fingerprint = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("fingerprint="))
            .map(str::to_string)
    };
    let again = keel(&reproduce.split_whitespace().collect::<Vec<_>>());
    assert_eq!(again.0, Some(0));
    assert_eq!(fingerprint(&again.1), fingerprint(&stdout));
    // A job fault where it does not apply is said so; --delay-ms only with slow-channel.
    let (code, stdout, _) = keel(&["job", "run", "--fault", "message-lost", "--at-step", "2"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("fault: message-lost does not apply at step 2 (it ran without it)"),
        "{stdout}"
    );
    check_rejected(
        &[
            "job",
            "run",
            "--fault",
            "message-lost",
            "--at-step",
            "2",
            "--delay-ms",
            "5",
        ],
        &["--delay-ms is only for --fault slow-channel"],
    );
}

/// A keel killed while writing a file leaves `.<name>.keel-tmp-<pid>` beside it; the next
/// keel that writes the same path removes it (and writes the file whole).
#[test]
fn a_killed_writers_temp_file_is_removed_by_the_next_write() {
    let dir = std::env::temp_dir().join(format!("keel-cli-stale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join(".plan.json.keel-tmp-4194303");
    let other = dir.join(".other.json.keel-tmp-4194303");
    std::fs::write(&stale, "half a plan").unwrap();
    std::fs::write(&other, "another file's").unwrap();
    let plan = dir.join("plan.json");
    let (code, _, stderr) = keel(&[
        "run",
        "--fault",
        "process-crash",
        "--at-step",
        "20",
        "--save-plan",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stale.exists(), "the stale temp file of plan.json is left");
    assert!(
        other.exists(),
        "another path's temp file is not this write's to remove"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved["faults"][0]["step"], 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An option a command always refuses is not in its `--help`, and one it would ignore is
/// refused, not ignored.
#[test]
fn help_lists_no_option_the_command_refuses() {
    for (command, hidden) in [
        (
            &["fidelity", "power-cut"][..],
            &["--fs-model", "--shard"][..],
        ),
        (&["fidelity", "kill"], &["--seed", "--fs-model"]),
        (&["bench"], &["--seed "]),
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let (code, help, _) = keel(&args);
        assert_eq!(code, Some(0));
        for option in hidden {
            assert!(
                !help
                    .lines()
                    .any(|line| line.trim_start().starts_with(option)),
                "{command:?} --help lists {option}"
            );
        }
    }
    for (args, message) in [
        (
            &["fidelity", "kill", "--seed", "3"][..],
            "keel fidelity kill takes no --seed 3",
        ),
        (
            &["fidelity", "kill", "--fs-model", "ext4"],
            "keel fidelity kill takes no --fs-model",
        ),
    ] {
        let (code, stdout, stderr) = keel(args);
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{args:?}");
        assert!(stderr.starts_with(&format!("error: {message}")), "{stderr}");
    }
}

#[test]
fn a_field_written_twice_is_refused_naming_the_file_the_line_and_the_key() {
    let path = events_file(
        "duplicate.jsonl",
        "{\"ts\": 0, \"value\": 1}\n{\"ts\":1,\"ts\":2,\"value\":3}\n",
    );
    let expected =
        format!("error: {path}: line 2: duplicate field \"ts\" (each field appears once)\n");
    check_exact(&["run", "--events", &path], &expected);
    check_exact(&["job", "run", "--events", &path], &expected);
    let path = events_file(
        "duplicate-key.jsonl",
        "{\"ts\": 0, \"key\": \"a\", \"value\": 1, \"key\": \"b\"}\n",
    );
    check_exact(
        &["job", "run", "--events", &path],
        &format!("error: {path}: line 1: duplicate field \"key\" (each field appears once)\n"),
    );
}

#[test]
fn an_endless_or_overlong_input_is_refused_while_reading() {
    let limit = "line longer than 65536 bytes (an event takes one short line)";
    // Read whole, /dev/zero took 5 GB in 8 s (issue 56); now one line's worth.
    if cfg!(target_os = "linux") {
        check_exact(
            &["run", "--events", "/dev/zero"],
            &format!("error: /dev/zero: line 1: {limit}\n"),
        );
        check_exact(
            &["job", "run", "--events", "/dev/zero"],
            &format!("error: /dev/zero: line 1: {limit}\n"),
        );
    }
    let long = events_file(
        "long-line.jsonl",
        &format!(
            "{{\"ts\": 0, \"value\": 1}}\n{{\"ts\": 1, {}\"value\": 1}}\n",
            " ".repeat(65_536)
        ),
    );
    check_exact(
        &["run", "--events", &long],
        &format!("error: {long}: line 2: {limit}\n"),
    );
    // A line at the limit is an event like any other.
    let at_limit = events_file(
        "line-at-limit.jsonl",
        &format!(
            "{{\"ts\": 0,{}\"value\": 1}}\r\n",
            " ".repeat(65_536 - "{\"ts\": 0,\"value\": 1}".len())
        ),
    );
    let (code, _, stderr) = keel(&["run", "--events", &at_limit]);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    // Past 1,000,000 events reading stops at the first event too many.
    let many = "{\"ts\": 1, \"value\": 2}\n".repeat(1_000_001);
    assert_eq!(
        keel_with_stdin(&["run", "--events", "-"], many.as_bytes()),
        (
            Some(2),
            String::new(),
            "error: stdin: line 1000001: more than 1000000 events\n".to_string()
        )
    );
}

/// Every command that takes one-task `--events`.
const EVENTS_COMMANDS: [&str; 8] = [
    "run", "sites", "sweep", "explore", "replay", "shrink", "teach", "bench",
];

#[test]
fn events_on_stdin_are_read_by_every_command_as_a_file_is() {
    let bad = "{\"ts\": 0, \"value\": 1}\n{\"ts\":1,\"ts\":2,\"value\":3}\n";
    let mut commands: Vec<Vec<&str>> = EVENTS_COMMANDS.iter().map(|c| vec![*c]).collect();
    commands.push(vec!["job", "run"]);
    for command in commands {
        let args = [command.as_slice(), &["--events", "-"]].concat();
        assert_eq!(
            keel_with_stdin(&args, bad.as_bytes()),
            (
                Some(2),
                String::new(),
                "error: stdin: line 2: duplicate field \"ts\" (each field appears once)\n"
                    .to_string()
            ),
            "keel {args:?}"
        );
        assert_eq!(
            keel_with_stdin(&args, b"\n"),
            (
                Some(2),
                String::new(),
                "error: no events in stdin\n".to_string()
            ),
            "keel {args:?}"
        );
    }
    // The same events from a file or from stdin: the same run, the same fingerprint.
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/ch04.jsonl")).unwrap();
    let path = events_file("ch04-copy.jsonl", &text);
    let run = |events: &str| {
        let (code, stdout, stderr) = keel_with_stdin(
            &["run", "--events", events, "--crash-after-event", "14"],
            text.as_bytes(),
        );
        assert_eq!((code, stderr.as_str()), (Some(0), ""), "{stdout}");
        stdout
    };
    let fingerprint = |stdout: &str| {
        let line = stdout
            .lines()
            .find(|l| l.starts_with("fingerprint="))
            .unwrap();
        line.to_string()
    };
    let from_file = run(&path);
    let from_stdin = run("-");
    assert_eq!(fingerprint(&from_stdin), fingerprint(&from_file));
    assert_eq!(
        from_stdin
            .replace("scenario=- ", &format!("scenario={path} "))
            .replace("--events - ", &format!("--events {path} ")),
        from_file
    );
    // A job sweep builds a spec per mode on its events: stdin is read once for all of them.
    let sweep = |events: &str| {
        keel_with_stdin(
            &[
                "job",
                "sweep",
                "--events",
                events,
                "--modes",
                "aligned,unaligned",
                "--schedules",
                "2",
            ],
            text.as_bytes(),
        )
    };
    let (code, from_stdin, stderr) = sweep("-");
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    assert_eq!(from_stdin, sweep(&path).1.replace(&path, "-"));
}

#[test]
fn a_plan_saved_from_stdin_replays_from_stdin_and_refuses_other_events() {
    use keel_engine::Event;
    use keel_scenarios::catalogue::events_digest;
    let events = |value: i64| {
        (
            format!("{{\"ts\":1,\"value\":{value}}}\n{{\"ts\":2,\"value\":2}}\n"),
            events_digest(&[Event { ts: 1, value }, Event { ts: 2, value: 2 }]).to_string(),
        )
    };
    let (text, digest) = events(1);
    let plan = events_file("stdin-plan.json", "");
    let (code, ran, stderr) = keel_with_stdin(
        &[
            "run",
            "--events",
            "-",
            "--crash-after-event",
            "1",
            "--format",
            "json",
            "--save-plan",
            &plan,
        ],
        text.as_bytes(),
    );
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let ran: serde_json::Value = serde_json::from_str(&ran).unwrap();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved["spec"]["events"], "-");
    assert_eq!(saved["spec"]["events_digest"], digest.as_str());
    // The plan's events are read from stdin again, and must be the same.
    let (code, replayed, stderr) = keel_with_stdin(
        &["replay", "--plan", &plan, "--format", "json"],
        text.as_bytes(),
    );
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let replayed: serde_json::Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(replayed["fingerprint"], ran["fingerprint"]);
    let (other, other_digest) = events(100);
    assert_eq!(
        keel_with_stdin(&["replay", "--plan", &plan], other.as_bytes()),
        (
            Some(2),
            String::new(),
            format!(
                "error: {plan}: the events on stdin (--events -) changed since it was recorded here: recorded events digest {digest}, events digest now {other_digest} (give back the events it was recorded with, or run again on these)\n"
            )
        )
    );
    check_exact(
        &["replay", "--plan", &plan],
        &format!("error: {plan}: no events in stdin\n"),
    );
    // A job plan alike.
    let job_plan = events_file("stdin-job-plan.json", "");
    let job = [
        "job",
        "run",
        "--events",
        "-",
        "--fault",
        "process-crash",
        "--at-step",
        "30",
        "--save-plan",
        &job_plan,
    ];
    let (code, job_ran, stderr) = keel_with_stdin(&job, text.as_bytes());
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&job_plan).unwrap()).unwrap();
    assert_eq!(saved["job"]["events"], "-");
    let (code, job_replayed, stderr) =
        keel_with_stdin(&["replay", "--plan", &job_plan], text.as_bytes());
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let fingerprint = |out: &str| {
        out.split_whitespace()
            .find(|w| w.starts_with("fingerprint="))
            .map(str::to_string)
    };
    assert!(fingerprint(&job_ran).is_some(), "{job_ran}");
    assert_eq!(fingerprint(&job_replayed), fingerprint(&job_ran));
    let (code, _, stderr) = keel_with_stdin(&["replay", "--plan", &job_plan], other.as_bytes());
    assert_eq!(code, Some(2));
    assert!(
        stderr.starts_with(&format!(
            "error: {job_plan}: the events changed since the plan was saved"
        )),
        "{stderr}"
    );
}

/// A plan file is read up to a bound, not whole: an endless one is refused, naming it.
#[test]
fn an_endless_plan_file_is_refused_not_read_whole() {
    let (code, stdout, stderr) = keel(&["replay", "--plan", "/dev/zero"]);
    assert_eq!((code, stdout.as_str()), (Some(2), ""));
    assert_eq!(
        stderr,
        "error: /dev/zero: passes 16777216 bytes: not a plan file\n"
    );
}

/// A sweep says on stderr how many points it plans before it starts, piped or not, and
/// past eight chunks how long that is at a measured warm-up's rate; `--quiet` says nothing.
/// Stdout is the report either way.
#[test]
fn a_sweep_prints_its_planned_points_on_stderr_unless_quiet() {
    let small = ["sweep", "--faults", "process-crash", "--sinks", "append"];
    let (code, report, stderr) = keel(&small);
    assert_eq!(
        (code, stderr.as_str()),
        (
            Some(0),
            "sweep: 59 points planned (append process-crash 59)\n"
        )
    );
    let mut quiet = small.to_vec();
    quiet.push("--quiet");
    assert_eq!(keel(&quiet), (Some(0), report, String::new()));

    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("planned-5000.jsonl");
    let path = path.to_str().unwrap();
    let generated = keel(&["gen", "--events", "5000", "--seed", "1", "--out", path]);
    assert_eq!(generated.0, Some(0));
    let large = [
        "sweep",
        "--events",
        path,
        "--faults",
        "process-crash",
        "--sinks",
        "append",
    ];
    let (code, report, stderr) = keel(&large);
    assert_eq!(code, Some(0));
    let estimate = stderr
        .strip_prefix("sweep: 10,345 points planned (append process-crash 10,345); at about ")
        .unwrap_or_else(|| panic!("{stderr}"));
    let (rate, rest) = estimate.split_once(" points/s, ").expect("a rate");
    assert!(
        rate.chars().all(|c| c.is_ascii_digit() || c == ','),
        "{rate}"
    );
    let rest = rest
        .strip_prefix("measured on a warm-up run of its first 1,024 points on one thread (later points may run faster or slower), this is about ")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        rest.ends_with(" on one thread; --faults, --sinks or --shard reduce it\n"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let mut quiet = large.to_vec();
    quiet.push("--quiet");
    assert_eq!(keel(&quiet), (Some(0), report, String::new()));
}

/// A stream with more checkpoints than the transactional log registers ids is refused
/// before it runs, naming the interval that fits (the log's assertion panicked mid-run).
#[test]
fn the_transactional_sink_refuses_more_checkpoints_than_its_log_has_ids() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ids-10000.jsonl");
    let path = path.to_str().unwrap();
    let generated = keel(&["gen", "--events", "10000", "--seed", "1", "--out", path]);
    assert_eq!(generated.0, Some(0));
    let run = |every: &str| {
        keel(&[
            "run",
            "--sink",
            "transactional",
            "--events",
            path,
            "--checkpoint-every",
            every,
        ])
    };
    assert_eq!(
        run("1"),
        (
            Some(2),
            String::new(),
            "error: the transactional sink registers a transactional id a checkpoint and its log holds at most 10000: 10000 events with a checkpoint every 1 need 10001; use --checkpoint-every 2 or more\n".to_string()
        )
    );
    assert_eq!(run("2").0, Some(0));
    // `keel teach` sweeps the transactional sink too, and refuses the stream before any run.
    assert_eq!(
        keel(&["teach", "--events", path, "--checkpoint-every", "1"]),
        run("1")
    );
}
