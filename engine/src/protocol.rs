//! Checkpoint protocols: the safe one and the classic unsafe variants, for teaching and to
//! prove the oracle catches them. Each variant differs from `safe` in exactly one decision.
//!
//! A protocol is a set of decisions, and each decision applies to both checkpoint modes
//! (`StateBackend`): full checkpoints (one `state-N.json` each, the chapter's) and
//! incremental ones (a chain of a base and deltas named by a manifest, `incremental.rs`).
//! `in-place` has no incremental form and `no-delta-fsync` no full one: `EngineConfig::validate`
//! refuses those pairs.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How the engine writes, commits and recovers checkpoints.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointProtocol {
    /// Sync the sink; unique name, checksummed header, temp file, fsync, rename, fsync of the
    /// directory; only then delete the previous checkpoint. Any failed fsync stops the
    /// process. Recovery takes the newest checkpoint that validates, writes back the sink
    /// file it reads (so that what it builds on is its own dirty data, which the next sink
    /// sync makes durable or fails on) and repairs a torn sink tail.
    #[default]
    Safe,
    /// Rewrite one `state.json` in place, no fsync at all.
    InPlace,
    /// Temp file and rename, but the temp file's data is never fsynced.
    NoFsyncRename,
    /// The rename is never made durable by an fsync of the directory.
    NoDirFsync,
    /// Delete the previous checkpoint before renaming the new one into place.
    DeleteThenRename,
    /// No checksum and no data fsync: a file whose length matches its header is trusted.
    SizeOnly,
    /// Commit the checkpoint first, make the sink's writes durable after.
    CheckpointBeforeSinkSync,
    /// Recovery appends after whatever a power loss left at the end of the sink file.
    NoTailRepair,
    /// Recovery trusts the sink file as it reads it: after a failed fsync the page cache
    /// still shows records the disk does not hold, and a later fsync returns 0 without
    /// writing them.
    TrustPageCacheAfterEio,
    /// Incremental mode only: a delta (or a new base) is not fsynced before the manifest
    /// that names it is written, fsynced and renamed into place: a power loss keeps the
    /// manifest and loses the delta it names.
    NoDeltaFsync,
}

impl CheckpointProtocol {
    pub const ALL: [CheckpointProtocol; 10] = [
        CheckpointProtocol::Safe,
        CheckpointProtocol::InPlace,
        CheckpointProtocol::NoFsyncRename,
        CheckpointProtocol::NoDirFsync,
        CheckpointProtocol::DeleteThenRename,
        CheckpointProtocol::SizeOnly,
        CheckpointProtocol::CheckpointBeforeSinkSync,
        CheckpointProtocol::NoTailRepair,
        CheckpointProtocol::TrustPageCacheAfterEio,
        CheckpointProtocol::NoDeltaFsync,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            CheckpointProtocol::Safe => "safe",
            CheckpointProtocol::InPlace => "in-place",
            CheckpointProtocol::NoFsyncRename => "no-fsync-rename",
            CheckpointProtocol::NoDirFsync => "no-dir-fsync",
            CheckpointProtocol::DeleteThenRename => "delete-then-rename",
            CheckpointProtocol::SizeOnly => "size-only",
            CheckpointProtocol::CheckpointBeforeSinkSync => "checkpoint-before-sink-sync",
            CheckpointProtocol::NoTailRepair => "no-tail-repair",
            CheckpointProtocol::TrustPageCacheAfterEio => "trust-page-cache-after-eio",
            CheckpointProtocol::NoDeltaFsync => "no-delta-fsync",
        }
    }

    /// One checkpoint file rewritten in place instead of a new file per checkpoint.
    pub fn in_place(&self) -> bool {
        *self == CheckpointProtocol::InPlace
    }

    /// fsync of the checkpoint's data before it is renamed into place.
    pub fn fsync_data(&self) -> bool {
        !matches!(
            self,
            CheckpointProtocol::InPlace
                | CheckpointProtocol::NoFsyncRename
                | CheckpointProtocol::SizeOnly
        )
    }

    /// fsync of an incremental checkpoint's delta (or new base) before the manifest names it.
    pub fn fsync_delta(&self) -> bool {
        self.fsync_data() && *self != CheckpointProtocol::NoDeltaFsync
    }

    /// Whether the protocol has a form in `mode`.
    pub fn supports(&self, mode: StateBackend) -> bool {
        match mode {
            StateBackend::Full => *self != CheckpointProtocol::NoDeltaFsync,
            StateBackend::Incremental => *self != CheckpointProtocol::InPlace,
        }
    }

    /// fsync of the directory after the rename.
    pub fn fsync_dir(&self) -> bool {
        !matches!(
            self,
            CheckpointProtocol::InPlace | CheckpointProtocol::NoDirFsync
        )
    }

    /// A CRC-32 of the body in the header, checked on recovery.
    pub fn checksum(&self) -> bool {
        *self != CheckpointProtocol::SizeOnly
    }

    /// The previous checkpoint is deleted before the new one is renamed into place.
    pub fn delete_before_rename(&self) -> bool {
        *self == CheckpointProtocol::DeleteThenRename
    }

    /// The sink's pending writes are made durable before the checkpoint is committed.
    pub fn sink_sync_before_commit(&self) -> bool {
        *self != CheckpointProtocol::CheckpointBeforeSinkSync
    }

    /// Recovery truncates the sink file at its first unreadable line.
    pub fn tail_repair(&self) -> bool {
        *self != CheckpointProtocol::NoTailRepair
    }

    /// Recovery writes the sink file back as it read it (the same bytes, in the step that
    /// opens it), so that no byte it builds on is a clean page a failed fsync of an earlier
    /// process left unpersisted: every byte it sees is dirty again, and the sink sync before
    /// the next checkpoint writes it or fails (and a failed fsync stops the process).
    pub fn rewrite_sink_on_open(&self) -> bool {
        *self != CheckpointProtocol::TrustPageCacheAfterEio
    }
}

/// What a checkpoint writes: the whole operator state, or what changed since the last one.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum StateBackend {
    /// Every checkpoint is one file with every window (`state-N.json`): the chapter's.
    #[default]
    Full,
    /// A chain: a base (every window), deltas (the windows changed since the checkpoint
    /// before), and a manifest naming the chain, compacted into a new base now and then
    /// (`incremental.rs`).
    Incremental,
}

impl StateBackend {
    pub fn name(&self) -> &'static str {
        match self {
            StateBackend::Full => "full",
            StateBackend::Incremental => "incremental",
        }
    }

    /// The default, absent from spec files and the reports' config.
    pub fn is_full(&self) -> bool {
        *self == StateBackend::Full
    }
}

impl fmt::Display for StateBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for CheckpointProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
