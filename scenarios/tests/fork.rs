//! The default sweep (each point forked from a snapshot of the fault-free run, stopped where
//! it converges on it) against `keel sweep --naive` (every point from scratch to its end):
//! the same JSON report, row for row and figure for figure, fingerprint included, on ch04
//! under every protocol and on random streams under random knobs; and on large streams,
//! a slice of the points (`--shard`) compared point for point.

mod common;

use clap::Parser;
use common::{keel_stdout, random_stream, PROTOCOLS};
use keel_scenarios::cli::Cli;
use serde_json::Value;
use std::path::PathBuf;

const SINKS: [&str; 3] = ["append", "idempotent", "transactional"];

fn keel(args: &[String]) -> String {
    keel_stdout(args)
}

fn write(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fork-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// The one helper: the sweep `args` describe, by default and with `--naive`, must print the
/// same report. Returns it, parsed.
fn check(args: &[String]) -> Value {
    let mut sweep = vec!["sweep".to_string(), "--quiet".to_string()];
    sweep.extend_from_slice(args);
    sweep.extend(["--format", "json"].map(String::from));
    let fast = keel(&sweep);
    sweep.push("--naive".to_string());
    let naive = keel(&sweep);
    assert!(fast == naive, "{args:?}:\n{fast}\n---- naive:\n{naive}");
    serde_json::from_str(&fast).unwrap()
}

/// A shard's point lines, without the trace fingerprint (a converged point has none).
fn shard_points(out: &str) -> Vec<Value> {
    out.lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if value["type"] == "point" {
                value.as_object_mut().unwrap().remove("fingerprint");
            }
            value
        })
        .collect()
}

/// A small generator of knobs (not the stream's: `random_stream` has its own).
struct Knobs(u64);

