//! An in-memory disk with one flat directory, whose files keep their durable contents apart
//! from their pending (unsynced) operations and from their unpersisted page-cache bytes.
//!
//! Crash model:
//! - **Process crash** (kill -9): the process's memory is gone, the kernel's page cache is
//!   not. Every completed operation, synced or not, stays visible: the disk is unchanged
//!   (unpersisted bytes included: a restarted process reads them too).
//! - Durability is tracked from the start so that a power loss can be resolved on the same
//!   structure: each file has `durable` bytes (what its blocks on disk hold), a list of
//!   pending data operations (dirty pages) since its last fsync, and `unpersisted` byte
//!   ranges (clean pages that hold data the disk does not: see rule 5); the directory has
//!   `durable_names` (what survived its last fsync) and a list of pending namespace
//!   operations since then.
//!   - `fsync(file)` makes that file's pending data and size durable, not its name, and not
//!     its unpersisted bytes (they are clean: no fsync writes them again).
//!   - `fsync_dir()` makes every create, rename and unlink durable, not any file's data.
//! - **Power loss** ([`Disk::power_loss`], rules in the `power_loss` module): everything
//!   durable stays; each pending operation is resolved on its own, so the disk wakes up in
//!   one of many crash states, numbered so that a test can enumerate them or draw one:
//!   1. unsynced writes, appends and truncates of a file survive in any subset;
//!   2. fsync(file) makes data and size durable, not the name; only fsync_dir makes a
//!      created or renamed name durable;
//!   3. writes tear at sector boundaries ([`Disk::with_sector_size`], 512 bytes by default),
//!      a torn sector keeping a prefix of its new bytes, and a file's new size may survive
//!      without its new data (the gap reads as zeros, or as stale bytes on xfs);
//!   4. create, rename and unlink are atomic and journaled in order: a prefix of the pending
//!      ones survives, independently of file data (the zero-length file after a rename),
//!      plus, on btrfs and posix, those a later fsync of their file logged;
//!   5. unpersisted bytes are lost: they read as the disk holds them (rule 5 below).
//! - **fsync EIO** ([`Disk::fsync_fail`]), as Linux 6.1 does on ext4 and xfs (measured in
//!   user-mode Linux with dm-flakey failing the file's new blocks, see docs/design/real-and-fidelity.md): the fsync
//!   returns EIO; the file's new size (ext4; xfs may keep the size before the fsync: see
//!   `fs_model`) and its pending truncates persist; the bytes its
//!   pending writes wrote do not reach the disk, but the kernel marks their pages clean and
//!   keeps them, so the process (and a restarted one: a process crash keeps the page cache)
//!   still reads the NEW bytes; a second fsync returns 0 and writes nothing. Those bytes
//!   are *unpersisted*: on disk they read as what the disk held there before (zeros past its
//!   old end, and past a truncate of the same fsync), and a power loss or a page eviction
//!   makes the process read that too. Which bytes: every byte a pending write of the failed
//!   fsync wrote. A real device fails the blocks it fails (dm-flakey under one block fails
//!   that block; the file's other new block persisted), but fsync reports one EIO for the
//!   whole file, so the process cannot tell which blocks were lost and must be correct
//!   whichever were: the model takes all of them, the state that loses the most. A later
//!   write over unpersisted bytes makes them dirty again (a pending write, persisted by the
//!   next fsync); a truncate drops those past the new end. A write-back of a file over
//!   itself ([`Disk::write_back`]) where nothing is unpersisted writes nothing: each byte
//!   is durable already or a pending write's, so it could add no file a power loss leaves.
//!   The model is byte-exact where a kernel works in pages: a real re-dirtied page is
//!   written whole, so bytes of it the model keeps unpersisted may persist for real. btrfs
//!   aborts instead: the file system turns read-only, the `btrfs` profile below.
//! - **File-system profiles** ([`FsModel`], rules in the `fs_model` module): where kernels
//!   disagree, a disk behaves as `posix` (the default: every crash state any profile
//!   admits), `ext4`, `xfs` or `btrfs`: ext4 and xfs commit their journal at an fsync (a
//!   rename made durable by an unrelated file's fsync); btrfs logs an fsynced file's names
//!   out of order (`create x; create y; fsync y` can keep `y` without `x`) and goes
//!   read-only at a failed fsync (below); xfs may fill a kept new size with
//!   stale bytes instead of zeros (the one rule posix leaves out: see `fs_model`), and
//!   may leave a file at its size before a failed fsync whose writes all failed.
//! - **Page eviction** ([`Disk::evict_clean_pages`]): the kernel drops clean pages (memory
//!   pressure, `drop_caches`); pages that hold unpersisted bytes are clean, so the process
//!   then reads what the disk holds there. Dirty pages are never dropped.
//! - **Disk errors**: [`Disk::inject_error`] makes the next operation fail with EIO (a
//!   failed fsync as above; any other operation has no effect).
//! - **Read-only after a failed fsync** (btrfs, measured with its defaults: copy-on-write,
//!   every data chunk failing writes): the fsync returns EIO and btrfs aborts its running
//!   transaction. The file system turns read-only: every later change (create, open for
//!   writing, write, truncate, fsync, rename, unlink, directory fsync) fails with EROFS,
//!   while reads go on seeing every change the process made, the failed file's new bytes
//!   included (dirty pages nothing will write, which no eviction drops). Nothing more
//!   reaches the disk: a power loss leaves one crash state, the one that keeps nothing
//!   pending (durable files and names, and names an earlier fsync logged), and so does
//!   mounting the file system again ([`Disk::remount`], which the runner does when it
//!   restarts a process on a read-only disk, as a reboot would: a process restarted on it
//!   could change nothing).
//!
//! Bounds: file names are at most 255 bytes and a file at most 64 MiB, like a small real
//! file system; a violation is a bug in the caller and panics.

