//! Same inputs, same trace, same fingerprint: on every run, machine and Rust version.

mod common;

use keel_engine::{CheckpointProtocol, EngineConfig, Event, KeyScheme, SinkKind, StateBackend};
use keel_scenarios::catalogue::Scenario;
use keel_scenarios::report::{plan_for_crash, CrashRequest};
use keel_scenarios::runner::{run, run_recording_crash_states, run_streaming_trace, RunSpec};
use keel_sim::disk::FsModel;
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

fn spec(sink: SinkKind, plan: FaultPlan) -> RunSpec {
    RunSpec {
        events: Scenario::by_name("ch04").unwrap().events().into(),
        config: EngineConfig {
            sink,
            ..EngineConfig::default()
        },
        plan,
        seed: 0,
        restart_delay_ms: 500,
        sector_size_bytes: 512,
        fs_model: keel_sim::disk::FsModel::Posix,
        transaction_timeout_ms: 60_000,
    }
}

fn crash_plan(sink: SinkKind, request: CrashRequest) -> FaultPlan {
    let baseline = run_recording_crash_states(&spec(sink, FaultPlan::none()));
    plan_for_crash(&baseline, 30, request).unwrap()
}

#[test]
fn one_plan_twice_gives_one_fingerprint_and_one_trace() {
    for sink in SinkKind::ALL {
        for request in [CrashRequest::AfterEvent(14), CrashRequest::AtMs(2600)] {
            let plan = crash_plan(sink, request);
            let first = run(&spec(sink, plan.clone()));
            let second = run(&spec(sink, plan));
            assert_eq!(first.world.trace(), second.world.trace());
            assert_eq!(first.world.fingerprint(), second.world.fingerprint());
        }
    }
}

#[test]
fn different_plans_give_different_fingerprints() {
    let a = run(&spec(
        SinkKind::Append,
        crash_plan(SinkKind::Append, CrashRequest::AfterEvent(14)),
    ));
    let b = run(&spec(
        SinkKind::Append,
        crash_plan(SinkKind::Append, CrashRequest::AfterEvent(13)),
    ));
    let none = run(&spec(SinkKind::Append, FaultPlan::none()));
    assert_ne!(a.world.fingerprint(), b.world.fingerprint());
    assert_ne!(a.world.fingerprint(), none.world.fingerprint());
}

/// Pinned values: the fingerprint hashes a canonical text with FNV-1a (the input's line, then
/// the trace, each step's data digest on its line), so these numbers may change only when
/// that text changes (a new step, a renamed site, other events, knobs or bytes written, a
/// digest defined otherwise), never with the machine or the compiler.
#[test]
fn fingerprints_are_pinned() {
    let baseline = run(&spec(SinkKind::Append, FaultPlan::none()));
    let crash = run(&spec(
        SinkKind::Append,
        crash_plan(SinkKind::Append, CrashRequest::AfterEvent(14)),
    ));
    assert_eq!(baseline.world.fingerprint().to_string(), "4746eb23bae7cd67");
    assert_eq!(crash.world.fingerprint().to_string(), "27f89a1ceab74c9e");
}

/// A streamed trace (only its fingerprint kept) has the kept trace's fingerprint, whatever
/// the faults, those restated in the trace included: a power loss whose state wraps, a disk
/// error where no disk operation is, a sink fault at a disk step.
#[test]
fn a_streamed_trace_has_the_same_fingerprint() {
    for sink in SinkKind::ALL {
        let steps = run(&spec(sink, FaultPlan::none())).world.steps_taken();
        assert_eq!(
            run_streaming_trace(&spec(sink, FaultPlan::none()))
                .world
                .fingerprint(),
            run(&spec(sink, FaultPlan::none())).world.fingerprint()
        );
        for step in 0..steps {
            for fault in [
                Fault::PowerLoss {
                    at: CrashPoint::After,
                    state: u64::MAX,
                },
                Fault::DiskError,
                Fault::SinkError,
                Fault::ProcessCrash {
                    at: CrashPoint::Before,
                },
            ] {
                let plan = FaultPlan::new([PlannedFault { step, fault }]).unwrap();
                let kept = run(&spec(sink, plan.clone()));
                let streamed = run_streaming_trace(&spec(sink, plan));
                assert_eq!(
                    streamed.world.fingerprint(),
                    kept.world.fingerprint(),
                    "{sink} step {step} {fault}"
                );
                assert!(streamed.world.trace().lines().count() < 16);
            }
        }
    }
}

