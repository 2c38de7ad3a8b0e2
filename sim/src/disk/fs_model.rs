//! File-system profiles of the crash model: what each file system was measured to do where
//! kernels disagree, and `posix` (the default, the most adversarial): the union of them all
//! but xfs's stale bytes (see below).
//!
//! Measured on Linux 6.1 in user-mode Linux (see docs/design/real-and-fidelity.md, its power-cut
//! and disk-error sections). The rules every profile shares are stated at the top of `disk.rs` and of the
//! `power_loss` module; a profile changes only these:
//!
//! | rule | `posix` | `ext4` | `xfs` | `btrfs` |
//! | --- | --- | --- | --- | --- |
//! | a failed fsync ([`Disk::fsync_fail`](super::Disk::fsync_fail)) | bytes kept in clean pages | kept in clean pages | kept in clean pages | the file system turns read-only (EROFS) until mounted again; nothing pending survives |
//! | fsync(file) commits the namespace journal | no (any prefix) | yes | yes | no |
//! | fsync(file) logs that file's own names out of order | yes (besides every prefix) | no | no | yes |
//! | a kept new size with its data lost reads as | zeros | zeros | zeros or stale bytes | zeros |
//! | a failed fsync's new size (its writes' blocks all failed) | kept or lost | kept | kept or lost | lost |
//!
//! - **Journal commit** (ext4, xfs): an fsync of a file that has anything to write (pending
//!   data, or a create or rename of its own since the directory's last commit) commits the
//!   file system's journal, which holds every namespace operation issued before it: they
//!   become durable with the file (a rename made durable by an unrelated file's fsync). An
//!   fsync with nothing to write commits nothing (the model then keeps every prefix, which
//!   admits the states of both answers).
//! - **Log tree** (btrfs): an fsync logs the file's inode with its names, not the other
//!   pending namespace operations: after `create x; create y; fsync y` a power loss can keep
//!   `y` without `x`. A power loss keeps a prefix of the pending namespace operations (the
//!   last transaction commit) plus every operation that a later fsync logged.
//! - **Stale data** (xfs, and ext4 mounted `data=writeback`, not a profile here): a new size
//!   that survives without its data can read as what the blocks held before (freed blocks of
//!   another file), not zeros. The model cannot know which freed block a file system hands
//!   out: it fills such bytes with [`STALE_BYTE`], a representative that is neither zero nor
//!   a newline nor valid UTF-8, so a reader that parses lines sees garbage, as it would.
//! - **Failed fsync's size** (xfs): xfs moves a file's on-disk size only when a write
//!   completes. With every block of a failed fsync failed (what `keel fidelity disk-error`
//!   does) the file came back after a power cut at its size before the fsync: the sink at
//!   79 bytes instead of 330, a temporary checkpoint at 0 bytes; with one of two new blocks
//!   failed, at the end of the block that was written. The model takes every block of a
//!   failed fsync as failed (the state that loses the most bytes), so on xfs it offers both
//!   sizes at a power loss: the size before the fsync, and the new size with the disk's
//!   bytes (zeros) in it, which ext4 keeps and which stands for xfs's size moved by a block
//!   that was written. posix has both, as xfs.
//! - **Read-only after a failed fsync** (btrfs, with its defaults: copy-on-write, every data
//!   chunk failing writes, `keel fidelity disk-error --fs btrfs`): the fsync returns EIO, the
//!   transaction aborts and the file system turns read-only. The process goes on reading the
//!   new bytes (also after `drop_caches`: the pages are dirty, never written, never
//!   dropped); every change fails with EROFS (the second fsync too); a power cut leaves the
//!   file as it was before the fsync, and everything else that no fsync made durable is
//!   gone too (a temporary checkpoint created since the last commit is absent). The model:
//!   [`Disk::is_read_only`](super::Disk::is_read_only), one crash state (nothing pending),
//!   and [`Disk::remount`](super::Disk::remount), which the runner does when it restarts a
//!   process on a read-only disk (a reboot: a process on a read-only file system can change
//!   nothing, so without it every restart would fail at its first write). An earlier
//!   measurement with `nodatacow` saw the file reverted at once and a second EIO instead;
//!   the profile follows btrfs's defaults.
//!
//! `posix` admits every crash state ext4 and btrfs admit, and xfs's but those with stale
//! bytes (a failed fsync's lost size included) (ext4's and xfs's journal commits only remove states). Stale bytes are left out of
//! posix on purpose: they double the crash states of every file that grew (the default
//! sweep of ch04's `safe` from 483 power-loss points a sink to 891, `in-place`'s from 77,595,
//! every one run, to 305,859, too many to run) and changed no protocol's verdict on ch04
//! (each protocol holds or fails on xfs as on ext4, which differ only by them, and as on
//! posix with them); `--fs-model xfs` has them. For a failed fsync there is no union to offer: a process sees one behaviour or the
//! other. `posix` keeps ext4's and xfs's, the one in which a process reads bytes about to
//! vanish; btrfs's read-only file system is reached with `--fs-model btrfs`.
//!
//! Tears are a property of the device, not of the file system, and are the same in every
//! profile: a write tears at sector boundaries ([`Disk::with_sector_size`](super::Disk::with_sector_size)),
//! a torn sector keeping a prefix of its new bytes. With 1-byte sectors (a device that writes
//! no unit atomically) every byte is a piece of its own, so a write can tear at any byte.
//! Profiles draw no random numbers: a profile's crash states are numbered like every other
//! choice, and a seeded state draws its digits in the same order on every profile, the
//! profile's extra choices last (see the `power_loss` module).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a kept new size reads as where its data was lost, on a profile with stale data.
pub const STALE_BYTE: u8 = 0xA5;

