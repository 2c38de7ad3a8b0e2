//! `ScenarioSpec`: everything that, with a sink and a plan, determines a run. Serializable,
//! so shard files can carry it and `keel merge` can rebuild (and shrink) what a shard ran.

use crate::error::KeelError;
use crate::runner::RunSpec;
use keel_engine::{CheckpointProtocol, EngineConfig, Event, KeyScheme, SinkKind, StateBackend};
use keel_sim::disk::{FsModel, SECTOR_SIZE_MAX_BYTES};
use keel_sim::FaultPlan;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The longest simulated duration an option may ask for: keeps every clock sum far from
/// u64 overflow, whatever the input length and the number of restarts.
pub const TIME_MS_MAX: u64 = 1_000_000_000;

/// The input and every engine and world knob, as the command line gave them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioSpec {
    /// A shipped scenario's name (when `events` is not set).
    pub scenario: Option<String>,
    /// A path to an events file.
    pub events: Option<String>,
    pub window: i64,
    pub out_of_orderness: i64,
    pub checkpoint_every: u64,
    pub event_interval_ms: u64,
    pub restart_delay_ms: u64,
    pub protocol: CheckpointProtocol,
    pub key: KeyScheme,
    pub transaction_timeout_ms: u64,
    pub seed: u64,
    pub sector_size_bytes: usize,
    /// Allowed lateness L in event-time units; None is unbounded (absent from files that
    /// predate it, and from those that keep the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_lateness: Option<i64>,
    /// The file-system profile of the crash model (absent from files that predate it, and
    /// from those that keep the default, posix).
    #[serde(default, skip_serializing_if = "FsModel::is_posix")]
    pub fs_model: FsModel,
    /// Full or incremental checkpoints (absent from files that predate it, and from those
    /// that keep the default, full).
    #[serde(
        default,
        skip_serializing_if = "StateBackend::is_full",
        alias = "checkpoint_mode"
    )]
    pub state_backend: StateBackend,
    /// The digest of the events as loaded (`catalogue::events_digest`: `events` and
    /// `scenario` name them only by path or name), filled in when they are
    /// (`commands::files::prepare_spec`). A plan file or a shard header that records it is
    /// refused against events that differ (the file changed since). Absent from files that
    /// predate it, and from specs whose events were never loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_digest: Option<String>,
}

impl ScenarioSpec {
    /// ch04 with the chapter's knobs, the safe protocol on posix, and `seed` (unit tests).
    #[cfg(test)]
    pub(crate) fn ch04(seed: u64) -> ScenarioSpec {
        use crate::runner::{SECTOR_SIZE_BYTES_DEFAULT, TRANSACTION_TIMEOUT_MS_DEFAULT};
        ScenarioSpec {
            scenario: Some("ch04".to_string()),
            events: None,
            window: 10,
            out_of_orderness: 5,
            checkpoint_every: 8,
            event_interval_ms: 300,
            restart_delay_ms: 500,
            protocol: CheckpointProtocol::Safe,
            key: KeyScheme::EventIndex,
            transaction_timeout_ms: TRANSACTION_TIMEOUT_MS_DEFAULT,
            seed,
            sector_size_bytes: SECTOR_SIZE_BYTES_DEFAULT,
            allowed_lateness: None,
            fs_model: FsModel::Posix,
            state_backend: StateBackend::Full,
            events_digest: None,
        }
    }

    /// The name a report shows: the scenario's, or the events file's path.
    pub fn label(&self) -> String {
        match (&self.events, &self.scenario) {
            (Some(path), _) => path.clone(),
            (None, Some(name)) => name.clone(),
            (None, None) => "ch04".to_string(),
        }
    }

    pub fn config(&self, sink: SinkKind) -> Result<EngineConfig, KeelError> {
        for (option, value_ms) in [
            ("--event-interval-ms", self.event_interval_ms),
            ("--restart-delay-ms", self.restart_delay_ms),
            ("--transaction-timeout-ms", self.transaction_timeout_ms),
        ] {
            if value_ms > TIME_MS_MAX {
                return Err(KeelError::usage(format!(
                    "{option} must be at most {TIME_MS_MAX} (about 11 days of simulated time), got {value_ms}"
                )));
            }
        }
        // Checked here, not only by the option's parser: a plan file or a shard header
        // carries a spec too, and the disk asserts its sector size.
        if !(1..=SECTOR_SIZE_MAX_BYTES).contains(&self.sector_size_bytes) {
            return Err(KeelError::usage(format!(
                "--sector-size-bytes must be between 1 and {SECTOR_SIZE_MAX_BYTES}, got {}",
                self.sector_size_bytes
            )));
        }
        let config = EngineConfig {
            window_size: self.window,
            out_of_orderness: self.out_of_orderness,
            checkpoint_every: self.checkpoint_every,
            sink,
            protocol: self.protocol,
            key: self.key,
            event_interval_ms: self.event_interval_ms,
            allowed_lateness: self.allowed_lateness,
            state_backend: self.state_backend,
        };
        config.validate().map_err(KeelError::usage)?;
        Ok(config)
    }

