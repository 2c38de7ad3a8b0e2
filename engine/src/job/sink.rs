//! A parallel job's sink connectors on the simulated disk: append, idempotent, two-phase commit.
//!
//! - `append`: every record is appended to `sink.jsonl` as it arrives; a checkpoint syncs
//!   the file. A replay appends again: at-least-once. On open after a restart the file is
//!   cut after its last whole record (tail repair), and the cut synced: a power loss may
//!   leave a torn last line (or zeros) past what the last checkpoint synced, and a record
//!   appended after it would be swallowed. Every record past the cut comes again with the
//!   replay from the checkpoint, which synced everything before it.
//! - `idempotent`: as `append`, but a record whose identity (key, window end, seq) the
//!   file already holds is skipped; the connector learns the file's identities when it
//!   opens (after the same tail repair). Exactly-once where the identity is stable.
//! - `transactional` (two-phase commit on a file system): the records of checkpoint n's
//!   epoch are buffered; at barrier n they are written to `txn-NNNNNN.jsonl` and synced
//!   (pre-commit); when the coordinator says n completed they are renamed to
//!   `part-NNNNNN.jsonl` and the directory synced (commit). What a consumer sees is the
//!   committed parts in order. On recovery from n the connector commits every transaction
//!   n's snapshot lists as pending (re-commit: a part already there is left alone) and
//!   aborts (removes) every other transaction file.

use crate::engine::{disk_step, EngineError, Interrupt};
use crate::job::keyed::JobRecord;
use crate::job::snapshot::checkpoint_of;
use keel_sim::{Storage, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

pub const SINK_FILE: &str = "sink.jsonl";

/// How many bytes at the start of a sink file are whole records: every line up to the first
/// that is not a record or has no newline (a torn append, zeros a power loss left).
pub fn whole_records_len_bytes(bytes: &[u8]) -> usize {
    let mut len_bytes = 0;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let Some(text) = line.strip_suffix(b"\n") else {
            break;
        };
        let record = std::str::from_utf8(text)
            .ok()
            .and_then(JobRecord::parse_line);
        if record.is_none() {
            break;
        }
        len_bytes += line.len();
    }
    len_bytes
}

pub fn txn_file(checkpoint: u64) -> String {
    format!("txn-{checkpoint:06}.jsonl")
}

pub fn part_file(checkpoint: u64) -> String {
    format!("part-{checkpoint:06}.jsonl")
}

/// Which sink a parallel job writes to.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum JobSinkKind {
    Append,
    Idempotent,
    #[default]
    Transactional,
}

impl JobSinkKind {
    pub const ALL: [JobSinkKind; 3] = [
        JobSinkKind::Append,
        JobSinkKind::Idempotent,
        JobSinkKind::Transactional,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            JobSinkKind::Append => "append",
            JobSinkKind::Idempotent => "idempotent",
            JobSinkKind::Transactional => "transactional",
        }
    }
}

impl fmt::Display for JobSinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sink task's connector: what it holds in memory between records.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JobSink {
    pub kind: JobSinkKind,
    /// Idempotent: the identities the file holds.
    seen: BTreeSet<(String, i64, u32)>,
    /// Transactional: the records of the open transaction.
    pub buffer: Vec<JobRecord>,
    /// Transactional: pre-committed transactions not yet committed.
    pub pending: Vec<u64>,
    /// A file sink's writes since its last sync.
    pub dirty: bool,
}

/// What the connector did, for the report (not state: nothing decides by it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkCounts {
    pub written: u64,
    pub skipped: u64,
    pub committed: u64,
}

impl JobSink {
    /// A connector not opened yet (no step: `open` replaces it before any record).
    pub fn closed(kind: JobSinkKind) -> JobSink {
        JobSink {
            kind,
            seen: BTreeSet::new(),
            buffer: Vec::new(),
            pending: Vec::new(),
            dirty: false,
        }
    }

