//! `RealDir`: the engine's storage as a real directory, through `std::fs`.
//!
//! Every operation is one system call or a few, done at once with no user-space buffer, so
//! when the process is killed (SIGKILL) the directory holds exactly the operations that
//! completed, as a real kill -9 leaves it. A directory fsync opens the directory read-only
//! and calls `sync_all` (works on ext4, xfs and btrfs). Power loss and injected disk errors
//! are simulation-only: [`Storage::simulated`] is `None` here.

use super::pacing::Pacer;
use keel_sim::{Contents, Disk, DiskError, FileDigest, Fingerprint, Storage, TraceLine};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One real directory, and (in a child process) the file its trace lines go to.
#[derive(Debug)]
pub struct RealDir {
    root: PathBuf,
    /// Each trace line is written here as it happens (one `write`, no buffer).
    trace: Option<File>,
    /// With real pacing: each trace line waits for the wall time of its simulated time.
    pacer: Option<Pacer>,
    /// The running digests of the files this process read or wrote ([`Storage::digest`]),
    /// kept up to date as it writes them; a file it has not touched yet (another process
    /// wrote it) has its digest worked out from its bytes when first needed, which is the
    /// simulated disk's for a file written at its end only, as every file of a real run is.
    digests: BTreeMap<String, FileDigest>,
}

/// One file of a directory's final listing: name, size and content digest (FNV-1a 64).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListedFile {
    pub name: String,
    pub size_bytes: u64,
    pub digest: String,
}

impl RealDir {
    /// The directory `root` (which must exist); trace lines are not written anywhere.
    pub fn new(root: impl Into<PathBuf>) -> RealDir {
        RealDir {
            root: root.into(),
            trace: None,
            pacer: None,
            digests: BTreeMap::new(),
        }
    }

    /// The directory `root`, appending every trace line to `trace_file` as it happens.
    pub fn with_trace_file(root: impl Into<PathBuf>, trace_file: &Path) -> io::Result<RealDir> {
        let trace = OpenOptions::new()
            .create(true)
            .append(true)
            .open(trace_file)?;
        Ok(RealDir {
            root: root.into(),
            trace: Some(trace),
            pacer: None,
            digests: BTreeMap::new(),
        })
    }

    /// The same directory, every step (and restart, crash and note) waiting until the wall
    /// time of its simulated time: real pacing.
    pub fn paced(self, pacer: Pacer) -> RealDir {
        RealDir {
            pacer: Some(pacer),
            ..self
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The running digest of `name`, kept from here on: worked out from its bytes if this
    /// process has not touched it yet. None if it cannot be read.
    fn digest_mut(&mut self, name: &str) -> Option<&mut FileDigest> {
        if !self.digests.contains_key(name) {
            let bytes = fs::read(self.path(name)).ok()?;
            self.digests
                .insert(name.to_string(), FileDigest::of(&bytes));
        }
        self.digests.get_mut(name)
    }

    /// `bytes` written at `offset_bytes`, the running digest left alone (a write-back).
    fn write_bytes(&self, name: &str, offset_bytes: u64, bytes: &[u8]) -> Result<(), DiskError> {
        let file = self.open_existing("write", name, true)?;
        file.write_all_at(bytes, offset_bytes)
            .map_err(|e| os_error("write", name, e))
    }

    fn open_existing(&self, op: &'static str, name: &str, write: bool) -> Result<File, DiskError> {
        OpenOptions::new()
            .read(true)
            .write(write)
            .open(self.path(name))
            .map_err(|e| os_error(op, name, e))
    }
}

/// An OS error as the engine sees a disk error.
fn os_error(op: &'static str, name: &str, error: io::Error) -> DiskError {
    if error.kind() == io::ErrorKind::NotFound {
        DiskError::NotFound {
            name: name.to_string(),
        }
    } else {
        DiskError::Os {
            op,
            name: name.to_string(),
            message: error.to_string(),
        }
    }
}

impl Storage for RealDir {
    fn exists(&self, name: &str) -> bool {
        fs::symlink_metadata(self.path(name)).is_ok()
    }

    fn create(&mut self, name: &str) -> Result<(), DiskError> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.path(name))
            .map(drop)
            .map_err(|e| os_error("create", name, e))?;
        self.digests.insert(name.to_string(), FileDigest::empty());
        Ok(())
    }

