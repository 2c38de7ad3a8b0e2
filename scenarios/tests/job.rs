//! Parallel jobs: a task graph under a seeded scheduler, judged by the job oracle; every
//! schedule of small jobs, crossed with a crash at every step.

use keel_engine::job::{AlignmentMode, JobConfig, JobSinkKind, KeyedEvent};
use keel_scenarios::catalogue::Scenario;
use keel_scenarios::graph::oracle::{judge, JobProperty, JobVerdict};
use keel_scenarios::graph::schedules::{enumerate, Enumerated, Enumeration};
use keel_scenarios::graph::{run, GraphOutcome, GraphSpec};
use keel_sim::disk::FsModel;
use keel_sim::{FaultPlan, SchedulePolicy};

fn spec(events: Vec<KeyedEvent>, config: JobConfig, seed: u64) -> GraphSpec {
    GraphSpec {
        events: events.into(),
        config,
        plan: FaultPlan::none(),
        seed,
        schedule: SchedulePolicy::Random,
        script: Vec::new(),
        first_after_script: false,
        restart_delay_ms: 500,
        fs_model: FsModel::Posix,
    }
}

fn ch04(sources: u32) -> Vec<KeyedEvent> {
    KeyedEvent::from_events(&Scenario::by_name("ch04").unwrap().events(), sources)
}

/// `per_source` events on each of two sources, one key a source (so each key's windows are
/// on one operator or the other by the hash), timestamps spread over two windows.
fn small(per_source: i64) -> Vec<KeyedEvent> {
    (0..2u32)
        .flat_map(|p| {
            (0..per_source).map(move |i| KeyedEvent {
                ts: i * 7 + i64::from(p),
                key: format!("k{p}"),
                value: 1 + i,
                partition: p,
            })
        })
        .collect()
}

/// Enumerates on a thread with room for its recursion.
fn enumerate_big_stack(enumeration: Enumeration) -> Enumerated {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || enumerate(&enumeration))
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn fault_free_runs_match_the_model_in_every_mode_sink_and_schedule() {
    for mode in AlignmentMode::ALL {
        for sink in JobSinkKind::ALL {
            for seed in 0..10 {
                let config = JobConfig {
                    mode,
                    sink,
                    ..JobConfig::default()
                };
                let spec = spec(ch04(2), config, seed);
                let ran = run(&spec);
                assert_eq!(
                    ran.outcome,
                    GraphOutcome::Completed,
                    "{mode} {sink} seed {seed}"
                );
                let verdict = judge(&ran, &spec.events, 10, sink);
                assert_eq!(
                    verdict,
                    JobVerdict {
                        completed: true,
                        records: 3,
                        ..JobVerdict::default()
                    },
                    "{mode} {sink} seed {seed}"
                );
            }
        }
    }
}

#[test]
fn one_seed_one_run_and_a_replayed_schedule_is_the_same_run() {
    let config = JobConfig {
        mode: AlignmentMode::Unaligned,
        ..JobConfig::default()
    };
    let first = run(&spec(ch04(2), config, 7));
    let again = run(&spec(ch04(2), config, 7));
    assert_eq!(first.fingerprint(), again.fingerprint());
    assert_eq!(first.schedule, again.schedule);
    let other = run(&spec(ch04(2), config, 8));
    assert_ne!(
        first.schedule, other.schedule,
        "the seed chooses the schedule"
    );
    // A scripted scheduler under another seed replays the schedule byte for byte.
    let replay = GraphSpec {
        script: first.schedule.clone(),
        ..spec(ch04(2), config, 99)
    };
    assert_eq!(run(&replay).fingerprint(), first.fingerprint());
}

#[test]
fn at_least_once_over_counts_in_state_behind_a_transactional_sink() {
    // The article's "fake exactly-once": a crash after checkpoint 1 completed, while records
    // behind barrier 1 had already been counted in its snapshot.
    let config = JobConfig {
        mode: AlignmentMode::AtLeastOnce,
        ..JobConfig::default()
    };
    let faulty = spec(ch04(2), config, 0);
    let caught = (100..200).find_map(|step| {
        let plan = FaultPlan::new([keel_sim::PlannedFault {
            step,
            fault: keel_sim::Fault::ProcessCrash {
                at: keel_sim::CrashPoint::After,
            },
        }])
        .unwrap();
        let point = GraphSpec {
            plan,
            ..faulty.clone()
        };
        let verdict = judge(&run(&point), &point.events, 10, JobSinkKind::Transactional);
        (verdict.over_counted > 0).then_some((step, verdict))
    });
    let (step, verdict) = caught.expect("some crash point over-counts");
    assert_eq!(
        verdict.duplicates, 0,
        "step {step}: the sink itself commits each record once"
    );
    assert!(!verdict.holds(JobProperty::StateExactlyOnce));
    // The same crash points, aligned: exactly-once.
    for step in 100..200 {
        let plan = FaultPlan::new([keel_sim::PlannedFault {
            step,
            fault: keel_sim::Fault::ProcessCrash {
                at: keel_sim::CrashPoint::After,
            },
        }])
        .unwrap();
        for mode in [AlignmentMode::Aligned, AlignmentMode::Unaligned] {
            let point = GraphSpec {
                plan: plan.clone(),
                ..spec(ch04(2), JobConfig { mode, ..config }, 0)
            };
            let verdict = judge(&run(&point), &point.events, 10, JobSinkKind::Transactional);
            assert!(
                verdict.broken(&JobProperty::EXACTLY_ONCE).is_empty(),
                "{mode} step {step}: {verdict:?}"
            );
        }
    }
}

