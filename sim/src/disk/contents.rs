//! A file's bytes as fixed-size chunks shared between clones ([`Contents`]): a fork of a run
//! copies a file's chunk list, not its bytes, and a write copies only the chunks it touches
//! while they are shared, so the cost of forking a run and appending to its sink does not
//! grow with the file.
//!
//! Chunk `i` holds the bytes `i * CHUNK_BYTES .. (i + 1) * CHUNK_BYTES`: every chunk but the
//! last is full and none is empty. Boundaries are fixed by offset, so two files are compared
//! chunk by chunk, and a chunk two files still share is equal without reading it.
//!
//! The last chunk may hold more bytes than the file has (the bytes past its length are not
//! the file's): a file that is a prefix of a longer one shares the longer one's chunk where
//! it ends ([`Contents::prefix`]) instead of holding a copy of that chunk's start. A sweep
//! keeps hundreds of snapshots of a growing sink file, each of which had held a copy of up
//! to a chunk. A write to such a chunk first cuts it to the file (copying it if shared).

use super::chunk_list::ChunkList;
use crate::digest::Fnv1a64;
use std::sync::{Arc, OnceLock};

/// The bytes of one chunk: a write into a shared chunk copies at most this much (and the
/// chunk's group of pointers, `chunk_list.rs`). Measured on forked sweeps (`keel bench
/// --sweep 3000`): 64 KiB chunks spent a quarter of the sweep copying its sink's last chunk.
pub const CHUNK_BYTES: usize = 4 * 1024;

/// A file's bytes (see the module header). The chunk list is shared too, so a copy of a disk
/// costs one count per file, and its first write copies the list's groups it writes in
/// (`chunk_list.rs`).
#[derive(Clone, Default)]
pub struct Contents {
    chunks: ChunkList,
    len_bytes: usize,
    /// The bytes' FNV-1a 64 once worked out ([`Contents::fnv`]), shared by the copies of
    /// contents made whole from bytes (an encoded checkpoint a sweep's points write again
    /// and again: its digest is worked out once); None for contents a write changed.
    fnv: Option<Arc<OnceLock<u64>>>,
}

impl Contents {
    pub fn len(&self) -> usize {
        self.len_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }

    /// The bytes' FNV-1a 64: worked out once for contents made whole from bytes (and their
    /// copies), hashed each time for contents a write changed.
    pub fn fnv(&self) -> u64 {
        let hash = || {
            let mut hash = Fnv1a64::new();
            for chunk in self.chunks() {
                hash.write(chunk);
            }
            hash.finish()
        };
        match &self.fnv {
            Some(cell) => *cell.get_or_init(hash),
            None => hash(),
        }
    }

    /// Forgets the bytes' digest: they are about to change.
    fn changing(&mut self) {
        self.fnv = None;
    }

    /// Whether `other` is a copy of this very file (one chunk list): equal without reading a
    /// byte. False says nothing about the bytes.
    pub fn is_same_copy(&self, other: &Contents) -> bool {
        self.chunks.is_same_list(&other.chunks) && self.len_bytes == other.len_bytes
    }

    /// Whether the two hold the same bytes in the very same chunks (a pointer test a chunk,
    /// never a byte compared): true of [`Contents::is_same_copy`] copies, and of prefixes of
    /// one file's chunks made apart (`prefix`, `share_prefix_of`). False says nothing.
    pub fn is_same_chunks(&self, other: &Contents) -> bool {
        self.len_bytes == other.len_bytes
            && self.chunks.len() == other.chunks.len()
            && self.chunks.shared_prefix_len(&other.chunks) == self.chunks.len()
    }

