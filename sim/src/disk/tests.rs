//! Tests of the simulated disk (`disk.rs`).

use super::*;

/// Disks the process sees alike are `same_view_as` each other whatever is durable;
/// a byte, a name, a read-only file system or an unpersisted byte tells them apart.
#[test]
fn disks_are_the_same_view_by_names_and_bytes_not_by_durability() {
    let synced = |disk: &mut Disk| {
        disk.create("a").unwrap();
        disk.append("a", b"one").unwrap();
        disk.fsync("a").unwrap();
        disk.fsync_dir().unwrap();
    };
    let mut base = Disk::with_model(4, FsModel::Posix);
    synced(&mut base);
    // The same names and bytes, nothing durable yet.
    let mut pending = Disk::with_model(4, FsModel::Posix);
    pending.create("a").unwrap();
    pending.append("a", b"one").unwrap();
    assert_ne!(base, pending);
    assert!(base.same_view_as(&pending));
    assert!(pending.same_view_as(&base));
    // Reached another way: written in two pieces, a file created and removed between.
    let mut other_way = Disk::with_model(4, FsModel::Posix);
    other_way.create("tmp").unwrap();
    other_way.create("a").unwrap();
    other_way.append("a", b"on").unwrap();
    other_way.remove("tmp").unwrap();
    other_way.append("a", b"e").unwrap();
    assert!(base.same_view_as(&other_way));
    let mut byte = base.clone();
    byte.write("a", 0, b"O").unwrap();
    assert!(!base.same_view_as(&byte));
    let mut name = base.clone();
    name.rename("a", "b").unwrap();
    assert!(!base.same_view_as(&name));
    let mut extra = base.clone();
    extra.create("c").unwrap();
    assert!(!base.same_view_as(&extra));
    assert!(!extra.same_view_as(&base));
    // A failed fsync leaves bytes the disk does not hold: never the same view.
    let mut failed = Disk::with_model(4, FsModel::Posix);
    failed.create("a").unwrap();
    failed.append("a", b"one").unwrap();
    failed.fsync_dir().unwrap();
    failed.fsync_fail("a").unwrap();
    assert_eq!(failed.read("a").unwrap(), b"one");
    assert!(!failed.same_view_as(&base));
    assert!(!failed.same_view_as(&failed.clone()));
    // btrfs turns read-only at a failed fsync.
    let mut read_only = Disk::with_model(4, FsModel::Btrfs);
    synced(&mut read_only);
    let mut btrfs = read_only.clone();
    read_only.create("x").unwrap();
    read_only.fsync_fail("x").unwrap();
    btrfs.create("x").unwrap();
    assert!(!read_only.same_view_as(&btrfs));
}

/// Every disk `states` builds, on every file-system profile: `with_file_emptied("s")`
/// equals a copy truncated to 0 and synced, errors included. Returns the disks checked.
fn check(states: &[fn(&mut Disk)]) -> u64 {
    let mut checked = 0;
    for model in FsModel::ALL {
        for build in states {
            let mut disk = Disk::with_model(4, model);
            build(&mut disk);
            let mut replayed = disk.clone();
            let replayed = replayed
                .truncate("s", 0)
                .and_then(|()| replayed.fsync("s"))
                .map(|()| replayed);
            assert_eq!(disk.with_file_emptied("s"), replayed, "{model:?}");
            checked += 1;
        }
    }
    checked
}

#[test]
fn a_file_emptied_on_a_copy_is_the_file_truncated_and_synced() {
    let states: [fn(&mut Disk); 6] = [
        // Appends synced and pending, a pending rename beside.
        |disk| {
            disk.create("s").unwrap();
            disk.append("s", b"synced\n").unwrap();
            disk.fsync("s").unwrap();
            disk.append("s", b"pending\n").unwrap();
            disk.create("t").unwrap();
            disk.rename("t", "u").unwrap();
        },
        // A failed fsync left unpersisted bytes and a size in doubt.
        |disk| {
            disk.create("s").unwrap();
            disk.fsync_dir().unwrap();
            disk.append("s", b"0123456789").unwrap();
            disk.fsync_fail("s").unwrap();
            // btrfs is read-only now: the append fails, and so does the truncate.
            let appended = disk.append("s", b"ab");
            assert_eq!(
                appended.is_err(),
                disk.model
                    .read_only_on_fsync_error(disk.len_bytes("s").unwrap())
            );
        },
        // Nothing pending at all.
        |disk| {
            disk.create("s").unwrap();
            disk.fsync("s").unwrap();
            disk.fsync_dir().unwrap();
        },
        // An armed error: the truncate fails, on both.
        |disk| {
            disk.create("s").unwrap();
            disk.append("s", b"x").unwrap();
            disk.inject_error();
        },
        // No such file.
        |disk| disk.create("t").unwrap(),
        // A write in the middle and a truncate pending.
        |disk| {
            disk.create("s").unwrap();
            disk.append("s", b"abcdef").unwrap();
            disk.fsync("s").unwrap();
            disk.write("s", 2, b"ZZ").unwrap();
            disk.truncate("s", 3).unwrap();
        },
    ];
    assert_eq!(check(&states), 24);
}

