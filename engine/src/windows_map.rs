//! `Windows`: the operator's window end -> state map, ordered, whose copies share chunks.
//!
//! A sweep forks (clones) the engine once per point and the engine keeps a committed copy
//! of its state: with unbounded lateness the map holds every window the run created, so a
//! plain `BTreeMap` made every fork copy O(windows) entries. `Windows` keeps its entries in
//! sorted chunks of at most [`CHUNK_ENTRIES_MAX`], each behind an `Arc`: a clone copies
//! O(windows / CHUNK_ENTRIES_MAX) pointers, and a write copies only the chunk it touches
//! when a clone still shares it (`Arc::make_mut`). Lookups stay O(log windows); iteration
//! is in key order; equality, `Debug` and serde read as the map of its entries (serde's
//! bytes are a `BTreeMap<i64, WindowState>`'s).
//!
//! Equality of two chunked maps is decided by a digest kept as the map changes: the
//! wrapping sum of a 128-bit hash of each entry ([`entry_digest`]), updated in O(1) by every
//! write (a write through [`WindowMut`] when it is dropped). A point of a sweep compares its
//! recovered state, decoded from a checkpoint and so sharing no chunk with the fault-free
//! run's, with that run's at every boundary where it may converge: entry by entry that was
//! O(windows) each time. Two different maps have the same digest with a chance of about
//! 2^-128 per comparison (the entries are the run's, not chosen against the hash); debug
//! builds, the tests', check every such verdict against the entries.
//!
//! A map of at most [`SMALL_ENTRIES_MAX`] windows is a plain `BTreeMap` instead (the
//! chapter's runs, and `keel explore`'s): chunks would cost each write a search of the chunk
//! map and an `Arc` check to save copying a few dozen entries. It turns chunked when it
//! grows past that, and stays so (until it is emptied).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::sync::Arc;

/// The state of one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowState {
    pub sum: i128,
    pub cnt: u64,
    pub fired: bool,
}

/// The most entries a chunk holds: a write to a shared chunk copies at most this many. 256
/// rather than 64: a point of a sweep at 1,000,000 events (100,000 windows) copies the
/// chunk map once, on its first write, and a quarter of the pointers paid more than the
/// bigger chunks it copies after (0.67 against 0.49 ms a point, measured).
pub const CHUNK_ENTRIES_MAX: usize = 256;

/// The most entries a map holds before it turns chunked.
pub const SMALL_ENTRIES_MAX: usize = 64;

/// Entries sorted by key, distinct keys, never empty, at most [`CHUNK_ENTRIES_MAX`].
type Chunk = Arc<Vec<(i64, WindowState)>>;

/// Window end -> state, ordered by end; see the module header.
#[derive(Clone, Default)]
pub struct Windows {
    /// A lower bound of a chunk's keys -> the chunk. Every key of a chunk is at least its
    /// bound and below the next chunk's bound, so the chunk that holds (or would hold) a
    /// key is the last one whose bound is at most the key.
    /// Empty while the map is small. Shared between clones too, until one of them changes
    /// it: a clone that is only read (a snapshot, a state a point is compared with) costs a
    /// count, not a pointer per chunk.
    chunks: Arc<BTreeMap<i64, Chunk>>,
    /// The entries in `chunks`.
    len: usize,
    /// The wrapping sum of [`entry_digest`] over the entries in `chunks` (0 while small).
    digest: u128,
    /// The entries while the map is small (`chunks` empty); empty otherwise.
    small: BTreeMap<i64, WindowState>,
}

impl Windows {
    pub fn new() -> Windows {
        Windows::default()
    }

