//! A line-read file's crash states in classes: those whose reader keeps the same whole
//! lines (and, split by tail, comes back with the same kind of tail), counted entry by
//! entry and numbered (the rules are in the header of `power_loss/classes.rs`).

use super::super::Choice;
use crate::disk::inode::Written;
use crate::disk::{DataOp, Disk, InodeId};
use num_bigint::BigUint;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One class of a line-read file's crash states: those whose reader keeps the same lines.
/// Its states are the states of its *entries*: a first piece not kept, `p`, and its fate
/// (or none not kept), each standing for every combination of the file's later choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LineClass {
    /// The length of the whole intact lines the file's reader keeps.
    pub(super) kept_len_bytes: u64,
    /// Its entries: indices into the file's entries (see [`LineFile::entry`]).
    pub(super) entries: std::ops::Range<usize>,
    /// Split by tail: whether its states are those that come back with bytes after the
    /// kept lines (torn) or those that do not (None: not split, every state of the
    /// entries). How many they are is worked out when asked ([`LineFile::of_split`]).
    pub(super) split: Option<bool>,
}

/// A collapsed line-read file: its choices' positions and its classes, in offset order.
#[derive(Clone, Debug)]
pub(super) struct LineFile {
    pub(super) name: String,
    /// The positions in the disk's choices of its pieces (in offset order), then of its
    /// size and stale choices.
    pub(super) positions: Vec<usize>,
    /// Each piece's radix (2 or 3), in offset order.
    pub(super) radices: Vec<u8>,
    /// The product of the size and stale choices' radices.
    pub(super) extra_states: u64,
    /// The index in `positions` of the size choice, if the file has one.
    pub(super) size_at: Option<usize>,
    /// The stale choice's radix (1 without one).
    pub(super) stale_radix: u64,
    /// Per entry, its `B`: the first byte past the durable length that is not the
    /// process's (the file's length where every later choice is at 0).
    pub(super) entry_ends_bytes: Vec<u64>,
    /// Each piece's offset and length, in offset order.
    pub(super) piece_bounds: Vec<(u64, u64)>,
    /// The length the process wrote the file to.
    pub(super) current_len_bytes: u64,
    /// Per piece `p`, the pieces of radix 3 and of radix 2 after it.
    pub(super) later_threes: Vec<u32>,
    pub(super) later_twos: Vec<u32>,
    pub(super) classes: Vec<LineClass>,
    /// Each class's states, worked out for all classes at the first that is asked for (a
    /// sweep asks for every class of a step, and one pass is linear in the entries where a
    /// class at a time walked and raised powers for each).
    pub(super) class_states_memo: OnceLock<Vec<BigUint>>,
}

impl LineFile {
    /// Entry `e`: the first piece not kept and its digit (lost 0, torn 1), or, for the last
    /// entry, `(pieces, 0)`: every piece kept.
    pub(super) fn entry(&self, e: usize) -> (usize, u64) {
        let mut p = 0;
        let mut left = e;
        // Entries come two a piece of radix 3 and one a piece of radix 2; a class spans
        // few, so this walk is only as long as the index (bounded by the pieces).
        while p < self.radices.len() {
            let here = usize::from(self.radices[p]) - 1;
            if left < here {
                return (p, left as u64);
            }
            left -= here;
            p += 1;
        }
        assert_eq!(left, 0, "entry {e} past the last");
        (p, 0)
    }

    /// The states of the entries whose first piece not kept is `p` (each of its fates):
    /// every combination of the later choices.
    pub(super) fn entry_states(&self, p: usize) -> BigUint {
        let (threes, twos) = if p < self.radices.len() {
            (self.later_threes[p], self.later_twos[p])
        } else {
            (0, 0)
        };
        BigUint::from(3u32).pow(threes) * BigUint::from(2u32).pow(twos) * self.extra_states
    }

    /// The states of class `index`.
    pub(super) fn class_states(&self, index: usize) -> &BigUint {
        let states = &self.all_class_states()[index];
        debug_assert_eq!(*states, self.class_states_by_entries(index));
        states
    }

