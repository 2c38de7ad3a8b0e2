//! The Flink differential (issue 52, figure 4): fault-free, a keyed parallel job equals real
//! Apache Flink with `keyBy`, the same parallelism and per-key tumbling event-time windows.
//!
//! 320 random keyed streams (seeded ChaCha8, so the same streams every run) in 4 groups of
//! (P sources, M parallelism, window W, out-of-orderness D). Each group is one call of
//! `scripts/flink/keyed_windows.py` (one Flink job for the group: Flink takes seconds to
//! start). Every stream also runs through keel's job runner, fault-free, under a random
//! schedule, with the sink rotating over the three kinds. Compared per stream: the multiset
//! of (key, window_end, sum) fired, and per key the order of window_end. When they differ,
//! the message also says which side matches the order-free model (per (key, window) the sum
//! of its events), so it tells which engine is wrong.
//!
//! The streams keep the harness's contract: within each partition no event is more than D
//! behind that partition's max ts so far (about 15% sit exactly D behind, the boundary), so
//! no event is late in either engine and each (key, window) fires exactly once (mid-stream
//! or in the final flush). keel's records with seq > 0 (late updates) would be a difference.
//!
//! Runs when PyFlink is installed (`scripts/flink/install.sh`: a venv in `~/.keel-flink-venv`,
//! or `$KEEL_FLINK_VENV`, or `$KEEL_FLINK_PYTHON`, or a `python3` that imports pyflink);
//! otherwise it says on stderr that it was skipped and passes. `KEEL_FLINK_KEEP=1` keeps the
//! stream directory (otherwise removed).
//!
//! One of the long tests (`--features long-tests`: CI runs them, `cargo test --workspace`
//! does not).
#![cfg(feature = "long-tests")]

use keel_engine::job::{JobConfig, JobSinkKind, KeyedEvent};
use keel_scenarios::graph::oracle::{model, sink_records};
use keel_scenarios::graph::{run, GraphOutcome, GraphSpec};
use keel_sim::disk::FsModel;
use keel_sim::{FaultPlan, SchedulePolicy};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One Flink job's worth of streams: (P, M, W, D) are per call of the script.
struct Group {
    sources: u32,
    parallelism: u32,
    window: i64,
    out_of_orderness: i64,
}

/// Every P in 1..=3 and every M in 1..=4 appears; D = 0 (in order per partition), D < W,
/// D > W.
const GROUPS: [Group; 4] = [
    Group {
        sources: 1,
        parallelism: 3,
        window: 10,
        out_of_orderness: 5,
    },
    Group {
        sources: 2,
        parallelism: 1,
        window: 7,
        out_of_orderness: 0,
    },
    Group {
        sources: 2,
        parallelism: 4,
        window: 5,
        out_of_orderness: 12,
    },
    Group {
        sources: 3,
        parallelism: 2,
        window: 20,
        out_of_orderness: 3,
    },
];
const STREAMS_PER_GROUP: usize = 80;
const EVENTS_MIN: u64 = 5;
const EVENTS_MAX: u64 = 200;
const KEYS: [&str; 6] = ["a", "b", "k2", "user-7", "", "ü"];

/// A uniform draw from `[0, bound)`.
fn below(rng: &mut ChaCha8Rng, bound: u64) -> u64 {
    assert!(bound > 0);
    ((u128::from(rng.next_u64()) * u128::from(bound)) >> 64) as u64
}

/// A uniform draw from `[lo, hi]`.
fn between(rng: &mut ChaCha8Rng, lo: i64, hi: i64) -> i64 {
    lo + below(rng, (hi - lo + 1) as u64) as i64
}

/// One random stream of `group`'s shape; within each partition no event is more than D
/// behind the partition's max so far.
fn gen_stream(rng: &mut ChaCha8Rng, group: &Group) -> Vec<KeyedEvent> {
    let (w, d) = (group.window, group.out_of_orderness);
    let n = EVENTS_MIN + below(rng, EVENTS_MAX - EVENTS_MIN + 1);
    let mut used: Vec<u32> = (0..group.sources).collect();
    if group.sources > 1 && below(rng, 4) == 0 {
        // Leave some partitions empty.
        let keep = 1 + below(rng, u64::from(group.sources) - 1) as usize;
        while used.len() > keep {
            used.remove(below(rng, used.len() as u64) as usize);
        }
    }
    let mut keys: Vec<&str> = KEYS.to_vec();
    let key_count = 1 + below(rng, KEYS.len() as u64) as usize;
    while keys.len() > key_count {
        keys.remove(below(rng, keys.len() as u64) as usize);
    }
    let base = between(rng, -300, 300);
    let mut max_ts: BTreeMap<u32, i64> = BTreeMap::new();
    let mut events = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let partition = used[below(rng, used.len() as u64) as usize];
        let ts = match max_ts.get(&partition) {
            None => base + between(rng, -d, 3 * w),
            Some(&m) => match below(rng, 100) {
                0..=14 => m - d,                            // exactly at the bound
                15..=54 => m + between(rng, 0, 2 * w),      // forward
                55..=59 => m + between(rng, 5 * w, 20 * w), // a gap of empty windows
                _ => between(rng, m - d, m),                // out of order, within D
            },
        };
        let m = max_ts.entry(partition).or_insert(ts);
        *m = (*m).max(ts);
        events.push(KeyedEvent {
            ts,
            key: keys[below(rng, keys.len() as u64) as usize].to_string(),
            value: between(rng, -5, 20),
            partition,
        });
    }
    events
}

