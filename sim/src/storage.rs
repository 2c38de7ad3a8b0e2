//! `Storage`: the one directory the system under test keeps its files in, as the operations
//! it may perform; the simulated [`Disk`] is one implementation, a real directory another.
//!
//! The engine is generic over it (`World<S: Storage>`), so the simulated path is
//! monomorphised exactly as before and the engine's code has no `if real` branch. What only
//! a simulation can do (lose power, inject an I/O error, count crash states) is reached
//! through [`Storage::simulated`], which a real directory answers with `None`: real storage
//! supports process crashes only.

use crate::digest::FileDigest;
use crate::disk::{Contents, Disk, DiskError};
use crate::trace::TraceLine;

/// A flat directory of files and the operations the engine performs on it, one step each.
pub trait Storage {
    fn exists(&self, name: &str) -> bool;
    /// Creates `name` empty, or truncates it to zero bytes if it exists (O_CREAT | O_TRUNC).
    fn create(&mut self, name: &str) -> Result<(), DiskError>;
    /// Creates `name` empty unless it exists; never truncates.
    fn open_or_create(&mut self, name: &str) -> Result<(), DiskError>;
    /// Writes `bytes` at `offset_bytes`, extending the file with zeros if needed.
    fn write(&mut self, name: &str, offset_bytes: u64, bytes: &[u8]) -> Result<(), DiskError>;
    /// Writes `contents` at the file's start: `write(name, 0, <its bytes>)`, which real
    /// storage does; the simulated disk shares the chunks instead of copying them.
    fn write_shared(&mut self, name: &str, contents: &Contents) -> Result<(), DiskError> {
        self.write(name, 0, &contents.to_vec())
    }
    /// Appends `bytes` at the end of the file.
    fn append(&mut self, name: &str, bytes: &[u8]) -> Result<(), DiskError>;
    /// Writes the file's first `len_bytes` back over themselves (a write at 0 of what a read
    /// returns, cut there): every byte of them dirty again, whatever the page cache held.
    fn write_back(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError>;
    /// Sets the file's length, dropping or zero-filling its tail.
    fn truncate(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError>;
    /// The file's contents as the process sees them.
    fn read(&mut self, name: &str) -> Result<Vec<u8>, DiskError>;
    /// The file's contents from `offset_bytes` to its end (empty past the end).
    fn read_from(&mut self, name: &str, offset_bytes: u64) -> Result<Vec<u8>, DiskError>;
    /// The file's contents as the process sees them, as [`Contents`]: the simulated disk
    /// shares its chunks (no copy), so a reader can compare them with bytes it knew before
    /// at the cost of the chunks they differ in; real storage reads the file.
    fn read_shared(&mut self, name: &str) -> Result<Contents, DiskError>;
    fn len_bytes(&mut self, name: &str) -> Result<u64, DiskError>;
    /// The file's running digest ([`FileDigest`]: every byte written into it, in order), if
    /// it exists: what a step that wrote or read it shows on its trace line
    /// ([`crate::World::effect_data`]). The simulated disk keeps it as it writes; real
    /// storage works it out from the file the first time it is asked (a file another process
    /// wrote) and keeps it up to date as it writes.
    fn digest(&mut self, name: &str) -> Option<FileDigest>;
    /// Makes the file's data and size durable (not its name).
    fn fsync(&mut self, name: &str) -> Result<(), DiskError>;
    /// Renames `from` to `to` atomically, replacing `to` if it exists.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), DiskError>;
    /// Removes the name `name` (unlink).
    fn remove(&mut self, name: &str) -> Result<(), DiskError>;
    /// The names in the directory, sorted.
    fn list(&self) -> Vec<String>;
    /// Makes every create, rename and unlink so far durable.
    fn fsync_dir(&mut self) -> Result<(), DiskError>;

    /// The simulated disk behind this storage, for what only a simulation can do (power
    /// loss, injected I/O errors, counting crash states); `None` for real storage.
    fn simulated(&self) -> Option<&Disk>;
    fn simulated_mut(&mut self) -> Option<&mut Disk>;

    /// Sees every trace line as the world makes it, before its step's effect (a real
    /// process paced on the wall clock waits there for the line's simulated time).
    fn begin(&mut self, _line: &TraceLine) {}

    /// Sees every trace line once it is final: a step's line once its step is over (with the
    /// digest of its data, and its fault as it ran), any other line as it is made. The
    /// simulated disk ignores it (the world keeps the trace); a real process writes it out
    /// at once, so a SIGKILL (which a planned crash sends after the step) loses no line.
    fn record(&mut self, line: &TraceLine);

    /// Whether [`Storage::record`] wants the lines (the world then hands it each step's line
    /// when the step is over); false for the simulated disk.
    fn records(&self) -> bool {
        true
    }
}

impl Storage for Disk {
    #[inline]
    fn exists(&self, name: &str) -> bool {
        Disk::exists(self, name)
    }
    #[inline]
    fn create(&mut self, name: &str) -> Result<(), DiskError> {
        Disk::create(self, name)
    }
    #[inline]
    fn open_or_create(&mut self, name: &str) -> Result<(), DiskError> {
        Disk::open_or_create(self, name)
    }
    #[inline]
    fn write(&mut self, name: &str, offset_bytes: u64, bytes: &[u8]) -> Result<(), DiskError> {
        Disk::write(self, name, offset_bytes, bytes)
    }
    #[inline]
    fn write_shared(&mut self, name: &str, contents: &Contents) -> Result<(), DiskError> {
        Disk::write_shared(self, name, contents)
    }
    #[inline]
    fn append(&mut self, name: &str, bytes: &[u8]) -> Result<(), DiskError> {
        Disk::append(self, name, bytes)
    }
    #[inline]
    fn write_back(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError> {
        Disk::write_back(self, name, len_bytes)
    }
    #[inline]
    fn truncate(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError> {
        Disk::truncate(self, name, len_bytes)
    }
    // The four reads count (`Disk::reads_of`): what the process observed of a file.
    #[inline]
    fn read(&mut self, name: &str) -> Result<Vec<u8>, DiskError> {
        self.count_read(name);
        Disk::read(self, name)
    }
    #[inline]
    fn read_from(&mut self, name: &str, offset_bytes: u64) -> Result<Vec<u8>, DiskError> {
        self.count_read(name);
        Disk::read_from(self, name, offset_bytes)
    }
    #[inline]
    fn read_shared(&mut self, name: &str) -> Result<Contents, DiskError> {
        self.count_read(name);
        Disk::read_shared(self, name)
    }
    #[inline]
    fn len_bytes(&mut self, name: &str) -> Result<u64, DiskError> {
        self.count_read(name);
        Disk::len_bytes(self, name)
    }
    #[inline]
    fn digest(&mut self, name: &str) -> Option<FileDigest> {
        Disk::digest(self, name).ok()
    }
    #[inline]
    fn fsync(&mut self, name: &str) -> Result<(), DiskError> {
        Disk::fsync(self, name)
    }
    #[inline]
    fn rename(&mut self, from: &str, to: &str) -> Result<(), DiskError> {
        Disk::rename(self, from, to)
    }
    #[inline]
    fn remove(&mut self, name: &str) -> Result<(), DiskError> {
        Disk::remove(self, name)
    }
    #[inline]
    fn list(&self) -> Vec<String> {
        Disk::list(self)
    }
    #[inline]
    fn fsync_dir(&mut self) -> Result<(), DiskError> {
        Disk::fsync_dir(self)
    }
    #[inline]
    fn simulated(&self) -> Option<&Disk> {
        Some(self)
    }
    #[inline]
    fn simulated_mut(&mut self) -> Option<&mut Disk> {
        Some(self)
    }
    #[inline]
    fn record(&mut self, _line: &TraceLine) {}
    #[inline]
    fn records(&self) -> bool {
        false
    }
}
