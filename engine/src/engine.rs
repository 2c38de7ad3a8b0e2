//! The engine: reads events, updates windows, writes records to the sink, checkpoints every
//! K events, and on start recovers from the newest checkpoint.
//!
//! One `Engine` value is one process incarnation. Its memory dies with it: after a crash the
//! runner drops it and starts a new one, which learns everything it knows from the disk.

use crate::chain_memo::ChainMemo;
use crate::checkpoint::Checkpoint;
use crate::checkpoint_memo::CheckpointMemo;
use crate::encode_memo::EncodeMemo;
use crate::event::{Event, JSON_SAFE_INT_MAX};
use crate::incremental::Incremental;
use crate::known_sink::KnownSinkFile;
use crate::protocol::{CheckpointProtocol, StateBackend};
use crate::record::Record;
use crate::sink::{SinkConnector, SinkError, SinkKind};
use crate::txsink::TxSink;
use crate::window::OperatorState;
use keel_sim::{Contents, Crash, Data, Storage, World};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

mod checkpointing;
mod recovery;

/// The engine's knobs. `validate` says which one is impossible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EngineConfig {
    /// Tumbling window size W, in event-time units.
    pub window_size: i64,
    /// Out-of-orderness D: watermark = max_ts - D.
    pub out_of_orderness: i64,
    /// A checkpoint after every K events.
    pub checkpoint_every: u64,
    pub sink: SinkKind,
    pub protocol: CheckpointProtocol,
    /// How records are keyed (what the idempotent sink deduplicates by).
    pub key: KeyScheme,
    /// Event i arrives at i * event_interval_ms of simulated time.
    pub event_interval_ms: u64,
    /// Allowed lateness L, in event-time units (None: unbounded, every fired window takes
    /// late updates forever). A window is purged once the watermark reaches end + L, and a
    /// later event for it is dropped (see `window.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_lateness: Option<i64>,
    /// Full checkpoints (the default) or incremental ones (`incremental.rs`).
    #[serde(
        default,
        skip_serializing_if = "StateBackend::is_full",
        alias = "checkpoint_mode"
    )]
    pub state_backend: StateBackend,
}

/// How a record's idempotency key is made.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum KeyScheme {
    /// The chapter's stable key: (event index, window end); a replay makes the same keys.
    #[default]
    EventIndex,
    /// (processing time, window end): a replay makes new keys and deduplication fails.
    ProcessingTime,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            window_size: 10,
            out_of_orderness: 5,
            checkpoint_every: 8,
            sink: SinkKind::Append,
            protocol: CheckpointProtocol::Safe,
            key: KeyScheme::EventIndex,
            event_interval_ms: 300,
            allowed_lateness: None,
            state_backend: StateBackend::Full,
        }
    }
}

impl EngineConfig {
    /// Checks every knob; the error names the option and the rule it breaks.
    pub fn validate(&self) -> Result<(), String> {
        if self.window_size <= 0 || self.window_size > JSON_SAFE_INT_MAX {
            return Err(format!(
                "--window must be between 1 and {JSON_SAFE_INT_MAX}, got {}",
                self.window_size
            ));
        }
        if self.out_of_orderness < 0 || self.out_of_orderness > JSON_SAFE_INT_MAX {
            return Err(format!(
                "--out-of-orderness must be between 0 and {JSON_SAFE_INT_MAX}, got {}",
                self.out_of_orderness
            ));
        }
        if let Some(lateness) = self
            .allowed_lateness
            .filter(|l| !(0..=JSON_SAFE_INT_MAX).contains(l))
        {
            return Err(format!(
                "--allowed-lateness must be between 0 and {JSON_SAFE_INT_MAX}, got {lateness}"
            ));
        }
        if self.checkpoint_every == 0 {
            return Err("--checkpoint-every must be at least 1, got 0".to_string());
        }
        if !self.protocol.supports(self.state_backend) {
            return Err(match self.state_backend {
                StateBackend::Full => format!(
                    "--checkpoint-protocol {} is a variant of the incremental protocol: add --state-backend incremental",
                    self.protocol
                ),
                StateBackend::Incremental => format!(
                    "--checkpoint-protocol {} rewrites one state.json and has no incremental form: use --state-backend full",
                    self.protocol
                ),
            });
        }
        Ok(())
    }

    /// When event `index` arrives, in simulated milliseconds.
    pub fn arrival_ms(&self, index: u64) -> u64 {
        index.saturating_mul(self.event_interval_ms)
    }
}

