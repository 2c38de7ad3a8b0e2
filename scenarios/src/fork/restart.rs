//! Sharing at a restart: a point whose world, at a restart with its plan spent, is one an
//! earlier point restarted in stops before its recovery and takes the rest of its run from
//! that point's (the rule is in `fork/shared.rs`; the table is [`SharedFutures`]).

use super::shared::{SharedFutures, Surroundings};
use super::Ended;
use super::{compared_disk, Ending, Forks};
use crate::observation::{FinalState, Observation, Piece, RecoverySteps, RestartSteps};
use crate::runner::{Incarnation, IncarnationEnd, Restarting};
use keel_engine::sink::readable_prefix_len_bytes;
use keel_engine::SINK_WRITE_OP;
use keel_sim::{Clock, Contents, Disk, TxLog, World};
use std::sync::Arc;

/// A run's world at a restart with its plan spent, before the new process's recovery, kept
/// until the run ends. Only the world survives a crash, so two runs at restarts whose
/// surroundings are the same ([`super::same_surroundings`]) recover alike and go on alike
/// (an append sink's bytes left out, as at a boundary: the connector reads them once, at
/// its open, only to cut a torn tail, and a restart is remembered only without one).
#[derive(Clone, Debug)]
pub struct RestartCandidate {
    pub clock: Clock,
    pub sink_down_until_ms: u64,
    pub txlog: TxLog,
    /// The compared disk (`fork::compared_disk`).
    pub disk: Disk,
    /// The sink file then, whole.
    pub sink_bytes: Contents,
    /// How much of it the sink connector's open keeps: all, or what is left once it cuts
    /// a torn tail (with the protocol's tail repair).
    pub sink_kept_len_bytes: usize,
    /// Whether its tail is torn (not whole records): the open then takes the steps that
    /// cut it (or leaves it), so only runs with a torn tail stand for each other.
    pub sink_torn: bool,
    /// Whether what the open keeps is a prefix of the fault-free run's file (so its
    /// observation compares none of it: [`crate::observation::Piece`]).
    pub sink_kept_known: bool,
    /// The steps taken by then (the next step's number).
    pub steps_taken: u64,
    /// The sink writes served by then.
    pub served: u64,
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
    /// The bytes the run appended to its sink from the restart to its end.
    pub appended: Vec<u8>,
    /// Where they lie in the fault-free run's file, if they are its last bytes.
    pub appended_known_from: Option<usize>,
    /// The incarnation the restart began, as it ended.
    pub incarnation: Incarnation,
    /// The sink writes served after the restart.
    pub served_after: u64,
    pub files: Arc<[String]>,
    pub final_state: FinalState,
    /// Its recovery, the first step counted from the restart.
    pub recovery: Option<RecoverySteps>,
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
    ) -> Observation {
        let kept_len_bytes = state.sink_kept_len_bytes;
        let own;
        let sink = [
            if state.sink_kept_known {
                Piece::Known {
                    from: 0,
                    to: kept_len_bytes,
                }
            } else {
                own = state.sink_bytes.copy_range(0..kept_len_bytes);
                Piece::Own(&own)
            },
            match class.appended_known_from {
                Some(from) => Piece::Known {
                    from,
                    to: self.known_bytes().len(),
                },
                None => Piece::Own(&class.appended),
            },
        ];
        let mut incarnations = incarnations.to_vec();
        incarnations.push(class.incarnation.clone());
        let restart = class
            .recovery
            .as_ref()
            .and_then(|recovery| RestartSteps::of_restarted(world, &self.spec.config, recovery));
        let ended = Ended {
            incarnations,
            served: world.served_requests(SINK_WRITE_OP) + class.served_after,
            files: Arc::clone(&class.files),
            final_state: class.final_state.clone(),
        };
        self.observe_sink(&sink, &ended, world, restart)
    }

    /// The run at the restart `restarting` shows as a restart to remember or to share, if it
    /// can be one: its plan spent, no byte a failed fsync left unpersisted, and no sink
    /// outage still waiting for its first served request. Its sink file is what the
    /// connector's open keeps of it (a torn tail cut with the protocol's tail repair),
    /// followed by what the run appends after.
    pub(super) fn restart_state(&self, restarting: &Restarting) -> Option<RestartCandidate> {
        let world = restarting.world;
        let sink = self.spec.config.sink;
        let env = world.env();
        let disk = &env.disk;
        if !world.plan_spent()
            || disk.unpersisted_bytes() != 0
            || world
                .first_outage_ms()
                .is_some_and(|(_, served_ms)| served_ms.is_none())
        {
            return None;
        }
        let sink_bytes = disk.read_shared(sink.file_name()).ok()?;
        let (readable_len_bytes, whole_known) = self.readable_len(&sink_bytes);
        let sink_torn = readable_len_bytes < sink_bytes.len();
        let sink_kept_len_bytes = if sink_torn && self.spec.config.protocol.tail_repair() {
            readable_len_bytes
        } else {
            sink_bytes.len()
        };
        let sink_kept_known = whole_known
            || sink_kept_len_bytes < sink_bytes.len()
                && self
                    .known_bytes()
                    .starts_with(&sink_bytes.copy_range(0..sink_kept_len_bytes));
        Some(RestartCandidate {
            clock: env.clock,
            sink_down_until_ms: env.sink_down_until_ms,
            txlog: env.txlog.clone(),
            disk: compared_disk(disk, sink).ok()?,
            sink_bytes,
            sink_kept_len_bytes,
            sink_torn,
            sink_kept_known,
            steps_taken: world.steps_taken(),
            served: world.served_requests(SINK_WRITE_OP),
            incarnations_ended: restarting.incarnations.len(),
        })
    }

    /// How much of `bytes` the sink connector's open reads as records
    /// ([`readable_prefix_len_bytes`]), and whether `bytes` were found to be a prefix of the
    /// fault-free file: at once for a line-aligned prefix of the fault-free file's readable
    /// lines (all of it; the chunks both files share are not read), else by reading them
    /// from the last line the two files have in common (a power loss's torn sink tail: the
    /// lines before it are the fault-free file's, read as records already).
    pub(super) fn readable_len(&self, bytes: &Contents) -> (usize, bool) {
        let line_aligned = bytes.last().is_none_or(|b| b == b'\n');
        let common_bytes = self
            .known_contents
            .common_prefix_len(bytes)
            .min(self.known_readable_len_bytes);
        if line_aligned && common_bytes == bytes.len() {
            return (bytes.len(), true);
        }
        // The fault-free file's readable prefix is whole record lines, so the scan from 0
        // passes the end of the last of them that `bytes` holds too.
        let known = &self.known_bytes()[..common_bytes];
        let lines_common_bytes = known.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let rest = bytes.copy_range(lines_common_bytes..bytes.len());
        let readable_bytes = lines_common_bytes + readable_prefix_len_bytes(&rest);
        debug_assert_eq!(readable_bytes, readable_prefix_len_bytes(&bytes.to_vec()));
        (readable_bytes, false)
    }

    /// Remembers the future of a run from its first restart with its plan spent
    /// (`candidate`), now that it ended as `ending` with its world `world` (its end, or
    /// where it stopped): only if it completed in the incarnation the restart began, and
    /// only appended to its sink after it.
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
        let kept = candidate
            .sink_bytes
            .copy_range(0..candidate.sink_kept_len_bytes);
        let Some(appended) = ending.sink_bytes.strip_prefix(kept.as_slice()) else {
            return;
        };
        let incarnation = ending
            .ended
            .incarnations
            .last()
            .expect("one after the restart");
        assert_eq!(incarnation.end, IncarnationEnd::Completed);
        let served_end = ending.ended.served;
        let recovery = RecoverySteps::after_last_restart(world.trace(), candidate.steps_taken);
        let known = self.known_bytes();
        shared.remember_restart(RestartClass {
            appended_known_from: known
                .ends_with(appended)
                .then(|| known.len() - appended.len()),
            appended: appended.to_vec(),
            incarnation: incarnation.clone(),
            served_after: served_end - candidate.served,
            files: Arc::clone(&ending.ended.files),
            final_state: ending.ended.final_state.clone(),
            recovery,
            state: candidate,
        });
    }
}