    /// The chunks, in order: every byte once, none empty.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.chunks.len()).map(|i| self.chunk(i))
    }

    /// Chunk `i`'s bytes of the file (the last chunk's may be fewer than it holds).
    fn chunk(&self, i: usize) -> &[u8] {
        let start = i * CHUNK_BYTES;
        assert!(start < self.len_bytes);
        let len = (self.len_bytes - start).min(CHUNK_BYTES);
        &self.chunks.get(i)[..len]
    }

    /// The file's first `len_bytes` (at most its length), sharing every chunk, the one it
    /// ends in included.
    pub fn prefix(&self, len_bytes: usize) -> Contents {
        assert!(len_bytes <= self.len_bytes);
        if len_bytes == self.len_bytes {
            return self.clone();
        }
        let prefix = Contents {
            chunks: self.chunks.prefix(len_bytes.div_ceil(CHUNK_BYTES)),
            len_bytes,
            fnv: None,
        };
        prefix.check();
        prefix
    }

    /// Holds `longer`'s chunks instead of its own if these bytes are its first ones: the
    /// same bytes, less memory where this file's chunks were copies. Whether it did.
    pub fn share_prefix_of(&mut self, longer: &Contents) -> bool {
        if self.len_bytes == 0 || !longer.starts_with(self) {
            return false;
        }
        let shared = longer.prefix(self.len_bytes);
        debug_assert!(shared == *self);
        *self = shared;
        true
    }

    /// Cuts the last chunk to the file's bytes (copying only those if it is shared), so that
    /// it can grow or be written: bytes past the end are another file's.
    fn own_last_chunk_bytes(&mut self) {
        let Some(last_index) = self.chunks.len().checked_sub(1) else {
            return;
        };
        let keep = self.len_bytes - last_index * CHUNK_BYTES;
        if self.chunks.get(last_index).len() == keep {
            return;
        }
        let last = self.chunks.slot_mut(last_index);
        match Arc::get_mut(last) {
            Some(last) => last.truncate(keep),
            None => *last = Arc::new(last[..keep].to_vec()),
        }
        self.check();
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len_bytes);
        for chunk in self.chunks() {
            bytes.extend_from_slice(chunk);
        }
        bytes
    }

    /// Whether these are exactly `bytes`.
    pub fn eq_bytes(&self, bytes: &[u8]) -> bool {
        self.len_bytes == bytes.len()
            && self
                .chunks()
                .zip(bytes.chunks(CHUNK_BYTES))
                .all(|(chunk, theirs)| chunk == theirs)
    }

    /// A copy of the bytes in `range` (within the file).
    pub fn copy_range(&self, range: std::ops::Range<usize>) -> Vec<u8> {
        assert!(range.start <= range.end);
        assert!(range.end <= self.len_bytes);
        let mut bytes = Vec::with_capacity(range.end - range.start);
        let mut at = range.start;
        // Bounded: one round per chunk the range touches.
        while at < range.end {
            let chunk = self.chunks.get(at / CHUNK_BYTES);
            let from = at % CHUNK_BYTES;
            let to = (range.end - (at - from)).min(chunk.len());
            bytes.extend_from_slice(&chunk[from..to]);
            at += to - from;
        }
        bytes
    }

    /// Whether the file holds `bytes` at `offset_bytes` (false where it is too short):
    /// compared in place, chunk by chunk, nothing copied.
    pub fn holds_at(&self, offset_bytes: usize, bytes: &[u8]) -> bool {
        if offset_bytes
            .checked_add(bytes.len())
            .is_none_or(|end| end > self.len_bytes)
        {
            return false;
        }
        let (mut at, mut rest) = (offset_bytes, bytes);
        // Bounded: one round per chunk the range touches.
        while !rest.is_empty() {
            let chunk = self.chunks.get(at / CHUNK_BYTES);
            let from = at % CHUNK_BYTES;
            let len = rest.len().min(chunk.len() - from);
            if chunk[from..from + len] != rest[..len] {
                return false;
            }
            at += len;
            rest = &rest[len..];
        }
        true
    }

    /// The byte at `at` (within the file).
    pub fn byte_at(&self, at: usize) -> u8 {
        assert!(at < self.len_bytes);
        self.chunks.get(at / CHUNK_BYTES)[at % CHUNK_BYTES]
    }

    /// The file's bytes from `at` to the end of the chunk they lie in, at most `max_bytes`
    /// of them: the longest run from `at` held in one piece (empty at the file's end). A
    /// reader walks a range of the file a run at a time, copying nothing.
    pub fn run_from(&self, at: usize, max_bytes: usize) -> &[u8] {
        assert!(at <= self.len_bytes);
        if at == self.len_bytes || max_bytes == 0 {
            return &[];
        }
        let chunk = self.chunk(at / CHUNK_BYTES);
        let from = at % CHUNK_BYTES;
        &chunk[from..chunk.len().min(from.saturating_add(max_bytes))]
    }

    /// The file's bytes before `end` back to the start of the chunk they lie in, at most
    /// `max_bytes` of them: [`Contents::run_from`] walking backwards (empty at offset 0).
    pub fn run_before(&self, end: usize, max_bytes: usize) -> &[u8] {
        assert!(end <= self.len_bytes);
        if end == 0 || max_bytes == 0 {
            return &[];
        }
        let chunk = self.chunk((end - 1) / CHUNK_BYTES);
        let to = (end - 1) % CHUNK_BYTES + 1;
        &chunk[to.saturating_sub(max_bytes)..to]
    }

    /// The last byte, if any.
    pub fn last(&self) -> Option<u8> {
        let last = self.chunks.len().checked_sub(1)?;
        self.chunk(last).last().copied()
    }

    /// Writes `bytes` at `offset_bytes`, extending the file with zeros if needed. A chunk
    /// that already holds the bytes written over it is left as it is, still shared: a
    /// process writing a file back as it read it copies none of it.
    pub fn write_at(&mut self, offset_bytes: usize, bytes: &[u8]) {
        self.changing();
        if offset_bytes == self.len_bytes {
            self.append(bytes);
            return;
        }
        let end = offset_bytes + bytes.len();
        if self.len_bytes < end {
            self.resize(end);
        }
        self.own_last_chunk_bytes();
        let mut at = offset_bytes;
        // Bounded: one round per chunk the write touches.
        while at < end {
            let from = at % CHUNK_BYTES;
            let to = (end - (at - from)).min(self.chunks.get(at / CHUNK_BYTES).len());
            let written = &bytes[at - offset_bytes..at - offset_bytes + to - from];
            if self.chunks.get(at / CHUNK_BYTES)[from..to] != *written {
                let chunk = Arc::make_mut(self.chunks.slot_mut(at / CHUNK_BYTES));
                chunk[from..to].copy_from_slice(written);
            }
            at += to - from;
        }
        self.check();
    }

    /// Writes `other`'s bytes over the start of the file, as `write_at(0, ..)` does, chunk
    /// by chunk: a chunk the two share is left as it is, unread. A file no longer than
    /// `other` becomes `other` (every byte of it written over): a copy of its chunk list, no
    /// byte read or copied.
    pub fn write_over(&mut self, other: &Contents) {
        self.changing();
        if self.len_bytes <= other.len_bytes {
            *self = other.clone();
            return;
        }
        // Bounded: one round per chunk of `other`.
        for (i, chunk) in other.chunks.iter().enumerate() {
            let theirs = other.chunk(i);
            // Shared, and this file holds at least the bytes `other` has there.
            let shared = i < self.chunks.len()
                && Arc::ptr_eq(self.chunks.get(i), chunk)
                && (self.len_bytes - i * CHUNK_BYTES).min(CHUNK_BYTES) >= theirs.len();
            if !shared {
                self.write_at(i * CHUNK_BYTES, theirs);
            }
        }
        self.check();
    }

    /// Adds `bytes` at the end of the file.
    fn append(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.changing();
        self.own_last_chunk_bytes();
        let mut rest = bytes;
        // Bounded: one round per chunk the bytes reach (the last, then new ones).
        while !rest.is_empty() {
            match self.chunks.len().checked_sub(1) {
                Some(last) if self.chunks.get(last).len() < CHUNK_BYTES => {
                    let last = Arc::make_mut(self.chunks.slot_mut(last));
                    let n = rest.len().min(CHUNK_BYTES - last.len());
                    reserve_within_chunk(last, n);
                    last.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                }
                _ => {
                    let n = rest.len().min(CHUNK_BYTES);
                    self.chunks.push(Arc::new(rest[..n].to_vec()));
                    rest = &rest[n..];
                }
            }
        }
        self.len_bytes += bytes.len();
        self.check();
    }

    /// Cuts the file to `len_bytes`, or extends it with zeros to that length.
    pub fn resize(&mut self, len_bytes: usize) {
        if len_bytes == self.len_bytes {
            return;
        }
        self.changing();
        self.own_last_chunk_bytes();
        if len_bytes <= self.len_bytes {
            let kept_chunks = len_bytes.div_ceil(CHUNK_BYTES);
            self.chunks.truncate(kept_chunks);
            if let Some(last_index) = kept_chunks.checked_sub(1) {
                let keep = len_bytes - last_index * CHUNK_BYTES;
                if self.chunks.get(last_index).len() != keep {
                    let last = self.chunks.slot_mut(last_index);
                    match Arc::get_mut(last) {
                        Some(last) => last.truncate(keep),
                        // Shared: copy only what stays.
                        None => *last = Arc::new(last[..keep].to_vec()),
                    }
                }
            }
        } else {
            let mut missing = len_bytes - self.len_bytes;
            // Bounded: one round per chunk the file grows into (the last, then new ones).
            while missing > 0 {
                match self.chunks.len().checked_sub(1) {
                    Some(last) if self.chunks.get(last).len() < CHUNK_BYTES => {
                        let last = Arc::make_mut(self.chunks.slot_mut(last));
                        let grow = missing.min(CHUNK_BYTES - last.len());
                        reserve_within_chunk(last, grow);
                        last.resize(last.len() + grow, 0);
                        missing -= grow;
                    }
                    _ => {
                        let grow = missing.min(CHUNK_BYTES);
                        self.chunks.push(Arc::new(vec![0; grow]));
                        missing -= grow;
                    }
                }
            }
        }
        self.len_bytes = len_bytes;
        self.check();
    }

    /// Whether `self` begins with `prefix`: chunks the two share are equal unread.
    pub fn starts_with(&self, prefix: &Contents) -> bool {
        if prefix.len_bytes > self.len_bytes {
            return false;
        }
        let shared = prefix.chunks.shared_prefix_len(&self.chunks);
        (shared..prefix.chunks.len()).all(|i| self.chunk(i).starts_with(prefix.chunk(i)))
    }

    /// How many bytes `self` and `other` have in common at their start: chunks the two
    /// share are counted unread, so two versions of one file cost the chunks they differ in.
    pub fn common_prefix_len(&self, other: &Contents) -> usize {
        // The chunks both begin with, shared, first: a fork shares every chunk but those it
        // wrote, so this is most of a long file, one pointer comparison a shared group of
        // chunks (`ChunkList::shared_prefix_len`).
        let shared_chunks = self.chunks.shared_prefix_len(&other.chunks);
        let from = (shared_chunks * CHUNK_BYTES)
            .min(self.len_bytes)
            .min(other.len_bytes);
        self.common_prefix_len_after(other, from)
    }

    /// [`Contents::common_prefix_len`] of two files known to agree on their first `from`
    /// bytes: only what follows is read (a file forked from a prefix of `self` that is
    /// `from` bytes long, as a sweep's point forks the fault-free run's sink file).
    pub fn common_prefix_len_from(&self, other: &Contents, from: usize) -> usize {
        let common_bytes = self.common_prefix_len_after(other, from);
        debug_assert_eq!(common_bytes, self.common_prefix_len(other));
        common_bytes
    }

    /// The common prefix's length, its first `from` bytes taken as alike.
    fn common_prefix_len_after(&self, other: &Contents, from: usize) -> usize {
        assert!(from <= self.len_bytes.min(other.len_bytes));
        let mut common_bytes = from;
        // Bounded: one round per chunk from the one `from` lies in.
        for i in from / CHUNK_BYTES..self.chunks.len().min(other.chunks.len()) {
            let (ours, theirs) = (self.chunk(i), other.chunk(i));
            let skip_bytes = common_bytes - i * CHUNK_BYTES;
            let same_bytes = if Arc::ptr_eq(self.chunks.get(i), other.chunks.get(i)) {
                ours.len().min(theirs.len()) - skip_bytes
            } else {
                common_prefix_len_of(&ours[skip_bytes..], &theirs[skip_bytes..])
            };
            common_bytes += same_bytes;
            if skip_bytes + same_bytes < CHUNK_BYTES {
                break;
            }
        }
        assert!(common_bytes <= self.len_bytes.min(other.len_bytes));
        common_bytes
    }

    /// Where the last `byte` before `end` lies (`end` within the file): read backwards
    /// from `end`, so it costs the bytes after that one (a line's, to find where it began).
    pub fn last_index_of(&self, byte: u8, end: usize) -> Option<usize> {
        assert!(end <= self.len_bytes);
        let mut chunk_end = end;
        // Bounded: one round per chunk before `end`.
        while chunk_end > 0 {
            let chunk_index = (chunk_end - 1) / CHUNK_BYTES;
            let chunk_start = chunk_index * CHUNK_BYTES;
            let chunk = &self.chunks.get(chunk_index)[..chunk_end - chunk_start];
            if let Some(at) = chunk.iter().rposition(|&b| b == byte) {
                return Some(chunk_start + at);
            }
            chunk_end = chunk_start;
        }
        None
    }

    /// The invariant of the module header (debug builds only: O(chunks)).
    fn check(&self) {
        debug_assert_eq!(self.chunks.len(), self.len_bytes.div_ceil(CHUNK_BYTES));
        debug_assert!(self.chunks.iter().all(|chunk| !chunk.is_empty()));
        debug_assert!(self
            .chunks
            .iter()
            .rev()
            .skip(1)
            .all(|chunk| chunk.len() == CHUNK_BYTES));
        debug_assert!(self.chunks.last().is_none_or(|last| {
            last.len() >= self.len_bytes - (self.chunks.len() - 1) * CHUNK_BYTES
        }));
    }
}

