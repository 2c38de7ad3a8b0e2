//! One incarnation of a parallel job: its tasks, channels and coordinator, the actions they
//! offer, and recovery from the newest complete checkpoint.
//!
//! Between two actions everything the job holds is in this value; a crash drops it (the
//! runner keeps the world) and [`Job::recover`] builds the next incarnation from the disk.
//! Every action is one or more world steps of one task (its first step names the action),
//! so a fault plan can aim at any of them and the trace shows the schedule.

use crate::engine::{disk_step, Interrupt};
use crate::job::channel::{Channel, Item};
use crate::job::input::{operator_of, KeyedEvent};
use crate::job::keyed::{JobRecord, KeyedWindows, TtlCounts};
use crate::job::sink::{JobSink, SinkCounts};
use crate::job::snapshot::{
    checkpoint_of, meta_checkpoint, meta_file, meta_tmp_file, task_file, Metadata, TaskSnapshot,
};
use crate::job::{operator_label, source_label, AlignmentMode, JobConfig, SINK_LABEL};
use keel_sim::{Delivery, Sends, Storage, World};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

/// One action a task can take now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Source p reads its next event (or its end of input).
    SourceRead(u32),
    /// Source p emits the barrier the coordinator asked for and snapshots its offset.
    SourceBarrier(u32),
    /// Operator `op` takes the head of its input from source `input`.
    OperatorTake { op: u32, input: u32 },
    /// The sink takes the head of its input from operator `input`.
    SinkTake { input: u32 },
    /// The coordinator triggers a checkpoint.
    Trigger,
    /// The coordinator takes the next acknowledgement.
    Acknowledge,
    /// The coordinator declines the pending checkpoint (timed out).
    Decline,
    /// The sink takes the coordinator's next completion notification and commits.
    Commit,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::SourceRead(p) => write!(f, "src{p}.read"),
            Action::SourceBarrier(p) => write!(f, "src{p}.barrier"),
            Action::OperatorTake { op, input } => write!(f, "op{op}<src{input}"),
            Action::SinkTake { input } => write!(f, "sink<op{input}"),
            Action::Trigger => f.write_str("coord.trigger"),
            Action::Acknowledge => f.write_str("coord.ack"),
            Action::Decline => f.write_str("coord.decline"),
            Action::Commit => f.write_str("sink.commit"),
        }
    }
}

/// A task's progress through one checkpoint's barriers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Alignment {
    /// The checkpoint being aligned, if any.
    checkpoint: Option<u64>,
    /// Which inputs delivered its barrier.
    arrived: Vec<bool>,
    /// When its first barrier arrived (simulated ms).
    since_ms: u64,
    /// Unaligned: the snapshot taken at the first barrier, still being completed.
    taken: Option<TaskSnapshot>,
}

impl Alignment {
    fn new(inputs: usize) -> Alignment {
        Alignment {
            checkpoint: None,
            arrived: vec![false; inputs],
            since_ms: 0,
            taken: None,
        }
    }

    fn blocked(&self, input: usize, mode: AlignmentMode) -> bool {
        mode == AlignmentMode::Aligned && self.checkpoint.is_some() && self.arrived[input]
    }

    fn reset(&mut self) {
        self.checkpoint = None;
        self.arrived.iter_mut().for_each(|a| *a = false);
        self.taken = None;
    }

    /// Barrier `checkpoint` arrived: None for a declined checkpoint's late barrier (ignored),
    /// else whether it is its checkpoint's first (a newer checkpoint replaces an older one
    /// still aligning: that one was declined).
    fn admit(&mut self, checkpoint: u64, now_ms: u64) -> Option<bool> {
        match self.checkpoint {
            Some(aligning) if aligning > checkpoint => return None,
            Some(aligning) if aligning == checkpoint => return Some(false),
            _ => {}
        }
        self.reset();
        self.checkpoint = Some(checkpoint);
        self.since_ms = now_ms;
        Some(true)
    }

    /// Input `input` delivered the barrier. Once every input has, the alignment ends: the
    /// ms its first input was blocked (aligned mode) and the snapshot taken at the first
    /// barrier (unaligned mode).
    fn arrive(
        &mut self,
        input: usize,
        mode: AlignmentMode,
        now_ms: u64,
    ) -> Option<(u64, Option<TaskSnapshot>)> {
        self.arrived[input] = true;
        if !self.arrived.iter().all(|a| *a) {
            return None;
        }
        let blocked_ms = if mode == AlignmentMode::Aligned {
            now_ms - self.since_ms
        } else {
            0
        };
        let taken = self.taken.take();
        self.reset();
        Some((blocked_ms, taken))
    }

