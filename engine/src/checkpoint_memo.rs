//! `CheckpointMemo`: full checkpoint files decoded, kept with the bytes they were decoded
//! from, so that a recovery that reads the same bytes takes the result instead of decoding
//! them again.
//!
//! With unbounded lateness a full checkpoint holds every window of the run, and decoding its
//! JSON was half of a power-loss class sweep's time at 100,000 events (each of the ~300,000
//! class points that ran decoded a checkpoint of ~5,000 windows). Points that crash between
//! the same two checkpoints read the same checkpoint file, whose bytes their disks share
//! with the fault-free run's: comparing them costs a pointer a chunk.
//!
//! Decoding is a pure function of the bytes and the checksum flag, so a memo changes how
//! long a recovery takes, never what it reads (the read is still a step of the run) or what
//! it returns: an entry is taken only for equal bytes (`Contents` equality, which compares
//! bytes where chunks are not shared) and the same flag.

use crate::checkpoint::{Checkpoint, Invalid};
use crate::recent::Recent;
use keel_sim::Contents;
use std::fmt;

/// The most decoded files a memo keeps (the newest): a sweep's points come in crash-step
/// order, so the points that read one checkpoint follow each other, and each worker thread
/// is on about one checkpoint interval at a time (the same bound as `ChainMemo`'s).
pub const CHECKPOINT_MEMO_ENTRIES_MAX: usize = 4;

/// Recent decodes of full checkpoint files, shared between threads (bytes are compared
/// outside the lock: see [`Recent`]).
#[derive(Default)]
pub struct CheckpointMemo {
    entries: Recent<Entry, CHECKPOINT_MEMO_ENTRIES_MAX>,
}

/// One decoded file: its bytes, the checksum flag and what decoding returned.
struct Entry {
    bytes: Contents,
    checksum: bool,
    result: Result<Checkpoint, Invalid>,
}

/// Its size only.
impl fmt::Debug for CheckpointMemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckpointMemo({} entries)", self.entries.len())
    }
}

/// [`Checkpoint::decode_file`] of `bytes`, through `memo` if there is one: the same result.
pub fn decode_file(
    bytes: &Contents,
    checksum: bool,
    memo: Option<&CheckpointMemo>,
) -> Result<Checkpoint, Invalid> {
    let Some(memo) = memo else {
        return Checkpoint::decode_file(&bytes.to_vec(), checksum);
    };
    if let Some(entry) = memo
        .entries
        .find(|entry| entry.checksum == checksum && entry.bytes == *bytes)
    {
        return entry.result.clone();
    }
    let result = Checkpoint::decode_file(&bytes.to_vec(), checksum);
    memo.entries.remember(Entry {
        bytes: bytes.clone(),
        checksum,
        result: result.clone(),
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::OperatorState;

    /// What a decode through the memo returns is what a decode without it returns: for an
    /// intact file, a torn one, the same bytes in chunks not shared, and the other flag.
    #[test]
    fn memo_returns_what_decoding_returns() {
        let checkpoint = Checkpoint {
            index: 8,
            state: OperatorState::default(),
            transactions: Vec::new(),
        };
        let memo = CheckpointMemo::default();
        let check = |bytes: &[u8], checksum: bool| {
            let contents = Contents::from(bytes.to_vec());
            let direct = Checkpoint::decode_file(bytes, checksum);
            for _ in 0..2 {
                assert_eq!(decode_file(&contents, checksum, Some(&memo)), direct);
                assert_eq!(decode_file(&contents, checksum, None), direct);
            }
        };
        for checksum in [true, false] {
            let intact = checkpoint.encode_file(checksum);
            check(&intact, checksum);
            check(&intact, !checksum);
            check(&intact[..intact.len() - 1], checksum);
            let mut flipped = intact.clone();
            *flipped.last_mut().expect("not empty") ^= 1;
            check(&flipped, checksum);
        }
        assert_eq!(memo.entries.len(), CHECKPOINT_MEMO_ENTRIES_MAX);
    }
}
