//! Sink connectors: append (at-least-once) and idempotent (the sink deduplicates by key).
//!
//! Both write one JSON line per record to `sink-<kind>.jsonl` on the simulated disk through
//! sink requests, which can fail, lose their acknowledgement or meet an outage; the engine
//! retries with backoff on the simulated clock. The idempotent sink checks the key against
//! its own contents when the request arrives, so a retried or replayed record whose key is
//! already there is skipped, whoever sent it.

pub use crate::known_sink::readable_prefix_len_bytes;
use crate::known_sink::KnownSinkFile;
use crate::protocol::CheckpointProtocol;
use crate::record::Record;
use keel_sim::disk::CrashReaders;
use keel_sim::{Contents, Crash, Data, DiskError, Storage, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// Attempts per record before the engine gives up and restarts (bounds the retry loop).
pub const SINK_ATTEMPTS_MAX: u32 = 12;
/// The request that sends one record to a file sink (the world counts the ones it served).
pub const SINK_WRITE_OP: &str = "sink.write";
/// First retry backoff; it doubles per attempt up to [`SINK_BACKOFF_MAX_MS`].
pub const SINK_BACKOFF_MS: u64 = 100;
pub const SINK_BACKOFF_MAX_MS: u64 = 3_200;

/// Which sink the engine writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SinkKind {
    /// Non-idempotent: every record is appended, replays included.
    Append,
    /// Skips a record whose key is already in the sink.
    Idempotent,
    /// Two-phase commit on the transactional log: one transaction per checkpoint interval.
    Transactional,
}

impl SinkKind {
    pub const ALL: [SinkKind; 3] = [
        SinkKind::Append,
        SinkKind::Idempotent,
        SinkKind::Transactional,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            SinkKind::Append => "append",
            SinkKind::Idempotent => "idempotent",
            SinkKind::Transactional => "transactional",
        }
    }

    /// Whether the sink is the transactional log (else a file on the simulated disk).
    pub fn is_transactional(&self) -> bool {
        *self == SinkKind::Transactional
    }

    /// The sink's file on the simulated disk (the transactional sink has none).
    pub fn file_name(&self) -> &'static str {
        match self {
            SinkKind::Append => "sink-append.jsonl",
            SinkKind::Idempotent => "sink-idempotent.jsonl",
            SinkKind::Transactional => "sink-transactional.jsonl",
        }
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

/// Why the connector could not do its job: the engine aborts and is restarted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkError {
    Crash(Crash),
    /// A disk error, or a sink that stayed unreachable through every attempt.
    Fatal(String),
}

impl From<Crash> for SinkError {
    fn from(crash: Crash) -> Self {
        SinkError::Crash(crash)
    }
}

/// The keys of the complete lines of the sink file, kept up to date incrementally.
///
/// Copied with the engine at every fork of a sweep's point, so it is kept in three parts:
/// the keys of the lines the file shares with a [`KnownSinkFile`] (looked up there, not
/// copied), the keys indexed before the last merge, shared between copies, and the keys
/// indexed since, at most an eighth of the merged ones (or [`RECENT_KEYS_MIN`]). A copy
/// costs the recent keys; a merge copies the shared ones only if a copy still holds them,
/// once every eighth of their number of inserts.
#[derive(Clone, Debug, Default)]
struct KeyIndex {
    /// Bytes of the file already indexed (always just after a newline).
    indexed_len_bytes: u64,
    /// The file's first `known_len_bytes` are whole lines of this file: their keys are
    /// its keys of the lines that end there or before.
    known: Option<Arc<KnownSinkFile>>,
    known_len_bytes: u64,
    /// Keys of the lines after `known_len_bytes`, none of them a known key.
    merged: Arc<BTreeSet<String>>,
    /// Keys not in `merged`, nor known.
    recent: BTreeSet<String>,
}

/// The fewest recent keys a [`KeyIndex`] merges.
const RECENT_KEYS_MIN: usize = 256;

impl KeyIndex {
    /// The index of a file whose first `len_bytes` are whole lines of `known`, read to there.
    fn on_known(known: &Arc<KnownSinkFile>, len_bytes: u64) -> KeyIndex {
        assert!(len_bytes <= known.len_bytes() as u64);
        KeyIndex {
            indexed_len_bytes: len_bytes,
            known: Some(Arc::clone(known)),
            known_len_bytes: len_bytes,
            ..KeyIndex::default()
        }
    }

