//! Incremental checkpoints (`--state-backend incremental`): a chain of a base and deltas,
//! named by a manifest, and the crash-consistency protocol that writes and recovers it.
//!
//! # Files
//!
//! Files are numbered by checkpoint, `<n>` = 1, 2, 3, ... (one more than the committed
//! chain's; not the checkpoint's index, which two checkpoints share at the end of a
//! transactional run): the same numbers in a replay as in the run it replays.
//!
//! - `base-<n>.json`: every window at checkpoint `n`, in the full checkpoint's format
//!   (`keel-checkpoint v1` header with length and CRC-32, see `checkpoint.rs`).
//! - `delta-<n>.json`: what changed since the checkpoint before (`keel-delta v1` header):
//!   the windows created, updated or fired since then (whole), the ends of those purged,
//!   max_ts, dropped_late, pending transactions, and its **parent**: the file it applies on
//!   (the previous delta, or the base) by name, number, index, length and CRC-32 of its
//!   bytes.
//! - `manifest-<n>.json`: the commit record of checkpoint `n` (`keel-manifest v1` header):
//!   the chain's base and its head (newest delta, absent when the chain is the base alone),
//!   each by name, number, index, length and CRC-32, and the number of deltas. Every file of the
//!   chain is thus named with its checksum by a file that is itself checksummed, back to
//!   the manifest. (A manifest listing every delta would cost O(chain) bytes at every
//!   checkpoint, which the long chains below would make quadratic; the links keep a
//!   checkpoint's cost to what changed.)
//!
//! # Compaction
//!
//! A checkpoint writes a new base instead of a delta when there is no chain yet, when the
//! chain's deltas add up to at least the base's size (so writing bases costs at most what
//! the deltas cost: amortized linear in the stream, whatever its number of windows), or when
//! the chain already has [`chain_deltas_max`] deltas: [`CHAIN_DELTAS_MAX`], or one per
//! [`BASE_BYTES_PER_DELTA`] bytes of the base if that is more. The count bounds what
//! recovery reads, file by file, to what reading the base costs anyway; a fixed count would
//! make a stream whose windows are never purged quadratic (a base of every window written
//! every 1,024 checkpoints: a fifth of a 1,000,000-event run). The chain is then that base
//! alone.
//!
//! # Writing checkpoint `n` (`safe`), in this order
//!
//! 1. Sync the sink (as the full protocol): the checkpoint must not say records were
//!    delivered that a power loss can take back.
//! 2. Create and write `delta-<n>.json` (or `base-<n>.json`), fsync it, fsync the directory:
//!    its bytes and its name are durable before anything names it. (Written under its final
//!    name: no manifest names it yet, so a torn one is never read; a replay that reaches `n`
//!    again after a crash creates it again, truncating what the crash left.)
//! 3. Write `manifest-<n>.json.tmp`, fsync it, rename it to `manifest-<n>.json`, fsync the
//!    directory: the commit point. A power loss before the directory fsync keeps the
//!    previous manifest (still on disk: nothing was removed yet) or this one whole.
//! 4. Only then remove every checkpoint file with a number at or below `n` that the new
//!    chain does not name: the previous manifest, and after a compaction the old base and
//!    its deltas (and what an earlier crash left: a base where the replay wrote a delta).
//!    The disk stays bounded (`bounded-disk`): a chain, its manifest, the sink.
//!
//! Any failed fsync stops the process (an I/O error aborts the incarnation).
//!
//! # Recovery
//!
//! Manifests are tried newest first. A manifest is trusted only if its own header
//! validates and every file of its chain does: present, of the length and CRC-32 its
//! referrer recorded, with a valid header, and linked back to the manifest's base in at
//! most its number of deltas. A manifest that names a file that did not survive (missing,
//! torn, another checksum) is **rejected**, noted (`rejected_checkpoints`) and the next
//! older manifest is tried; under `safe` this never happens (step 2 before step 3). A file
//! whose checksum matches but that does not decode is the engine's own defect: recovery
//! fails (`Invalid::TrustedButCorrupt`), as with full checkpoints. The state is the base
//! with every delta applied in order. Recovery then fsyncs the manifest and every file of
//! the chain and the directory (what it builds on must be durable: a file renamed or
//! written before its fsync may still be in the page cache only), and removes the files
//! its manifest makes stale (step 4's rule), so a crash between steps 3 and 4 leaves no
//! file for good.
//!
//! # The unsafe variants, one decision each
//!
//! - `no-delta-fsync`: step 2 without the fsync of the delta: the manifest is durable, the
//!   delta it names may not be; after a power loss recovery rejects the manifest and falls
//!   back to an older one, or to nothing once the older one is removed: a rollback.
//! - `delete-then-rename`: step 4 before the rename of step 3: the previous manifest (and
//!   after a compaction the old chain) is gone before the new one commits; a crash between
//!   the two leaves no valid manifest at all: recovery starts from event 0.
//! - The other protocols keep their one decision: `no-fsync-rename` fsyncs no file,
//!   `no-dir-fsync` never the directory, `size-only` checks lengths instead of CRC-32s and
//!   fsyncs nothing, and the sink's decisions are the full mode's. `in-place` has no
//!   incremental form.