    pub fn len(&self) -> usize {
        self.small.len() + self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the map keeps its entries in `small`.
    fn is_small(&self) -> bool {
        assert!(self.chunks.is_empty() || self.small.is_empty());
        self.chunks.is_empty()
    }

    /// Whether a small map would grow past [`SMALL_ENTRIES_MAX`] with `end`: if so it turns
    /// chunked first.
    fn grow_small(&mut self, end: i64) -> bool {
        if !self.is_small() {
            return false;
        }
        if self.small.len() < SMALL_ENTRIES_MAX || self.small.contains_key(&end) {
            return true;
        }
        *self = Windows::chunked(std::mem::take(&mut self.small));
        false
    }

    /// The chunk that holds `end` if any does: its bound and entries.
    fn chunk_of(&self, end: i64) -> Option<(i64, &Chunk)> {
        // Most windows an event touches are the newest: the last chunk, found without a
        // search.
        match self.chunks.last_key_value() {
            Some((&bound, chunk)) if bound <= end => Some((bound, chunk)),
            _ => self
                .chunks
                .range(..=end)
                .next_back()
                .map(|(&bound, chunk)| (bound, chunk)),
        }
    }

    /// Where `end` is in the map: its chunk's bound, and its position in the chunk (`Ok`)
    /// or where it would go (`Err`); `None` when it lies below every chunk.
    fn locate(&self, end: i64) -> Option<(i64, Result<usize, usize>)> {
        let (bound, chunk) = self.chunk_of(end)?;
        Some((bound, chunk.binary_search_by_key(&end, |&(key, _)| key)))
    }

    /// The entries of the chunk at `bound`, copied first if a clone shares them.
    fn chunk_mut(&mut self, bound: i64) -> &mut Vec<(i64, WindowState)> {
        chunk_mut(&mut self.chunks, bound)
    }

    /// The window with the greatest end at or below `end`, if any.
    pub fn last_at_or_below(&self, end: i64) -> Option<(&i64, &WindowState)> {
        if self.is_small() {
            return self.small.range(..=end).next_back();
        }
        let (bound, chunk) = self.chunk_of(end)?;
        let at = chunk.partition_point(|&(key, _)| key <= end);
        match at.checked_sub(1) {
            Some(last) => Some((&chunk[last].0, &chunk[last].1)),
            // Every key of the chunk is above `end` (its first left): the chunk before.
            None => self
                .chunks
                .range(..bound)
                .next_back()
                .and_then(|(_, chunk)| chunk.last())
                .map(|(key, state)| (key, state)),
        }
    }

    pub fn get(&self, end: &i64) -> Option<&WindowState> {
        if self.is_small() {
            return self.small.get(end);
        }
        let (bound, position) = self.locate(*end)?;
        let position = position.ok()?;
        Some(&self.chunks[&bound][position].1)
    }

    pub fn contains_key(&self, end: &i64) -> bool {
        self.get(end).is_some()
    }

    /// The state of window `end`, if present; copies its chunk only then.
    pub fn get_mut(&mut self, end: &i64) -> Option<WindowMut<'_>> {
        if self.is_small() {
            return self
                .small
                .get_mut(end)
                .map(|state| WindowMut::new(*end, state, None));
        }
        let (bound, position) = self.locate(*end)?;
        let position = position.ok()?;
        let state = &mut chunk_mut(&mut self.chunks, bound)[position].1;
        Some(WindowMut::new(*end, state, Some(&mut self.digest)))
    }