/// The step target of the read of event `index` ("event 14").
pub fn read_target(index: u64) -> String {
    format!("event {index}")
}

/// The step target of the read that finds the end of the input.
pub const END_OF_INPUT: &str = "end-of-input";

/// The engine cannot go on: a fault the engine does not survive (not a crash of keel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineError {
    pub message: String,
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why an incarnation stopped before the end of its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// The process was killed; the runner restarts it.
    Crash(Crash),
    /// The engine stopped itself on an error it must not paper over (an fsync that failed,
    /// a sink that stayed down): like PostgreSQL after a failed fsync, it exits and a
    /// restart recovers from the last checkpoint.
    Abort(EngineError),
    /// Recovery cannot go on (a trusted checkpoint that does not decode): restarting would
    /// fail the same way.
    Failed(EngineError),
}

impl From<SinkError> for Interrupt {
    fn from(error: SinkError) -> Self {
        match error {
            SinkError::Crash(crash) => Interrupt::Crash(crash),
            SinkError::Fatal(message) => Interrupt::Abort(EngineError { message }),
        }
    }
}

impl From<Crash> for Interrupt {
    fn from(crash: Crash) -> Self {
        Interrupt::Crash(crash)
    }
}

/// What one incarnation did, readable by the runner even after it crashed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IncarnationStats {
    /// The checkpoint recovery restored, if any. Shared (`Arc`): stats are copied with every
    /// fork of a run, and a checkpoint holds every window.
    pub restored: Option<Arc<Checkpoint>>,
    /// The first event this incarnation reads.
    pub resume_from_index: u64,
    /// Records that reached the sink.
    pub written: u64,
    /// Records the idempotent sink skipped as already present, even if the ack was lost.
    pub skipped: u64,
    /// Checkpoint files recovery found damaged and skipped, with the reason.
    pub rejected_checkpoints: Vec<String>,
    /// Whether recovery chose where to resume (false if the process died before it did).
    pub resume_decided: bool,
    /// The newest checkpoint this incarnation committed.
    pub last_committed: Option<Arc<Checkpoint>>,
    /// Events consumed so far (the next index to read).
    pub processed_upto_index: u64,
}

/// The engine's end of its sink.
#[derive(Clone, Debug)]
enum Sink {
    /// Append or idempotent: a file on the simulated disk.
    File(SinkConnector),
    /// Two-phase commit on the transactional log.
    Log(TxSink),
}

/// One process incarnation of the engine.
#[derive(Clone, Debug)]
pub struct Engine {
    config: EngineConfig,
    state: OperatorState,
    sink: Option<Sink>,
    /// Indexes of the numbered checkpoint files this process knows to exist.
    checkpoint_files: BTreeSet<u64>,
    /// The last record handed to the sink (what a zombie retries).
    last_record: Option<Record>,
    /// Incremental checkpoints: changed windows, the committed chain, the files (empty in
    /// full mode).
    incremental: Incremental,
    stats: IncarnationStats,
    /// What the harness handed it to spare work done before: caches, not state.
    caches: EngineCaches,
}

