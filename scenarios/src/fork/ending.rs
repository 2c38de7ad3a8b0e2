//! How a point that stopped before its end ends: the rest it takes from a run that went on
//! from where it stopped (`Rest`: the fault-free run's, or a shared future's), how it ended
//! (`Ending`: its sink file in pieces and the rest), and what its consumers observe then.

use super::described::DescribedFile;
use super::restart::KeptPiece;
use super::shared::{After, Class, ConvergedOn};
use super::{Facts, Forks};
use crate::observation::{
    FinalState, Observation, Piece, RestartSteps, SinkOutage, SinkWriteCounts,
};
use crate::runner::{Incarnation, IncarnationEnd, Outcome, Paused, RunResult};
use keel_engine::{IncarnationStats, SINK_WRITE_OP};
use keel_sim::{Contents, Served};
use std::cell::RefCell;
use std::sync::Arc;

impl Forks {
    /// What the fault-free run did after the snapshot where a run stopped because it
    /// converged ([`Forks::converges`]), as the run takes it on: its last incarnation's
    /// counters moved as the fault-free run's moved after the boundary; its sink file
    /// followed by what the fault-free run appended; the files and the final windows the
    /// fault-free run ended with (the disks had the same names at the boundary, and the
    /// same operations follow).
    pub(super) fn converged(&self, paused: &Paused) -> Rest<'_> {
        let at = (paused.index / self.every_events) as usize;
        let snapshot = &self.snapshots[at];
        assert_eq!(snapshot.index, paused.index);
        assert!(self.facts[at].sink_appended_only);
        self.rest_after(at)
    }

    /// What the fault-free run did after its snapshot `at`.
    pub(super) fn rest_after(&self, at: usize) -> Rest<'_> {
        self.rest_from(&self.snapshots[at], &self.facts[at])
    }

    /// What the fault-free run did after the boundary it stands at in `paused`, whose facts
    /// are `facts` (a snapshot's, or one just after a point's fault: `fork/ahead.rs`).
    pub(super) fn rest_from<'a>(&'a self, paused: &'a Paused, facts: &Facts) -> Rest<'a> {
        assert!(facts.sink_appended_only);
        Rest {
            appended: vec![Piece::Known {
                from: facts.sink_len_bytes,
                to: self.end.sink_len_bytes,
            }],
            stats_at: paused.engine.stats(),
            stats_end: self.end.stats.clone(),
            served_after: self.end.served - paused.world.served(SINK_WRITE_OP),
            stray_files: Arc::clone(&self.end.stray_files),
            final_state: &self.end.final_state,
        }
    }

    /// What the run of `class` did after its boundary, as a run stopped there because it
    /// shares the class's future takes it on.
    pub(super) fn shared<'a>(&'a self, class: &'a Class) -> Rest<'a> {
        let state = &class.state;
        match &class.after {
            After::Converged {
                on,
                stats_then,
                served_then,
            } => {
                let fault_free = match on {
                    ConvergedOn::Snapshot(at) => self.rest_after(*at),
                    ConvergedOn::Ahead(boundary) => {
                        self.rest_from(&boundary.paused, &boundary.facts)
                    }
                };
                Rest {
                    appended: vec![Piece::Own(&class.appended), fault_free.appended[0]],
                    stats_at: state.stats(),
                    // The class's run's last incarnation at its end, as `converged` made it.
                    stats_end: taken_on(stats_then, fault_free.stats_at, &fault_free.stats_end),
                    served_after: *served_then - state.served() + fault_free.served_after,
                    stray_files: fault_free.stray_files,
                    final_state: fault_free.final_state,
                }
            }
            After::Finished {
                stats_end,
                served_end,
                stray_files,
                final_state,
            } => Rest {
                appended: vec![Piece::Own(&class.appended)],
                stats_at: state.stats(),
                stats_end: stats_end.clone(),
                served_after: *served_end - state.served(),
                stray_files: Arc::clone(stray_files),
                final_state,
            },
        }
    }

    /// How a run stopped at an event boundary ends, with `rest` what a run that went on from
    /// the same state did after it.
    pub(super) fn ending<'a>(&self, paused: &Paused, rest: &Rest<'a>) -> Ending<'a> {
        let head = self.sink_file_at(paused);
        let mut incarnations = paused.incarnations.clone();
        incarnations.push(Incarnation {
            stats: taken_on(paused.engine.stats(), rest.stats_at, &rest.stats_end),
            end: IncarnationEnd::Completed,
        });
        Ending {
            head,
            tail: rest.appended.clone(),
            ended: Ended {
                incarnations,
                // The sink served the point's requests up to the boundary, then those the
                // other run sent after it (the same requests follow).
                served: paused.world.served(SINK_WRITE_OP) + rest.served_after,
                stray_files: Arc::clone(&rest.stray_files),
                final_state: rest.final_state.clone(),
            },
        }
    }

    /// The observation of a completed run that ended as `ending` says, whose world had
    /// seen every sink outage it was to see by `world` (its end, or where it stopped), and
    /// whose recovery after a kill went as `restart` says. Its sink file is described
    /// against the known file, from the last file `described` where it shares its bytes.
    pub(super) fn observe(
        &self,
        ending: &Ending,
        world: &keel_sim::World,
        restart: Option<RestartSteps>,
        described: Option<&RefCell<DescribedFile>>,
    ) -> Observation {
        let head = &ending.head;
        let common_bytes = self.known_contents.common_prefix_len(head);
        let described = self.describe(head, head.len(), common_bytes, described);
        let sink = self.described_with(described, &ending.tail);
        let sink: Vec<Piece> = sink.iter().map(KeptPiece::piece).collect();
        self.observe_sink(&sink, &ending.ended, world, restart)
    }

    /// [`Forks::observe`] of a run whose sink file is made of `sink`, and which ended as
    /// `ended` says.
    pub(super) fn observe_sink(
        &self,
        sink: &[Piece],
        ended: &Ended,
        world: &keel_sim::World,
        restart: Option<RestartSteps>,
    ) -> Observation {
        let known = self
            .known
            .as_ref()
            .expect("a converging run's sink is the documented file");
        let mut observation = Observation::of_file_view(
            &self.spec.config,
            known.observe_pieces(sink),
            ended.stray_files.to_vec(),
            &ended.incarnations,
            &Outcome::Completed,
            &ended.final_state,
        );
        let stats = ended.incarnations.iter().map(|i| &i.stats);
        observation.sink_writes = Some(SinkWriteCounts {
            // Counted by the world where the point ran, and where the run that stood for it
            // ran: a composed file's own count (the writes that changed it) is as true as a
            // run's from scratch, so the written/skipped split is judged on every point.
            served: ended.served.requests,
            appended: Some(ended.served.changed_file),
            written: stats.clone().map(|s| s.written).sum(),
            skipped: stats.map(|s| s.skipped).sum(),
        });
        observation.sink_outage = SinkOutage::of(world, observation.restarts);
        observation.restart = restart;
        observation
    }

    /// How a run that went to its end ended, if it completed, with its sink file where the
    /// oracle reads it.
    pub(super) fn ending_of(&self, result: &RunResult) -> Option<Ending<'static>> {
        if result.outcome != Outcome::Completed {
            return None;
        }
        let head = result
            .world
            .env()
            .disk
            .read_shared(self.spec.config.sink.file_name())
            .ok()?;
        Some(Ending {
            head,
            tail: Vec::new(),
            ended: Ended {
                incarnations: result.incarnations.clone(),
                served: result.world.served(SINK_WRITE_OP),
                stray_files: self.stray_files_of(result),
                final_state: self.final_state_of(&result.final_state),
            },
        })
    }
}