    pub fn run_spec(
        &self,
        events: &[Event],
        sink: SinkKind,
        plan: FaultPlan,
    ) -> Result<RunSpec, KeelError> {
        self.run_spec_on(events.into(), sink, plan)
    }

    /// [`ScenarioSpec::run_spec`] on events shared with other runs' specs.
    pub fn run_spec_on(
        &self,
        events: Arc<[Event]>,
        sink: SinkKind,
        plan: FaultPlan,
    ) -> Result<RunSpec, KeelError> {
        let config = self.config(sink)?;
        if sink.is_transactional() {
            check_transactional_ids(events.len() as u64, config.checkpoint_every)?;
        }
        Ok(RunSpec {
            events,
            config,
            plan,
            seed: self.seed,
            restart_delay_ms: self.restart_delay_ms,
            sector_size_bytes: self.sector_size_bytes,
            transaction_timeout_ms: self.transaction_timeout_ms,
            fs_model: self.fs_model,
        })
    }

    /// `keel <command>` with this spec's options but `seed`.
    pub fn command_with_seed(&self, command: &str, seed: u64) -> String {
        ScenarioSpec {
            seed,
            ..self.clone()
        }
        .command(command)
    }

    /// `keel <command>` with this spec's options, as a user would type it.
    pub fn command(&self, command: &str) -> String {
        let mut parts = vec![format!("keel {command}")];
        parts.extend(self.command_args());
        parts.join(" ")
    }

    /// This spec's options as a command's arguments: its stream (`--scenario` or
    /// `--events`), every knob, the seed.
    pub fn command_args(&self) -> Vec<String> {
        let mut parts: Vec<String> = Vec::new();
        match &self.events {
            Some(path) => parts.extend(["--events".to_string(), path.clone()]),
            None => parts.extend(["--scenario".to_string(), self.label()]),
        }
        let mut option = |name: &str, value: String| {
            parts.push(format!("--{name}"));
            parts.push(value);
        };
        option("window", self.window.to_string());
        option("out-of-orderness", self.out_of_orderness.to_string());
        option("checkpoint-every", self.checkpoint_every.to_string());
        if let Some(lateness) = self.allowed_lateness {
            option("allowed-lateness", lateness.to_string());
        }
        option("event-interval-ms", self.event_interval_ms.to_string());
        option("restart-delay-ms", self.restart_delay_ms.to_string());
        option("checkpoint-protocol", self.protocol.to_string());
        if !self.state_backend.is_full() {
            option("state-backend", self.state_backend.to_string());
        }
        if self.key == KeyScheme::ProcessingTime {
            option("key", "processing-time".to_string());
        }
        if self.transaction_timeout_ms != crate::runner::TRANSACTION_TIMEOUT_MS_DEFAULT {
            option(
                "transaction-timeout-ms",
                self.transaction_timeout_ms.to_string(),
            );
        }
        if self.sector_size_bytes != crate::runner::SECTOR_SIZE_BYTES_DEFAULT {
            option("sector-size-bytes", self.sector_size_bytes.to_string());
        }
        if !self.fs_model.is_posix() {
            option("fs-model", self.fs_model.to_string());
        }
        option("seed", self.seed.to_string());
        parts
    }
}

/// The transactional sink registers one transactional id a checkpoint (`keel-txn-<index>`,
/// the event index it follows: 0, K, 2K, ... up to the stream's length; a recovery registers
/// one of these again), and the log registers at most
/// [`keel_sim::txlog::TRANSACTIONAL_IDS_MAX`]: a longer stream is refused here, not by the
/// log's assertion in the middle of a run.
fn check_transactional_ids(events: u64, checkpoint_every: u64) -> Result<(), KeelError> {
    let max = keel_sim::txlog::TRANSACTIONAL_IDS_MAX as u64;
    let ids = events / checkpoint_every.max(1) + 1;
    if ids <= max {
        return Ok(());
    }
    let every_min = events / max + 1;
    Err(KeelError::usage(format!(
        "the transactional sink registers a transactional id a checkpoint and its log holds at most {max}: {events} events with a checkpoint every {checkpoint_every} need {ids}; use --checkpoint-every {every_min} or more"
    )))
}