/// `same_view_except(other, "s")` answers what comparing the two disks with "s"
/// emptied answers, for every two disks `states` build (where both can be emptied).
#[test]
fn a_view_compared_except_a_file_is_the_view_with_it_emptied() {
    let states: [fn(&mut Disk); 5] = [
        |disk| {
            disk.create("s").unwrap();
            disk.append("s", b"synced\n").unwrap();
            disk.fsync("s").unwrap();
            disk.create("t").unwrap();
        },
        // The same but for the bytes of "s".
        |disk| {
            disk.create("s").unwrap();
            disk.append("s", b"other bytes\n").unwrap();
            disk.create("t").unwrap();
        },
        // The same but for the bytes of "t".
        |disk| {
            disk.create("s").unwrap();
            disk.create("t").unwrap();
            disk.append("t", b"t").unwrap();
        },
        // Another name.
        |disk| {
            disk.create("s").unwrap();
            disk.create("u").unwrap();
        },
        // A failed fsync of "s" left unpersisted bytes: the same view as the first two
        // with "s" left out, never otherwise.
        |disk| {
            disk.create("s").unwrap();
            disk.create("t").unwrap();
            disk.append("s", b"lost").unwrap();
            disk.fsync_fail("s").unwrap();
        },
    ];
    let (mut same, mut compared) = (0, 0);
    for model in [FsModel::Posix, FsModel::Ext4] {
        let disks: Vec<Disk> = states
            .iter()
            .map(|build| {
                let mut disk = Disk::with_model(4, model);
                build(&mut disk);
                disk
            })
            .collect();
        for a in &disks {
            for b in &disks {
                let (Ok(a_emptied), Ok(b_emptied)) =
                    (a.with_file_emptied("s"), b.with_file_emptied("s"))
                else {
                    continue;
                };
                let except = a.same_view_except(b, "s");
                assert_eq!(except, a_emptied.same_view_as(&b_emptied), "{model:?}");
                same += u64::from(except);
                compared += 1;
            }
        }
    }
    // Each with itself, the first two with each other, and the last (its unpersisted
    // bytes are in "s", left out) with the first two and they with it.
    assert_eq!((same, compared), (2 * 11, 2 * 25));
}

#[test]
fn writes_appends_and_truncates_are_visible_at_once() {
    let mut disk = Disk::new();
    disk.create("a").unwrap();
    disk.append("a", b"hello").unwrap();
    disk.append("a", b" world").unwrap();
    disk.write("a", 0, b"J").unwrap();
    assert_eq!(disk.read("a").unwrap(), b"Jello world");
    disk.truncate("a", 5).unwrap();
    assert_eq!(disk.read("a").unwrap(), b"Jello");
    disk.write("a", 7, b"!").unwrap();
    assert_eq!(disk.read("a").unwrap(), b"Jello\0\0!");
}

#[test]
fn fsync_makes_data_durable_and_fsync_dir_makes_names_durable() {
    let mut disk = Disk::new();
    disk.create("tmp").unwrap();
    disk.append("tmp", b"state").unwrap();
    assert!(!disk.is_all_durable());
    disk.fsync("tmp").unwrap();
    assert!(!disk.is_all_durable(), "the name is not durable yet");
    disk.rename("tmp", "state").unwrap();
    disk.fsync_dir().unwrap();
    assert!(disk.is_all_durable());
    assert_eq!(disk.list(), vec!["state".to_string()]);
    assert_eq!(disk.read("state").unwrap(), b"state");
}

#[test]
fn missing_files_are_errors_not_panics() {
    let mut disk = Disk::new();
    assert_eq!(
        disk.read("nope"),
        Err(DiskError::NotFound {
            name: "nope".to_string()
        })
    );
    assert!(disk.rename("nope", "x").is_err());
    assert!(disk.remove("nope").is_err());
    assert!(disk.fsync("nope").is_err());
}