/// What a harness hands the engine to spare it work it has seen done. Caches, not state:
/// what the engine does, reads and writes is the same with them or without them (a sweep
/// checks this against `--naive`, whose runs have none), and a process hands them on to
/// the next one (`Engine::caches`).
#[derive(Clone, Debug, Default)]
pub struct EngineCaches {
    /// A sink file the sink connector builds on (`known_sink.rs`).
    pub sink: Option<Arc<KnownSinkFile>>,
    /// Restores of incremental chains (`chain_memo.rs`).
    pub chains: Option<Arc<ChainMemo>>,
    /// Full checkpoint files decoded (`checkpoint_memo.rs`).
    pub checkpoints: Option<Arc<CheckpointMemo>>,
    /// Checkpoint files of every window encoded (`encode_memo.rs`).
    pub encoded: Option<Arc<EncodeMemo>>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        config.validate().expect("the runner validates the config");
        Engine {
            config,
            state: OperatorState::default(),
            sink: None,
            checkpoint_files: BTreeSet::new(),
            last_record: None,
            incremental: Incremental::default(),
            stats: IncarnationStats::default(),
            caches: EngineCaches::default(),
        }
    }

    /// This engine with `caches` ([`EngineCaches`]).
    pub fn with_caches(mut self, caches: EngineCaches) -> Engine {
        self.caches = caches;
        self
    }

    /// Its caches, to hand on to the next process.
    pub fn caches(&self) -> &EngineCaches {
        &self.caches
    }

    /// Takes `caches` from now on. An open sink connector builds on the known sink file if
    /// what it has read of its file (`sink_file`, the file now) is whole lines of it.
    pub fn share_caches(&mut self, caches: &EngineCaches, sink_file: Option<&Contents>) {
        if let (Some(Sink::File(connector)), Some(known), Some(file)) =
            (self.sink.as_mut(), &caches.sink, sink_file)
        {
            connector.share_known(known, file);
        }
        self.caches = caches.clone();
    }

    pub fn stats(&self) -> &IncarnationStats {
        &self.stats
    }

    pub fn state(&self) -> &OperatorState {
        &self.state
    }

    /// Processes the input from where recovery left off to the end, flushing at the end and
    /// making the sink durable: [`Engine::resume_index`], [`Engine::process`] for each event
    /// from there, then [`Engine::finish`].
    pub fn run<S: Storage>(
        &mut self,
        world: &mut World<S>,
        events: &[Event],
    ) -> Result<(), Interrupt> {
        let start = self.resume_index(events)?;
        for index in start..events.len() as u64 {
            self.process(world, events, index)?;
        }
        self.finish(world, events)
    }

    /// The first event this incarnation reads (where recovery left off), if the input has it.
    pub fn resume_index(&self, events: &[Event]) -> Result<u64, Interrupt> {
        let start = self.stats.resume_from_index;
        if start > events.len() as u64 {
            return Err(Interrupt::Failed(EngineError {
                message: format!(
                    "checkpoint resumes from event {start} but the input has {} events",
                    events.len()
                ),
            }));
        }
        Ok(start)
    }

    /// Reads event `index` when it arrives, emits its records and checkpoints if it is due.
    /// Between two events everything the engine holds is in `self` (what a fork copies).
    pub fn process<S: Storage>(
        &mut self,
        world: &mut World<S>,
        events: &[Event],
        index: u64,
    ) -> Result<(), Interrupt> {
        assert!(index < events.len() as u64, "an event of the input");
        assert_eq!(index, self.stats.processed_upto_index, "events in order");
        world.sleep_until(self.config.arrival_ms(index))?;
        world.effect("source.read", read_target(index), |_| ())?;
        let event = events[index as usize];
        let key_prefix = self.key_prefix(world, &index.to_string());
        let changed = match self.config.state_backend {
            StateBackend::Full => None,
            StateBackend::Incremental => Some(&mut self.incremental.dirty),
        };
        let records = self.state.on_event_noting(
            &key_prefix,
            event,
            self.config.window_size,
            self.config.out_of_orderness,
            self.config.allowed_lateness,
            changed,
        );
        for record in &records {
            self.write(world, record)?;
        }
        self.stats.processed_upto_index = index + 1;
        if (index + 1) % self.config.checkpoint_every == 0 {
            self.checkpoint(world, index + 1, false)?;
        }
        Ok(())
    }

    /// The end of the input: flush every window and make the sink durable.
    pub fn finish<S: Storage>(
        &mut self,
        world: &mut World<S>,
        events: &[Event],
    ) -> Result<(), Interrupt> {
        world.effect("source.read", END_OF_INPUT, |_| ())?;
        let key_prefix = self.key_prefix(world, "flush");
        let flushed = self.state.flush(&key_prefix, self.config.out_of_orderness);
        if self.config.state_backend == StateBackend::Incremental {
            self.incremental
                .dirty
                .extend(flushed.iter().map(|r| r.window_end));
        }
        for record in &flushed {
            self.write(world, record)?;
        }
        match self
            .sink
            .as_mut()
            .expect("recover opens the sink before run")
        {
            Sink::File(file) => file.sync(world)?,
            // A final checkpoint commits the last transaction.
            Sink::Log(_) => self.checkpoint(world, events.len() as u64, true)?,
        }
        Ok(())
    }

    /// Whether this process, between two events, would go on exactly as `other` does given
    /// the same world: the same knobs, operator state, sink connector (a file sink's, as
    /// [`SinkConnector::same_future_as`] compares it: the world's sink file decides the rest;
    /// the log sink's connector is never compared: false), known checkpoint files, incremental
    /// chain (changed windows, committed chain, known chain files: what the next delta,
    /// compaction and removals depend on) and last record (what a zombie would retry). What it did so far (`stats`) is not compared: it
    /// only counts and reports, nothing reads it to decide.
    pub fn same_future_as(&self, other: &Engine) -> bool {
        let file_sinks_equal = match (&self.sink, &other.sink) {
            (Some(Sink::File(a)), Some(Sink::File(b))) => a.same_future_as(b),
            _ => false,
        };
        file_sinks_equal
            && self.config == other.config
            && self.state == other.state
            && self.checkpoint_files == other.checkpoint_files
            && self.incremental == other.incremental
            && self.last_record == other.last_record
    }

    /// The prefix of the keys of the records emitted now: the stable one (event index, or
    /// "flush"), or the processing time, which a replay does not reproduce.
    /// The processing time is read at microsecond resolution and written as milliseconds
    /// ("pt3900.000"), so two emissions never share it, not even in a replay that reads its
    /// backlog within one simulated millisecond.
    fn key_prefix<S: Storage>(&self, world: &mut World<S>, stable: &str) -> String {
        match self.config.key {
            KeyScheme::EventIndex => stable.to_string(),
            KeyScheme::ProcessingTime => {
                let timestamp_us = world.timestamp_us();
                format!("pt{}.{:03}", timestamp_us / 1000, timestamp_us % 1000)
            }
        }
    }

    /// Makes a file sink's writes durable (the log sink's pre-commit is a no-op).
    fn sync_file_sink<S: Storage>(&mut self, world: &mut World<S>) -> Result<(), Interrupt> {
        if let Some(Sink::File(file)) = self.sink.as_mut() {
            file.sync(world)?;
        }
        Ok(())
    }

    /// A process that was cut off and replaced wakes up: it retries its last write and,
    /// on the transactional sink, tries to commit its transaction, all with its old identity.
    pub fn wake_as_zombie<S: Storage>(&mut self, world: &mut World<S>) -> Result<(), Interrupt> {
        let Some(record) = self.last_record.clone() else {
            return Ok(());
        };
        let written = self.write(world, &record);
        world.note(format!(
            "zombie: retry of {}: {}",
            record.key,
            describe(&written)
        ));
        if let Err(Interrupt::Crash(crash)) = written {
            return Err(Interrupt::Crash(crash));
        }
        if let Some(Sink::Log(log)) = self.sink.as_mut() {
            let committed = log.commit(world, 0, false).map_err(Interrupt::from);
            world.note(format!("zombie: commit: {}", describe(&committed)));
            committed?;
        }
        written
    }

    fn write<S: Storage>(
        &mut self,
        world: &mut World<S>,
        record: &Record,
    ) -> Result<(), Interrupt> {
        self.last_record = Some(record.clone());
        match self
            .sink
            .as_mut()
            .expect("recover opens the sink before run")
        {
            Sink::File(file) => {
                let stats = &mut self.stats;
                file.write(world, record, &mut stats.written, &mut stats.skipped)?;
            }
            Sink::Log(log) => log.write(world, record, &mut self.stats.written)?,
        }
        Ok(())
    }
}

