//! Shared futures: two points of a sweep whose runs reach the same event boundary in states
//! nothing after it can tell apart go on alike from there, so the later one stops at that
//! boundary and takes the rest of its run from the earlier one (the issue's "share
//! post-recovery runs": every process crash between two checkpoints recovers from the same
//! checkpoint to the same boundary, and only the first of them replays the input from it).
//!
//! The rule is the convergence rule of `fork.rs` ([`super::converging::same_future`]), applied between
//! two faulty runs instead of a faulty run and the fault-free one: the same engine (all but
//! its counters), the same disk as the process sees it (names and bytes, durable or not)
//! but for the append sink's bytes, no byte a failed fsync left unpersisted, the same
//! transactional log, the clock equal where the engine observes it, and
//! no fault still to come in either run. A point is remembered at its first boundary with its
//! plan spent, once its own run is over: converged on the fault-free run (what it left after
//! the boundary is its own appends up to the snapshot it converged at, then the fault-free
//! run's rest), or run to its end, completed in the same incarnation (its appends, files,
//! final windows and counters at the end), and only when it only appended to its sink after
//! the boundary and, the append sink's bytes being left out, never read that file
//! (measured by the disk: `keel_sim::Disk::reads_of`; a future that read it could depend on
//! bytes the other run does not have). Power-loss crash states that leave the same files
//! share this way too.
//!
//! At a restart nothing is left out: a crash leaves only the world, so two runs restarting
//! in the same world (every file's bytes, the sink's included, the log, the clock and the
//! sink's outage, nothing unpersisted, no fault to come) recover alike and go on alike,
//! whatever the engine's recovery does. A run is remembered at its first restart with its
//! plan spent ([`RestartCandidate`]) when what followed was one incarnation that completed;
//! a later point restarting in the same world stops before its recovery. No claim about
//! what the recovery reads or cuts is taken on trust (the append connector's open reading
//! the file only to cut a torn tail was one, and an engine whose cut is one byte short
//! broke it: `scripts/mutants-switchable.sh` sweeps such engines against `--naive`). A
//! run whose first sink outage has not yet seen its next served request is neither
//! remembered nor shared at a restart (when it does depends on the clock).
//!
//! A table serves one run of points in point order on one thread (a sweep hands each
//! thread chunks of consecutive points, the same chunks whatever the thread count:
//! `sweep::SHARING_CHUNK_POINTS`), so which point of a class runs and which takes the rest
//! is the same in every run of the sweep, and so is every record, even the trace
//! fingerprint only a point that ran to its end has. What a point observes does not depend
//! on it at all (the rule's claim, checked against `--naive` in `scenarios/tests/fork.rs`).
//! The table is bounded ([`SHARED_FUTURES_MAX`]): forgetting a class costs time, never a
//! different observation.

use super::ahead::{Ahead, AheadBoundary};
use super::cursor::FirstFaults;
use super::described::DescribedFile;
use super::restart::{RestartCandidate, RestartClass};
use super::sibling::PowerLossRestart;
use crate::observation::FinalState;
use crate::runner::{Between, Paused};
use keel_engine::{Engine, IncarnationStats, KeyScheme, SinkKind, SINK_WRITE_OP};
use keel_sim::{Clock, Contents, Disk, Served, TxLog};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

/// The most futures a sweep keeps at once. Points come in step order, so a class's members
/// follow each other: the oldest classes are forgotten first. Each holds a paused run (its
/// engine and disk): measured on the million-event sweep at 2 jobs, 32 held 11 MB more at
/// the peak than 8, for no gain in time (and no change on ch04 at depth 2 or on 3,000 events).
pub const SHARED_FUTURES_MAX: usize = 8;

/// The most restarts a sweep remembers at once (newest kept): the points of one class, every
/// crash between two checkpoints, come one after another, so the newest two suffice.
/// Measured on the million-event sweep at 2 jobs: 8 held 21 MB more at the peak than 2, for
/// no gain in time.
pub const RESTART_FUTURES_MAX: usize = 2;

/// What the future of a run depends on in its world, at an event boundary or a restart, as
/// [`super::same_surroundings`] compares it.
#[derive(Clone, Copy, Debug)]
pub struct Surroundings<'a> {
    pub clock: &'a Clock,
    pub sink_down_until_ms: u64,
    pub txlog: &'a TxLog,
    /// The disk with the append sink's bytes left out (`fork::compared_disk`); at a
    /// restart, the disk as it is.
    pub disk: &'a Disk,
}

/// What the future of a run depends on at an event boundary, as [`super::converging::same_future`]
/// compares it.
#[derive(Clone, Debug)]
pub struct Boundary<'a> {
    pub clock: &'a Clock,
    pub sink_down_until_ms: u64,
    pub engine: &'a Engine,
    pub txlog: &'a TxLog,
    /// The disk with the append sink's bytes left out (`fork::compared_disk`).
    pub disk: &'a Disk,
}

