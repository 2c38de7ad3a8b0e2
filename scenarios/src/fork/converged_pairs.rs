//! A second process crash, sink error, lost ack or power loss after the first fault's run
//! converged:
//! the depth-2 point's observation composed from two single-fault observations, without
//! running the pair (a step of figure 3b's plan, `scenarios/SCALE-LOG.md`).
//!
//! The argument. Let the run of a first fault F converge on the fault-free run at an event
//! boundary b (`Forks::converges`: everything that can influence what comes next is equal
//! but the append sink's bytes and what is durable, and F was the plan's only fault; a
//! sweep runs its first faults with no shared futures, so b is a snapshot's boundary). A
//! pair (F, S), S a second fault at a later step of F's run, runs F's run up to b, and from b
//! on runs as the fault-free run's point S' runs from b, where S' is S at the step the
//! fault-free run takes at the same place (its steps from b on are F's run's steps from b
//! on, shifted: a run's steps do not depend on the clock, `World::sleep_until`), as long as
//! S reads nothing the convergence rule left out:
//! - a process crash keeps the page cache (so what is durable and what is pending, not
//!   compared, cannot matter), and the append connector never reads its file's bytes after
//!   a kill but to cut a torn tail, which only a power loss leaves;
//! - a sink error or a lost ack acts on one request, not on the disk: the connector retries
//!   it in place (its wait no step), reading only what converging compared (the idempotent
//!   sink's file; the append connector reads none), and the clock only to time the retry
//!   (records name no time unless keys are processing time, and then converging compared
//!   the clocks);
//! - a power loss, where F's whole disk at b, what is durable and what is pending included,
//!   is alike with the fault-free run's (`Disk::alike_through_power_loss`: the same files
//!   under the same names, in the same order, inode numbers matched by rank; noted by
//!   `Forks::run_first_fault`): from b on the two disks take the same operations, so at S
//!   they have the same crash states, numbered alike, and each leaves the same disk but
//!   for inode numbers, which nothing reads but to order files. F's disk is often not alike
//!   where its run converged (what it replayed is pending where the fault-free run's was
//!   durable), and becomes alike at a later boundary b2 (the next checkpoint's fsyncs): from
//!   b on F's run is the fault-free run's, so the argument holds with b2 for b, and a
//!   power loss after b2 is composed at b2 (`Forks::disk_alike_boundary`,
//!   [`Forks::converged_first_at`]); one between b and b2 runs.
//!
//! A class of power-loss states (split by tail, as at depth 2), first or second, is its
//! first state's run, and stands for its states by the class claim
//! (`keel_sim::disk::power_loss::classes`): the argument holds for that run as for any
//! state's, and the disks alike at S number S's classes alike, so the pair is the pair of
//! the two classes, standing for the product of their states (the world counts a run of
//! two class faults so).
//!
//! Only where F's history is the fault-free run's in what judges a later restart: the
//! newest checkpoint committed or resumed from over all its incarnations
//! ([`ConvergedAt::newest_committed_alike`]). A power loss can undo a commit (under
//! `no-dir-fsync`, say), and F's run converges before it commits that checkpoint again; a
//! second crash then restores a checkpoint older than that commit, a roll-back in the pair
//! and not in S' (found by the debug check below on an incremental `no-dir-fsync` sweep).
//!
//! Not so a disk error (a failed fsync leaves the pending bytes unpersisted: what is durable
//! matters), a sink outage (its retries meet the event arrivals on the clock, which
//! converging does not compare under event-index keys), a zombie (it wakes on the clock) or
//! a power loss where the disks differ (what is durable, and the append file's offsets,
//! decide its crash states).
//!
//! So the pair's sink file is F's file up to b, then what S' appended after b; in records
//! (the append and the idempotent sink alike, whose file at b is the fault-free file): F's
//! records but the fault-free records from b on, then S''s records from b on. Its end (final
//! windows, files left, dropped events) is S''s end; its restarts and roll-backs are both
//! runs'; its sink writes are both runs' less the fault-free run's, which both count from b
//! on and before b respectively.
//!
//! Composed only where each piece is there to take: both observations held as splices of the
//! fault-free file, F's ending with the fault-free records from b on, S''s starting with
//! those before b, both recoveries ok and no sink outage; anything else runs. Checked, not
//! assumed: debug builds run every 16th composed pair and compare the observations whole, and
//! the fork tests compare the sweep with `--naive`.

