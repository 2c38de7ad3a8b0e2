//! The list of a file's chunks, held in two levels ([`ChunkList`]): groups of
//! [`GROUP_CHUNKS`] chunk pointers, shared between copies as the chunks are, so that the first
//! write of a forked run copies one group and the short list of groups, not a pointer a
//! chunk of the whole file.
//!
//! Why two levels. A fork's first write to its sink file copies the chunk it writes into and
//! the chunk list. With one flat list the two pull the chunk size in opposite directions:
//! 64 KiB chunks made every fork of a 3,000-event sweep copy up to 64 KiB of its sink's last
//! chunk (a quarter of the sweep's time went to that copy and its page faults), while 4 KiB
//! chunks made every fork of the million-event sweep copy a 200 KB list (27 s became 48 s).
//! Groups cut both: a fork copies at most one 4 KiB chunk, one group of 64 pointers and the
//! list of groups (a pointer every 256 KiB of file).

use std::sync::Arc;

/// One chunk's bytes (`contents.rs` says which bytes of the file it holds).
pub(super) type Chunk = Arc<Vec<u8>>;

/// How many chunks a group holds: every group but the last is full, and none is empty.
pub(super) const GROUP_CHUNKS: usize = 64;

/// A file's chunks in order, copied on write a level at a time (see the module header).
#[derive(Clone, Default)]
pub(super) struct ChunkList {
    groups: Arc<Vec<Arc<Vec<Chunk>>>>,
    len: usize,
}

impl ChunkList {
    /// The chunks of `chunks`, grouped.
    pub(super) fn from_chunks(chunks: Vec<Chunk>) -> ChunkList {
        let list = ChunkList {
            len: chunks.len(),
            groups: Arc::new(
                chunks
                    .chunks(GROUP_CHUNKS)
                    .map(|group| Arc::new(group.to_vec()))
                    .collect(),
            ),
        };
        list.check();
        list
    }

    /// How many chunks.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Chunk `i`.
    pub(super) fn get(&self, i: usize) -> &Chunk {
        assert!(i < self.len);
        &self.groups[i / GROUP_CHUNKS][i % GROUP_CHUNKS]
    }

    /// The last chunk, if any.
    pub(super) fn last(&self) -> Option<&Chunk> {
        self.len.checked_sub(1).map(|i| self.get(i))
    }

    /// Chunk `i`'s slot, to replace the chunk or write into it: the list of groups and the
    /// chunk's group are copied first if another list shares them (never the chunk itself).
    pub(super) fn slot_mut(&mut self, i: usize) -> &mut Chunk {
        assert!(i < self.len);
        let groups = Arc::make_mut(&mut self.groups);
        &mut Arc::make_mut(&mut groups[i / GROUP_CHUNKS])[i % GROUP_CHUNKS]
    }

    /// Adds `chunk` at the end.
    pub(super) fn push(&mut self, chunk: Chunk) {
        let groups = Arc::make_mut(&mut self.groups);
        match groups.last_mut() {
            Some(last) if last.len() < GROUP_CHUNKS => Arc::make_mut(last).push(chunk),
            _ => {
                let mut group = Vec::with_capacity(GROUP_CHUNKS);
                group.push(chunk);
                groups.push(Arc::new(group));
            }
        }
        self.len += 1;
        self.check();
    }

    /// Keeps the first `len` chunks (at most as many as there are).
    pub(super) fn truncate(&mut self, len: usize) {
        assert!(len <= self.len);
        if len == self.len {
            return;
        }
        let groups = Arc::make_mut(&mut self.groups);
        let groups_len = len.div_ceil(GROUP_CHUNKS);
        groups.truncate(groups_len);
        if let Some(last) = groups.last_mut() {
            let keep = len - (groups_len - 1) * GROUP_CHUNKS;
            if last.len() != keep {
                match Arc::get_mut(last) {
                    Some(last) => last.truncate(keep),
                    // Shared: copy only the pointers that stay.
                    None => *last = Arc::new(last[..keep].to_vec()),
                }
            }
        }
        self.len = len;
        self.check();
    }

    /// The first `len` chunks, sharing every full group (a partial last group is a copy of
    /// its pointers: at most [`GROUP_CHUNKS`] of them).
    pub(super) fn prefix(&self, len: usize) -> ChunkList {
        assert!(len <= self.len);
        if len == self.len {
            return self.clone();
        }
        let mut groups: Vec<Arc<Vec<Chunk>>> = self.groups[..len / GROUP_CHUNKS].to_vec();
        if len % GROUP_CHUNKS != 0 {
            let partial = &self.groups[len / GROUP_CHUNKS][..len % GROUP_CHUNKS];
            groups.push(Arc::new(partial.to_vec()));
        }
        let prefix = ChunkList {
            groups: Arc::new(groups),
            len,
        };
        prefix.check();
        prefix
    }