#[test]
fn the_trace_reads_as_the_chapter_tells_it() {
    let crash = run(&spec(
        SinkKind::Append,
        crash_plan(SinkKind::Append, CrashRequest::AfterEvent(14)),
    ));
    let lines: Vec<String> = crash.world.trace().text_lines();
    let around_crash: Vec<&str> = lines
        .iter()
        .skip_while(|l| !l.contains("source.read event 15"))
        .take(8)
        .map(String::as_str)
        .collect();
    assert_eq!(
        around_crash,
        vec![
            "step 25 t=4500ms p0 source.read event 15 !process-crash before",
            "crash t=4500ms before step 25",
            "restart t=5000ms p1",
            "step 26 t=5000ms p1 disk.list .",
            "step 27 t=5000ms p1 disk.read state-8.json #bf3c321b84286316",
            "step 28 t=5000ms p1 disk.fsync state-8.json",
            "step 29 t=5000ms p1 disk.fsync-dir .",
            "note t=5000ms p1 recovery: restore state-8.json, resume from event 8",
        ]
    );
}

/// One event or one knob of a run, changed (see `changed`).
#[derive(Clone, Copy, Debug)]
enum Change {
    Value,
    Timestamp,
    Window,
    OutOfOrderness,
    CheckpointEvery,
    AllowedLateness,
    EventInterval,
    RestartDelay,
    Sink,
    Protocol,
    Key,
    StateBackend,
    SectorSize,
    TransactionTimeout,
    FsModel,
}

impl Change {
    const ALL: [Change; 15] = [
        Change::Value,
        Change::Timestamp,
        Change::Window,
        Change::OutOfOrderness,
        Change::CheckpointEvery,
        Change::AllowedLateness,
        Change::EventInterval,
        Change::RestartDelay,
        Change::Sink,
        Change::Protocol,
        Change::Key,
        Change::StateBackend,
        Change::SectorSize,
        Change::TransactionTimeout,
        Change::FsModel,
    ];
}

/// A number in `low..=high`, drawn from `rng`.
fn draw(rng: &mut ChaCha8Rng, low: i64, high: i64) -> i64 {
    low + (rng.next_u64() % (high - low + 1) as u64) as i64
}

/// One of `items`, drawn from `rng`.
fn pick<T: Copy>(rng: &mut ChaCha8Rng, items: &[T]) -> T {
    items[rng.next_u64() as usize % items.len()]
}

/// A random run: 2 to 24 events (timestamps mostly rising, some out of order, values of
/// either sign), random knobs, and no fault or a kill by the clock partway.
fn random_spec(rng: &mut ChaCha8Rng) -> RunSpec {
    let len = draw(rng, 2, 24) as usize;
    let mut ts = draw(rng, -20, 20);
    let events: Vec<Event> = (0..len)
        .map(|_| {
            ts += draw(rng, 0, 4);
            Event {
                ts: ts
                    - if draw(rng, 0, 4) == 0 {
                        draw(rng, 1, 9)
                    } else {
                        0
                    },
                value: draw(rng, -30, 30),
            }
        })
        .collect();
    let state_backend = pick(rng, &[StateBackend::Full, StateBackend::Incremental]);
    let protocols: Vec<CheckpointProtocol> = CheckpointProtocol::ALL
        .into_iter()
        .filter(|p| p.supports(state_backend))
        .collect();
    let config = EngineConfig {
        window_size: draw(rng, 1, 12),
        out_of_orderness: draw(rng, 0, 5),
        checkpoint_every: draw(rng, 1, 9) as u64,
        sink: pick(rng, &SinkKind::ALL),
        protocol: pick(rng, &protocols),
        key: pick(rng, &[KeyScheme::EventIndex, KeyScheme::ProcessingTime]),
        event_interval_ms: pick(rng, &[0, 1, 300]),
        allowed_lateness: pick(rng, &[None, Some(0), Some(3)]),
        state_backend,
    };
    let event_interval_ms = config.event_interval_ms;
    RunSpec {
        events: events.into(),
        config,
        plan: match draw(rng, 0, 2) {
            0 => FaultPlan::none(),
            _ => FaultPlan::kill_at_ms(event_interval_ms * draw(rng, 0, len as i64) as u64),
        },
        seed: 0,
        restart_delay_ms: 500,
        sector_size_bytes: 512,
        fs_model: pick(rng, &FsModel::ALL),
        transaction_timeout_ms: 60_000,
    }
}