#[test]
fn create_truncates_an_existing_file_and_open_or_create_does_not() {
    let mut disk = Disk::new();
    disk.create("f").unwrap();
    disk.append("f", b"abc").unwrap();
    disk.open_or_create("f").unwrap();
    assert_eq!(disk.read("f").unwrap(), b"abc");
    disk.create("f").unwrap();
    assert_eq!(disk.read("f").unwrap(), b"");
}

#[test]
fn removed_files_are_collected_once_durably_gone() {
    let mut disk = Disk::new();
    disk.create("f").unwrap();
    disk.fsync_dir().unwrap();
    disk.remove("f").unwrap();
    assert_eq!(disk.inodes.len(), 1, "the durable name still reaches it");
    disk.fsync_dir().unwrap();
    assert!(disk.inodes.is_empty());
}

/// Disks alike through a power loss have the same files in the same order, durable and
/// pending alike, whatever their inode numbers: every crash state of one is the other's,
/// state for state. A byte only the durable disk holds, a pending rename, or two files in
/// the other order tell them apart.
#[test]
fn disks_alike_through_power_loss_match_files_by_rank_not_by_number() {
    // "ckpt" durable; "sink" written past its last fsync; a rename pending.
    let build = |extra_files: usize| {
        let mut disk = Disk::with_model(4, FsModel::Posix);
        for i in 0..extra_files {
            let name = format!("tmp-{i}");
            disk.create(&name).unwrap();
            disk.remove(&name).unwrap();
        }
        disk.create("ckpt").unwrap();
        disk.append("ckpt", b"state-1").unwrap();
        disk.fsync("ckpt").unwrap();
        disk.create("sink").unwrap();
        disk.append("sink", b"line-1\n").unwrap();
        disk.fsync("sink").unwrap();
        disk.fsync_dir().unwrap();
        disk.append("sink", b"line-2\n").unwrap();
        disk.create("ckpt.tmp").unwrap();
        disk.append("ckpt.tmp", b"state-2").unwrap();
        disk.rename("ckpt.tmp", "ckpt").unwrap();
        disk
    };
    let (plain, renumbered) = (build(0), build(3));
    assert_ne!(plain, renumbered, "other inode numbers");
    assert!(plain.alike_through_power_loss(&renumbered));
    assert!(renumbered.alike_through_power_loss(&plain));
    assert!(plain.alike_through_power_loss(&plain.clone()));
    // State for state, the same disks after the power loss.
    let states = plain.power_loss_states().count().unwrap();
    assert_eq!(renumbered.power_loss_states().count(), Some(states));
    assert!(states > 1);
    for state in 0..states {
        let (mut a, mut b) = (plain.clone(), renumbered.clone());
        a.power_loss(state);
        b.power_loss(state);
        assert!(a.alike_through_power_loss(&b), "state {state}");
        for name in a.list() {
            assert_eq!(
                a.read(&name).unwrap(),
                b.read(&name).unwrap(),
                "{state} {name}"
            );
        }
        assert_eq!(a.list(), b.list(), "state {state}");
    }
    // The same view, but what is durable differs: "sink" synced once more.
    let mut synced = plain.clone();
    synced.fsync("sink").unwrap();
    assert!(synced.same_view_as(&plain));
    assert!(!synced.alike_through_power_loss(&plain));
    // The rename made durable.
    let mut dir_synced = plain.clone();
    dir_synced.fsync_dir().unwrap();
    assert!(!dir_synced.alike_through_power_loss(&plain));
    // A byte.
    let mut byte = renumbered.clone();
    byte.write("sink", 0, b"L").unwrap();
    assert!(!byte.alike_through_power_loss(&plain));
    // The same names and bytes, the files made in the other order: "sink" before "ckpt".
    let mut swapped = Disk::with_model(4, FsModel::Posix);
    swapped.create("sink").unwrap();
    swapped.append("sink", b"line-1\n").unwrap();
    swapped.fsync("sink").unwrap();
    swapped.create("ckpt").unwrap();
    swapped.append("ckpt", b"state-1").unwrap();
    swapped.fsync("ckpt").unwrap();
    swapped.fsync_dir().unwrap();
    swapped.append("sink", b"line-2\n").unwrap();
    swapped.create("ckpt.tmp").unwrap();
    swapped.append("ckpt.tmp", b"state-2").unwrap();
    swapped.rename("ckpt.tmp", "ckpt").unwrap();
    assert!(swapped.same_view_as(&plain));
    assert!(!swapped.alike_through_power_loss(&plain));
    // Another profile.
    let mut btrfs = Disk::with_model(4, FsModel::Btrfs);
    btrfs.create("x").unwrap();
    let mut posix = Disk::with_model(4, FsModel::Posix);
    posix.create("x").unwrap();
    assert!(!btrfs.alike_through_power_loss(&posix));
}