use crate::digest::FileDigest;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

mod chunk_list;
mod compare;
mod contents;
mod fs_model;
mod inode;
mod power_loss;

use inode::{DataOp, Inode, Written};

pub use contents::{Contents, CHUNK_BYTES};

pub use fs_model::{FsModel, STALE_BYTE};
pub use power_loss::{
    ClassOutcome, CrashReaders, DirOutcome, DurableIdentity, FileOutcome, PieceFate, PieceOutcome,
    PowerLossClasses, PowerLossOutcome, PowerLossStates, SizeFate, POWER_LOSS_ENUMERATION_BOUND,
};

const NAME_LEN_MAX_BYTES: usize = 255;
const FILE_SIZE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The sector size of [`Disk::new`]: the unit a write tears at, as on most disks.
const SECTOR_SIZE_DEFAULT_BYTES: usize = 512;
/// The largest sector size [`Disk::with_sector_size`] accepts (a huge page).
pub const SECTOR_SIZE_MAX_BYTES: usize = 1 << 21;

/// An inode number: files keep their identity across renames.
type InodeId = u64;

/// A disk operation that cannot be done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskError {
    NotFound {
        name: String,
    },
    /// An injected I/O error (EIO) on `op` of `name`.
    Io {
        op: &'static str,
        name: String,
    },
    /// The file system is read-only (EROFS): btrfs aborted its transaction at a failed
    /// fsync ([`Disk::is_read_only`]) and refuses every change until it is mounted again.
    ReadOnly {
        op: &'static str,
        name: String,
    },
    /// A real file system refused `op` on `name` (real mode only): the OS's own message.
    Os {
        op: &'static str,
        name: String,
        message: String,
    },
}

impl fmt::Display for DiskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskError::NotFound { name } => write!(f, "{name}: no such file"),
            DiskError::Io { op, name } => write!(f, "{op} {name}: input/output error (EIO)"),
            DiskError::ReadOnly { op, name } => {
                write!(f, "{op} {name}: read-only file system (EROFS)")
            }
            DiskError::Os { op, name, message } => write!(f, "{op} {name}: {message}"),
        }
    }
}

impl std::error::Error for DiskError {}

/// A change to the directory that no directory fsync has covered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
enum DirOp {
    Create {
        name: String,
        inode: InodeId,
    },
    Rename {
        from: String,
        to: String,
        inode: InodeId,
    },
    Unlink {
        name: String,
        inode: InodeId,
    },
}