    /// The state of window `end`, inserted as the default first if absent.
    pub fn entry_or_default(&mut self, end: i64) -> WindowMut<'_> {
        if self.grow_small(end) {
            return WindowMut::new(end, self.small.entry(end).or_default(), None);
        }
        let (bound, position) = match self.locate(end) {
            Some((bound, Ok(position))) => (bound, position),
            _ => {
                self.insert(end, WindowState::default());
                let (bound, position) = self.locate(end).expect("inserted above");
                (bound, position.expect("inserted above"))
            }
        };
        let state = &mut chunk_mut(&mut self.chunks, bound)[position].1;
        WindowMut::new(end, state, Some(&mut self.digest))
    }

    /// Sets window `end` to `state`; returns what it held.
    pub fn insert(&mut self, end: i64, state: WindowState) -> Option<WindowState> {
        if self.grow_small(end) {
            return self.small.insert(end, state);
        }
        self.digest = self.digest.wrapping_add(entry_digest(end, &state));
        let Some((bound, position)) = self.locate(end) else {
            // Below every chunk: the first chunk takes `end` as its new bound, if it has room.
            let chunks = Arc::make_mut(&mut self.chunks);
            let first = chunks
                .first_entry()
                .filter(|first| first.get().len() < CHUNK_ENTRIES_MAX);
            let mut entries = match first {
                Some(first) => first.remove(),
                None => Arc::new(Vec::new()),
            };
            Arc::make_mut(&mut entries).insert(0, (end, state));
            chunks.insert(end, entries);
            self.len += 1;
            return None;
        };
        let at = match position {
            Ok(at) => {
                let entry = &mut self.chunk_mut(bound)[at].1;
                let replaced = std::mem::replace(entry, state);
                self.digest = self.digest.wrapping_sub(entry_digest(end, &replaced));
                return Some(replaced);
            }
            Err(at) => at,
        };
        self.len += 1;
        let entries = self.chunk_mut(bound);
        if entries.len() < CHUNK_ENTRIES_MAX {
            entries.insert(at, (end, state));
            return None;
        }
        assert!(entries.len() == CHUNK_ENTRIES_MAX);
        if at == entries.len() {
            // Past the end of a full chunk: a chunk of its own, which keeps the chunks full
            // when windows are created in order (the common case).
            Arc::make_mut(&mut self.chunks).insert(end, Arc::new(vec![(end, state)]));
            return None;
        }
        let mut upper = entries.split_off(CHUNK_ENTRIES_MAX / 2);
        if at < CHUNK_ENTRIES_MAX / 2 {
            entries.insert(at, (end, state));
        } else {
            upper.insert(at - CHUNK_ENTRIES_MAX / 2, (end, state));
        }
        Arc::make_mut(&mut self.chunks).insert(upper[0].0, Arc::new(upper));
        None
    }

    /// Removes window `end`; returns what it held. A chunk left empty is dropped.
    pub fn remove(&mut self, end: &i64) -> Option<WindowState> {
        if self.is_small() {
            return self.small.remove(end);
        }
        let (bound, position) = self.locate(*end)?;
        let position = position.ok()?;
        self.len -= 1;
        let removed = if self.chunks[&bound].len() == 1 {
            let chunk = Arc::make_mut(&mut self.chunks)
                .remove(&bound)
                .expect("located above");
            chunk[0].1
        } else {
            self.chunk_mut(bound).remove(position).1
        };
        self.digest = self.digest.wrapping_sub(entry_digest(*end, &removed));
        Some(removed)
    }

    pub fn first_key_value(&self) -> Option<(&i64, &WindowState)> {
        if self.is_small() {
            return self.small.first_key_value();
        }
        let (_, chunk) = self.chunks.first_key_value()?;
        chunk.first().map(|(end, state)| (end, state))
    }

    pub fn last_key_value(&self) -> Option<(&i64, &WindowState)> {
        if self.is_small() {
            return self.small.last_key_value();
        }
        let (_, chunk) = self.chunks.last_key_value()?;
        chunk.last().map(|(end, state)| (end, state))
    }

    /// Removes the first window; returns it.
    pub fn pop_first(&mut self) -> Option<(i64, WindowState)> {
        let (&end, _) = self.first_key_value()?;
        let state = self.remove(&end).expect("the first window");
        Some((end, state))
    }

    /// Every window, in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            small: self.small.iter(),
            chunks: self.chunks.values(),
            entries: [].iter(),
            remaining: self.len,
        }
    }

    /// The bounds of the chunks that may hold a key of `range`.
    fn chunk_range(&self, range: &impl RangeBounds<i64>) -> (Bound<i64>, Bound<i64>) {
        let start = match range.start_bound() {
            Bound::Included(&key) | Bound::Excluded(&key) => match self.chunk_of(key) {
                Some((bound, _)) => Bound::Included(bound),
                None => Bound::Unbounded,
            },
            Bound::Unbounded => Bound::Unbounded,
        };
        (start, range.end_bound().cloned())
    }

    /// The windows whose end lies in `range`, in key order.
    pub fn range<R: RangeBounds<i64>>(
        &self,
        range: R,
    ) -> impl DoubleEndedIterator<Item = (&i64, &WindowState)> {
        // One of the two parts is empty: the small map's, or the chunks'.
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        let small = (self.is_small() && !range_is_empty(&bounds)).then(|| self.small.range(bounds));
        small
            .into_iter()
            .flatten()
            .chain(
                self.chunks
                    .range(self.chunk_range(&range))
                    .flat_map(move |(_, chunk)| {
                        let (from, to) = slice_of(chunk, &range);
                        chunk[from..to].iter().map(|(end, state)| (end, state))
                    }),
            )
    }

    /// Calls `f` on every window whose end lies in `range` and for which `wanted` holds, in
    /// key order; copies only the shared chunks that hold such a window.
    pub fn update_where<R: RangeBounds<i64>>(
        &mut self,
        range: R,
        wanted: impl Fn(&WindowState) -> bool,
        mut f: impl FnMut(i64, &mut WindowState),
    ) {
        if range_is_empty(&range) {
            return;
        }
        if self.is_small() {
            let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
            for (&end, state) in self.small.range_mut(bounds) {
                if wanted(state) {
                    f(end, state);
                }
            }
            return;
        }
        let chunk_range = self.chunk_range(&range);
        // The chunks that hold a wanted window, found before any is copied: a clone shares
        // the chunk map until a chunk of it changes. Bounded by the chunks in the range, and
        // each by its entries.
        let changed: Vec<(i64, usize, usize)> = self
            .chunks
            .range(chunk_range)
            .filter_map(|(&bound, chunk)| {
                let (from, to) = slice_of(chunk, &range);
                let first = chunk[from..to].iter().position(|(_, w)| wanted(w))?;
                Some((bound, from + first, to))
            })
            .collect();
        for (bound, from, to) in changed {
            for (end, state) in &mut chunk_mut(&mut self.chunks, bound)[from..to] {
                if wanted(state) {
                    f(
                        *end,
                        &mut WindowMut::new(*end, state, Some(&mut self.digest)),
                    );
                }
            }
        }
    }
}