    /// The chunks in order.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &Chunk> + '_ {
        self.groups.iter().flat_map(|group| group.iter())
    }

    /// Whether `other` is this very list (a copy of it, not a list made apart).
    pub(super) fn is_same_list(&self, other: &ChunkList) -> bool {
        Arc::ptr_eq(&self.groups, &other.groups)
    }

    /// How many chunks the two begin with that are the same chunks (one allocation each):
    /// a group the two share counts whole, unread, so two versions of a long file cost a
    /// pointer comparison every [`GROUP_CHUNKS`] chunks where they agree.
    pub(super) fn shared_prefix_len(&self, other: &ChunkList) -> usize {
        if Arc::ptr_eq(&self.groups, &other.groups) {
            return self.len;
        }
        let mut shared = 0;
        // Bounded: one round per group both have.
        for (ours, theirs) in self.groups.iter().zip(other.groups.iter()) {
            if Arc::ptr_eq(ours, theirs) {
                shared += ours.len();
                continue;
            }
            shared += ours
                .iter()
                .zip(theirs.iter())
                .take_while(|(a, b)| Arc::ptr_eq(a, b))
                .count();
            break;
        }
        // A group or chunk both hold is in both lists.
        debug_assert!(shared <= self.len.min(other.len));
        shared
    }

    /// The invariant of the module header (debug builds only: O(groups)).
    fn check(&self) {
        debug_assert_eq!(
            self.len,
            self.groups.iter().map(|group| group.len()).sum::<usize>()
        );
        debug_assert!(self.groups.iter().all(|group| !group.is_empty()));
        debug_assert!(self
            .groups
            .iter()
            .rev()
            .skip(1)
            .all(|group| group.len() == GROUP_CHUNKS));
    }
}

#[cfg(test)]
mod tests {
    use super::{Chunk, ChunkList, GROUP_CHUNKS};
    use std::sync::Arc;

    fn chunks(n: usize) -> Vec<Chunk> {
        (0..n).map(|i| Arc::new(vec![i as u8])).collect()
    }

    /// A list acts as the `Vec` of its chunks through pushes, truncates, prefixes and slot
    /// writes, and a copy keeps what it held.
    #[test]
    fn a_chunk_list_acts_as_a_vec_and_a_copy_keeps_its_chunks() {
        let all = chunks(3 * GROUP_CHUNKS + 5);
        let mut list = ChunkList::default();
        let mut plain: Vec<Chunk> = Vec::new();
        for chunk in &all {
            let copy = (list.clone(), plain.clone());
            list.push(Arc::clone(chunk));
            plain.push(Arc::clone(chunk));
            assert!(copy
                .0
                .iter()
                .zip(copy.1.iter())
                .all(|(a, b)| Arc::ptr_eq(a, b)));
            assert_eq!(copy.0.len(), copy.1.len());
        }
        let same = |list: &ChunkList, plain: &[Chunk]| {
            assert_eq!(list.len(), plain.len());
            assert_eq!(list.iter().count(), plain.len());
            assert!(list.iter().zip(plain).all(|(a, b)| Arc::ptr_eq(a, b)));
            assert!((0..plain.len()).all(|i| Arc::ptr_eq(list.get(i), &plain[i])));
            assert!(list
                .last()
                .zip(plain.last())
                .is_none_or(|(a, b)| Arc::ptr_eq(a, b)));
        };
        same(&list, &plain);
        for len in [
            0,
            1,
            GROUP_CHUNKS - 1,
            GROUP_CHUNKS,
            GROUP_CHUNKS + 1,
            plain.len(),
        ] {
            let prefix = list.prefix(len);
            same(&prefix, &plain[..len]);
            assert_eq!(prefix.shared_prefix_len(&list), len);
            assert_eq!(list.shared_prefix_len(&prefix), len);
        }
        let copy = list.clone();
        let written: Chunk = Arc::new(vec![200]);
        *list.slot_mut(GROUP_CHUNKS + 2) = Arc::clone(&written);
        plain[GROUP_CHUNKS + 2] = written;
        same(&list, &plain);
        same(&copy, &all);
        assert_eq!(list.shared_prefix_len(&copy), GROUP_CHUNKS + 2);
        assert!(!list.is_same_list(&copy));
        list.truncate(GROUP_CHUNKS + 1);
        plain.truncate(GROUP_CHUNKS + 1);
        same(&list, &plain);
        same(&copy, &all);
        assert_eq!(list.shared_prefix_len(&copy), GROUP_CHUNKS + 1);
        list.truncate(0);
        same(&list, &[]);
        assert!(copy.is_same_list(&copy.clone()));
        same(&ChunkList::from_chunks(all.clone()), &all);
    }
}
