//! Start-up: an incarnation removes the temporary files a crash left, restores the newest
//! checkpoint that validates (a full file, or an incremental chain through its manifest) and
//! opens its sink.

use super::{abort, disk_step, Engine, EngineError, Interrupt, Sink, IN_PLACE_FILE};
use crate::chain_memo;
use crate::checkpoint::{Checkpoint, Invalid};
use crate::checkpoint_memo;
use crate::incremental::{self, FileKind, NotRestored, ReadFile};
use crate::protocol::StateBackend;
use crate::sink::{SinkConnector, TEMP_SUFFIX};
use crate::txsink::TxSink;
use crate::window::OperatorState;
use keel_sim::{Contents, Data, Storage, World};
use std::sync::Arc;

impl Engine {
    /// Start-up: remove every `.tmp` file, restore the newest checkpoint that validates (or
    /// start empty) and open the sink, repairing its tail if the protocol does.
    pub fn recover<S: Storage>(&mut self, world: &mut World<S>) -> Result<(), Interrupt> {
        let protocol = self.config.protocol;
        let names = world.effect("disk.list", ".", |env| env.disk.list())?;
        // A `.tmp` a crash left is never read. Removed before anything is written, so a
        // checkpoint written again under its name is a new file, not the old one cut to
        // nothing by a truncate a later power loss may undo: what a second power loss finds
        // then never depends on how much of the old file survived the first (the sim
        // collapses a temporary file's bytes into one class on that, depth 2 included), and
        // no temporary file outlives the recovery after it. Its removal becomes durable with
        // the next directory fsync (a file sink's open syncs the directory).
        for temp in names.iter().filter(|name| name.ends_with(TEMP_SUFFIX)) {
            disk_step(world, "disk.remove", temp, |d| d.remove(temp))?;
        }
        match self.config.state_backend {
            StateBackend::Full => self.restore_full(world, &names)?,
            StateBackend::Incremental => self.restore_chain(world, &names)?,
        }
        if self.stats.restored.is_none() {
            world.note("recovery: no valid checkpoint, start from event 0 with empty state");
        }
        self.stats.resume_decided = true;
        self.sink = Some(if self.config.sink.is_transactional() {
            let restored = self
                .stats
                .restored
                .as_ref()
                .map_or(&[][..], |c| &c.transactions[..]);
            Sink::Log(TxSink::open(world, restored, self.stats.resume_from_index)?)
        } else {
            Sink::File(SinkConnector::open(
                self.config.sink,
                world,
                protocol.rewrite_sink_on_open(),
                protocol.tail_repair(),
                self.caches.sink.as_ref(),
            )?)
        });
        Ok(())
    }