    /// The index of a file not read yet, which builds on `known` at its first refresh.
    fn building_on(known: Option<&Arc<KnownSinkFile>>) -> KeyIndex {
        KeyIndex {
            known: known.cloned(),
            ..KeyIndex::default()
        }
    }

    fn refresh<S: Storage>(&mut self, disk: &mut S, file: &str) -> Result<(), DiskError> {
        let len_bytes = disk.len_bytes(file)?;
        if len_bytes < self.indexed_len_bytes {
            // The file was truncated (tail repair or power loss): index it again.
            *self = KeyIndex::building_on(self.known.as_ref());
        }
        if self.indexed_len_bytes == 0 {
            if let Some(known) = &self.known {
                // The file as it is now, not as the open read it: a fault may have changed
                // it since (a page eviction), and the index is of what this refresh reads.
                let contents = disk.read_shared(file)?;
                let shared_bytes = known.shared_lines_len_bytes(&contents) as u64;
                *self = KeyIndex::on_known(known, shared_bytes);
                debug_assert!(
                    self.key_set()
                        .into_iter()
                        .map(String::from)
                        .collect::<BTreeSet<_>>()
                        == keys_of_lines(&contents.copy_range(0..shared_bytes as usize)).collect()
                );
            }
        }
        let tail = disk.read_from(file, self.indexed_len_bytes)?;
        let Some(last_newline) = tail.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let lines_len_bytes = last_newline as u64 + 1;
        if let Some(known) = self.known.as_ref().filter(|_| self.only_known()) {
            // Still along the known file (the fault-free run's own index, a replay that
            // wrote its lines again): its keys are looked up there, none copied.
            if known.holds_at(self.indexed_len_bytes as usize, &tail[..=last_newline]) {
                self.known_len_bytes += lines_len_bytes;
                self.indexed_len_bytes += lines_len_bytes;
                return Ok(());
            }
        }
        let keys = keys_of_lines(&tail[..last_newline]);
        if self.merged.is_empty() && self.recent.is_empty() {
            // Indexing a whole file, or all of it after the known lines (a new process's
            // first request): built at once.
            let merged = keys.filter(|key| !self.known_contains(key)).collect();
            self.merged = Arc::new(merged);
        } else {
            for key in keys {
                self.insert(key);
            }
        }
        self.indexed_len_bytes += lines_len_bytes;
        Ok(())
    }

    /// Whether every key indexed is a known one: the file read so far is whole lines of
    /// the known file.
    fn only_known(&self) -> bool {
        self.known_len_bytes == self.indexed_len_bytes
            && self.merged.is_empty()
            && self.recent.is_empty()
    }

    fn known_contains(&self, key: &str) -> bool {
        self.known.as_ref().is_some_and(|known| {
            known
                .first_line_end(key)
                .is_some_and(|end| end <= self.known_len_bytes)
        })
    }

    /// Every key (the three parts are disjoint).
    fn key_set(&self) -> BTreeSet<&str> {
        let known = self
            .known
            .iter()
            .flat_map(|known| known.keys_before(self.known_len_bytes));
        let set: BTreeSet<&str> = known
            .chain(self.merged.iter().map(String::as_str))
            .chain(self.recent.iter().map(String::as_str))
            .collect();
        debug_assert_eq!(
            set.len(),
            self.merged.len()
                + self.recent.len()
                + self
                    .known
                    .as_ref()
                    .map_or(0, |known| known.keys_before(self.known_len_bytes).count())
        );
        set
    }

    fn contains(&self, key: &str) -> bool {
        self.recent.contains(key) || self.merged.contains(key) || self.known_contains(key)
    }

    fn insert(&mut self, key: String) {
        if self.merged.contains(&key) || self.known_contains(&key) {
            return;
        }
        self.recent.insert(key);
        if self.recent.len() > RECENT_KEYS_MIN.max(self.merged.len() / 8) {
            let recent = std::mem::take(&mut self.recent);
            Arc::make_mut(&mut self.merged).extend(recent);
        }
        assert!(self.recent.len() <= RECENT_KEYS_MIN.max(self.merged.len() / 8));
    }
}

