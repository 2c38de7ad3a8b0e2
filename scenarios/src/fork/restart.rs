//! Sharing at a restart: a point whose world, at a restart with its plan spent, is one an
//! earlier point restarted in stops before its recovery and takes the rest of its run from
//! that point's (the rule is in `fork/shared.rs`; the table is [`SharedFutures`]).

use super::described::DescribedFile;
use super::ending::{Ended, Ending};
use super::shared::{SharedFutures, Surroundings};
use super::Forks;
use crate::observation::{FinalState, Observation, Piece, RecoverySteps, RestartSteps};
use crate::runner::{Incarnation, IncarnationEnd, Restarting};
use keel_engine::SINK_WRITE_OP;
use keel_sim::{Clock, Contents, Disk, Served, TxLog, World};
use std::cell::RefCell;
use std::sync::Arc;

/// A run's world at a restart with its plan spent, before the new process's recovery, kept
/// until the run ends. Only the world survives a crash, so two runs restarting in the same
/// world (every file's bytes, the sink's included; the log; the clock and the sink's outage)
/// recover alike and go on alike, whatever the engine does: nothing of the run before the
/// restart reaches its future but through the world. Nothing is left out on a claim about
/// what recovery reads (a buggy recovery reads what it reads: `scripts/mutants-switchable.sh`
/// checks the sweep against `--naive` under deliberate engine bugs).
#[derive(Clone, Debug)]
pub struct RestartCandidate {
    pub clock: Clock,
    pub sink_down_until_ms: u64,
    pub txlog: TxLog,
    /// The disk then, compared whole.
    pub disk: Disk,
    /// The sink file then, whole (empty for the transactional sink's log).
    pub sink_bytes: Contents,
    /// How many bytes at its start are the known file's (measured once at the restart: the
    /// observation reads on from there).
    pub sink_known_len_bytes: usize,
    /// The steps taken by then (the next step's number).
    pub steps_taken: u64,
    /// The sink writes served by then.
    pub served: Served,
    /// The incarnations that had ended by then.
    pub incarnations_ended: usize,
}

impl RestartCandidate {
    pub fn surroundings(&self) -> Surroundings<'_> {
        Surroundings {
            clock: &self.clock,
            sink_down_until_ms: self.sink_down_until_ms,
            txlog: &self.txlog,
            disk: &self.disk,
        }
    }
}

/// A remembered restart and what its run did after it: one incarnation, completed.
#[derive(Debug)]
pub struct RestartClass {
    pub state: RestartCandidate,
    /// How much of its sink file at the restart its run's file still began with at its end:
    /// measured, not predicted (a tail repair that cuts one byte short keeps one byte less).
    pub kept_len_bytes: usize,
    /// The bytes the run appended to its sink from the restart to its end, in pieces.
    pub appended: Vec<KeptPiece>,
    /// The incarnation the restart began, as it ended.
    pub incarnation: Incarnation,
    /// The sink writes served after the restart.
    pub served_after: Served,
    pub stray_files: Arc<[String]>,
    pub final_state: FinalState,
    /// Its recovery, the first step counted from the restart.
    pub recovery: Option<RecoverySteps>,
}

/// A [`Piece`] kept after the run it comes from.
#[derive(Debug)]
pub enum KeptPiece {
    Known { from: usize, to: usize },
    Own(Vec<u8>),
}

impl KeptPiece {
    pub(super) fn of(piece: &Piece) -> KeptPiece {
        match *piece {
            Piece::Known { from, to } => KeptPiece::Known { from, to },
            Piece::Own(bytes) => KeptPiece::Own(bytes.to_vec()),
        }
    }

    pub(super) fn piece(&self) -> Piece<'_> {
        match self {
            KeptPiece::Known { from, to } => Piece::Known {
                from: *from,
                to: *to,
            },
            KeptPiece::Own(bytes) => Piece::Own(bytes),
        }
    }

    /// How many bytes the piece holds.
    pub(super) fn len(&self) -> usize {
        match self {
            KeptPiece::Known { from, to } => to - from,
            KeptPiece::Own(bytes) => bytes.len(),
        }
    }
}