/// The entries of the chunk at `bound` of `chunks`, each copied first if a clone shares it.
fn chunk_mut(chunks: &mut Arc<BTreeMap<i64, Chunk>>, bound: i64) -> &mut Vec<(i64, WindowState)> {
    // The newest windows' chunk is found without a search.
    let last = chunks
        .last_key_value()
        .is_some_and(|(&last, _)| last == bound);
    let chunks = Arc::make_mut(chunks);
    let chunk = if last {
        chunks.last_entry().expect("checked above").into_mut()
    } else {
        chunks.get_mut(&bound).expect("a chunk at the bound")
    };
    Arc::make_mut(chunk)
}

/// A 128-bit hash of one entry: two 64-bit lanes, each its own seed and finalizer
/// (SplitMix64's and MurmurHash3's) chained over the entry's words. A map's digest is the
/// wrapping sum of its entries' (see the module header).
fn entry_digest(end: i64, state: &WindowState) -> u128 {
    let words = [
        end as u64,
        state.sum as u64,
        (state.sum >> 64) as u64,
        state.cnt,
        u64::from(state.fired),
    ];
    let splitmix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let murmur = |mut z: u64| {
        z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        z ^ (z >> 33)
    };
    let high = words
        .iter()
        .fold(0x9e37_79b9_7f4a_7c15_u64, |h, &w| splitmix(h ^ w));
    let low = words.iter().fold(0x2545_f491_4f6c_dd1d_u64, |h, &w| {
        murmur(h.rotate_left(23) ^ w)
    });
    (u128::from(high) << 64) | u128::from(low)
}

/// A window's state to change in place: the map's digest takes the change when this is
/// dropped.
pub struct WindowMut<'a> {
    end: i64,
    state: &'a mut WindowState,
    /// The map's digest and the entry's digest before the change (None: a small map).
    digest: Option<(&'a mut u128, u128)>,
}

impl<'a> WindowMut<'a> {
    fn new(end: i64, state: &'a mut WindowState, digest: Option<&'a mut u128>) -> Self {
        // A small map keeps no digest: no hash on its writes (`keel explore`'s runs).
        let digest = digest.map(|digest| (digest, entry_digest(end, state)));
        WindowMut { end, state, digest }
    }
}

impl Deref for WindowMut<'_> {
    type Target = WindowState;
    fn deref(&self) -> &WindowState {
        self.state
    }
}

impl DerefMut for WindowMut<'_> {
    fn deref_mut(&mut self) -> &mut WindowState {
        self.state
    }
}

impl Drop for WindowMut<'_> {
    fn drop(&mut self) {
        if let Some((digest, before)) = &mut self.digest {
            let after = entry_digest(self.end, self.state);
            **digest = digest.wrapping_sub(*before).wrapping_add(after);
        }
    }
}

/// Whether `range` holds no key for certain (a watermark that did not move gives one).
fn range_is_empty(range: &impl RangeBounds<i64>) -> bool {
    match (range.start_bound(), range.end_bound()) {
        (Bound::Included(&start), Bound::Included(&end)) => start > end,
        (Bound::Included(&start) | Bound::Excluded(&start), Bound::Excluded(&end))
        | (Bound::Excluded(&start), Bound::Included(&end)) => start >= end,
        _ => false,
    }
}