/// The same keys indexed to the same length, however they are split.
impl PartialEq for KeyIndex {
    fn eq(&self, other: &KeyIndex) -> bool {
        if self.indexed_len_bytes != other.indexed_len_bytes {
            return false;
        }
        let same_known = match (&self.known, &other.known) {
            (Some(a), Some(b)) => {
                Arc::ptr_eq(a, b) && self.known_len_bytes == other.known_len_bytes
            }
            (None, None) => true,
            _ => false,
        };
        if same_known && Arc::ptr_eq(&self.merged, &other.merged) {
            return self.recent == other.recent;
        }
        self.key_set() == other.key_set()
    }
}

impl Eq for KeyIndex {}

/// The files the engine reads as whole lines after a power loss, in the sense of the
/// simulated disk's power-loss classes (`keel_sim::disk::PowerLossClasses`): recovery keeps
/// the sink file's longest prefix of whole record lines and cuts the rest away (tail repair,
/// [`SinkConnector::open`]), and a line holding a byte a power loss leaves in place of the
/// process's (zero, or [`keel_sim::disk::STALE_BYTE`]) is never a record line, since record
/// lines are ASCII (tested). So crash states that keep the same whole lines of it lead to
/// the same run, provided recovery gets as far as opening the sink: it does unless it trusts
/// a checkpoint it cannot use and stops (size-only, which has no checksum: a torn checkpoint
/// of the right length is trusted, and the run ends with the sink file as the power loss
/// left it, which the oracle then reads whole). None for the log sink (no file), without
/// tail repair (the bytes after a torn line stay, and later lines are read after them) and
/// without checksums.
pub fn line_read_files(sink: SinkKind, protocol: CheckpointProtocol) -> Vec<String> {
    if sink.is_transactional() || !protocol.tail_repair() || !protocol.checksum() {
        return Vec::new();
    }
    vec![sink.file_name().to_string()]
}

/// The suffix of the temporary files checkpoints are written through (`<name>.tmp`, full and
/// incremental alike).
pub const TEMP_SUFFIX: &str = ".tmp";

/// What the engine reads of its files after a power loss, as the simulated disk's classes
/// of crash states take it: the sink file as whole lines ([`line_read_files`]), and no
/// temporary file at all: recovery lists names and reads only those that parse as a
/// checkpoint, a manifest, a base or a delta, never a `.tmp` (its checkpoint is written
/// again, from the restored state, under the next index).
pub fn crash_readers(sink: SinkKind, protocol: CheckpointProtocol) -> CrashReaders {
    CrashReaders {
        line_files: line_read_files(sink, protocol),
        unread_suffixes: vec![TEMP_SUFFIX.to_string()],
        // Split where a fault follows the power loss: the caller asks (`Fault::PowerLossClass`
        // with `by_tail`, `CrashCounts::TailClasses`). Tail repair truncates and syncs only
        // where bytes follow the whole lines ([`SinkConnector::open`]).
        split_tails: false,
    }
}

/// [`readable_prefix_len_bytes`] of `contents`, reading only what follows the whole lines it
/// shares with `known` (those are record lines: `KnownSinkFile`).
pub fn readable_len_bytes(contents: &Contents, known: Option<&KnownSinkFile>) -> usize {
    let common_bytes = known.map_or(0, |known| known.contents().common_prefix_len(contents));
    readable_len_bytes_sharing(contents, known, common_bytes)
}

/// [`readable_len_bytes`] of `contents` whose first `common_bytes` are `known`'s (measured
/// already: a sweep's restart measures it once for three uses).
pub fn readable_len_bytes_sharing(
    contents: &Contents,
    known: Option<&KnownSinkFile>,
    common_bytes: usize,
) -> usize {
    let known_len_bytes = known.map_or(0, |known| known.lines_within(common_bytes));
    // Past the known file's lines, the lines a file read lately holds too (a depth-2 pair
    // reads on from its first fault's file).
    let read_len_bytes = match known {
        Some(known) if known_len_bytes < contents.len() => known.read_lines_len_bytes(contents),
        _ => 0,
    };
    let from = known_len_bytes.max(read_len_bytes);
    let rest = contents.copy_range(from..contents.len());
    let readable_bytes = from + readable_prefix_len_bytes(&rest);
    debug_assert_eq!(
        readable_bytes,
        readable_prefix_len_bytes(&contents.to_vec())
    );
    // Only a file with lines no remembered file covered is worth remembering.
    if let Some(known) = known.filter(|_| readable_bytes > from) {
        known.note_read(contents, readable_bytes);
    }
    readable_bytes
}

