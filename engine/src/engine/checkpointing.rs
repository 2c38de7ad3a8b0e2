//! Writing a checkpoint by the configured protocol and mode, and removing the files a newer
//! durable one made old.

use super::{disk_step, disk_write_step, Engine, Interrupt, Sink, IN_PLACE_FILE};
use crate::checkpoint::{Checkpoint, HEADER_MAGIC};
use crate::encode_memo::encode_sealed;
use crate::incremental::FileKind;
use crate::protocol::StateBackend;
use crate::sink::TEMP_SUFFIX;
use keel_sim::{Storage, World};
use std::sync::Arc;

impl Engine {
    /// Writes and commits the checkpoint `index` by the configured protocol. `safe`: sync the
    /// sink; write `state-<index>.json.tmp`, fsync it, rename it to `state-<index>.json`,
    /// fsync the directory; then delete older checkpoints.
    pub(super) fn checkpoint<S: Storage>(
        &mut self,
        world: &mut World<S>,
        index: u64,
        last: bool,
    ) -> Result<(), Interrupt> {
        let protocol = self.config.protocol;
        let transactions = match self.sink.as_ref() {
            Some(Sink::Log(log)) => vec![log.pending()],
            _ => Vec::new(),
        };
        if self.config.state_backend == StateBackend::Incremental {
            return self.checkpoint_incremental(world, index, last, transactions);
        }
        let checkpoint = Checkpoint {
            index,
            state: self.state.clone(),
            transactions,
        };
        // `checkpoint.encode_file`, through the memo.
        let file = encode_sealed(
            HEADER_MAGIC,
            protocol.checksum(),
            index,
            &checkpoint.state,
            &checkpoint.transactions,
            self.caches.encoded.as_deref(),
        );
        let contents = &file.contents;
        if protocol.sink_sync_before_commit() {
            self.sync_file_sink(world)?;
        }
        if protocol.in_place() {
            disk_step(world, "disk.create", IN_PLACE_FILE, |d| {
                d.create(IN_PLACE_FILE)
            })?;
            disk_write_step(world, IN_PLACE_FILE, |d| {
                d.write_shared(IN_PLACE_FILE, contents)
            })?;
        } else {
            let name = Checkpoint::file_name(index);
            let temp = format!("{name}{TEMP_SUFFIX}");
            let older: Vec<u64> = self.checkpoint_files.range(..index).copied().collect();
            disk_step(world, "disk.create", &temp, |d| d.create(&temp))?;
            disk_write_step(world, &temp, |d| d.write_shared(&temp, contents))?;
            if protocol.fsync_data() {
                disk_step(world, "disk.fsync", &temp, |d| d.fsync(&temp))?;
            }
            if protocol.delete_before_rename() {
                self.remove_checkpoints(world, &older)?;
            }
            disk_step(world, "disk.rename", &format!("{temp} -> {name}"), |d| {
                d.rename(&temp, &name)
            })?;
            if protocol.fsync_dir() {
                disk_step(world, "disk.fsync-dir", ".", |d| d.fsync_dir())?;
            }
            self.checkpoint_files.insert(index);
            if !protocol.delete_before_rename() {
                self.remove_checkpoints(world, &older)?;
            }
        }
        if !protocol.sink_sync_before_commit() {
            self.sync_file_sink(world)?;
        }
        self.stats.last_committed = Some(Arc::new(checkpoint));
        // Phase two: the checkpoint is committed, so its transaction may be.
        if let Some(Sink::Log(log)) = self.sink.as_mut() {
            log.commit(world, index, !last)?;
        }
        Ok(())
    }