/// The positions `from..to` of `chunk`'s entries whose key lies in `range`.
fn slice_of(chunk: &[(i64, WindowState)], range: &impl RangeBounds<i64>) -> (usize, usize) {
    let from = chunk.partition_point(|&(key, _)| match range.start_bound() {
        Bound::Included(&start) => key < start,
        Bound::Excluded(&start) => key <= start,
        Bound::Unbounded => false,
    });
    let to = chunk.partition_point(|&(key, _)| match range.end_bound() {
        Bound::Included(&end) => key <= end,
        Bound::Excluded(&end) => key < end,
        Bound::Unbounded => true,
    });
    (from, to.max(from))
}

/// [`Windows::iter`]: every window in key order, and how many are left.
pub struct Iter<'a> {
    /// A small map's entries (none once chunked), then the chunks'.
    small: std::collections::btree_map::Iter<'a, i64, WindowState>,
    chunks: std::collections::btree_map::Values<'a, i64, Chunk>,
    entries: std::slice::Iter<'a, (i64, WindowState)>,
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a i64, &'a WindowState);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.small.next() {
            return Some(entry);
        }
        // Chunks are never empty: at most one step to the next chunk.
        let (end, state) = match self.entries.next() {
            Some(entry) => entry,
            None => {
                self.entries = self.chunks.next()?.iter();
                self.entries.next().expect("chunks are never empty")
            }
        };
        self.remaining -= 1;
        Some((end, state))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = self.small.len() + self.remaining;
        (remaining, Some(remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Windows {
    type Item = (&'a i64, &'a WindowState);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<(i64, WindowState)> for Windows {
    /// As a `BTreeMap` collects: a key given twice keeps its last state.
    fn from_iter<I: IntoIterator<Item = (i64, WindowState)>>(entries: I) -> Windows {
        Windows::from(entries.into_iter().collect::<BTreeMap<i64, WindowState>>())
    }
}

impl From<BTreeMap<i64, WindowState>> for Windows {
    /// Small, or full chunks in key order.
    fn from(map: BTreeMap<i64, WindowState>) -> Windows {
        if map.len() <= SMALL_ENTRIES_MAX {
            return Windows {
                small: map,
                ..Windows::default()
            };
        }
        Windows::chunked(map)
    }
}

impl Windows {
    /// `map` in full chunks, in key order, however few entries it has.
    fn chunked(map: BTreeMap<i64, WindowState>) -> Windows {
        let len = map.len();
        let digest = map.iter().fold(0u128, |sum, (&end, state)| {
            sum.wrapping_add(entry_digest(end, state))
        });
        let mut chunks = BTreeMap::new();
        let mut entries = map.into_iter().peekable();
        // Bounded by the entries: every pass takes at least one.
        while let Some(&(bound, _)) = entries.peek() {
            let chunk: Vec<_> = entries.by_ref().take(CHUNK_ENTRIES_MAX).collect();
            chunks.insert(bound, Arc::new(chunk));
        }
        Windows {
            chunks: Arc::new(chunks),
            len,
            digest,
            small: BTreeMap::new(),
        }
    }
}

impl PartialEq for Windows {
    /// The same entries in the same order: two small maps entry by entry, two chunked ones
    /// by their digests (see the module header; debug builds check the verdict against the
    /// entries), a small map and a chunked one entry by entry.
    fn eq(&self, other: &Windows) -> bool {
        if self.len() != other.len() {
            return false;
        }
        match (self.is_small(), other.is_small()) {
            (true, true) => self.small == other.small,
            (false, false) => {
                if Arc::ptr_eq(&self.chunks, &other.chunks) {
                    return true;
                }
                let same = self.digest == other.digest;
                debug_assert_eq!(same, self.iter().eq(other.iter()), "a digest's verdict");
                same
            }
            _ => self.iter().eq(other.iter()),
        }
    }
}

impl Eq for Windows {}

impl fmt::Debug for Windows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Windows {
    /// As a `BTreeMap<i64, WindowState>`: a map in key order.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Windows {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Windows, D::Error> {
        BTreeMap::<i64, WindowState>::deserialize(deserializer).map(Windows::from)
    }
}

#[cfg(test)]
mod tests;
