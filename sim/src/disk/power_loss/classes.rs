//! Power-loss classes: crash states that a reader of whole lines cannot tell apart, counted
//! exactly without listing them, so that a sweep runs one state a class.
//!
//! The claim the caller makes. A *line-read file* is one whose reader, after a power loss,
//! keeps the longest prefix of the file made of whole lines (each ending in `b'\n'`) whose
//! bytes are all as the process wrote them, and nothing after it (a log with tail repair: a
//! torn or zeroed line ends what it reads, and it cuts the rest away; a reader that stops
//! at the first line that is not a record, where no record holds a zero byte or
//! [`crate::disk::STALE_BYTE`], is one). The sim cannot check
//! that claim; the caller makes it only where it holds, and with it two crash states that
//! make every other choice alike and keep the same such prefix of every line-read file lead
//! to the same run.
//!
//! A second claim: an *unread* file is one whose bytes the system never reads after a power
//! loss (a temporary file it only lists, removes or replaces): all of its data choices fall
//! into one class. It is collapsed only where every name that can reach it after the power
//! loss (its durable names, and the names of the pending namespace operations on it) is
//! unread, so that a rename still pending cannot put its bytes under a name that is read.
//!
//! The rule. A line-read file is collapsed only where its name is durable and no pending
//! namespace operation touches it (so that after the power loss its data is there under
//! that name alone, not under a name whose reader reads it whole), and its pending
//! operations are appends alone, each at the end of the one before, the first at the
//! durable length, with no byte a failed fsync left unpersisted (anything else keeps its
//! digits among the others). Its
//! choices are then its sector pieces in offset order (lost, torn, kept, as in the module
//! header of `power_loss`), its size and, on a profile with stale data, zeros or stale
//! bytes. A state's first intact byte past the durable length that is not the process's is
//! at `B`: the start of its first piece not kept if that piece is lost, or the end of the
//! half a torn piece keeps. Whatever the later digits say, the byte at `B` reads as zero,
//! as stale data or as the end of the file, never as the process's byte, so the whole
//! lines before `B` are what a reader keeps: the class of the state is the end of the last
//! line that ends at or before `B`. The states whose first piece not kept is piece `p`,
//! with a given fate, number the product of the radices of every later choice of the file
//! (pieces, size, stale): the classes' counts are sums of such products, exact in a
//! [`BigUint`] where they pass 2^64 (three fates a sector piece: 3^200 states is a sink
//! file with 100 KB pending).
//!
//! Split by tail (`CrashReaders::split_tails`). A reader that cuts a torn tail away does it
//! in steps of its own (a truncate, an fsync), and only where bytes follow the whole lines
//! it keeps: the states of one class that end at those lines and the states with more run
//! the same once the cut is durable, but by different steps, so a fault after the power
//! loss lands differently in them. Split, each class becomes up to two: its *clean* states
//! and its *torn* ones. A state's length is the process's length if its size is kept, else
//! the end of the last piece that survived in part or whole after its first piece not kept
//! (`B` if none did); it is clean where that length is the end of the kept lines. The
//! states of an entry with a given length are counted piece by piece: the last surviving
//! piece `q` (kept, or torn) with every piece between `p` and `q` at any fate and every one
//! after `q` lost, the size lost; or the size kept, with every later piece at any fate; the
//! stale choice at either digit. The caller claims more: that nothing else it does depends
//! on how long a torn tail was (the engine writes back only the lines it keeps, so what a
//! later power loss finds pending is the same), and that no unread file's bytes matter (a
//! file written again under the same name lands on them: split, unread files are not
//! collapsed).
//!
//! The numbering. The other choices (every file not collapsed, the directory) are
//! enumerated as they are for states, and are the least significant part of a class
//! number; each collapsed file's class index follows, in inode order. A class resolves to
//! its representative: its other digits as the number says, and in each collapsed file the
//! first state of its class (pieces before `p` kept, `p` lost or torn, every later choice
//! at 0). Classes are numbered only where the other choices are enumerable (at most
//! [`POWER_LOSS_ENUMERATION_BOUND`]) and the classes fit in a u64.