/// The simulated disk: one directory of files. A plain value: clone it to fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disk {
    /// The unit a write tears at on power loss.
    sector_size_bytes: usize,
    inode_next: InodeId,
    /// The three tables are shared between clones until one of them changes (a sweep
    /// clones a disk several times per point, and a chain of incremental checkpoints keeps
    /// up to thousands of files): a clone costs three counts, and the first change to a
    /// table copies that table once.
    inodes: Arc<BTreeMap<InodeId, Inode>>,
    /// The directory the process sees.
    names: Arc<BTreeMap<String, InodeId>>,
    /// The directory as of the last successful directory fsync.
    durable_names: Arc<BTreeMap<String, InodeId>>,
    /// Namespace operations since that fsync, in order.
    pending_dir: Vec<DirOp>,
    /// Per pending namespace operation: whether a later fsync of its file logged it, so that
    /// a power loss keeps it out of order (profiles whose fsync logs names: btrfs, posix).
    pending_dir_logged: Vec<bool>,
    /// The file-system profile: which of the rules that kernels disagree on apply.
    model: FsModel,
    /// The next mutating operation fails with EIO (a planned disk error).
    io_error_armed: bool,
    /// btrfs aborted its transaction at a failed fsync: every change fails with EROFS, and
    /// nothing more reaches the disk, until [`Disk::remount`] (or a power loss).
    read_only: bool,
    /// Whether a failed fsync ever left bytes unpersisted here (or on the disk this one was
    /// cloned from); see [`UnpersistedEver`].
    unpersisted_ever: UnpersistedEver,
    /// How often the process read each file; see [`ReadCounts`].
    read_counts: ReadCounts,
}

/// How many times the process read each file by name, through [`crate::Storage`] (the
/// interface a system under test has: keel's own inspections of a disk, by `Disk`'s own
/// methods, do not count), its length included. What a sweep checks before it leaves a
/// file's bytes out of a comparison of two runs: only a future that never read the file can
/// be the same whatever its bytes, and whether it did is measured, never assumed of the
/// system under test. A record of the run, not part of what the disk holds: two disks are
/// equal whatever theirs say. Shared between clones until one reads.
#[derive(Clone, Debug, Default)]
struct ReadCounts(Arc<BTreeMap<String, u64>>);

impl PartialEq for ReadCounts {
    fn eq(&self, _: &ReadCounts) -> bool {
        true
    }
}

impl Eq for ReadCounts {}

/// Whether a failed fsync ever left bytes unpersisted on a disk: the only way a file comes
/// to hold any ([`Disk::fsync_fail`]). Until one does, [`Disk::unpersisted_bytes`] is 0
/// without visiting every file, which a sweep's point asked several times (every
/// comparison of two disks does) over a chain of incremental checkpoints hundreds of files
/// long. A hint about how a disk came to be, not part of what it is: two disks are equal
/// whatever theirs say.
#[derive(Clone, Copy, Debug, Default)]
struct UnpersistedEver(bool);

impl PartialEq for UnpersistedEver {
    fn eq(&self, _: &UnpersistedEver) -> bool {
        true
    }
}

impl Eq for UnpersistedEver {}

impl Default for Disk {
    fn default() -> Self {
        Disk::with_sector_size(SECTOR_SIZE_DEFAULT_BYTES)
    }
}

impl Disk {
    /// An empty disk with 512-byte sectors.
    pub fn new() -> Self {
        Disk::default()
    }

    /// An empty disk whose writes tear at `sector_size_bytes` boundaries on power loss.
    pub fn with_sector_size(sector_size_bytes: usize) -> Self {
        Disk::with_model(sector_size_bytes, FsModel::Posix)
    }

