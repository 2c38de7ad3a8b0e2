//! Power loss: the crash states a [`Disk`] can wake up in, and resolving it to one of them.
//!
//! A power loss keeps everything durable and resolves each pending operation on its own, by
//! these rules (after ALICE, OSDI'14; FoundationDB's simulated files; LazyFS; fsync(2)):
//!
//! 1. Unsynced writes, appends and truncates of a file may survive in any subset, with no
//!    order among them. Everything before the file's last fsync is already in `durable`, so
//!    only `pending` is at risk. The surviving operations are applied in issue order (the
//!    page cache writes back the newest bytes, so an older write never lands over a newer).
//! 2. fsync(file) makes data and size durable, not the name: a created or renamed name is
//!    durable only after fsync_dir.
//! 3. Writes tear. A pending write is cut into sector pieces aligned on the file offset
//!    ([`Disk::sector_size_bytes`], 512 by default). Each piece survives or not on its own,
//!    with 3 outcomes: lost, torn (keeps the first half of its new bytes, rounded down: at
//!    least 1), kept; a 1-byte piece has 2: lost, kept. Bytes a torn piece does not keep
//!    read as they were before the write. A file's new size may survive without its new
//!    data: a file the process grew (`current` longer than `durable`) has one more choice,
//!    "size survives". If yes, its length is the one the process saw and any byte no
//!    surviving operation wrote reads as zero, or as the durable byte where `durable`
//!    covers it. If no, its length is what the surviving operations give: with writes
//!    only, the max of the durable length and the end of every surviving (part of a) piece.
//!    A pending truncate survives or not as a whole (2 outcomes). On a profile with stale
//!    data (xfs: see `fs_model`) a grown file has one more choice, last of all:
//!    the bytes past the durable length that no surviving write wrote read as zeros or as
//!    stale data ([`STALE_BYTE`]); a hole a surviving truncate made reads as zeros.
//!    A tear keeps a prefix of a piece: with 1-byte sectors each byte is a piece, so a
//!    write can tear at any byte (and keep any subset of its bytes).
//! 4. create, rename and unlink are each atomic; an unsynced one may be undone; they persist
//!    independently of file data (a rename can survive while the renamed file's data does
//!    not: the zero-length file after a rename). The directory is an ordered metadata
//!    journal: the surviving pending namespace operations are a prefix of `pending_dir`
//!    (n + 1 outcomes for n operations), applied on top of `durable_names`. A file's data
//!    survives on its inode whatever happens to its name; an inode no surviving name
//!    reaches is gone. By profile: on ext4 and xfs an fsync that commits the journal has
//!    already made the operations before it durable (fewer states); on btrfs an fsync logs
//!    its file's own operations, and every unlink issued before it (measured: an unlink
//!    followed by a successful fsync of another file survives), which survive whatever
//!    prefix does (a *cut* at a lost operation m keeps those before m and every logged
//!    one); posix has every prefix, every cut with the unlinks other files' fsyncs logged
//!    counted as not logged (the cuts it had before btrfs's unlink rule), and every btrfs
//!    cut.
//! 5. fsync can fail ([`Disk::fsync_fail`]): the bytes its pending writes wrote never reach
//!    the disk (its truncates do), though the process still reads them from clean pages.
//!    They are no longer pending and offer no choice: a power loss loses them all, and they
//!    read as `durable` holds them (the old bytes, or zeros). The size its writes gave the
//!    file reaches the disk on ext4 (btrfs goes read-only instead: rule 6). On xfs it may not: xfs moves a
//!    file's on-disk size only when a write completes, so with every new block failed the
//!    file comes back at its size before the fsync (measured; with one of two new blocks
//!    failed it came back up to the end of the block that was written, a state the model,
//!    which takes every block of a failed fsync as failed, has no counterpart for). On xfs
//!    and posix such a file has one more choice, after every other: the failed fsync's size
//!    kept (digit 0, as on ext4) or lost (1: the file is back at the length the disk had
//!    before that fsync, its truncates applied, and its pending operations start from
//!    there). A later successful fsync settles it: a completed write moves the on-disk size
//!    to its end, a truncate sets it; until then a second fsync with nothing to write, a
//!    page eviction or a process crash leave the choice open.
//!
//! 6. A read-only file system (btrfs after a failed fsync: see `fs_model`) writes nothing
//!    more: a power loss has one crash state, every choice at "nothing survived" (state 0
//!    of the same disk were it writable), and the file system is writable after the boot.
//!
//! Numbering. The choices come in a fixed order: files in inode order (creation order),
//! within a file its pending operations in issue order, within a write its sector pieces in
//! offset order, then the file's size choice; after every file, the directory prefix. A
//! choice's digit puts "nothing survived" at 0 and "everything survived" at radix - 1: a
//! piece is lost = 0, torn = 1, kept = 2 (lost = 0, kept = 1 for a 1-byte piece); a
//! truncate and the size are lost = 0, kept = 1; the directory digit is the number of
//! namespace operations kept (posix: digits above n are the cuts, in operation order, those
//! without the unlinks other files' fsyncs logged first;
//! btrfs: the cuts, then the prefixes that hold every logged operation); stale data, after
//! the directory, is zeros = 0, stale = 1; the failed fsync's size, last of all, is kept = 0,
//! lost = 1 (against the usual order, so that posix's numbers of the states it had before
//! this choice existed did not move). The profiles' extra choices come last, so on
//! posix a state number below the count of a disk without them names the same state. When there are at most [`POWER_LOSS_ENUMERATION_BOUND`]
//! states, a state number is the mixed-radix number of these digits, the first choice
//! being the least significant digit: state 0 is "nothing pending survived" and state
//! count - 1 is "everything survived" (the process's view) unless an fsync logged a
//! namespace operation out of order (posix numbers its cuts above "every prefix"). With more states, the state number is a seed: each digit in the same order is
//! `next_u64() % radix` of `ChaCha8Rng::seed_from_u64(state)`. Either way the same disk and
//! state number always give the same crash state.
//!
//! The count is the number of combinations of choices; some combinations can give the same
//! disk (say, a write whose inode no surviving name reaches).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::inode::{apply_data_op, ranges_add, ranges_clip, ranges_remove};
use super::Logged;
use super::{Contents, DataOp, DirOp, Disk, FsModel, InodeId, STALE_BYTE};