    /// Writes and commits the incremental checkpoint `index`: sync the sink; write the delta
    /// (or a new base), fsync it, fsync the directory; write the manifest through a temp
    /// file, fsync, rename, fsync the directory; then remove what it made stale (the order
    /// and its reasons are in `incremental.rs`).
    fn checkpoint_incremental<S: Storage>(
        &mut self,
        world: &mut World<S>,
        index: u64,
        last: bool,
        transactions: Vec<crate::checkpoint::PendingTxn>,
    ) -> Result<(), Interrupt> {
        let protocol = self.config.protocol;
        if protocol.sink_sync_before_commit() {
            self.sync_file_sink(world)?;
        }
        let written = self.incremental.prepare(
            index,
            &self.state,
            &transactions,
            protocol.checksum(),
            self.caches.encoded.as_deref(),
        );
        let name = &written.name;
        disk_step(world, "disk.create", name, |d| d.create(name))?;
        disk_write_step(world, name, |d| {
            d.write_shared(name, &written.bytes.contents)
        })?;
        self.incremental
            .loose
            .insert((written.number, written.kind));
        if protocol.fsync_delta() {
            disk_step(world, "disk.fsync", name, |d| d.fsync(name))?;
        }
        if protocol.fsync_dir() {
            disk_step(world, "disk.fsync-dir", ".", |d| d.fsync_dir())?;
        }
        let stale = self.incremental.stale(&written);
        if protocol.delete_before_rename() {
            self.remove_chain_files(world, &stale)?;
        }
        let manifest = FileKind::Manifest.file_name(written.number);
        let temp = format!("{manifest}{TEMP_SUFFIX}");
        disk_step(world, "disk.create", &temp, |d| d.create(&temp))?;
        disk_write_step(world, &temp, |d| d.write(&temp, 0, &written.manifest))?;
        if protocol.fsync_data() {
            disk_step(world, "disk.fsync", &temp, |d| d.fsync(&temp))?;
        }
        disk_step(
            world,
            "disk.rename",
            &format!("{temp} -> {manifest}"),
            |d| d.rename(&temp, &manifest),
        )?;
        if protocol.fsync_dir() {
            disk_step(world, "disk.fsync-dir", ".", |d| d.fsync_dir())?;
        }
        self.incremental
            .loose
            .insert((written.number, FileKind::Manifest));
        if !protocol.delete_before_rename() {
            self.remove_chain_files(world, &stale)?;
        }
        if !protocol.sink_sync_before_commit() {
            self.sync_file_sink(world)?;
        }
        // Committed: the last committed checkpoint moves by the delta, not by a copy of
        // every window (a copy per checkpoint would make a run quadratic again).
        let dirty = std::mem::take(&mut self.incremental.dirty);
        match self.stats.last_committed.as_mut().map(Arc::make_mut) {
            Some(committed) => {
                for end in dirty {
                    match self.state.windows.get(&end) {
                        Some(&w) => committed.state.windows.insert(end, w),
                        None => committed.state.windows.remove(&end),
                    };
                }
                committed.index = index;
                committed.state.max_ts = self.state.max_ts;
                committed.state.dropped_late = self.state.dropped_late;
                committed.transactions = transactions;
            }
            None => {
                self.stats.last_committed = Some(Arc::new(Checkpoint {
                    index,
                    state: self.state.clone(),
                    transactions,
                }));
            }
        }
        debug_assert_eq!(
            self.stats.last_committed.as_ref().map(|c| &c.state),
            Some(&self.state),
            "the changed windows are every difference from the last commit"
        );
        self.incremental.commit(written);
        if let Some(Sink::Log(log)) = self.sink.as_mut() {
            log.commit(world, index, !last)?;
        }
        Ok(())
    }

    /// Removes incremental checkpoint files, one step each.
    pub(super) fn remove_chain_files<S: Storage>(
        &mut self,
        world: &mut World<S>,
        files: &[(u64, FileKind)],
    ) -> Result<(), Interrupt> {
        for &(number, kind) in files {
            let name = kind.file_name(number);
            disk_step(world, "disk.remove", &name, |d| d.remove(&name))?;
            self.incremental.loose.remove(&(number, kind));
        }
        Ok(())
    }

    pub(super) fn remove_checkpoints<S: Storage>(
        &mut self,
        world: &mut World<S>,
        indexes: &[u64],
    ) -> Result<(), Interrupt> {
        for &index in indexes {
            let name = Checkpoint::file_name(index);
            disk_step(world, "disk.remove", &name, |d| d.remove(&name))?;
            self.checkpoint_files.remove(&index);
        }
        Ok(())
    }
}