    /// The states of class `index`, entry by entry (what [`LineFile::all_class_states`]
    /// works out for every class at once; debug builds check one against the other).
    pub(super) fn class_states_by_entries(&self, index: usize) -> BigUint {
        let class = &self.classes[index];
        let all: BigUint = class
            .entries
            .clone()
            .map(|e| self.entry_states(self.entry(e).0))
            .sum();
        self.of_split(class, all, &self.entry_pieces())
    }

    /// Of `all`, the states of `class`'s entries, those it holds.
    /// `entry_pieces`: [`LineFile::entry_pieces`].
    pub(super) fn of_split(
        &self,
        class: &LineClass,
        all: BigUint,
        entry_pieces: &[usize],
    ) -> BigUint {
        match class.split {
            None => all,
            Some(torn) => {
                let clean = self.clean_states(class, entry_pieces);
                debug_assert_eq!(
                    (clean.clone(), &all - &clean),
                    self.clean_and_torn_by_lengths(class),
                    "{class:?}"
                );
                if torn {
                    all - clean
                } else {
                    clean
                }
            }
        }
    }

    /// The states of `class`'s entries that come back ending at its kept lines: an entry
    /// with a clean length ([`LineFile::shortest_length`]) has it at `B`, its `stale_radix`
    /// states, or is the last entry, all of whose states have it.
    fn clean_states(&self, class: &LineClass, entry_pieces: &[usize]) -> BigUint {
        let pieces = self.radices.len();
        class
            .entries
            .clone()
            .filter(|&e| {
                self.shortest_length(e, entry_pieces[e], class.kept_len_bytes, false)
                    .is_some()
            })
            .map(|e| {
                if entry_pieces[e] == pieces {
                    BigUint::from(self.extra_states)
                } else {
                    BigUint::from(self.stale_radix)
                }
            })
            .sum()
    }

    /// The lengths the states of entry `e` come back with, and how many states each (see
    /// the module header), in length order.
    pub(super) fn entry_lengths(&self, e: usize) -> BTreeMap<u64, BigUint> {
        let (p, _) = self.entry(e);
        let pieces = self.radices.len();
        let mut lengths: BTreeMap<u64, BigUint> = BTreeMap::new();
        if p == pieces {
            lengths.insert(self.current_len_bytes, BigUint::from(self.extra_states));
            return lengths;
        }
        let stale = self.stale_radix;
        // The size lost: the last surviving later piece ends the file, or `B` with none.
        *lengths.entry(self.entry_ends_bytes[e]).or_default() += stale;
        let mut between = BigUint::from(stale);
        for q in p + 1..pieces {
            let (offset_bytes, len_bytes) = self.piece_bounds[q];
            if self.radices[q] == 3 {
                *lengths.entry(offset_bytes + len_bytes / 2).or_default() += &between;
            }
            *lengths.entry(offset_bytes + len_bytes).or_default() += &between;
            between *= u32::from(self.radices[q]);
        }
        // The size kept: the process's length, whatever the later pieces did.
        if self.size_at.is_some() {
            *lengths.entry(self.current_len_bytes).or_default() += between;
        }
        debug_assert_eq!(
            lengths.values().sum::<BigUint>(),
            self.entry_states(p),
            "entry {e}"
        );
        lengths
    }

    /// The length the state with `digits`, whose entry is `entry`, comes back with.
    pub(super) fn length_of(&self, digits: &[u64], entry: usize) -> u64 {
        let (p, _) = self.entry(entry);
        let pieces = self.radices.len();
        let size_kept = self.size_at.is_some_and(|i| digits[self.positions[i]] == 1);
        if p == pieces || size_kept {
            return self.current_len_bytes;
        }
        (p + 1..pieces)
            .rev()
            .find_map(|q| {
                let (offset_bytes, len_bytes) = self.piece_bounds[q];
                match digits[self.positions[q]] {
                    0 => None,
                    d if d + 1 == u64::from(self.radices[q]) => Some(offset_bytes + len_bytes),
                    _ => Some(offset_bytes + len_bytes / 2),
                }
            })
            .unwrap_or(self.entry_ends_bytes[entry])
    }

