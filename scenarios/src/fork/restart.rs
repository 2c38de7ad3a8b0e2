//! Sharing at a restart: a point whose world, at a restart with its plan spent, is one an
//! earlier point restarted in stops before its recovery and takes the rest of its run from
//! that point's (the rule is in `fork/shared.rs`; the table is [`SharedFutures`]).

use super::described::DescribedFile;
use super::ending::{Ended, Ending};
use super::shared::{SharedFutures, Surroundings};
use super::Forks;
use crate::observation::{FinalState, Observation, Piece, RecoverySteps, RestartSteps};
use crate::runner::{Incarnation, IncarnationEnd, Restarting};
use keel_engine::sink::{readable_len_bytes, readable_len_bytes_sharing};
use keel_engine::{SinkKind, SINK_WRITE_OP};
use keel_sim::{Clock, Contents, Disk, TxLog, World};
use std::cell::RefCell;
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
    /// The disk then, compared with the file sink's bytes left out (`except`).
    pub disk: Disk,
    /// The file sink's file (None: the transactional sink's log is compared whole).
    pub except: Option<&'static str>,
    /// The sink file then, whole.
    pub sink_bytes: Contents,
    /// How much of it the sink connector's open keeps: all, or what is left once it cuts
    /// a torn tail (with the protocol's tail repair).
    pub sink_kept_len_bytes: usize,
    /// Whether its tail is torn (not whole records): the open then takes the steps that
    /// cut it (or leaves it), so only runs with a torn tail stand for each other.
    pub sink_torn: bool,
    /// How many bytes at its start are the known file's (measured once at the restart:
    /// what the open reads, the idempotent rule and the observation all need it).
    pub sink_known_len_bytes: usize,
    /// Whether the file is whole lines of the known file from its start (the fault-free
    /// run's file at some moment): an idempotent sink's restart shares on that ground
    /// ([`RestartClass::lead_bytes`]).
    pub sink_known_prefix: bool,
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
            except: self.except,
        }
    }
}

/// Below this many bytes after its known prefix (about 50 lines), a restarting file is read
/// as it is, not described first (`fork/described.rs`): on a depth-2 sweep of power losses
/// on a 100-event stream, describing every crash state's file ran 10% more instructions.
const RESTART_DESCRIBED_BYTES_MIN: usize = 4 * 1024;

