//! Same inputs, same trace, same fingerprint: on every run, machine and Rust version.

use keel_engine::{EngineConfig, SinkKind};
use keel_scenarios::catalogue::Scenario;
use keel_scenarios::report::{plan_for_crash, CrashRequest};
use keel_scenarios::runner::{run, run_recording_crash_states, run_streaming_trace, RunSpec};
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};

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