/// `spec` with `change` made (one event or one knob differs), or None where the change
/// cannot be made to it (a mode its protocol lacks).
fn changed(spec: &RunSpec, change: Change, rng: &mut ChaCha8Rng) -> Option<RunSpec> {
    let mut spec = spec.clone();
    let config = &mut spec.config;
    let other = |rng: &mut ChaCha8Rng, low: i64, high: i64, now: i64| loop {
        let value = draw(rng, low, high);
        if value != now {
            break value;
        }
    };
    match change {
        Change::Value | Change::Timestamp => {
            let mut events = spec.events.to_vec();
            let at = rng.next_u64() as usize % events.len();
            let event = &mut events[at];
            match change {
                Change::Value => event.value = other(rng, -30, 30, event.value),
                _ => event.ts = other(rng, event.ts - 9, event.ts + 9, event.ts),
            }
            spec.events = events.into();
        }
        Change::Window => config.window_size = other(rng, 1, 12, config.window_size),
        Change::OutOfOrderness => {
            config.out_of_orderness = other(rng, 0, 5, config.out_of_orderness)
        }
        Change::CheckpointEvery => {
            config.checkpoint_every = other(rng, 1, 9, config.checkpoint_every as i64) as u64
        }
        Change::AllowedLateness => {
            config.allowed_lateness = match config.allowed_lateness {
                None => Some(draw(rng, 0, 5)),
                Some(lateness) if draw(rng, 0, 1) == 0 => Some(lateness + 1),
                Some(_) => None,
            }
        }
        Change::EventInterval => {
            config.event_interval_ms += draw(rng, 1, 100) as u64;
        }
        Change::RestartDelay => spec.restart_delay_ms += draw(rng, 1, 100) as u64,
        Change::Sink => {
            let others: Vec<SinkKind> = SinkKind::ALL
                .into_iter()
                .filter(|s| *s != config.sink)
                .collect();
            config.sink = pick(rng, &others);
        }
        Change::Protocol => {
            let others: Vec<CheckpointProtocol> = CheckpointProtocol::ALL
                .into_iter()
                .filter(|p| *p != config.protocol && p.supports(config.state_backend))
                .collect();
            config.protocol = pick(rng, &others);
        }
        Change::Key => {
            config.key = match config.key {
                KeyScheme::EventIndex => KeyScheme::ProcessingTime,
                KeyScheme::ProcessingTime => KeyScheme::EventIndex,
            }
        }
        Change::StateBackend => {
            config.state_backend = match config.state_backend {
                StateBackend::Full => StateBackend::Incremental,
                StateBackend::Incremental => StateBackend::Full,
            };
            if !config.protocol.supports(config.state_backend) {
                return None;
            }
        }
        Change::SectorSize => spec.sector_size_bytes = pick(rng, &[1, 4096]),
        Change::TransactionTimeout => spec.transaction_timeout_ms += draw(rng, 1, 1000) as u64,
        Change::FsModel => {
            let others: Vec<FsModel> = FsModel::ALL
                .into_iter()
                .filter(|m| *m != spec.fs_model)
                .collect();
            spec.fs_model = pick(rng, &others);
        }
    }
    spec.config.validate().unwrap();
    Some(spec)
}

/// Every line of a trace with its data digest (` #` and 16 hex digits) cut out: the
/// shape of the run.
fn shape(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| match line.find(" #") {
            Some(at) => format!("{}{}", &line[..at], &line[at + 18..]),
            None => line.clone(),
        })
        .collect()
}