    /// An empty disk with `sector_size_bytes` sectors that behaves as the profile `model`.
    pub fn with_model(sector_size_bytes: usize, model: FsModel) -> Self {
        assert!(sector_size_bytes > 0);
        assert!(sector_size_bytes <= SECTOR_SIZE_MAX_BYTES);
        Disk {
            sector_size_bytes,
            inode_next: 0,
            inodes: Arc::default(),
            names: Arc::default(),
            durable_names: Arc::default(),
            pending_dir: Vec::new(),
            pending_dir_logged: Vec::new(),
            model,
            io_error_armed: false,
            read_only: false,
            unpersisted_ever: UnpersistedEver::default(),
            read_counts: ReadCounts::default(),
        }
    }

    /// The file-system profile this disk behaves as.
    pub fn model(&self) -> FsModel {
        self.model
    }

    /// Records a namespace operation no directory fsync has covered yet.
    fn push_dir(&mut self, op: DirOp) {
        self.pending_dir.push(op);
        self.pending_dir_logged.push(false);
    }

    /// Every pending namespace operation becomes durable (a directory fsync, or a journal
    /// commit).
    fn commit_dir(&mut self) {
        // The pending operations replayed on the durable directory, in order, give the
        // directory the process sees (they record every change to it since the last
        // commit): O(pending) instead of a copy of every name. What a replayed operation
        // takes a name from (an unlink, a rename over an existing name) may have no name
        // left, and with nothing pending a name is all that keeps an inode.
        if self.pending_dir.is_empty() {
            // Nothing to replay: the shared table is not copied (an ext4 fsync of data
            // commits the journal, most often with no namespace operation pending).
            assert!(self.pending_dir_logged.is_empty());
            return;
        }
        let mut displaced = Vec::new();
        let durable_names = Arc::make_mut(&mut self.durable_names);
        for op in std::mem::take(&mut self.pending_dir) {
            match op {
                DirOp::Create { name, inode } => {
                    displaced.extend(durable_names.insert(name, inode));
                }
                DirOp::Rename { from, to, inode } => {
                    let moved = durable_names.remove(&from);
                    assert_eq!(moved, Some(inode), "the directory replays its history");
                    displaced.extend(durable_names.insert(to, inode));
                }
                DirOp::Unlink { name, inode } => {
                    let removed = durable_names.remove(&name);
                    assert_eq!(removed, Some(inode), "the directory replays its history");
                    displaced.push(inode);
                }
            }
        }
        self.pending_dir_logged.clear();
        debug_assert_eq!(self.durable_names, self.names);
        // A file has one name at most (there are no hard links), and the replayed
        // operations are the process's history: none names a file after it lost its name. So
        // a displaced inode has no name now, and with nothing pending nothing reaches it (no
        // pass over the names: a compaction unlinks a whole chain of incremental
        // checkpoints, thousands of files, at once).
        for id in displaced {
            debug_assert!(!self.names.values().any(|named| *named == id));
            Arc::make_mut(&mut self.inodes).remove(&id);
        }
        debug_assert!(self.every_inode_reachable());
    }

    /// Makes the next mutating operation (create, write, truncate, fsync, rename, remove,
    /// fsync_dir) fail with EIO instead of taking effect; a failing fsync drops its data.
    pub fn inject_error(&mut self) {
        self.io_error_armed = true;
    }

    /// Disarms an injected error that no operation consumed; true if there was one.
    pub fn clear_injected_error(&mut self) -> bool {
        std::mem::take(&mut self.io_error_armed)
    }

    /// Whether the file system went read-only (btrfs, after a failed fsync): every change
    /// fails with EROFS until [`Disk::remount`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Mounts the file system again after it went read-only, as a reboot does: what the
    /// aborted transaction held is gone, so the disk is the crash state that keeps nothing
    /// pending (state 0 of [`Disk::power_loss`]: the durable files and names, and the names
    /// an earlier fsync logged), the only one a power loss now leaves. Writable again.
    pub fn remount(&mut self) -> PowerLossOutcome {
        assert!(
            self.read_only,
            "only a read-only file system is mounted again"
        );
        self.power_loss(0)
    }

    /// Consumes an injected error as the failure of `op` on `name`; a read-only file system
    /// refuses the change first (an injected error it did not consume changes nothing).
    fn injected(&mut self, op: &'static str, name: &str) -> Result<(), DiskError> {
        if self.read_only {
            return Err(DiskError::ReadOnly {
                op,
                name: name.to_string(),
            });
        }
        if std::mem::take(&mut self.io_error_armed) {
            return Err(DiskError::Io {
                op,
                name: name.to_string(),
            });
        }
        Ok(())
    }