use crate::checkpoint::{
    check_state, check_state_windows_in_range, seal, splice_windows, unseal, window_in_range,
    Checkpoint, Invalid, PendingTxn, WindowFile,
};
use crate::encode_memo::{encode_sealed, EncodeMemo, EncodedFile};
use crate::window::OperatorState;
use keel_sim::Contents;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

mod decoded;
pub use decoded::DecodedFiles;

/// A chain may always hold this many deltas; more on a big base ([`chain_deltas_max`]).
pub const CHAIN_DELTAS_MAX: usize = 1024;

/// One more delta allowed in a chain per this many bytes of its base.
pub const BASE_BYTES_PER_DELTA: u64 = 256;

/// The most deltas a chain on a base of `base_len_bytes` holds: the next checkpoint then
/// compacts it into a new base.
pub fn chain_deltas_max(base_len_bytes: u64) -> u64 {
    (CHAIN_DELTAS_MAX as u64).max(base_len_bytes / BASE_BYTES_PER_DELTA)
}

const BASE_PREFIX: &str = "base-";
const DELTA_PREFIX: &str = "delta-";
const MANIFEST_PREFIX: &str = "manifest-";
const SUFFIX: &str = ".json";
const BASE_MAGIC: &str = "keel-checkpoint v1";
const DELTA_MAGIC: &str = "keel-delta v1";
const MANIFEST_MAGIC: &str = "keel-manifest v1";

/// What kind of incremental checkpoint file a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    Base,
    Delta,
    Manifest,
}

impl FileKind {
    fn prefix(self) -> &'static str {
        match self {
            FileKind::Base => BASE_PREFIX,
            FileKind::Delta => DELTA_PREFIX,
            FileKind::Manifest => MANIFEST_PREFIX,
        }
    }

    /// `<kind>-<index>.json`.
    pub fn file_name(self, number: u64) -> String {
        format!("{}{number}{SUFFIX}", self.prefix())
    }
}

/// The kind and index an incremental checkpoint file name names, or `None` for any other
/// file (temporary files too).
pub fn parse_file_name(name: &str) -> Option<(FileKind, u64)> {
    [FileKind::Base, FileKind::Delta, FileKind::Manifest]
        .into_iter()
        .find_map(|kind| {
            let digits = name.strip_prefix(kind.prefix())?.strip_suffix(SUFFIX)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok().map(|index| (kind, index))
        })
}

/// [`parse_file_name`] of a name exactly as [`FileKind::file_name`] makes it (no leading
/// zero), without making the name: `delta-07.json` is not one.
pub fn parse_canonical_file_name(name: &str) -> Option<(FileKind, u64)> {
    let (kind, index) = parse_file_name(name)?;
    let digits = index.checked_ilog10().map_or(1, |log| log as usize + 1);
    (name.len() == kind.prefix().len() + digits + SUFFIX.len()).then_some((kind, index))
}

