//! Forking and converging: a sweep's point starts from a snapshot of its sink's fault-free
//! run taken at or before its first fault, instead of running the same fault-free prefix
//! again from event 0, and stops as soon as nothing can make the rest of it differ from the
//! fault-free run's, taking the rest from that run.
//!
//! The world (clock, disk, log, step counter, trace), the engine and the runner's state are
//! plain values, so a snapshot taken between two events of the fault-free run, forked under
//! the point's plan ([`keel_sim::World::fork`]) and run on ([`crate::runner::resume`]), is the
//! point's run from that step on: the same steps, the same trace lines, the same result. The
//! snapshot keeps no trace lines, only the fingerprint state over them
//! ([`keel_sim::Trace::forget`]), so a forked point's fingerprint is still its whole run's.
//!
//! Converging: at a snapshot's event boundary, after every planned fault has had its step,
//! the point's run goes on exactly as the fault-free run went on from the same boundary
//! when everything that can influence what comes next is equal ([`Forks::converges`]):
//! - the engine: knobs, operator state, sink connector, the checkpoint files it knows, the
//!   last record (`Engine::same_future_as`; only its counters may differ);
//! - the input position (the same boundary), and no fault still to come (`plan_spent`);
//! - the disk, every file and name with its durable state and pending operations, exactly,
//!   and no byte a failed fsync left unpersisted anywhere (a cache drop would change it);
//!   except the append sink's file, whose bytes the append connector never reads after
//!   recovery (it only appends and fsyncs it): its bytes may differ, and the point's final
//!   file is its own bytes then followed by what the fault-free run appended after the
//!   boundary (checked to be a pure append: the fault-free file at the boundary is a prefix
//!   of its final file);
//! - the transactional log, exactly (file sinks never touch it); the transactional sink
//!   never converges (its log keeps the aborted transactions of a fault);
//! - the clock where it can be observed: with processing-time keys the clock (and the sink's
//!   outage) must be equal; with event-index keys a file sink run reads the clock only to
//!   wait, to time a retry after a failed request (none without a fault, once no outage is
//!   in force in either run) and for a kill by the clock (none once the plan is spent), so
//!   only the trace's times differ. No run draws from a random stream (the seed tree hands
//!   out fresh streams, none is consumed during a run), and the step counter and the
//!   incarnation reach only the trace once no fault aims at a step.
//!
//! Anything else, and the point runs on. A converged point's trace is not computed, so it
//! has no trace fingerprint: a sweep's fingerprint hashes what both algorithms compute, each
//! point's faults and outcome digest (see `tally::SweepTally`). `keel sweep --naive` runs
//! every point from scratch to its end instead: the reference the default is checked
//! against, report for report (`scenarios/tests/fork.rs`).

use crate::observation::{
    documented_sink_file, KnownSink, Observation, RestartSteps, SinkOutage, SinkWriteCounts,
};
use crate::runner::{
    resume, run, run_between, run_recording_crash_states, Between, Control, Driven, Incarnation,
    IncarnationEnd, Outcome, Paused, RunResult, RunSpec,
};
use keel_engine::{IncarnationStats, KeyScheme, OperatorState, SinkKind, SINK_WRITE_OP};
use keel_sim::{Disk, DiskError, FaultPlan, Fingerprint};

/// The most snapshots a fault-free run keeps: one every `ceil((events + 1) / SNAPSHOTS_MAX)`
/// events, so memory stays bounded while a point re-runs at most that many events of prefix.
pub const SNAPSHOTS_MAX: u64 = 256;

/// One fault-free run of a sink, with its snapshots.
#[derive(Clone, Debug)]
pub struct Forks {
    spec: RunSpec,
    /// A snapshot every `every_events` events (before event 0, `every_events`, ...).
    every_events: u64,
    /// In input order; each one's world has forgotten its trace lines.
    snapshots: Vec<Paused>,
    /// What converging needs of each snapshot (file sinks only; empty for the log).
    facts: Vec<Facts>,
    /// How the fault-free run ended.
    end: End,
    /// The fault-free run's file sink, where the oracle reads it, line by line: a point's
    /// file is mostly its bytes, and only the rest is parsed (None: the log, or no file).
    known: Option<KnownSink>,
}

/// What converging at a snapshot compares and takes from the fault-free run.
#[derive(Clone, Debug)]
struct Facts {
    /// The disk as it is compared: the append sink's file emptied (see [`compared_disk`]).
    disk: Disk,
    /// The sink file's length then.
    sink_len_bytes: usize,
    /// Whether the fault-free run only appended to its sink file after this snapshot.
    sink_appended_only: bool,
}