/// Makes room for `more` bytes in `chunk`, growing it as a `Vec` does (doubling) but never
/// past [`CHUNK_BYTES`]: a full chunk holds no spare capacity (a snapshot of a run keeps its
/// sink file's last chunk, and doubling past the chunk size had kept up to twice its bytes).
fn reserve_within_chunk(chunk: &mut Vec<u8>, more: usize) {
    let needed = chunk.len() + more;
    assert!(needed <= CHUNK_BYTES);
    if needed > chunk.capacity() {
        let capacity = needed.max(chunk.capacity() * 2).min(CHUNK_BYTES);
        chunk.reserve_exact(capacity - chunk.len());
    }
    assert!(chunk.capacity() >= needed);
}

/// How many bytes `a` and `b` have in common at their start, compared a block at a time.
fn common_prefix_len_of(a: &[u8], b: &[u8]) -> usize {
    const BLOCK_BYTES: usize = 64;
    let len = a.len().min(b.len());
    // Mostly equal (a file and a later version of it): one comparison of the whole range.
    if a[..len] == b[..len] {
        return len;
    }
    let mut same_bytes = 0;
    while same_bytes + BLOCK_BYTES <= len
        && a[same_bytes..same_bytes + BLOCK_BYTES] == b[same_bytes..same_bytes + BLOCK_BYTES]
    {
        same_bytes += BLOCK_BYTES;
    }
    while same_bytes < len && a[same_bytes] == b[same_bytes] {
        same_bytes += 1;
    }
    same_bytes
}