    /// Every class's states, in one pass: the states of the entries whose first piece not
    /// kept is `p` are the product of the later choices' radices, a suffix product.
    pub(super) fn all_class_states(&self) -> &[BigUint] {
        self.class_states_memo.get_or_init(|| {
            let piece_states = self.piece_states();
            let entry_pieces = self.entry_pieces();
            self.classes
                .iter()
                .map(|class| {
                    let all = class
                        .entries
                        .clone()
                        .map(|e| &piece_states[entry_pieces[e]])
                        .sum();
                    self.of_split(class, all, &entry_pieces)
                })
                .collect()
        })
    }

    /// Per `p`, the states of an entry whose first piece not kept is `p`: `extra_states`
    /// times the radices of the pieces after `p`; for `p` = pieces (every piece kept) just
    /// `extra_states`. One pass from the end, a product a piece.
    fn piece_states(&self) -> Vec<BigUint> {
        let pieces = self.radices.len();
        let mut piece_states = vec![BigUint::from(self.extra_states); pieces + 1];
        for p in (0..pieces.saturating_sub(1)).rev() {
            piece_states[p] = &piece_states[p + 1] * u32::from(self.radices[p + 1]);
        }
        piece_states
    }

    /// Each entry's first piece not kept, in entry order: radix - 1 entries a piece (its
    /// fates lost, torn), then the entry where every piece is kept.
    fn entry_pieces(&self) -> Vec<usize> {
        let pieces = self.radices.len();
        self.radices
            .iter()
            .enumerate()
            .flat_map(|(p, &radix)| std::iter::repeat_n(p, usize::from(radix) - 1))
            .chain(std::iter::once(pieces))
            .collect()
    }

    /// The index of the class whose entries hold the state with these `digits` (one a
    /// choice of the disk, in numbering order): its entry is its first piece not kept at
    /// that piece's fate, or the last entry where every piece is kept.
    pub(super) fn class_of_digits(&self, digits: &[u64]) -> usize {
        let mut entry = 0;
        for (&at, &radix) in self.positions.iter().zip(&self.radices) {
            let kept = u64::from(radix) - 1;
            if digits[at] != kept {
                entry += usize::try_from(digits[at]).expect("a piece's digit is 0 or 1");
                break;
            }
            entry += usize::from(radix) - 1;
        }
        let index = self
            .classes
            .partition_point(|class| class.entries.end <= entry);
        assert!(
            self.classes[index].entries.contains(&entry),
            "entry {entry}"
        );
        // Split by tail, a class's clean part comes before its torn part.
        let class = &self.classes[index];
        match &class.split {
            None => index,
            Some(_) => {
                let torn = self.length_of(digits, entry) != class.kept_len_bytes;
                let part = self.classes[index..]
                    .iter()
                    .position(|class| class.split == Some(torn))
                    .expect("a part holds every state");
                assert_eq!(self.classes[index + part].entries, class.entries);
                index + part
            }
        }
    }

    /// Splits every class into its clean and its torn states, each part kept where it
    /// holds a state (see the module header): linear in the entries, not in entries times
    /// pieces ([`LineFile::shortest_length`] finds whether an entry has either without
    /// counting its lengths). Debug builds count every length and compare.
    pub(super) fn split_by_tail(&mut self) {
        let classes = std::mem::take(&mut self.classes);
        let entry_pieces = self.entry_pieces();
        for class in classes {
            let has = |torn: bool| {
                class.entries.clone().any(|e| {
                    self.shortest_length(e, entry_pieces[e], class.kept_len_bytes, torn)
                        .is_some()
                })
            };
            let (clean, torn) = (has(false), has(true));
            debug_assert_eq!(
                {
                    let (clean, torn) = self.clean_and_torn_by_lengths(&class);
                    (clean != BigUint::ZERO, torn != BigUint::ZERO)
                },
                (clean, torn),
                "{class:?}"
            );
            for (is_torn, holds) in [(false, clean), (true, torn)] {
                if holds {
                    self.classes.push(LineClass {
                        split: Some(is_torn),
                        ..class.clone()
                    });
                }
            }
        }
    }