/// A file of a chain as the file after it (or the manifest) names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRef {
    pub file: String,
    /// The checkpoint's number in the file's name.
    pub number: u64,
    /// The checkpoint index (the next event to read) the file brings the state to.
    pub index: u64,
    pub len: u64,
    /// CRC-32 of the file's bytes, header included (8 hex digits).
    pub crc32: String,
}

impl FileRef {
    fn of(file: String, number: u64, index: u64, bytes: &EncodedFile) -> FileRef {
        FileRef {
            file,
            number,
            index,
            len: bytes.len_bytes() as u64,
            crc32: format!("{:08x}", bytes.crc32()),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeltaFile {
    index: u64,
    parent: FileRef,
    max_ts: Option<i64>,
    windows: Vec<WindowFile>,
    removed: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    transactions: Vec<PendingTxn>,
    #[serde(default)]
    dropped_late: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    number: u64,
    index: u64,
    base: FileRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    head: Option<FileRef>,
    deltas: u64,
}

/// The committed chain: its base and its deltas, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The number of the checkpoint its manifest commits (1, 2, ...: one more at every
    /// checkpoint, so two checkpoints at the same index, the transactional sink's last one,
    /// have files of different names).
    pub number: u64,
    /// The checkpoint index its manifest commits.
    pub index: u64,
    pub base: FileRef,
    /// Shared between the engine's copies (a sweep clones the engine several times per
    /// point, and a chain may hold thousands of deltas): the next commit copies it once.
    pub deltas: Arc<Vec<FileRef>>,
    /// The deltas' bytes, summed (what compaction compares with the base's).
    pub delta_bytes: u64,
}

impl Chain {
    /// Whether the next checkpoint writes a new base (see the module's "Compaction").
    pub fn compact_next(&self) -> bool {
        self.deltas.len() as u64 >= chain_deltas_max(self.base.len)
            || self.delta_bytes >= self.base.len
    }

    /// Whether the chain names the file of `kind` and `index` (its manifest aside). Its
    /// deltas are in index order, so a binary search.
    pub fn names(&self, kind: FileKind, number: u64) -> bool {
        match kind {
            FileKind::Base => number == self.base.number,
            FileKind::Delta => self
                .deltas
                .binary_search_by_key(&number, |d| d.number)
                .is_ok(),
            FileKind::Manifest => false,
        }
    }

    fn head(&self) -> &FileRef {
        self.deltas.last().unwrap_or(&self.base)
    }
}

/// What one incarnation knows of its incremental checkpoints: the windows changed since the
/// last commit, the committed chain and the checkpoint files in the directory. Part of what
/// converging compares (`Engine::same_future_as`): the next delta, the next compaction and
/// the next removals depend on it.
///
/// The files it knows to exist are the committed chain's and `loose`, the others, kept
/// apart so that a checkpoint looks at what it may remove, never at the whole chain (up to
/// [`chain_deltas_max`] files): its cost stays what changed, whatever the chain's length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Incremental {
    /// Ends of the windows created, updated, fired or purged since the last commit.
    pub dirty: BTreeSet<i64>,
    pub chain: Option<Chain>,
    /// The incremental checkpoint files this process knows to exist that the committed
    /// chain does not name, by (number, kind): every manifest, the file of a checkpoint not
    /// yet committed, what an earlier crash left.
    pub loose: BTreeSet<(u64, FileKind)>,
}

/// One file the next checkpoint writes: its name, kind and bytes, and its manifest.
pub struct Written {
    pub name: String,
    pub kind: FileKind,
    /// The checkpoint's number (one more than the committed chain's).
    pub number: u64,
    /// Shared with the memo that encoded it, if any (`encode_memo.rs`).
    pub bytes: Arc<EncodedFile>,
    /// The manifest's bytes.
    pub manifest: Vec<u8>,
    /// The file as the manifest names it.
    file: FileRef,
}

impl Incremental {
    /// The files checkpoint `index` writes: a delta of `dirty` on the chain, or a new base.
    pub fn prepare(
        &self,
        index: u64,
        state: &OperatorState,
        transactions: &[PendingTxn],
        checksum: bool,
        encoded: Option<&EncodeMemo>,
    ) -> Written {
        let (kind, bytes) = match &self.chain {
            Some(chain) if !chain.compact_next() => {
                let mut windows = Vec::new();
                let mut removed = Vec::new();
                for &end in &self.dirty {
                    match state.windows.get(&end) {
                        Some(w) => windows.push((end, w)),
                        None if crate::mutants::active(
                            crate::mutants::Mutant::DeltaOmitsPurged,
                        ) => {}
                        None => removed.push(end),
                    }
                }
                // The windows are spliced in by hand, as a base's are (`encode_state_body`).
                let delta = DeltaFile {
                    index,
                    parent: chain.head().clone(),
                    max_ts: state.max_ts,
                    windows: Vec::new(),
                    removed,
                    transactions: transactions.to_vec(),
                    dropped_late: state.dropped_late,
                };
                let frame = serde_json::to_vec(&delta).expect("a delta always serializes");
                let body = splice_windows(&frame, windows.into_iter());
                let bytes = seal(DELTA_MAGIC, &body, checksum);
                (FileKind::Delta, Arc::new(EncodedFile::new(bytes)))
            }
            _ => {
                let file = encode_sealed(BASE_MAGIC, checksum, index, state, transactions, encoded);
                (FileKind::Base, file)
            }
        };
        let number = self.chain.as_ref().map_or(1, |c| c.number + 1);
        let name = kind.file_name(number);
        let file = FileRef::of(name.clone(), number, index, &bytes);
        let manifest = match (&self.chain, kind) {
            (Some(chain), FileKind::Delta) => ManifestFile {
                number,
                index,
                base: chain.base.clone(),
                head: Some(file.clone()),
                deltas: chain.deltas.len() as u64 + 1,
            },
            _ => ManifestFile {
                number,
                index,
                base: file.clone(),
                head: None,
                deltas: 0,
            },
        };
        let manifest = seal(
            MANIFEST_MAGIC,
            &serde_json::to_vec(&manifest).expect("a manifest always serializes"),
            checksum,
        );
        Written {
            name,
            kind,
            number,
            bytes,
            manifest,
            file,
        }
    }