/// The keys of the lines of `bytes` that read as records, in order.
fn keys_of_lines(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| std::str::from_utf8(line).ok().and_then(Record::parse_line))
        .map(|record| record.key)
}

/// The engine's end of a sink: the process memory part, lost on a crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkConnector {
    kind: SinkKind,
    file: String,
    /// The idempotent sink's view of its own keys (refreshed on every request).
    index: KeyIndex,
}

impl SinkConnector {
    /// Opens the sink (one step), creating its file if needed, and syncs the directory.
    /// With `rewrite`, the same step writes the file back as it read it: a clean page a
    /// failed fsync left unpersisted is dirty again, and a file found is synced before the
    /// sink takes a record (a step of its own), so what recovery builds on is durable, as a
    /// restored checkpoint is (and a later power loss finds only the new process's appends
    /// pending, which the simulated disk's power-loss classes count on).
    /// With `tail_repair`, a tail
    /// that is not whole records (a torn append) is truncated away and the cut made durable,
    /// and the write-back writes only the whole records it keeps: what a later power loss
    /// can find pending then depends on the lines kept, not on how long the torn tail was
    /// (the simulated disk's classes split by tail count on it: `crash_readers`).
    /// With `known`, the lines the file shares with it are neither read again nor indexed
    /// again (a cache: see `known_sink.rs`).
    pub fn open<S: Storage>(
        kind: SinkKind,
        world: &mut World<S>,
        rewrite: bool,
        tail_repair: bool,
        known: Option<&Arc<KnownSinkFile>>,
    ) -> Result<SinkConnector, SinkError> {
        let file = kind.file_name().to_string();
        let (contents, readable_len_bytes, found) = world
            .effect_data("sink.open", file.as_str(), Data::File(&file), |env| {
                let found = env.disk.exists(&file);
                env.disk.open_or_create(&file)?;
                let contents = env.disk.read_shared(&file)?;
                let readable = readable_len_bytes(&contents, known.map(Arc::as_ref));
                let kept_len_bytes = if tail_repair {
                    readable
                } else {
                    contents.len()
                };
                if rewrite && kept_len_bytes > 0 {
                    env.disk.write_back(&file, kept_len_bytes as u64)?;
                }
                Ok((contents, readable, found))
            })?
            .map_err(|e: DiskError| SinkError::Fatal(format!("sink open: {e}")))?;
        // Whether an fsync must follow, and what a failed one failed at. A file found is
        // synced whatever it holds, so the steps of a recovery do not depend on the sink's
        // bytes (sweeps share a recovery between points whose disks differ only there).
        let mut sync = (rewrite && found).then_some("sink open");
        if readable_len_bytes < contents.len() {
            let dropped = contents.len() - readable_len_bytes;
            if tail_repair {
                world.note(format!(
                    "sink repair: truncate {file} at byte {readable_len_bytes} ({dropped} unreadable bytes)"
                ));
                let cut_bytes = if crate::mutants::active(crate::mutants::Mutant::TailRepairShort) {
                    readable_len_bytes.saturating_sub(1)
                } else {
                    readable_len_bytes
                };
                world
                    .effect_data("disk.truncate", file.as_str(), Data::File(&file), |env| {
                        env.disk.truncate(&file, cut_bytes as u64)
                    })?
                    .map_err(|e| SinkError::Fatal(format!("sink repair: {e}")))?;
                sync = Some("sink repair");
            } else {
                world.note(format!(
                    "sink {file}: {dropped} unreadable bytes at the end left in place"
                ));
            }
        }
        if let Some(context) = sync {
            // One fsync makes the cut and the written-back lines durable together.
            world
                .effect("disk.fsync", file.clone(), |env| env.disk.fsync(&file))?
                .map_err(|e| SinkError::Fatal(format!("{context}: {e}")))?;
        }
        // A file's name is durable only once its directory is synced: a new file's, and a
        // file a restart finds, which the process before may have created and died before
        // it synced the directory (recovery cannot tell, and the file it builds on would
        // vanish in a power loss; and a later power loss would find its name pending).
        world
            .effect("disk.fsync-dir", ".", |env| env.disk.fsync_dir())?
            .map_err(|e| SinkError::Fatal(format!("sink open: {e}")))?;
        Ok(SinkConnector {
            kind,
            file,
            index: KeyIndex::building_on(known),
        })
    }