#[test]
fn state_caching_finds_what_the_unreduced_enumeration_finds() {
    for mode in AlignmentMode::ALL {
        let config = JobConfig {
            sources: 1,
            parallelism: 1,
            mode,
            checkpoint_interval_ms: 1000,
            ..JobConfig::default()
        };
        let events: Vec<KeyedEvent> = small(2).into_iter().filter(|e| e.partition == 0).collect();
        let base = Enumeration {
            spec: spec(events, config, 0),
            crashes: true,
            job_faults: Vec::new(),
            reduce: true,
            after_crash_all: true,
            states_max: 10_000_000,
        };
        let reduced = enumerate_big_stack(base.clone());
        let unreduced = enumerate_big_stack(Enumeration {
            reduce: false,
            ..base
        });
        assert!(reduced.exhaustive && unreduced.exhaustive);
        assert_eq!(reduced.points, unreduced.points, "{mode}");
        assert_eq!(
            reduced.fault_free_points, unreduced.fault_free_points,
            "{mode}"
        );
        let points = |e: &Enumerated| {
            e.outcomes
                .iter()
                .map(|(k, o)| (k.clone(), o.points.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(points(&reduced), points(&unreduced), "{mode}");
        assert!(
            reduced.states < unreduced.states,
            "{mode}: {} vs {}",
            reduced.states,
            unreduced.states
        );
    }
}

#[test]
fn aligned_and_unaligned_are_exactly_once_at_every_point_of_every_schedule() {
    // Two sources, two operators, two events a source: every schedule, before and after a
    // crash at every step of it.
    for mode in [AlignmentMode::Aligned, AlignmentMode::Unaligned] {
        for sink in [JobSinkKind::Transactional, JobSinkKind::Idempotent] {
            let config = JobConfig {
                mode,
                sink,
                checkpoint_interval_ms: 30,
                ..JobConfig::default()
            };
            let found = enumerate_big_stack(Enumeration {
                spec: spec(small(2), config, 0),
                crashes: true,
                job_faults: Vec::new(),
                reduce: true,
                after_crash_all: true,
                states_max: 1_000_000,
            });
            assert!(found.exhaustive, "{mode} {sink}");
            assert!(
                found.failing(&JobProperty::EXACTLY_ONCE).is_empty(),
                "{mode} {sink}"
            );
            assert!(
                found.fault_free_points > 1000u32.into(),
                "{mode} {sink}: many schedules"
            );
        }
    }
}

#[test]
fn the_append_sink_duplicates_after_a_crash_in_some_schedule() {
    let config = JobConfig {
        sink: JobSinkKind::Append,
        checkpoint_interval_ms: 30,
        ..JobConfig::default()
    };
    let found = enumerate_big_stack(Enumeration {
        spec: spec(small(2), config, 0),
        crashes: true,
        job_faults: Vec::new(),
        reduce: true,
        after_crash_all: false,
        states_max: 1_000_000,
    });
    assert!(found.exhaustive);
    let failing = found.failing(&JobProperty::EXACTLY_ONCE);
    assert!(failing
        .iter()
        .all(|(_, broken)| broken == &vec![JobProperty::NoDuplicates]));
    let (outcome, _) = failing
        .first()
        .expect("a crash after a write and before its checkpoint duplicates");
    // The example replays: its schedule scripted, its crash planned.
    let replay = GraphSpec {
        plan: FaultPlan::new(outcome.example_crash).unwrap(),
        script: outcome.example_schedule.clone(),
        ..spec(small(2), config, 0)
    };
    assert_eq!(
        judge(&run(&replay), &replay.events, 10, JobSinkKind::Append),
        outcome.verdict
    );
}

#[test]
fn an_at_least_once_failure_shrinks_to_one_crash_and_a_schedule_that_replays_it() {
    let config = JobConfig {
        mode: AlignmentMode::AtLeastOnce,
        ..JobConfig::default()
    };
    let point = GraphSpec {
        plan: FaultPlan::new([keel_sim::PlannedFault {
            step: 101,
            fault: keel_sim::Fault::ProcessCrash {
                at: keel_sim::CrashPoint::After,
            },
        }])
        .unwrap(),
        ..spec(ch04(2), config, 0)
    };
    let shrunk = keel_scenarios::graph::shrink::shrink(&point, &JobProperty::EXACTLY_ONCE)
        .expect("the point fails");
    assert_eq!(shrunk.broken, vec![JobProperty::StateExactlyOnce]);
    let crash = shrunk.fault.expect("one crash");
    assert!(crash.step <= 101);
    let replay = GraphSpec {
        plan: FaultPlan::new([crash]).unwrap(),
        script: shrunk.schedule.clone(),
        first_after_script: true,
        ..spec(ch04(2), config, 12345)
    };
    let verdict = judge(
        &run(&replay),
        &replay.events,
        10,
        JobSinkKind::Transactional,
    );
    assert_eq!(
        verdict.broken(&JobProperty::EXACTLY_ONCE),
        vec![JobProperty::StateExactlyOnce]
    );
    assert!(verdict.over_counted >= 1);
}

#[test]
fn job_teach_shows_the_three_modes_after_one_kill() {
    use clap::Parser;
    let cli = keel_scenarios::cli::Cli::try_parse_from(["keel", "job", "teach"]).unwrap();
    let output = keel_scenarios::cli::execute(&cli).unwrap();
    let rows: Vec<&str> = output
        .stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
        .collect();
    assert_eq!(
        rows,
        vec![
            "| mode | windows over-counted in state | duplicates in the sink | alignment (ms) | largest snapshot (bytes) | in-flight items stored |",
            "| aligned | 0 | 0 | 61 | 624 | 0 |",
            "| unaligned | 0 | 0 | 0 | 788 | 10 |",
            "| at-least-once | 1 | 0 | 0 | 621 | 0 |",
        ]
    );
    assert!(output.stdout.contains("kill -9 at t=88ms"));
}