    /// The known files committing `written` makes stale: every checkpoint file with a
    /// number at or below its own that its chain does not name, its manifest aside (step
    /// 4). The committed chain's files are all named again by a delta on it, all stale
    /// after a compaction (a new base): only the loose files are looked through.
    pub fn stale(&self, written: &Written) -> Vec<(u64, FileKind)> {
        let on = self
            .chain
            .as_ref()
            .filter(|_| written.kind == FileKind::Delta);
        let named = |kind: FileKind, number: u64| {
            (kind, number) == (written.kind, written.number)
                || on.is_some_and(|chain| chain.names(kind, number))
        };
        let mut stale = self.stale_loose(written.number, named);
        if let (FileKind::Base, Some(old)) = (written.kind, &self.chain) {
            stale.insert((old.base.number, FileKind::Base));
            stale.extend(old.deltas.iter().map(|d| (d.number, FileKind::Delta)));
        }
        stale.into_iter().collect()
    }

    /// The known files the committed chain makes stale (what recovery removes once it
    /// restored the chain: `stale`'s rule).
    pub fn stale_committed(&self) -> Vec<(u64, FileKind)> {
        let Some(chain) = &self.chain else {
            return Vec::new();
        };
        let named = |kind: FileKind, number: u64| chain.names(kind, number);
        self.stale_loose(chain.number, named).into_iter().collect()
    }