/// A file's running digest is the FNV-1a 64 of its bytes while it is created and written
/// at its end (however the writes are cut and held); it goes with the file through a
/// rename, starts again at a creation over it, folds in what a power loss changed, and is
/// no part of the disk's value.
#[test]
fn a_files_running_digest_follows_what_was_written_into_it() {
    use crate::digest::FileDigest;
    let mut disk = Disk::new();
    disk.create("f").unwrap();
    disk.append("f", b"foo").unwrap();
    disk.write("f", 3, b"ba").unwrap();
    disk.append("f", b"r").unwrap();
    assert_eq!(disk.digest("f").unwrap(), FileDigest::of(b"foobar"));
    disk.write_back("f", 6).unwrap();
    assert_eq!(disk.digest("f").unwrap(), FileDigest::of(b"foobar"));
    let mut shared = Disk::new();
    shared.create("g").unwrap();
    let contents = Contents::from(vec![7u8; 3 * crate::CHUNK_BYTES + 5]);
    shared.write_shared("g", &contents).unwrap();
    assert_eq!(
        shared.digest("g").unwrap(),
        FileDigest::of(&contents.to_vec())
    );
    disk.rename("f", "g").unwrap();
    assert!(disk.digest("f").is_err());
    assert_eq!(disk.digest("g").unwrap(), FileDigest::of(b"foobar"));
    disk.create("g").unwrap();
    assert_eq!(disk.digest("g").unwrap(), FileDigest::empty());
    // The same bytes written another way: equal disks, other digests.
    let synced = |writes: &[(u64, &[u8])]| {
        let mut disk = Disk::new();
        disk.create("h").unwrap();
        for (offset, bytes) in writes {
            disk.write("h", *offset, bytes).unwrap();
        }
        disk.fsync("h").unwrap();
        disk.fsync_dir().unwrap();
        disk
    };
    let once = synced(&[(0, b"xy")]);
    let over = synced(&[(0, b"xz"), (1, b"y")]);
    assert_eq!(once, over);
    assert_ne!(once.digest("h").unwrap(), over.digest("h").unwrap());
    // A power loss that may cut an append: a change the process did not write, in every
    // state (the trace names the state, and the file's bytes follow from it).
    let mut at_risk = once.clone();
    at_risk.append("h", b"more").unwrap();
    let appended = at_risk.digest("h").unwrap();
    for state in 0..at_risk.power_loss_states().count().unwrap() {
        let mut lost = at_risk.clone();
        lost.power_loss(state);
        let mut expected = appended;
        expected.changed(lost.len_bytes("h").unwrap());
        assert_eq!(lost.digest("h").unwrap(), expected, "state {state}");
    }
    // Nothing at risk: the digest stays.
    let mut durable = once.clone();
    durable.power_loss(0);
    assert_eq!(durable.digest("h").unwrap(), once.digest("h").unwrap());
}

/// Contents made whole from bytes keep their FNV-1a 64 once worked out, for their copies
/// too; a write forgets it, and the digest is always the bytes'.
#[test]
fn contents_know_their_bytes_digest_until_written() {
    use crate::digest::fnv1a64;
    let bytes: Vec<u8> = (0..3 * crate::CHUNK_BYTES + 7).map(|i| i as u8).collect();
    let made = Contents::from(bytes.clone());
    let copy = made.clone();
    assert_eq!(made.fnv(), fnv1a64(&bytes));
    assert_eq!(copy.fnv(), fnv1a64(&bytes));
    let mut written = copy.clone();
    written.write_at(5, b"xyz");
    let mut expected = bytes.clone();
    expected[5..8].copy_from_slice(b"xyz");
    assert_eq!(written.fnv(), fnv1a64(&expected));
    assert_eq!(copy.fnv(), fnv1a64(&bytes));
    let mut grown = made.clone();
    grown.resize(bytes.len() + 1);
    expected = bytes.clone();
    expected.push(0);
    assert_eq!(grown.fnv(), fnv1a64(&expected));
    assert_eq!(made.prefix(10).fnv(), fnv1a64(&bytes[..10]));
    let mut over = Contents::from(&b"short"[..]);
    over.write_over(&made);
    assert_eq!(over.fnv(), fnv1a64(&bytes));
    assert_eq!(Contents::default().fnv(), fnv1a64(b""));
}