/// 200 random pairs of runs that differ in one event's value, one event's timestamp or
/// one knob have two fingerprints; the same run twice has one. Where a changed value
/// leaves the run's shape as it was (the same steps, faults and notes) but not its data,
/// the steps' data digests tell the two apart on their own, without the input's line.
#[test]
fn a_run_on_other_data_or_knobs_has_another_fingerprint() {
    let mut rng = ChaCha8Rng::seed_from_u64(55);
    let (mut pairs, mut same_shape) = (0, 0);
    let mut by_change = [0usize; Change::ALL.len()];
    while pairs < 200 {
        let spec = random_spec(&mut rng);
        let which = rng.next_u64() as usize % Change::ALL.len();
        let Some(other) = changed(&spec, Change::ALL[which], &mut rng) else {
            continue;
        };
        let (a, again, b) = (run(&spec), run(&spec), run(&other));
        assert_eq!(a.world.fingerprint(), again.world.fingerprint());
        assert_eq!(a.world.trace(), again.world.trace());
        assert_ne!(
            a.world.fingerprint(),
            b.world.fingerprint(),
            "{:?}: {spec:?} against {other:?}",
            Change::ALL[which]
        );
        assert_ne!(spec.input_digest(), other.input_digest());
        let (a_lines, b_lines) = (a.world.trace().text_lines(), b.world.trace().text_lines());
        let a_sink = a.world.env().disk.read(spec.config.sink.file_name()).ok();
        let b_sink = b.world.env().disk.read(other.config.sink.file_name()).ok();
        if shape(&a_lines) == shape(&b_lines) && a_sink != b_sink {
            // The same steps writing other bytes: only the data digests differ.
            assert_ne!(a_lines, b_lines, "{:?}", Change::ALL[which]);
            same_shape += 1;
        }
        by_change[which] += 1;
        pairs += 1;
    }
    assert!(by_change.iter().all(|&n| n > 0), "{by_change:?}");
    assert!(same_shape >= 10, "{same_shape} pairs of one shape");
}

/// A sweep and an exploration of random streams give one report, fingerprints included (the
/// sweep's, and each explored run's trace fingerprint), on one or two threads and in shards.
#[test]
fn random_streams_have_one_fingerprint_on_any_jobs_and_shards() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fingerprint-data");
    std::fs::create_dir_all(&dir).unwrap();
    for seed in 0..3u64 {
        let events = dir.join(format!("stream-{seed}.jsonl"));
        std::fs::write(&events, common::random_stream(seed, 20 + 4 * seed as usize)).unwrap();
        let events = events.to_str().unwrap().to_string();
        let keel = |args: &[&str]| {
            let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            all.extend(["--events".to_string(), events.clone()]);
            common::keel_stdout(&all)
        };
        let sweep = [
            "sweep",
            "--faults",
            "process-crash,power-loss",
            "--format",
            "json",
        ];
        let one = keel(&[&sweep[..], &["--jobs", "1"]].concat());
        assert_eq!(one, keel(&[&sweep[..], &["--jobs", "2"]].concat()));
        let mut shard_files = Vec::new();
        for (index, jobs) in [(0, "1"), (1, "2")] {
            let shard = format!("{index}/2");
            let path = dir.join(format!("sweep-{seed}-{index}.jsonl"));
            let lines = keel(&[&sweep[..3], &["--shard", &shard, "--jobs", jobs]].concat());
            let again = keel(
                &[
                    &sweep[..3],
                    &[
                        "--shard",
                        &shard,
                        "--jobs",
                        if jobs == "1" { "2" } else { "1" },
                    ],
                ]
                .concat(),
            );
            assert_eq!(lines, again, "shard {shard} of stream {seed}");
            std::fs::write(&path, lines).unwrap();
            shard_files.push(path.to_str().unwrap().to_string());
        }
        let mut merge = vec!["merge".to_string()];
        merge.extend(shard_files);
        merge.extend(["--format".to_string(), "json".to_string()]);
        assert_eq!(common::keel_stdout(&merge), one, "stream {seed}");
        let explore = ["explore", "--seeds", "0..12", "--format", "json"];
        assert_eq!(
            keel(&[&explore[..], &["--jobs", "1"]].concat()),
            keel(&[&explore[..], &["--jobs", "2"]].concat()),
            "stream {seed}"
        );
    }
}