    /// Opens the connector after a (re)start from checkpoint `completed` whose sink snapshot
    /// lists `pending` transactions: resolves them (see the module header).
    pub fn open<S: Storage>(
        world: &mut World<S>,
        kind: JobSinkKind,
        completed: Option<u64>,
        pending: &[u64],
        counts: &mut SinkCounts,
    ) -> Result<JobSink, Interrupt> {
        let mut sink = JobSink::closed(kind);
        match kind {
            JobSinkKind::Append | JobSinkKind::Idempotent => {
                let bytes = world.effect("sink.open", SINK_FILE, |env| {
                    if env.disk.exists(SINK_FILE) {
                        env.disk.read(SINK_FILE)
                    } else {
                        Ok(Vec::new())
                    }
                })?;
                let bytes = bytes.map_err(|e| {
                    Interrupt::Abort(EngineError {
                        message: format!("sink.open {SINK_FILE}: {e}"),
                    })
                })?;
                let whole_bytes = whole_records_len_bytes(&bytes);
                if whole_bytes < bytes.len() {
                    world.note(format!(
                        "sink repair: cut {SINK_FILE} at byte {whole_bytes} ({} bytes after the last whole record)",
                        bytes.len() - whole_bytes
                    ));
                    disk_step(world, "sink.repair", SINK_FILE, |disk| {
                        disk.truncate(SINK_FILE, whole_bytes as u64)
                    })?;
                    disk_step(world, "sink.fsync", SINK_FILE, |disk| disk.fsync(SINK_FILE))?;
                }
                if kind == JobSinkKind::Idempotent {
                    for line in bytes[..whole_bytes].split(|b| *b == b'\n') {
                        if let Some(record) = std::str::from_utf8(line)
                            .ok()
                            .and_then(JobRecord::parse_line)
                        {
                            sink.seen.insert(record.identity());
                        }
                    }
                }
            }
            JobSinkKind::Transactional => {
                let names = world.effect("sink.list", "transactions", |env| env.disk.list())?;
                let pending: BTreeSet<u64> = pending.iter().copied().collect();
                let mut resolved = false;
                for name in names {
                    let Some(id) = name.strip_prefix("txn-").and(checkpoint_of(&name)) else {
                        continue;
                    };
                    if pending.contains(&id) && completed.is_some_and(|c| id <= c) {
                        disk_step(world, "sink.recommit", &name, |disk| {
                            disk.rename(&name, &part_file(id))
                        })?;
                        counts.committed += 1;
                    } else {
                        disk_step(world, "sink.abort", &name, |disk| disk.remove(&name))?;
                    }
                    resolved = true;
                }
                if resolved {
                    disk_step(world, "sink.fsync-dir", ".", |disk| disk.fsync_dir())?;
                }
            }
        }
        Ok(sink)
    }

    /// Hands one record to the sink.
    pub fn write<S: Storage>(
        &mut self,
        world: &mut World<S>,
        record: &JobRecord,
        counts: &mut SinkCounts,
    ) -> Result<(), Interrupt> {
        match self.kind {
            JobSinkKind::Append => {
                let line = format!("{}\n", record.to_json_line());
                disk_step(world, "sink.append", SINK_FILE, |disk| {
                    disk.open_or_create(SINK_FILE)?;
                    disk.append(SINK_FILE, line.as_bytes())
                })?;
                self.dirty = true;
                counts.written += 1;
            }
            JobSinkKind::Idempotent => {
                if self.seen.contains(&record.identity()) {
                    counts.skipped += 1;
                    return Ok(());
                }
                let line = format!("{}\n", record.to_json_line());
                disk_step(world, "sink.upsert", SINK_FILE, |disk| {
                    disk.open_or_create(SINK_FILE)?;
                    disk.append(SINK_FILE, line.as_bytes())
                })?;
                self.seen.insert(record.identity());
                self.dirty = true;
                counts.written += 1;
            }
            JobSinkKind::Transactional => {
                self.buffer.push(record.clone());
                counts.written += 1;
            }
        }
        Ok(())
    }