use super::{choices, count, digits_of_index, Choice, POWER_LOSS_ENUMERATION_BOUND};
use super::{ClassOutcome, PowerLossOutcome, PowerLossStates};
use crate::disk::inode::Written;
use crate::disk::{Contents, DataOp, DirOp, Disk, InodeId};
use num_bigint::BigUint;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The states of `choices`: the product of their radices, as powers of two and three (what
/// nearly every radix is) and the rest (directory digits) multiplied in.
fn states_of(choices: &[Choice]) -> BigUint {
    let (mut twos, mut threes, mut others) = (0u32, 0u32, BigUint::from(1u32));
    for choice in choices {
        match choice.radix() {
            2 => twos += 1,
            3 => threes += 1,
            radix => others *= radix,
        }
    }
    BigUint::from(2u32).pow(twos) * BigUint::from(3u32).pow(threes) * others
}

/// One class of a line-read file's crash states: those whose reader keeps the same lines.
/// Its states are the states of its *entries*: a first piece not kept, `p`, and its fate
/// (or none not kept), each standing for every combination of the file's later choices.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LineClass {
    /// The length of the whole intact lines the file's reader keeps.
    kept_len_bytes: u64,
    /// Its entries: indices into the file's entries (see [`LineFile::entry`]).
    entries: std::ops::Range<usize>,
    /// Split by tail: whether its states come back with bytes after the kept lines (torn),
    /// and how many states those are (None: not split, every state of the entries).
    split: Option<(bool, BigUint)>,
}

/// A collapsed line-read file: its choices' positions and its classes, in offset order.
#[derive(Clone, Debug)]
struct LineFile {
    name: String,
    /// The positions in the disk's choices of its pieces (in offset order), then of its
    /// size and stale choices.
    positions: Vec<usize>,
    /// Each piece's radix (2 or 3), in offset order.
    radices: Vec<u8>,
    /// The product of the size and stale choices' radices.
    extra_states: u64,
    /// The index in `positions` of the size choice, if the file has one.
    size_at: Option<usize>,
    /// The stale choice's radix (1 without one).
    stale_radix: u64,
    /// Per entry, its `B`: the first byte past the durable length that is not the
    /// process's (the file's length where every later choice is at 0).
    entry_ends_bytes: Vec<u64>,
    /// Each piece's offset and length, in offset order.
    piece_bounds: Vec<(u64, u64)>,
    /// The length the process wrote the file to.
    current_len_bytes: u64,
    /// Per piece `p`, the pieces of radix 3 and of radix 2 after it.
    later_threes: Vec<u32>,
    later_twos: Vec<u32>,
    classes: Vec<LineClass>,
    /// Each class's states, worked out for all classes at the first that is asked for (a
    /// sweep asks for every class of a step, and one pass is linear in the entries where a
    /// class at a time walked and raised powers for each).
    class_states_memo: OnceLock<Vec<BigUint>>,
}