    /// Builds on `known` from now on, if the file's bytes the key index has read (`file`
    /// is the file now) are whole lines of it: the same keys, looked up there instead.
    pub fn share_known(&mut self, known: &Arc<KnownSinkFile>, file: &Contents) {
        let indexed_len_bytes = self.index.indexed_len_bytes;
        if indexed_len_bytes <= known.shared_lines_len_bytes(file) as u64 {
            let index = KeyIndex::on_known(known, indexed_len_bytes);
            debug_assert!(index == self.index);
            self.index = index;
        }
    }

    /// Sends one record to the sink, retrying failed requests with backoff. `written` counts
    /// the records that reached the sink and `skipped` the ones the idempotent sink found
    /// there already, as the sink decided, even if the process then dies or the ack is lost:
    /// together they are every request the sink served.
    pub fn write<S: Storage>(
        &mut self,
        world: &mut World<S>,
        record: &Record,
        written: &mut u64,
        skipped: &mut u64,
    ) -> Result<WriteOutcome, SinkError> {
        let mut line = record.to_json_line();
        line.push('\n');
        let mut backoff_ms = SINK_BACKOFF_MS;
        for attempt in 1..=SINK_ATTEMPTS_MAX {
            let (file, kind, index) = (&self.file, self.kind, &mut self.index);
            let data = Data::File(file);
            let reply = world.request_data(SINK_WRITE_OP, record.key.as_str(), data, |env| {
                if kind == SinkKind::Idempotent {
                    index
                        .refresh(&mut env.disk, file)
                        .expect("the sink file exists once opened");
                    if index.contains(&record.key) {
                        if crate::mutants::active(crate::mutants::Mutant::SkipCountedAsWritten) {
                            *written += 1;
                        } else {
                            *skipped += 1;
                        }
                        return WriteOutcome::Skipped;
                    }
                }
                if kind == SinkKind::Append
                    && crate::mutants::active(crate::mutants::Mutant::AppendSkipsLinesInFile)
                {
                    let contents = env
                        .disk
                        .read(file)
                        .expect("the sink file exists once opened");
                    let record_line = &line.as_bytes()[..line.len() - 1];
                    if contents
                        .split(|&b| b == b'\n')
                        .any(|held| held == record_line)
                    {
                        *skipped += 1;
                        return WriteOutcome::Skipped;
                    }
                }
                env.disk
                    .append(file, line.as_bytes())
                    .expect("the sink file exists once opened");
                *written += 1;
                WriteOutcome::Written
            })?;
            match reply {
                Ok(outcome) => {
                    if outcome == WriteOutcome::Skipped {
                        world.note(format!(
                            "sink {}: skip duplicate key {}",
                            self.file, record.key
                        ));
                    }
                    return Ok(outcome);
                }
                Err(error) => {
                    world.note(format!(
                        "sink {}: write {} attempt {attempt} failed ({error}), retry in {backoff_ms}ms",
                        self.file, record.key
                    ));
                    world.sleep_until(world.now_ms() + backoff_ms)?;
                    backoff_ms = (backoff_ms * 2).min(SINK_BACKOFF_MAX_MS);
                }
            }
        }
        Err(SinkError::Fatal(format!(
            "sink write {} failed {SINK_ATTEMPTS_MAX} times",
            record.key
        )))
    }

    /// Whether this connector goes on as `other` does over the same sink file: the same
    /// sink and file. The idempotent sink's key index is not compared: it holds the keys of
    /// the file's complete lines up to where it last read, and it reads the rest of them
    /// before every use (`KeyIndex::refresh`; a file cut below that point is read again), so
    /// over equal files two indexes decide alike whatever each has read so far (one
    /// refreshed before its last append, one after a replay that only skipped).
    pub fn same_future_as(&self, other: &SinkConnector) -> bool {
        self.kind == other.kind && self.file == other.file
    }

