//! What a parallel job's checkpoint holds on disk: one snapshot file a task, one metadata file.
//!
//! Files: `chk-NNNNNN-<task>.json` (a task's [`TaskSnapshot`], written and synced by the
//! task when it snapshots) and `chk-NNNNNN.meta` (the coordinator's [`Metadata`], written
//! to a temporary file, synced, renamed into place and the directory synced when every task
//! has acknowledged: the checkpoint is complete once the rename is durable). Recovery trusts
//! the newest metadata file that decodes and whose task files all decode.

use crate::job::channel::Item;
use crate::job::keyed::KeyedWindows;
use serde::{Deserialize, Serialize};

/// A task's snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
// Externally tagged: an internally tagged enum buffers its fields, and the buffer has no
// i128 (a window sum).
#[serde(rename_all = "kebab-case")]
pub enum TaskSnapshot {
    Source {
        /// The next event of the partition to read.
        offset: u64,
        max_ts: Option<i64>,
        end_sent: bool,
        /// Unaligned: the items barrier n overtook on each output channel.
        in_flight: Vec<Vec<Item>>,
    },
    Operator {
        state: KeyedWindows,
        /// Unaligned: the items taken from each input after the snapshot and before barrier
        /// n arrived on it.
        recorded: Vec<Vec<Item>>,
        /// Unaligned: the items barrier n overtook on the output channel.
        in_flight: Vec<Item>,
    },
    Sink {
        /// Pre-committed transactions not yet committed (n's included).
        pending: Vec<u64>,
        /// Which inputs had ended.
        ended: Vec<bool>,
        /// Unaligned: as an operator's.
        recorded: Vec<Vec<Item>>,
    },
}

/// The coordinator's record of a complete checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub checkpoint: u64,
    /// Every task that acknowledged, by label.
    pub tasks: Vec<String>,
    /// The bytes of every task snapshot file (in-flight items included).
    pub bytes: u64,
}

pub fn task_file(checkpoint: u64, task: &str) -> String {
    format!("chk-{checkpoint:06}-{task}.json")
}

pub fn meta_file(checkpoint: u64) -> String {
    format!("chk-{checkpoint:06}.meta")
}

pub fn meta_tmp_file(checkpoint: u64) -> String {
    format!("chk-{checkpoint:06}.meta.tmp")
}

/// The checkpoint a file of a checkpoint belongs to (`chk-NNNNNN...`), or a transaction
/// file (`txn-NNNNNN.jsonl`, `part-NNNNNN.jsonl`).
pub fn checkpoint_of(name: &str) -> Option<u64> {
    let digits = name
        .strip_prefix("chk-")
        .or_else(|| name.strip_prefix("txn-"))
        .or_else(|| name.strip_prefix("part-"))?;
    digits.get(..6)?.parse().ok()
}

/// The checkpoint of a metadata file's name.
pub fn meta_checkpoint(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("chk-")?.strip_suffix(".meta")?;
    (rest.len() == 6).then(|| rest.parse().ok()).flatten()
}