mod classes;
mod outcome;
pub use classes::{CrashReaders, DurableIdentity, PowerLossClasses};
pub use outcome::{
    ClassOutcome, DirOutcome, FileOutcome, PieceFate, PieceOutcome, PowerLossOutcome, SizeFate,
};

/// Up to this many crash states (65,536), a state number is an index a test can enumerate;
/// above it, a seed. A sweep runs at most this many states a step.
pub const POWER_LOSS_ENUMERATION_BOUND: u64 = 1 << 16;

/// How many crash states a power loss can leave the disk in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerLossStates {
    count: Option<u64>,
}

impl PowerLossStates {
    /// The number of crash states, or `None` if it does not fit in a u64.
    pub fn count(&self) -> Option<u64> {
        self.count
    }

    /// Whether there are at most `bound` states, so that a test can try each of them.
    pub fn is_enumerable(&self, bound: u64) -> bool {
        self.count.is_some_and(|count| count <= bound)
    }
}

impl fmt::Display for PowerLossStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.count {
            Some(count) => write!(f, "{count}"),
            None => write!(f, "more than 2^64"),
        }
    }
}

/// One choice a power loss makes, in numbering order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// A sector piece of the pending write `op_index` of `inode`: lost, (torn,) kept.
    Piece {
        inode: InodeId,
        op_index: usize,
        offset_bytes: u64,
        len_bytes: u64,
    },
    /// The pending truncate `op_index` of `inode`: lost, kept.
    SetLen { inode: InodeId, op_index: usize },
    /// Whether the grown size of `inode` survives: lost, kept.
    Size { inode: InodeId },
    /// Which pending namespace operations survive: one of `radix` sets (see [`dir_kept`]).
    Dir { radix: u64 },
    /// Whether bytes of the grown `inode` that no surviving write wrote read as zeros or as
    /// stale data: zeros, stale (profiles with stale data only).
    Stale { inode: InodeId },
    /// Whether the size a failed fsync's writes gave `inode` reached the disk: kept, lost
    /// (profiles where it may not: xfs, posix). Kept is 0, against the usual order, so that
    /// on posix a state number names the state it named before this choice existed.
    FailedSize { inode: InodeId },
}

impl Choice {
    /// The file the choice is about (None: the directory's).
    fn inode(&self) -> Option<InodeId> {
        match self {
            Choice::Piece { inode, .. }
            | Choice::SetLen { inode, .. }
            | Choice::Size { inode }
            | Choice::Stale { inode }
            | Choice::FailedSize { inode } => Some(*inode),
            Choice::Dir { .. } => None,
        }
    }

    fn radix(&self) -> u64 {
        match self {
            Choice::Piece { len_bytes: 1, .. } => 2,
            Choice::Piece { .. } => 3,
            Choice::SetLen { .. }
            | Choice::Size { .. }
            | Choice::Stale { .. }
            | Choice::FailedSize { .. } => 2,
            Choice::Dir { radix } => *radix,
        }
    }
}