impl Forks {
    /// The observation of a run stopped at a restart (its world, the incarnations that had
    /// ended, and `state`, its surroundings there) whose surroundings were those of
    /// `class`: as if it had gone on as the class's run did.
    pub(super) fn restarted(
        &self,
        world: &World,
        incarnations: &[Incarnation],
        state: &RestartCandidate,
        class: &RestartClass,
        described: Option<&RefCell<DescribedFile>>,
    ) -> Observation {
        // The same sink file as the class's at the restart: what its run kept of it, then
        // what its run wrote after.
        let described = self.describe(
            &state.sink_bytes,
            class.kept_len_bytes,
            state.sink_known_len_bytes.min(class.kept_len_bytes),
            described,
        );
        let rest: Vec<Piece> = class.appended.iter().map(KeptPiece::piece).collect();
        let mut incarnations = incarnations.to_vec();
        incarnations.push(class.incarnation.clone());
        let restart = class
            .recovery
            .as_ref()
            .and_then(|recovery| RestartSteps::of_restarted(world, &self.spec.config, recovery));
        let ended = Ended {
            incarnations,
            served: world.served(SINK_WRITE_OP) + class.served_after,
            stray_files: Arc::clone(&class.stray_files),
            final_state: class.final_state.clone(),
        };
        let sink = self.described_with(described, &rest);
        let sink: Vec<Piece> = sink.iter().map(KeptPiece::piece).collect();
        self.observe_sink(&sink, &ended, world, restart)
    }

    /// The run at the restart `restarting` shows as a restart to remember or to share, if it
    /// can be one: its plan spent, no byte a failed fsync left unpersisted, and no sink
    /// outage still waiting for its first served request. Its sink file is what the
    /// connector's open keeps of it (a torn tail cut with the protocol's tail repair),
    /// followed by what the run appends after.
    ///
    /// How much of that file is the fault-free file's is measured from the fault-free file at
    /// `shared`'s cursor, which the point's file was forked from ([`Forks::known_prefix_len`]).
    pub(super) fn restart_state(
        &self,
        restarting: &Restarting,
        shared: &SharedFutures,
    ) -> Option<RestartCandidate> {
        let world = restarting.world;
        let disk = &world.env().disk;
        self.restart_state_on(world, restarting.incarnations.len(), disk, shared)
    }

    /// [`Forks::restart_state`] of a restart whose world is `world` but for its disk, which
    /// is `disk` (`fork/sibling.rs`: another crash state of the same power loss), after
    /// `incarnations_ended` incarnations.
    pub(super) fn restart_state_on(
        &self,
        world: &World,
        incarnations_ended: usize,
        disk: &Disk,
        shared: &SharedFutures,
    ) -> Option<RestartCandidate> {
        let sink = self.spec.config.sink;
        let env = world.env();
        if !world.plan_spent()
            || disk.unpersisted_bytes() != 0
            || world
                .first_outage_ms()
                .is_some_and(|(_, served_ms)| served_ms.is_none())
        {
            return None;
        }
        let sink_bytes = disk.read_shared(sink.file_name()).ok()?;
        let near = shared
            .fault_free()
            .borrow()
            .as_ref()
            .and_then(|at| at.world.env().disk.read_shared(sink.file_name()).ok());
        let sink_known_len_bytes = self.known_prefix_len(&sink_bytes, near.as_ref());
        Some(RestartCandidate {
            clock: env.clock,
            sink_down_until_ms: env.sink_down_until_ms,
            txlog: env.txlog.clone(),
            disk: disk.clone(),
            sink_bytes,
            sink_known_len_bytes,
            steps_taken: world.steps_taken(),
            served: world.served(SINK_WRITE_OP),
            incarnations_ended,
        })
    }