fn to_jsonl(events: &[KeyedEvent]) -> String {
    let mut text = String::new();
    for e in events {
        text.push_str(
            &serde_json::json!({"ts": e.ts, "key": e.key, "value": e.value, "partition": e.partition})
                .to_string(),
        );
        text.push('\n');
    }
    text
}

/// A python that imports pyflink, the way `keyed_windows.py` looks for one.
fn flink_python() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let venv = match std::env::var_os("KEEL_FLINK_VENV") {
        Some(v) => Some(PathBuf::from(v)),
        None => home.map(|h| h.join(".keel-flink-venv")),
    };
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("KEEL_FLINK_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    if let Some(v) = venv {
        candidates.push(v.join("bin").join("python"));
    }
    candidates.push(PathBuf::from("python3"));
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import pyflink"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Removes the stream directory when the test ends, panic or not (unless KEEL_FLINK_KEEP).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("KEEL_FLINK_KEEP").is_some() {
            eprintln!("Flink differential: kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

type Fired = (String, i64, i128);

/// What keel's consumer sees for `events`, fault-free: the first record (seq 0) of each
/// window, in sink order, and how many later records (late updates) there were.
fn keel_fired(
    events: &[KeyedEvent],
    group: &Group,
    sink: JobSinkKind,
    seed: u64,
) -> (Vec<Fired>, usize) {
    let spec = GraphSpec {
        events: events.to_vec().into(),
        config: JobConfig {
            sources: group.sources,
            parallelism: group.parallelism,
            window_size: group.window,
            out_of_orderness: group.out_of_orderness,
            sink,
            ..JobConfig::default()
        },
        plan: FaultPlan::none(),
        seed,
        schedule: SchedulePolicy::Random,
        script: Vec::new(),
        round_robin_after_script: false,
        restart_delay_ms: 500,
        fs_model: FsModel::Posix,
    };
    spec.config.validate().expect("the group's config is valid");
    let ran = run(&spec);
    assert_eq!(
        ran.outcome,
        GraphOutcome::Completed,
        "keel's job did not complete (seed {seed})"
    );
    assert!(
        ran.crashes.is_empty(),
        "a fault-free run crashed (seed {seed})"
    );
    let (records, corrupt) = sink_records(&ran, sink);
    assert_eq!(
        corrupt, 0,
        "a fault-free sink has a line that is no record (seed {seed})"
    );
    let late = records.iter().filter(|r| r.seq != 0).count();
    let fired = records
        .into_iter()
        .filter(|r| r.seq == 0)
        .map(|r| (r.key, r.window_end, r.sum))
        .collect();
    (fired, late)
}

fn parse_flink_output(path: &Path) -> Vec<Fired> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("Flink wrote no output {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: bad line {line:?}: {e}", path.display()));
            (
                v["key"].as_str().expect("key is a string").to_string(),
                v["window_end"].as_i64().expect("window_end is an integer"),
                i128::from(v["sum"].as_i64().expect("sum is an integer")),
            )
        })
        .collect()
}

fn sorted(fired: &[Fired]) -> Vec<Fired> {
    let mut all = fired.to_vec();
    all.sort();
    all
}

/// Per key, the window ends in the order they were fired.
fn order_per_key(fired: &[Fired]) -> BTreeMap<String, Vec<i64>> {
    let mut order: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (key, end, _) in fired {
        order.entry(key.clone()).or_default().push(*end);
    }
    order
}

/// Entries of `a` not in `b` (as multisets), at most `limit`.
fn missing_from(a: &[Fired], b: &[Fired], limit: usize) -> Vec<Fired> {
    let mut counts: BTreeMap<&Fired, i64> = BTreeMap::new();
    for f in b {
        *counts.entry(f).or_insert(0) += 1;
    }
    let mut out = Vec::new();
    for f in a {
        let c = counts.entry(f).or_insert(0);
        if *c > 0 {
            *c -= 1;
        } else if out.len() < limit {
            out.push(f.clone());
        }
    }
    out
}