/// How a completed run ended, in the parts its observation is made of: its sink file, and
/// the rest.
pub(super) struct Ending<'a> {
    /// Its sink file where it stopped (or at its end), shared with its disk.
    pub(super) head: Contents,
    /// What the run that stood for it appended after that (nothing for a run to its end).
    pub(super) tail: Vec<Piece<'a>>,
    pub(super) ended: Ended,
}

/// How a completed run ended, but for its sink file: its incarnations, the sink writes the
/// simulated sink served, the stray files and the final windows it left.
pub(super) struct Ended {
    pub(super) incarnations: Vec<Incarnation>,
    pub(super) served: Served,
    /// Shared: every point of a restart class or a converged future ends with the same
    /// (worked out once: on a long checkpoint chain, from hundreds of names).
    pub(super) stray_files: Arc<[String]>,
    pub(super) final_state: FinalState,
}

/// What a run that goes on from an event boundary does after it, as a stopped run takes it
/// on: the bytes it appends to its sink (in pieces), its last incarnation's stats at the
/// boundary and at its end, the sink writes served after the boundary, and the stray files
/// and final windows it ended with.
pub(super) struct Rest<'a> {
    pub(super) appended: Vec<Piece<'a>>,
    pub(super) stats_at: &'a IncarnationStats,
    pub(super) stats_end: IncarnationStats,
    pub(super) served_after: Served,
    pub(super) stray_files: Arc<[String]>,
    pub(super) final_state: &'a FinalState,
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
