//! Power-loss classes checked against every state: each class's weight is the number of
//! states whose reader sees what its representative's reader sees.

use super::*;
use crate::disk::FsModel;
use std::collections::BTreeMap;

/// What a reader sees of a disk after a power loss: every file whole, but a collapsed
/// line-read file only as the whole lines of its prefix that are the process's bytes
/// (`before` holds them) and, split by tail, whether bytes follow them (the reader's cut).
type ReaderView = BTreeMap<String, (Vec<u8>, bool)>;

fn reader_view(
    after: &Disk,
    before: &Disk,
    collapsed: &[String],
    readers: &CrashReaders,
) -> ReaderView {
    after
        .list()
        .into_iter()
        .map(|name| {
            let contents = after.read(&name).expect("listed");
            if readers.is_unread(&name) {
                return (name, (b"(unread)".to_vec(), false));
            }
            if !collapsed.contains(&name) {
                return (name, (contents, false));
            }
            let process = before.read(&name).expect("a collapsed file is named");
            let intact = contents
                .iter()
                .zip(&process)
                .take_while(|(a, b)| a == b)
                .count();
            let lines = contents[..intact]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |at| at + 1);
            let torn = readers.split_tails && contents.len() > lines;
            (name, (contents[..lines].to_vec(), torn))
        })
        .collect()
}

/// Checks the classes of `disk` with `line_files` against every one of its states: the
/// same states a view, class by class and state by state, and so again split by tail.
/// Returns the number of classes (not split).
fn check(disk: &Disk, line_files: &[&str]) -> u64 {
    check_with(disk, line_files, &[])
}

/// [`check`], with files whose names end with one of `unread_suffixes` never read: a
/// reader sees that they exist, not what they hold.
fn check_with(disk: &Disk, line_files: &[&str], unread_suffixes: &[&str]) -> u64 {
    let readers = CrashReaders {
        line_files: line_files.iter().map(|s| s.to_string()).collect(),
        unread_suffixes: unread_suffixes.iter().map(|s| s.to_string()).collect(),
        split_tails: false,
    };
    let split = check_readers(
        disk,
        &CrashReaders {
            split_tails: true,
            ..readers.clone()
        },
    );
    let count = check_readers(disk, &readers);
    assert!(split >= count, "a split class is one or two");
    // Split, a class is one or two (unread files are collapsed split or not, as the
    // caller removes one before it writes its name again); bounded where none is unread.
    if unread_suffixes.is_empty() {
        assert!(split <= 2 * count, "a split class is one or two");
    }
    count
}

/// [`check_with`] for one set of readers.
fn check_readers(disk: &Disk, readers: &CrashReaders) -> u64 {
    let readers = readers.clone();
    let classes = disk.power_loss_classes(&readers);
    let collapsed: Vec<String> = readers
        .line_files
        .iter()
        .filter(|name| classes.line_classes(name).is_some())
        .cloned()
        .collect();
    let states = disk.power_loss_states().count().expect("a small disk");
    assert!(states <= POWER_LOSS_ENUMERATION_BOUND, "{states} states");
    assert_eq!(*classes.states(), BigUint::from(states));

    let count = classes.count().expect("numbered");
    let mut by_classes: BTreeMap<ReaderView, u64> = BTreeMap::new();
    let mut class_views: Vec<ReaderView> = Vec::new();
    for class in 0..count {
        let mut after = disk.clone();
        let outcome = after
            .power_loss_class(&readers, class)
            .expect("a numbered class");
        let weight = u64::try_from(classes.class_states(class)).expect("small");
        let noted = outcome.class.expect("a class outcome");
        assert_eq!(noted.states, BigUint::from(weight));
        assert_eq!(noted.classes, count);
        assert!(after.is_all_durable(), "booted");
        let view = reader_view(&after, disk, &collapsed, &readers);
        *by_classes.entry(view.clone()).or_default() += weight;
        class_views.push(view);
    }
    // Every state falls into a class whose representative its reader cannot tell from it,
    // and each class holds as many states as it counts.
    let mut by_states: BTreeMap<ReaderView, u64> = BTreeMap::new();
    let mut states_of_class = vec![0u64; class_views.len()];
    for state in 0..states {
        let mut after = disk.clone();
        after.power_loss(state);
        let view = reader_view(&after, disk, &collapsed, &readers);
        let class = classes
            .class_of_state(state)
            .expect("numbered states and classes");
        assert_eq!(
            view, class_views[class as usize],
            "state {state} in class {class}"
        );
        states_of_class[class as usize] += 1;
        *by_states.entry(view).or_default() += 1;
    }
    for (class, &states) in states_of_class.iter().enumerate() {
        assert_eq!(
            BigUint::from(states),
            classes.class_states(class as u64),
            "class {class}"
        );
    }
    assert_eq!(classes.class_of_state(states), None, "past the last state");
    assert_eq!(by_classes, by_states, "the same states a view");
    count
}