/// A file-system profile of the crash model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsModel {
    /// The union of every profile: the most adversarial, the default.
    #[default]
    Posix,
    Ext4,
    Xfs,
    Btrfs,
}

impl FsModel {
    pub const ALL: [FsModel; 4] = [FsModel::Posix, FsModel::Ext4, FsModel::Xfs, FsModel::Btrfs];

    pub fn name(&self) -> &'static str {
        match self {
            FsModel::Posix => "posix",
            FsModel::Ext4 => "ext4",
            FsModel::Xfs => "xfs",
            FsModel::Btrfs => "btrfs",
        }
    }

    pub fn is_posix(&self) -> bool {
        *self == FsModel::Posix
    }

    /// An fsync of a file with something to write commits every earlier namespace operation.
    pub fn fsync_commits_journal(&self) -> bool {
        matches!(self, FsModel::Ext4 | FsModel::Xfs)
    }

    /// An fsync logs the file's own namespace operations, which then survive out of order.
    pub fn fsync_logs_names(&self) -> bool {
        matches!(self, FsModel::Posix | FsModel::Btrfs)
    }

    /// Whether a power loss may also keep no prefix beyond what fsyncs logged (`posix`: the
    /// plain prefixes of ext4 and xfs besides btrfs's prefixes with the logged operations).
    pub fn plain_prefixes_too(&self) -> bool {
        *self == FsModel::Posix
    }

    /// A kept new size whose data was lost may read as stale bytes instead of zeros (xfs
    /// only: see the module header for why posix leaves them out).
    pub fn stale_data(&self) -> bool {
        matches!(self, FsModel::Xfs)
    }

    /// A failed fsync aborts the file system's transaction: read-only until mounted again.
    pub fn read_only_on_fsync_error(&self) -> bool {
        *self == FsModel::Btrfs
    }

    /// The size a failed fsync's writes gave a file may not reach the disk: a power loss may
    /// find the file at its size before that fsync (xfs, and posix, which has ext4's new size
    /// too).
    pub fn failed_fsync_size_may_stay(&self) -> bool {
        matches!(self, FsModel::Posix | FsModel::Xfs)
    }
}