/// The fate of a piece from its digit.
fn piece_fate(len_bytes: u64, digit: u64) -> PieceFate {
    match (len_bytes, digit) {
        (_, 0) => PieceFate::Lost,
        (1, 1) | (_, 2) => PieceFate::Kept,
        (_, 1) => PieceFate::Torn {
            kept_bytes: len_bytes / 2,
        },
        _ => unreachable!("a piece's digit is below its radix"),
    }
}

/// The sector pieces of a write of `len_bytes` at `offset_bytes`: (offset, length) pairs.
fn sector_pieces(offset_bytes: u64, len_bytes: u64, sector_size_bytes: u64) -> Vec<(u64, u64)> {
    if len_bytes == 0 {
        return Vec::new();
    }
    let end_bytes = offset_bytes + len_bytes;
    let sector_first = offset_bytes / sector_size_bytes;
    let sector_last = (end_bytes - 1) / sector_size_bytes;
    (sector_first..=sector_last)
        .map(|sector| {
            let start = offset_bytes.max(sector * sector_size_bytes);
            let end = end_bytes.min((sector + 1) * sector_size_bytes);
            (start, end - start)
        })
        .collect()
}

/// The choices a power loss makes on this disk, in numbering order.
fn choices(disk: &Disk) -> Vec<Choice> {
    let sector_size_bytes = disk.sector_size_bytes as u64;
    let mut choices = Vec::new();
    for (&inode, file) in disk.inodes.iter() {
        for (op_index, op) in file.pending.iter().enumerate() {
            match op {
                DataOp::Write {
                    offset_bytes,
                    bytes,
                } => {
                    let pieces =
                        sector_pieces(*offset_bytes, bytes.len() as u64, sector_size_bytes);
                    choices.extend(pieces.into_iter().map(|(offset_bytes, len_bytes)| {
                        Choice::Piece {
                            inode,
                            op_index,
                            offset_bytes,
                            len_bytes,
                        }
                    }));
                }
                DataOp::SetLen { .. } => choices.push(Choice::SetLen { inode, op_index }),
            }
        }
        if file.current.len() > file.durable.len() {
            choices.push(Choice::Size { inode });
        }
    }
    if !disk.pending_dir.is_empty() {
        choices.push(Choice::Dir {
            radix: dir_radix(disk),
        });
    }
    // A profile's extra choices come last, so that they leave every other digit, and a
    // seeded state's draws, as they are.
    if disk.model.stale_data() {
        for (&inode, file) in disk.inodes.iter() {
            if file.current.len() > file.durable.len() {
                choices.push(Choice::Stale { inode });
            }
        }
    }
    for (&inode, file) in disk.inodes.iter() {
        if file.failed_len_bytes.is_some() {
            choices.push(Choice::FailedSize { inode });
        }
    }
    choices
}

/// The pending namespace operations that can be the first one lost while every operation a
/// fsync logged survives: those not logged, before the last logged one (`with_unlinks`:
/// counting the unlinks other files' fsyncs logged as logged).
fn out_of_order_cuts(disk: &Disk, with_unlinks: bool) -> Vec<usize> {
    let logged = |index: usize| disk.pending_dir_logged[index].counts(with_unlinks);
    let Some(last_logged) = (0..disk.pending_dir.len())
        .rev()
        .find(|&index| logged(index))
    else {
        return Vec::new();
    };
    (0..last_logged).filter(|&index| !logged(index)).collect()
}

/// posix's second family of cuts, btrfs's (the unlinks other files' fsyncs logged counted
/// as logged): none unless such an unlink is pending, when they would repeat the first.
fn unlink_cuts(disk: &Disk) -> Vec<usize> {
    if disk.pending_dir_logged.contains(&Logged::Unlink) {
        out_of_order_cuts(disk, true)
    } else {
        Vec::new()
    }
}

/// How many sets of pending namespace operations a power loss can keep (see [`dir_kept`]).
fn dir_radix(disk: &Disk) -> u64 {
    let ops = disk.pending_dir.len() as u64;
    match disk.model {
        // Every prefix, then each prefix cut short with the logged operations on top, the
        // unlinks other files' fsyncs logged undone, then kept (btrfs's cuts).
        FsModel::Posix => {
            ops + 1 + out_of_order_cuts(disk, false).len() as u64 + unlink_cuts(disk).len() as u64
        }
        // The logged operations always survive: each cut, then the prefixes that hold them.
        FsModel::Btrfs => {
            let cuts = out_of_order_cuts(disk, true).len() as u64;
            let logged_end = logged_end(disk) as u64;
            cuts + (ops - logged_end) + 1
        }
        FsModel::Ext4 | FsModel::Xfs => ops + 1,
    }
}

