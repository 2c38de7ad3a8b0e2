//! Sink connectors: append (at-least-once) and idempotent (deduplicates by the record's key).
//!
//! Both write one JSON line per record to `sink-<kind>.jsonl` on the simulated disk. The
//! idempotent connector rebuilds the set of keys already in the sink when it opens, so a
//! replayed record whose key is already there is skipped, not written again.

use crate::record::Record;
use keel_sim::{Crash, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Which sink the engine writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SinkKind {
    /// Non-idempotent: every record is appended, replays included.
    Append,
    /// Skips a record whose key is already in the sink.
    Idempotent,
}

impl SinkKind {
    pub const ALL: [SinkKind; 2] = [SinkKind::Append, SinkKind::Idempotent];

    pub fn name(&self) -> &'static str {
        match self {
            SinkKind::Append => "append",
            SinkKind::Idempotent => "idempotent",
        }
    }

    /// The sink's file on the simulated disk.
    pub fn file_name(&self) -> String {
        format!("sink-{}.jsonl", self.name())
    }
}

impl fmt::Display for SinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happened to one record handed to the sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    /// The idempotent sink already had this key.
    Skipped,
}

/// The engine's end of a sink: the process memory part, lost on a crash.
#[derive(Clone, Debug)]
pub struct SinkConnector {
    kind: SinkKind,
    file: String,
    /// Keys known to be in the sink (idempotent sink only).
    seen_keys: BTreeSet<String>,
}

impl SinkConnector {
    /// Opens the sink (one step), creating its file if needed. The idempotent connector reads
    /// the keys already written; a line that is not a record carries no key and is noted.
    pub fn open(kind: SinkKind, world: &mut World) -> Result<SinkConnector, Crash> {
        let file = kind.file_name();
        let contents = world.effect("sink.open", file.clone(), |env| {
            env.disk.open_or_create(&file);
            match kind {
                SinkKind::Append => Vec::new(),
                SinkKind::Idempotent => {
                    env.disk.read(&file).expect("the sink file was just opened")
                }
            }
        })?;
        let mut seen_keys = BTreeSet::new();
        let mut unreadable_lines = 0_u64;
        for line in String::from_utf8_lossy(&contents).lines() {
            match Record::parse_line(line) {
                Some(record) => {
                    seen_keys.insert(record.key);
                }
                None => unreadable_lines += 1,
            }
        }
        if kind == SinkKind::Idempotent {
            world.note(format!(
                "sink {file}: {} keys already present, {unreadable_lines} unreadable lines",
                seen_keys.len()
            ));
        }
        Ok(SinkConnector {
            kind,
            file,
            seen_keys,
        })
    }

    /// Writes one record (one step), or skips it if the idempotent sink already has its key.
    /// `written` counts the records that reached the sink, even if the process then dies.
    pub fn write(
        &mut self,
        world: &mut World,
        record: &Record,
        written: &mut u64,
    ) -> Result<WriteOutcome, Crash> {
        if self.kind == SinkKind::Idempotent && self.seen_keys.contains(&record.key) {
            world.note(format!(
                "sink {}: skip duplicate key {}",
                self.file, record.key
            ));
            return Ok(WriteOutcome::Skipped);
        }
        let mut line = record.to_json_line();
        line.push('\n');
        let file = &self.file;
        world.effect("sink.write", record.key.clone(), |env| {
            env.disk
                .append(file, line.as_bytes())
                .expect("the sink file exists once opened");
            *written += 1;
        })?;
        if self.kind == SinkKind::Idempotent {
            self.seen_keys.insert(record.key.clone());
        }
        Ok(WriteOutcome::Written)
    }
}
