//! `ChainMemo`: the result of restoring an incremental chain, kept with the bytes it read, so
//! that a recovery over the same files takes the result instead of decoding them again.
//!
//! Recovery reads the manifest, each delta back to the base, and the base, and decodes all
//! of them: with unbounded lateness the base holds every window of the run, so each of a
//! sweep's points paid the size of the state at its restart. Points that crash between the
//! same two checkpoints recover from the same files, whose bytes their disks share with the
//! fault-free run's (a comparison of shared chunks costs a pointer each).
//!
//! Still every read is a step: a memoized restore reads the files its entry read, in the
//! same order, each as one step, and takes the entry's result only if every file read the
//! same bytes. At the first that differs it restores in full, handing the files it read
//! already to [`incremental::restore`] before reading more, so the steps it takes are the
//! ones a restore without the memo takes (its names follow from the bytes read before).
//! Which entry is found changes how long a restore takes, never what it returns.

use crate::checkpoint::Invalid;
use crate::incremental::{self, DecodedFiles, NotRestored, ReadFile, Restored};
use crate::recent::Recent;
use keel_sim::Contents;
use std::fmt;
use std::sync::Arc;

/// The most restores a memo keeps (the newest): a sweep's points come in crash-step order,
/// so the points that share a chain follow each other, and each worker thread is on about
/// one chain at a time. Measured on the 1,000,000-event sweep at 2 jobs: 8 entries held
/// 18 MB more at the peak than 4, for no gain in time.
pub const CHAIN_MEMO_ENTRIES_MAX: usize = 4;

/// Recent restores: what each read and what it returned. Shared between threads, so behind
/// a lock (taken twice per restore: to look up and to remember).
#[derive(Default)]
pub struct ChainMemo {
    entries: Recent<Entry, CHAIN_MEMO_ENTRIES_MAX>,
    /// The files restores decoded: a restore the entries miss (a chain one delta longer
    /// than the last one's) decodes only what it has not decoded before.
    decoded: DecodedFiles,
}

/// One restore of a manifest: the files it read after the manifest, and its result.
struct Entry {
    manifest_name: String,
    manifest: Contents,
    checksum: bool,
    /// Each file read, in order, and its bytes (None: missing).
    reads: Vec<(String, Option<Contents>)>,
    result: Result<Restored, Invalid>,
}

impl ChainMemo {
    fn find(&self, manifest_name: &str, manifest: &Contents, checksum: bool) -> Option<Arc<Entry>> {
        self.entries.find(|entry| {
            entry.manifest_name == manifest_name
                && entry.checksum == checksum
                && entry.manifest == *manifest
        })
    }
}

/// Its size only.
impl fmt::Debug for ChainMemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChainMemo({} entries)", self.entries.len())
    }
}

/// [`incremental::restore`] of the manifest `manifest_name` (its bytes `manifest`), through
/// `memo` if there is one: the same reads, as the same steps, and the same result.
pub fn restore<R: ReadFile>(
    manifest_name: &str,
    manifest: &Contents,
    checksum: bool,
    reader: &mut R,
    memo: Option<&ChainMemo>,
) -> Result<Restored, NotRestored<R::Error>> {
    let Some(memo) = memo else {
        return incremental::restore(manifest_name, &manifest.to_vec(), checksum, reader, None);
    };
    let mut read_already = Vec::new();
    if let Some(entry) = memo.find(manifest_name, manifest, checksum) {
        let mut all_same = true;
        // Bounded: one read per file the entry read.
        for (name, bytes) in &entry.reads {
            let read = reader.read_file(name).map_err(NotRestored::Io)?;
            all_same = read == *bytes;
            read_already.push((name.clone(), read));
            if !all_same {
                break;
            }
        }
        if all_same {
            return entry.result.clone().map_err(NotRestored::Invalid);
        }
    }
    let mut recording = Recording {
        reader,
        read_already: read_already.into_iter(),
        reads: Vec::new(),
    };
    let result = incremental::restore(
        manifest_name,
        &manifest.to_vec(),
        checksum,
        &mut recording,
        Some(&memo.decoded),
    );
    assert!(
        recording.read_already.next().is_none(),
        "a restore reads again every file it read before"
    );
    let reads = recording.reads;
    let remembered = match &result {
        Ok(restored) => Some(Ok(restored.clone())),
        Err(NotRestored::Invalid(invalid)) => Some(Err(invalid.clone())),
        // A crash or an I/O error during the reads: the restore did not finish.
        Err(NotRestored::Io(_)) => None,
    };
    if let Some(result) = remembered {
        memo.entries.remember(Entry {
            manifest_name: manifest_name.to_string(),
            manifest: manifest.clone(),
            checksum,
            reads,
            result,
        });
    }
    result
}

/// A reader that hands out the files read already first (the same names, in the same order),
/// then reads, and records every file it hands out.
struct Recording<'r, R: ReadFile> {
    reader: &'r mut R,
    read_already: std::vec::IntoIter<(String, Option<Contents>)>,
    reads: Vec<(String, Option<Contents>)>,
}

impl<R: ReadFile> ReadFile for Recording<'_, R> {
    type Error = R::Error;
    fn read_file(&mut self, name: &str) -> Result<Option<Contents>, R::Error> {
        let read = match self.read_already.next() {
            Some((read_name, read)) => {
                assert_eq!(read_name, name, "the same bytes lead to the same reads");
                read
            }
            None => self.reader.read_file(name)?,
        };
        self.reads.push((name.to_string(), read.clone()));
        Ok(read)
    }
}
