//! `DecodedFiles`: the chain files a restore checked and decoded, kept by name with the bytes
//! and the reference they were checked against, so that a later restore reading the same
//! bytes under the same reference takes the decoded file instead of checking and decoding
//! it again.
//!
//! A sweep's restart classes recover once per checkpoint interval, each from a chain one
//! delta longer than the last one's: at a thousand deltas on a base of every window, each
//! recovery decoded the whole chain again. A cache and nothing else: a restore still reads
//! every file (each read is a step), a file is taken only if its bytes equal the bytes
//! decoded (compared by shared chunks) and the reference naming it is the one it was
//! checked against (name, length, CRC-32) under the same checksum rule, and only files
//! that passed those checks and decoded are kept. The checks that follow (indexes, links)
//! read only the reference and the decoded file, and run on every restore, so a restore
//! returns what it returns without the cache.

use super::{DeltaFile, FileRef};
use crate::checkpoint::Checkpoint;
use keel_sim::Contents;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The most deltas kept: all of them are dropped when a new one would pass it (a chain
/// holds at most `chain_deltas_max` deltas, about a thousand at K=1000).
pub const DECODED_DELTAS_MAX: usize = 4_096;

/// Decoded chain files: deltas by name, and the last base.
#[derive(Default)]
pub struct DecodedFiles {
    deltas: Mutex<BTreeMap<String, Decoded<Arc<DeltaFile>>>>,
    base: Mutex<Option<Decoded<Checkpoint>>>,
}

/// A file's bytes, the reference they were checked against, the checksum rule, and what
/// they decode to.
struct Decoded<T> {
    reference: FileRef,
    checksum: bool,
    bytes: Contents,
    value: T,
}

impl<T> Decoded<T> {
    fn is_for(&self, reference: &FileRef, checksum: bool, bytes: &Contents) -> bool {
        self.checksum == checksum && self.reference == *reference && self.bytes == *bytes
    }
}

impl DecodedFiles {
    pub(super) fn delta(
        &self,
        reference: &FileRef,
        checksum: bool,
        bytes: &Contents,
    ) -> Option<Arc<DeltaFile>> {
        let deltas = self.deltas.lock().expect("no holder panics");
        deltas
            .get(&reference.file)
            .filter(|decoded| decoded.is_for(reference, checksum, bytes))
            .map(|decoded| Arc::clone(&decoded.value))
    }

    pub(super) fn keep_delta(
        &self,
        reference: &FileRef,
        checksum: bool,
        bytes: Contents,
        delta: &Arc<DeltaFile>,
    ) {
        let decoded = Decoded {
            reference: reference.clone(),
            checksum,
            bytes,
            value: Arc::clone(delta),
        };
        let mut deltas = self.deltas.lock().expect("no holder panics");
        if deltas.len() >= DECODED_DELTAS_MAX {
            deltas.clear();
        }
        deltas.insert(reference.file.clone(), decoded);
        assert!(deltas.len() <= DECODED_DELTAS_MAX);
    }

    pub(super) fn base(
        &self,
        reference: &FileRef,
        checksum: bool,
        bytes: &Contents,
    ) -> Option<Checkpoint> {
        let base = self.base.lock().expect("no holder panics");
        base.as_ref()
            .filter(|decoded| decoded.is_for(reference, checksum, bytes))
            .map(|decoded| decoded.value.clone())
    }

    pub(super) fn keep_base(
        &self,
        reference: &FileRef,
        checksum: bool,
        bytes: Contents,
        checkpoint: &Checkpoint,
    ) {
        *self.base.lock().expect("no holder panics") = Some(Decoded {
            reference: reference.clone(),
            checksum,
            bytes,
            value: checkpoint.clone(),
        });
    }
}

/// Its size only.
impl std::fmt::Debug for DecodedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let deltas = self.deltas.lock().map_or(0, |deltas| deltas.len());
        write!(f, "DecodedFiles({deltas} deltas)")
    }
}