    /// The loose files at or below `number` that `named` does not name, the manifest of
    /// `number` aside.
    fn stale_loose(
        &self,
        number: u64,
        named: impl Fn(FileKind, u64) -> bool,
    ) -> BTreeSet<(u64, FileKind)> {
        self.loose
            .range(..=(number, FileKind::Manifest))
            .copied()
            .filter(|&(n, kind)| {
                let its_manifest = kind == FileKind::Manifest && n == number;
                !(its_manifest || named(kind, n))
            })
            .collect()
    }

    /// `written`'s manifest is durable: its chain is the committed one (a delta extends the
    /// chain in place: no copy of it).
    pub fn commit(&mut self, written: Written) {
        let Written {
            kind, number, file, ..
        } = written;
        self.loose.remove(&(number, kind));
        match (self.chain.as_mut(), kind) {
            (Some(chain), FileKind::Delta) => {
                chain.number = number;
                chain.index = file.index;
                chain.delta_bytes += file.len;
                Arc::make_mut(&mut chain.deltas).push(file);
            }
            _ => {
                self.chain = Some(Chain {
                    number,
                    index: file.index,
                    base: file,
                    deltas: Arc::default(),
                    delta_bytes: 0,
                });
            }
        }
    }

    /// Recovery restored `chain`: it is the committed one, and the files it names are no
    /// longer loose.
    pub fn adopt(&mut self, chain: Chain) {
        self.loose.remove(&(chain.base.number, FileKind::Base));
        for delta in chain.deltas.iter() {
            self.loose.remove(&(delta.number, FileKind::Delta));
        }
        self.chain = Some(chain);
    }
}

/// A manifest and its chain, read and checked: the restored checkpoint and the chain.
#[derive(Clone, Debug)]
pub struct Restored {
    pub checkpoint: Checkpoint,
    pub chain: Chain,
    /// The state's first window behind the watermark that has not fired, for an
    /// out-of-orderness: shared by the clones a memo hands out (`chain_memo.rs`), so the
    /// O(windows) check runs once per restore, not once per point that takes it.
    unfired: Arc<OnceLock<(i64, Option<i64>)>>,
}

impl Restored {
    /// [`OperatorState::unfired_behind_watermark`] of the restored state.
    pub fn unfired_behind_watermark(&self, out_of_orderness: i64) -> Option<i64> {
        match self.unfired.get() {
            Some(&(ooo, unfired)) if ooo == out_of_orderness => unfired,
            _ => {
                let unfired = self
                    .checkpoint
                    .state
                    .unfired_behind_watermark(out_of_orderness);
                // A cell set already (by another out-of-orderness) keeps its value.
                let _ = self.unfired.set((out_of_orderness, unfired));
                unfired
            }
        }
    }
}

/// Reads files for [`restore`]: the bytes of a name, `Ok(None)` if it does not exist.
pub trait ReadFile {
    type Error;
    fn read_file(&mut self, name: &str) -> Result<Option<Contents>, Self::Error>;
}

/// Why a manifest was not restored, or a read that failed (`Io`).
pub enum NotRestored<E> {
    Invalid(Invalid),
    Io(E),
}

impl<E> From<Invalid> for NotRestored<E> {
    fn from(invalid: Invalid) -> Self {
        NotRestored::Invalid(invalid)
    }
}

/// Reads the chain the manifest `manifest_bytes` (named `manifest_name`) names and applies
/// it, checking every link (see "Recovery" in the module header).
pub fn restore<R: ReadFile>(
    manifest_name: &str,
    manifest_bytes: &[u8],
    checksum: bool,
    reader: &mut R,
    decoded: Option<&DecodedFiles>,
) -> Result<Restored, NotRestored<R::Error>> {
    let trusted = |why: String| {
        if checksum {
            Invalid::TrustedButCorrupt(format!("passes its checksum but {why}"))
        } else {
            Invalid::TrustedButCorrupt(format!("has the right length but {why}"))
        }
    };
    let body = unseal(MANIFEST_MAGIC, manifest_bytes, checksum)?;
    let manifest: ManifestFile = serde_json::from_slice(body)
        .map_err(|e| trusted(format!("is an unreadable manifest: {e}")))?;
    if manifest.deltas > chain_deltas_max(manifest.base.len) {
        return Err(trusted(format!("names {} deltas", manifest.deltas)).into());
    }
    // Walk from the head back to the base, each file checked against its referrer.
    let mut deltas: Vec<(FileRef, Arc<DeltaFile>)> = Vec::new();
    let mut next = manifest.head.clone();
    let mut referrer = manifest_name.to_string();
    while let Some(file) = next {
        // Bounded by the manifest's count, itself at most `chain_deltas_max` of its base.
        if deltas.len() as u64 >= manifest.deltas {
            return Err(trusted(format!("has more than {} deltas", manifest.deltas)).into());
        }
        if file.file != FileKind::Delta.file_name(file.number) {
            return Err(trusted(format!("names {} as delta {}", file.file, file.number)).into());
        }
        let contents = read_contents(&file, &referrer, reader)?;
        let delta = match decoded.and_then(|d| d.delta(&file, checksum, &contents)) {
            Some(kept) => kept,
            None => {
                let bytes = contents.to_vec();
                check_named(&file, &referrer, checksum, &bytes)?;
                let delta_body = unseal(DELTA_MAGIC, &bytes, checksum)
                    .map_err(|why| rejected_file(&file.file, &referrer, why))?;
                let delta: Arc<DeltaFile> =
                    Arc::new(serde_json::from_slice(delta_body).map_err(|e| {
                        trusted(format!("names {}, an unreadable delta: {e}", file.file))
                    })?);
                if let Some(d) = decoded {
                    d.keep_delta(&file, checksum, contents, &delta);
                }
                delta
            }
        };
        if delta.index != file.index
            || delta.parent.index > delta.index
            || delta.parent.number >= file.number
        {
            return Err(trusted(format!(
                "names {}, which holds index {}",
                file.file, delta.index
            ))
            .into());
        }
        referrer = file.file.clone();
        next = if delta.parent == manifest.base {
            None
        } else {
            Some(delta.parent.clone())
        };
        deltas.push((file, delta));
    }
    if deltas.len() as u64 != manifest.deltas {
        return Err(trusted(format!(
            "names {} deltas, its chain has {}",
            manifest.deltas,
            deltas.len()
        ))
        .into());
    }
    if let Some((_, oldest)) = deltas.last() {
        if oldest.parent != manifest.base {
            return Err(trusted("has a chain that does not reach its base".to_string()).into());
        }
    }
    if manifest.base.file != FileKind::Base.file_name(manifest.base.number) {
        return Err(trusted(format!(
            "names {} as base {}",
            manifest.base.file, manifest.base.number
        ))
        .into());
    }
    let base_contents = read_contents(&manifest.base, &referrer, reader)?;
    let kept_base = decoded.and_then(|d| d.base(&manifest.base, checksum, &base_contents));
    let mut checkpoint = match kept_base {
        Some(checkpoint) => checkpoint,
        None => {
            let base_bytes = base_contents.to_vec();
            check_named(&manifest.base, &referrer, checksum, &base_bytes)?;
            let checkpoint =
                Checkpoint::decode_file(&base_bytes, checksum).map_err(|why| match why {
                    Invalid::Rejected(why) => {
                        rejected_file(&manifest.base.file, &referrer, Invalid::Rejected(why))
                    }
                    Invalid::TrustedButCorrupt(why) => Invalid::TrustedButCorrupt(format!(
                        "names {}, which {why}",
                        manifest.base.file
                    )),
                })?;
            if let Some(d) = decoded {
                d.keep_base(&manifest.base, checksum, base_contents, &checkpoint);
            }
            checkpoint
        }
    };
    if checkpoint.index != manifest.base.index {
        return Err(trusted(format!(
            "names {}, which holds index {}",
            manifest.base.file, checkpoint.index
        ))
        .into());
    }
    let mut delta_bytes = 0;
    let mut refs = Vec::new();
    // The base's windows are in range (decoding it checked each); so are the state's if
    // every delta's are, and then only its other numbers are left to check: reading every
    // window of the run at each restore the chain memo misses made a sweep's checks grow
    // as the windows times the checkpoints.
    let mut windows_in_range = true;
    for (file, delta) in deltas.into_iter().rev() {
        windows_in_range &= delta.windows.iter().all(|w| window_in_range(&w.state()));
        apply(&mut checkpoint, &delta)
            .map_err(|why| trusted(format!("names {}, {why}", file.file)))?;
        delta_bytes += file.len;
        refs.push(file);
    }
    if checkpoint.index != manifest.index {
        return Err(trusted(format!(
            "commits index {} but its chain ends at {}",
            manifest.index, checkpoint.index
        ))
        .into());
    }
    let checked = if windows_in_range {
        let checked = check_state_windows_in_range(&checkpoint.state);
        debug_assert_eq!(checked, check_state(&checkpoint.state));
        checked
    } else {
        check_state(&checkpoint.state)
    };
    checked.map_err(|why| trusted(format!("has a chain whose state {why}")))?;
    Ok(Restored {
        chain: Chain {
            number: manifest.number,
            index: manifest.index,
            base: manifest.base,
            deltas: Arc::new(refs),
            delta_bytes,
        },
        checkpoint,
        unfired: Arc::default(),
    })
}

/// A delta applied on the checkpoint before it.
fn apply(checkpoint: &mut Checkpoint, delta: &DeltaFile) -> Result<(), String> {
    if delta.parent.index != checkpoint.index {
        return Err(format!(
            "a delta on index {}, applied on {}",
            delta.parent.index, checkpoint.index
        ));
    }
    let mut seen = BTreeMap::new();
    for w in &delta.windows {
        if seen.insert(w.end, ()).is_some() {
            return Err(format!("a delta with window {} twice", w.end));
        }
        checkpoint.state.windows.insert(w.end, w.state());
    }
    for end in &delta.removed {
        checkpoint.state.windows.remove(end);
    }
    checkpoint.index = delta.index;
    checkpoint.state.max_ts = delta.max_ts;
    checkpoint.state.dropped_late = delta.dropped_late;
    checkpoint.transactions = delta.transactions.clone();
    Ok(())
}

fn rejected_file(file: &str, referrer: &str, why: Invalid) -> Invalid {
    match why {
        Invalid::Rejected(why) => Invalid::Rejected(format!(
            "names {file}, which is damaged ({why}; named by {referrer})"
        )),
        trusted => trusted,
    }
}

/// The bytes of the file `file` names (`referrer` names it), rejected if it is missing.
fn read_contents<R: ReadFile>(
    file: &FileRef,
    referrer: &str,
    reader: &mut R,
) -> Result<Contents, NotRestored<R::Error>> {
    let contents = reader
        .read_file(&file.file)
        .map_err(NotRestored::Io)?
        .ok_or_else(|| {
            Invalid::Rejected(format!(
                "names {}, which is missing (named by {referrer})",
                file.file
            ))
        })?;
    Ok(contents)
}

/// Rejects `bytes` if they are not the file `file` records (its length, and with
/// `checksum` its CRC-32).
fn check_named(
    file: &FileRef,
    referrer: &str,
    checksum: bool,
    bytes: &[u8],
) -> Result<(), Invalid> {
    let matches = bytes.len() as u64 == file.len
        && (!checksum || format!("{:08x}", crc32fast::hash(bytes)) == file.crc32);
    if !matches {
        return Err(Invalid::Rejected(format!(
            "names {}, which is not the file {referrer} recorded ({} bytes)",
            file.file,
            bytes.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