/// A run's state at its first boundary with its plan spent, kept until the run ends.
#[derive(Clone, Debug)]
pub struct Candidate {
    index: u64,
    clock: Clock,
    sink_down_until_ms: u64,
    engine: Engine,
    txlog: TxLog,
    disk: Disk,
    /// The sink file then, whole (checked to be a prefix of what the run ends with).
    sink_bytes: Contents,
    /// How many times the run had read its sink file by then (`converging::unread_after`).
    sink_reads: u64,
    stats: IncarnationStats,
    served: Served,
    /// The incarnations that had ended by then.
    incarnations_ended: usize,
}

impl Boundary<'_> {
    /// All but the engine.
    pub fn surroundings(&self) -> Surroundings<'_> {
        Surroundings {
            clock: self.clock,
            sink_down_until_ms: self.sink_down_until_ms,
            txlog: self.txlog,
            disk: self.disk,
        }
    }
}

impl Candidate {
    /// The state of the run `between` shows, whose compared disk is `disk` (so it can stand
    /// for others: `fork::comparable`); None without a sink file.
    pub fn of(between: &Between, sink: SinkKind, disk: Disk) -> Option<Candidate> {
        let env = between.world.env();
        Some(Candidate {
            index: between.index,
            clock: env.clock,
            sink_down_until_ms: env.sink_down_until_ms,
            engine: between.engine.clone(),
            txlog: env.txlog.clone(),
            disk,
            sink_bytes: env.disk.read_shared(sink.file_name()).ok()?,
            sink_reads: env.disk.reads_of(sink.file_name()),
            stats: between.engine.stats().clone(),
            served: between.world.served(SINK_WRITE_OP),
            incarnations_ended: between.incarnations.len(),
        })
    }

    /// The boundary: the next event the run reads.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The run's last incarnation's stats at the boundary.
    pub fn stats(&self) -> &IncarnationStats {
        &self.stats
    }

    /// The incarnations that had ended by the boundary.
    pub fn incarnations_ended(&self) -> usize {
        self.incarnations_ended
    }

    /// The sink writes served by the boundary.
    pub fn served(&self) -> Served {
        self.served
    }

    pub fn boundary(&self) -> Boundary<'_> {
        Boundary {
            clock: &self.clock,
            sink_down_until_ms: self.sink_down_until_ms,
            engine: &self.engine,
            txlog: &self.txlog,
            disk: &self.disk,
        }
    }
}

/// A remembered boundary and what its run did after it.
#[derive(Debug)]
pub struct Class {
    pub state: Candidate,
    /// The bytes the run appended to its sink from the boundary on: to the snapshot where
    /// it converged on the fault-free run, or to its end.
    pub appended: Vec<u8>,
    pub after: After,
}

/// How the run of a class went on after its boundary.
#[derive(Debug)]
pub enum After {
    /// It converged on the fault-free run `on`, its last incarnation's stats and the sink
    /// writes served then.
    Converged {
        on: ConvergedOn,
        stats_then: IncarnationStats,
        served_then: Served,
    },
    /// It ran to its end, completed, in the incarnation it had at the boundary.
    Finished {
        stats_end: IncarnationStats,
        served_end: Served,
        stray_files: Arc<[String]>,
        final_state: FinalState,
    },
}

/// Where a class's run converged on the fault-free run.
#[derive(Debug)]
pub enum ConvergedOn {
    /// At the snapshot of this position among the snapshots.
    Snapshot(usize),
    /// At a boundary just after its fault (`fork/ahead.rs`): every kill between two
    /// checkpoints recovers to the same boundary, and only the first replays to its own
    /// fault's boundary.
    Ahead(Rc<AheadBoundary>),
}

impl Class {
    /// The class of `state`, whose run went on as `after` says with its sink file then
    /// `sink_then`, read `reads_then` times by then: None if the run did more than append
    /// to its sink after the boundary, or read it where its bytes were left out of the
    /// comparison (`converging::unread_after`).
    pub fn new(
        state: Candidate,
        sink: SinkKind,
        sink_then: &Contents,
        reads_then: u64,
        after: After,
    ) -> Option<Class> {
        if !sink_then.starts_with(&state.sink_bytes)
            || !super::converging::unread_after(sink, state.sink_reads, reads_then)
        {
            return None;
        }
        let appended = sink_then.copy_range(state.sink_bytes.len()..sink_then.len());
        Some(Class {
            state,
            appended,
            after,
        })
    }
}

