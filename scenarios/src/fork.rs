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
//! - the disk as the process sees it ([`keel_sim::Disk::same_view_as`]): the same names,
//!   each with the same bytes, the same read-only state, and no byte a failed fsync left
//!   unpersisted anywhere (a cache drop would change it). What is durable and what is still
//!   pending is not compared: with no fault to come, nothing can tell them apart (only a
//!   power loss, a failed fsync or an eviction does, and each is a planned fault). The
//!   append sink's file is left out where the fault-free run never read it after the
//!   boundary (measured: `keel_sim::Disk::reads_of`; the shipped append connector reads it
//!   only at its open), so its bytes may differ, and the point's final file is its own
//!   bytes then followed by what the fault-free run appended after the boundary (checked to
//!   be a pure append: the fault-free file at the boundary is a prefix of its final file);
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
//! A single-fault point compares itself so at each of the few boundaries just after its
//! fault, not only at snapshots (`fork/ahead.rs`). Anything else, and the point runs on. A
//! converged point's trace is not computed, so it has no trace fingerprint: a sweep's
//! fingerprint hashes what both algorithms compute, each point's faults and outcome digest
//! (see `tally::SweepTally`). `keel sweep --naive` runs every point from scratch to its end
//! instead: the reference the default is checked against, report for report
//! (`scenarios/tests/fork.rs`).
//!
//! A point also stops where an earlier point's run stands for it: at an event boundary
//! (`fork/shared.rs`) or at a restart, before its recovery (`fork/restart.rs`). A point of
//! two faults starts from the run of its first (`fork/cursor.rs`). A power-loss point whose
//! sibling in another crash state ran to the restart takes that restart with its own disk
//! (`fork/sibling.rs`).

use crate::observation::{
    documented_sink_file, stray_files_of, FinalState, KnownSink, Observation, RestartSteps,
};
use crate::runner::{
    resume, run, run_between, run_between_with, run_recording_crash_counts, Control, Driven,
    IncarnationEnd, Moment, Outcome, Paused, RunResult, RunSpec,
};
use ahead::AheadBoundary;
pub use converged_pairs::{ConvergedFirst, SingleFault};
use converging::{comparable, facts_of, same_surroundings};
pub use converging::{ConvergedAt, UntilConverged};
use keel_engine::{
    ChainMemo, CheckpointMemo, EncodeMemo, EngineCaches, IncarnationStats, KnownSinkFile,
    OperatorState, Record, SinkKind, SINK_WRITE_OP,
};
use keel_sim::{Contents, CrashCounts, Disk, FaultPlan, Fingerprint, Served};
use restart::{RestartCandidate, RestartClass};
pub use shared::SharedFutures;
use shared::{After, Candidate, Class, ConvergedOn};
use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::Arc;

mod ahead;
mod converged_pairs;
mod converging;
mod cursor;
mod described;
mod ending;
mod restart;
mod shared;
mod sibling;

/// The most snapshots a fault-free run keeps: one every `ceil((events + 1) / SNAPSHOTS_MAX)`
/// events, so memory stays bounded while a point re-runs at most that many events of prefix.
pub const SNAPSHOTS_MAX: u64 = 256;

/// One fault-free run of a sink, with its snapshots.
#[derive(Debug)]
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
    /// Shared with an earlier sink's forks whose fault-free file had the same bytes (the
    /// append and the idempotent sink's: a million-event file read twice kept 60 MB twice).
    known: Option<Arc<KnownSink>>,
    /// The known file as the fault-free run's disk held it: its chunks are shared with the
    /// snapshots' files, so a point's file is found to be a prefix of it without reading
    /// most of either (empty with no known file).
    known_contents: Contents,
    /// The steps taken at each event boundary of the fault-free run's first incarnation:
    /// where a single-fault point can start (`fork/cursor.rs`). A u32 each (a run takes at
    /// most `STEPS_MAX` steps), no spare capacity: one a boundary of a million-event run
    /// was 16 MB a sink as the vector doubled.
    boundary_steps: Vec<u32>,
}

/// What converging at a snapshot compares and takes from the fault-free run.
#[derive(Clone, Debug)]
struct Facts {
    /// The disk as it is compared: the append sink's file emptied (see [`converging::compared_disk`]).
    disk: Disk,
    /// The sink file's length then.
    sink_len_bytes: usize,
    /// Whether the fault-free run only appended to its sink file after this snapshot and,
    /// where the file is left out of the comparison (the append sink's), never read it
    /// (measured: [`keel_sim::Disk::reads_of`]): only then is what it did next the same
    /// whatever that file held.
    sink_appended_only: bool,
}