use super::{ConvergedAt, Forks, PointRun};
use crate::observation::records::{KnownRecords, Segment, Splice};
use crate::observation::{
    Observation, Records, Recovery, SharedWindows, SinkWriteCounts, ViewObservation,
};
use crate::runner::View;
use keel_engine::{KeyScheme, SinkKind};
use num_bigint::BigUint;
use std::sync::Arc;

/// What a pair takes of one of the runs it is composed of: its records as segments of the
/// fault-free file (a first fault's: those before its boundary), and the rest of its
/// observation, held inline. A sweep composes each single fault into thousands of pairs, one
/// after the other: reading a few words of each here, not its observation's chain of
/// pointers, kept a 10,000-event sweep from waiting on memory.
#[derive(Clone, Debug)]
struct Part {
    segments: Vec<Segment>,
    known: Arc<KnownRecords>,
    sink: SinkKind,
    key: KeyScheme,
    view: Option<View>,
    corrupt_lines: u64,
    dirty_reads: u64,
    visibility_delay_ms_max: u64,
    final_windows: SharedWindows,
    dropped_late: u64,
    rolled_back: u64,
    restarts: u64,
    stray_files: Vec<String>,
    sink_writes: Option<SinkWriteCounts>,
}

impl Part {
    /// The part of `observation`, if a pair can be composed of it: one view held as a
    /// splice, a recovery that went well, no sink outage.
    fn of(observation: &Observation) -> Option<Part> {
        let [view] = observation.views.as_slice() else {
            return None;
        };
        let Records::Spliced(splice) = &view.records else {
            return None;
        };
        if observation.recovery != Recovery::Ok || observation.sink_outage.is_some() {
            return None;
        }
        Some(Part {
            segments: segments_of(splice),
            known: Arc::clone(&splice.known),
            sink: observation.sink,
            key: observation.key,
            view: view.view,
            corrupt_lines: view.corrupt_lines,
            dirty_reads: view.dirty_reads,
            visibility_delay_ms_max: view.visibility_delay_ms_max,
            final_windows: Arc::clone(&observation.final_windows),
            dropped_late: observation.dropped_late,
            rolled_back: observation.rolled_back,
            restarts: observation.restarts,
            stray_files: observation.stray_files.clone(),
            sink_writes: observation.sink_writes,
        })
    }
}

impl Part {
    /// Whether `self` and `other` are equal, found cheaply (shared files and windows by
    /// pointer first): true means a pair composed of either is the same observation.
    fn same_as(&self, other: &Part) -> bool {
        // Every field named, so a new one cannot be left out.
        let Part {
            segments,
            known,
            sink,
            key,
            view,
            corrupt_lines,
            dirty_reads,
            visibility_delay_ms_max,
            final_windows,
            dropped_late,
            rolled_back,
            restarts,
            stray_files,
            sink_writes,
        } = self;
        *segments == other.segments
            && Arc::ptr_eq(known, &other.known)
            && *sink == other.sink
            && *key == other.key
            && *view == other.view
            && *corrupt_lines == other.corrupt_lines
            && *dirty_reads == other.dirty_reads
            && *visibility_delay_ms_max == other.visibility_delay_ms_max
            && *final_windows == other.final_windows
            && *dropped_late == other.dropped_late
            && *rolled_back == other.rolled_back
            && *restarts == other.restarts
            && *stray_files == other.stray_files
            && *sink_writes == other.sink_writes
    }
}