/// The futures of one sink's points, by boundary and by restart, as one thread runs them in
/// order.
#[derive(Debug, Default)]
pub struct SharedFutures {
    /// By (boundary, order of arrival).
    classes: RefCell<BTreeMap<(u64, u64), Rc<Class>>>,
    /// The keys of `classes`, oldest first: the order they are forgotten in (a sweep's next
    /// row starts again from the first step, so the lowest boundary is not the oldest).
    arrivals: RefCell<VecDeque<(u64, u64)>>,
    /// Classes remembered so far: the next one's order of arrival.
    remembered: std::cell::Cell<u64>,
    /// Newest last.
    restarts: RefCell<VecDeque<Rc<RestartClass>>>,
    /// The run of the last depth-2 point's first fault, where the next one starts if it
    /// has the same first fault (`fork/cursor.rs`).
    first_faults: RefCell<Option<FirstFaults>>,
    /// The fault-free run at the boundary where the last single-fault point started, where
    /// the next one starts if its fault is not earlier (`fork/cursor.rs`).
    fault_free: RefCell<Option<Paused>>,
    /// The fault-free run at the boundaries just after `fault_free`'s (`fork/ahead.rs`).
    ahead: Ahead,
    /// The run of the last power-loss point at its restart, kept for the points of the same
    /// power loss in other crash states (`fork/sibling.rs`).
    power_loss_restart: RefCell<Option<PowerLossRestart>>,
    /// The last sink file a point's observation described (`fork/described.rs`).
    described: RefCell<DescribedFile>,
    /// The power-loss classes of the last step a single-fault class point crashed at: the
    /// points at one step reach it with the same disk (forked from one fault-free run).
    pub classes_memo: keel_sim::ClassesMemo,
    /// The same for depth-2 points: the power-loss classes of the last step a second fault
    /// that is a class crashed at, after the first fault they name. Points with the same
    /// first fault reach a later step with the same disk (the run up to it is the first
    /// fault's alone); another first fault takes a memo of its own.
    pair_classes_memo: RefCell<Option<(keel_sim::PlannedFault, keel_sim::ClassesMemo)>>,
}

impl SharedFutures {
    /// The classes remembered at the boundary `index`, oldest first.
    pub fn at(&self, index: u64) -> Vec<Rc<Class>> {
        self.classes
            .borrow()
            .range((index, 0)..=(index, u64::MAX))
            .map(|(_, class)| Rc::clone(class))
            .collect()
    }

    /// The memo of power-loss classes for depth-2 points whose first fault is `first`
    /// (see `pair_classes_memo`).
    pub(super) fn pair_classes_memo(&self, first: keel_sim::PlannedFault) -> keel_sim::ClassesMemo {
        let mut memo = self.pair_classes_memo.borrow_mut();
        match &*memo {
            Some((held, classes)) if *held == first => Arc::clone(classes),
            _ => {
                let classes = keel_sim::ClassesMemo::default();
                *memo = Some((first, Arc::clone(&classes)));
                classes
            }
        }
    }

    /// The run of the last depth-2 point's first fault, kept for the next point.
    pub fn first_faults(&self) -> &RefCell<Option<FirstFaults>> {
        &self.first_faults
    }

    /// The last sink file described, kept for the next point's.
    pub(super) fn described(&self) -> &RefCell<DescribedFile> {
        &self.described
    }

    /// The run of the last power-loss point at its restart, kept for its siblings.
    pub(super) fn power_loss_restart(&self) -> &RefCell<Option<PowerLossRestart>> {
        &self.power_loss_restart
    }

    /// The fault-free run where the last single-fault point started, kept for the next one.
    pub fn fault_free(&self) -> &RefCell<Option<Paused>> {
        &self.fault_free
    }

    /// The fault-free run at the boundaries just after `fault_free`'s, kept for the points
    /// that start there.
    pub(super) fn ahead(&self) -> &Ahead {
        &self.ahead
    }

    /// The remembered restart, newest first, whose surroundings are `state`'s and whose
    /// future it may take on (`joins`: `Forks::joins_restart`).
    pub fn at_restart(
        &self,
        key: KeyScheme,
        state: &RestartCandidate,
        joins: impl Fn(&RestartClass) -> bool,
    ) -> Option<Rc<RestartClass>> {
        let this = state.surroundings();
        self.restarts
            .borrow()
            .iter()
            .rev()
            .find(|class| {
                super::same_surroundings(key, &this, &class.state.surroundings()) && joins(class)
            })
            .cloned()
    }

    /// Remembers the restart `class`, forgetting the oldest if the table is full.
    pub fn remember_restart(&self, class: RestartClass) {
        let mut restarts = self.restarts.borrow_mut();
        restarts.push_back(Rc::new(class));
        while restarts.len() > RESTART_FUTURES_MAX {
            restarts.pop_front();
        }
        assert!(restarts.len() <= RESTART_FUTURES_MAX);
    }

    /// Remembers `class`, forgetting the oldest class if the table is full.
    pub fn remember(&self, class: Class) {
        let mut classes = self.classes.borrow_mut();
        let mut arrivals = self.arrivals.borrow_mut();
        let order = self.remembered.get();
        self.remembered.set(order + 1);
        let key = (class.state.index, order);
        classes.insert(key, Rc::new(class));
        arrivals.push_back(key);
        while classes.len() > SHARED_FUTURES_MAX {
            let oldest = arrivals.pop_front().expect("one arrival per class");
            classes.remove(&oldest).expect("remembered");
        }
        assert!(classes.len() <= SHARED_FUTURES_MAX);
        assert_eq!(classes.len(), arrivals.len());
    }
}