/// One past the last logged pending namespace operation, unlinks other files' fsyncs logged
/// included (0 if none is logged).
fn logged_end(disk: &Disk) -> usize {
    disk.pending_dir_logged
        .iter()
        .rposition(|logged| logged.counts(true))
        .map_or(0, |last| last + 1)
}

/// Which pending namespace operations survive, for the directory digit `digit`. A prefix of
/// `k` operations keeps the first `k`; a cut at operation `m` keeps those before `m` and
/// every logged one. posix: digits 0..=n are the n + 1 prefixes (as on ext4 and xfs), the
/// next ones the cuts in order with the unlinks other files' fsyncs logged not counted as
/// logged, then btrfs's cuts (counted). btrfs: the cuts in order, then the prefixes that
/// hold every logged operation, shortest first. ext4, xfs: the prefixes.
fn dir_kept(disk: &Disk, digit: u64) -> Vec<bool> {
    let ops = disk.pending_dir.len();
    let digit = usize::try_from(digit).expect("a directory digit fits in usize");
    let prefix = |k: usize| (0..ops).map(|index| index < k).collect::<Vec<bool>>();
    let cut = |m: usize, with_unlinks: bool| {
        (0..ops)
            .map(|index| index < m || disk.pending_dir_logged[index].counts(with_unlinks))
            .collect::<Vec<bool>>()
    };
    let own_cuts = out_of_order_cuts(disk, false);
    let cuts = out_of_order_cuts(disk, true);
    match disk.model {
        FsModel::Posix if digit <= ops => prefix(digit),
        FsModel::Posix if digit <= ops + own_cuts.len() => cut(own_cuts[digit - ops - 1], false),
        FsModel::Posix => cut(unlink_cuts(disk)[digit - ops - 1 - own_cuts.len()], true),
        FsModel::Btrfs if digit < cuts.len() => cut(cuts[digit], true),
        FsModel::Btrfs => prefix(logged_end(disk) + digit - cuts.len()),
        FsModel::Ext4 | FsModel::Xfs => prefix(digit),
    }
}

/// The product of the choices' radices, exactly: powers of 2 and 3 (almost every radix)
/// raised once each, the rest multiplied in.
fn exact_count(choices: &[Choice]) -> num_bigint::BigUint {
    use num_bigint::BigUint;
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

fn count(choices: &[Choice]) -> Option<u64> {
    choices
        .iter()
        .try_fold(1u64, |count, choice| count.checked_mul(choice.radix()))
}

/// The digits of `state`, first choice least significant. `state` must be below the count.
fn digits_of_index(choices: &[Choice], state: u64) -> Vec<u64> {
    let mut rest = state;
    let digits = choices
        .iter()
        .map(|choice| {
            let digit = rest % choice.radix();
            rest /= choice.radix();
            digit
        })
        .collect();
    assert_eq!(rest, 0, "the state number is below the count");
    digits
}

/// The digits drawn from the seed `state`, in numbering order.
fn digits_of_seed(choices: &[Choice], state: u64) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(state);
    choices
        .iter()
        .map(|choice| rng.next_u64() % choice.radix())
        .collect()
}

fn describe_dir_op(op: &DirOp) -> String {
    match op {
        DirOp::Create { name, .. } => format!("create {name}"),
        DirOp::Rename { from, to, .. } => format!("rename {from} -> {to}"),
        DirOp::Unlink { name, .. } => format!("unlink {name}"),
    }
}

/// Applies one surviving namespace operation. In a prefix (`in_order`) the journal replays
/// the process's history exactly; out of order, an operation acts on what its name holds
/// then: a rename or an unlink moves or removes a name only if it still names the inode.
fn apply_dir_op(names: &mut BTreeMap<String, InodeId>, op: &DirOp, in_order: bool) {
    match op {
        DirOp::Create { name, inode } => {
            names.insert(name.clone(), *inode);
        }
        DirOp::Rename { from, to, inode } => {
            if names.get(from) == Some(inode) {
                names.remove(from);
            } else {
                assert!(!in_order, "the journal replays the process's history");
            }
            names.insert(to.clone(), *inode);
        }
        DirOp::Unlink { name, inode } => {
            if names.get(name) == Some(inode) {
                names.remove(name);
            } else {
                assert!(!in_order, "the journal replays the process's history");
            }
        }
    }
}

impl Disk {
    /// How many crash states a power loss could leave this disk in.
    pub fn power_loss_states(&self) -> PowerLossStates {
        self.states_of(&choices(self))
    }

    /// [`Disk::power_loss_states`], exactly however many (a disk whose writes never sync has
    /// 3^pieces states, past 2^64 within a few hundred events).
    pub fn power_loss_states_exact(&self) -> num_bigint::BigUint {
        if self.read_only {
            return num_bigint::BigUint::from(1u32);
        }
        exact_count(&choices(self))
    }

