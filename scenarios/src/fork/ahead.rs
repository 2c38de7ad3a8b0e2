//! Converging ahead of the snapshots: a single-fault point compares its run, at the few event
//! boundaries just after its fault, with the fault-free run at the same boundary, instead of
//! running on to the next snapshot (up to `(N + 1) / SNAPSHOTS_MAX` events away: the replay a
//! point ran past its fault grew with the stream).
//!
//! The fault-free run at those boundaries comes from the cursor single-fault points start
//! from (`fork/cursor.rs`): it is run on from there a boundary at a time, once for all the
//! points of a chunk (they come in step order), and each boundary is kept with what
//! converging compares and takes there, as a snapshot's facts are. The rule is the one of
//! `fork.rs` ([`super::converging::same_future`]), only at more boundaries.

use super::{facts_of, Facts, Forks};
use crate::runner::Paused;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// How many boundaries after the cursor a point compares itself with the fault-free run at:
/// a run that recovers and replays up to its fault can match at the first boundary after it,
/// and one that matches only later (a checkpoint still to finish) is left to the snapshots.
pub const AHEAD_BOUNDARIES_MAX: u64 = 8;

/// The fault-free run at one event boundary, with what converging there needs.
#[derive(Debug)]
pub struct AheadBoundary {
    pub(super) paused: Paused,
    pub(super) facts: Facts,
}

/// Consecutive boundaries of the fault-free run after the cursor's, at most
/// [`AHEAD_BOUNDARIES_MAX`] of them.
pub(super) type Ahead = RefCell<VecDeque<Rc<AheadBoundary>>>;

impl Forks {
    /// The fault-free run at boundary `index`, if it lies at most [`AHEAD_BOUNDARIES_MAX`]
    /// boundaries after `cursor` (the fault-free run where the point started), run to from
    /// there (or from the last boundary `ahead` keeps) when not yet kept. None for a sink
    /// that does not converge, or after the fault-free run's end.
    pub(super) fn ahead_at(
        &self,
        cursor: &Paused,
        ahead: &Ahead,
        index: u64,
    ) -> Option<Rc<AheadBoundary>> {
        if self.facts.is_empty()
            || index <= cursor.index
            || index > cursor.index + AHEAD_BOUNDARIES_MAX
        {
            return None;
        }
        let mut ahead = ahead.borrow_mut();
        // Kept boundaries stand only as a run right after the cursor's (a new row's points
        // start again from an earlier step).
        while ahead
            .front()
            .is_some_and(|b| b.paused.index <= cursor.index)
        {
            ahead.pop_front();
        }
        if ahead
            .front()
            .is_some_and(|b| b.paused.index != cursor.index + 1)
        {
            ahead.clear();
        }
        // Bounded: at most AHEAD_BOUNDARIES_MAX boundaries run to.
        while ahead.back().map_or(cursor.index, |b| b.paused.index) < index {
            let last = ahead.back().map_or(cursor, |b| &b.paused);
            let next = self.next_boundary(last)?;
            if !next.incarnations.is_empty() {
                return None;
            }
            let boundary = self.ahead_boundary(next)?;
            ahead.push_back(Rc::new(boundary));
        }
        assert!(ahead.len() as u64 <= AHEAD_BOUNDARIES_MAX);
        let boundary = ahead
            .iter()
            .find(|b| b.paused.index == index)
            .expect("run to it above");
        Some(Rc::clone(boundary))
    }

    /// The fault-free run at `paused`, with its facts made as a snapshot's are.
    fn ahead_boundary(&self, paused: Paused) -> Option<AheadBoundary> {
        let facts = facts_of(
            &paused.world.env().disk,
            self.spec.config.sink,
            &self.known_contents,
            self.end.sink_reads,
        )?;
        Some(AheadBoundary { paused, facts })
    }
}
