//! A parallel job: a graph of tasks joined by bounded channels, checkpointed by barriers.
//!
//! The graph is the article's (`003`, sections 2.1, 2.2, 4.1, 5.1): P source partitions, each
//! a replayable input with an offset; `keyBy` to M parallel window operators (each key to
//! one of them by [`input::operator_of`]); one sink task. Channels are FIFO queues of items
//! (events, watermarks, end of input, barriers, output records); a producer may run ahead of
//! its consumer only by a channel's capacity (backpressure).
//!
//! A checkpoint coordinator (Flink's JobManager) triggers checkpoint n every
//! `checkpoint_interval_ms` of simulated time; each source emits barrier n after the offset
//! it snapshots; each task snapshots when barrier n has arrived on its inputs, per the
//! [`AlignmentMode`], writes its snapshot file and acknowledges; checkpoint n completes when
//! every task has acknowledged and the coordinator's metadata file is durable; then the
//! coordinator notifies the sink, which commits its pre-committed transaction (two-phase
//! commit on the transactional sink). A checkpoint not complete after
//! `checkpoint_timeout_ms` is declined. At the end of input a final checkpoint commits what
//! is left, as Flink's final checkpoint does.
//!
//! The job's own faults (`keel_sim::Fault::MessageLost`, `Fault::SlowDelivery`; the world
//! decides them at a step, `World::message`): a task's acknowledgement may never reach the
//! coordinator (the checkpoint cannot complete and is declined at its timeout; the sink's
//! transaction for it stays pending and is committed with a later completed checkpoint,
//! which commits every pending one up to it, or resolved on recovery); the coordinator's
//! completion notification may never reach the sink (a later notification commits what is
//! pending, or a recovery re-commits it); a delivery into a channel may reach its consumer
//! late (the channel holds it and what follows, `channel.rs`). The rule for the end of the
//! input: while the job is drained, no checkpoint is pending, the sink holds a transaction
//! not committed and no notification is on its way, the coordinator triggers one more
//! checkpoint, so the job never ends with pre-committed records invisible; were it to, the
//! oracle's `no-loss` reports them (only committed parts are visible).
//!
//! A task failure restarts the whole job from the newest completed checkpoint (Flink's full
//! restart): see `runtime.rs`. Which enabled action runs next is the caller's choice (a seeded
//! scheduler in `keel_sim::schedule`); the job only offers them.

pub mod channel;
pub mod graph;
pub mod input;
pub mod keyed;
pub mod runtime;
pub mod sink;
pub mod snapshot;

pub use channel::{Channel, Item};
pub use graph::{Execution, JobGraph};
pub use input::{operator_of, parse_keyed_events, read_keyed_events, split_partitions, KeyedEvent};
pub use keyed::{JobRecord, KeyedWindows};
pub use runtime::{Action, Job, JobStats};
pub use sink::JobSinkKind;

use serde::{Deserialize, Serialize};
use std::fmt;

/// When a task with several inputs snapshots, and what happens to the records around a barrier.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum AlignmentMode {
    /// Exactly-once: an input that delivered barrier n is blocked until barrier n arrived on
    /// every input; then the task snapshots.
    #[default]
    Aligned,
    /// Exactly-once without blocking: barrier n overtakes the items queued in front of it;
    /// the task snapshots at the first barrier n, and the items overtaken (in its output
    /// channels) or still arriving before barrier n (on its other inputs) are stored in the
    /// snapshot and replayed on recovery.
    Unaligned,
    /// No alignment: items behind barrier n on an input that already delivered it are
    /// processed before the snapshot, and processed again after a recovery: duplicates in
    /// state.
    AtLeastOnce,
}

impl AlignmentMode {
    pub const ALL: [AlignmentMode; 3] = [
        AlignmentMode::Aligned,
        AlignmentMode::Unaligned,
        AlignmentMode::AtLeastOnce,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            AlignmentMode::Aligned => "aligned",
            AlignmentMode::Unaligned => "unaligned",
            AlignmentMode::AtLeastOnce => "at-least-once",
        }
    }
}