    /// [`Disk::power_loss_states`] from this disk's `choices`, already listed.
    fn states_of(&self, choices: &[Choice]) -> PowerLossStates {
        if self.read_only {
            // Nothing more reaches the disk: every choice stays at "nothing survived".
            return PowerLossStates { count: Some(1) };
        }
        PowerLossStates {
            count: count(choices),
        }
    }

    /// Cuts the power and boots again: resolves the disk, in place, to crash state `state`
    /// (see the module header for the rules and the numbering). Afterwards nothing is
    /// pending: every file's contents and every name are durable.
    ///
    /// When there are at most [`POWER_LOSS_ENUMERATION_BOUND`] states, `state` is an index
    /// and must be below [`PowerLossStates::count`]; otherwise any u64 is a seed.
    pub fn power_loss(&mut self, state: u64) -> PowerLossOutcome {
        let choices = choices(self);
        self.power_loss_of(&choices, state)
    }

    /// [`Disk::power_loss`] where a state number at or beyond an enumerable count wraps
    /// (`planned % count`), so that any u64 names a state: the outcome's `state` is the one
    /// that ran. The choices are listed once (a sweep's power-loss point did it twice, once
    /// to count and once to resolve).
    pub fn power_loss_wrapping(&mut self, planned: u64) -> PowerLossOutcome {
        let choices = choices(self);
        let state = match self.states_of(&choices).count {
            Some(count) if count <= POWER_LOSS_ENUMERATION_BOUND => planned % count,
            _ => planned,
        };
        self.power_loss_of(&choices, state)
    }

    /// [`Disk::power_loss`] with this disk's `choices`, already listed.
    fn power_loss_of(&mut self, choices: &[Choice], state: u64) -> PowerLossOutcome {
        let states = self.states_of(choices);
        let seeded = !states.is_enumerable(POWER_LOSS_ENUMERATION_BOUND);
        let digits = if self.read_only {
            assert_eq!(state, 0, "a read-only file system has one crash state");
            vec![0; choices.len()]
        } else if seeded {
            digits_of_seed(choices, state)
        } else {
            let count = states.count.expect("an enumerable count fits in a u64");
            assert!(state < count, "state {state} of {count} power-loss states");
            digits_of_index(choices, state)
        };
        let mut outcome = self.resolve_digits(choices, &digits);
        outcome.state = state;
        outcome.states = states;
        outcome.seeded = seeded;
        outcome
    }

    /// Resolves the disk, in place, to the crash state these `digits` of `choices` name (one
    /// a choice, in numbering order; below each choice's radix). The outcome's `state`,
    /// `states` and `seeded` are the caller's to fill in.
    fn resolve_digits(&mut self, choices: &[Choice], digits: &[u64]) -> PowerLossOutcome {
        assert_eq!(choices.len(), digits.len(), "a digit a choice");
        assert!(
            choices
                .iter()
                .zip(digits)
                .all(|(choice, &digit)| digit < choice.radix()),
            "every digit below its choice's radix"
        );

        // The directory: a prefix of the journal (and what fsyncs logged) on top of the
        // durable names.
        let kept = choices
            .iter()
            .zip(digits)
            .find_map(|(choice, digit)| match choice {
                Choice::Dir { .. } => Some(dir_kept(self, *digit)),
                _ => None,
            })
            .unwrap_or_default();
        let ops_kept = kept.iter().filter(|&&k| k).count();
        let in_order = kept[..ops_kept].iter().all(|&k| k);
        // The durable names themselves, shared, when no pending operation survives (none was
        // pending, or the state keeps none of them): no copy of the table to make.
        let names = if ops_kept == 0 {
            Arc::clone(&self.durable_names)
        } else {
            let mut names = BTreeMap::clone(&self.durable_names);
            for (op, _) in self.pending_dir.iter().zip(&kept).filter(|(_, &k)| k) {
                apply_dir_op(&mut names, op, in_order);
            }
            Arc::new(names)
        };
        let dir = DirOutcome {
            ops_total: self.pending_dir.len(),
            ops_kept,
            undone: self
                .pending_dir
                .iter()
                .zip(&kept)
                .filter(|(_, &k)| !k)
                .map(|(op, _)| describe_dir_op(op))
                .collect(),
        };

        // The digits of each file's choices, by inode.
        let mut file_digits: BTreeMap<InodeId, Vec<(Choice, u64)>> = BTreeMap::new();
        for (choice, digit) in choices.iter().zip(digits) {
            let inode = match choice {
                Choice::Piece { inode, .. }
                | Choice::SetLen { inode, .. }
                | Choice::Size { inode }
                | Choice::Stale { inode }
                | Choice::FailedSize { inode } => *inode,
                Choice::Dir { .. } => continue,
            };
            file_digits
                .entry(inode)
                .or_default()
                .push((*choice, *digit));
        }

        let mut files = Vec::new();
        // Each surviving file's contents, and whether it had anything at risk (then its
        // running digest folds the change in).
        let mut resolved: BTreeMap<InodeId, (Contents, bool)> = BTreeMap::new();
        for &inode in self.inodes.keys() {
            let reachable = names.values().any(|id| *id == inode);
            let made = file_digits.get(&inode).map(Vec::as_slice).unwrap_or(&[]);
            let (contents, outcome) = self.resolve_file(inode, made, reachable);
            let at_risk = outcome.is_some();
            if let Some(outcome) = outcome {
                files.push(outcome);
            }
            if reachable {
                resolved.insert(inode, (contents, at_risk));
            }
        }

        // Boot: what survived is all there is, and all of it is durable.
        let inodes = Arc::make_mut(&mut self.inodes);
        inodes.retain(|inode, _| resolved.contains_key(inode));
        for (inode, (contents, at_risk)) in resolved {
            let file = inodes.get_mut(&inode).expect("resolved from a live inode");
            if at_risk {
                file.digest.0.changed(contents.len() as u64);
            }
            file.durable = contents.clone();
            file.current = contents;
            file.pending = Arc::default();
            file.unpersisted.clear();
            file.failed_len_bytes = None;
        }
        self.names = names;
        self.durable_names = Arc::clone(&self.names);
        self.pending_dir.clear();
        self.pending_dir_logged.clear();
        self.read_only = false;

        PowerLossOutcome {
            state: 0,
            states: PowerLossStates { count: None },
            seeded: false,
            class: None,
            files,
            dir,
        }
    }

