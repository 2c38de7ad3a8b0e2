//! The engine: reads events, updates windows, writes records to the sink, checkpoints every
//! K events, and on start recovers from the newest checkpoint.
//!
//! One `Engine` value is one process incarnation. Its memory dies with it: after a crash the
//! runner drops it and starts a new one, which learns everything it knows from the disk.

use crate::checkpoint::Checkpoint;
use crate::event::{Event, JSON_SAFE_INT_MAX};
use crate::sink::{SinkConnector, SinkKind, WriteOutcome};
use crate::window::OperatorState;
use keel_sim::{Crash, World};
use std::fmt;

/// The engine's knobs. `validate` says which one is impossible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Tumbling window size W, in event-time units.
    pub window_size: i64,
    /// Out-of-orderness D: watermark = max_ts - D.
    pub out_of_orderness: i64,
    /// A checkpoint after every K events.
    pub checkpoint_every: u64,
    pub sink: SinkKind,
    /// Event i arrives at i * event_interval_ms of simulated time.
    pub event_interval_ms: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            window_size: 10,
            out_of_orderness: 5,
            checkpoint_every: 8,
            sink: SinkKind::Append,
            event_interval_ms: 300,
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
        if self.checkpoint_every == 0 {
            return Err("--checkpoint-every must be at least 1, got 0".to_string());
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
    /// The engine gave up (e.g. a checkpoint it cannot read).
    Failed(EngineError),
}

impl From<Crash> for Interrupt {
    fn from(crash: Crash) -> Self {
        Interrupt::Crash(crash)
    }
}

/// What one incarnation did, readable by the runner even after it crashed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncarnationStats {
    /// The checkpoint recovery restored, if any.
    pub restored: Option<Checkpoint>,
    /// The first event this incarnation reads.
    pub resume_from_index: u64,
    /// Records that reached the sink.
    pub written: u64,
    /// Records the idempotent sink skipped as already present.
    pub skipped: u64,
    /// The newest checkpoint this incarnation committed.
    pub last_committed: Option<Checkpoint>,
    /// Events consumed so far (the next index to read).
    pub processed_upto_index: u64,
}

/// One process incarnation of the engine.
#[derive(Clone, Debug)]
pub struct Engine {
    config: EngineConfig,
    state: OperatorState,
    sink: Option<SinkConnector>,
    stats: IncarnationStats,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        config.validate().expect("the runner validates the config");
        Engine {
            config,
            state: OperatorState::default(),
            sink: None,
            stats: IncarnationStats::default(),
        }
    }

    pub fn stats(&self) -> &IncarnationStats {
        &self.stats
    }

    pub fn state(&self) -> &OperatorState {
        &self.state
    }

    /// Start-up: restore the newest checkpoint (or start empty) and open the sink.
    pub fn recover(&mut self, world: &mut World) -> Result<(), Interrupt> {
        let names = world.effect("disk.list", ".", |env| env.disk.list())?;
        let newest = names
            .iter()
            .filter_map(|name| Checkpoint::index_from_file_name(name).map(|i| (i, name)))
            .max();
        match newest {
            None => world.note("recovery: no checkpoint, start from event 0 with empty state"),
            Some((index, name)) => {
                let bytes = world
                    .effect("disk.read", name.clone(), |env| env.disk.read(name))?
                    .map_err(|e| failed(format!("recovery: {e}")))?;
                let checkpoint = Checkpoint::decode(&bytes)
                    .map_err(|e| failed(format!("recovery: {name}: {e}")))?;
                if checkpoint.index != index {
                    return Err(failed(format!(
                        "recovery: {name} holds index {}",
                        checkpoint.index
                    )));
                }
                world.note(format!(
                    "recovery: restore {name}, resume from event {index}"
                ));
                self.state = checkpoint.state.clone();
                self.stats.resume_from_index = index;
                self.stats.processed_upto_index = index;
                self.stats.restored = Some(checkpoint);
            }
        }
        self.sink = Some(SinkConnector::open(self.config.sink, world)?);
        Ok(())
    }

    /// Processes the input from where recovery left off to the end, flushing at the end.
    pub fn run(&mut self, world: &mut World, events: &[Event]) -> Result<(), Interrupt> {
        let start = self.stats.resume_from_index;
        if start > events.len() as u64 {
            return Err(failed(format!(
                "checkpoint resumes from event {start} but the input has {} events",
                events.len()
            )));
        }
        for index in start..events.len() as u64 {
            world.sleep_until(self.config.arrival_ms(index))?;
            world.effect("source.read", read_target(index), |_| ())?;
            let event = events[index as usize];
            let records = self.state.on_event(
                index as usize,
                event,
                self.config.window_size,
                self.config.out_of_orderness,
            );
            for record in &records {
                self.write(world, record)?;
            }
            self.stats.processed_upto_index = index + 1;
            if (index + 1) % self.config.checkpoint_every == 0 {
                self.checkpoint(world, index + 1)?;
            }
        }
        world.effect("source.read", END_OF_INPUT, |_| ())?;
        for record in &self.state.flush(self.config.out_of_orderness) {
            self.write(world, record)?;
        }
        Ok(())
    }

    fn write(&mut self, world: &mut World, record: &crate::record::Record) -> Result<(), Crash> {
        let sink = self
            .sink
            .as_mut()
            .expect("recover opens the sink before run");
        if sink.write(world, record, &mut self.stats.written)? == WriteOutcome::Skipped {
            self.stats.skipped += 1;
        }
        Ok(())
    }

    /// Writes `state-<index>.json` through a temp file, fsync, rename and fsync of the directory.
    fn checkpoint(&mut self, world: &mut World, index: u64) -> Result<(), Interrupt> {
        let checkpoint = Checkpoint {
            index,
            state: self.state.clone(),
        };
        let name = Checkpoint::file_name(index);
        let temp = format!("{name}.tmp");
        let bytes = checkpoint.encode();
        world.effect("disk.create", temp.clone(), |env| env.disk.create(&temp))?;
        world
            .effect("disk.write", temp.clone(), |env| {
                env.disk.write(&temp, 0, &bytes)
            })?
            .map_err(disk_failed)?;
        world
            .effect("disk.fsync", temp.clone(), |env| env.disk.fsync(&temp))?
            .map_err(disk_failed)?;
        world
            .effect("disk.rename", format!("{temp} -> {name}"), |env| {
                env.disk.rename(&temp, &name)
            })?
            .map_err(disk_failed)?;
        world.effect("disk.fsync-dir", ".", |env| env.disk.fsync_dir())?;
        self.stats.last_committed = Some(checkpoint);
        Ok(())
    }
}

fn failed(message: String) -> Interrupt {
    Interrupt::Failed(EngineError { message })
}

fn disk_failed(error: keel_sim::DiskError) -> Interrupt {
    failed(format!("checkpoint: {error}"))
}