impl fmt::Display for AlignmentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The knobs of a parallel job. `validate` says which one is impossible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobConfig {
    /// P: source partitions.
    pub sources: u32,
    /// M: parallel window operators.
    pub parallelism: u32,
    /// Tumbling window size W, in event-time units.
    pub window_size: i64,
    /// Out-of-orderness D: a source's watermark is its max_ts - D.
    pub out_of_orderness: i64,
    pub mode: AlignmentMode,
    pub sink: JobSinkKind,
    /// The coordinator triggers a checkpoint this often, in simulated ms.
    pub checkpoint_interval_ms: u64,
    /// A checkpoint not complete this long after its trigger is declined.
    pub checkpoint_timeout_ms: u64,
    /// Items a channel holds before its producer waits.
    pub channel_capacity: u32,
    /// Every action of a task takes this much simulated time.
    pub action_ms: u64,
    /// The coordinator triggers at most this many checkpoints on its interval (the final
    /// one aside; 0: no bound). Bounds the schedules of a job a sweep enumerates.
    pub checkpoints_max: u64,
    /// A state TTL (the article's section 3.3; Flink's `StateTtlConfig`, processing time):
    /// a key whose state an operator has not accessed for longer than this many simulated
    /// ms has it dropped, on its next event or at a cleanup. Keeps the state of ever new
    /// keys bounded; the loss it causes is counted (`TtlCounts`) and judged as any other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_ttl_ms: Option<u64>,
}

/// Bounds that keep a job small enough to simulate exhaustively and to print.
pub const SOURCES_MAX: u32 = 64;
pub const PARALLELISM_MAX: u32 = 64;
pub const CHANNEL_CAPACITY_MAX: u32 = 1 << 16;

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            sources: 2,
            parallelism: 2,
            window_size: 10,
            out_of_orderness: 5,
            mode: AlignmentMode::Aligned,
            sink: JobSinkKind::Transactional,
            checkpoint_interval_ms: 40,
            checkpoint_timeout_ms: 10_000,
            channel_capacity: 4,
            action_ms: 1,
            checkpoints_max: 0,
            state_ttl_ms: None,
        }
    }
}

impl JobConfig {
    /// Checks every knob; the error names the option and the rule it breaks.
    pub fn validate(&self) -> Result<(), String> {
        let max = crate::event::JSON_SAFE_INT_MAX;
        if !(1..=SOURCES_MAX).contains(&self.sources) {
            return Err(format!(
                "--sources must be between 1 and {SOURCES_MAX}, got {}",
                self.sources
            ));
        }
        if !(1..=PARALLELISM_MAX).contains(&self.parallelism) {
            return Err(format!(
                "--parallelism must be between 1 and {PARALLELISM_MAX}, got {}",
                self.parallelism
            ));
        }
        if self.window_size <= 0 || self.window_size > max {
            return Err(format!(
                "--window must be between 1 and {max}, got {}",
                self.window_size
            ));
        }
        if self.out_of_orderness < 0 || self.out_of_orderness > max {
            return Err(format!(
                "--out-of-orderness must be between 0 and {max}, got {}",
                self.out_of_orderness
            ));
        }
        if self.checkpoint_interval_ms == 0 {
            return Err("--checkpoint-interval-ms must be at least 1, got 0".to_string());
        }
        if self.checkpoint_timeout_ms == 0 {
            return Err("--checkpoint-timeout-ms must be at least 1, got 0".to_string());
        }
        // A source's read puts an event and a watermark on one channel.
        if !(2..=CHANNEL_CAPACITY_MAX).contains(&self.channel_capacity) {
            return Err(format!(
                "--channel-capacity must be between 2 and {CHANNEL_CAPACITY_MAX}, got {}",
                self.channel_capacity
            ));
        }
        if self.action_ms == 0 {
            return Err("an action takes at least 1 ms".to_string());
        }
        Ok(())
    }

    /// The tasks of the graph, by label, in a fixed order: sources, operators, the sink.
    pub fn task_labels(&self) -> Vec<String> {
        let mut labels: Vec<String> = (0..self.sources).map(source_label).collect();
        labels.extend((0..self.parallelism).map(operator_label));
        labels.push(SINK_LABEL.to_string());
        labels
    }
}

pub const SINK_LABEL: &str = "sink";
pub const COORDINATOR_LABEL: &str = "coord";

pub fn source_label(partition: u32) -> String {
    format!("src{partition}")
}

pub fn operator_label(index: u32) -> String {
    format!("op{index}")
}