    /// The contents of `inode` after a power loss that made the choices `made` for it, and
    /// what happened to it if it had anything at risk.
    fn resolve_file(
        &self,
        inode: InodeId,
        made: &[(Choice, u64)],
        reachable: bool,
    ) -> (Contents, Option<FileOutcome>) {
        let file = &self.inodes[&inode];
        if file.pending.is_empty()
            && file.unpersisted_bytes() == 0
            && file.failed_len_bytes.is_none()
        {
            return (file.durable.clone(), None);
        }
        if let Some((contents, outcome)) = self.resolve_kept_prefix(inode, made, reachable) {
            if cfg!(debug_assertions) {
                let (by_operations, described) =
                    self.resolve_file_by_operations(inode, made, reachable);
                assert_eq!(contents.to_vec(), by_operations.to_vec(), "the same bytes");
                assert_eq!(Some(&outcome), described.as_ref(), "the same description");
            }
            return (contents, Some(outcome));
        }
        self.resolve_file_by_operations(inode, made, reachable)
    }

    /// [`Disk::resolve_file`] where the file was only appended to since its durable length
    /// and the choices keep a prefix of its pieces (then at most one torn), lose every later
    /// one and keep no size or stale byte: its bytes are the first ones the process wrote,
    /// up to the end of what was kept, sharing their chunks (a class's representative is
    /// such a state; writing its pieces one by one was most of a class point's cost). None
    /// for any other file or choices.
    fn resolve_kept_prefix(
        &self,
        inode: InodeId,
        made: &[(Choice, u64)],
        reachable: bool,
    ) -> Option<(Contents, FileOutcome)> {
        let file = &self.inodes[&inode];
        if !file.appended_only() {
            return None;
        }
        let mut kept_end_bytes = file.durable.len() as u64;
        let mut cut = false;
        let mut size = SizeFate::Unchanged;
        let mut pieces = Vec::with_capacity(made.len());
        let mut kept_writes: Vec<bool> = vec![false; file.pending.len()];
        let mut write_indices: Vec<usize> = Vec::with_capacity(file.pending.len());
        let mut written = 0;
        for op in file.pending.iter() {
            write_indices.push(written);
            if let DataOp::Write { bytes, .. } = op {
                written += usize::from(!bytes.is_empty());
            }
        }
        for &(choice, digit) in made {
            match choice {
                Choice::Piece {
                    op_index,
                    offset_bytes,
                    len_bytes,
                    ..
                } => {
                    let fate = piece_fate(len_bytes, digit);
                    match (cut, fate) {
                        (false, PieceFate::Kept) => kept_end_bytes = offset_bytes + len_bytes,
                        (false, PieceFate::Torn { kept_bytes }) => {
                            kept_end_bytes = offset_bytes + kept_bytes;
                            cut = true;
                        }
                        (false, PieceFate::Lost) => cut = true,
                        (true, PieceFate::Lost) => {}
                        (true, _) => return None,
                    }
                    if fate != PieceFate::Lost {
                        kept_writes[op_index] = true;
                    }
                    pieces.push(PieceOutcome {
                        write_index: write_indices[op_index],
                        sector: offset_bytes / self.sector_size_bytes as u64,
                        offset_bytes,
                        len_bytes,
                        fate,
                    });
                }
                Choice::Size { .. } if digit == 0 => size = SizeFate::Lost,
                Choice::Stale { .. } if digit == 0 => {}
                _ => return None,
            }
        }
        let kept_len_bytes = usize::try_from(kept_end_bytes).expect("fits in memory");
        let writes_total = file
            .pending
            .iter()
            .filter(|op| matches!(op, DataOp::Write { bytes, .. } if !bytes.is_empty()))
            .count();
        let outcome = FileOutcome {
            name: self.inode_label(inode),
            writes_total,
            writes_kept: kept_writes.iter().filter(|&&kept| kept).count(),
            pieces,
            truncates_total: 0,
            truncates_kept: 0,
            size,
            len_bytes: kept_end_bytes,
            reachable,
            unpersisted_lost_bytes: 0,
            stale_bytes: 0,
            failed_fsync_size: SizeFate::Unchanged,
        };
        Some((file.current.prefix(kept_len_bytes), outcome))
    }

