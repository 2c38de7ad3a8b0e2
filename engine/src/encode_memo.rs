//! `EncodeMemo`: checkpoint files of every window (full checkpoints, incremental bases)
//! encoded, kept with the state they encode, so that a run that writes the same state at the
//! same index takes the bytes instead of encoding them again.
//!
//! With unbounded lateness such a file holds every window of the run. A sweep's point that
//! crashes just before an incremental compaction recovers from the checkpoint before it and
//! replays through it, writing the base the fault-free run wrote: at 1,000,000 events the
//! base of the compaction at event 745,000 (74,511 windows) was encoded 739 times, and base
//! encoding was a quarter of the sweep's time in points. That cost grew with the stream (the
//! time a point at 1,000,000 events was twice the time at 100,000).
//!
//! Encoding is a pure function of (magic, checksum flag, index, state, pending
//! transactions), so a memo changes how long a checkpoint takes, never what it writes (the
//! writes are still steps of the run): an entry is taken only for an equal key. The state
//! is compared as `OperatorState` equality (a chunked window map by its digest, see
//! `windows_map.rs`, whose debug builds check each verdict against the entries).

use crate::checkpoint::{encode_state_body, seal, PendingTxn};
use crate::recent::Recent;
use crate::window::OperatorState;
use keel_sim::Contents;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The most encoded files a memo keeps (the newest): a sweep's points come in crash-step
/// order, so the points that replay through one checkpoint follow each other, and each
/// worker thread is on about one checkpoint interval at a time (the bound `ChainMemo` and
/// `CheckpointMemo` keep too). An entry holds a file of every window: at 1,000,000 events
/// about 4 MB.
pub const ENCODE_MEMO_ENTRIES_MAX: usize = 4;

/// Recent encodes, shared between threads (keys are compared outside the lock: see
/// [`Recent`]).
#[derive(Default)]
pub struct EncodeMemo {
    entries: Recent<Entry, ENCODE_MEMO_ENTRIES_MAX>,
}

/// What one file encodes, and its bytes.
struct Entry {
    magic: &'static str,
    checksum: bool,
    index: u64,
    state: OperatorState,
    transactions: Vec<PendingTxn>,
    file: Arc<EncodedFile>,
}

/// A checkpoint file's bytes, header included, as the simulated disk holds a file (so that
/// every run that writes it shares its chunks: `Storage::write_shared`), and their CRC-32
/// once asked for (an incremental manifest names its base by it).
#[derive(Debug)]
pub struct EncodedFile {
    pub contents: Contents,
    crc32: OnceLock<u32>,
}

impl EncodedFile {
    pub(crate) fn new(bytes: Vec<u8>) -> EncodedFile {
        EncodedFile {
            contents: Contents::from(bytes),
            crc32: OnceLock::new(),
        }
    }

    pub fn len_bytes(&self) -> usize {
        self.contents.len()
    }

    /// The CRC-32 of the whole file (computed once).
    pub fn crc32(&self) -> u32 {
        *self.crc32.get_or_init(|| {
            let mut hasher = crc32fast::Hasher::new();
            for chunk in self.contents.chunks() {
                hasher.update(chunk);
            }
            hasher.finalize()
        })
    }
}

/// Its size only.
impl fmt::Debug for EncodeMemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EncodeMemo({} entries)", self.entries.len())
    }
}

/// `seal(magic, encode_state_body(index, state, transactions), checksum)`, through `memo`
/// if there is one: the same bytes.
pub fn encode_sealed(
    magic: &'static str,
    checksum: bool,
    index: u64,
    state: &OperatorState,
    transactions: &[PendingTxn],
    memo: Option<&EncodeMemo>,
) -> Arc<EncodedFile> {
    let encode = || {
        let body = encode_state_body(index, state, transactions);
        Arc::new(EncodedFile::new(seal(magic, &body, checksum)))
    };
    let Some(memo) = memo else {
        return encode();
    };
    let found = memo.entries.find(|entry| {
        entry.magic == magic
            && entry.checksum == checksum
            && entry.index == index
            && entry.transactions == transactions
            && entry.state == *state
    });
    if let Some(entry) = found {
        return Arc::clone(&entry.file);
    }
    let file = encode();
    memo.entries.remember(Entry {
        magic,
        checksum,
        index,
        state: state.clone(),
        transactions: transactions.to_vec(),
        file: Arc::clone(&file),
    });
    file
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowState;

    fn state(windows: &[(i64, i64)]) -> OperatorState {
        let mut state = OperatorState {
            max_ts: Some(40),
            ..OperatorState::default()
        };
        for &(end, sum) in windows {
            state.windows.insert(
                end,
                WindowState {
                    sum: sum.into(),
                    ..WindowState::default()
                },
            );
        }
        state
    }

    /// One encode through a memo that already holds other entries: it returns the bytes an
    /// encode without the memo returns, whether the memo had the key or a near one.
    fn check(
        memo: &EncodeMemo,
        magic: &'static str,
        checksum: bool,
        index: u64,
        windows: &[(i64, i64)],
    ) {
        let state = state(windows);
        let without = encode_sealed(magic, checksum, index, &state, &[], None);
        let with = encode_sealed(magic, checksum, index, &state, &[], Some(memo));
        assert_eq!(with.contents, without.contents);
        assert_eq!(with.crc32(), crc32fast::hash(&without.contents.to_vec()));
    }

    #[test]
    fn memo_returns_what_encoding_returns() {
        let memo = EncodeMemo::default();
        // Each differs from the one before in one part of the key only.
        check(&memo, "keel-checkpoint v1", true, 8, &[(10, 3), (20, 5)]);
        check(&memo, "keel-checkpoint v1", true, 8, &[(10, 3), (20, 6)]);
        check(&memo, "keel-checkpoint v1", true, 16, &[(10, 3), (20, 6)]);
        check(&memo, "keel-checkpoint v1", false, 16, &[(10, 3), (20, 6)]);
        check(&memo, "keel-delta v1", false, 16, &[(10, 3), (20, 6)]);
        // Taken from the memo: the same bytes again.
        check(&memo, "keel-checkpoint v1", true, 8, &[(10, 3), (20, 5)]);
        assert_eq!(memo.entries.len(), ENCODE_MEMO_ENTRIES_MAX);
    }

    #[test]
    fn an_equal_key_takes_the_entry_and_another_does_not() {
        let memo = EncodeMemo::default();
        let a = state(&[(10, 3)]);
        let first = encode_sealed("keel-delta v1", true, 8, &a, &[], Some(&memo));
        let again = encode_sealed("keel-delta v1", true, 8, &a.clone(), &[], Some(&memo));
        assert!(Arc::ptr_eq(&first, &again));
        let other = encode_sealed("keel-delta v1", true, 9, &a, &[], Some(&memo));
        assert!(!Arc::ptr_eq(&first, &other));
        assert_ne!(first.contents, other.contents);
    }
}
