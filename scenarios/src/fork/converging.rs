//! Converging: whether a run at an event boundary goes on as the fault-free run (or an
//! earlier point's run) went on from there, by the rules `fork.rs` states, and where a run
//! converged ([`ConvergedAt`]): the boundary a depth-2 sweep maps a first fault's later
//! steps from ([`Forks::run_until_converged`]).

use super::ahead::AheadBoundary;
use super::shared::{Boundary, Class, Surroundings};
use super::{Facts, Forks, SharedFutures};
use crate::observation::newest_committed_after;
use crate::runner::{resume, Between, Control, Driven, Moment, Paused, RunResult};
use keel_engine::{KeyScheme, SinkKind};
use keel_sim::{Contents, CrashCounts, Disk, DiskError, FaultPlan};
use std::cell::OnceCell;
use std::rc::Rc;

/// A run stopped where it converged on the fault-free run, or run to its end
/// ([`Forks::run_until_converged`]).
#[derive(Debug)]
pub enum UntilConverged {
    Ended(Box<RunResult>),
    Converged {
        /// The run's world at the boundary, its trace since the snapshot it forked from.
        world: Box<keel_sim::World>,
        at: ConvergedAt,
    },
}

/// An event boundary where a point's run converged on the fault-free run: what a later
/// fault of the same run maps to (`fork/converged_pairs.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvergedAt {
    /// The steps the point's run had taken there.
    pub run_steps: u64,
    /// The steps the fault-free run had taken there.
    pub fault_free_steps: u64,
    /// The fault-free run's sink file's length there.
    pub fault_free_sink_len_bytes: usize,
    /// Whether the run's whole disk there, what is durable and pending included, was alike
    /// with the fault-free run's through any power loss ([`Disk::alike_through_power_loss`]),
    /// so that a power loss later in the run is the fault-free run's, shifted. None: not
    /// compared (only [`Forks::run_first_fault`] compares).
    pub disk_alike: Option<bool>,
    /// Whether the newest checkpoint the run committed or resumed from, over all its
    /// incarnations, is the fault-free run's there: a later restart is a roll-back in one
    /// run exactly where it is in the other (what a pair's second crash is judged against).
    pub newest_committed_alike: bool,
}

impl ConvergedAt {
    /// Where the run `paused` shows converged, on the fault-free run `fault_free` shows at the
    /// same boundary, whose `facts` those are.
    pub(super) fn of(paused: &Paused, fault_free: &Paused, facts: &Facts) -> ConvergedAt {
        ConvergedAt {
            run_steps: paused.world.steps_taken(),
            fault_free_steps: fault_free.world.steps_taken(),
            fault_free_sink_len_bytes: facts.sink_len_bytes,
            disk_alike: None,
            newest_committed_alike: newest_committed(paused) == newest_committed(fault_free),
        }
    }
}

/// The newest checkpoint the run `paused` shows committed or resumed from, over its ended
/// incarnations and its live one so far.
fn newest_committed(paused: &Paused) -> u64 {
    let ended = paused.incarnations.iter().map(|i| &i.stats);
    let newest = ended.fold(0, newest_committed_after);
    newest_committed_after(newest, paused.engine.stats())
}