impl From<Vec<u8>> for Contents {
    fn from(bytes: Vec<u8>) -> Contents {
        if bytes.len() <= CHUNK_BYTES {
            let len_bytes = bytes.len();
            let chunks = if bytes.is_empty() {
                Vec::new()
            } else {
                vec![Arc::new(bytes)]
            };
            return Contents {
                chunks: ChunkList::from_chunks(chunks),
                len_bytes,
                fnv: Some(Arc::default()),
            };
        }
        Contents::from(&bytes[..])
    }
}

impl From<&[u8]> for Contents {
    fn from(bytes: &[u8]) -> Contents {
        let contents = Contents {
            chunks: ChunkList::from_chunks(
                bytes
                    .chunks(CHUNK_BYTES)
                    .map(|chunk| Arc::new(chunk.to_vec()))
                    .collect(),
            ),
            len_bytes: bytes.len(),
            fnv: Some(Arc::default()),
        };
        contents.check();
        contents
    }
}

/// Equal bytes; a chunk both share is not read.
impl PartialEq for Contents {
    fn eq(&self, other: &Contents) -> bool {
        self.len_bytes == other.len_bytes
            && (self.chunks.shared_prefix_len(&other.chunks)..self.chunks.len())
                .all(|i| self.chunk(i) == other.chunk(i))
    }
}