/// Readers of `name` as a line-read file, and of nothing else.
fn lines(name: &str) -> CrashReaders {
    CrashReaders {
        line_files: vec![name.to_string()],
        unread_suffixes: Vec::new(),
        split_tails: false,
    }
}

/// A line-read log with two durable lines and three appends across 8-byte sectors.
fn log_disk(model: FsModel) -> Disk {
    let mut disk = Disk::with_model(8, model);
    disk.create("log").unwrap();
    disk.append("log", b"x\n").unwrap();
    disk.fsync("log").unwrap();
    disk.fsync_dir().unwrap();
    disk.append("log", b"ab\n").unwrap();
    disk.append("log", b"cdefgh\n").unwrap();
    disk
}

#[test]
fn a_log_of_appends_has_a_class_for_each_line_its_reader_can_keep() {
    // Pieces [2,5) [5,8) [8,12), three fates each, and the size: 54 states. First piece
    // not kept: piece 0 (lost or torn) keeps "x\n", 2 x 9 x 2 = 36 states; piece 1 or 2
    // keeps "x\nab\n", 2 x 3 x 2 + 2 x 2 = 16; none keeps everything, 2.
    let disk = log_disk(FsModel::Posix);
    let classes = disk.power_loss_classes(&lines("log"));
    let kept: Vec<(u64, BigUint)> = classes.line_classes("log").expect("collapsed");
    let expected: Vec<(u64, BigUint)> = [(2, 36u32), (5, 16), (12, 2)]
        .into_iter()
        .map(|(len, states)| (len, BigUint::from(states)))
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(classes.count(), Some(3));
    assert_eq!(check(&disk, &["log"]), 3);

    // Split by tail: "x\n" ends where piece 0 starts, so piece 0 lost with nothing after
    // it (every later piece lost, the size not kept) is its one clean state; so is piece 1
    // lost for "x\nab\n"; every state that keeps everything is clean.
    let split = disk.power_loss_classes(&CrashReaders {
        split_tails: true,
        ..lines("log")
    });
    let parts: Vec<(u64, BigUint)> = [(2, 1u32), (2, 35), (5, 1), (5, 15), (12, 2)]
        .into_iter()
        .map(|(len, states)| (len, BigUint::from(states)))
        .collect();
    assert_eq!(split.line_classes("log").expect("collapsed"), parts);
    assert_eq!(split.count(), Some(5));
    assert_eq!(
        split.boots_into(0),
        None,
        "split classes boot into no shared disk"
    );
}

#[test]
fn every_profile_s_classes_hold_its_states_with_other_files_and_the_directory() {
    for model in [FsModel::Posix, FsModel::Ext4, FsModel::Xfs, FsModel::Btrfs] {
        let mut disk = log_disk(model);
        // Another file written and renamed, not synced, and a log line of one byte pieces.
        disk.create("tmp").unwrap();
        disk.append("tmp", b"state").unwrap();
        disk.rename("tmp", "ck").unwrap();
        disk.append("log", b"i\n").unwrap();
        let classes = check(&disk, &["log"]);
        let states = disk.power_loss_states().count().unwrap();
        assert!(
            classes < states / 10,
            "{model}: {classes} classes of {states}"
        );
        // Naming no line-read file, or one with no pending append, changes nothing.
        assert_eq!(check(&disk, &[]), states, "{model}");
        assert_eq!(check(&disk, &["ck", "missing"]), states, "{model}");
    }
}

#[test]
fn a_line_file_whose_name_is_at_risk_is_not_collapsed() {
    // Created since the last directory sync: its name may be lost with it.
    let mut created = Disk::with_model(8, FsModel::Posix);
    created.create("log").unwrap();
    created.append("log", b"one\ntwo\nthree\n").unwrap();
    assert_eq!(
        check(&created, &["log"]),
        created.power_loss_states().count().unwrap()
    );
    // Renamed since: after a power loss its data may be under the old name, whose reader
    // reads it whole.
    let mut renamed = Disk::with_model(8, FsModel::Posix);
    renamed.create("tmp").unwrap();
    renamed.fsync_dir().unwrap();
    renamed.append("tmp", b"one\ntwo\n").unwrap();
    renamed.rename("tmp", "log").unwrap();
    assert_eq!(
        check(&renamed, &["log"]),
        renamed.power_loss_states().count().unwrap()
    );
    // Its directory synced: collapsed, the lines kept being none, "one", "one\ntwo", all.
    created.fsync_dir().unwrap();
    assert_eq!(check(&created, &["log"]), 4);
}

