//! Fuzz target 4: the whole runner on arbitrary knobs, an arbitrary small stream and an
//! arbitrary fault plan (the swarm generator of `swarm.rs`, reading its choices from the
//! fuzzer's bytes, or a kill by the clock).
//!
//! Checked on every input:
//! - knobs (allowed lateness included): `ScenarioSpec::config` accepts exactly the knobs
//!   within the documented ranges (and no processing-time keys at one instant on the
//!   idempotent sink), and rejects the others with exit status 2 (never a panic);
//! - the fault-free run agrees with the independent model and is exactly-once on every sink
//!   and view (the transactional sink: when no transaction can outlive its timeout);
//! - the faulty run ends within its bounds (at most `RESTARTS_MAX` restarts, and a restart
//!   limit only when they are all used), twice with the same fingerprint and observation;
//! - the oracle's counts add up in every view: records = delivered + duplicates + wrong, and
//!   delivered + lost <= the reference's records;
//! - a failing run's reproduce command, parsed by `Cli::try_parse_from` and run by
//!   `cli::execute`, reproduces it: same fingerprint.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use clap::Parser;
use keel_engine::event::JSON_SAFE_INT_MAX;
use keel_engine::{CheckpointProtocol, Event, KeyScheme, SinkKind};
use keel_scenarios::baseline::Baseline;
use keel_scenarios::cli::{execute, Cli};
use keel_scenarios::observation::Observation;
use keel_scenarios::reproduce::replay_plan_command;
use keel_scenarios::runner::{run, Outcome, RESTARTS_MAX};
use keel_scenarios::spec::{ScenarioSpec, TIME_MS_MAX};
use keel_scenarios::swarm::{plan_from_unstructured, swarm_kinds, PlanContext, Swarm};
use keel_scenarios::verdict::judge;
use keel_sim::{FaultKind, FaultPlan};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

const SECTOR_SIZE_MAX_BYTES: u64 = 1 << 21;

/// A knob: a small value, any value, or one of the edges of its range.
#[derive(Debug, Arbitrary)]
enum Knob<T> {
    Small(u8),
    Raw(T),
    Edge(u8),
}

fn signed(knob: &Knob<i64>, edges: &[i64]) -> i64 {
    match *knob {
        Knob::Small(v) => i64::from(v),
        Knob::Raw(v) => v,
        Knob::Edge(i) => edges[usize::from(i) % edges.len()],
    }
}

fn unsigned(knob: &Knob<u64>, edges: &[u64]) -> u64 {
    match *knob {
        Knob::Small(v) => u64::from(v),
        Knob::Raw(v) => v,
        Knob::Edge(i) => edges[usize::from(i) % edges.len()],
    }
}

#[derive(Debug, Arbitrary)]
enum PlanChoice {
    /// The swarm generator on the rest of the bytes.
    Swarm { allowed: u8, max_faults: u8, outage_ms: Knob<u64> },
    /// A kill by the clock.
    Kill { at_ms: Knob<u64> },
}