    /// [`Disk::resolve_file`] operation by operation: the general case.
    fn resolve_file_by_operations(
        &self,
        inode: InodeId,
        made: &[(Choice, u64)],
        reachable: bool,
    ) -> (Contents, Option<FileOutcome>) {
        let file = &self.inodes[&inode];
        let unpersisted_lost_bytes = file.unpersisted_bytes();
        // The failed fsync's size is chosen last but applies first: it is the disk's length
        // the pending operations start from.
        let failed_size = made.iter().find_map(|(choice, digit)| match choice {
            Choice::FailedSize { .. } => Some(*digit),
            _ => None,
        });
        let made: Vec<(Choice, u64)> = made
            .iter()
            .filter(|(choice, _)| !matches!(choice, Choice::FailedSize { .. }))
            .copied()
            .collect();
        // The durable bytes, shared: a state copies only the chunks its surviving
        // operations touch (a sink file's pending appends lie in its last chunks), so a
        // state costs what is at risk, not the whole file.
        let mut contents = file.durable.clone();
        let failed_fsync_size = match (failed_size, file.failed_len_bytes) {
            (Some(1), Some(stay)) => {
                // A cut, never a growth (as `Vec::truncate`).
                let stay = usize::try_from(stay).expect("fits in memory");
                contents.resize(stay.min(contents.len()));
                SizeFate::Lost
            }
            (Some(_), _) => SizeFate::Kept,
            (None, _) => SizeFate::Unchanged,
        };
        let mut outcome = FileOutcome {
            name: self.inode_label(inode),
            writes_total: 0,
            writes_kept: 0,
            pieces: Vec::new(),
            truncates_total: 0,
            truncates_kept: 0,
            size: SizeFate::Unchanged,
            len_bytes: file.durable.len() as u64,
            reachable,
            unpersisted_lost_bytes,
            stale_bytes: 0,
            failed_fsync_size,
        };
        // The bytes of `contents` that no surviving write wrote and that lie past what the
        // disk held, as a lost append leaves them (what stale data can fill where a lost
        // write had the block): sorted disjoint ranges, at most two per operation.
        let mut unwritten: Vec<(u64, u64)> = Vec::new();
        let mut made = made.iter().peekable();
        let mut write_index = 0;
        for (op_index, op) in file.pending.iter().enumerate() {
            match op {
                DataOp::Write {
                    offset_bytes: write_offset_bytes,
                    bytes,
                } => {
                    let mut kept = false;
                    while let Some((choice, digit)) = made.next_if(|(choice, _)| {
                        matches!(choice, Choice::Piece { op_index: i, .. } if *i == op_index)
                    }) {
                        let Choice::Piece {
                            offset_bytes,
                            len_bytes,
                            ..
                        } = choice
                        else {
                            unreachable!("next_if took a piece");
                        };
                        let fate = piece_fate(*len_bytes, *digit);
                        let kept_bytes = match fate {
                            PieceFate::Lost => 0,
                            PieceFate::Torn { kept_bytes } => kept_bytes,
                            PieceFate::Kept => *len_bytes,
                        };
                        let start = usize::try_from(offset_bytes - write_offset_bytes)
                            .expect("a piece lies within its write");
                        let end = start + usize::try_from(kept_bytes).expect("fits in memory");
                        if kept_bytes > 0 {
                            let len_before = contents.len() as u64;
                            let at = usize::try_from(*offset_bytes).expect("fits in memory");
                            contents.write_at(at, &bytes.bytes(start..end));
                            // Bytes it wrote over an earlier hole are written now; bytes it
                            // grew the file by before its offset are a hole (nothing past
                            // its end is new).
                            if !unwritten.is_empty() {
                                let written_end_bytes = offset_bytes + kept_bytes;
                                ranges_remove(&mut unwritten, *offset_bytes, written_end_bytes);
                            }
                            ranges_add(&mut unwritten, len_before, *offset_bytes);
                            kept = true;
                        }
                        outcome.pieces.push(PieceOutcome {
                            write_index,
                            sector: offset_bytes / self.sector_size_bytes as u64,
                            offset_bytes: *offset_bytes,
                            len_bytes: *len_bytes,
                            fate,
                        });
                    }
                    if !bytes.is_empty() {
                        outcome.writes_total += 1;
                        outcome.writes_kept += usize::from(kept);
                        write_index += 1;
                    }
                }
                DataOp::SetLen { .. } => {
                    let (choice, digit) = made.next().expect("a truncate has a choice");
                    assert_eq!(*choice, Choice::SetLen { inode, op_index });
                    outcome.truncates_total += 1;
                    if *digit == 1 {
                        outcome.truncates_kept += 1;
                        apply_data_op(&mut contents, op);
                        // A hole a truncate makes reads as zeros on every file system.
                        ranges_clip(&mut unwritten, contents.len() as u64);
                    }
                }
            }
        }
        if let Some((choice, digit)) = made.next_if(|(choice, _)| *choice == Choice::Size { inode })
        {
            assert_eq!(*choice, Choice::Size { inode });
            if *digit == 1 {
                outcome.size = SizeFate::Kept;
                let len_before = contents.len() as u64;
                contents.resize(file.current.len());
                ranges_clip(&mut unwritten, contents.len() as u64);
                ranges_add(&mut unwritten, len_before, contents.len() as u64);
            } else {
                outcome.size = SizeFate::Lost;
            }
        }
        if let Some((choice, digit)) = made.next() {
            assert_eq!(*choice, Choice::Stale { inode });
            if *digit == 1 {
                // Only blocks a lost write had: a hole no write covered reads as zeros.
                let mut covered = Vec::new();
                for op in file.pending.iter() {
                    if let DataOp::Write {
                        offset_bytes,
                        bytes,
                    } = op
                    {
                        ranges_add(
                            &mut covered,
                            *offset_bytes,
                            offset_bytes + bytes.len() as u64,
                        );
                    }
                }
                // Bounded: every unwritten range against every write's.
                for &(unwritten_start, unwritten_end) in &unwritten {
                    for &(covered_start, covered_end) in &covered {
                        let (start, end) = (
                            unwritten_start.max(covered_start),
                            unwritten_end.min(covered_end),
                        );
                        if start < end {
                            let len = usize::try_from(end - start).expect("fits in memory");
                            contents.write_at(
                                usize::try_from(start).expect("fits in memory"),
                                &vec![STALE_BYTE; len],
                            );
                            outcome.stale_bytes += end - start;
                        }
                    }
                }
            }
        }
        assert!(made.next().is_none(), "every choice of the file was used");
        outcome.len_bytes = contents.len() as u64;
        (contents, Some(outcome))
    }