    /// A class's clean and torn states, every length of every entry counted: what
    /// [`LineFile::split_by_tail`] works out without the lengths (debug builds compare).
    fn clean_and_torn_by_lengths(&self, class: &LineClass) -> (BigUint, BigUint) {
        let (mut clean, mut torn) = (BigUint::ZERO, BigUint::ZERO);
        for e in class.entries.clone() {
            for (len_bytes, states) in self.entry_lengths(e) {
                if len_bytes == class.kept_len_bytes {
                    clean += states;
                } else {
                    torn += states;
                }
            }
        }
        (clean, torn)
    }

    /// The representative digits of class `index`, one for each of `positions`: its first
    /// entry's pieces before `p` kept, `p` at its fate, every later choice at 0.
    ///
    ///
    /// A part split by tail takes the first of its entries with a state of its tail, at
    /// the shortest length of it, with the later choice that gives that length: the last
    /// surviving piece, or the size.
    pub(super) fn representative(&self, index: usize) -> Vec<u64> {
        let class = &self.classes[index];
        let Some(torn) = class.split else {
            return self.entry_representative(class.entries.start);
        };
        let (e, len_bytes) = class
            .entries
            .clone()
            .find_map(|e| {
                let (p, _) = self.entry(e);
                let shortest = self.shortest_length(e, p, class.kept_len_bytes, torn);
                debug_assert_eq!(
                    shortest,
                    self.entry_lengths(e)
                        .into_keys()
                        .find(|&len_bytes| (len_bytes != class.kept_len_bytes) == torn),
                    "entry {e}"
                );
                shortest.map(|len_bytes| (e, len_bytes))
            })
            .expect("a part has states");
        let mut digits = self.entry_representative(e);
        let (p, _) = self.entry(e);
        let pieces = self.radices.len();
        if p == pieces || len_bytes == self.entry_ends_bytes[e] {
            return digits;
        }
        let later = (p + 1..pieces).find_map(|q| {
            let (offset_bytes, piece_len_bytes) = self.piece_bounds[q];
            if offset_bytes + piece_len_bytes == len_bytes {
                Some((q, u64::from(self.radices[q]) - 1))
            } else if self.radices[q] == 3 && offset_bytes + piece_len_bytes / 2 == len_bytes {
                Some((q, 1))
            } else {
                None
            }
        });
        match (later, self.size_at) {
            (Some((q, digit)), _) => digits[q] = digit,
            (None, Some(i)) => {
                assert_eq!(len_bytes, self.current_len_bytes);
                digits[i] = 1;
            }
            (None, None) => unreachable!("a length a state of the entry has"),
        }
        debug_assert_eq!(self.length_of_file_digits(&digits, e), len_bytes);
        digits
    }

    /// The shortest length a state of entry `e` (whose first piece not kept is `p`) comes
    /// back with that is torn (not `kept_len_bytes`) or clean, as `torn` asks, if it has
    /// one, without counting every length ([`LineFile::entry_lengths`]): an entry's states
    /// come back at its `B` (the size lost, no later piece kept), at the end or torn end of
    /// a later piece, or at the process's length (the size kept). The pieces are appends in
    /// offset order, so every length but `B` lies past the first piece not kept, and the
    /// lines kept end at or before `B`: `B` first, then the next piece's torn or whole end
    /// (later pieces end later), then the size kept. The last entry has one length, the
    /// process's. The split by tail, its counts and its representatives rest on this.
    fn shortest_length(&self, e: usize, p: usize, kept_len_bytes: u64, torn: bool) -> Option<u64> {
        let pieces = self.radices.len();
        let is = |len_bytes: u64| (len_bytes != kept_len_bytes) == torn;
        if p == pieces {
            return Some(self.current_len_bytes).filter(|&len| is(len));
        }
        let end_bytes = self.entry_ends_bytes[e];
        assert!(end_bytes >= kept_len_bytes);
        if is(end_bytes) {
            return Some(end_bytes);
        }
        if !torn {
            // Every other length lies past `B`, so past the lines kept.
            return None;
        }
        match self.piece_bounds.get(p + 1) {
            Some(&(offset_bytes, len_bytes)) if self.radices[p + 1] == 3 => {
                Some(offset_bytes + len_bytes / 2)
            }
            Some(&(offset_bytes, len_bytes)) => Some(offset_bytes + len_bytes),
            None => self.size_at.map(|_| self.current_len_bytes),
        }
    }