/// What a sweep's forks of one sink may take from what it made before, where equal (the
/// sinks' fault-free files are mostly the same bytes, and the same records as the reference's).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sharing<'a> {
    /// An earlier sink's forks: its fault-free file read, and the cache it built on.
    pub earlier: Option<&'a Forks>,
    /// The reference's records, which the fault-free file's records may be.
    pub records: Option<&'a Arc<[Record]>>,
}

// `Forks::boundary_steps` holds a step count in a u32.
const _: () = assert!(keel_sim::world::STEPS_MAX <= u32::MAX as u64);

/// How the fault-free run ended: its sink file's length (its bytes are the known file's),
/// the sink writes the simulated sink served, the stray files it left, its one
/// incarnation's stats, its windows.
#[derive(Clone, Debug)]
struct End {
    sink_len_bytes: usize,
    /// How many times the run read its sink file, by its end ([`keel_sim::Disk::reads_of`]).
    sink_reads: u64,
    served: Served,
    stray_files: Arc<[String]>,
    stats: IncarnationStats,
    final_state: FinalState,
    /// The operator state `final_state` is of (its windows share their chunks).
    final_operator_state: OperatorState,
}

/// What a point's run came to: what its consumers observed, and its trace fingerprint
/// (None when it converged: the rest of its trace was never made).
#[derive(Clone, Debug)]
pub struct PointRun {
    /// Shared by points known to observe the same (power-loss siblings: `fork/sibling.rs`),
    /// so that whoever judges it can judge it once.
    pub observation: Rc<Observation>,
    pub fingerprint: Option<Fingerprint>,
    /// Where it stopped because an earlier point's run stood for it (`fork/shared.rs`).
    pub shared: Option<SharedAt>,
    /// The crash states of the class its power-loss class resolved to, if it had one.
    pub class_states: Option<num_bigint::BigUint>,
    /// Where it converged on the fault-free run, if it stopped there.
    pub converged_at: Option<ConvergedAt>,
}

/// Where a point's run stopped to take on an earlier point's future.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedAt {
    /// At an event boundary with its plan spent.
    Boundary,
    /// At a restart with its plan spent, before its recovery.
    Restart,
    /// At such a restart, resolved from its power-loss sibling's without running to it
    /// (`fork/sibling.rs`).
    SiblingRestart,
}

impl PointRun {
    /// The run of `spec` from event 0 to its end, as `--naive` does it.
    pub fn naive(spec: &RunSpec) -> PointRun {
        let result = run(spec);
        PointRun::of(&result, spec, None, &FinalState::of(&result.final_state))
    }

    fn of(
        result: &RunResult,
        spec: &RunSpec,
        known: Option<&KnownSink>,
        final_state: &FinalState,
    ) -> PointRun {
        PointRun {
            observation: Rc::new(Observation::of_known_ending(
                result,
                &spec.config,
                known,
                final_state,
            )),
            fingerprint: Some(result.world.fingerprint()),
            shared: None,
            class_states: result.world.class_states().cloned(),
            converged_at: None,
        }
    }
}

impl Forks {
    /// Runs `spec` (fault-free) once, keeping a snapshot every few events.
    pub fn new(spec: &RunSpec) -> Forks {
        Forks::with_snapshots_max(spec, SNAPSHOTS_MAX, Sharing::default())
    }

    /// [`Forks::new`], building on what `sharing` offers.
    pub fn sharing(spec: &RunSpec, sharing: Sharing<'_>) -> Forks {
        Forks::with_snapshots_max(spec, SNAPSHOTS_MAX, sharing)
    }