impl Knobs {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ch04_every_protocol_and_sink_the_same_report() {
    for protocol in PROTOCOLS {
        let report = check(&strings(&[
            "--checkpoint-protocol",
            protocol,
            "--sinks",
            "append,idempotent,transactional",
            "--power-loss-states-max",
            "8",
        ]));
        assert!(!report["rows"].as_array().unwrap().is_empty());
    }
    // Incremental checkpoints: the chain (changed windows, committed chain, known files)
    // is part of what converging compares; every protocol with an incremental form.
    for protocol in PROTOCOLS
        .iter()
        .filter(|&&p| p != "in-place")
        .chain(&["no-delta-fsync"])
    {
        check(&strings(&[
            "--state-backend",
            "incremental",
            "--checkpoint-protocol",
            protocol,
            "--sinks",
            "append,idempotent,transactional",
            "--power-loss-states-max",
            "8",
        ]));
    }
    // Processing-time keys: the clock is observed, so points converge only on equal clocks.
    check(&strings(&[
        "--key",
        "processing-time",
        "--sinks",
        "append,idempotent",
        "--faults",
        "process-crash,sink-unavailable,ack-lost",
    ]));
    // A transaction timeout shorter than a checkpoint interval: the fault-free run itself
    // restarts (the log aborts its transactions), so only its first incarnation forks.
    check(&strings(&[
        "--sinks",
        "transactional,append",
        "--transaction-timeout-ms",
        "2000",
        "--faults",
        "process-crash,sink-error",
    ]));
    // A failed fsync's bytes stay in the page cache until an eviction or the end of the
    // run drops them: a point holding such bytes must not converge (the append sink's file
    // is compared emptied, which once hid them).
    for protocol in [
        "safe",
        "trust-page-cache-after-eio",
        "checkpoint-before-sink-sync",
    ] {
        check(&strings(&[
            "--checkpoint-protocol",
            protocol,
            "--depth",
            "2",
            "--sinks",
            "append,idempotent",
            "--faults",
            "disk-error,page-eviction",
        ]));
    }
    // Allowed lateness: windows purged once the watermark passes end + L, later events
    // dropped and counted (part of the operator state converging compares).
    for lateness in ["0", "2"] {
        check(&strings(&[
            "--allowed-lateness",
            lateness,
            "--sinks",
            "append,idempotent,transactional",
            "--faults",
            "process-crash,power-loss,disk-error,sink-error",
            "--power-loss-states-max",
            "4",
        ]));
    }
    // Depth 2: a second fault after the first, at every step of the run the first changed.
    check(&strings(&[
        "--depth",
        "2",
        "--sinks",
        "append,idempotent,transactional",
        "--faults",
        "process-crash,sink-error",
    ]));
}

/// 60 random streams of up to 80 events under random knobs, protocols, sinks, key schemes
/// and fault kinds, one in three with an allowed lateness of 0 to 5, one in four with
/// incremental checkpoints; the short ones also at depth 2. A property test: `KEEL_FORK_CASES=N`
/// generates N cases instead (`KEEL_FORK_SEED=S` another series), e.g. for an hour-long run.
#[test]
fn random_streams_the_same_report() {
    let faults = [
        "process-crash",
        "power-loss",
        "disk-error",
        "sink-error",
        "ack-lost",
        "sink-unavailable",
        "zombie",
    ];
    let number = |name: &str, default: u64| {
        std::env::var(name).map_or(default, |v| v.parse().expect("a number"))
    };
    let (cases, series) = (number("KEEL_FORK_CASES", 60), number("KEEL_FORK_SEED", 0));
    let mut knobs = Knobs(11 ^ series);
    for case in (0..cases).map(|case| case + series * 1_000_000) {
        let depth = if case % 6 == 0 { 2 } else { 1 };
        let len = if depth == 2 {
            4 + knobs.below(9)
        } else {
            1 + knobs.below(80)
        };
        let events = write(
            &format!("random-{case}.jsonl"),
            &random_stream(case, len as usize),
        );
        let mut chosen: Vec<&str> = (0..2).map(|_| knobs.pick(&faults)).collect();
        chosen.dedup();
        let mut args = strings(&[
            "--events",
            &events,
            "--window",
            &(1 + knobs.below(20)).to_string(),
            "--out-of-orderness",
            &knobs.below(8).to_string(),
            "--checkpoint-every",
            &(1 + knobs.below(12)).to_string(),
            "--checkpoint-protocol",
            knobs.pick(&PROTOCOLS),
            "--sinks",
            knobs.pick(&SINKS),
            "--key",
            knobs.pick(&["event-index", "event-index", "processing-time"]),
            "--faults",
            &chosen.join(","),
            "--depth",
            &depth.to_string(),
            "--power-loss-states-max",
            "3",
            "--seed",
            &case.to_string(),
        ]);
        if case % 5 == 0 {
            args.extend(strings(&["--restart-delay-ms", "0"]));
        }
        if case % 3 == 1 {
            // Its own generator, so the other knobs stay those of the cases before it.
            let lateness = Knobs(case).below(6);
            args.extend(strings(&["--allowed-lateness", &lateness.to_string()]));
        }
        // One in four with incremental checkpoints, where the protocol has that form.
        if case % 4 == 2 && !args.iter().any(|a| a == "in-place") {
            args.extend(strings(&["--state-backend", "incremental"]));
        }
        check(&args);
    }
}

/// Streams of 1,000 to 2,000 events, two with an allowed lateness: one slice of their points
/// each (`--shard`), the same point records by default and with `--naive` (but for the trace
/// fingerprint a converged point does not have).
#[test]
fn large_streams_the_same_points() {
    for (seed, len, sink, protocol, shard, lateness) in [
        (101, 2_000, "append", "safe", "17/400", None),
        (102, 1_500, "idempotent", "no-fsync-rename", "3/300", None),
        (
            103,
            1_000,
            "append",
            "checkpoint-before-sink-sync",
            "250/300",
            None,
        ),
        (104, 2_000, "idempotent", "safe", "301/400", Some("4")),
        (105, 1_000, "append", "in-place", "120/300", Some("0")),
    ] {
        let events = write(&format!("large-{seed}.jsonl"), &random_stream(seed, len));
        let mut sweep = strings(&[
            "sweep",
            "--quiet",
            "--events",
            &events,
            "--checkpoint-every",
            "50",
            "--checkpoint-protocol",
            protocol,
            "--sinks",
            sink,
            "--faults",
            "process-crash,power-loss",
            "--power-loss-states-max",
            "2",
            "--shard",
            shard,
        ]);
        if let Some(lateness) = lateness {
            sweep.extend(strings(&["--allowed-lateness", lateness]));
        }
        let fast = shard_points(&keel(&sweep));
        sweep.push("--naive".to_string());
        let naive = shard_points(&keel(&sweep));
        assert!(fast.len() > 1, "{seed}: a slice of points");
        assert_eq!(fast, naive, "{seed}");
    }
}

/// What a slice of points (`--shard`) came to: points, those that converged (no trace
/// fingerprint), those that left files beside the sink (`stray_files`, what bounded-disk
/// judges), and those that did both.
fn tally(out: &str) -> [usize; 4] {
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let points: Vec<&Value> = lines.iter().filter(|v| v["type"] == "point").collect();
    let converged = |v: &Value| v.get("fingerprint").is_none();
    let stray = |v: &Value| v["outcome"].as_str().unwrap().contains("stray_files=");
    [
        points.len(),
        points.iter().filter(|v| converged(v)).count(),
        points.iter().filter(|v| stray(v)).count(),
        points.iter().filter(|v| converged(v) && stray(v)).count(),
    ]
}

/// bounded-disk: a point that leaves a file the fault-free run does not (an older checkpoint
/// a recovery keeps where it cannot trust that the newest is durable; a `.tmp` it removes,
/// which made 18 and 8 more stray before it did) has a disk that differs from the fault-free
/// run's at every boundary after, so it never converges, and its stray-file count is the
/// naive one; a point that converged has the fault-free run's files, none stray. A point
/// that shares the future of an earlier point that ran to its end has that point's files,
/// strays too.
/// With and without an allowed lateness, judged by exactly-once and bounded-disk.
#[test]
fn stray_files_are_counted_as_the_naive_sweep_counts_them() {
    let gen = strings(&[
        "gen",
        "--events",
        "150",
        "--seed",
        "3",
        "--late-by-max",
        "20",
    ]);
    let events = write("gen-150.jsonl", &keel(&gen));
    let (mut wanted, mut got) = (Vec::new(), Vec::new());
    for (protocol, lateness, expected) in [
        ("size-only", None, [1640, 1333, 158, 2]),
        ("size-only", Some("3"), [1568, 1354, 126, 2]),
        // A power loss leaves every file durable, which the fault-free run's disk never
        // is; disks are compared as the process sees them (names and bytes), so those
        // points converge too (733 and 725 stopped early when the durable state was
        // compared as well). 1,632 converged before posix had btrfs's cuts that keep an
        // unlink a later fsync logged (with no directory fsync they pile up, and a point's
        // last state, one of the two drawn, moved).
        ("no-dir-fsync", None, [1640, 1633, 2, 0]),
        ("no-dir-fsync", Some("0"), [1538, 1531, 2, 0]),
    ] {
        let mut sweep = strings(&[
            "sweep",
            "--quiet",
            "--events",
            &events,
            "--checkpoint-every",
            "10",
            "--checkpoint-protocol",
            protocol,
            "--sinks",
            "append,idempotent",
            "--faults",
            "process-crash,power-loss",
            "--power-loss-states-max",
            "2",
            "--expect",
            "exactly-once,bounded-disk",
            "--shard",
            "0/1",
        ]);
        if let Some(lateness) = lateness {
            sweep.extend(strings(&["--allowed-lateness", lateness]));
        }
        let fast = keel(&sweep);
        let figures = tally(&fast);
        // Which points share an earlier point's future (and so have no trace fingerprint)
        // is the same on one thread as on two: every record is.
        let mut one_thread = sweep.clone();
        one_thread.extend(strings(&["--jobs", "1"]));
        let mut two_threads = sweep.clone();
        two_threads.extend(strings(&["--jobs", "2"]));
        assert_eq!(keel(&one_thread), keel(&two_threads), "{protocol}");
        sweep.push("--naive".to_string());
        let naive = keel(&sweep);
        assert_eq!(shard_points(&fast), shard_points(&naive), "{protocol}");
        // Points, stopped early, stray, both; and stray by the naive sweep.
        wanted.push((protocol, lateness, expected, expected[2]));
        got.push((protocol, lateness, figures, tally(&naive)[2]));
    }
    assert_eq!(got, wanted);
}

/// `--naive` names the sweep's reference algorithm; explore never forks, so it has none.
#[test]
fn naive_is_a_sweep_option_only() {
    assert!(Cli::try_parse_from(["keel", "sweep", "--naive"]).is_ok());
    let refused = Cli::try_parse_from(["keel", "explore", "--naive"]).unwrap_err();
    assert_eq!(refused.kind(), clap::error::ErrorKind::UnknownArgument);
}