    /// How many bytes at the start of `sink_bytes` are the known file's. With `near`, a
    /// prefix of the known file that `sink_bytes` was forked from (so they share every
    /// chunk but the one where the fork first wrote), this reads that chunk and the bytes
    /// after `near`. Without it, it would read every byte written since the fault-free run's
    /// last snapshot: the snapshots lie `N / SNAPSHOTS_MAX` events apart, so that cost grew
    /// with the stream (8.6% of a million-event sweep's time).
    fn known_prefix_len(&self, sink_bytes: &Contents, near: Option<&Contents>) -> usize {
        let Some(near) = near else {
            return self.known_contents.common_prefix_len(sink_bytes);
        };
        debug_assert!(self.known_contents.starts_with(near), "a known prefix");
        let common_bytes = near.common_prefix_len(sink_bytes);
        let known_bytes = if common_bytes < near.len() {
            // The two part within `near`, which is the known file there.
            common_bytes
        } else {
            self.known_contents
                .common_prefix_len_from(sink_bytes, common_bytes)
        };
        debug_assert_eq!(
            known_bytes,
            self.known_contents.common_prefix_len(sink_bytes)
        );
        known_bytes
    }

    /// Whether the point restarting as `state` may take on `class`'s future: the same world
    /// (its whole disk, the sink file's bytes included, and its log compared by
    /// [`SharedFutures::at_restart`]), with the clock and the sink's outage equal too,
    /// whatever the key scheme (a recovery may read the clock).
    pub(super) fn joins_restart(&self, state: &RestartCandidate, class: &RestartClass) -> bool {
        state.clock == class.state.clock
            && state.sink_down_until_ms == class.state.sink_down_until_ms
    }

    /// `pieces`, kept, with the longest run of them at their end that is the known file's
    /// last bytes as one known piece: a point that takes them on reads none of them.
    fn known_tail(&self, pieces: &[Piece]) -> Vec<KeptPiece> {
        let empty = Contents::default();
        let known = self.known.as_ref().map_or(&empty, |known| known.bytes());
        let mut known_from = known.len();
        let mut own_count = pieces.len();
        // Bounded: one round per piece, from the last.
        for piece in pieces.iter().rev() {
            match *piece {
                Piece::Known { from, to } if to == known_from => known_from = from,
                Piece::Own(bytes)
                    if known_from >= bytes.len()
                        && known.holds_at(known_from - bytes.len(), bytes) =>
                {
                    known_from -= bytes.len();
                }
                _ => break,
            }
            own_count -= 1;
        }
        let mut kept: Vec<KeptPiece> = pieces[..own_count].iter().map(KeptPiece::of).collect();
        if known_from < known.len() {
            kept.push(KeptPiece::Known {
                from: known_from,
                to: known.len(),
            });
        }
        kept
    }

    /// Remembers the future of a run from its first restart with its plan spent
    /// (`candidate`), now that it ended as `ending` with its world `world` (its end, or
    /// where it stopped): only if it completed in the incarnation the restart began.
    pub(super) fn remember_restart(
        &self,
        candidate: RestartCandidate,
        ending: &Ending,
        world: &World,
        shared: &SharedFutures,
    ) {
        if ending.ended.incarnations.len() != candidate.incarnations_ended + 1 {
            return;
        }
        // What the run's file still began with of its file at the restart, measured
        // (bounded by the chunks the two files do not share): the rest, its own.
        let head = &ending.head;
        let kept_len_bytes = head.common_prefix_len(&candidate.sink_bytes);
        let own = head.copy_range(kept_len_bytes..head.len());
        let mut pieces = vec![Piece::Own(&own)];
        pieces.extend_from_slice(&ending.tail);
        let appended = self.known_tail(&pieces);
        let incarnation = ending
            .ended
            .incarnations
            .last()
            .expect("one after the restart");
        assert_eq!(incarnation.end, IncarnationEnd::Completed);
        let served_end = ending.ended.served;
        let recovery = RecoverySteps::after_last_restart(world.trace(), candidate.steps_taken);
        shared.remember_restart(RestartClass {
            kept_len_bytes,
            appended,
            incarnation: incarnation.clone(),
            served_after: served_end - candidate.served,
            stray_files: Arc::clone(&ending.ended.stray_files),
            final_state: ending.ended.final_state.clone(),
            recovery,
            state: candidate,
        });
    }
}