/// A first fault's run that converged, with what its pairs take of it.
#[derive(Clone, Debug)]
pub struct ConvergedFirst {
    at: ConvergedAt,
    /// How many crash states it stands for, if it is a class of them (its run's
    /// [`PointRun::class_states`]).
    class_states: Option<BigUint>,
    /// How many records the fault-free file holds before the boundary.
    at_records: usize,
    /// Its records before the boundary, and the rest of its observation.
    part: Part,
}

/// A single fault's point on the fault-free run, as pairs take it (`part` None: it cannot
/// be composed: a recovery that failed, a view not held as a splice).
#[derive(Clone, Debug)]
pub struct SingleFault {
    part: Option<Part>,
    /// How many crash states it stands for, if it is a class of them.
    class_states: Option<BigUint>,
}

impl SingleFault {
    /// Whether a pair composed of `self` is the pair composed of `other` with the same first
    /// fault: both held alike ([`Part::same_as`]).
    pub fn same_as(&self, other: &SingleFault) -> bool {
        match (&self.part, &other.part) {
            (Some(x), Some(y)) => x.same_as(y),
            _ => false,
        }
    }

    /// How many pairs of crash states a pair of `first` and `self` stands for, where either
    /// is a class (None: both are one state each): the product, as the world counts a run
    /// of two class faults.
    pub fn class_states_after(&self, first: &ConvergedFirst) -> Option<BigUint> {
        match (&first.class_states, &self.class_states) {
            (Some(a), Some(b)) => Some(a * b),
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (None, None) => None,
        }
    }
}

impl ConvergedFirst {
    /// The step the fault-free run takes where the first fault's run takes `step` (after
    /// the boundary it converged at), if `step` is after it.
    pub fn fault_free_step(&self, step: u64) -> Option<u64> {
        (step > self.at.run_steps).then(|| step - self.at.run_steps + self.at.fault_free_steps)
    }

    /// Whether its whole disk was alike with the fault-free run's where it converged, so
    /// that a power loss after that is the fault-free run's too (see the module's argument).
    pub fn disk_alike(&self) -> bool {
        self.at.disk_alike == Some(true)
    }
}

impl Forks {
    /// The first fault's point `run`, if it converged on the fault-free run and its pairs
    /// can be composed from it: a file sink read where the oracle reads it, its records
    /// ending with the fault-free records from the boundary on ([`Part::of`] for the rest).
    pub fn converged_first(&self, run: &PointRun) -> Option<ConvergedFirst> {
        self.converged_first_at(run, run.converged_at?)
    }

    /// The first fault's point `run` as [`Forks::converged_first`] takes it, but converged at
    /// the later boundary `at` of the same run (the run goes on as the fault-free run from
    /// where it converged, so its records from there to `at` are the fault-free run's):
    /// where its whole disk is alike too ([`Forks::disk_alike_boundary`]), for the second
    /// power losses after it.
    pub fn converged_first_at(&self, run: &PointRun, at: ConvergedAt) -> Option<ConvergedFirst> {
        let converged = run.converged_at?;
        assert!(
            at.run_steps >= converged.run_steps,
            "a boundary at or after convergence"
        );
        assert_eq!(
            at.run_steps - converged.run_steps,
            at.fault_free_steps - converged.fault_free_steps,
            "the same steps as the fault-free run from where it converged"
        );
        // A later restart is judged a roll-back against the newest checkpoint committed over
        // the run's history, which converging does not compare: where a first fault's
        // history holds a newer one than the fault-free run's (a power loss undid a commit
        // the run has not made again), a second crash's restart is a roll-back in the pair
        // and not in its single-fault run.
        if !at.newest_committed_alike {
            return None;
        }
        let known = self.known.as_ref().filter(|_| self.shareable())?;
        let at_records = known.records_before_byte(at.fault_free_sink_len_bytes)?;
        let mut part = Part::of(&run.observation)?;
        let known_len = part.known.records.len();
        drop_known_from(&mut part.segments, at_records, known_len)?;
        Some(ConvergedFirst {
            at,
            class_states: run.class_states.clone(),
            at_records,
            part,
        })
    }