    /// A name for each inode in descriptions ([`Disk::inode_label`] of each).
    pub(super) fn inode_labels(&self) -> BTreeMap<InodeId, String> {
        self.inodes
            .keys()
            .map(|&inode| (inode, self.inode_label(inode)))
            .collect()
    }

    /// A name for `inode` in descriptions: the process's name for it, else its durable name,
    /// else the last name the journal gave it, else `inode N` (where several names reach it,
    /// the last in name order). Made for the files a power loss put at risk only.
    pub(super) fn inode_label(&self, inode: InodeId) -> String {
        let named = |names: &BTreeMap<String, InodeId>| {
            names
                .iter()
                .rev()
                .find(|(_, id)| **id == inode)
                .map(|(name, _)| name.clone())
        };
        let journaled = || {
            self.pending_dir.iter().rev().find_map(|op| match op {
                DirOp::Create { name, inode: id } | DirOp::Unlink { name, inode: id }
                    if *id == inode =>
                {
                    Some(name.clone())
                }
                DirOp::Rename { to, inode: id, .. } if *id == inode => Some(to.clone()),
                _ => None,
            })
        };
        named(&self.names)
            .or_else(|| named(&self.durable_names))
            .or_else(journaled)
            .unwrap_or_else(|| format!("inode {inode}"))
    }
}

#[cfg(test)]
mod tests;