impl Eq for Contents {}

/// As the bytes' `Vec` prints.
impl std::fmt::Debug for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.chunks().flat_map(|chunk| chunk.iter()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{Contents, CHUNK_BYTES};

    /// One operation on a file.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        /// Write `len` bytes of `byte` at `offset`.
        Write {
            offset: usize,
            len: usize,
            byte: u8,
        },
        Resize(usize),
        /// Clone the file, and go on with the clone (the original must not change).
        Fork,
        /// Go on with the file's first `len` bytes, sharing its chunks (the original, kept as
        /// a fork, must not change).
        Prefix(usize),
        /// Share the newest fork's chunks where the file is a prefix of it.
        ShareNewestFork,
    }

    /// Applies `ops` to a `Contents` and to a plain `Vec<u8>`, and checks after each that
    /// they hold the same bytes, and that every earlier fork still holds what it held.
    /// The runs from and before a few offsets (the ends, chunk boundaries and one byte
    /// either side) walk to the file's bytes in both directions, never across a chunk.
    fn check_runs(contents: &Contents, plain: &[u8]) {
        let len = plain.len();
        let mut offsets = vec![0, 1, len / 2, len.saturating_sub(1), len];
        for boundary in (CHUNK_BYTES..=len).step_by(CHUNK_BYTES) {
            offsets.extend([boundary - 1, boundary, boundary + 1]);
        }
        for at in offsets.into_iter().filter(|&at| at <= len) {
            // A byte at a time only on small files: the walk is a round per run.
            let smallest = if len < 4096 { 1 } else { 4096 };
            for max_bytes in [smallest, 10_000, usize::MAX] {
                let (mut forward, mut from) = (Vec::new(), at);
                // Bounded: every round takes at least one byte, or ends.
                while from < len {
                    let run = contents.run_from(from, max_bytes);
                    assert!(!run.is_empty() && run.len() <= max_bytes.min(CHUNK_BYTES));
                    assert_eq!(from / CHUNK_BYTES, (from + run.len() - 1) / CHUNK_BYTES);
                    forward.extend_from_slice(run);
                    from += run.len();
                }
                assert!(contents.run_from(len, max_bytes).is_empty());
                assert_eq!(forward, plain[at..]);
                let (mut backward, mut end) = (Vec::new(), at);
                while end > 0 {
                    let run = contents.run_before(end, max_bytes);
                    assert!(!run.is_empty() && run.len() <= max_bytes.min(CHUNK_BYTES));
                    assert_eq!((end - run.len()) / CHUNK_BYTES, (end - 1) / CHUNK_BYTES);
                    backward.push(run);
                    end -= run.len();
                }
                backward.reverse();
                assert_eq!(backward.concat(), plain[..at]);
            }
            if at < len {
                assert_eq!(contents.byte_at(at), plain[at]);
            }
        }
    }

    fn check(ops: &[Op]) {
        let mut contents = Contents::default();
        let mut plain: Vec<u8> = Vec::new();
        let mut forks: Vec<(Contents, Vec<u8>)> = Vec::new();
        for op in ops {
            match *op {
                Op::Write { offset, len, byte } => {
                    let bytes = vec![byte; len];
                    contents.write_at(offset, &bytes);
                    if plain.len() < offset + len {
                        plain.resize(offset + len, 0);
                    }
                    plain[offset..offset + len].copy_from_slice(&bytes);
                }
                Op::Resize(len) => {
                    contents.resize(len);
                    plain.resize(len, 0);
                }
                Op::Fork => {
                    forks.push((contents.clone(), plain.clone()));
                }
                Op::Prefix(len) => {
                    forks.push((contents.clone(), plain.clone()));
                    contents = contents.prefix(len);
                    plain.truncate(len);
                }
                Op::ShareNewestFork => {
                    let (fork, bytes) = forks.last().expect("a fork to share");
                    let is_prefix = !plain.is_empty() && bytes.starts_with(&plain);
                    assert_eq!(contents.share_prefix_of(fork), is_prefix, "{op:?}");
                    if is_prefix {
                        assert!(std::sync::Arc::ptr_eq(
                            contents.chunks.last().unwrap(),
                            fork.chunks.get(contents.chunks.len() - 1)
                        ));
                    }
                }
            }
            assert_eq!(contents.len(), plain.len(), "{op:?}");
            assert!(
                contents
                    .chunks
                    .iter()
                    .all(|chunk| chunk.capacity() <= CHUNK_BYTES),
                "no chunk grows past its size: {op:?}"
            );
            assert_eq!(contents.to_vec(), plain, "{op:?}");
            assert!(contents.eq_bytes(&plain), "{op:?}");
            assert_eq!(contents.last(), plain.last().copied());
            check_runs(&contents, &plain);
            assert_eq!(contents, Contents::from(plain.clone()), "{op:?}");
            assert_eq!(contents, Contents::from(&plain[..]), "{op:?}");
            for (fork, bytes) in &forks {
                assert_eq!(fork.to_vec(), *bytes, "a fork is unaffected by {op:?}");
                assert!(fork.eq_bytes(bytes));
                assert_eq!(contents.eq_bytes(bytes), plain == *bytes, "{op:?}");
                assert_eq!(contents.starts_with(fork), plain.starts_with(bytes));
                assert_eq!(fork.starts_with(&contents), bytes.starts_with(&plain));
                let common = plain.iter().zip(bytes).take_while(|(a, b)| a == b).count();
                assert_eq!(contents.common_prefix_len(fork), common, "{op:?}");
                assert_eq!(fork.common_prefix_len(&contents), common, "{op:?}");
                // Any agreed start no longer than the common prefix: the same answer.
                for from in [0, common / 2, common] {
                    assert_eq!(contents.common_prefix_len_from(fork, from), common);
                    assert_eq!(fork.common_prefix_len_from(&contents, from), common);
                }
            }
            let mid = plain.len() / 3;
            for byte in [0, 2, 3, 6, 7, 9] {
                for end in [0, mid, plain.len().saturating_sub(1), plain.len()] {
                    let expected = plain[..end].iter().rposition(|&b| b == byte);
                    assert_eq!(contents.last_index_of(byte, end), expected, "{op:?}");
                }
            }
            assert_eq!(contents.copy_range(mid..plain.len()), plain[mid..]);
            assert_eq!(contents.copy_range(0..mid), plain[..mid]);
        }
    }

    #[test]
    fn chunked_bytes_act_as_a_vec_and_forks_keep_theirs() {
        let c = CHUNK_BYTES;
        // Appends across chunk boundaries, with forks between.
        check(&[
            Op::Write {
                offset: 0,
                len: 10,
                byte: 1,
            },
            Op::Fork,
            Op::Write {
                offset: 10,
                len: c,
                byte: 2,
            },
            Op::Fork,
            Op::Write {
                offset: c + 10,
                len: 2 * c + 5,
                byte: 3,
            },
            Op::Fork,
            Op::Write {
                offset: 3 * c + 15,
                len: 1,
                byte: 4,
            },
        ]);
        // Overwrites across a boundary, growth by a write past the end, cuts and growth.
        check(&[
            Op::Resize(2 * c + 1),
            Op::Fork,
            Op::Write {
                offset: c - 3,
                len: 7,
                byte: 9,
            },
            Op::Write {
                offset: 4 * c,
                len: 3,
                byte: 8,
            },
            Op::Fork,
            Op::Resize(c),
            Op::Resize(c + 1),
            Op::Fork,
            Op::Resize(5),
            Op::Resize(0),
            Op::Write {
                offset: 2,
                len: c,
                byte: 7,
            },
            Op::Fork,
            Op::Resize(c - 1),
            Op::Write {
                offset: c - 1,
                len: 1,
                byte: 6,
            },
        ]);
        // An empty write past the end grows the file to it, as on a Vec.
        check(&[
            Op::Write {
                offset: c + 1,
                len: 0,
                byte: 0,
            },
            Op::Fork,
            Op::Resize(c + 1),
        ]);
    }

    /// Seeded sequences of operations on files of up to three groups of chunks
    /// (`chunk_list.rs`), appends and forks most often, as a sweep's runs do: the same
    /// bytes as a `Vec`, every fork unchanged.
    #[test]
    fn seeded_operations_on_files_of_several_groups_act_as_a_vec() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{RngCore, SeedableRng};
        let c = CHUNK_BYTES;
        let g = super::super::chunk_list::GROUP_CHUNKS * c;
        let mut longest_bytes = 0;
        for seed in 0..6u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut below = |n: usize| (rng.next_u64() % n as u64) as usize;
            let (mut len, mut ops, mut forks) = (0usize, Vec::new(), 0usize);
            for i in 0..24 {
                let op = match below(10) {
                    0..=3 => {
                        let longest = if below(2) == 0 { 300 } else { g };
                        Op::Write {
                            offset: len,
                            len: 1 + below(longest),
                            byte: (i % 250) as u8 + 1,
                        }
                    }
                    4 => Op::Write {
                        offset: below(len + 2 * c),
                        len: 1 + below(2 * c),
                        byte: 251,
                    },
                    5 => Op::Resize(below(len + c + 1)),
                    6 | 7 => Op::Fork,
                    8 => Op::Prefix(below(len + 1)),
                    _ if forks > 0 => Op::ShareNewestFork,
                    _ => Op::Fork,
                };
                len = match op {
                    Op::Write { offset, len: n, .. } => len.max(offset + n),
                    Op::Resize(n) | Op::Prefix(n) => n,
                    Op::Fork | Op::ShareNewestFork => len,
                };
                forks += usize::from(matches!(op, Op::Fork | Op::Prefix(_)));
                longest_bytes = longest_bytes.max(len);
                ops.push(op);
            }
            assert!(ops.iter().any(|op| matches!(op, Op::Fork)), "seed {seed}");
            check(&ops);
        }
        assert!(longest_bytes > 2 * g, "{longest_bytes} bytes at most");
    }

    /// The same across the groups of the chunk list (`chunk_list.rs`): writes, cuts,
    /// prefixes and shared prefixes at and around a group's end, forks kept throughout.
    #[test]
    fn files_longer_than_a_group_of_chunks_act_as_a_vec_and_forks_keep_theirs() {
        let c = CHUNK_BYTES;
        let g = super::super::chunk_list::GROUP_CHUNKS * c;
        let write = |offset, len, byte| Op::Write { offset, len, byte };
        check(&[
            write(0, g - 1, 1),
            Op::Fork,
            write(g - 1, 2, 2),
            Op::Fork,
            write(2 * g + 3, c, 3),
            Op::Prefix(g),
            write(g - c / 2, c, 4),
            Op::Fork,
            Op::Resize(g + 1),
            Op::Prefix(g - 1),
            write(g - 1, 3 * c, 5),
            Op::ShareNewestFork,
            Op::Resize(3 * g),
            Op::Fork,
            write(g + 7, 1, 6),
            Op::Prefix(2 * g),
            Op::Resize(g),
            Op::ShareNewestFork,
            Op::Resize(0),
        ]);
    }

    #[test]
    fn a_prefix_sharing_a_longer_files_last_chunk_acts_as_its_own_bytes() {
        let c = CHUNK_BYTES;
        let write = |offset, len, byte| Op::Write { offset, len, byte };
        // Cut inside a chunk, then appended to, written over, grown and cut again.
        check(&[
            write(0, 2 * c + 100, 1),
            Op::Prefix(c + 10),
            write(c + 10, 5, 2),
            Op::Prefix(c + 12),
            write(c + 11, 1, 3),
            Op::Prefix(c + 12),
            Op::Resize(3 * c),
            Op::Prefix(c - 1),
            Op::Resize(c - 7),
            Op::Prefix(0),
            write(0, 3, 4),
        ]);
        // A copy of a prefix shares the longer file's chunks; a file that is not one keeps
        // its own.
        check(&[
            write(0, c + 50, 5),
            Op::Fork,
            Op::Resize(c + 20),
            Op::Fork,
            write(c + 20, 30, 5),
            Op::ShareNewestFork,
            write(c + 10, 1, 6),
            Op::ShareNewestFork,
            Op::Resize(c + 5),
            Op::ShareNewestFork,
            write(c + 5, 10, 7),
            Op::Fork,
            Op::Prefix(3),
            Op::ShareNewestFork,
        ]);
    }

    #[test]
    fn writing_back_the_same_bytes_keeps_every_chunk_shared() {
        let mut contents = Contents::from(vec![7; 3 * CHUNK_BYTES + 1]);
        let fork = contents.clone();
        contents.write_at(0, &fork.to_vec());
        contents.write_at(CHUNK_BYTES - 1, &[7, 8, 7]);
        let shared: Vec<bool> = fork
            .chunks
            .iter()
            .zip(contents.chunks.iter())
            .map(|(a, b)| std::sync::Arc::ptr_eq(a, b))
            .collect();
        assert_eq!(
            shared,
            [true, false, true, true],
            "only the byte that changed"
        );
        assert_eq!(
            contents.copy_range(CHUNK_BYTES - 1..CHUNK_BYTES + 2),
            [7, 8, 7]
        );
    }

    #[test]
    fn a_fork_shares_the_chunks_a_write_does_not_touch() {
        let mut contents = Contents::from(vec![7; 3 * CHUNK_BYTES + 1]);
        let fork = contents.clone();
        contents.write_at(3 * CHUNK_BYTES + 1, b"appended");
        let shared = fork
            .chunks
            .iter()
            .zip(contents.chunks.iter())
            .filter(|(a, b)| std::sync::Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared, 3, "only the last chunk was copied");
        assert!(contents.starts_with(&fork));
    }

    #[test]
    fn only_a_copy_of_the_same_file_is_the_same_copy() {
        let file = Contents::from(vec![7u8; CHUNK_BYTES + 10]);
        let copy = file.clone();
        assert!(file.is_same_copy(&copy));
        // The same bytes made apart: equal, not the same copy.
        let apart = Contents::from(vec![7u8; CHUNK_BYTES + 10]);
        assert!(file == apart);
        assert!(!file.is_same_copy(&apart));
        // A copy written back as it was stays the same copy; written to, it is its own.
        let mut written = file.clone();
        written.write_at(0, &[7]);
        assert!(file.is_same_copy(&written));
        written.write_at(0, &[8]);
        assert!(!file.is_same_copy(&written));
    }
}