/// How the fault-free run ended: its sink file, the sink writes the simulated sink served,
/// the files it left, its one incarnation's stats, its windows.
#[derive(Clone, Debug)]
struct End {
    sink_bytes: Vec<u8>,
    served: u64,
    files: Vec<String>,
    stats: IncarnationStats,
    final_state: OperatorState,
}

/// What a point's run came to: what its consumers observed, and its trace fingerprint
/// (None when it converged: the rest of its trace was never made).
#[derive(Clone, Debug)]
pub struct PointRun {
    pub observation: Observation,
    pub fingerprint: Option<Fingerprint>,
}

impl PointRun {
    /// The run of `spec` from event 0 to its end, as `--naive` does it.
    pub fn naive(spec: &RunSpec) -> PointRun {
        PointRun::of(&run(spec), spec, None)
    }

    fn of(result: &RunResult, spec: &RunSpec, known: Option<&KnownSink>) -> PointRun {
        PointRun {
            observation: Observation::of_known(result, &spec.config, known),
            fingerprint: Some(result.world.fingerprint()),
        }
    }
}

impl Forks {
    /// Runs `spec` (fault-free) once, keeping a snapshot every few events.
    pub fn new(spec: &RunSpec) -> Forks {
        assert!(spec.plan.is_empty(), "snapshots of the fault-free run");
        let every_events = (spec.events.len() as u64 + 1)
            .div_ceil(SNAPSHOTS_MAX)
            .max(1);
        let mut snapshots = Vec::new();
        let driven = run_between(spec, &mut |between| {
            // A fault-free run may still restart (a transaction the log timed out aborts
            // it): only its first incarnation, which no fault and no restart touched, forks.
            if between.incarnations.is_empty() && between.index % every_events == 0 {
                assert_eq!(between.index / every_events, snapshots.len() as u64);
                between.world.forget_trace();
                snapshots.push(Paused {
                    world: between.world.clone(),
                    engine: between.engine.clone(),
                    incarnations: Vec::new(),
                    restarts: 0,
                    index: between.index,
                });
            }
            Control::Continue
        });
        let Driven::Finished(result) = driven else {
            unreachable!("never told to stop")
        };
        let sink = spec.config.sink;
        // Converging takes the rest of a point from the fault-free run's one incarnation.
        let one_incarnation =
            result.incarnations.len() == 1 && result.outcome == Outcome::Completed;
        // The oracle reads the sink where the README documents it: a converged point's sink
        // is the engine's file, so only where the two are one file.
        let file = sink.file_name();
        let sink_bytes = result.world.env().disk.read(&file).ok();
        let (facts, end) = match sink_bytes {
            Some(sink_bytes)
                if !sink.is_transactional()
                    && one_incarnation
                    && file == documented_sink_file(sink) =>
            {
                let facts = snapshots
                    .iter()
                    .map(|snapshot| {
                        let disk = &snapshot.world.env().disk;
                        let bytes = disk.read(&file).expect("the sink is open between events");
                        Facts {
                            disk: compared_disk(disk, sink).expect("the sink file exists"),
                            sink_len_bytes: bytes.len(),
                            sink_appended_only: sink_bytes.starts_with(&bytes),
                        }
                    })
                    .collect();
                (facts, Some(sink_bytes))
            }
            _ => (Vec::new(), None),
        };
        let known = (!sink.is_transactional())
            .then(|| {
                result
                    .world
                    .env()
                    .disk
                    .read(documented_sink_file(sink))
                    .ok()
            })
            .flatten()
            .map(KnownSink::new);
        Forks {
            spec: spec.clone(),
            every_events,
            snapshots,
            facts,
            end: End {
                sink_bytes: end.unwrap_or_default(),
                served: result.world.served_requests(SINK_WRITE_OP),
                files: result.disk_files(),
                stats: result.incarnations[0].stats.clone(),
                final_state: result.final_state,
            },
            known,
        }
    }