impl fmt::Display for FsModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FsModel {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FsModel::ALL
            .into_iter()
            .find(|model| model.name() == text)
            .ok_or_else(|| format!("unknown file-system model {text:?} (posix, ext4, xfs, btrfs)"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Disk, DiskError};
    use super::*;

    /// A directory after a power loss: (name, contents) by name.
    type State = Vec<(String, Vec<u8>)>;

    /// A directory as a test writes it down.
    type Files<'a> = &'a [(&'a str, &'a [u8])];

    /// A failed fsync's case: the profile, what the process reads after the failure, the
    /// second fsync, the crash states a power loss then leaves, in order.
    type FailedFsync = (
        FsModel,
        &'static [u8],
        Result<(), DiskError>,
        &'static [&'static [u8]],
    );

    /// Every crash state of `disk`, in state order.
    fn states(disk: &Disk) -> Vec<State> {
        let count = disk.power_loss_states().count().expect("a small count");
        assert!(count <= 64, "a test enumerates a few states");
        (0..count)
            .map(|state| {
                let mut crashed = disk.clone();
                crashed.power_loss(state);
                crashed
                    .list()
                    .into_iter()
                    .map(|name| {
                        let contents = crashed.read(&name).expect("listed");
                        (name, contents)
                    })
                    .collect()
            })
            .collect()
    }

    fn state(files: &[(&str, &[u8])]) -> State {
        files
            .iter()
            .map(|(name, contents)| (name.to_string(), contents.to_vec()))
            .collect()
    }