    /// [`Forks::new`] with at most `snapshots_max` snapshots (tests take few, so that most
    /// points run far before they converge, and share futures on the way).
    pub fn with_snapshots_max(spec: &RunSpec, snapshots_max: u64, sharing: Sharing<'_>) -> Forks {
        let Sharing { earlier, records } = sharing;
        assert!(spec.plan.is_empty(), "snapshots of the fault-free run");
        assert!(snapshots_max >= 1);
        let every_events = (spec.events.len() as u64 + 1)
            .div_ceil(snapshots_max)
            .max(1);
        let mut snapshots = Vec::new();
        let mut boundary_steps: Vec<u32> = Vec::with_capacity(spec.events.len() + 1);
        // The sinks' fault-free files are mostly the same bytes: the idempotent sink's key
        // index then follows the earlier file instead of copying every key (a cache: the
        // same run either way).
        let caches = EngineCaches {
            sink: earlier
                .filter(|earlier| !earlier.known_contents.is_empty())
                .filter(|_| !spec.config.sink.is_transactional())
                .map(|earlier| Arc::new(KnownSinkFile::new(&earlier.known_contents))),
            chains: None,
            checkpoints: None,
            encoded: None,
        };
        let driven = run_between_with(spec, caches, &mut |moment| {
            let Moment::Between(between) = moment else {
                return Control::Continue;
            };
            if between.incarnations.is_empty() {
                assert_eq!(between.index, boundary_steps.len() as u64);
                let steps = u32::try_from(between.world.steps_taken()).expect("STEPS_MAX fits");
                boundary_steps.push(steps);
            }
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
        // A run that restarted in its first incarnation has fewer boundaries than events.
        boundary_steps.shrink_to_fit();
        // A snapshot's growing files are prefixes of the end's: they hold its chunks, not
        // copies of the last one each (up to 64 KiB a file a snapshot).
        for snapshot in &mut snapshots {
            snapshot.world.share_disk_prefixes_of(&result.world);
        }
        let sink = spec.config.sink;
        share_caches(&mut snapshots, &result.world.env().disk, sink);
        // Converging takes the rest of a point from the fault-free run's one incarnation.
        let one_incarnation =
            result.incarnations.len() == 1 && result.outcome == Outcome::Completed;
        // The oracle reads the sink where the user guide documents it: a converged point's sink
        // is the engine's file, so only where the two are one file.
        let file = sink.file_name();
        let known_contents = (!sink.is_transactional())
            .then(|| {
                result
                    .world
                    .env()
                    .disk
                    .read_shared(documented_sink_file(sink))
                    .ok()
            })
            .flatten();
        let sink_bytes = result.world.env().disk.read_shared(file).ok();
        let sink_reads_end = result.world.env().disk.reads_of(file);
        let (facts, end) = match (sink_bytes, &known_contents) {
            (Some(sink_bytes), Some(known))
                if !sink.is_transactional()
                    && one_incarnation
                    && file == documented_sink_file(sink) =>
            {
                let facts = snapshots
                    .iter()
                    .map(|snapshot| {
                        facts_of(&snapshot.world.env().disk, sink, known, sink_reads_end)
                            .expect("the sink is open between events")
                    })
                    .collect();
                // One file: the rest a converged point takes is the known file's tail.
                assert!(sink_bytes == *known);
                (facts, Some(sink_bytes.len()))
            }
            _ => (Vec::new(), None),
        };
        let earlier_known = earlier.and_then(|earlier| earlier.known.as_ref());
        let known = known_contents.as_ref().map(|contents| {
            match earlier_known.filter(|known| contents == known.bytes()) {
                Some(known) => known.clone(),
                None => Arc::new(KnownSink::sharing(contents.clone(), records)),
            }
        });
        Forks {
            spec: spec.clone(),
            every_events,
            snapshots,
            facts,
            end: End {
                sink_len_bytes: end.unwrap_or_default(),
                sink_reads: sink_reads_end,
                served: result.world.served(SINK_WRITE_OP),
                stray_files: stray_files_of(spec.config.sink, &result.disk_files()).into(),
                stats: result.incarnations[0].stats.clone(),
                final_state: FinalState::of(&result.final_state),
                final_operator_state: result.final_state.clone(),
            },
            known,
            known_contents: known_contents.unwrap_or_default(),
            boundary_steps,
        }
    }

    /// Whether points of this sink may share futures: a file sink read where the oracle
    /// reads it, through the fault-free run's lines (what [`Forks::finish`] needs).
    fn shareable(&self) -> bool {
        let sink = self.spec.config.sink;
        !sink.is_transactional()
            && self.known.is_some()
            && sink.file_name() == documented_sink_file(sink)
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
    pub fn fork(&self, plan: &FaultPlan, record: Option<CrashCounts>) -> Option<Paused> {
        let first = plan.iter().next().map(|f| f.step)?;
        let snapshot = self.before(first)?;
        let mut world = snapshot.world.fork(plan.clone(), record.is_some());
        if let Some(counts) = record {
            world.record_crash_states(counts);
        }
        Some(snapshot.with_world(world))
    }

    /// The run under `plan` from event 0 to its end, recording crash-state counts if asked:
    /// a plan whose first fault comes before the first snapshot.
    fn run_from_scratch(&self, plan: &FaultPlan, record: Option<CrashCounts>) -> RunResult {
        let spec = RunSpec {
            plan: plan.clone(),
            ..self.spec.clone()
        };
        match record {
            Some(counts) => run_recording_crash_counts(&spec, counts),
            None => run(&spec),
        }
    }

    /// One point of a sweep under `plan`, forked (given `shared`, a point of two faults from
    /// the run of its first, `fork/cursor.rs`), and stopped where it converges if asked:
    /// on the fault-free run at a snapshot, or, given `shared`, on an earlier point's run
    /// remembered there, at the first boundary with its plan spent (`fork/shared.rs`); its
    /// own run is remembered there in turn.
    pub fn run_point(
        &self,
        plan: &FaultPlan,
        converge: bool,
        shared: Option<&SharedFutures>,
    ) -> PointRun {
        self.run_point_noting(plan, converge, shared, false)
    }

    /// A depth-2 sweep's first fault under `plan`, run as [`Forks::run_point`] runs it
    /// alone, noting where it converged whether its whole disk was alike with the fault-free
    /// run's through any power loss ([`ConvergedAt::disk_alike`]).
    pub fn run_first_fault(&self, plan: &FaultPlan) -> PointRun {
        self.run_point_noting(plan, true, None, true)
    }

    fn run_point_noting(
        &self,
        plan: &FaultPlan,
        converge: bool,
        shared: Option<&SharedFutures>,
        note_disk: bool,
    ) -> PointRun {
        let spec = RunSpec {
            plan: plan.clone(),
            ..self.spec.clone()
        };
        // The table where futures are shared, if this sink's points share them.
        let sharing = shared.filter(|_| self.shareable());
        if let Some(run) = sharing
            .filter(|_| converge)
            .and_then(|shared| self.power_loss_sibling(plan, shared))
        {
            return run;
        }
        let from_cursor = shared.and_then(|shared| {
            self.before_last_fault(plan, shared.first_faults())
                .or_else(|| self.before_only_fault(plan, shared.fault_free()))
        });
        // None: the fault comes before the first snapshot (during the first recovery), and
        // the run starts from scratch, still stopping where it converges.
        let mut paused = from_cursor.or_else(|| self.fork(plan, None));
        // Single-fault points at one step reach it with the same disk, forked from the same
        // fault-free run: their power-loss classes are worked out once.
        // So do depth-2 points with one first fault at their second step.
        match (paused.as_mut(), shared, plan.faults().as_slice()) {
            (Some(paused), Some(shared), [only])
                if matches!(only.fault, keel_sim::Fault::PowerLossClass { .. }) =>
            {
                paused
                    .world
                    .share_classes_at(Arc::clone(&shared.classes_memo), only.step);
            }
            (Some(paused), Some(shared), [first, second])
                if matches!(second.fault, keel_sim::Fault::PowerLossClass { .. }) =>
            {
                paused
                    .world
                    .share_classes_at(shared.pair_classes_memo(*first), second.step);
            }
            _ => {}
        }
        if let (Some(paused), Some(_), true) = (paused.as_mut(), sharing, converge) {
            if Forks::keeps_disk_before_power_loss(plan) {
                paused.world.keep_disk_before_power_loss();
            }
        }
        let sink = self.spec.config.sink;
        let shared = sharing;
        let key = self.spec.config.key;
        let mut candidate: Option<Candidate> = None;
        let mut joined: Option<Rc<Class>> = None;
        let mut restart_candidate: Option<RestartCandidate> = None;
        let mut restart_joined: Option<(RestartCandidate, Rc<RestartClass>)> = None;
        let mut converged_ahead: Option<Rc<AheadBoundary>> = None;
        let mut on_moment = |moment: Moment| {
            if !converge {
                return Control::Continue;
            }
            let between = match moment {
                Moment::Between(between) => between,
                Moment::Restarting(restarting) => {
                    let Some(shared) = shared else {
                        return Control::Continue;
                    };
                    self.keep_power_loss_restart(plan, &restarting, shared);
                    let Some(state) = self.restart_state(&restarting, shared) else {
                        return Control::Continue;
                    };
                    if let Some(class) =
                        shared.at_restart(key, &state, |class| self.joins_restart(&state, class))
                    {
                        restart_joined = Some((state, class));
                        return Control::Stop;
                    }
                    // The first such restart; a later one ends the candidate's chance of being
                    // remembered (its future must be one incarnation).
                    restart_candidate.get_or_insert(state);
                    return Control::Continue;
                }
            };
            // Made at most once a boundary, and only where a comparison needs it.
            let made = OnceCell::new();
            let compared = || made.get_or_init(|| comparable(&between, sink)).as_ref();
            if self.converges(&between, compared) {
                return Control::Stop;
            }
            let Some(shared) = shared else {
                return Control::Continue;
            };
            if let Some(boundary) = self.converges_ahead(plan, &between, shared, compared) {
                converged_ahead = Some(boundary);
                return Control::Stop;
            }
            if let Some(class) = self.shares(&between, shared, compared) {
                joined = Some(class);
                return Control::Stop;
            }
            if candidate.is_none() {
                candidate = compared().and_then(|disk| Candidate::of(&between, sink, disk.clone()));
            }
            Control::Continue
        };
        let driven = match paused {
            Some(paused) => resume(&self.spec, paused, &mut on_moment),
            None => run_between(&spec, &mut on_moment),
        };
        let config = &self.spec.config;
        match driven {
            Driven::Finished(result) => {
                if let Some(shared) = shared {
                    if let Some(candidate) = candidate {
                        self.remember_finished(candidate, &result, shared);
                    }
                    if let (Some(candidate), Some(ending)) =
                        (restart_candidate, self.ending_of(&result))
                    {
                        self.remember_restart(candidate, &ending, &result.world, shared);
                    }
                }
                let final_state = self.final_state_of(&result.final_state);
                PointRun::of(&result, &spec, self.known.as_deref(), &final_state)
            }
            Driven::Stopped(paused) => {
                let rest = match (&joined, &converged_ahead) {
                    (Some(class), _) => self.shared(class),
                    (None, Some(boundary)) => {
                        if let (Some(candidate), Some(shared)) = (candidate, shared) {
                            let on = ConvergedOn::Ahead(Rc::clone(boundary));
                            self.remember_converged(candidate, &paused, on, shared);
                        }
                        self.rest_from(&boundary.paused, &boundary.facts)
                    }
                    (None, None) => {
                        if let (Some(candidate), Some(shared)) = (candidate, shared) {
                            let at = (paused.index / self.every_events) as usize;
                            let on = ConvergedOn::Snapshot(at);
                            self.remember_converged(candidate, &paused, on, shared);
                        }
                        self.converged(&paused)
                    }
                };
                let ending = self.ending(&paused, &rest);
                if let (Some(candidate), Some(shared)) = (restart_candidate, shared) {
                    self.remember_restart(candidate, &ending, &paused.world, shared);
                }
                let restart = RestartSteps::of(&paused.world, config);
                let converged_at = match (&joined, &converged_ahead) {
                    (Some(_), _) => None,
                    (None, Some(boundary)) => {
                        Some(ConvergedAt::of(&paused, &boundary.paused, &boundary.facts))
                    }
                    (None, None) => {
                        let mut at = self.converged_at_snapshot(&paused);
                        if note_disk {
                            at.disk_alike = Some(self.disk_alike_at_snapshot(&paused));
                        }
                        Some(at)
                    }
                };
                PointRun {
                    observation: Rc::new(self.observe(
                        &ending,
                        &paused.world,
                        restart,
                        shared.map(SharedFutures::described),
                    )),
                    fingerprint: None,
                    shared: joined.is_some().then_some(SharedAt::Boundary),
                    class_states: paused.world.class_states().cloned(),
                    converged_at,
                }
            }
            Driven::Restarting(stopped) => {
                let (world, incarnations) = *stopped;
                let (state, class) = restart_joined.expect("stopped at a restart it shares");
                PointRun {
                    observation: Rc::new(self.restarted(
                        &world,
                        &incarnations,
                        &state,
                        &class,
                        shared.map(SharedFutures::described),
                    )),
                    fingerprint: None,
                    shared: Some(SharedAt::Restart),
                    class_states: world.class_states().cloned(),
                    converged_at: None,
                }
            }
        }
    }

    /// The sink file of a run stopped at a boundary where it was compared (so it exists).
    fn sink_file_at(&self, paused: &Paused) -> Contents {
        paused
            .world
            .env()
            .disk
            .read_shared(self.spec.config.sink.file_name())
            .expect("compared: the sink file exists")
    }

    /// Remembers the future of a run from its first boundary with its plan spent
    /// (`candidate`), now that it converged at `paused` on the fault-free run `on`.
    fn remember_converged(
        &self,
        candidate: Candidate,
        paused: &Paused,
        on: ConvergedOn,
        shared: &SharedFutures,
    ) {
        if candidate.index() == paused.index {
            // It converged there: the fault-free run already stands for it.
            return;
        }
        let sink = self.spec.config.sink;
        let class = Class::new(
            candidate,
            sink,
            &self.sink_file_at(paused),
            paused.world.env().disk.reads_of(sink.file_name()),
            After::Converged {
                on,
                stats_then: paused.engine.stats().clone(),
                served_then: paused.world.served(SINK_WRITE_OP),
            },
        );
        if let Some(class) = class {
            shared.remember(class);
        }
    }

    /// Remembers the future of a run from its first boundary with its plan spent
    /// (`candidate`), now that it ran to its end (`result`): only if it completed in the
    /// incarnation it had at the boundary.
    fn remember_finished(&self, candidate: Candidate, result: &RunResult, shared: &SharedFutures) {
        let one_more = result.incarnations.len() == candidate.incarnations_ended() + 1;
        if result.outcome != Outcome::Completed || !one_more {
            return;
        }
        let file = self.spec.config.sink.file_name();
        let Ok(sink_end) = result.world.env().disk.read_shared(file) else {
            return;
        };
        let last = result
            .incarnations
            .last()
            .expect("one more than at the boundary");
        assert_eq!(last.end, IncarnationEnd::Completed);
        let reads_end = result.world.env().disk.reads_of(file);
        let class = Class::new(
            candidate,
            self.spec.config.sink,
            &sink_end,
            reads_end,
            After::Finished {
                stats_end: last.stats.clone(),
                served_end: result.world.served(SINK_WRITE_OP),
                stray_files: self.stray_files_of(result),
                final_state: self.final_state_of(&result.final_state),
            },
        );
        if let Some(class) = class {
            shared.remember(class);
        }
    }

    /// The stray files a run that ended as `result` left (`observation::stray_files_of`).
    fn stray_files_of(&self, result: &RunResult) -> Arc<[String]> {
        stray_files_of(self.spec.config.sink, &result.disk_files()).into()
    }

    /// What the oracle reads of a point's final operator state, the fault-free run's where
    /// it has the same windows.
    fn final_state_of(&self, state: &OperatorState) -> FinalState {
        FinalState::of_known(
            state,
            (&self.end.final_operator_state, &self.end.final_state),
        )
    }
}

/// Hands every snapshot's engine the caches its points build on (`EngineCaches`): memos of
/// chain restores and of full checkpoint decodes, and the fault-free run's sink file as
/// `disk` (its end) holds it. A point's connector then reads and indexes only the bytes
/// after the lines its file shares with that file, and a snapshot's key index is those
/// lines, not a copy of their keys.
///
/// Made from this run's own disk even where the run built on an earlier sink's file of the
/// same bytes (`Sharing::earlier`): a point compares its file with this one chunk by chunk,
/// and only chunks its disk shares with this run's are equal without reading them.
fn share_caches(snapshots: &mut [Paused], disk: &Disk, sink: SinkKind) {
    let caches = EngineCaches {
        sink: (!sink.is_transactional())
            .then(|| disk.read_shared(sink.file_name()).ok())
            .flatten()
            .map(|contents| Arc::new(KnownSinkFile::new(&contents))),
        chains: Some(Arc::new(ChainMemo::default())),
        checkpoints: Some(Arc::new(CheckpointMemo::default())),
        encoded: Some(Arc::new(EncodeMemo::default())),
    };
    for snapshot in snapshots {
        let sink_file = snapshot.world.env().disk.read_shared(sink.file_name()).ok();
        snapshot.engine.share_caches(&caches, sink_file.as_ref());
    }
}

#[cfg(test)]
mod tests;