#[derive(Debug, Arbitrary)]
struct Input {
    window: Knob<i64>,
    out_of_orderness: Knob<i64>,
    checkpoint_every: Knob<u64>,
    event_interval_ms: Knob<u64>,
    restart_delay_ms: Knob<u64>,
    transaction_timeout_ms: Knob<u64>,
    sector_size_bytes: Knob<u64>,
    protocol: u8,
    processing_time_key: bool,
    sink: u8,
    seed: u64,
    events: Vec<(Knob<i64>, Knob<i64>)>,
    plan: PlanChoice,
    /// Last, so the corpus of inputs that predate it keeps its meaning (None when the bytes
    /// run out: unbounded lateness).
    allowed_lateness: Option<Knob<i64>>,
}

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("keel-fuzz-runner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary(&mut u) else {
        return;
    };
    let max = JSON_SAFE_INT_MAX;
    let time_edges = [0, 1, TIME_MS_MAX, TIME_MS_MAX + 1, u64::MAX];
    let int_edges = [-max, max, 0, 1, -1];
    let events: Vec<Event> = input
        .events
        .iter()
        .take(64)
        .map(|(ts, value)| Event {
            ts: signed(ts, &int_edges).clamp(-max, max),
            value: signed(value, &int_edges).clamp(-max, max),
        })
        .collect();
    if events.is_empty() {
        return; // An events file without events is an error before any run.
    }
    let sink = SinkKind::ALL[usize::from(input.sink) % 3];
    let sector = unsigned(&input.sector_size_bytes, &[1, 512, SECTOR_SIZE_MAX_BYTES, SECTOR_SIZE_MAX_BYTES + 1, 0]);
    let Ok(sector_size_bytes) = usize::try_from(sector) else {
        return;
    };
    let events_path = dir().join("events.jsonl");
    let events_path = events_path.to_str().unwrap().to_string();
    let spec = ScenarioSpec {
        scenario: None,
        events: Some(events_path.clone()),
        window: signed(&input.window, &[1, max, max + 1, 0, -1, i64::MIN, i64::MAX]),
        out_of_orderness: signed(&input.out_of_orderness, &[0, max, max + 1, -1, i64::MIN]),
        checkpoint_every: unsigned(&input.checkpoint_every, &[0, 1, 64, 65, u64::MAX]),
        event_interval_ms: unsigned(&input.event_interval_ms, &time_edges),
        restart_delay_ms: unsigned(&input.restart_delay_ms, &time_edges),
        protocol: CheckpointProtocol::ALL[usize::from(input.protocol) % CheckpointProtocol::ALL.len()],
        key: if input.processing_time_key {
            KeyScheme::ProcessingTime
        } else {
            KeyScheme::EventIndex
        },
        transaction_timeout_ms: unsigned(&input.transaction_timeout_ms, &time_edges),
        seed: input.seed,
        sector_size_bytes,
        fs_model: keel_sim::disk::FsModel::Posix,
        allowed_lateness: input
            .allowed_lateness
            .as_ref()
            .map(|l| signed(l, &[0, max, max + 1, -1, i64::MIN])),
        // One seed in three with incremental checkpoints (a protocol without that form,
        // in-place, is then refused, as no-delta-fsync is with full ones).
        state_backend: if input.seed % 3 == 1 {
            keel_engine::StateBackend::Incremental
        } else {
            keel_engine::StateBackend::Full
        },
        events_digest: None,
    };
    let valid = (1..=max).contains(&spec.window)
        && (0..=max).contains(&spec.out_of_orderness)
        && spec.checkpoint_every >= 1
        && spec.event_interval_ms <= TIME_MS_MAX
        && spec.restart_delay_ms <= TIME_MS_MAX
        && spec.transaction_timeout_ms <= TIME_MS_MAX
        && (1..=SECTOR_SIZE_MAX_BYTES).contains(&sector)
        && spec.allowed_lateness.is_none_or(|l| (0..=max).contains(&l))
        && spec.protocol.supports(spec.state_backend);
    match spec.config(sink) {
        Ok(_) => assert!(valid, "config accepted {spec:?}"),
        Err(error) => {
            assert!(!valid, "config rejected {spec:?}: {error}");
            assert_eq!(error.exit_code, 2);
            return;
        }
    }

    // The fault-free run: the model agrees, and every view is exactly-once.
    let baseline = Baseline::new(spec.run_spec(&events, sink, FaultPlan::none()).unwrap());
    let reference = &baseline.reference;
    assert_eq!(reference.model_mismatch, None, "{spec:?} {events:?}");
    let config = baseline.spec.config;
    let no_timeout = !sink.is_transactional()
        || spec.transaction_timeout_ms > config.arrival_ms(events.len() as u64);
    let fault_free = run(&baseline.spec);
    assert_eq!(fault_free.outcome, Outcome::Completed);
    for verdict in judge(reference, &Observation::of(&fault_free, &config)) {
        if no_timeout {
            assert!(
                verdict.exactly_once(),
                "fault-free: {verdict:?} {spec:?} {sink} {events:?}"
            );
        }
    }

    // The faulty run.
    let plan = match &input.plan {
        PlanChoice::Kill { at_ms } => FaultPlan::kill_at_ms(unsigned(at_ms, &time_edges)),
        PlanChoice::Swarm { allowed, max_faults, outage_ms } => {
            let allowed: Vec<FaultKind> = FaultKind::ALL
                .into_iter()
                .enumerate()
                // A parallel job's own faults (the last kinds) apply to no step here.
                .filter(|(_, k)| !FaultKind::JOB.contains(k))
                .filter(|(i, _)| allowed & (1 << i) != 0)
                .map(|(_, k)| k)
                .collect();
            if allowed.is_empty() {
                return;
            }
            let Ok(swarm) = Swarm::arbitrary(&mut u) else {
                return;
            };
            let context = PlanContext {
                sites: &baseline.sites,
                allowed: &allowed,
                max_faults: usize::from(*max_faults % 8) + 1,
                outage_ms: unsigned(outage_ms, &time_edges).min(TIME_MS_MAX),
            };
            let kinds = swarm_kinds(&swarm, &allowed);
            match plan_from_unstructured(&mut u, &kinds, &context, swarm.crash_before) {
                Ok(plan) => plan,
                Err(_) => return,
            }
        }
    };
    let run_spec = spec.run_spec(&events, sink, plan).unwrap();
    let result = run(&run_spec);
    let again = run(&run_spec);
    assert_eq!(result.world.fingerprint(), again.world.fingerprint());
    assert!(result.incarnations.len() <= RESTARTS_MAX as usize + 1);
    if result.outcome == Outcome::RestartLimit {
        assert_eq!(result.incarnations.len(), RESTARTS_MAX as usize + 1);
    }
    let observation = Observation::of(&result, &config);
    assert_eq!(observation, Observation::of(&again, &config));
    let verdicts = judge(reference, &observation);
    for verdict in &verdicts {
        assert_eq!(verdict.records, verdict.delivered + verdict.duplicates + verdict.wrong);
        assert!(verdict.delivered + verdict.lost <= reference.records.len() as u64);
        assert!(verdict.restarts <= u64::from(RESTARTS_MAX));
    }

    // A failing run's reproduce command reproduces it.
    let Some(verdict) = verdicts.iter().find(|v| !v.failures(None, sink).is_empty()) else {
        return;
    };
    let ran = result.world.plan_that_ran();
    if ran.is_empty() && ran.kill_time_ms().is_none() {
        return;
    }
    let text: String = events
        .iter()
        .map(|e| format!("{{\"ts\": {}, \"value\": {}}}\n", e.ts, e.value))
        .collect();
    std::fs::write(&events_path, text).unwrap();
    let command = replay_plan_command(&spec, sink, verdict.view, &ran);
    let plan_path = dir().join("plan.json");
    let plan_path = plan_path.to_str().unwrap();
    // A plan on stdin (`echo '<plan>' | keel replay --plan -`): in-process, from a file.
    let line = match command.strip_prefix("echo '") {
        Some(rest) => {
            let (json, keel) = rest.split_once("' | ").expect("an echo command");
            std::fs::write(plan_path, json).unwrap();
            keel.replace("--plan -", &format!("--plan {plan_path}"))
        }
        None => command.clone(),
    };
    let mut args: Vec<&str> = line.split_whitespace().collect();
    args.extend(["--format", "json"]);
    let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{command}: {e}"));
    let output = execute(&cli).unwrap_or_else(|e| panic!("{command}: {e}"));
    let json: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(
        json["fingerprint"].as_str(),
        Some(result.world.fingerprint().to_string().as_str()),
        "{command}"
    );
});
