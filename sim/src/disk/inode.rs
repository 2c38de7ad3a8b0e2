//! A file of the simulated disk (`Inode`): durable bytes, the pending data operations since
//! its last fsync, what the process reads, and the byte ranges a failed fsync left
//! unpersisted; how an fsync, a failed fsync and a page eviction move them. The crash model
//! they serve is stated at the top of `disk.rs`.

use crate::digest::FileDigest;
use std::sync::Arc;

/// A change to a file's data or size that no fsync has covered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum DataOp {
    Write { offset_bytes: u64, bytes: Written },
    SetLen { len_bytes: u64 },
}

/// The bytes of a pending write: its own, or, for a file written back over itself
/// (`Disk::write_back`), the file's bytes then, sharing their chunks (a write-back of a long
/// file copies none of it). Equal when the bytes are, however they are held.
#[derive(Clone, Debug)]
pub(super) enum Written {
    Own(Vec<u8>),
    Shared(Contents),
}

impl Written {
    pub(super) fn len(&self) -> usize {
        match self {
            Written::Own(bytes) => bytes.len(),
            Written::Shared(contents) => contents.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes `range` (within the write).
    pub(super) fn bytes(&self, range: std::ops::Range<usize>) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Written::Own(bytes) => std::borrow::Cow::Borrowed(&bytes[range]),
            Written::Shared(contents) => std::borrow::Cow::Owned(contents.copy_range(range)),
        }
    }
}

impl PartialEq for Written {
    fn eq(&self, other: &Written) -> bool {
        match (self, other) {
            (Written::Own(a), Written::Own(b)) => a == b,
            (Written::Shared(a), Written::Shared(b)) => a == b,
            (Written::Own(own), Written::Shared(shared))
            | (Written::Shared(shared), Written::Own(own)) => {
                own.len() == shared.len() && shared.to_vec() == *own
            }
        }
    }
}

impl Eq for Written {}

/// A file: its durable bytes, what the process reads, and what lies between.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Inode {
    /// The contents as of the last successful fsync of this file.
    pub(super) durable: Contents,
    /// Data operations since that fsync, in the order the process issued them.
    /// Shared between clones until one of them changes it, as the contents are.
    pub(super) pending: Arc<Vec<DataOp>>,
    /// What the process reads: `durable` with `pending` applied, except on `unpersisted`.
    pub(super) current: Contents,
    /// Byte ranges `[start, end)`, sorted and disjoint, whose bytes in `current` a failed
    /// fsync did not write (clean pages the disk does not hold): `durable` holds what the
    /// disk reads there. Always within both `current` and `durable`.
    pub(super) unpersisted: Vec<(u64, u64)>,
    /// xfs (and posix): the length the disk may still hold because a failed fsync's writes
    /// never completed (xfs moves the on-disk size only when a write completes), below
    /// `durable`'s length; a power loss chooses between the two. `None` when no failed
    /// fsync left the size in doubt, or a later completed write or truncate settled it.
    pub(super) failed_len_bytes: Option<u64>,
    /// The file's running digest ([`FileDigest`]): what a step that reads or writes it shows
    /// on its trace line. How the file came to be, not what it is: see [`RunningDigest`].
    pub(super) digest: RunningDigest,
}

/// An inode's running digest, kept by the disk's operations on it. Two inodes are equal
/// whatever theirs say (a sweep's comparisons of disks ask what a process can still see,
/// and a snapshot's files may share another run's chunks), as two runs that wrote the same
/// bytes otherwise hold the same files; a run's fingerprint is where the digest counts.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RunningDigest(pub(super) FileDigest);

impl PartialEq for RunningDigest {
    fn eq(&self, _: &RunningDigest) -> bool {
        true
    }
}

impl Eq for RunningDigest {}

impl Inode {
    pub(super) fn apply(&mut self, op: DataOp) {
        apply_data_op(&mut self.current, &op);
        match &op {
            // New bytes are dirty: the next fsync writes them.
            DataOp::Write {
                offset_bytes,
                bytes,
            } => ranges_remove(
                &mut self.unpersisted,
                *offset_bytes,
                offset_bytes + bytes.len() as u64,
            ),
            DataOp::SetLen { len_bytes } => ranges_clip(&mut self.unpersisted, *len_bytes),
        }
        Arc::make_mut(&mut self.pending).push(op);
    }