    /// Full checkpoints: restores the newest `state-N.json` (or the in-place file) that
    /// validates, and removes the older ones it subsumes.
    fn restore_full<S: Storage>(
        &mut self,
        world: &mut World<S>,
        names: &[String],
    ) -> Result<(), Interrupt> {
        let protocol = self.config.protocol;
        self.checkpoint_files = names
            .iter()
            .filter_map(|name| Checkpoint::index_from_file_name(name))
            .collect();
        // Newest first: numbered checkpoints by index, then the in-place file.
        let mut candidates: Vec<(Option<u64>, &String)> = names
            .iter()
            .filter_map(|name| Checkpoint::index_from_file_name(name).map(|i| (Some(i), name)))
            .collect();
        candidates.sort_by(|a, b| b.cmp(a));
        candidates.extend(
            names
                .iter()
                .filter(|n| *n == IN_PLACE_FILE)
                .map(|n| (None, n)),
        );
        for (index, name) in candidates {
            let bytes = world
                .effect_data("disk.read", name.as_str(), Data::File(name), |env| {
                    env.disk.read_shared(name)
                })?
                .map_err(|e| abort(format!("recovery: {e}")))?;
            let memo = self.caches.checkpoints.as_deref();
            let checkpoint = match checkpoint_memo::decode_file(&bytes, protocol.checksum(), memo) {
                Ok(checkpoint) if index.is_none_or(|i| i == checkpoint.index) => checkpoint,
                Ok(checkpoint) => {
                    let why = format!("{name}: holds index {}", checkpoint.index);
                    world.note(format!("recovery: skip {why}"));
                    self.stats.rejected_checkpoints.push(why);
                    continue;
                }
                Err(Invalid::Rejected(why)) => {
                    world.note(format!("recovery: skip {name}: {why}"));
                    self.stats
                        .rejected_checkpoints
                        .push(format!("{name}: {why}"));
                    continue;
                }
                Err(Invalid::TrustedButCorrupt(why)) => {
                    return Err(Interrupt::Failed(EngineError {
                        message: format!("recovery: {name} {why}"),
                    }));
                }
            };
            let unfired = checkpoint
                .state
                .unfired_behind_watermark(self.config.out_of_orderness);
            self.check_settled(name, &checkpoint.state, unfired)?;
            // What recovery builds on must itself be durable: a checkpoint whose data is still
            // dirty (renamed before its fsync) may vanish in a power loss (PostgreSQL syncs
            // its data directory at startup for the same reason). An fsync cannot write what
            // a failed fsync left in clean pages; under `safe` a checkpoint has none, since it
            // is renamed into place only after its own fsync succeeded (the sink file is
            // written back instead: `CheckpointProtocol::rewrite_sink_on_open`).
            if protocol.fsync_data() {
                disk_step(world, "disk.fsync", name, |d| d.fsync(name))?;
            }
            if protocol.fsync_dir() {
                disk_step(world, "disk.fsync-dir", ".", |d| d.fsync_dir())?;
            }
            world.note(format!(
                "recovery: restore {name}, resume from event {}",
                checkpoint.index
            ));
            // Older checkpoints are subsumed once this one is durable: a crash between a
            // checkpoint's rename and its cleanup would otherwise leave them for good when
            // no later checkpoint comes (the disk stays bounded, `bounded-disk`).
            if protocol.fsync_data() && protocol.fsync_dir() {
                let older: Vec<u64> = self
                    .checkpoint_files
                    .range(..checkpoint.index)
                    .copied()
                    .collect();
                self.remove_checkpoints(world, &older)?;
            }
            self.state = checkpoint.state.clone();
            if crate::mutants::active(crate::mutants::Mutant::RestoreDropsWindow) {
                let newest = self.state.windows.last_key_value().map(|(end, _)| *end);
                if let Some(end) = newest {
                    self.state.windows.remove(&end);
                }
            }
            self.stats.resume_from_index = checkpoint.index;
            self.stats.processed_upto_index = checkpoint.index;
            self.stats.restored = Some(Arc::new(checkpoint));
            break;
        }
        Ok(())
    }