    /// Whether the run shown by `between` goes on as the fault-free run did from the same
    /// event boundary (the rules are in the module's documentation). Only at a snapshot.
    pub fn converges(&self, between: &Between) -> bool {
        let config = &self.spec.config;
        if config.sink.is_transactional() || between.index % self.every_events != 0 {
            return false;
        }
        let at = (between.index / self.every_events) as usize;
        let (Some(snapshot), Some(facts)) = (self.snapshots.get(at), self.facts.get(at)) else {
            return false;
        };
        assert_eq!(snapshot.index, between.index, "snapshot {at}");
        let (env, base) = (between.world.env(), snapshot.world.env());
        let clock_unobserved = match config.key {
            KeyScheme::ProcessingTime => {
                env.clock == base.clock && env.sink_down_until_ms == base.sink_down_until_ms
            }
            KeyScheme::EventIndex => {
                env.sink_down_until_ms <= env.clock.now_ms()
                    && base.sink_down_until_ms <= base.clock.now_ms()
            }
        };
        facts.sink_appended_only
            && between.world.plan_spent()
            && clock_unobserved
            && between.engine.same_future_as(&snapshot.engine)
            && env.txlog == base.txlog
            // Bytes a failed fsync left in the page cache read differently once the cache
            // drops them (an eviction, the end of the run): a future the fault-free run,
            // which has none, cannot stand for. The append sink's file is compared emptied,
            // so this is checked on the whole disk first.
            && env.disk.unpersisted_bytes() == 0
            && compared_disk(&env.disk, config.sink).is_ok_and(|disk| disk == facts.disk)
    }

    /// The observation of a run stopped where it converged ([`Forks::converges`]): its
    /// incarnations, the last one's counters taken on by what the fault-free run counted
    /// after the boundary; its sink file, followed by what the fault-free run appended; the
    /// files and the final windows the fault-free run ended with (the disks had the same
    /// names at the boundary, and the same operations follow).
    fn converged(&self, paused: &Paused) -> Observation {
        let at = (paused.index / self.every_events) as usize;
        let (snapshot, facts) = (&self.snapshots[at], &self.facts[at]);
        assert_eq!(snapshot.index, paused.index);
        assert!(facts.sink_appended_only);
        let mut sink_bytes = paused
            .world
            .env()
            .disk
            .read(&self.spec.config.sink.file_name())
            .expect("compared: the sink file exists");
        sink_bytes.extend_from_slice(&self.end.sink_bytes[facts.sink_len_bytes..]);
        let mut incarnations = paused.incarnations.clone();
        incarnations.push(Incarnation {
            stats: taken_on(
                paused.engine.stats(),
                snapshot.engine.stats(),
                &self.end.stats,
            ),
            end: IncarnationEnd::Completed,
        });
        let known = self
            .known
            .as_ref()
            .expect("a converging run's sink is the documented file");
        let mut observation = Observation::of_file_view(
            &self.spec.config,
            known.observe(&sink_bytes),
            &self.end.files,
            &incarnations,
            &Outcome::Completed,
            &self.end.final_state,
        );
        // The sink served the point's requests up to the boundary, then those the
        // fault-free run sent after it (the same requests follow).
        let served_after = self.end.served - snapshot.world.served_requests(SINK_WRITE_OP);
        let stats = incarnations.iter().map(|i| &i.stats);
        observation.sink_writes = Some(SinkWriteCounts {
            served: paused.world.served_requests(SINK_WRITE_OP) + served_after,
            written: stats.clone().map(|s| s.written).sum(),
            skipped: stats.map(|s| s.skipped).sum(),
        });
        observation.sink_outage = SinkOutage::of(&paused.world, observation.restarts);
        observation.restart = RestartSteps::of(&paused.world, &self.spec.config);
        observation
    }

    /// The latest snapshot from which a run whose first fault is at `step` can start: none
    /// if the fault comes before the first event (during the first recovery).
    fn before(&self, step: u64) -> Option<&Paused> {
        let after = self
            .snapshots
            .partition_point(|s| s.world.steps_taken() <= step);
        after.checked_sub(1).map(|i| &self.snapshots[i])
    }

    /// A fork of the fault-free run at the latest snapshot before `plan`'s first fault, under
    /// `plan` (None: the plan starts before the first snapshot).
    pub fn fork(&self, plan: &FaultPlan, record_crash_states: bool) -> Option<Paused> {
        let first = plan.faults().first().map(|f| f.step)?;
        let snapshot = self.before(first)?;
        Some(Paused {
            world: snapshot.world.fork(plan.clone(), record_crash_states),
            engine: snapshot.engine.clone(),
            incarnations: snapshot.incarnations.clone(),
            restarts: snapshot.restarts,
            index: snapshot.index,
        })
    }

    /// The run under `plan` to its end, from the snapshot before its first fault (or from
    /// scratch when there is none), recording crash-state counts if asked.
    pub fn run(&self, plan: &FaultPlan, record_crash_states: bool) -> RunResult {
        let spec = RunSpec {
            plan: plan.clone(),
            ..self.spec.clone()
        };
        let Some(paused) = self.fork(plan, record_crash_states) else {
            return if record_crash_states {
                run_recording_crash_states(&spec)
            } else {
                run(&spec)
            };
        };
        match resume(&self.spec, paused, &mut |_| Control::Continue) {
            Driven::Finished(result) => *result,
            Driven::Stopped(_) => unreachable!("never told to stop"),
        }
    }