    /// A successful fsync: every pending operation reaches the disk; unpersisted bytes stay
    /// unpersisted (their pages are clean, nothing writes them).
    ///
    /// With no unpersisted byte, what the disk then holds is what the process reads: the
    /// durable contents become `current`'s, sharing its chunks (applying the operations
    /// again would keep every synced file twice, a sweep's snapshots each a copy).
    pub(super) fn sync(&mut self) {
        let pending = Arc::unwrap_or_clone(std::mem::take(&mut self.pending));
        let shares_current = self.unpersisted.is_empty();
        for op in &pending {
            // A completed write moves the on-disk size to its end; a truncate sets it.
            self.failed_len_bytes = match (op, self.failed_len_bytes) {
                (_, None) | (DataOp::SetLen { .. }, _) => None,
                (
                    DataOp::Write {
                        offset_bytes,
                        bytes,
                    },
                    Some(stay),
                ) => Some(stay.max(offset_bytes + bytes.len() as u64)),
            };
        }
        if shares_current {
            if cfg!(debug_assertions) {
                let mut applied = self.durable.clone();
                for op in &pending {
                    apply_data_op(&mut applied, op);
                }
                assert!(
                    applied == self.current,
                    "durable with pending applied is current"
                );
            }
            self.durable = self.current.clone();
        } else {
            for op in &pending {
                apply_data_op(&mut self.durable, op);
            }
        }
        if self
            .failed_len_bytes
            .is_some_and(|stay| stay >= self.durable.len() as u64)
        {
            self.failed_len_bytes = None;
        }
        assert_eq!(self.durable.len(), self.current.len());
    }

    /// A failed fsync: sizes and truncates reach the disk, written bytes do not (they become
    /// unpersisted). With `size_may_stay` (xfs, posix) the size the writes gave may not reach
    /// the disk either: a power loss may find the file at its size before the fsync.
    pub(super) fn sync_failed(&mut self, size_may_stay: bool) {
        let mut stay = self.failed_len_bytes.unwrap_or(self.durable.len() as u64);
        for op in Arc::unwrap_or_clone(std::mem::take(&mut self.pending)) {
            if let DataOp::SetLen { len_bytes } = op {
                stay = len_bytes;
            }
            match op {
                DataOp::Write {
                    offset_bytes,
                    bytes,
                } => {
                    let end_bytes = offset_bytes + bytes.len() as u64;
                    let end = usize::try_from(end_bytes).expect("fits in memory");
                    if self.durable.len() < end {
                        self.durable.resize(end);
                    }
                    ranges_add(&mut self.unpersisted, offset_bytes, end_bytes);
                }
                DataOp::SetLen { len_bytes } => {
                    apply_data_op(&mut self.durable, &op);
                    ranges_clip(&mut self.unpersisted, len_bytes);
                }
            }
        }
        self.failed_len_bytes =
            Some(stay).filter(|&stay| size_may_stay && stay < self.durable.len() as u64);
        assert_eq!(self.durable.len(), self.current.len());
    }

    /// Drops the clean pages that hold unpersisted bytes: the process reads what the disk
    /// holds there. Returns how many bytes it dropped.
    pub(super) fn evict(&mut self) -> u64 {
        let mut dropped_bytes = 0;
        for (start, end) in std::mem::take(&mut self.unpersisted) {
            let (start, end) = (start as usize, end as usize);
            assert!(end <= self.current.len());
            assert!(end <= self.durable.len());
            let durable = self.durable.copy_range(start..end);
            self.current.write_at(start, &durable);
            dropped_bytes += (end - start) as u64;
        }
        if dropped_bytes > 0 {
            self.digest.0.changed(self.current.len() as u64);
        }
        dropped_bytes
    }

    pub(super) fn unpersisted_bytes(&self) -> u64 {
        self.unpersisted
            .iter()
            .map(|(start, end)| end - start)
            .sum()
    }

    /// Whether everything pending is appends, each at the end of the one before, the first
    /// at the durable length, with nothing a failed fsync left unpersisted: then the file's
    /// current bytes are its durable bytes and those appends (asserted).
    pub(super) fn appended_only(&self) -> bool {
        if self.unpersisted_bytes() > 0 || self.failed_len_bytes.is_some() {
            return false;
        }
        let mut end_bytes = self.durable.len() as u64;
        for op in self.pending.iter() {
            match op {
                DataOp::Write {
                    offset_bytes,
                    bytes,
                } if *offset_bytes == end_bytes => end_bytes += bytes.len() as u64,
                _ => return false,
            }
        }
        assert_eq!(
            end_bytes,
            self.current.len() as u64,
            "appends alone: the file is its durable bytes and them"
        );
        true
    }
}