#[test]
fn a_file_rewritten_truncated_or_failed_is_not_collapsed() {
    let collapsed = |disk: &Disk| {
        disk.power_loss_classes(&lines("log"))
            .line_classes("log")
            .is_some()
    };
    assert!(collapsed(&log_disk(FsModel::Posix)));
    let mut overwritten = log_disk(FsModel::Posix);
    overwritten.write("log", 0, b"y").unwrap();
    assert!(!collapsed(&overwritten));
    check(&overwritten, &["log"]);
    let mut truncated = log_disk(FsModel::Posix);
    truncated.truncate("log", 4).unwrap();
    assert!(!collapsed(&truncated));
    check(&truncated, &["log"]);
    let mut failed = log_disk(FsModel::Ext4);
    failed.fsync_fail("log").unwrap();
    failed.append("log", b"z\n").unwrap();
    assert!(!collapsed(&failed));
    check(&failed, &["log"]);
    // btrfs after a failed fsync is read-only: one state, one class.
    let mut read_only = log_disk(FsModel::Btrfs);
    read_only.fsync_fail("log").unwrap();
    assert_eq!(check(&read_only, &["log"]), 1);
}

#[test]
fn a_sink_sized_log_counts_past_two_to_the_64_and_numbers_its_classes() {
    // 2,000 lines of 60 bytes appended since the last fsync, on 512-byte sectors: more
    // states than a u64 counts.
    let mut disk = Disk::new();
    disk.create("log").unwrap();
    disk.fsync_dir().unwrap();
    let line = [b'r'; 59];
    for _ in 0..2_000 {
        disk.append("log", &[&line[..], b"\n"].concat()).unwrap();
    }
    assert_eq!(disk.power_loss_states().count(), None);
    let classes = disk.power_loss_classes(&lines("log"));
    // Every line is a class (lost at its first byte or torn inside it), and none kept.
    assert_eq!(classes.count(), Some(2_001));
    // The rule of the module header, worked out on its own: each append cut at the sector
    // boundaries, three fates a piece of two bytes or more, two for one byte; and the size.
    let mut expected = BigUint::from(2u32);
    for line in 0..2_000u64 {
        let (start, end) = (line * 60, line * 60 + 60);
        let mut at = start;
        while at < end {
            let piece_end = end.min((at / 512 + 1) * 512);
            expected *= if piece_end - at == 1 { 2u32 } else { 3u32 };
            at = piece_end;
        }
    }
    assert_eq!(*classes.states(), expected);
    let total: BigUint = (0..2_001).map(|class| classes.class_states(class)).sum();
    assert_eq!(total, expected);
    // The last class keeps everything: the states with every piece kept (the size either way).
    assert_eq!(classes.class_states(2_000), BigUint::from(2u32));
    let mut after = disk.clone();
    after.power_loss_class(&lines("log"), 1_000).unwrap();
    assert!(after.power_loss_class(&lines("log"), 2_001).is_none());
    assert_eq!(after.read("log").unwrap().len(), 1_000 * 60);
}

#[test]
fn an_unread_temporary_file_is_one_class_unless_a_rename_may_put_it_under_a_read_name() {
    for model in [FsModel::Posix, FsModel::Ext4, FsModel::Xfs, FsModel::Btrfs] {
        // A checkpoint written to a temporary file, not yet synced: its bytes are one class,
        // its name (created since the last directory sync) still at risk.
        let mut disk = log_disk(model);
        disk.create("ck.tmp").unwrap();
        disk.append("ck.tmp", b"state 1 of 2 in 20 bytes").unwrap();
        let states = disk.power_loss_states().count().unwrap();
        let classes = check_with(&disk, &["log"], &[".tmp"]);
        let readers = CrashReaders {
            line_files: vec!["log".to_string()],
            unread_suffixes: vec![".tmp".to_string()],
            split_tails: false,
        };
        assert_eq!(disk.power_loss_classes(&readers).unread_collapsed(), 1);
        // The log's 3 classes, the directory's 2 outcomes (create kept or not).
        assert_eq!(classes, 3 * 2, "{model}: {classes} classes of {states}");
        // Synced and renamed into place, rename not synced: the bytes may be read under
        // the new name, so they are not collapsed.
        disk.fsync("ck.tmp").unwrap();
        disk.append("ck.tmp", b" more").unwrap();
        disk.rename("ck.tmp", "ck").unwrap();
        assert_eq!(
            disk.power_loss_classes(&readers).unread_collapsed(),
            0,
            "{model}"
        );
        check_with(&disk, &["log"], &[".tmp"]);
    }
}