    /// `setup` on each profile leaves exactly the crash states `expected`, in order.
    fn check(setup: fn(FsModel) -> Disk, expected: &[(FsModel, &[Files<'_>])]) {
        for (model, want) in expected {
            let got = states(&setup(*model));
            let want: Vec<State> = want.iter().map(|files| state(files)).collect();
            assert_eq!(got, want, "{model}");
        }
    }

    #[test]
    fn names_round_trip_and_posix_is_the_default() {
        for model in FsModel::ALL {
            assert_eq!(model.name().parse::<FsModel>(), Ok(model));
            assert_eq!(model.to_string(), model.name());
        }
        assert_eq!(FsModel::default(), FsModel::Posix);
        assert!("zfs".parse::<FsModel>().is_err());
    }

    /// `x` renamed to `y`, then an unrelated file appended to and fsynced.
    fn rename_then_unrelated_fsync(model: FsModel) -> Disk {
        let mut disk = Disk::with_model(512, model);
        disk.create("x").unwrap();
        disk.append("x", b"X").unwrap();
        disk.fsync("x").unwrap();
        disk.create("log").unwrap();
        disk.fsync_dir().unwrap();
        disk.rename("x", "y").unwrap();
        disk.append("log", b"L").unwrap();
        disk.fsync("log").unwrap();
        disk
    }

    #[test]
    fn ext4_and_xfs_make_a_rename_durable_with_an_unrelated_fsync() {
        let undone: &[(&str, &[u8])] = &[("log", b"L"), ("x", b"X")];
        let kept: &[(&str, &[u8])] = &[("log", b"L"), ("y", b"X")];
        check(
            rename_then_unrelated_fsync,
            &[
                (FsModel::Posix, &[undone, kept]),
                (FsModel::Ext4, &[kept]),
                (FsModel::Xfs, &[kept]),
                (FsModel::Btrfs, &[undone, kept]),
            ],
        );
    }

    /// As above, but the fsynced file has nothing to write: no journal commit.
    fn rename_then_idle_fsync(model: FsModel) -> Disk {
        let mut disk = rename_then_unrelated_fsync(model);
        disk.rename("y", "z").unwrap();
        disk.fsync("log").unwrap();
        disk
    }

    #[test]
    fn an_fsync_with_nothing_to_write_commits_nothing() {
        let renamed: &[(&str, &[u8])] = &[("log", b"L"), ("y", b"X")];
        let again: &[(&str, &[u8])] = &[("log", b"L"), ("z", b"X")];
        check(
            rename_then_idle_fsync,
            &[
                (FsModel::Ext4, &[renamed, again]),
                (FsModel::Xfs, &[renamed, again]),
            ],
        );
    }

    /// `create x; create y; fsync y`, no directory fsync.
    fn two_creates_then_fsync_of_the_second(model: FsModel) -> Disk {
        let mut disk = Disk::with_model(512, model);
        disk.create("x").unwrap();
        disk.create("y").unwrap();
        disk.fsync("y").unwrap();
        disk
    }

    #[test]
    fn btrfs_keeps_a_fsynced_name_without_the_names_created_before_it() {
        let none: &[(&str, &[u8])] = &[];
        let x: &[(&str, &[u8])] = &[("x", b"")];
        let both: &[(&str, &[u8])] = &[("x", b""), ("y", b"")];
        let y: &[(&str, &[u8])] = &[("y", b"")];
        check(
            two_creates_then_fsync_of_the_second,
            &[
                // Every prefix, then the cut at `create x` with the logged `create y`.
                (FsModel::Posix, &[none, x, both, y]),
                (FsModel::Ext4, &[both]),
                (FsModel::Xfs, &[both]),
                // The logged create always survives.
                (FsModel::Btrfs, &[y, both]),
            ],
        );
        let mut disk = two_creates_then_fsync_of_the_second(FsModel::Btrfs);
        assert_eq!(
            disk.power_loss(0).to_string(),
            "state 0/2: dir: 1/2 ops kept (undone: create x)"
        );
    }

    /// `ok` durable, then `new` appended and not synced.
    fn unsynced_append(model: FsModel) -> Disk {
        let mut disk = Disk::with_model(512, model);
        disk.create("f").unwrap();
        disk.append("f", b"ok").unwrap();
        disk.fsync("f").unwrap();
        disk.fsync_dir().unwrap();
        disk.append("f", b"new").unwrap();
        disk
    }

    #[test]
    fn xfs_can_fill_a_kept_size_with_stale_bytes() {
        const S: u8 = STALE_BYTE;
        // The piece (lost, torn to 1 byte, kept), times the size (lost, kept).
        let zeros: [&[(&str, &[u8])]; 6] = [
            &[("f", b"ok")],
            &[("f", b"okn")],
            &[("f", b"oknew")],
            &[("f", b"ok\0\0\0")],
            &[("f", b"okn\0\0")],
            &[("f", b"oknew")],
        ];
        // Then the same with stale bytes where the lost append was.
        let stale: [&[(&str, &[u8])]; 6] = [
            &[("f", b"ok")],
            &[("f", b"okn")],
            &[("f", b"oknew")],
            &[("f", &[b'o', b'k', S, S, S])],
            &[("f", &[b'o', b'k', b'n', S, S])],
            &[("f", b"oknew")],
        ];
        let both: Vec<&[(&str, &[u8])]> = zeros.iter().chain(&stale).copied().collect();
        check(
            unsynced_append,
            &[
                (FsModel::Posix, &zeros),
                (FsModel::Ext4, &zeros),
                (FsModel::Xfs, &both),
                (FsModel::Btrfs, &zeros),
            ],
        );
        let mut disk = unsynced_append(FsModel::Xfs);
        assert_eq!(
            disk.power_loss(9).to_string(),
            "state 9/12: f: 0/1 writes kept, size kept, 3 stale bytes"
        );
    }

    #[test]
    fn a_hole_no_write_covered_reads_as_zeros_even_with_stale_data() {
        let mut disk = Disk::with_model(512, FsModel::Xfs);
        disk.create("f").unwrap();
        disk.fsync_dir().unwrap();
        disk.write("f", 2, b"c").unwrap();
        // The piece (lost, kept), the size, stale data: the last state keeps everything.
        let all = states(&disk);
        assert_eq!(all.len(), 8);
        assert_eq!(all[7], state(&[("f", b"\0\0c")]));
        assert_eq!(all[6], state(&[("f", &[0, 0, STALE_BYTE])]));
    }

    #[test]
    fn one_byte_sectors_tear_a_write_at_any_byte() {
        let mut disk = Disk::with_model(1, FsModel::Ext4);
        disk.create("f").unwrap();
        disk.fsync_dir().unwrap();
        disk.write("f", 0, b"abc").unwrap();
        // Three 1-byte pieces (lost, kept), then the size: every prefix and every subset.
        let want: [&[u8]; 16] = [
            b"", b"a", b"\0b", b"ab", b"\0\0c", b"a\0c", b"\0bc", b"abc", b"\0\0\0", b"a\0\0",
            b"\0b\0", b"ab\0", b"\0\0c", b"a\0c", b"\0bc", b"abc",
        ];
        let got = states(&disk);
        assert_eq!(got.len(), want.len());
        for (index, (got, contents)) in got.iter().zip(want).enumerate() {
            assert_eq!(*got, state(&[("f", contents)]), "state {index}");
        }
    }

    /// `old` durable, `new` appended, then an fsync that fails (an injected EIO).
    fn failed_fsync(model: FsModel) -> (Disk, Result<(), DiskError>) {
        let mut disk = Disk::with_model(512, model);
        disk.create("f").unwrap();
        disk.append("f", b"old").unwrap();
        disk.fsync("f").unwrap();
        disk.fsync_dir().unwrap();
        disk.append("f", b"new").unwrap();
        disk.inject_error();
        let failed = disk.fsync("f");
        (disk, failed)
    }

    #[test]
    fn a_failed_fsync_keeps_pages_on_ext4_and_xfs_and_turns_btrfs_read_only() {
        let eio = Err(DiskError::Io {
            op: "fsync",
            name: "f".to_string(),
        });
        let erofs = Err(DiskError::ReadOnly {
            op: "fsync",
            name: "f".to_string(),
        });
        let cases: [FailedFsync; 4] = [
            // posix and xfs: the new size kept (state 0, as ext4), or back at 3 bytes.
            (FsModel::Posix, b"oldnew", Ok(()), &[b"old\0\0\0", b"old"]),
            (FsModel::Ext4, b"oldnew", Ok(()), &[b"old\0\0\0"]),
            (FsModel::Xfs, b"oldnew", Ok(()), &[b"old\0\0\0", b"old"]),
            // btrfs: the new bytes stay readable, the second fsync is refused, and the one
            // crash state is the file as it was before the fsync.
            (FsModel::Btrfs, b"oldnew", erofs.clone(), &[b"old"]),
        ];
        for (model, read, second, crashed) in cases {
            let (mut disk, failed) = failed_fsync(model);
            assert_eq!(failed, eio, "{model}");
            assert_eq!(disk.is_read_only(), model == FsModel::Btrfs, "{model}");
            assert_eq!(disk.read("f").unwrap(), read, "{model}");
            assert_eq!(disk.fsync("f"), second, "{model}");
            disk.evict_clean_pages();
            let after_eviction: &[u8] = match model {
                FsModel::Btrfs => b"oldnew",
                _ => b"old\0\0\0",
            };
            assert_eq!(disk.read("f").unwrap(), after_eviction, "{model}");
            let want: Vec<State> = crashed.iter().map(|c| state(&[("f", c)])).collect();
            assert_eq!(states(&disk), want, "{model}");
        }
        let (mut disk, _) = failed_fsync(FsModel::Xfs);
        assert_eq!(
            disk.power_loss(1).to_string(),
            "state 1/2: f: failed fsync's size lost, 3 unpersisted bytes lost"
        );
    }

    #[test]
    fn a_read_only_btrfs_refuses_every_change_until_it_is_mounted_again() {
        let (mut disk, _) = failed_fsync(FsModel::Btrfs);
        // Set up before the failure: a durable `d`, a created `g` no fsync covered.
        let refused = |op: &'static str, name: &str| {
            Err(DiskError::ReadOnly {
                op,
                name: name.to_string(),
            })
        };
        assert_eq!(disk.create("g"), refused("create", "g"));
        assert_eq!(disk.open_or_create("f"), refused("open", "f"));
        assert_eq!(disk.append("f", b"x"), refused("write", "f"));
        assert_eq!(disk.truncate("f", 0), refused("truncate", "f"));
        assert_eq!(disk.rename("f", "h"), refused("rename", "f"));
        assert_eq!(disk.remove("f"), refused("remove", "f"));
        assert_eq!(disk.fsync_dir(), refused("fsync-dir", "."));
        // An injected error it did not consume stays armed: the refusal came first.
        disk.inject_error();
        assert_eq!(disk.fsync("f"), refused("fsync", "f"));
        assert!(disk.clear_injected_error());
        assert_eq!(disk.list(), ["f"]);
        assert_eq!(disk.read("f").unwrap(), b"oldnew");
        assert_eq!(disk.power_loss_states().count(), Some(1));
        let outcome = disk.remount();
        assert_eq!(
            outcome.to_string(),
            "state 0/1: f: 0/1 writes kept, size lost"
        );
        assert!(!disk.is_read_only());
        assert_eq!(disk.read("f").unwrap(), b"old");
        disk.append("f", b"again").unwrap();
        assert_eq!(disk.fsync("f"), Ok(()));
        assert_eq!(states(&disk), [state(&[("f", b"oldagain")])]);
        // A name created before the failure and logged by no fsync is gone after the
        // remount; one an fsync logged survives it.
        let mut disk = Disk::with_model(512, FsModel::Btrfs);
        disk.create("logged").unwrap();
        disk.fsync("logged").unwrap();
        disk.create("unlogged").unwrap();
        disk.append("unlogged", b"u").unwrap();
        disk.inject_error();
        assert!(disk.fsync("unlogged").is_err());
        disk.remount();
        assert_eq!(disk.list(), ["logged"]);
    }

    #[test]
    fn a_completed_write_settles_a_failed_fsyncs_size_on_xfs() {
        // A write below the size the disk may hold leaves the doubt; one past it settles it.
        let (mut disk, _) = failed_fsync(FsModel::Xfs);
        disk.write("f", 0, b"O").unwrap();
        disk.fsync("f").unwrap();
        assert_eq!(
            states(&disk),
            [state(&[("f", b"Old\0\0\0")]), state(&[("f", b"Old")])]
        );
        disk.append("f", b"!").unwrap();
        disk.fsync("f").unwrap();
        assert_eq!(states(&disk), [state(&[("f", b"Old\0\0\0!")])]);
        // A truncate sets it; an eviction or a second failed fsync leave it open.
        let (mut disk, _) = failed_fsync(FsModel::Xfs);
        disk.evict_clean_pages();
        disk.append("f", b"x").unwrap();
        disk.inject_error();
        assert!(disk.fsync("f").is_err());
        assert_eq!(
            states(&disk),
            [state(&[("f", b"old\0\0\0\0")]), state(&[("f", b"old")])]
        );
        disk.truncate("f", 5).unwrap();
        disk.fsync("f").unwrap();
        assert_eq!(states(&disk), [state(&[("f", b"old\0\0")])]);
    }

    #[test]
    fn a_seeded_state_draws_the_same_pieces_on_every_profile() {
        let outcome = |model: FsModel| {
            let mut disk = Disk::with_model(4, model);
            disk.create("f").unwrap();
            disk.fsync_dir().unwrap();
            disk.append("f", &[7; 40]).unwrap();
            let states = disk.power_loss_states();
            assert!(!states.is_enumerable(super::super::POWER_LOSS_ENUMERATION_BOUND));
            disk.power_loss(99_999)
        };
        let posix = outcome(FsModel::Posix);
        for model in [FsModel::Ext4, FsModel::Xfs, FsModel::Btrfs] {
            let other = outcome(model);
            assert_eq!(other.files[0].pieces, posix.files[0].pieces, "{model}");
            assert_eq!(other.files[0].size, posix.files[0].size, "{model}");
        }
    }

    #[test]
    fn posix_has_every_crash_state_rule_of_the_others_but_stale_bytes() {
        for model in FsModel::ALL {
            assert!(!model.fsync_logs_names() || FsModel::Posix.fsync_logs_names());
        }
        assert!(FsModel::Xfs.stale_data());
        assert!(!FsModel::Posix.stale_data());
        assert!(!FsModel::Posix.fsync_commits_journal());
        assert!(!FsModel::Posix.read_only_on_fsync_error());
    }
}