    /// Incremental checkpoints: restores the newest manifest whose whole chain validates
    /// (the rules in `incremental.rs`), makes what it builds on durable and removes what
    /// that manifest makes stale.
    fn restore_chain<S: Storage>(
        &mut self,
        world: &mut World<S>,
        names: &[String],
    ) -> Result<(), Interrupt> {
        let protocol = self.config.protocol;
        // No chain is committed yet: every checkpoint file is loose.
        self.incremental.loose = names
            .iter()
            .filter_map(|name| incremental::parse_file_name(name).map(|(kind, n)| (n, kind)))
            .collect();
        let manifests: Vec<u64> = self
            .incremental
            .loose
            .iter()
            .rev()
            .filter(|(_, kind)| *kind == FileKind::Manifest)
            .map(|&(number, _)| number)
            .collect();
        for number in manifests {
            let name = FileKind::Manifest.file_name(number);
            let bytes = world
                .effect_data("disk.read", name.as_str(), Data::File(&name), |env| {
                    env.disk.read_shared(&name)
                })?
                .map_err(|e| abort(format!("recovery: {e}")))?;
            let mut reader = StepReader { world };
            let memo = self.caches.chains.as_deref();
            let restored =
                match chain_memo::restore(&name, &bytes, protocol.checksum(), &mut reader, memo) {
                    Ok(restored) if restored.chain.number == number => restored,
                    Ok(restored) => {
                        let why = format!("{name}: holds number {}", restored.chain.number);
                        world.note(format!("recovery: skip {why}"));
                        self.stats.rejected_checkpoints.push(why);
                        continue;
                    }
                    Err(NotRestored::Io(interrupt)) => return Err(interrupt),
                    Err(NotRestored::Invalid(Invalid::Rejected(why))) => {
                        world.note(format!("recovery: skip {name}: {why}"));
                        self.stats
                            .rejected_checkpoints
                            .push(format!("{name}: {why}"));
                        continue;
                    }
                    Err(NotRestored::Invalid(Invalid::TrustedButCorrupt(why))) => {
                        return Err(Interrupt::Failed(EngineError {
                            message: format!("recovery: {name} {why}"),
                        }));
                    }
                };
            let unfired = restored.unfired_behind_watermark(self.config.out_of_orderness);
            self.check_settled(&name, &restored.checkpoint.state, unfired)?;
            // What recovery builds on must be durable (as for full checkpoints).
            if protocol.fsync_data() {
                let chain = &restored.chain;
                let files = std::iter::once(&name)
                    .chain(std::iter::once(&chain.base.file))
                    .chain(chain.deltas.iter().map(|d| &d.file));
                for file in files {
                    disk_step(world, "disk.fsync", file, |d| d.fsync(file))?;
                }
            }
            if protocol.fsync_dir() {
                disk_step(world, "disk.fsync-dir", ".", |d| d.fsync_dir())?;
            }
            world.note(format!(
                "recovery: restore {name} (base {}, {} deltas), resume from event {}",
                restored.chain.base.file,
                restored.chain.deltas.len(),
                restored.checkpoint.index
            ));
            self.incremental.adopt(restored.chain);
            if protocol.fsync_data() && protocol.fsync_dir() {
                let stale = self.incremental.stale_committed();
                self.remove_chain_files(world, &stale)?;
            }
            self.state = restored.checkpoint.state.clone();
            self.stats.resume_from_index = restored.checkpoint.index;
            self.stats.processed_upto_index = restored.checkpoint.index;
            self.stats.restored = Some(Arc::new(restored.checkpoint));
            break;
        }
        Ok(())
    }

    /// A restored state must hold the operator's invariant (every window with end <= watermark
    /// fired, `window.rs`), which `on_event` builds on: the engine never writes a state
    /// without it, so a file that passes its checks and holds one is the engine's own defect
    /// and recovery fails, as for a trusted file that does not decode.
    fn check_settled(
        &self,
        name: &str,
        state: &OperatorState,
        unfired_behind_watermark: Option<i64>,
    ) -> Result<(), Interrupt> {
        let ooo = self.config.out_of_orderness;
        let Some(end) = unfired_behind_watermark else {
            return Ok(());
        };
        let passes = if self.config.protocol.checksum() {
            "passes its checksum"
        } else {
            "has the right length"
        };
        let watermark = state.watermark(ooo).expect("a window behind a watermark");
        Err(Interrupt::Failed(EngineError {
            message: format!(
                "recovery: {name} {passes} but window {end} has not fired at watermark {watermark}"
            ),
        }))
    }
}

/// Recovery's reads of a chain's files, one step each; a missing file is `None`.
struct StepReader<'a, S: Storage> {
    world: &'a mut World<S>,
}

impl<S: Storage> ReadFile for StepReader<'_, S> {
    type Error = Interrupt;
    fn read_file(&mut self, name: &str) -> Result<Option<Contents>, Interrupt> {
        let read = self
            .world
            .effect_data("disk.read", name, Data::File(name), |env| {
                env.disk.read_shared(name)
            })?;
        match read {
            Ok(bytes) => Ok(Some(bytes)),
            Err(keel_sim::DiskError::NotFound { .. }) => Ok(None),
            Err(e) => Err(abort(format!("recovery: {e}"))),
        }
    }
}