    /// Makes every record written so far durable (one step: fsync of the sink file).
    pub fn sync<S: Storage>(&mut self, world: &mut World<S>) -> Result<(), SinkError> {
        let file = &self.file;
        world
            .effect("disk.fsync", file.clone(), |env| env.disk.fsync(file))?
            .map_err(|e| SinkError::Fatal(format!("sink sync: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordKind;

    #[test]
    fn a_sink_file_is_named_after_its_kind() {
        for kind in SinkKind::ALL {
            assert_eq!(kind.file_name(), format!("sink-{}.jsonl", kind.name()));
        }
    }

    #[test]
    fn the_readable_prefix_stops_at_the_first_torn_line() {
        let a = r#"{"key": "13:10", "window_end": 10, "sum": 55, "watermark": 10, "kind": "fire"}"#;
        let whole = format!("{a}\n{a}\n");
        assert_eq!(readable_prefix_len_bytes(whole.as_bytes()), whole.len());
        let torn = format!("{a}\n{}", &a[..20]);
        assert_eq!(readable_prefix_len_bytes(torn.as_bytes()), a.len() + 1);
        let gap = format!("{a}\n\0\0\0\n{a}\n");
        assert_eq!(readable_prefix_len_bytes(gap.as_bytes()), a.len() + 1);
        assert_eq!(readable_prefix_len_bytes(b""), 0);
    }

    /// The claim behind [`line_read_files`]: the lines the engine writes are ASCII, and a
    /// line with any run of its bytes replaced by zeros or by stale bytes (what a power loss
    /// leaves where a write was lost) is not a record line.
    #[test]
    fn a_record_line_with_bytes_a_power_loss_left_is_never_a_record() {
        let records = [
            ("13:10", 10, 55, 10, RecordKind::Fire),
            ("flush:-20", -20, -7, i64::MIN, RecordKind::Flush),
            (
                "pt3900.000:0",
                0,
                i128::from(i64::MAX),
                i64::MAX,
                RecordKind::LateUpdate,
            ),
        ];
        for (key, window_end, sum, watermark, kind) in records {
            let line = Record {
                key: key.to_string(),
                window_end,
                sum,
                watermark,
                kind,
            }
            .to_json_line();
            assert!(line.is_ascii(), "{line}");
            assert!(Record::is_record_line(line.as_bytes()));
            let bytes = line.as_bytes();
            for fill in [0u8, keel_sim::disk::STALE_BYTE] {
                for start in 0..bytes.len() {
                    for end in start + 1..=bytes.len() {
                        let mut damaged = bytes.to_vec();
                        damaged[start..end].fill(fill);
                        assert!(
                            !Record::is_record_line(&damaged),
                            "{line}: bytes {start}..{end} as {fill:#04x}"
                        );
                    }
                }
            }
        }
        assert!(line_read_files(SinkKind::Transactional, CheckpointProtocol::Safe).is_empty());
        assert!(line_read_files(SinkKind::Append, CheckpointProtocol::NoTailRepair).is_empty());
        assert!(line_read_files(SinkKind::Append, CheckpointProtocol::SizeOnly).is_empty());
        assert_eq!(
            line_read_files(SinkKind::Idempotent, CheckpointProtocol::InPlace),
            vec!["sink-idempotent.jsonl".to_string()]
        );
    }

    /// A sink line with `key`.
    fn line_of(key: &str) -> String {
        format!(
            r#"{{"key": "{key}", "window_end": 10, "sum": 55, "watermark": 10, "kind": "fire"}}"#
        )
    }

    /// A key index grown one key at a time from `keys`, after the first `known_lines` of
    /// them were looked up in a known file (of those lines and one more) instead, with a copy
    /// taken after `fork_at` keys that then grows on its own: the index holds exactly its
    /// keys, and equals an index of the same keys however its parts are split.
    fn check(keys: &[&str], known_lines: usize, fork_at: usize) -> Vec<String> {
        let file: String = keys[..known_lines]
            .iter()
            .chain(["after the known lines"].iter())
            .map(|key| line_of(key) + "\n")
            .collect();
        let known = Arc::new(KnownSinkFile::new(&Contents::from(file.as_bytes())));
        let known_len_bytes: usize = keys[..known_lines]
            .iter()
            .map(|k| line_of(k).len() + 1)
            .sum();
        assert_eq!(
            known.shared_lines_len_bytes(&Contents::from(&file.as_bytes()[..known_len_bytes + 5])),
            known_len_bytes
        );
        let mut index = KeyIndex::on_known(&known, known_len_bytes as u64);
        let mut copy = None;
        for (i, key) in keys.iter().enumerate().skip(known_lines) {
            if i == fork_at {
                copy = Some(index.clone());
            }
            index.insert(key.to_string());
            if let Some(copy) = &mut copy {
                copy.insert(format!("copy {key}"));
            }
        }
        let listed: Vec<String> = index.key_set().into_iter().map(String::from).collect();
        let mut expected: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        expected.sort();
        expected.dedup();
        assert_eq!(listed, expected);
        assert!(keys.iter().all(|key| index.contains(key)));
        assert!(!index.contains("absent"));
        assert!(
            !index.contains("after the known lines"),
            "past the known length"
        );
        let at_once = KeyIndex {
            indexed_len_bytes: known_len_bytes as u64,
            merged: Arc::new(expected.iter().cloned().collect()),
            ..KeyIndex::default()
        };
        assert_eq!(index, at_once);
        if let Some(copy) = copy {
            assert_ne!(copy, index);
            assert_eq!(
                copy.key_set()
                    .iter()
                    .filter(|k| k.starts_with("copy "))
                    .count(),
                keys.len() - fork_at.max(known_lines)
            );
        }
        listed
    }

    /// A file that grows along the known file is indexed as known lines, none of its keys
    /// copied; once it parts from it, its keys are its own; the keys are its lines' either
    /// way.
    #[test]
    fn a_file_growing_along_the_known_one_is_indexed_as_known_lines() {
        let lines: Vec<String> = ["a", "b", "a", "c", "d"]
            .iter()
            .map(|key| line_of(key) + "\n")
            .collect();
        let known = Arc::new(KnownSinkFile::new(&Contents::from(
            lines.concat().as_bytes(),
        )));
        let mut disk = keel_sim::Disk::new();
        disk.open_or_create("sink").unwrap();
        let mut index = KeyIndex::building_on(Some(&known));
        let mut expected = BTreeSet::new();
        for (i, line) in lines[..3].iter().enumerate() {
            disk.append("sink", line.as_bytes()).unwrap();
            index.refresh(&mut disk, "sink").unwrap();
            expected.insert(["a", "b", "a"][i]);
            assert_eq!(index.key_set(), expected, "line {i}");
            assert!(index.only_known(), "line {i}");
        }
        // A torn tail is not indexed yet, and then a line the known file does not have.
        disk.append("sink", &line_of("c").as_bytes()[..9]).unwrap();
        index.refresh(&mut disk, "sink").unwrap();
        assert!(index.only_known());
        disk.append("sink", b"x\n").unwrap();
        disk.append("sink", (line_of("e") + "\n").as_bytes())
            .unwrap();
        index.refresh(&mut disk, "sink").unwrap();
        assert!(!index.only_known());
        expected.insert("e");
        assert_eq!(index.key_set(), expected);
        assert!(index.contains("e") && index.contains("a") && !index.contains("c"));
    }

    #[test]
    fn a_key_index_holds_its_keys_in_order_however_it_is_split() {
        let many: Vec<String> = (0..3_000)
            .map(|i| format!("{}:{}", (i * 7_919) % 3_001, i % 10))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        // Past several merges (the first after 257 keys), with a copy taken before some.
        assert_eq!(check(&many, 0, 1_000).len(), 3_000);
        assert_eq!(check(&many, 0, 0).len(), 3_000);
        // The first keys in a known file; the rest merged past it, with a copy before.
        assert_eq!(check(&many, 1_500, 2_000).len(), 3_000);
        assert_eq!(check(&many, 2_999, 2_999).len(), 3_000);
        assert_eq!(check(&["b", "a", "b", "c"], 0, 2), ["a", "b", "c"]);
        // A key known, then inserted again: held once.
        assert_eq!(check(&["b", "a", "b", "c"], 1, 2), ["a", "b", "c"]);
        assert_eq!(check(&[], 0, 0), Vec::<String>::new());
    }
}