    /// Pre-commits at barrier `checkpoint`: syncs a file sink; writes and syncs the open
    /// transaction. Returns the bytes written.
    pub fn pre_commit<S: Storage>(
        &mut self,
        world: &mut World<S>,
        checkpoint: u64,
    ) -> Result<(), Interrupt> {
        match self.kind {
            JobSinkKind::Append | JobSinkKind::Idempotent => {
                if self.dirty {
                    disk_step(world, "sink.fsync", SINK_FILE, |disk| disk.fsync(SINK_FILE))?;
                    self.dirty = false;
                }
            }
            JobSinkKind::Transactional => {
                if self.buffer.is_empty() {
                    return Ok(());
                }
                let name = txn_file(checkpoint);
                let text: String = self
                    .buffer
                    .iter()
                    .map(|r| format!("{}\n", r.to_json_line()))
                    .collect();
                disk_step(world, "sink.pre-commit", &name, |disk| {
                    disk.create(&name)?;
                    disk.write(&name, 0, text.as_bytes())
                })?;
                disk_step(world, "sink.fsync", &name, |disk| disk.fsync(&name))?;
                self.buffer.clear();
                self.pending.push(checkpoint);
            }
        }
        Ok(())
    }

    /// Checkpoint `completed` is complete: commits every pending transaction up to it.
    pub fn commit<S: Storage>(
        &mut self,
        world: &mut World<S>,
        completed: u64,
        counts: &mut SinkCounts,
    ) -> Result<(), Interrupt> {
        let due: Vec<u64> = self
            .pending
            .iter()
            .copied()
            .filter(|id| *id <= completed)
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        for id in &due {
            let from = txn_file(*id);
            disk_step(world, "sink.commit", &from, |disk| {
                disk.rename(&from, &part_file(*id))
            })?;
            counts.committed += 1;
        }
        disk_step(world, "sink.fsync-dir", ".", |disk| disk.fsync_dir())?;
        self.pending.retain(|id| *id > completed);
        Ok(())
    }

    /// Whether nothing is left to make durable or visible.
    pub fn settled(&self) -> bool {
        !self.dirty && self.buffer.is_empty() && self.pending.is_empty()
    }
}

/// The lines a consumer sees: a file sink's file, or the committed parts in order.
pub fn visible_lines(disk: &keel_sim::Disk, kind: JobSinkKind) -> Vec<String> {
    let files: Vec<String> = match kind {
        JobSinkKind::Append | JobSinkKind::Idempotent => vec![SINK_FILE.to_string()],
        JobSinkKind::Transactional => disk
            .list()
            .into_iter()
            .filter(|name| name.starts_with("part-"))
            .collect(),
    };
    let mut lines = Vec::new();
    for name in files {
        let Ok(bytes) = disk.read(&name) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        lines.extend(text.lines().map(str::to_string));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_repair_keeps_whole_records_up_to_the_first_torn_or_zeroed_line() {
        let line = |key: &str| {
            let record = JobRecord {
                key: key.to_string(),
                window_end: 10,
                sum: 3,
                seq: 0,
                kind: "fire".to_string(),
            };
            format!("{}\n", record.to_json_line())
        };
        let two = format!("{}{}", line("a"), line("b"));
        assert_eq!(whole_records_len_bytes(two.as_bytes()), two.len());
        let torn = format!("{two}{}", &line("c")[..7]);
        assert_eq!(whole_records_len_bytes(torn.as_bytes()), two.len());
        let mut zeroed = two.clone().into_bytes();
        zeroed.extend_from_slice(&[0u8; 12]);
        zeroed.extend_from_slice(line("d").as_bytes());
        assert_eq!(whole_records_len_bytes(&zeroed), two.len());
        assert_eq!(whole_records_len_bytes(b""), 0);
    }
}