/// The file the `in-place` protocol rewrites.
pub const IN_PLACE_FILE: &str = "state.json";

/// One disk operation as one step; an I/O error aborts the incarnation.
pub(crate) fn disk_step<S: Storage>(
    world: &mut World<S>,
    op: &'static str,
    target: &str,
    operation: impl FnOnce(&mut S) -> Result<(), keel_sim::DiskError>,
) -> Result<(), Interrupt> {
    world
        .effect(op, target, |env| operation(&mut env.disk))?
        .map_err(|e| abort(format!("{op} {target}: {e}")))
}

/// A write of the file `name` as one step, its line showing the file's running digest after
/// it (`World::effect_data`); an I/O error aborts the incarnation.
fn disk_write_step<S: Storage>(
    world: &mut World<S>,
    name: &str,
    operation: impl FnOnce(&mut S) -> Result<(), keel_sim::DiskError>,
) -> Result<(), Interrupt> {
    world
        .effect_data("disk.write", name, Data::File(name), |env| {
            operation(&mut env.disk)
        })?
        .map_err(|e| abort(format!("disk.write {name}: {e}")))
}

fn describe(result: &Result<(), Interrupt>) -> String {
    match result {
        Ok(()) => "accepted".to_string(),
        Err(Interrupt::Crash(crash)) => format!("{crash}"),
        Err(Interrupt::Abort(e) | Interrupt::Failed(e)) => format!("rejected ({e})"),
    }
}

fn abort(message: String) -> Interrupt {
    Interrupt::Abort(EngineError { message })
}