/// Why keel's and Flink's outputs for one stream differ, or None.
fn compare(
    keel: &[Fired],
    keel_late: usize,
    flink: &[Fired],
    expected: &[Fired],
) -> Option<String> {
    let mut why = Vec::new();
    if keel_late > 0 {
        why.push(format!(
            "keel emitted {keel_late} late update(s) (seq > 0); the stream has no late event"
        ));
    }
    let (keel_sorted, flink_sorted) = (sorted(keel), sorted(flink));
    if keel_sorted != flink_sorted {
        why.push(format!(
            "multiset differs: keel {} records, flink {}; only keel {:?}; only flink {:?}; keel {} the model, flink {} the model",
            keel.len(),
            flink.len(),
            missing_from(&keel_sorted, &flink_sorted, 4),
            missing_from(&flink_sorted, &keel_sorted, 4),
            if keel_sorted == expected { "matches" } else { "differs from" },
            if flink_sorted == expected { "matches" } else { "differs from" },
        ));
    }
    let (keel_order, flink_order) = (order_per_key(keel), order_per_key(flink));
    for (key, ends) in &keel_order {
        let flink_ends = flink_order.get(key).cloned().unwrap_or_default();
        if *ends != flink_ends {
            let increasing = |v: &[i64]| v.windows(2).all(|p| p[0] < p[1]);
            why.push(format!(
                "key {key:?}: keel fired ends {ends:?} (increasing: {}), flink {flink_ends:?} (increasing: {})",
                increasing(ends),
                increasing(&flink_ends)
            ));
            break;
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[test]
fn long_fault_free_keyed_jobs_equal_real_flink() {
    let Some(python) = flink_python() else {
        eprintln!(
            "SKIPPED: Flink differential (PyFlink not installed: run scripts/flink/install.sh)"
        );
        return;
    };
    let started = Instant::now();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/flink/keyed_windows.py");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let root = TempDir(std::env::temp_dir().join(format!(
        "keel-flink-differential-{}-{nanos}",
        std::process::id()
    )));
    std::fs::create_dir_all(&root.0).unwrap();

    let mut rng = ChaCha8Rng::seed_from_u64(52);
    let mut compared = 0usize;
    let mut events_total = 0usize;
    let mut windows_total = 0usize;
    let mut differing: Vec<String> = Vec::new();
    let (mut keel_secs, mut flink_wait_secs) = (0f64, 0f64);
    for (g, group) in GROUPS.iter().enumerate() {
        let dir = root.0.join(format!("group{g}"));
        std::fs::create_dir_all(&dir).unwrap();
        let streams: Vec<Vec<KeyedEvent>> = (0..STREAMS_PER_GROUP)
            .map(|_| gen_stream(&mut rng, group))
            .collect();
        for (i, events) in streams.iter().enumerate() {
            std::fs::write(dir.join(format!("s{i:03}.jsonl")), to_jsonl(events)).unwrap();
        }
        // Flink runs (a child process) while keel runs the same streams here.
        let flink = Command::new(&python)
            .arg(&script)
            .arg("--streams")
            .arg(&dir)
            .args(["--sources", &group.sources.to_string()])
            .args(["--parallelism", &group.parallelism.to_string()])
            .args(["--window", &group.window.to_string()])
            .args(["--out-of-orderness", &group.out_of_orderness.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
        let keel_started = Instant::now();
        let keel: Vec<(Vec<Fired>, usize)> = streams
            .iter()
            .enumerate()
            .map(|(i, events)| {
                let sink = JobSinkKind::ALL[i % JobSinkKind::ALL.len()];
                keel_fired(events, group, sink, (g * 1000 + i) as u64)
            })
            .collect();
        keel_secs += keel_started.elapsed().as_secs_f64();
        let wait_started = Instant::now();
        let out = flink.wait_with_output().expect("the Flink script ran");
        flink_wait_secs += wait_started.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "keyed_windows.py failed ({}) on group {g} (P={} M={} W={} D={}):\n{stdout}\n{}",
            out.status,
            group.sources,
            group.parallelism,
            group.window,
            group.out_of_orderness,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("group {g}: {}", stdout.trim());
        for (i, (events, (keel_out, keel_late))) in streams.iter().zip(&keel).enumerate() {
            let flink_out = parse_flink_output(&dir.join(format!("s{i:03}.out.jsonl")));
            let expected: Vec<Fired> = model(events, group.window)
                .into_iter()
                .map(|((key, end), sum)| (key, end, sum))
                .collect();
            compared += 1;
            events_total += events.len();
            windows_total += flink_out.len();
            if let Some(why) = compare(keel_out, *keel_late, &flink_out, &expected) {
                differing.push(format!(
                    "group {g} (P={} M={} W={} D={}) stream s{i:03} ({} events, sink {}, seed {}): {why}",
                    group.sources,
                    group.parallelism,
                    group.window,
                    group.out_of_orderness,
                    events.len(),
                    JobSinkKind::ALL[i % JobSinkKind::ALL.len()],
                    g * 1000 + i
                ));
            }
        }
    }
    eprintln!(
        "Flink differential: {compared} streams compared ({events_total} events, {windows_total} windows fired by Flink) \
         in {} Flink jobs, {} differ; keel {keel_secs:.1}s, waited for Flink {flink_wait_secs:.1}s, total {:.1}s",
        GROUPS.len(),
        differing.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        compared >= 300,
        "the figure asks for at least 300 streams, compared {compared}"
    );
    assert!(
        differing.is_empty(),
        "{} of {compared} streams differ between keel and Flink; the first few:\n{}",
        differing.len(),
        differing
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