impl Forks {
    /// Whether the run shown by `between` goes on as the fault-free run did from the same
    /// event boundary (the rules are in the module's documentation). Only at a snapshot.
    /// `compared`: the run's compared disk, made on first need ([`comparable`]).
    pub(super) fn converges<'d>(
        &self,
        between: &Between,
        compared: impl FnOnce() -> Option<&'d Disk>,
    ) -> bool {
        if self.spec.config.sink.is_transactional() || between.index % self.every_events != 0 {
            return false;
        }
        let at = (between.index / self.every_events) as usize;
        let (Some(snapshot), Some(facts)) = (self.snapshots.get(at), self.facts.get(at)) else {
            return false;
        };
        assert_eq!(snapshot.index, between.index, "snapshot {at}");
        if !facts.sink_appended_only {
            return false;
        }
        let Some(disk) = compared() else {
            return false;
        };
        same_future(
            self.spec.config.key,
            &boundary_of(between, disk),
            &fault_free_boundary(snapshot, facts),
        )
    }

    /// The class remembered at this boundary whose future the run shown by `between` shares
    /// (see `fork/shared.rs`), if any; `compared` as for [`Forks::converges`].
    pub(super) fn shares<'d>(
        &self,
        between: &Between,
        shared: &SharedFutures,
        compared: impl FnOnce() -> Option<&'d Disk>,
    ) -> Option<Rc<Class>> {
        let classes = shared.at(between.index);
        if classes.is_empty() {
            return None;
        }
        let this = boundary_of(between, compared()?);
        let key = self.spec.config.key;
        classes
            .into_iter()
            .find(|class| same_future(key, &this, &class.state.boundary()))
    }

    /// The fault-free run at the boundary the run shown by `between` stands at, if that is
    /// just after the fault of a single-fault point and the run goes on from there as the
    /// fault-free run did (`fork/ahead.rs`); `compared` as for [`Forks::converges`].
    pub(super) fn converges_ahead<'d>(
        &self,
        plan: &FaultPlan,
        between: &Between,
        shared: &SharedFutures,
        compared: impl FnOnce() -> Option<&'d Disk>,
    ) -> Option<Rc<AheadBoundary>> {
        if plan.iter().count() != 1 {
            return None;
        }
        let cursor = shared.fault_free().borrow();
        let boundary = self.ahead_at(cursor.as_ref()?, shared.ahead(), between.index)?;
        if !boundary.facts.sink_appended_only {
            return None;
        }
        let this = boundary_of(between, compared()?);
        let fault_free = fault_free_boundary(&boundary.paused, &boundary.facts);
        same_future(self.spec.config.key, &this, &fault_free).then_some(boundary)
    }

    /// The run under `plan` (recording crash-state counts if asked), from the snapshot before
    /// its first fault, stopped at the first snapshot where it converges on the fault-free run
    /// ([`Forks::converges`]; recording, only where its whole disk is alike with the
    /// fault-free run's through any power loss too, since a step's crash-state count and
    /// unpersisted bytes depend on it), else run to its end: what a depth-2 sweep counts a
    /// first fault's second faults on (after the boundary, they are the fault-free run's,
    /// shifted).
    pub fn run_until_converged(
        &self,
        plan: &FaultPlan,
        record: Option<CrashCounts>,
    ) -> UntilConverged {
        self.run_until_converged_where(plan, record, record.is_some())
    }

    /// Where the run under `plan` first converges on the fault-free run with its whole disk
    /// alike too, through any power loss (None: it never does): from there a second power
    /// loss is the fault-free run's, shifted (`fork/converged_pairs.rs`). A depth-2 sweep's
    /// first fault often converges a checkpoint or two before its disk is alike (what it
    /// replayed is pending where the fault-free run's was durable, or the other way round).
    pub fn disk_alike_boundary(&self, plan: &FaultPlan) -> Option<ConvergedAt> {
        match self.run_until_converged_where(plan, None, true) {
            UntilConverged::Converged { mut at, .. } => {
                at.disk_alike = Some(true);
                Some(at)
            }
            UntilConverged::Ended(_) => None,
        }
    }

    /// [`Forks::run_until_converged`], stopping only where the whole disk is alike too when
    /// `disk_alike` (whether or not crash-state counts are recorded).
    fn run_until_converged_where(
        &self,
        plan: &FaultPlan,
        record: Option<CrashCounts>,
        disk_alike: bool,
    ) -> UntilConverged {
        let Some(paused) = self.fork(plan, record) else {
            return UntilConverged::Ended(Box::new(self.run_from_scratch(plan, record)));
        };
        let sink = self.spec.config.sink;
        let driven = resume(&self.spec, paused, &mut |moment| {
            let Moment::Between(between) = moment else {
                return Control::Continue;
            };
            let made = OnceCell::new();
            let compared = || made.get_or_init(|| comparable(&between, sink)).as_ref();
            let alike = || !disk_alike || self.disk_alike_between(&between);
            if self.converges(&between, compared) && alike() {
                Control::Stop
            } else {
                Control::Continue
            }
        });
        match driven {
            Driven::Finished(result) => UntilConverged::Ended(result),
            Driven::Stopped(paused) => {
                let at = self.converged_at_snapshot(&paused);
                UntilConverged::Converged {
                    world: Box::new(paused.world),
                    at,
                }
            }
            Driven::Restarting(_) => unreachable!("never told to stop at a restart"),
        }
    }

    /// Whether the run `paused` shows, converged at a snapshot, has the snapshot's whole
    /// disk, alike through any power loss.
    pub(super) fn disk_alike_at_snapshot(&self, paused: &Paused) -> bool {
        self.disk_alike_at(paused.index, &paused.world.env().disk)
    }

    /// [`Forks::disk_alike_at_snapshot`] for the run `between` shows, converged there.
    fn disk_alike_between(&self, between: &Between) -> bool {
        self.disk_alike_at(between.index, &between.world.env().disk)
    }

    /// Whether `disk`, at the snapshot boundary `index`, is the snapshot's disk, alike
    /// through any power loss.
    fn disk_alike_at(&self, index: u64, disk: &Disk) -> bool {
        let fault_free = &self.snapshots[(index / self.every_events) as usize];
        assert_eq!(fault_free.index, index, "at a snapshot");
        disk.alike_through_power_loss(&fault_free.world.env().disk)
    }

    /// Where the run `paused` shows converged, at a snapshot.
    pub(super) fn converged_at_snapshot(&self, paused: &Paused) -> ConvergedAt {
        assert_eq!(paused.index % self.every_events, 0, "at a snapshot");
        let at = (paused.index / self.every_events) as usize;
        ConvergedAt::of(paused, &self.snapshots[at], &self.facts[at])
    }
}

