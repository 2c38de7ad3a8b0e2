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
//! later power loss finds pending is the same), and that no unread file's bytes matter to a
//! later fault either: it removes an unread file before it writes that name again (the
//! engine's recovery removes every `.tmp` first), so a later power loss finds the old file
//! whole and durable, its removal pending or not (a directory choice, the same in every
//! state of the class), never the old bytes under a truncate it could undo. So unread files
//! are collapsed split or not.
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
use crate::disk::{Contents, DirOp, Disk, InodeId};
use num_bigint::BigUint;
use std::collections::BTreeMap;
use std::sync::Arc;

mod line_file;
use line_file::LineFile;

/// The states of `choices`: the product of their radices, exactly.
fn states_of(choices: &[Choice]) -> BigUint {
    super::exact_count(choices)
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
    pending_dir_logged: Vec<super::super::Logged>,
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
    /// kept lines): a reader that cuts a torn tail away takes steps to do it (see the module
    /// header). A fault after the power loss then finds the same steps and choices in every
    /// state of a class. Unread files are collapsed either way: the caller removes one before
    /// it writes its name again.
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
        if !readers.unread_suffixes.is_empty() {
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
}

#[cfg(test)]
mod tests;