    pub fn sector_size_bytes(&self) -> usize {
        self.sector_size_bytes
    }

    fn inode(&self, name: &str) -> Result<&Inode, DiskError> {
        let id = self.names.get(name).ok_or_else(|| not_found(name))?;
        Ok(&self.inodes[id])
    }

    fn inode_mut(&mut self, name: &str) -> Result<&mut Inode, DiskError> {
        let id = *self.names.get(name).ok_or_else(|| not_found(name))?;
        Ok(Arc::make_mut(&mut self.inodes)
            .get_mut(&id)
            .expect("every name points at a live inode"))
    }

    /// How many times the process read `name` so far ([`ReadCounts`]).
    pub fn reads_of(&self, name: &str) -> u64 {
        self.read_counts.0.get(name).copied().unwrap_or(0)
    }

    /// Counts a read of `name` by the process (through [`crate::Storage`]).
    pub(crate) fn count_read(&mut self, name: &str) {
        let counts = Arc::make_mut(&mut self.read_counts.0);
        // A name read before is counted without allocating (the idempotent sink reads its
        // file before every write).
        match counts.get_mut(name) {
            Some(count) => *count += 1,
            None => {
                counts.insert(name.to_string(), 1);
            }
        }
    }

    pub fn exists(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// Creates `name` empty, or truncates it to zero bytes if it exists (O_CREAT | O_TRUNC).
    pub fn create(&mut self, name: &str) -> Result<(), DiskError> {
        assert!(!name.is_empty());
        assert!(name.len() <= NAME_LEN_MAX_BYTES);
        self.injected("create", name)?;
        if self.exists(name) {
            let inode = self.inode_mut(name).expect("exists");
            inode.apply(DataOp::SetLen { len_bytes: 0 });
            inode.digest.0.set_len(0);
            return Ok(());
        }
        let inode = self.inode_next;
        self.inode_next += 1;
        Arc::make_mut(&mut self.inodes).insert(inode, Inode::default());
        Arc::make_mut(&mut self.names).insert(name.to_string(), inode);
        self.push_dir(DirOp::Create {
            name: name.to_string(),
            inode,
        });
        Ok(())
    }

    /// Creates `name` empty unless it exists; never truncates (O_CREAT | O_APPEND).
    pub fn open_or_create(&mut self, name: &str) -> Result<(), DiskError> {
        if self.exists(name) {
            return self.injected("open", name);
        }
        self.create(name)
    }

    /// Writes `bytes` at `offset_bytes`, extending the file with zeros if needed.
    pub fn write(&mut self, name: &str, offset_bytes: u64, bytes: &[u8]) -> Result<(), DiskError> {
        assert!(offset_bytes + bytes.len() as u64 <= FILE_SIZE_MAX_BYTES);
        self.inode(name)?;
        self.injected("write", name)?;
        let inode = self.inode_mut(name)?;
        inode.digest.0.write(offset_bytes, bytes);
        inode.apply(DataOp::Write {
            offset_bytes,
            bytes: Written::Own(bytes.to_vec()),
        });
        Ok(())
    }

    /// Writes `contents` at the file's start, as `write(name, 0, <its bytes>)` does, but the
    /// file and its pending write share `contents`'s chunks instead of copying them: a
    /// checkpoint file a sweep's points write again, byte for byte (`encode_memo.rs` in
    /// the engine), then costs no copy and compares equal to the fault-free run's by
    /// pointer. The same operation for every crash state and count (its bytes are compared
    /// as bytes wherever a write's are).
    pub fn write_shared(&mut self, name: &str, contents: &Contents) -> Result<(), DiskError> {
        assert!(contents.len() as u64 <= FILE_SIZE_MAX_BYTES);
        self.inode(name)?;
        self.injected("write", name)?;
        let digest = &mut self.inode_mut(name)?.digest.0;
        digest.write_known(0, contents.len(), || contents.fnv(), contents.chunks());
        self.write_over_start(name, contents.clone())
    }

    /// Writes `contents` at the file's start, sharing its chunks (the step's own checks
    /// done): [`Disk::write_shared`] and [`Disk::write_back`].
    fn write_over_start(&mut self, name: &str, contents: Contents) -> Result<(), DiskError> {
        self.inode_mut(name)?.apply(DataOp::Write {
            offset_bytes: 0,
            bytes: Written::Shared(contents),
        });
        Ok(())
    }

    /// Writes the file's first `len_bytes` back over themselves, as a process writes back
    /// what it read and keeps: the same as `write(name, 0, <those bytes>)`, every one of them
    /// dirty again, but the pending write shares the file's chunks instead of copying them.
    /// The file's bytes stay what they were, and so does its running digest.
    ///
    /// Where no failed fsync left a byte unpersisted or the size in doubt, every byte it
    /// would write is one the disk holds durable or one a pending write writes, so its
    /// pieces, torn or whole, resolve to files the pending writes resolve to alone (tested
    /// state by state): it writes nothing then, and a power loss has no more states to
    /// count than before (nor a write over the file's appends that would keep them from
    /// being counted as classes).
    pub fn write_back(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError> {
        let inode = self.inode(name)?;
        assert!(
            len_bytes <= inode.current.len() as u64,
            "a prefix of the file"
        );
        let changes_nothing = inode.unpersisted.is_empty() && inode.failed_len_bytes.is_none();
        self.injected("write", name)?;
        if changes_nothing {
            return Ok(());
        }
        let current = self.inode(name)?.current.prefix(len_bytes as usize);
        self.write_over_start(name, current)
    }

    /// Appends `bytes` at the end of the file.
    pub fn append(&mut self, name: &str, bytes: &[u8]) -> Result<(), DiskError> {
        let offset_bytes = self.inode(name)?.current.len() as u64;
        self.write(name, offset_bytes, bytes)
    }

    /// Sets the file's length, dropping or zero-filling its tail.
    pub fn truncate(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError> {
        assert!(len_bytes <= FILE_SIZE_MAX_BYTES);
        self.inode(name)?;
        self.injected("truncate", name)?;
        let inode = self.inode_mut(name)?;
        inode.digest.0.set_len(len_bytes);
        inode.apply(DataOp::SetLen { len_bytes });
        Ok(())
    }

    /// The file's contents as the process sees them.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, DiskError> {
        Ok(self.inode(name)?.current.to_vec())
    }

    /// The file's contents as the process sees them, shared with the disk instead of copied
    /// (a later write to the file copies them on the disk's side).
    pub fn read_shared(&self, name: &str) -> Result<Contents, DiskError> {
        Ok(self.inode(name)?.current.clone())
    }

    /// The file's contents from `offset_bytes` to its end (empty past the end).
    pub fn read_from(&self, name: &str, offset_bytes: u64) -> Result<Vec<u8>, DiskError> {
        let current = &self.inode(name)?.current;
        let offset = usize::try_from(offset_bytes)
            .unwrap_or(usize::MAX)
            .min(current.len());
        Ok(current.copy_range(offset..current.len()))
    }

    pub fn len_bytes(&self, name: &str) -> Result<u64, DiskError> {
        Ok(self.inode(name)?.current.len() as u64)
    }

    /// The file's running digest ([`crate::digest::FileDigest`]): every byte written into
    /// it, in order, and every change a truncate, a power loss or a page eviction made.
    pub fn digest(&self, name: &str) -> Result<FileDigest, DiskError> {
        Ok(self.inode(name)?.digest.0)
    }

    /// Makes the file's pending data and size durable (not its name: see
    /// [`Disk::fsync_dir`]; not its unpersisted bytes). An injected error makes it fail as
    /// [`Disk::fsync_fail`] does. By profile ([`FsModel`]): on ext4 and xfs an fsync with
    /// something to write also commits every namespace operation issued before it; on btrfs
    /// (and posix) it logs the file's own ones, which a power loss then keeps out of order.
    /// On a read-only file system it fails with EROFS and changes nothing.
    pub fn fsync(&mut self, name: &str) -> Result<(), DiskError> {
        let id = *self.names.get(name).ok_or_else(|| not_found(name))?;
        if let Err(error) = self.injected("fsync", name) {
            if matches!(error, DiskError::Io { .. }) {
                self.fsync_fail(name)?;
            }
            return Err(error);
        }
        let inode = Arc::make_mut(&mut self.inodes)
            .get_mut(&id)
            .expect("every name points at a live inode");
        let had_data = !inode.pending.is_empty();
        inode.sync();
        let own_ops: Vec<usize> = self
            .pending_dir
            .iter()
            .enumerate()
            .filter(|(_, op)| dir_op_inode(op) == id)
            .map(|(index, _)| index)
            .collect();
        if self.model.fsync_commits_journal() && (had_data || !own_ops.is_empty()) {
            self.commit_dir();
        } else if self.model.fsync_logs_names() {
            for index in own_ops {
                self.pending_dir_logged[index] = true;
            }
        }
        Ok(())
    }

    /// An fsync of `name` that fails with an I/O error (EIO). As ext4 and xfs do (and
    /// posix): the new size and the pending truncates persist; the bytes the pending writes
    /// wrote do not, yet the process goes on reading them (clean pages the kernel keeps)
    /// until a page eviction or a power loss; a later fsync succeeds without writing them
    /// (PostgreSQL's "fsyncgate": retrying the fsync does not bring the data back). As btrfs
    /// does: the file system turns read-only ([`Disk::is_read_only`]) and the file's changes
    /// stay pending, readable, until a power loss or [`Disk::remount`] drops them. The name
    /// is untouched.
    pub fn fsync_fail(&mut self, name: &str) -> Result<(), DiskError> {
        let size_may_stay = self.model.failed_fsync_size_may_stay();
        self.inode(name)?;
        if self.model.read_only_on_fsync_error() {
            // The file's pages stay dirty (readable, never evicted, never written).
            self.read_only = true;
        } else {
            self.unpersisted_ever = UnpersistedEver(true);
            self.inode_mut(name)?.sync_failed(size_may_stay);
        }
        Ok(())
    }

    /// The kernel drops every clean page (memory pressure, `drop_caches`): bytes a failed
    /// fsync left unpersisted read as the disk holds them. Returns, per file that had any
    /// (by name, as in power-loss descriptions), how many bytes the process no longer sees.
    pub fn evict_clean_pages(&mut self) -> Vec<(String, u64)> {
        if self.unpersisted_bytes() == 0 {
            return Vec::new();
        }
        let labels = self.inode_labels();
        Arc::make_mut(&mut self.inodes)
            .iter_mut()
            .filter(|(_, inode)| !inode.unpersisted.is_empty())
            .map(|(id, inode)| (labels[id].clone(), inode.evict()))
            .collect()
    }

    /// How many bytes the file's pending writes (since its last fsync) wrote, counted per
    /// write: what an fsync of it has to write (0: nothing, whatever its pending truncates).
    pub fn dirty_bytes(&self, name: &str) -> Result<u64, DiskError> {
        Ok(self
            .inode(name)?
            .pending
            .iter()
            .map(|op| match op {
                DataOp::Write { bytes, .. } => bytes.len() as u64,
                DataOp::SetLen { .. } => 0,
            })
            .sum())
    }

    /// How many bytes the page cache holds that the disk does not (clean pages a failed
    /// fsync left): what a page eviction or a power loss would take from the process.
    pub fn unpersisted_bytes(&self) -> u64 {
        self.unpersisted_bytes_but(None)
    }

    /// [`Disk::unpersisted_bytes`] but the file `except`'s, if named.
    fn unpersisted_bytes_but(&self, except: Option<&str>) -> u64 {
        if !self.unpersisted_ever.0 {
            debug_assert!(self
                .inodes
                .values()
                .all(|inode| inode.unpersisted.is_empty()));
            return 0;
        }
        let except = except.and_then(|name| self.names.get(name));
        self.inodes
            .iter()
            .filter(|(id, _)| Some(*id) != except)
            .map(|(_, inode)| inode.unpersisted_bytes())
            .sum()
    }

    /// Renames `from` to `to` atomically, replacing `to` if it exists.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), DiskError> {
        assert!(!to.is_empty());
        assert!(to.len() <= NAME_LEN_MAX_BYTES);
        self.inode(from)?;
        self.injected("rename", from)?;
        let names = Arc::make_mut(&mut self.names);
        let inode = names.remove(from).ok_or_else(|| not_found(from))?;
        let replaced = names.insert(to.to_string(), inode);
        self.push_dir(DirOp::Rename {
            from: from.to_string(),
            to: to.to_string(),
            inode,
        });
        // Every inode was reachable before; the moved one still is (by name): only the one
        // `to` named may have lost its last reference. A file has one name at most (there
        // are no hard links), so no name reaches it now; a durable name does only if it is
        // `to` or a pending rename moved it since (then that rename references it): what is
        // left to look at is the pending operations, not every name (a long chain of
        // incremental checkpoints keeps thousands).
        if let Some(replaced) = replaced.filter(|&id| id != inode) {
            let reachable = self.durable_names.get(to) == Some(&replaced)
                || self
                    .pending_dir
                    .iter()
                    .any(|op| dir_op_inode(op) == replaced);
            debug_assert_eq!(reachable, self.reachable(replaced));
            if !reachable {
                Arc::make_mut(&mut self.inodes).remove(&replaced);
            }
        }
        debug_assert!(self.every_inode_reachable());
        Ok(())
    }

    /// Removes the name `name` (unlink).
    pub fn remove(&mut self, name: &str) -> Result<(), DiskError> {
        self.inode(name)?;
        self.injected("remove", name)?;
        let inode = Arc::make_mut(&mut self.names)
            .remove(name)
            .ok_or_else(|| not_found(name))?;
        // The unlink itself references the inode until a directory commit: nothing becomes
        // unreachable here (`commit_dir` collects it).
        self.push_dir(DirOp::Unlink {
            name: name.to_string(),
            inode,
        });
        debug_assert!(self.every_inode_reachable());
        Ok(())
    }

    /// The names in the directory, sorted.
    pub fn list(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }

    /// Makes every create, rename and unlink so far durable. An injected error makes none of
    /// them durable (they stay pending: a later directory fsync may still succeed).
    pub fn fsync_dir(&mut self) -> Result<(), DiskError> {
        self.injected("fsync-dir", ".")?;
        self.commit_dir();
        Ok(())
    }

    /// Whether every operation so far is durable: a power loss now would change nothing.
    pub fn is_all_durable(&self) -> bool {
        self.pending_dir.is_empty()
            && self.inodes.values().all(|inode| {
                inode.pending.is_empty()
                    && inode.unpersisted.is_empty()
                    && inode.failed_len_bytes.is_none()
            })
    }

    /// Whether a name, durable or pending, can still reach `inode`. O(files): for debug
    /// assertions.
    fn reachable(&self, inode: InodeId) -> bool {
        self.names
            .values()
            .chain(self.durable_names.values())
            .copied()
            .chain(self.pending_dir.iter().map(dir_op_inode))
            .any(|id| id == inode)
    }

    /// The disk's invariant: it keeps exactly the inodes a name, durable or pending, can
    /// reach (each operation drops those it unlinked for good). O(files log files): for
    /// debug assertions.
    fn every_inode_reachable(&self) -> bool {
        let reachable: std::collections::BTreeSet<InodeId> = self
            .names
            .values()
            .chain(self.durable_names.values())
            .copied()
            .chain(self.pending_dir.iter().map(dir_op_inode))
            .collect();
        self.inodes.keys().copied().eq(reachable)
    }
}

/// The inode a namespace operation acts on.
fn dir_op_inode(op: &DirOp) -> InodeId {
    match op {
        DirOp::Create { inode, .. } | DirOp::Rename { inode, .. } | DirOp::Unlink { inode, .. } => {
            *inode
        }
    }
}

fn not_found(name: &str) -> DiskError {
    DiskError::NotFound {
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests;