/// Adds `[start, end)` to sorted disjoint `ranges`, merging what touches it.
pub(super) fn ranges_add(ranges: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    // In order (the common case: appends), in O(1): after the last range, or from within it.
    match ranges.last_mut() {
        None => return ranges.push((start, end)),
        Some(&mut (_, last_end)) if last_end < start => return ranges.push((start, end)),
        Some((last_start, last_end)) if *last_start <= start => {
            *last_end = (*last_end).max(end);
            return;
        }
        Some(_) => {}
    }
    let (mut start, mut end) = (start, end);
    let mut kept = Vec::with_capacity(ranges.len() + 1);
    for &(s, e) in ranges.iter() {
        if e < start || s > end {
            kept.push((s, e));
        } else {
            start = start.min(s);
            end = end.max(e);
        }
    }
    kept.push((start, end));
    kept.sort_unstable();
    *ranges = kept;
}

/// Removes `[start, end)` from sorted disjoint `ranges`.
pub(super) fn ranges_remove(ranges: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    // Nothing at or past `start` (the common case: appends), in O(1).
    if start >= end || ranges.last().is_none_or(|&(_, last_end)| last_end <= start) {
        return;
    }
    let mut kept = Vec::with_capacity(ranges.len() + 1);
    for &(s, e) in ranges.iter() {
        if e <= start || s >= end {
            kept.push((s, e));
            continue;
        }
        if s < start {
            kept.push((s, start));
        }
        if e > end {
            kept.push((end, e));
        }
    }
    *ranges = kept;
}

/// Cuts sorted disjoint `ranges` at `len_bytes`.
pub(super) fn ranges_clip(ranges: &mut Vec<(u64, u64)>, len_bytes: u64) {
    ranges_remove(ranges, len_bytes, u64::MAX);
}

/// A file's bytes, shared between clones of a disk chunk by chunk until one of them changes
/// them: a fork of a run copies the chunks it writes, not the whole disk, and two disks
/// compare a file they still share without reading it (`contents.rs`).
pub(super) use super::contents::Contents;

pub(super) fn apply_data_op(contents: &mut Contents, op: &DataOp) {
    match op {
        DataOp::Write {
            offset_bytes,
            bytes,
        } => {
            let offset = usize::try_from(*offset_bytes).expect("offset fits in memory");
            match bytes {
                Written::Own(bytes) => contents.write_at(offset, bytes),
                Written::Shared(bytes) => {
                    assert_eq!(offset, 0, "a shared write covers the file from its start");
                    contents.write_over(bytes)
                }
            }
        }
        DataOp::SetLen { len_bytes } => {
            contents.resize(usize::try_from(*len_bytes).expect("length fits in memory"))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges_act_as_a_set_of_bytes() {
        // Adds, removes and clips drawn by a fixed LCG, in order and out of it, against a
        // set of bytes: the ranges stay sorted, disjoint, apart, and hold exactly the set.
        let mut ranges = Vec::new();
        let mut bytes = std::collections::BTreeSet::new();
        let mut lcg = 7u64;
        let mut next = |bound: u64| {
            lcg = lcg
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (lcg >> 33) % bound
        };
        for round in 0..4_000u64 {
            // Mostly near the end, as appends are.
            let start = if round % 3 == 0 {
                next(200)
            } else {
                round / 20 + next(30)
            };
            let end = start + next(12);
            match next(10) {
                0..=5 => {
                    super::ranges_add(&mut ranges, start, end);
                    bytes.extend(start..end);
                }
                6..=8 => {
                    super::ranges_remove(&mut ranges, start, end);
                    bytes.retain(|&b| !(start..end).contains(&b));
                }
                _ => {
                    super::ranges_clip(&mut ranges, end + 100);
                    bytes.retain(|&b| b < end + 100);
                }
            }
            assert!(
                ranges.windows(2).all(|w| w[0].1 < w[1].0),
                "{round}: {ranges:?}"
            );
            assert!(ranges.iter().all(|&(s, e)| s < e));
            let held: Vec<u64> = ranges.iter().flat_map(|&(s, e)| s..e).collect();
            assert_eq!(held, bytes.iter().copied().collect::<Vec<_>>(), "{round}");
        }
    }

    #[test]
    fn ranges_merge_split_and_clip() {
        let mut ranges = Vec::new();
        super::ranges_add(&mut ranges, 5, 8);
        super::ranges_add(&mut ranges, 0, 2);
        super::ranges_add(&mut ranges, 2, 5);
        assert_eq!(ranges, vec![(0, 8)]);
        super::ranges_remove(&mut ranges, 3, 4);
        assert_eq!(ranges, vec![(0, 3), (4, 8)]);
        super::ranges_add(&mut ranges, 10, 12);
        super::ranges_clip(&mut ranges, 5);
        assert_eq!(ranges, vec![(0, 3), (4, 5)]);
        super::ranges_add(&mut ranges, 7, 7);
        assert_eq!(ranges, vec![(0, 3), (4, 5)]);
    }
}