impl LineFile {
    /// Entry `e`: the first piece not kept and its digit (lost 0, torn 1), or, for the last
    /// entry, `(pieces, 0)`: every piece kept.
    fn entry(&self, e: usize) -> (usize, u64) {
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
    fn entry_states(&self, p: usize) -> BigUint {
        let (threes, twos) = if p < self.radices.len() {
            (self.later_threes[p], self.later_twos[p])
        } else {
            (0, 0)
        };
        BigUint::from(3u32).pow(threes) * BigUint::from(2u32).pow(twos) * self.extra_states
    }

    /// The states of class `index`.
    fn class_states(&self, index: usize) -> &BigUint {
        let states = &self.all_class_states()[index];
        debug_assert_eq!(*states, self.class_states_by_entries(index));
        states
    }

    /// The states of class `index`, entry by entry (what [`LineFile::all_class_states`]
    /// works out for every class at once; debug builds check one against the other).
    fn class_states_by_entries(&self, index: usize) -> BigUint {
        let class = &self.classes[index];
        let all: BigUint = class
            .entries
            .clone()
            .map(|e| self.entry_states(self.entry(e).0))
            .sum();
        self.of_split(class, all)
    }

    /// Of `all`, the states of `class`'s entries, those it holds.
    fn of_split(&self, class: &LineClass, all: BigUint) -> BigUint {
        match &class.split {
            None => all,
            Some((_, states)) => states.clone(),
        }
    }

    /// The lengths the states of entry `e` come back with, and how many states each (see
    /// the module header), in length order.
    fn entry_lengths(&self, e: usize) -> BTreeMap<u64, BigUint> {
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
    fn length_of(&self, digits: &[u64], entry: usize) -> u64 {
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
    fn all_class_states(&self) -> &[BigUint] {
        self.class_states_memo.get_or_init(|| {
            let pieces = self.radices.len();
            // piece_states[p] = extra_states * the radices of the pieces after p; for
            // p = pieces (every piece kept) just extra_states.
            let mut piece_states = vec![BigUint::from(self.extra_states); pieces + 1];
            for p in (0..pieces.saturating_sub(1)).rev() {
                piece_states[p] = &piece_states[p + 1] * u32::from(self.radices[p + 1]);
            }
            // Entries in order: radix - 1 a piece (its fates lost, torn), then every piece
            // kept.
            let entry_pieces: Vec<usize> = self
                .radices
                .iter()
                .enumerate()
                .flat_map(|(p, &radix)| std::iter::repeat_n(p, usize::from(radix) - 1))
                .chain(std::iter::once(pieces))
                .collect();
            self.classes
                .iter()
                .map(|class| {
                    let all = class
                        .entries
                        .clone()
                        .map(|e| &piece_states[entry_pieces[e]])
                        .sum();
                    self.of_split(class, all)
                })
                .collect()
        })
    }

    /// The index of the class whose entries hold the state with these `digits` (one a
    /// choice of the disk, in numbering order): its entry is its first piece not kept at
    /// that piece's fate, or the last entry where every piece is kept.
    fn class_of_digits(&self, digits: &[u64]) -> usize {
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
                    .position(|class| class.split.as_ref().map(|s| s.0) == Some(torn))
                    .expect("a part holds every state");
                assert_eq!(self.classes[index + part].entries, class.entries);
                index + part
            }
        }
    }

    /// Splits every class into its clean and its torn states, each part kept where it
    /// holds a state (see the module header).
    fn split_by_tail(&mut self) {
        let classes = std::mem::take(&mut self.classes);
        for class in classes {
            let mut parts: BTreeMap<bool, BigUint> = BTreeMap::new();
            for e in class.entries.clone() {
                for (len_bytes, states) in self.entry_lengths(e) {
                    *parts.entry(len_bytes != class.kept_len_bytes).or_default() += states;
                }
            }
            for (torn, states) in parts {
                self.classes.push(LineClass {
                    split: Some((torn, states)),
                    ..class.clone()
                });
            }
        }
    }

    /// The representative digits of class `index`, one for each of `positions`: its first
    /// entry's pieces before `p` kept, `p` at its fate, every later choice at 0.
    ///
    ///
    /// A part split by tail takes the first of its entries with a state of its tail, at
    /// the shortest length of it, with the later choice that gives that length: the last
    /// surviving piece, or the size.
    fn representative(&self, index: usize) -> Vec<u64> {
        let class = &self.classes[index];
        let Some((torn, _)) = class.split else {
            return self.entry_representative(class.entries.start);
        };
        let (e, len_bytes) = class
            .entries
            .clone()
            .find_map(|e| {
                self.entry_lengths(e)
                    .into_keys()
                    .find(|&len_bytes| (len_bytes != class.kept_len_bytes) == torn)
                    .map(|len_bytes| (e, len_bytes))
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

    /// [`LineFile::length_of`] of digits one a position of this file (a representative's).
    fn length_of_file_digits(&self, file_digits: &[u64], entry: usize) -> u64 {
        let mut digits = vec![0; self.positions.iter().max().map_or(0, |&m| m + 1)];
        for (&at, &digit) in self.positions.iter().zip(file_digits) {
            digits[at] = digit;
        }
        self.length_of(&digits, entry)
    }

    /// The representative digits of entry `entry`: its pieces before `p` kept, `p` at its
    /// fate, every later choice at 0.
    fn entry_representative(&self, entry: usize) -> Vec<u64> {
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

/// The classes of the crash states a power loss can leave a disk in, given its line-read
/// files (see the module header).
#[derive(Clone, Debug)]
pub struct PowerLossClasses {
    choices: Vec<Choice>,
    /// The positions in `choices` of the choices not of a collapsed file.
    rest: Vec<usize>,
    rest_count: Option<u64>,
    files: Vec<LineFile>,
    /// The collapsed unread files: the positions of their choices (all at 0 in every
    /// representative) and their combinations, one class each.
    unread: Vec<(Vec<usize>, BigUint)>,
    /// The number of classes, if they are numbered.
    count: Option<u64>,
    /// Every crash state, in every class.
    states: BigUint,
    read_only: bool,
}

impl PowerLossClasses {
    /// The number of classes, or `None` where they are not numbered (more than
    /// [`POWER_LOSS_ENUMERATION_BOUND`] combinations of the other choices, or more classes
    /// than a u64 counts): then a sweep runs states instead.
    pub fn count(&self) -> Option<u64> {
        self.count
    }

    /// Every crash state of the disk, exactly: the sum of the classes' states.
    pub fn states(&self) -> &BigUint {
        &self.states
    }

    /// The classes of the collapsed file `name`, in offset order, as the length of the lines
    /// its reader keeps and the states of the file's own choices that keep them (None if it
    /// was not collapsed: not a line-read file, or not appended to alone).
    pub fn line_classes(&self, name: &str) -> Option<Vec<(u64, BigUint)>> {
        let file = self.files.iter().find(|file| file.name == name)?;
        Some(
            (0..file.classes.len())
                .map(|index| {
                    (
                        file.classes[index].kept_len_bytes,
                        file.class_states(index).clone(),
                    )
                })
                .collect(),
        )
    }

    /// The crash states in class `class` (numbered: below [`PowerLossClasses::count`]).
    pub fn class_states(&self, class: u64) -> BigUint {
        let (_, indices) = self.split(class);
        let unread: BigUint = self.unread.iter().map(|(_, states)| states).product();
        self.files
            .iter()
            .zip(indices)
            .map(|(file, index)| file.class_states(index))
            .product::<BigUint>()
            * unread
    }

    /// Where no file but a collapsed one is at risk (the other choices are the directory's
    /// at most): the directory digit and the length of the lines each line-read file keeps
    /// in class `class`, in inode order. Such a class boots into the durable disk, its
    /// pending namespace operations kept as the digit says, its line-read files cut to
    /// those lengths of what the process wrote and every unread file as it is durable: two
    /// disks with the same durable state and pending namespace operations
    /// ([`DurableIdentity`]) whose classes give the same digit and lengths boot into the
    /// same disk.
    pub fn boots_into(&self, class: u64) -> Option<(u64, Vec<u64>)> {
        if self.read_only
            || self
                .files
                .iter()
                .any(|file| file.classes.iter().any(|class| class.split.is_some()))
            || !self
                .rest
                .iter()
                .all(|&at| matches!(self.choices[at], Choice::Dir { .. }))
        {
            return None;
        }
        let (rest_index, indices) = self.split(class);
        Some((
            rest_index,
            self.files
                .iter()
                .zip(indices)
                .map(|(file, index)| file.classes[index].kept_len_bytes)
                .collect(),
        ))
    }

    /// The class crash state `state` falls into, where states are numbered as indices (at
    /// most [`POWER_LOSS_ENUMERATION_BOUND`]: `state` below their count) and classes are
    /// numbered; else None. A state's class is its other choices' combination and, in each
    /// collapsed line-read file, the class of its entry: its first piece not kept and that
    /// piece's fate (see the module header); an unread file's digits do not matter.
    pub fn class_of_state(&self, state: u64) -> Option<u64> {
        let count = self.count?;
        if self.read_only {
            return (state == 0).then_some(0);
        }
        let states = u64::try_from(&self.states).ok()?;
        if states > POWER_LOSS_ENUMERATION_BOUND || state >= states {
            return None;
        }
        let digits = digits_of_index(&self.choices, state);
        // The other choices' combination: their digits, the first least significant.
        let mut rest_index = 0;
        for &at in self.rest.iter().rev() {
            rest_index = rest_index * self.choices[at].radix() + digits[at];
        }
        let rest_count = self.rest_count.expect("numbered classes");
        assert!(rest_index < rest_count);
        // Each file's class index, the first file least significant (as `split` reads them).
        let mut files_index = 0;
        for file in self.files.iter().rev() {
            let index = file.class_of_digits(&digits) as u64;
            files_index = files_index * file.classes.len() as u64 + index;
        }
        let class = files_index * rest_count + rest_index;
        assert!(class < count, "class {class} of {count}");
        Some(class)
    }

    /// How many unread files were collapsed (tests and descriptions).
    pub fn unread_collapsed(&self) -> usize {
        self.unread.len()
    }

    /// The index among the other choices' combinations and each collapsed file's class index.
    fn split(&self, class: u64) -> (u64, Vec<usize>) {
        let count = self.count.expect("numbered classes");
        assert!(class < count, "class {class} of {count}");
        let rest_count = self.rest_count.expect("numbered classes");
        let mut left = class / rest_count;
        let indices = self
            .files
            .iter()
            .map(|file| {
                let len = file.classes.len() as u64;
                let index = left % len;
                left /= len;
                usize::try_from(index).expect("a class index fits in usize")
            })
            .collect();
        assert_eq!(left, 0, "the class number is below the count");
        (class % rest_count, indices)
    }

    /// The digits of class `class`'s representative, one a choice in numbering order.
    fn digits(&self, class: u64) -> Vec<u64> {
        let mut digits = vec![0; self.choices.len()];
        if self.read_only {
            assert_eq!(class, 0, "a read-only file system has one crash state");
            return digits;
        }
        let (rest_index, indices) = self.split(class);
        let rest: Vec<Choice> = self.rest.iter().map(|&at| self.choices[at]).collect();
        for (&at, digit) in self.rest.iter().zip(digits_of_index(&rest, rest_index)) {
            digits[at] = digit;
        }
        for (file, index) in self.files.iter().zip(indices) {
            for (&at, digit) in file.positions.iter().zip(file.representative(index)) {
                digits[at] = digit;
            }
        }
        digits
    }
}

/// A disk's durable state, held by its shared parts: equal (`==`) only where both hold the
/// very same copies (a pointer test; holding them keeps them from being changed in place),
/// so equal identities mean equal durable states. Two runs forked from one fault-free run
/// between two fsyncs share it.
#[derive(Clone, Debug)]
pub struct DurableIdentity {
    names: Arc<BTreeMap<String, InodeId>>,
    files: Vec<(InodeId, Contents)>,
    /// The pending namespace operations (compared by value: a few at most).
    pending_dir: Vec<DirOp>,
    pending_dir_logged: Vec<bool>,
    model: crate::disk::FsModel,
}

impl PartialEq for DurableIdentity {
    fn eq(&self, other: &DurableIdentity) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        Arc::ptr_eq(&self.names, &other.names)
            && self.pending_dir == other.pending_dir
            && self.pending_dir_logged == other.pending_dir_logged
            && self.model == other.model
            && self.files.len() == other.files.len()
            && self
                .files
                .iter()
                .zip(&other.files)
                .all(|((a, x), (b, y))| a == b && x.is_same_chunks(y))
    }
}

impl Disk {
    /// This disk's durable state, as [`DurableIdentity`] compares it.
    pub fn durable_identity(&self) -> DurableIdentity {
        DurableIdentity {
            names: Arc::clone(&self.durable_names),
            files: self
                .inodes
                .iter()
                .map(|(&inode, file)| (inode, file.durable.clone()))
                .collect(),
            pending_dir: self.pending_dir.clone(),
            pending_dir_logged: self.pending_dir_logged.clone(),
            model: self.model,
        }
    }
}

/// What the system under test reads of its files after a power loss: the claims by which
/// crash states fall into classes (see the module header). The default claims nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReaders {
    /// The line-read files, by name.
    pub line_files: Vec<String>,
    /// The unread files: those whose name ends with one of these.
    pub unread_suffixes: Vec<String>,
    /// Whether each class of a line-read file is split by tail (whether bytes follow the
    /// kept lines), and unread files are not collapsed: a reader that cuts a torn tail away
    /// takes steps to do it, and a process that writes an unread file's name again lands on
    /// its bytes (see the module header). A fault after the power loss then finds the same
    /// steps and choices in every state of a class.
    pub split_tails: bool,
}

impl CrashReaders {
    fn is_unread(&self, name: &str) -> bool {
        self.unread_suffixes
            .iter()
            .any(|suffix| name.ends_with(suffix.as_str()))
    }
}

impl Disk {
    /// The classes of this disk's crash states, by what `readers` claims (see the module
    /// header for the claims).
    pub fn power_loss_classes(&self, readers: &CrashReaders) -> PowerLossClasses {
        let choices = choices(self);
        if self.read_only {
            return PowerLossClasses {
                rest: (0..choices.len()).collect(),
                choices,
                rest_count: Some(1),
                files: Vec::new(),
                unread: Vec::new(),
                count: Some(1),
                states: BigUint::from(1u32),
                read_only: true,
            };
        }
        let mut files = Vec::new();
        let mut collapsed = vec![false; choices.len()];
        for name in &readers.line_files {
            let Some(inode) = self.appended_only(name) else {
                continue;
            };
            if files.iter().any(|file: &LineFile| file.name == *name) {
                continue;
            }
            let file = self.line_file(name, inode, &choices, readers.split_tails);
            for &at in &file.positions {
                assert!(!collapsed[at], "a choice belongs to one file");
                collapsed[at] = true;
            }
            files.push(file);
        }
        let mut unread = Vec::new();
        if !readers.unread_suffixes.is_empty() && !readers.split_tails {
            for &inode in self.inodes.keys() {
                if !self.only_unread_names_reach(inode, readers) {
                    continue;
                }
                let positions: Vec<usize> = (0..choices.len())
                    .filter(|&at| choices[at].inode() == Some(inode))
                    .collect();
                if positions.is_empty() {
                    continue;
                }
                for &at in &positions {
                    assert!(!collapsed[at], "a choice belongs to one file");
                    collapsed[at] = true;
                }
                let of_file: Vec<Choice> = positions.iter().map(|&at| choices[at]).collect();
                unread.push((positions, states_of(&of_file)));
            }
        }
        let rest: Vec<usize> = (0..choices.len()).filter(|&at| !collapsed[at]).collect();
        let rest_choices: Vec<Choice> = rest.iter().map(|&at| choices[at]).collect();
        let rest_count = count(&rest_choices);
        let count = rest_count
            .filter(|&count| count <= POWER_LOSS_ENUMERATION_BOUND)
            .and_then(|rest_count| {
                files.iter().try_fold(rest_count, |count, file| {
                    count.checked_mul(file.classes.len() as u64)
                })
            });
        let states = states_of(&choices);
        // Checked where it is cheap (a few choices): the tests check every class's states.
        debug_assert!(
            choices.len() > 64
                || states
                    == files.iter().fold(
                        states_of(&rest_choices)
                            * unread.iter().map(|(_, states)| states).product::<BigUint>(),
                        |product, file| {
                            product
                                * (0..file.classes.len())
                                    .map(|index| file.class_states(index))
                                    .sum::<BigUint>()
                        }
                    ),
            "the classes hold every state once"
        );
        PowerLossClasses {
            choices,
            rest,
            rest_count,
            files,
            unread,
            count,
            states,
            read_only: false,
        }
    }

    /// Cuts the power and boots again into the representative of class `class` of
    /// [`Disk::power_loss_classes`] with the same `readers`, if the classes are numbered and
    /// `class` is below their count; else leaves the disk as it is and returns None. The
    /// outcome's `state` is the class number.
    pub fn power_loss_class(
        &mut self,
        readers: &CrashReaders,
        class: u64,
    ) -> Option<PowerLossOutcome> {
        let classes = self.power_loss_classes(readers);
        self.power_loss_class_of(&classes, class)
    }

    /// [`Disk::power_loss_class`] with the classes already worked out for this very disk
    /// (by [`Disk::power_loss_classes`]: the same disk, or one equal to it).
    pub fn power_loss_class_of(
        &mut self,
        classes: &PowerLossClasses,
        class: u64,
    ) -> Option<PowerLossOutcome> {
        assert_eq!(
            classes.read_only, self.read_only,
            "the classes of this disk"
        );
        if classes.count.is_none_or(|count| class >= count) {
            return None;
        }
        let digits = classes.digits(class);
        let mut outcome = self.resolve_digits(&classes.choices, &digits);
        outcome.state = class;
        outcome.states = PowerLossStates {
            count: u64::try_from(&classes.states).ok(),
        };
        outcome.class = Some(ClassOutcome {
            classes: classes.count.expect("numbered classes"),
            states: classes.class_states(class),
            states_total: classes.states.clone(),
        });
        Some(outcome)
    }

    /// Whether every name that can reach `inode` after a power loss is unread: its
    /// durable names, and the names of the pending namespace operations on it (a pending
    /// rename may or may not survive; a create may).
    fn only_unread_names_reach(&self, inode: InodeId, readers: &CrashReaders) -> bool {
        let durable = self
            .durable_names
            .iter()
            .filter(|(_, &id)| id == inode)
            .map(|(name, _)| name.as_str());
        let pending = self.pending_dir.iter().flat_map(|op| match op {
            DirOp::Create { name, inode: id } | DirOp::Unlink { name, inode: id }
                if *id == inode =>
            {
                vec![name.as_str()]
            }
            DirOp::Rename {
                from,
                to,
                inode: id,
            } if *id == inode => {
                vec![from.as_str(), to.as_str()]
            }
            _ => Vec::new(),
        });
        let current = self
            .names
            .iter()
            .filter(|(_, &id)| id == inode)
            .map(|(name, _)| name.as_str());
        durable
            .chain(pending)
            .chain(current)
            .all(|name| readers.is_unread(name))
    }

    /// The inode `name` names, if that name is durable and no pending namespace operation
    /// touches the inode (after the power loss it is there under that name alone, whose
    /// reader reads whole lines), its pending operations are appends alone, each at the end
    /// of the one before, from the durable length, and nothing is left unpersisted.
    fn appended_only(&self, name: &str) -> Option<InodeId> {
        let inode = *self.names.get(name)?;
        if self.durable_names.get(name) != Some(&inode)
            || self
                .durable_names
                .values()
                .filter(|&&id| id == inode)
                .count()
                != 1
            || self.pending_dir.iter().any(|op| match op {
                DirOp::Create { inode: id, .. }
                | DirOp::Rename { inode: id, .. }
                | DirOp::Unlink { inode: id, .. } => *id == inode,
            })
        {
            return None;
        }
        let file = &self.inodes[&inode];
        if file.pending.is_empty() || !file.appended_only() {
            return None;
        }
        Some(inode)
    }

    /// The classes of the appended-only file `inode` (see the module header).
    fn line_file(
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

#[cfg(test)]
mod tests;