/// Whether two runs at the same event boundary go on alike (the rules are in the module's
/// documentation): the same engine but for its counters, the same compared disk and log, and
/// the clock equal where it can be observed. Both have their plans spent and nothing
/// unpersisted ([`comparable`]).
pub(super) fn same_future(key: KeyScheme, a: &Boundary, b: &Boundary) -> bool {
    same_surroundings(key, &a.surroundings(), &b.surroundings())
        && a.engine.same_future_as(b.engine)
}

/// Whether two runs' worlds, at the same event boundary or both at a restart, leave their
/// futures alike: the same compared disk and log, and the clock equal where it can be
/// observed (the rules are in the module's documentation).
pub(super) fn same_surroundings(key: KeyScheme, a: &Surroundings, b: &Surroundings) -> bool {
    let clock_unobserved = match key {
        KeyScheme::ProcessingTime => {
            a.clock == b.clock && a.sink_down_until_ms == b.sink_down_until_ms
        }
        KeyScheme::EventIndex => {
            a.sink_down_until_ms <= a.clock.now_ms() && b.sink_down_until_ms <= b.clock.now_ms()
        }
    };
    clock_unobserved && a.txlog == b.txlog && a.disk.same_view_as(b.disk)
}

/// The compared disk of the run `between` shows, if it can converge or share a future here:
/// its plan spent, and no byte a failed fsync left in the page cache (it reads differently
/// once the cache drops it: an eviction, the end of the run; a future no run without such
/// bytes can stand for). Checked on the whole disk, as the append sink's file is compared
/// emptied.
pub(super) fn comparable(between: &Between, sink: SinkKind) -> Option<Disk> {
    let disk = &between.world.env().disk;
    if !between.world.plan_spent() || disk.unpersisted_bytes() != 0 {
        return None;
    }
    compared_disk(disk, sink).ok()
}

/// What converging at a boundary of the fault-free run compares and takes there, whose
/// disk is `disk`, whose final sink file is `known` (None: no sink file there) and which
/// had read its sink file `sink_reads_end` times by its end. Its sink file is read shared,
/// and compared with the final one chunk by chunk, not copied.
pub(super) fn facts_of(
    disk: &Disk,
    sink: SinkKind,
    known: &Contents,
    sink_reads_end: u64,
) -> Option<Facts> {
    let sink_bytes = disk.read_shared(sink.file_name()).ok()?;
    Some(Facts {
        disk: compared_disk(disk, sink).ok()?,
        sink_len_bytes: sink_bytes.len(),
        sink_appended_only: known.starts_with(&sink_bytes)
            && unread_after(sink, disk.reads_of(sink.file_name()), sink_reads_end),
    })
}

/// The fault-free run's boundary `paused` shows, with its `facts`.
pub(super) fn fault_free_boundary<'a>(paused: &'a Paused, facts: &'a Facts) -> Boundary<'a> {
    let env = paused.world.env();
    Boundary {
        clock: &env.clock,
        sink_down_until_ms: env.sink_down_until_ms,
        engine: &paused.engine,
        txlog: &env.txlog,
        disk: &facts.disk,
    }
}

/// The boundary `between` shows, with `disk` its compared disk.
pub(super) fn boundary_of<'a>(between: &'a Between, disk: &'a Disk) -> Boundary<'a> {
    let env = between.world.env();
    Boundary {
        clock: &env.clock,
        sink_down_until_ms: env.sink_down_until_ms,
        engine: between.engine,
        txlog: &env.txlog,
        disk,
    }
}

/// Whether a run that had read its sink file `reads_then` times at a boundary and
/// `reads_later` times later never read it in between, where that matters: the append sink's
/// file is the one file a comparison leaves out ([`compared_disk`]), so a future taken on
/// across two runs whose files differ must not have read it. Every other file is compared
/// whole, so what a future read of it is the same in both runs.
pub(super) fn unread_after(sink: SinkKind, reads_then: u64, reads_later: u64) -> bool {
    assert!(reads_then <= reads_later);
    match sink {
        SinkKind::Append => reads_then == reads_later,
        SinkKind::Idempotent | SinkKind::Transactional => true,
    }
}

/// The disk as converging compares it: the append sink's file emptied and synced (its bytes
/// may differ where the future does not read them: [`unread_after`]); every other disk as
/// it is.
pub(super) fn compared_disk(disk: &Disk, sink: SinkKind) -> Result<Disk, DiskError> {
    match sink {
        SinkKind::Append => disk.with_file_emptied(sink.file_name()),
        SinkKind::Idempotent | SinkKind::Transactional => Ok(disk.clone()),
    }
}