    /// One point of a sweep under `plan`, forked, and stopped where it converges if asked.
    pub fn run_point(&self, plan: &FaultPlan, converge: bool) -> PointRun {
        let spec = RunSpec {
            plan: plan.clone(),
            ..self.spec.clone()
        };
        let Some(paused) = self.fork(plan, false) else {
            return PointRun::of(&run(&spec), &spec, self.known.as_ref());
        };
        let driven = resume(&self.spec, paused, &mut |between| {
            if converge && self.converges(&between) {
                Control::Stop
            } else {
                Control::Continue
            }
        });
        match driven {
            Driven::Finished(result) => PointRun::of(&result, &spec, self.known.as_ref()),
            Driven::Stopped(paused) => PointRun {
                observation: self.converged(&paused),
                fingerprint: None,
            },
        }
    }
}

/// The disk as converging compares it: the append sink's file emptied and synced (its bytes
/// are the one thing the future does not read); every other disk as it is.
fn compared_disk(disk: &Disk, sink: SinkKind) -> Result<Disk, DiskError> {
    match sink {
        SinkKind::Append => {
            let file = sink.file_name();
            let mut compared = disk.clone();
            compared.truncate(&file, 0)?;
            compared.fsync(&file)?;
            Ok(compared)
        }
        SinkKind::Idempotent | SinkKind::Transactional => Ok(disk.clone()),
    }
}

/// The stats a converged run's last incarnation would have ended with: its own `now` at the
/// boundary, with the counters the fault-free run moved after the same boundary (`base` at
/// the boundary, `end` at its end) moved alike. Every field is named, so a new one needs a
/// decision here.
fn taken_on(
    now: &IncarnationStats,
    base: &IncarnationStats,
    end: &IncarnationStats,
) -> IncarnationStats {
    let IncarnationStats {
        restored,
        resume_from_index,
        written,
        skipped,
        rejected_checkpoints,
        resume_decided,
        last_committed,
        processed_upto_index,
    } = now.clone();
    assert_eq!(
        processed_upto_index, base.processed_upto_index,
        "the same boundary"
    );
    IncarnationStats {
        // Decided by recovery, before the boundary.
        restored,
        resume_from_index,
        rejected_checkpoints,
        resume_decided,
        // Counted after it as the fault-free run counted.
        written: written + (end.written - base.written),
        skipped: skipped + (end.skipped - base.skipped),
        processed_upto_index: end.processed_upto_index,
        // A checkpoint committed after the boundary is the fault-free run's.
        last_committed: if end.last_committed == base.last_committed {
            last_committed
        } else {
            end.last_committed.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Scenario;
    use crate::spec::ScenarioSpec;
    use keel_sim::{CrashPoint, Fault, PlannedFault};

    /// Every single fault of these kinds at every step of ch04's fault-free run, forked and
    /// converged, observes what the run from scratch observes: records, files, counters,
    /// the sink writes the simulated sink served (written plus skipped), everything. Returns
    /// (points, converged points).
    fn forked_equals_naive(sink: SinkKind, allowed_lateness: Option<i64>) -> (u64, u64) {
        let spec = ScenarioSpec {
            allowed_lateness,
            ..ScenarioSpec::ch04(0)
        };
        let events = Scenario::by_name("ch04").unwrap().events();
        let fault_free = spec.run_spec(&events, sink, FaultPlan::none()).unwrap();
        let forks = Forks::new(&fault_free);
        let steps = run(&fault_free).world.steps_taken();
        let (mut points, mut converged) = (0, 0);
        for step in 0..steps {
            for fault in [
                Fault::ProcessCrash {
                    at: CrashPoint::After,
                },
                Fault::AckLost,
                Fault::SinkError,
                Fault::Zombie,
            ] {
                let plan = FaultPlan::new([PlannedFault { step, fault }]).unwrap();
                let forked = forks.run_point(&plan, true);
                let naive = PointRun::naive(&RunSpec {
                    plan,
                    ..fault_free.clone()
                });
                assert_eq!(forked.observation, naive.observation, "{fault} at {step}");
                assert!(naive.observation.sink_writes.is_some());
                points += 1;
                converged += u64::from(forked.fingerprint.is_none());
            }
        }
        (points, converged)
    }

    #[test]
    fn a_converged_point_observes_what_the_naive_run_observes() {
        let figures = [
            forked_equals_naive(SinkKind::Append, None),
            forked_equals_naive(SinkKind::Idempotent, None),
            forked_equals_naive(SinkKind::Idempotent, Some(0)),
        ];
        assert_eq!(figures, [(236, 201), (236, 198), (232, 196)]);
    }
}