    /// [`LineFile::length_of`] of digits one a position of this file (a representative's).
    pub(super) fn length_of_file_digits(&self, file_digits: &[u64], entry: usize) -> u64 {
        let mut digits = vec![0; self.positions.iter().max().map_or(0, |&m| m + 1)];
        for (&at, &digit) in self.positions.iter().zip(file_digits) {
            digits[at] = digit;
        }
        self.length_of(&digits, entry)
    }

    /// The representative digits of entry `entry`: its pieces before `p` kept, `p` at its
    /// fate, every later choice at 0.
    pub(super) fn entry_representative(&self, entry: usize) -> Vec<u64> {
        let (p, fate) = self.entry(entry);
        let mut digits: Vec<u64> = self
            .radices
            .iter()
            .enumerate()
            .map(|(q, &radix)| match q.cmp(&p) {
                std::cmp::Ordering::Less => u64::from(radix) - 1,
                std::cmp::Ordering::Equal => fate,
                std::cmp::Ordering::Greater => 0,
            })
            .collect();
        digits.resize(self.positions.len(), 0);
        digits
    }
}

impl Disk {
    /// The classes of the appended-only file `inode` (see the module header).
    pub(super) fn line_file(
        &self,
        name: &str,
        inode: InodeId,
        choices: &[Choice],
        split_tails: bool,
    ) -> LineFile {
        let file = &self.inodes[&inode];
        // (position, offset, length, radix, op index) of each piece, in numbering (= offset)
        // order.
        let mut pieces: Vec<(usize, u64, u64, u64, usize)> = Vec::new();
        let mut extras: Vec<usize> = Vec::new();
        for (at, choice) in choices.iter().enumerate() {
            match *choice {
                Choice::Piece {
                    inode: of,
                    op_index,
                    offset_bytes,
                    len_bytes,
                } if of == inode => {
                    pieces.push((at, offset_bytes, len_bytes, choice.radix(), op_index))
                }
                Choice::Size { inode: of } | Choice::Stale { inode: of } if of == inode => {
                    extras.push(at)
                }
                Choice::SetLen { inode: of, .. } | Choice::FailedSize { inode: of } => {
                    assert_ne!(of, inode, "appended only");
                }
                _ => {}
            }
        }
        assert!(extras.len() <= 2, "a size and a stale choice at most");
        assert!(
            pieces.windows(2).all(|w| w[0].1 + w[0].2 == w[1].1),
            "appends' pieces follow one another"
        );

        // The end of the last whole line before each pending write, and a write's own last
        // newline before a byte of it: found with memrchr in the write's own bytes (a piece's
        // entries ask within its write only), so a point costs a search a piece, not a scan
        // of the file.
        let durable_len_bytes = file.durable.len();
        let durable_lines_end_bytes = file
            .current
            .last_index_of(b'\n', durable_len_bytes)
            .map_or(0, |at| at as u64 + 1);
        let writes: Vec<(u64, &Written)> = file
            .pending
            .iter()
            .map(|op| match op {
                DataOp::Write {
                    offset_bytes,
                    bytes,
                } => (*offset_bytes, bytes),
                DataOp::SetLen { .. } => unreachable!("appended only"),
            })
            .collect();
        let mut lines_end_before_write = Vec::with_capacity(writes.len());
        let mut lines_end_bytes = durable_lines_end_bytes;
        for &(offset_bytes, bytes) in &writes {
            lines_end_before_write.push(lines_end_bytes);
            if let Some(at) = memchr::memrchr(b'\n', &bytes.bytes(0..bytes.len())) {
                lines_end_bytes = offset_bytes + at as u64 + 1;
            }
        }
        let all_lines_end_bytes = lines_end_bytes;
        let whole_lines_at = |op_index: usize, first_not_kept_bytes: u64| {
            let (offset_bytes, bytes) = writes[op_index];
            let within = usize::try_from(first_not_kept_bytes - offset_bytes).expect("fits");
            match memchr::memrchr(b'\n', &bytes.bytes(0..within)) {
                Some(at) => offset_bytes + at as u64 + 1,
                None => lines_end_before_write[op_index],
            }
        };
        debug_assert!(pieces.iter().all(|&(_, offset, len, _, op)| {
            let end = usize::try_from(offset + len / 2).expect("fits");
            whole_lines_at(op, offset + len / 2)
                == file
                    .current
                    .last_index_of(b'\n', end)
                    .map_or(0, |at| at as u64 + 1)
        }));

        // Per piece, the pieces of each radix after it.
        let radices: Vec<u8> = pieces
            .iter()
            .map(|piece| u8::try_from(piece.3).expect("a piece's radix is 2 or 3"))
            .collect();
        let mut later_threes = vec![0u32; pieces.len()];
        let mut later_twos = vec![0u32; pieces.len()];
        for p in (0..pieces.len().saturating_sub(1)).rev() {
            let next = radices[p + 1];
            later_threes[p] = later_threes[p + 1] + u32::from(next == 3);
            later_twos[p] = later_twos[p + 1] + u32::from(next == 2);
        }
        let extra_states: u64 = extras.iter().map(|&at| choices[at].radix()).product();
        let size_at = extras
            .iter()
            .position(|&at| matches!(choices[at], Choice::Size { .. }))
            .map(|i| pieces.len() + i);
        let stale_radix: u64 = extras
            .iter()
            .filter(|&&at| matches!(choices[at], Choice::Stale { .. }))
            .map(|&at| choices[at].radix())
            .product();
        let positions: Vec<usize> = pieces
            .iter()
            .map(|piece| piece.0)
            .chain(extras.iter().copied())
            .collect();

        // The entries in offset order: the first byte not kept only grows, so entries that
        // keep the same lines are neighbours.
        let mut classes: Vec<LineClass> = Vec::new();
        let mut entry_ends_bytes = Vec::with_capacity(2 * pieces.len() + 1);
        let mut entry = 0;
        let mut add = |kept_len_bytes: u64, end_bytes: u64| {
            entry_ends_bytes.push(end_bytes);
            match classes.last_mut() {
                Some(class) if class.kept_len_bytes == kept_len_bytes => {
                    class.entries.end = entry + 1;
                }
                _ => {
                    assert!(classes
                        .last()
                        .is_none_or(|class| class.kept_len_bytes < kept_len_bytes));
                    classes.push(LineClass {
                        kept_len_bytes,
                        entries: entry..entry + 1,
                        split: None,
                    });
                }
            }
            entry += 1;
        };
        for &(_, offset_bytes, len_bytes, radix, op_index) in &pieces {
            add(whole_lines_at(op_index, offset_bytes), offset_bytes);
            if radix == 3 {
                let torn_end_bytes = offset_bytes + len_bytes / 2;
                add(whole_lines_at(op_index, torn_end_bytes), torn_end_bytes);
            }
        }
        let current_len_bytes = pieces
            .last()
            .map_or(durable_len_bytes as u64, |piece| piece.1 + piece.2);
        add(all_lines_end_bytes, current_len_bytes);
        let mut file = LineFile {
            name: name.to_string(),
            positions,
            radices,
            extra_states,
            size_at,
            stale_radix,
            entry_ends_bytes,
            piece_bounds: pieces.iter().map(|piece| (piece.1, piece.2)).collect(),
            current_len_bytes,
            later_threes,
            later_twos,
            classes,
            class_states_memo: OnceLock::new(),
        };
        if split_tails {
            file.split_by_tail();
        }
        file
    }
}