    fn open_or_create(&mut self, name: &str) -> Result<(), DiskError> {
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.path(name))
            .map(drop)
            .map_err(|e| os_error("open", name, e))
    }

    fn write(&mut self, name: &str, offset_bytes: u64, bytes: &[u8]) -> Result<(), DiskError> {
        let digest = self.digest_mut(name).copied();
        self.write_bytes(name, offset_bytes, bytes)?;
        if let Some(mut digest) = digest {
            digest.write(offset_bytes, bytes);
            self.digests.insert(name.to_string(), digest);
        }
        Ok(())
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> Result<(), DiskError> {
        let digest = self.digest_mut(name).copied();
        let mut file = OpenOptions::new()
            .append(true)
            .open(self.path(name))
            .map_err(|e| os_error("append", name, e))?;
        file.write_all(bytes)
            .map_err(|e| os_error("append", name, e))?;
        if let Some(mut digest) = digest {
            digest.write(digest.len_bytes(), bytes);
            self.digests.insert(name.to_string(), digest);
        }
        Ok(())
    }

    fn truncate(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError> {
        let digest = self.digest_mut(name).copied();
        let file = self.open_existing("truncate", name, true)?;
        file.set_len(len_bytes)
            .map_err(|e| os_error("truncate", name, e))?;
        if let Some(mut digest) = digest {
            digest.set_len(len_bytes);
            self.digests.insert(name.to_string(), digest);
        }
        Ok(())
    }

    fn read(&mut self, name: &str) -> Result<Vec<u8>, DiskError> {
        fs::read(self.path(name)).map_err(|e| os_error("read", name, e))
    }

    fn read_from(&mut self, name: &str, offset_bytes: u64) -> Result<Vec<u8>, DiskError> {
        let mut file = self.open_existing("read", name, false)?;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(offset_bytes))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| os_error("read", name, e))?;
        Ok(bytes)
    }

    fn write_back(&mut self, name: &str, len_bytes: u64) -> Result<(), DiskError> {
        let mut bytes = self.read(name)?;
        bytes.truncate(usize::try_from(len_bytes).expect("a file's length fits"));
        // The file's bytes stay what they were, and so does its running digest.
        self.write_bytes(name, 0, &bytes)
    }

    fn read_shared(&mut self, name: &str) -> Result<Contents, DiskError> {
        self.read(name).map(Contents::from)
    }

    fn len_bytes(&mut self, name: &str) -> Result<u64, DiskError> {
        fs::metadata(self.path(name))
            .map(|m| m.len())
            .map_err(|e| os_error("stat", name, e))
    }

    fn digest(&mut self, name: &str) -> Option<FileDigest> {
        self.digest_mut(name).copied()
    }

    fn fsync(&mut self, name: &str) -> Result<(), DiskError> {
        let file = self.open_existing("fsync", name, false)?;
        file.sync_all().map_err(|e| os_error("fsync", name, e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), DiskError> {
        fs::rename(self.path(from), self.path(to)).map_err(|e| os_error("rename", from, e))?;
        match self.digests.remove(from) {
            Some(digest) => self.digests.insert(to.to_string(), digest),
            None => self.digests.remove(to),
        };
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Result<(), DiskError> {
        fs::remove_file(self.path(name)).map_err(|e| os_error("remove", name, e))?;
        self.digests.remove(name);
        Ok(())
    }

    fn list(&self) -> Vec<String> {
        list_names(&self.root)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", self.root.display()))
    }

    fn fsync_dir(&mut self) -> Result<(), DiskError> {
        File::open(&self.root)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| os_error("fsync-dir", ".", e))
    }

    fn simulated(&self) -> Option<&Disk> {
        None
    }

    fn simulated_mut(&mut self) -> Option<&mut Disk> {
        None
    }

    fn begin(&mut self, line: &TraceLine) {
        if let Some(pacer) = &self.pacer {
            pacer.wait_for(line);
        }
    }

    fn records(&self) -> bool {
        self.trace.is_some()
    }

    fn record(&mut self, line: &TraceLine) {
        if let Some(trace) = &mut self.trace {
            trace
                .write_all(format!("{line}\n").as_bytes())
                .expect("the trace file takes every line");
        }
    }
}

/// The names in `dir`, sorted.
fn list_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// A directory's listing: every file's name, size and content digest, sorted by name.
pub fn listing(dir: &Path) -> io::Result<Vec<ListedFile>> {
    list_names(dir)?
        .into_iter()
        .map(|name| {
            let bytes = fs::read(dir.join(&name))?;
            Ok(ListedFile {
                size_bytes: bytes.len() as u64,
                digest: Fingerprint::of(&bytes).to_string(),
                name,
            })
        })
        .collect()
}

/// The same listing of a simulated disk, as the process sees it.
pub fn disk_listing(disk: &Disk) -> Vec<ListedFile> {
    disk.list()
        .into_iter()
        .map(|name| {
            let bytes = disk.read(&name).expect("a listed file exists");
            ListedFile {
                size_bytes: bytes.len() as u64,
                digest: Fingerprint::of(&bytes).to_string(),
                name,
            }
        })
        .collect()
}