    /// Unaligned: an item taken after the snapshot, before this input's barrier, goes into it.
    fn record(&mut self, input: usize, item: &Item) {
        if self.arrived[input] {
            return;
        }
        if let Some(TaskSnapshot::Operator { recorded, .. } | TaskSnapshot::Sink { recorded, .. }) =
            self.taken.as_mut()
        {
            recorded[input].push(item.clone());
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SourceTask {
    offset: u64,
    max_ts: Option<i64>,
    end_sent: bool,
    /// Barriers the coordinator asked for, not yet emitted.
    barriers_due: VecDeque<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct OperatorTask {
    state: KeyedWindows,
    align: Alignment,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SinkTask {
    conn: JobSink,
    ended: Vec<bool>,
    align: Alignment,
    /// Completion notifications from the coordinator, not yet taken.
    notifications: VecDeque<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Ack {
    task: String,
    checkpoint: u64,
    bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Pending {
    checkpoint: u64,
    triggered_ms: u64,
    acked: BTreeSet<String>,
    bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Coordinator {
    next_checkpoint: u64,
    next_trigger_ms: u64,
    pending: Option<Pending>,
    completed: Option<u64>,
    inbox: VecDeque<Ack>,
    /// Files of checkpoints older than the completed one, to remove.
    files: BTreeMap<u64, BTreeSet<String>>,
    /// Checkpoints this incarnation triggered on its interval.
    interval_triggered: u64,
    /// After a decline at the end of input, the final checkpoint is triggered again no
    /// sooner than this (the decline's time plus the interval): a checkpoint that cannot
    /// complete within the timeout is retried at the interval, not at once, over and over.
    backoff_until_ms: Option<u64>,
}

/// What the job did, for the report: counted, never read to decide.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStats {
    pub sink: SinkCounts,
    pub checkpoints_completed: u64,
    pub checkpoints_declined: u64,
    /// Simulated ms inputs spent blocked by alignment, summed over inputs.
    pub alignment_ms: u64,
    /// The largest complete checkpoint, in bytes of task snapshot files.
    pub checkpoint_bytes_max: u64,
    /// In-flight items stored in snapshots.
    pub in_flight_items: u64,
    /// The checkpoint recovery restored (None: a fresh start).
    pub restored: Option<u64>,
    /// Metadata or task files recovery skipped, with the reason.
    pub rejected: Vec<String>,
    /// What the state TTL dropped (all zero without one).
    #[serde(default)]
    pub ttl: TtlCounts,
}

/// What an operator's take did in memory, for the step that follows.
#[derive(Default)]
struct Taken {
    /// An unaligned barrier overtook the sink's channel.
    overtook: bool,
    /// The alignment ended: the checkpoint, its snapshot and the ms an input was blocked.
    snapshot: Option<(u64, TaskSnapshot, u64)>,
}

/// One incarnation of a parallel job.
#[derive(Clone, Debug)]
pub struct Job {
    config: JobConfig,
    /// Each partition's events (shared by every incarnation and fork).
    partitions: Arc<Vec<Vec<KeyedEvent>>>,
    sources: Vec<SourceTask>,
    operators: Vec<OperatorTask>,
    sink: SinkTask,
    /// `to_operators[p][m]`: source p to operator m.
    to_operators: Vec<Vec<Channel>>,
    /// `to_sink[m]`: operator m to the sink.
    to_sink: Vec<Channel>,
    coord: Coordinator,
    stats: JobStats,
}

impl PartialEq for Job {
    /// The same future: everything but what it reports (`stats`) and the shared input.
    fn eq(&self, other: &Job) -> bool {
        self.state_text() == other.state_text()
    }
}

impl Job {
    /// Starts an incarnation: restores the newest complete checkpoint the disk holds (or
    /// starts fresh), resolves the sink's transactions and puts unaligned in-flight items
    /// back on their channels.
    pub fn recover<S: Storage>(
        world: &mut World<S>,
        config: JobConfig,
        partitions: Arc<Vec<Vec<KeyedEvent>>>,
    ) -> Result<Job, Interrupt> {
        config.validate().expect("the runner validates the config");
        assert_eq!(partitions.len(), config.sources as usize);
        let p = config.sources as usize;
        let m = config.parallelism as usize;
        let capacity = config.channel_capacity;
        let mut stats = JobStats::default();
        let names = world.effect("recover.list", "checkpoints", |env| env.disk.list())?;
        let mut metas: Vec<u64> = names.iter().filter_map(|n| meta_checkpoint(n)).collect();
        metas.sort_unstable_by(|a, b| b.cmp(a));
        let mut restored: Option<(u64, BTreeMap<String, TaskSnapshot>)> = None;
        for checkpoint in metas {
            match read_checkpoint(world, &config, checkpoint)? {
                Ok(tasks) => {
                    restored = Some((checkpoint, tasks));
                    break;
                }
                Err(reason) => {
                    world.note(format!(
                        "recovery: checkpoint {checkpoint} rejected: {reason}"
                    ));
                    stats.rejected.push(reason);
                }
            }
        }
        let seen_max = names
            .iter()
            .filter_map(|n| checkpoint_of(n))
            .max()
            .unwrap_or(0);
        let mut job = Job {
            config,
            partitions,
            sources: (0..p)
                .map(|_| SourceTask {
                    offset: 0,
                    max_ts: None,
                    end_sent: false,
                    barriers_due: VecDeque::new(),
                })
                .collect(),
            operators: (0..m)
                .map(|_| OperatorTask {
                    state: KeyedWindows::new(p),
                    align: Alignment::new(p),
                })
                .collect(),
            sink: SinkTask {
                conn: JobSink::closed(config.sink),
                ended: vec![false; m],
                align: Alignment::new(m),
                notifications: VecDeque::new(),
            },
            to_operators: vec![vec![Channel::new(capacity); m]; p],
            to_sink: vec![Channel::new(capacity); m],
            coord: Coordinator {
                next_checkpoint: seen_max + 1,
                next_trigger_ms: world.now_ms() + config.checkpoint_interval_ms,
                pending: None,
                completed: None,
                inbox: VecDeque::new(),
                files: BTreeMap::new(),
                interval_triggered: 0,
                backoff_until_ms: None,
            },
            stats,
        };
        // Every checkpoint file on disk but the restored one's is the coordinator's to remove.
        for name in &names {
            if let (Some(id), true) = (checkpoint_of(name), name.starts_with("chk-")) {
                job.coord.files.entry(id).or_default().insert(name.clone());
            }
        }
        let Some((checkpoint, tasks)) = restored else {
            world.note("recovery: no complete checkpoint: fresh start");
            job.sink.conn = JobSink::open(world, config.sink, None, &[], &mut job.stats.sink)?;
            return Ok(job);
        };
        job.coord.completed = Some(checkpoint);
        job.stats.restored = Some(checkpoint);
        let mut recorded_by_operator: Vec<Vec<Vec<Item>>> = vec![Vec::new(); m];
        let mut sink_recorded: Vec<Vec<Item>> = Vec::new();
        let mut source_in_flight: Vec<Vec<Vec<Item>>> = vec![Vec::new(); p];
        let mut operator_in_flight: Vec<Vec<Item>> = vec![Vec::new(); m];
        let mut sink_pending: Vec<u64> = Vec::new();
        for (label, snapshot) in tasks {
            match snapshot {
                TaskSnapshot::Source {
                    offset,
                    max_ts,
                    end_sent,
                    in_flight,
                } => {
                    let index = task_index(&label, "src");
                    let source = &mut job.sources[index];
                    source.offset = offset;
                    source.max_ts = max_ts;
                    source.end_sent = end_sent;
                    source_in_flight[index] = in_flight;
                }
                TaskSnapshot::Operator {
                    state,
                    recorded,
                    in_flight,
                } => {
                    let index = task_index(&label, "op");
                    job.operators[index].state = state;
                    recorded_by_operator[index] = recorded;
                    operator_in_flight[index] = in_flight;
                }
                TaskSnapshot::Sink {
                    pending,
                    ended,
                    recorded,
                } => {
                    sink_pending = pending;
                    job.sink.ended = ended;
                    sink_recorded = recorded;
                }
            }
        }
        job.sink.conn = JobSink::open(
            world,
            config.sink,
            Some(checkpoint),
            &sink_pending,
            &mut job.stats.sink,
        )?;
        // In-flight items back on their channels: what the consumer took after its snapshot
        // first, then what the producer's barrier overtook.
        for (op, recorded) in recorded_by_operator.iter().enumerate() {
            for (input, items) in recorded.iter().enumerate() {
                job.to_operators[input][op]
                    .queue
                    .extend(items.iter().cloned());
            }
        }
        for (source, in_flight) in source_in_flight.iter().enumerate() {
            for (op, items) in in_flight.iter().enumerate() {
                job.to_operators[source][op]
                    .queue
                    .extend(items.iter().cloned());
            }
        }
        for (input, items) in sink_recorded.iter().enumerate() {
            job.to_sink[input].queue.extend(items.iter().cloned());
        }
        for (op, items) in operator_in_flight.iter().enumerate() {
            job.to_sink[op].queue.extend(items.iter().cloned());
        }
        world.note(format!("recovery: restored checkpoint {checkpoint}"));
        Ok(job)
    }

    pub fn config(&self) -> &JobConfig {
        &self.config
    }

    pub fn stats(&self) -> &JobStats {
        &self.stats
    }

    /// The job's state as text: what two incarnations must share to have the same future
    /// (everything but `stats`). Canonical: every map is ordered.
    pub fn state_text(&self) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.sources, self.operators, self.sink, self.to_operators, self.to_sink, self.coord
        )
    }

    /// [`Job::state_text`] with every time relative to `now_ms` and what only reports left
    /// out (when an alignment began): two jobs with the same such text at their own `now_ms`
    /// go on alike, since the job reads time only as a distance from now (a due trigger, a
    /// timed-out checkpoint), and a due timer's exact lateness changes nothing.
    pub fn future_text(&self, now_ms: u64) -> String {
        let mut job = self.clone();
        job.coord.next_trigger_ms = job.coord.next_trigger_ms.saturating_sub(now_ms);
        if let Some(pending) = job.coord.pending.as_mut() {
            let deadline_ms = pending.triggered_ms + self.config.checkpoint_timeout_ms;
            pending.triggered_ms = deadline_ms.saturating_sub(now_ms);
        }
        for operator in &mut job.operators {
            operator.align.since_ms = 0;
        }
        for channel in job
            .to_operators
            .iter_mut()
            .flatten()
            .chain(&mut job.to_sink)
        {
            channel.holds.retain(|h| h.until_ms > now_ms);
            for hold in &mut channel.holds {
                hold.until_ms -= now_ms;
            }
        }
        job.sink.align.since_ms = 0;
        job.state_text()
    }

    /// Whether the job has nothing left to do: every input read and flushed, every channel
    /// empty, every record durable and visible, no checkpoint pending.
    pub fn finished(&self) -> bool {
        self.drained()
            && self.sink.conn.settled()
            && self.coord.pending.is_none()
            && self.coord.inbox.is_empty()
            && self.sink.notifications.is_empty()
    }

    /// Every input read, every channel empty, every operator flushed and no task aligning.
    fn drained(&self) -> bool {
        self.sources
            .iter()
            .all(|s| s.end_sent && s.barriers_due.is_empty())
            && self
                .to_operators
                .iter()
                .flatten()
                .all(|c| c.queue.is_empty())
            && self.to_sink.iter().all(|c| c.queue.is_empty())
            && self
                .operators
                .iter()
                .all(|o| o.state.flushed && o.align.checkpoint.is_none())
            && self.sink.ended.iter().all(|e| *e)
            && self.sink.align.checkpoint.is_none()
    }

    /// The actions enabled now, in a fixed order.
    pub fn enabled(&self, now_ms: u64) -> Vec<Action> {
        let mode = self.config.mode;
        let mut actions = Vec::new();
        for (p, source) in self.sources.iter().enumerate() {
            let outputs = &self.to_operators[p];
            if !source.barriers_due.is_empty() {
                if mode == AlignmentMode::Unaligned || outputs.iter().all(|c| c.has_room(1)) {
                    actions.push(Action::SourceBarrier(p as u32));
                }
            } else if !source.end_sent && outputs.iter().all(|c| c.has_room(2)) {
                actions.push(Action::SourceRead(p as u32));
            }
        }
        for (op, operator) in self.operators.iter().enumerate() {
            if !self.to_sink[op].has_room(1) && mode != AlignmentMode::Unaligned {
                continue;
            }
            for input in 0..self.sources.len() {
                let channel = &self.to_operators[input][op];
                let Some(head) = channel.visible_head(now_ms) else {
                    continue;
                };
                let barrier = matches!(head, Item::Barrier { .. });
                // Unaligned: a barrier is taken even when the output is full (it overtakes).
                if !self.to_sink[op].has_room(1) && !barrier {
                    continue;
                }
                if !operator.align.blocked(input, mode) {
                    actions.push(Action::OperatorTake {
                        op: op as u32,
                        input: input as u32,
                    });
                }
            }
        }
        for input in 0..self.operators.len() {
            if self.to_sink[input].visible_head(now_ms).is_some()
                && !self.sink.align.blocked(input, mode)
            {
                actions.push(Action::SinkTake {
                    input: input as u32,
                });
            }
        }
        if !self.sink.notifications.is_empty() {
            actions.push(Action::Commit);
        }
        if !self.coord.inbox.is_empty() {
            actions.push(Action::Acknowledge);
        }
        match &self.coord.pending {
            Some(pending) => {
                if now_ms >= pending.triggered_ms + self.config.checkpoint_timeout_ms {
                    actions.push(Action::Decline);
                }
            }
            None => {
                if self.wants_checkpoint(now_ms) {
                    actions.push(Action::Trigger);
                }
            }
        }
        actions
    }

    /// Whether the coordinator would trigger a checkpoint now (none pending): on its
    /// interval, or at once when the job is drained and the sink has something to commit
    /// (the final checkpoint).
    fn wants_checkpoint(&self, now_ms: u64) -> bool {
        if self.drained() {
            let backing_off = self.coord.backoff_until_ms.is_some_and(|t| now_ms < t);
            return !self.sink.conn.settled() && self.sink.notifications.is_empty() && !backing_off;
        }
        let bounded = self.config.checkpoints_max > 0
            && self.coord.interval_triggered >= self.config.checkpoints_max;
        now_ms >= self.coord.next_trigger_ms && !bounded
    }

    /// When something becomes enabled by time alone (a trigger, a decline, or the head of a
    /// channel a slow delivery holds), if nothing else is: the earliest such time after
    /// `now_ms`.
    pub fn next_timer_ms(&self, now_ms: u64) -> Option<u64> {
        let coordinator = match &self.coord.pending {
            Some(pending) => Some(pending.triggered_ms + self.config.checkpoint_timeout_ms),
            None if !self.drained() => Some(self.coord.next_trigger_ms),
            None => self.coord.backoff_until_ms,
        };
        let held = self
            .to_operators
            .iter()
            .flatten()
            .chain(&self.to_sink)
            .filter_map(|c| c.held_until_ms(now_ms));
        coordinator
            .into_iter()
            .chain(held)
            .filter(|t| *t > now_ms)
            .min()
    }

    /// Performs `action` (one of [`Job::enabled`]).
    pub fn perform<S: Storage>(
        &mut self,
        world: &mut World<S>,
        action: Action,
    ) -> Result<(), Interrupt> {
        let label = action.to_string();
        match action {
            Action::SourceRead(p) => self.source_read(world, p as usize, &label),
            Action::SourceBarrier(p) => self.source_barrier(world, p as usize, &label),
            Action::OperatorTake { op, input } => {
                self.operator_take(world, op as usize, input as usize, &label)
            }
            Action::SinkTake { input } => self.sink_take(world, input as usize, &label),
            Action::Trigger => {
                let checkpoint = self.coord.next_checkpoint;
                world.effect("coord.trigger", format!("checkpoint {checkpoint}"), |_| ())?;
                self.coord.next_checkpoint += 1;
                if !self.drained() {
                    self.coord.interval_triggered += 1;
                }
                self.coord.pending = Some(Pending {
                    checkpoint,
                    triggered_ms: world.now_ms(),
                    acked: BTreeSet::new(),
                    bytes: 0,
                });
                self.coord.next_trigger_ms = world.now_ms() + self.config.checkpoint_interval_ms;
                for source in &mut self.sources {
                    source.barriers_due.push_back(checkpoint);
                }
                Ok(())
            }
            Action::Acknowledge => self.acknowledge(world),
            Action::Decline => {
                let pending = self.coord.pending.take().expect("enabled with one pending");
                world.effect(
                    "coord.decline",
                    format!("checkpoint {}", pending.checkpoint),
                    |_| (),
                )?;
                self.stats.checkpoints_declined += 1;
                self.coord.backoff_until_ms =
                    Some(world.now_ms() + self.config.checkpoint_interval_ms);
                Ok(())
            }
            Action::Commit => {
                let completed = *self.sink.notifications.front().expect("enabled");
                let delivery = world.message(
                    "sink.notified",
                    format!("checkpoint {completed}"),
                    Sends::Message,
                )?;
                self.sink.notifications.pop_front();
                if delivery == Delivery::Lost {
                    // The sink never hears of it: its transactions stay pending until a later
                    // notification or a recovery commits them.
                    return Ok(());
                }
                self.sink
                    .conn
                    .commit(world, completed, &mut self.stats.sink)
            }
        }
    }

    fn source_read<S: Storage>(
        &mut self,
        world: &mut World<S>,
        p: usize,
        label: &str,
    ) -> Result<(), Interrupt> {
        let source = &self.sources[p];
        let partition = &self.partitions[p];
        let lengths = self.output_lengths(p);
        let Some(event) = partition.get(source.offset as usize).cloned() else {
            let delivery = world.message(
                "source.read",
                format!("{label} end-of-input"),
                Sends::Channel,
            )?;
            let source = &mut self.sources[p];
            source.end_sent = true;
            for channel in &mut self.to_operators[p] {
                channel.push(Item::End);
            }
            self.hold_outputs(p, &lengths, delivery, world.now_ms());
            return Ok(());
        };
        let offset = source.offset;
        let delivery = world.message(
            "source.read",
            format!("{label} event {p}:{offset}"),
            Sends::Channel,
        )?;
        let op = operator_of(&event.key, self.config.parallelism) as usize;
        self.to_operators[p][op].push(Item::Event {
            key: event.key.clone(),
            ts: event.ts,
            value: event.value,
            partition: p as u32,
            offset,
        });
        let source = &mut self.sources[p];
        source.offset += 1;
        let max_ts = source.max_ts.map_or(event.ts, |m| m.max(event.ts));
        if source.max_ts != Some(max_ts) {
            source.max_ts = Some(max_ts);
            let watermark = max_ts - self.config.out_of_orderness;
            for channel in &mut self.to_operators[p] {
                channel.push(Item::Watermark { watermark });
            }
        }
        self.hold_outputs(p, &lengths, delivery, world.now_ms());
        Ok(())
    }

    /// Where each of source `p`'s output channels will get its next item: its length, or
    /// (unaligned) where a barrier would overtake to.
    fn output_lengths(&self, p: usize) -> Vec<usize> {
        let unaligned = self.config.mode == AlignmentMode::Unaligned;
        self.to_operators[p]
            .iter()
            .map(|c| {
                if unaligned && !self.sources[p].barriers_due.is_empty() {
                    c.overtake_position()
                } else {
                    c.queue.len()
                }
            })
            .collect()
    }

    /// A slow delivery of what source `p`'s step put on its output channels: each channel
    /// that got an item is held from it.
    fn hold_outputs(&mut self, p: usize, from: &[usize], delivery: Delivery, now_ms: u64) {
        let Delivery::Delayed { delay_ms } = delivery else {
            return;
        };
        for (channel, &from) in self.to_operators[p].iter_mut().zip(from) {
            if channel.queue.len() > from {
                channel.hold_from(from, now_ms + delay_ms);
            }
        }
    }

    fn source_barrier<S: Storage>(
        &mut self,
        world: &mut World<S>,
        p: usize,
        label: &str,
    ) -> Result<(), Interrupt> {
        let checkpoint = *self.sources[p].barriers_due.front().expect("enabled");
        let lengths = self.output_lengths(p);
        let delivery = world.message(
            "source.barrier",
            format!("{label} {checkpoint}"),
            Sends::Channel,
        )?;
        self.sources[p].barriers_due.pop_front();
        let barrier = Item::Barrier { checkpoint };
        let mut in_flight = Vec::new();
        for channel in &mut self.to_operators[p] {
            if self.config.mode == AlignmentMode::Unaligned {
                in_flight.push(channel.overtake(barrier.clone()));
            } else {
                channel.push(barrier.clone());
                in_flight.push(Vec::new());
            }
        }
        self.hold_outputs(p, &lengths, delivery, world.now_ms());
        let source = &self.sources[p];
        let snapshot = TaskSnapshot::Source {
            offset: source.offset,
            max_ts: source.max_ts,
            end_sent: source.end_sent,
            in_flight,
        };
        self.write_snapshot(world, checkpoint, &source_label(p as u32), &snapshot)
    }

    /// Writes and syncs a task's snapshot file, then acknowledges to the coordinator.
    fn write_snapshot<S: Storage>(
        &mut self,
        world: &mut World<S>,
        checkpoint: u64,
        task: &str,
        snapshot: &TaskSnapshot,
    ) -> Result<(), Interrupt> {
        let name = task_file(checkpoint, task);
        let bytes = serde_json::to_vec(snapshot).expect("a snapshot serializes");
        self.stats.in_flight_items += in_flight_items(snapshot);
        disk_step(world, "snapshot.write", &name, |disk| {
            disk.create(&name)?;
            disk.write(&name, 0, &bytes)
        })?;
        disk_step(world, "snapshot.fsync", &name, |disk| disk.fsync(&name))?;
        self.coord.files.entry(checkpoint).or_default().insert(name);
        self.coord.inbox.push_back(Ack {
            task: task.to_string(),
            checkpoint,
            bytes: bytes.len() as u64,
        });
        Ok(())
    }

    fn operator_take<S: Storage>(
        &mut self,
        world: &mut World<S>,
        op: usize,
        input: usize,
        label: &str,
    ) -> Result<(), Interrupt> {
        let item = self.to_operators[input][op]
            .head()
            .expect("enabled")
            .clone();
        let target = format!("{label} {}", item.describe());
        let now_ms = world.now_ms();
        // What the take does in memory comes first, so that the step knows whether it
        // delivers into the sink's channel; a crash at the step drops it all anyway.
        self.to_operators[input][op].pop();
        let length = self.to_sink[op].queue.len();
        let overtake_at = self.to_sink[op].overtake_position();
        let taken = match item {
            Item::Barrier { checkpoint } => self.operator_barrier(op, input, checkpoint, now_ms),
            item => {
                self.operator_item(op, input, item, now_ms);
                Taken::default()
            }
        };
        let from = if taken.overtook {
            Some(overtake_at)
        } else {
            (self.to_sink[op].queue.len() > length).then_some(length)
        };
        let sends = if from.is_some() {
            Sends::Channel
        } else {
            Sends::Nothing
        };
        let delivery = world.message("operator.take", target, sends)?;
        if let (Delivery::Delayed { delay_ms }, Some(from)) = (delivery, from) {
            self.to_sink[op].hold_from(from, now_ms + delay_ms);
        }
        let Some((checkpoint, snapshot, blocked_ms)) = taken.snapshot else {
            return Ok(());
        };
        self.stats.alignment_ms += blocked_ms;
        self.write_snapshot(world, checkpoint, &operator_label(op as u32), &snapshot)
    }

    /// An operator takes an event, a watermark or the end of an input.
    fn operator_item(&mut self, op: usize, input: usize, item: Item, now_ms: u64) {
        let ttl_ms = self.config.state_ttl_ms;
        let operator = &mut self.operators[op];
        operator.align.record(input, &item);
        if let Some(ttl_ms) = ttl_ms {
            operator.state.expire_idle(now_ms, ttl_ms);
        }
        let records = match item {
            Item::Event { key, ts, value, .. } => {
                let window_size = self.config.window_size;
                operator
                    .state
                    .on_event(&key, ts, value, window_size, now_ms, ttl_ms)
            }
            Item::Watermark { watermark } => operator.state.on_watermark(input, watermark),
            Item::End => {
                let records = operator.state.on_end(input);
                let ended = operator.state.flushed;
                self.emit(op, records);
                if ended {
                    self.to_sink[op].push(Item::End);
                }
                return;
            }
            Item::Barrier { .. } | Item::Record { .. } => {
                unreachable!("no record on a source channel")
            }
        };
        self.emit(op, records);
    }

    fn emit(&mut self, op: usize, records: Vec<JobRecord>) {
        let ttl = std::mem::take(&mut self.operators[op].state.ttl_counts);
        self.stats.ttl += ttl;
        for record in records {
            self.to_sink[op].push(Item::Record { record });
        }
    }

    /// An operator takes barrier `checkpoint` from `input`: what it put on the sink's
    /// channel, and the snapshot to write once the alignment ended.
    fn operator_barrier(&mut self, op: usize, input: usize, checkpoint: u64, now_ms: u64) -> Taken {
        let mode = self.config.mode;
        let inputs = self.sources.len();
        let mut taken = Taken::default();
        let Some(first) = self.operators[op].align.admit(checkpoint, now_ms) else {
            return taken;
        };
        if first && mode == AlignmentMode::Unaligned {
            let in_flight = self.to_sink[op].overtake(Item::Barrier { checkpoint });
            taken.overtook = true;
            let operator = &mut self.operators[op];
            operator.align.taken = Some(TaskSnapshot::Operator {
                state: operator.state.clone(),
                recorded: vec![Vec::new(); inputs],
                in_flight,
            });
        }
        let Some((blocked_ms, snapshot)) = self.operators[op].align.arrive(input, mode, now_ms)
        else {
            return taken;
        };
        let snapshot = match snapshot {
            Some(snapshot) => snapshot,
            None => {
                self.to_sink[op].push(Item::Barrier { checkpoint });
                TaskSnapshot::Operator {
                    state: self.operators[op].state.clone(),
                    recorded: vec![Vec::new(); inputs],
                    in_flight: Vec::new(),
                }
            }
        };
        taken.snapshot = Some((checkpoint, snapshot, blocked_ms));
        taken
    }

    fn sink_take<S: Storage>(
        &mut self,
        world: &mut World<S>,
        input: usize,
        label: &str,
    ) -> Result<(), Interrupt> {
        let item = self.to_sink[input].head().expect("enabled").clone();
        world.effect("sink.take", format!("{label} {}", item.describe()), |_| ())?;
        self.to_sink[input].pop();
        let now_ms = world.now_ms();
        match item {
            Item::Barrier { checkpoint } => self.sink_barrier(world, input, checkpoint, now_ms),
            Item::End => {
                self.sink.ended[input] = true;
                self.sink.align.record(input, &item);
                Ok(())
            }
            Item::Record { ref record } => {
                let record = record.clone();
                self.sink.align.record(input, &item);
                self.sink.conn.write(world, &record, &mut self.stats.sink)
            }
            Item::Event { .. } | Item::Watermark { .. } => {
                unreachable!("only records reach the sink")
            }
        }
    }

    fn sink_barrier<S: Storage>(
        &mut self,
        world: &mut World<S>,
        input: usize,
        checkpoint: u64,
        now_ms: u64,
    ) -> Result<(), Interrupt> {
        let mode = self.config.mode;
        let inputs = self.operators.len();
        let Some(first) = self.sink.align.admit(checkpoint, now_ms) else {
            return Ok(());
        };
        if first && mode == AlignmentMode::Unaligned {
            self.sink.conn.pre_commit(world, checkpoint)?;
            self.sink.align.taken = Some(TaskSnapshot::Sink {
                pending: self.sink.conn.pending.clone(),
                ended: self.sink.ended.clone(),
                recorded: vec![Vec::new(); inputs],
            });
        }
        let Some((blocked_ms, taken)) = self.sink.align.arrive(input, mode, now_ms) else {
            return Ok(());
        };
        self.stats.alignment_ms += blocked_ms;
        let snapshot = match taken {
            Some(taken) => taken,
            None => {
                self.sink.conn.pre_commit(world, checkpoint)?;
                TaskSnapshot::Sink {
                    pending: self.sink.conn.pending.clone(),
                    ended: self.sink.ended.clone(),
                    recorded: vec![Vec::new(); inputs],
                }
            }
        };
        self.write_snapshot(world, checkpoint, SINK_LABEL, &snapshot)
    }

    fn acknowledge<S: Storage>(&mut self, world: &mut World<S>) -> Result<(), Interrupt> {
        let ack = self.coord.inbox.front().expect("enabled").clone();
        let delivery = world.message(
            "coord.ack",
            format!("{} checkpoint {}", ack.task, ack.checkpoint),
            Sends::Message,
        )?;
        self.coord.inbox.pop_front();
        if delivery == Delivery::Lost {
            // Never arrives: the checkpoint cannot complete and is declined at its timeout.
            return Ok(());
        }
        let tasks = self.config.task_labels();
        let Some(pending) = self
            .coord
            .pending
            .as_mut()
            .filter(|p| p.checkpoint == ack.checkpoint)
        else {
            return Ok(()); // A declined checkpoint's acknowledgement.
        };
        pending.acked.insert(ack.task);
        pending.bytes += ack.bytes;
        if pending.acked.len() < tasks.len() {
            return Ok(());
        }
        let pending = self.coord.pending.clone().expect("pending");
        let checkpoint = pending.checkpoint;
        let metadata = Metadata {
            checkpoint,
            tasks: tasks.clone(),
            bytes: pending.bytes,
        };
        let bytes = serde_json::to_vec(&metadata).expect("metadata serializes");
        let tmp = meta_tmp_file(checkpoint);
        let meta = meta_file(checkpoint);
        disk_step(world, "meta.write", &tmp, |disk| {
            disk.create(&tmp)?;
            disk.write(&tmp, 0, &bytes)
        })?;
        disk_step(world, "meta.fsync", &tmp, |disk| disk.fsync(&tmp))?;
        disk_step(world, "meta.rename", &meta, |disk| disk.rename(&tmp, &meta))?;
        disk_step(world, "meta.fsync-dir", ".", |disk| disk.fsync_dir())?;
        self.coord.pending = None;
        self.coord.completed = Some(checkpoint);
        self.coord.backoff_until_ms = None;
        self.coord.files.entry(checkpoint).or_default().insert(meta);
        self.stats.checkpoints_completed += 1;
        self.stats.checkpoint_bytes_max = self.stats.checkpoint_bytes_max.max(pending.bytes);
        self.sink.notifications.push_back(checkpoint);
        // Older checkpoints are subsumed: remove their files (Flink keeps one).
        let older: Vec<u64> = self
            .coord
            .files
            .range(..checkpoint)
            .map(|(id, _)| *id)
            .collect();
        for id in older {
            let files = self.coord.files.remove(&id).expect("listed");
            for name in files {
                disk_step(world, "checkpoint.remove", &name, |disk| {
                    if disk.exists(&name) {
                        disk.remove(&name)
                    } else {
                        Ok(())
                    }
                })?;
            }
        }
        Ok(())
    }
}

/// Reads checkpoint `checkpoint`'s metadata and every task file it names: the snapshots by
/// task, or why they cannot be trusted.
fn read_checkpoint<S: Storage>(
    world: &mut World<S>,
    config: &JobConfig,
    checkpoint: u64,
) -> Result<Result<BTreeMap<String, TaskSnapshot>, String>, Interrupt> {
    let meta = meta_file(checkpoint);
    let bytes = world.effect("recover.read", meta.as_str(), |env| env.disk.read(&meta))?;
    let metadata: Metadata = match bytes
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(metadata) => metadata,
        Err(reason) => return Ok(Err(format!("{meta}: {reason}"))),
    };
    if metadata.checkpoint != checkpoint || metadata.tasks != config.task_labels() {
        return Ok(Err(format!("{meta}: not a checkpoint of this job")));
    }
    let mut tasks = BTreeMap::new();
    for task in &metadata.tasks {
        let name = task_file(checkpoint, task);
        let bytes = world.effect("recover.read", name.as_str(), |env| env.disk.read(&name))?;
        match bytes
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<TaskSnapshot>(&b).map_err(|e| e.to_string()))
        {
            Ok(snapshot) => {
                tasks.insert(task.clone(), snapshot);
            }
            Err(reason) => return Ok(Err(format!("{name}: {reason}"))),
        }
    }
    Ok(Ok(tasks))
}

fn task_index(label: &str, prefix: &str) -> usize {
    label
        .strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .expect("a task label the metadata checked")
}

fn in_flight_items(snapshot: &TaskSnapshot) -> u64 {
    let count = |items: &[Vec<Item>]| items.iter().map(|v| v.len() as u64).sum::<u64>();
    match snapshot {
        TaskSnapshot::Source { in_flight, .. } => count(in_flight),
        TaskSnapshot::Operator {
            recorded,
            in_flight,
            ..
        } => count(recorded) + in_flight.len() as u64,
        TaskSnapshot::Sink { recorded, .. } => count(recorded),
    }
}