    /// A single fault's point `run`, as pairs take it: with the fault-free run's final
    /// windows where its own are equal to them (a sweep compares and hashes a shared map of
    /// windows once: `verdict::Reference` remembers a few).
    pub fn single_fault(&self, run: &PointRun) -> SingleFault {
        let mut part = Part::of(&run.observation);
        if let Some(part) = &mut part {
            let fault_free = &self.end.final_state.windows;
            if !Arc::ptr_eq(&part.final_windows, fault_free) && *part.final_windows == **fault_free
            {
                part.final_windows = Arc::clone(fault_free);
            }
        }
        SingleFault {
            part,
            class_states: run.class_states.clone(),
        }
    }

    /// The observation of the pair of `first` and a second fault after its boundary whose
    /// single-fault point on the fault-free run is `second` (see the module's argument);
    /// None where a piece it needs is not there.
    pub fn compose_after_converged(
        &self,
        first: &ConvergedFirst,
        second: &SingleFault,
    ) -> Option<Observation> {
        let (one, two) = (&first.part, second.part.as_ref()?);
        if !Arc::ptr_eq(&one.known, &two.known) {
            return None;
        }
        let mut segments = Vec::with_capacity(one.segments.len() + two.segments.len());
        segments.extend(one.segments.iter().cloned());
        push_known_from(&mut segments, &two.segments, first.at_records)?;
        let sink_writes = match (one.sink_writes, two.sink_writes) {
            (Some(x), Some(y)) => Some(SinkWriteCounts {
                served: (x.served + y.served).checked_sub(self.end.served.requests)?,
                appended: match (x.appended, y.appended) {
                    (Some(x), Some(y)) => Some((x + y).checked_sub(self.end.served.changed_file)?),
                    _ => None,
                },
                written: (x.written + y.written).checked_sub(self.end.stats.written)?,
                skipped: (x.skipped + y.skipped).checked_sub(self.end.stats.skipped)?,
            }),
            (None, None) => None,
            _ => return None,
        };
        Some(Observation {
            sink: two.sink,
            key: two.key,
            views: vec![ViewObservation {
                view: two.view,
                records: Records::Spliced(splice_of(Arc::clone(&one.known), segments)),
                corrupt_lines: one.corrupt_lines + two.corrupt_lines,
                dirty_reads: two.dirty_reads,
                visibility_delay_ms_max: two.visibility_delay_ms_max,
            }],
            recovery: Recovery::Ok,
            final_windows: Arc::clone(&two.final_windows),
            dropped_late: two.dropped_late,
            rolled_back: one.rolled_back + two.rolled_back,
            restarts: one.restarts + two.restarts,
            stray_files: two.stray_files.clone(),
            sink_writes,
            sink_outage: None,
            // Kept only for a run whose one fault was a kill.
            restart: None,
        })
    }
}

/// A splice as segments in order (empty runs left out, touching runs merged).
fn segments_of(splice: &Splice) -> Vec<Segment> {
    let known_len = splice.known.records.len();
    let mut segments = Vec::with_capacity(splice.middle.len() + 2);
    let parts = std::iter::once(Segment::Known(0..splice.head))
        .chain(splice.middle.iter().cloned())
        .chain(std::iter::once(Segment::Known(splice.tail_from..known_len)));
    for part in parts {
        push_merged(&mut segments, part);
    }
    segments
}

/// Pushes `segment`, merged into the last one where both are runs of the known file and
/// it starts where the last ends.
fn push_merged(segments: &mut Vec<Segment>, segment: Segment) {
    match (segments.last_mut(), segment) {
        (_, Segment::Known(run)) if run.is_empty() => {}
        (_, Segment::Own(records)) if records.is_empty() => {}
        (Some(Segment::Known(last)), Segment::Known(run)) if last.end == run.start => {
            last.end = run.end;
        }
        (_, segment) => segments.push(segment),
    }
}