/// A remembered restart and what its run did after it: one incarnation, completed.
#[derive(Debug)]
pub struct RestartClass {
    pub state: RestartCandidate,
    /// The bytes the run appended to its sink from the restart to its end, in pieces.
    pub appended: Vec<KeptPiece>,
    /// The incarnation the restart began, as it ended.
    pub incarnation: Incarnation,
    /// The sink writes served after the restart.
    pub served_after: u64,
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

impl RestartClass {
    /// For the idempotent sink: how many bytes of what this class's run appended after its
    /// restart the point restarting as `state` holds already, if it can take on the class's
    /// future on the ground that its file runs further along the same lines.
    ///
    /// The rule: both files are whole lines of the known file from its start, the point's
    /// no shorter, and the class's run appended (only appended: the connector cuts nothing
    /// from a file without a torn tail, and nothing else writes it) the known file's bytes
    /// from where its file ended to at least where the point's ends. The engine observes
    /// its idempotent sink only through whether a key is there, and only its counters see
    /// the answer (`SinkConnector::write`), so the point sends the class's requests in the
    /// same order. By induction over them, the point's file is always the longer of its
    /// own at the restart and the class's: a record the class appended where the point's
    /// file already ran is a line the point holds, key and all, so the point skips it; a
    /// record the class skipped has its key in the class's file, which the point's holds;
    /// past the point's own file the two files are one and decide alike. So the point ends
    /// with the class's file, and with the class's counters but for the lead: those lines
    /// the class wrote, the point skipped.
    pub fn lead_bytes(&self, state: &RestartCandidate) -> Option<usize> {
        let (class_len, point_len) = (self.state.sink_bytes.len(), state.sink_bytes.len());
        let whole = |s: &RestartCandidate| !s.sink_torn && s.sink_known_prefix;
        if !whole(&self.state) || !whole(state) || point_len < class_len {
            return None;
        }
        if point_len == class_len {
            return Some(0);
        }
        match self.appended.first() {
            Some(KeptPiece::Known { from, to }) if *from == class_len && *to >= point_len => {
                Some(point_len - class_len)
            }
            _ => None,
        }
    }
}

/// Whether the point restarting as `state` keeps the same sink file as `class`'s run did
/// once the connector's open cut a torn tail (both files are torn or neither is:
/// [`Forks::joins_restart`]). The open reads only the bytes it keeps, and cuts a torn tail in
/// the same steps however long the tail is (a truncate to the kept length and an fsync), so
/// what the tail held reaches neither run's future. Without tail repair, or without a torn
/// tail, everything is kept and the whole files are compared.
fn same_kept(state: &RestartCandidate, class: &RestartClass) -> bool {
    assert_eq!(state.sink_torn, class.state.sink_torn);
    let kept_len_bytes = state.sink_kept_len_bytes;
    kept_len_bytes == class.state.sink_kept_len_bytes
        && state.sink_bytes.prefix(kept_len_bytes) == class.state.sink_bytes.prefix(kept_len_bytes)
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
        let described = self.describe(
            &state.sink_bytes,
            state.sink_kept_len_bytes,
            state.sink_known_len_bytes,
            described,
        );
        // What the class's run appended, as this point takes it on.
        let mut rest: Vec<Piece> = Vec::new();
        let mut incarnation = class.incarnation.clone();
        // Ahead of the class's file along the known lines (`RestartClass::lead_bytes`); with
        // no lead, the same file, followed by what the class's run appended.
        let lead = match self.spec.config.sink {
            SinkKind::Idempotent => class.lead_bytes(state).filter(|&lead| lead > 0),
            SinkKind::Append | SinkKind::Transactional => None,
        };
        match lead {
            Some(lead_bytes) => {
                let class_len_bytes = class.state.sink_bytes.len();
                let lead_lines = self
                    .known
                    .as_ref()
                    .and_then(|known| {
                        known.whole_lines_count(class_len_bytes..class_len_bytes + lead_bytes)
                    })
                    .expect("whole known lines") as u64;
                let stats = &mut incarnation.stats;
                assert!(stats.written >= lead_lines);
                stats.written -= lead_lines;
                stats.skipped += lead_lines;
                let mut appended = class.appended.iter().map(KeptPiece::piece);
                let Some(Piece::Known { from, to }) = appended.next() else {
                    unreachable!("lead_bytes: a known piece first")
                };
                assert!(from + lead_bytes <= to);
                rest.push(Piece::Known {
                    from: from + lead_bytes,
                    to,
                });
                rest.extend(appended);
            }
            None => rest.extend(class.appended.iter().map(KeptPiece::piece)),
        }
        let mut incarnations = incarnations.to_vec();
        incarnations.push(incarnation);
        let restart = class
            .recovery
            .as_ref()
            .and_then(|recovery| RestartSteps::of_restarted(world, &self.spec.config, recovery));
        let ended = Ended {
            incarnations,
            served: world.served_requests(SINK_WRITE_OP) + class.served_after,
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
        // What the connector's open reads as records.
        let readable_bytes = match self.caches.sink.as_deref() {
            // The cache holds the known file (`share_caches`): one comparison for both.
            // Every line of it is a record line, so past a few lines of its own the file's
            // runs of the known file's whole lines are taken as read wherever they lie (a
            // depth-2 point's file holds its first fault's replay); a few lines (a power
            // loss's torn tail) are read as they are.
            Some(cache) if cache.contents().is_same_copy(&self.known_contents) => {
                if sink_bytes.len() - sink_known_len_bytes < RESTART_DESCRIBED_BYTES_MIN {
                    readable_len_bytes_sharing(&sink_bytes, Some(cache), sink_known_len_bytes)
                } else {
                    let pieces = self.describe(
                        &sink_bytes,
                        sink_bytes.len(),
                        sink_known_len_bytes,
                        Some(shared.described()),
                    );
                    self.readable_len_bytes(&pieces, &sink_bytes)
                }
            }
            cache => readable_len_bytes(&sink_bytes, cache),
        };
        let sink_torn = readable_bytes < sink_bytes.len();
        let sink_kept_len_bytes = if sink_torn && self.spec.config.protocol.tail_repair() {
            readable_bytes
        } else {
            sink_bytes.len()
        };
        // Read only by the idempotent sink's rule (`RestartClass::lead_bytes`).
        let sink_known_prefix =
            sink == SinkKind::Idempotent && !sink_torn && sink_known_len_bytes == sink_bytes.len();
        Some(RestartCandidate {
            clock: env.clock,
            sink_down_until_ms: env.sink_down_until_ms,
            txlog: env.txlog.clone(),
            disk: disk.clone(),
            // A file sink's bytes are left out: the append connector's open reads them only
            // to cut a torn tail; the idempotent sink's are compared apart
            // (`Forks::joins_restart`).
            except: (!sink.is_transactional()).then(|| sink.file_name()),
            sink_bytes,
            sink_kept_len_bytes,
            sink_known_len_bytes,
            sink_torn,
            sink_known_prefix,
            steps_taken: world.steps_taken(),
            served: world.served_requests(SINK_WRITE_OP),
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

    /// Whether the point restarting as `state` may take on `class`'s future, its
    /// surroundings being the same: the append sink's file is not compared (its open reads
    /// it only to cut a torn tail), the idempotent sink's must be the same file once a torn
    /// tail is cut ([`same_kept`]) or run further along the known lines
    /// ([`RestartClass::lead_bytes`]).
    pub(super) fn joins_restart(&self, state: &RestartCandidate, class: &RestartClass) -> bool {
        if state.sink_torn != class.state.sink_torn {
            return false;
        }
        match self.spec.config.sink {
            SinkKind::Idempotent => class.lead_bytes(state).is_some() || same_kept(state, class),
            SinkKind::Append | SinkKind::Transactional => true,
        }
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
        let kept_len_bytes = candidate.sink_kept_len_bytes;
        let head = &ending.head;
        // Bounded by the chunks the two files do not share.
        if head.len() < kept_len_bytes
            || head.common_prefix_len(&candidate.sink_bytes) < kept_len_bytes
        {
            return;
        }
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
