//! `keel teach`: every table of the chapter, computed live, in both languages, and pictures.

use clap::Parser;
use keel_scenarios::cli::{execute, Cli};
use std::path::PathBuf;

fn keel(args: &[&str]) -> String {
    let mut argv = vec!["keel"];
    argv.extend_from_slice(args);
    execute(&Cli::try_parse_from(&argv).expect("valid command line"))
        .expect("keel succeeds")
        .stdout
}

fn snapshot(name: &str, args: &[&str]) -> String {
    let out = keel(args);
    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, description => format!("keel {}", args.join(" "))}, {
        insta::assert_snapshot!(name.to_string(), out.clone());
    });
    out
}

/// The cells of the table line that starts with `label`.
fn cells(out: &str, label: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no line {label:?} in\n{out}"));
    line[label.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_chapter_table_comes_out_exactly_in_english_and_chinese() {
    let en = snapshot("teach_en", &["teach"]);
    assert_eq!(
        cells(&en, "non-idempotent sink"),
        ["1", "4", "5", "4", "1 (key `13:10`)"]
    );
    assert_eq!(
        cells(&en, "idempotent sink"),
        ["1", "3 (skipped 1)", "4", "4", "0"]
    );
    let zh = snapshot("teach_zh", &["teach", "--lang", "zh"]);
    assert_eq!(
        cells(&zh, "非幂等 sink"),
        ["1", "4", "5", "4", "1 (键 `13:10`)"]
    );
    assert_eq!(cells(&zh, "幂等 sink"), ["1", "3 (跳过 1)", "4", "4", "0"]);
    assert!(zh.contains("崩溃时 sink 已写 = 0"));
    assert!(zh.contains("崩溃时快照进度：index=8 max_ts=9 windows={\"10\": 40}"));
    assert!(zh.contains("=> 一致：快照 + 重放没有算错最终结果"));
}

#[test]
fn exercises_sweep_and_timeout_tables() {
    let en = keel(&["teach"]);
    assert_eq!(
        cells(&en, "checkpoint every 8"),
        ["append", "index=8", "8", "4", "1"]
    );
    assert_eq!(
        cells(&en, "checkpoint every 3"),
        ["append", "index=15", "15", "4", "0"]
    );
    assert_eq!(
        cells(&en, "key (processing time, window end)"),
        ["idempotent", "index=8", "8", "5", "1"]
    );
    assert_eq!(
        cells(&en, "transactional  read_committed"),
        ["71", "0", "0", "0", "2000"]
    );
    assert_eq!(
        cells(&en, "transactional  read_uncommitted"),
        ["71", "18", "0", "32", "0"]
    );
    // Timeout shorter than the restart delay: losses; a long timeout: none.
    assert_eq!(cells(&en, "5000 ms"), ["6", "6", "6", "0", "0"]);
    assert_eq!(cells(&en, "500 ms"), ["9", "0", "0", "0", "0"]);
    let md = snapshot("teach_en_markdown", &["teach", "--format", "markdown"]);
    assert!(
        md.contains("| non-idempotent sink | 1 | 4 | 5 | 4 | 1 (key `13:10`) |"),
        "{md}"
    );
    snapshot(
        "teach_zh_markdown",
        &["teach", "--lang", "zh", "--format", "markdown"],
    );
}

#[test]
fn pictures_are_written_as_svg() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("teach-svg");
    let _ = std::fs::remove_dir_all(&dir);
    let out = keel(&["teach", "--svg", dir.to_str().unwrap()]);
    for name in [
        "crash-points-append.svg",
        "crash-points-idempotent.svg",
        "crash-points-transactional-read_committed.svg",
        "crash-points-transactional-read_uncommitted.svg",
        "transaction-timeout.svg",
    ] {
        let path = dir.join(name);
        assert!(out.contains(&format!("wrote {}", path.display())), "{out}");
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{name}");
        assert!(
            svg.contains("state-8.json") || name == "transaction-timeout.svg",
            "{name}: checkpoints marked"
        );
    }
    let heat = std::fs::read_to_string(dir.join("transaction-timeout.svg")).unwrap();
    assert!(
        heat.contains("60000") && heat.contains("10000"),
        "axes name the timeouts and delays"
    );
}