/// Cuts the known records `from..known_len` off the end of `segments`, if they end with
/// exactly those (None: they do not).
fn drop_known_from(segments: &mut Vec<Segment>, from: usize, known_len: usize) -> Option<()> {
    if from == known_len {
        return Some(());
    }
    match segments.last_mut()? {
        Segment::Known(run) if run.end == known_len && run.start <= from => {
            run.end = from;
            if run.start == run.end {
                segments.pop();
            }
            Some(())
        }
        _ => None,
    }
}

/// Pushes `later`'s records from place `from` on, if its first `from` records are the known
/// records `..from` (None: they are not; `out` is then left part-written).
fn push_known_from(out: &mut Vec<Segment>, later: &[Segment], from: usize) -> Option<()> {
    let rest = if from == 0 {
        later
    } else {
        let (head, rest) = later.split_first()?;
        match head {
            Segment::Known(run) if run.start == 0 && run.end >= from => {
                push_merged(out, Segment::Known(from..run.end));
            }
            _ => return None,
        }
        rest
    };
    for segment in rest {
        push_merged(out, segment.clone());
    }
    Some(())
}

/// `segments` (merged) as a splice of `known`: its last run to the end as the tail, its first
/// run from 0 as the head up to where the tail starts (a splice's head never passes its
/// tail's start), the rest the middle.
fn splice_of(known: Arc<KnownRecords>, mut segments: Vec<Segment>) -> Splice {
    let known_len = known.records.len();
    let tail_from = match segments.last() {
        Some(Segment::Known(run)) if run.end == known_len => {
            let start = run.start;
            segments.pop();
            start
        }
        _ => known_len,
    };
    let head = match segments.first_mut() {
        Some(Segment::Known(run)) if run.start == 0 => {
            let head = run.end.min(tail_from);
            run.start = head;
            if run.start == run.end {
                segments.remove(0);
            }
            head
        }
        _ => 0,
    };
    assert!(head <= tail_from);
    Splice {
        known,
        head,
        middle: segments,
        tail_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(run: std::ops::Range<usize>) -> Segment {
        Segment::Known(run)
    }

    fn runs(segments: &[Segment]) -> Vec<std::ops::Range<usize>> {
        segments
            .iter()
            .map(|s| match s {
                Segment::Known(run) => run.clone(),
                Segment::Own(_) => usize::MAX..usize::MAX,
            })
            .collect()
    }

    /// A first fault's replay, [0, 7) then [4, 10): cut at 6 and followed by a second
    /// crash's [6, 9) then [8, 10), the pair is [0, 7), [4, 9), [8, 10).
    #[test]
    fn a_pair_is_the_first_runs_up_to_the_boundary_then_the_second_runs_after_it() {
        let mut first = vec![known(0..7), known(4..10)];
        drop_known_from(&mut first, 6, 10).unwrap();
        push_known_from(&mut first, &[known(0..9), known(8..10)], 6).unwrap();
        assert_eq!(runs(&first), vec![0..7, 4..9, 8..10]);
        // From place 0, all of it.
        let mut all = Vec::new();
        push_known_from(&mut all, &[known(0..9), known(8..10)], 0).unwrap();
        assert_eq!(runs(&all), vec![0..9, 8..10]);
        // Pieces that are not there: a first run not ending with the records after the
        // boundary, a second not starting with those before it.
        assert!(drop_known_from(&mut vec![known(0..7), known(7..9)], 6, 10).is_none());
        assert!(drop_known_from(&mut vec![known(0..7), known(7..10)], 6, 10).is_none());
        assert!(push_known_from(&mut Vec::new(), &[known(0..5), known(3..10)], 6).is_none());
        // Touching runs merge; empty ones go.
        let mut merged = Vec::new();
        for segment in [known(0..3), known(3..3), known(3..5), known(2..4)] {
            push_merged(&mut merged, segment);
        }
        assert_eq!(runs(&merged), vec![0..5, 2..4]);
    }
}
