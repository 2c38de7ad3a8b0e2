//! `keel teach`: every table of the chapter, computed live, in both languages, and pictures;
//! on ch04 and on other streams, whose prose must agree with their own tables.

use clap::Parser;
use keel_scenarios::catalogue::{events_from_text, Scenario};
use keel_scenarios::cli::{execute, Cli};
use keel_scenarios::teach::{teach_spec, Knobs, FONT_FAMILIES};
use std::path::PathBuf;
use unicode_width::UnicodeWidthStr;

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
    assert!(en.contains("Window [10,20) has 2 records: 24:20 fires with 138, then a late event (25:20) updates it to 155."));
    assert!(en.contains("downstream over-counts 1 record (keys the sink saw twice). The idempotent sink replayed the record too, but recognised the key (skipped 1)."));
    let zh = snapshot("teach_zh", &["teach", "--lang", "zh"]);
    assert_eq!(
        cells(&zh, "非幂等 sink"),
        ["1", "4", "5", "4", "1 (键 `13:10`)"]
    );
    assert_eq!(cells(&zh, "幂等 sink"), ["1", "3 (跳过 1)", "4", "4", "0"]);
    assert!(zh.contains("崩溃时 sink 已写 = 0"));
    assert!(zh.contains("崩溃时快照进度：index=8 max_ts=9 windows={\"10\": 40}"));
    assert!(zh.contains("=> 一致：快照 + 重放没有算错最终结果"));
    assert!(zh.contains("窗口 [10,20) 出现了 2 条记录：先 24:20 触发时是 138，之后一条迟到事件到达（25:20）把它更新成 155。"));
    assert!(zh.contains("下游就多算 1 条（sink 重复见到的键）"));
}

#[test]
fn exercises_sweep_and_timeout_tables() {
    let en = keel(&["teach"]);
    // checkpoint at the crash, resume from, checkpoints without a crash, distinct keys,
    // keys the sink saw twice, records delivered more than once.
    assert_eq!(
        cells(&en, "checkpoint every 8"),
        ["append", "index=8", "8", "3", "4", "1", "1"]
    );
    assert_eq!(
        cells(&en, "checkpoint every 3"),
        ["append", "index=15", "15", "10", "4", "0", "0"]
    );
    assert_eq!(
        cells(&en, "key (processing time, window end)"),
        ["idempotent", "index=8", "8", "3", "5", "0", "1"]
    );
    assert!(en.contains("the checkpoint at index 15 is written before the crash after event 14, so the record 13:10 is never replayed and the duplicate disappears."));
    assert!(en.contains("(10 checkpoints without a crash instead of 3)"));
    assert!(en.contains("the idempotent sink sees 5 different keys (the run without a crash has 4 records) and keeps both copies: 1 record delivered more than once."));
    assert!(en.contains("the sink saw 0 keys twice, yet 1 record was delivered more than once."));
    assert_eq!(
        cells(&en, "transactional  read_committed"),
        ["71", "0", "0", "0", "2000"]
    );
    assert_eq!(
        cells(&en, "transactional  read_uncommitted"),
        ["71", "18", "0", "32", "0"]
    );
    assert!(en.contains("the append sink at 17 of its 59 crash points and the idempotent sink at 0 of its 59 crash points."));
    assert!(en.contains("at every one of its 71 crash points"));
    assert!(en.contains("here up to 2000 ms after it was sent. A read_uncommitted consumer sees the records of aborted transactions: 32 dirty reads over the 71 crash points."));
    // Timeout shorter than the restart delay: losses; a long timeout: none.
    assert_eq!(cells(&en, "5000 ms"), ["6", "6", "6", "0", "0"]);
    assert_eq!(cells(&en, "500 ms"), ["9", "0", "0", "0", "0"]);
    assert!(en.contains("Every cell of this table agrees with that rule."));
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

/// Every horizontal text of an SVG written by plotters, with its estimated extent: (x, width,
/// text). A CJK character counts two columns, a column 0.62 em, as teach itself estimates.
fn svg_texts(svg: &str) -> Vec<(f64, f64, String)> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[start..].split('"').next()?.to_string())
    };
    let mut texts = Vec::new();
    for chunk in svg.split("<text").skip(1) {
        let (tag, rest) = chunk.split_once('>').unwrap();
        let text = rest.split("</text>").next().unwrap().trim().to_string();
        if tag.contains("transform=") || text.is_empty() {
            continue; // rotated axis titles run along the height
        }
        let x: f64 = attr(tag, "x").unwrap().parse().unwrap();
        let size: f64 = attr(tag, "font-size").unwrap().parse().unwrap();
        let width = text.width() as f64 * 0.62 * size;
        let left = match attr(tag, "text-anchor").as_deref() {
            Some("middle") => x - width / 2.0,
            Some("end") => x - width,
            _ => x,
        };
        texts.push((left, width, text));
    }
    texts
}

#[test]
fn pictures_are_written_as_svg() {
    for lang in ["en", "zh"] {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("teach-svg-{lang}"));
        let _ = std::fs::remove_dir_all(&dir);
        let out = keel(&["teach", "--lang", lang, "--svg", dir.to_str().unwrap()]);
        assert!(
            !out.contains("wrote"),
            "status lines go to stderr, not into the report"
        );
        assert_eq!(out, keel(&["teach", "--lang", lang]));
        for name in [
            "crash-points-append.svg",
            "crash-points-idempotent.svg",
            "crash-points-transactional-read_committed.svg",
            "crash-points-transactional-read_uncommitted.svg",
            "transaction-timeout.svg",
        ] {
            let svg = std::fs::read_to_string(dir.join(name)).unwrap();
            assert!(svg.starts_with("<svg"), "{name}");
            let width: f64 = svg
                .split("width=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            // Every label lies inside the picture, and every text names the CJK-capable fonts.
            for (left, text_width, text) in svg_texts(&svg) {
                assert!(
                    left >= 0.0 && left + text_width <= width,
                    "{lang} {name}: {text:?} runs out of the picture ({left:.0}..{:.0} of {width})",
                    left + text_width
                );
            }
            assert_eq!(
                svg.matches("<text").count(),
                svg.matches(&format!("font-family=\"{FONT_FAMILIES}\""))
                    .count(),
                "{name}"
            );
            if name == "transaction-timeout.svg" {
                assert!(
                    svg.contains(">\n60000\n<") && svg.contains(">\n10000\n<"),
                    "axes name the timeouts and delays"
                );
                continue;
            }
            // The x axis marks what each step of the fault-free run does.
            let lanes: &[&str] = match (lang, name.contains("transactional")) {
                ("en", false) => &["checkpoint write", "fsync", "sink write"],
                ("en", true) => &["checkpoint write", "fsync", "sink write", "begin / commit"],
                (_, false) => &["写快照", "fsync", "写 sink"],
                (_, true) => &["写快照", "fsync", "写 sink", "开始 / 提交事务"],
            };
            for lane in lanes {
                assert!(
                    svg.contains(&format!(">\n{lane}\n<")),
                    "{lang} {name}: lane {lane}"
                );
            }
            for checkpoint in ["state-8.json", "state-16.json", "state-24.json"] {
                assert!(
                    svg.contains(&format!(">\n{checkpoint}\n<")),
                    "{name}: {checkpoint} marked"
                );
            }
        }
        // The cost of two-phase commit: how long each record of the fault-free run waits for
        // the commit that makes it visible (`keel sites --sink transactional`: 13:10 is sent
        // at 3900 ms and committed at 4500 ms, 24:20 and 25:20 at 7200 and 7500 ms and
        // committed at 8700 ms with flush:30), and the longest delay per crash point.
        let committed =
            std::fs::read_to_string(dir.join("crash-points-transactional-read_committed.svg"))
                .unwrap();
        for wait in ["600 ms", "1500 ms", "1200 ms", "0 ms"] {
            assert!(
                committed.contains(&format!(">\n{wait}\n<")),
                "{lang}: visibility wait {wait}"
            );
        }
        assert!(committed.contains(if lang == "en" {
            "longest visibility delay (ms)"
        } else {
            "最长可见延迟 (ms)"
        }));
        let uncommitted =
            std::fs::read_to_string(dir.join("crash-points-transactional-read_uncommitted.svg"))
                .unwrap();
        assert!(
            !uncommitted.contains(">\n600 ms\n<"),
            "read_uncommitted sees records at once"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Any stream: every figure of the prose comes from the lessons' own tables and runs.
// ---------------------------------------------------------------------------------------------

/// 20 events, none of ch04's: a window fires at event 3 and is updated late twice over the
/// stream; the crash falls after event 6, before the first checkpoint.
const SECOND_STREAM: [(i64, i64); 20] = [
    (0, 2),
    (3, 7),
    (1, 4),
    (16, 3),
    (12, 5),
    (14, 6),
    (4, 9),
    (18, 1),
    (21, 8),
    (19, 2),
    (25, 4),
    (23, 3),
    (27, 6),
    (15, 5),
    (29, 2),
    (31, 7),
    (36, 1),
    (33, 9),
    (28, 4),
    (38, 5),
];

/// 6 events in one window, in order: nothing fires before the end, nothing is replayed twice.
const QUIET_STREAM: [(i64, i64); 6] = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)];

/// Writes an events file into a temporary directory and returns its path.
fn events_file(name: &str, events: &[(i64, i64)]) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("teach-streams");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let text: String = events
        .iter()
        .map(|(ts, value)| format!("{{\"ts\": {ts}, \"value\": {value}}}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// One section of the Markdown lessons: its heading, its tables and code lines (what was
/// computed), and its prose (what explains it).
#[derive(Debug, Default)]
struct Section {
    heading: String,
    computed: Vec<String>,
    prose: Vec<String>,
}

fn sections(markdown: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if let Some(heading) = line.strip_prefix("## ") {
            sections.push(Section {
                heading: heading.to_string(),
                ..Section::default()
            });
        } else if let Some(section) = sections.last_mut() {
            if in_code || line.starts_with('|') {
                section.computed.push(line.to_string());
            } else if !line.trim().is_empty() {
                section.prose.push(line.to_string());
            }
        }
    }
    sections
}

/// The numbers in a text: runs of digits, with a decimal part ("2.6").
fn numbers(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.' && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()))
            {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else {
            i += 1;
        }
    }
    out
}

/// The cells of the Markdown table row whose first cell is `label`.
fn row(section: &Section, label: &str) -> Vec<String> {
    let prefix = format!("| {label} |");
    let line = section
        .computed
        .iter()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no row {label:?} in {section:#?}"));
    line.trim_matches('|')
        .split(" | ")
        .skip(label.split(" | ").count())
        .map(|c| c.trim().to_string())
        .collect()
}

/// The line of the section's computed lines that starts with `prefix`, without it.
fn computed<'a>(section: &'a Section, prefix: &str) -> &'a str {
    section
        .computed
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in {section:#?}"))
}

fn prose(section: &Section) -> String {
    section.prose.join("\n")
}

/// The leading integer of a cell: "2 (key `3:10`)" -> 2.
fn lead(cell: &str) -> u64 {
    cell.split(' ').next().unwrap().parse().unwrap()
}

/// The figures that the prose of each section may derive without showing them in a table:
/// window starts (end - W), records per window and how many other windows fire more than once
/// (section 1, counted from its sink lines), and the checkpoint interval in ms (section 6).
fn derived(sections: &[Section]) -> Vec<Vec<String>> {
    let spec = teach_spec(None, None);
    let mut per_window: Vec<(i64, u64)> = Vec::new();
    for line in &sections[0].computed {
        if let Some(json) = line.trim().strip_prefix('{') {
            let record: serde_json::Value = serde_json::from_str(&format!("{{{json}")).unwrap();
            let end = record["window_end"].as_i64().unwrap();
            match per_window.iter_mut().find(|(e, _)| *e == end) {
                Some((_, n)) => *n += 1,
                None => per_window.push((end, 1)),
            }
        }
    }
    let repeated = per_window.iter().filter(|(_, n)| *n > 1).count() as u64;
    let mut first: Vec<String> = per_window
        .iter()
        .flat_map(|(end, n)| [(end - spec.window).to_string(), n.to_string()])
        .collect();
    first.push(repeated.saturating_sub(1).to_string());
    let mut all = vec![first];
    all.extend((1..sections.len()).map(|_| Vec::new()));
    all[5].push((spec.checkpoint_every * spec.event_interval_ms).to_string());
    all
}

/// Every number in the prose of section N appears in the headings, tables or code lines of
/// sections 1..=N (a paragraph may name a figure an earlier section computed), or is one of
/// the figures `derived` names.
fn assert_prose_figures_are_computed(markdown: &str) {
    let sections = sections(markdown);
    assert_eq!(sections.len(), 7, "{markdown}");
    let derived = derived(&sections);
    let mut known: Vec<String> = Vec::new();
    for (i, section) in sections.iter().enumerate() {
        // The heading's own number ("3. ...") is not a figure.
        let heading = section.heading.split_once(". ").map_or("", |(_, h)| h);
        known.extend(numbers(heading));
        for line in &section.computed {
            known.extend(numbers(line));
        }
        for n in numbers(&prose(section)) {
            // "第 03 章": the chapter the Chinese refers to, not a figure.
            if n == "03" {
                continue;
            }
            assert!(
                known.contains(&n) || derived[i].contains(&n),
                "section {:?}: the prose names {n}, which no table, code line or run shows:\n{}",
                section.heading,
                prose(section)
            );
        }
    }
}

fn teach_events(path: &str, lang: &str) -> String {
    keel(&[
        "teach", "--events", path, "--lang", lang, "--format", "markdown",
    ])
}

#[test]
fn the_chapter_knobs_are_what_fitting_them_to_ch04_gives() {
    let spec = teach_spec(Some("ch04".to_string()), None);
    let events = Scenario::by_name("ch04").unwrap().events();
    assert_eq!(Knobs::fitted(&spec, &events).unwrap(), Knobs::CHAPTER);
    let events = events_from_text(
        "second",
        &std::fs::read_to_string(events_file("second.jsonl", &SECOND_STREAM)).unwrap(),
    )
    .unwrap();
    assert_eq!(
        Knobs::fitted(&spec, &events).unwrap(),
        Knobs {
            crash_after_event: 6,
            kill_at_ms: 2_600,
            dense_checkpoint_every: 3
        }
    );
}

#[test]
fn ch04_prose_figures_come_from_its_tables() {
    assert_prose_figures_are_computed(&keel(&["teach", "--format", "markdown"]));
    assert_prose_figures_are_computed(&keel(&["teach", "--format", "markdown", "--lang", "zh"]));
}

#[test]
fn a_second_stream_is_taught_with_its_own_figures_in_english() {
    let path = events_file("second.jsonl", &SECOND_STREAM);
    let md = teach_events(&path, "en");
    assert_prose_figures_are_computed(&md);
    for figure in ["138", "155"] {
        assert!(
            !numbers(&md).contains(&figure.to_string()),
            "{figure} in\n{md}"
        );
    }
    for text in ["13:10", "index 15", "index=15", "five", "[20,30)"] {
        assert!(!md.contains(text), "{text:?} in\n{md}");
    }
    let s = sections(&md);

    // 1. The first window with more than one record, record by record, from the sink lines.
    assert_eq!(
        s[0].computed[3].trim(),
        r#"{"key": "3:10", "window_end": 10, "sum": 13, "watermark": 11, "kind": "fire"}"#
    );
    assert_eq!(
        s[0].computed[4].trim(),
        r#"{"key": "6:10", "window_end": 10, "sum": 22, "watermark": 11, "kind": "late-update"}"#
    );
    assert!(prose(&s[0]).starts_with("Window [0,10) has 2 records: 3:10 fires with 13, then a late event (6:10) updates it to 22. One window can fire more than once. On this stream 2 other windows fire more than once."), "{}", prose(&s[0]));

    // 2. The kill: the checkpoint and the resume point of the code lines.
    assert_eq!(
        s[1].heading,
        "2. kill -9 after 2.6 s (a checkpoint every 8 events)"
    );
    let checkpoint = computed(&s[1], "checkpoint at the crash: index=");
    let index = checkpoint.split(' ').next().unwrap();
    let resume = computed(&s[1], "resume_from_index=")
        .split(' ')
        .next()
        .unwrap();
    assert_eq!((index, resume), ("8", "8"));
    assert!(prose(&s[1]).contains(&format!(
        "checkpoint at index={index}; the restart continued from it (resume_from_index={resume})"
    )));

    // 3. The chapter table and its sentence.
    assert_eq!(
        s[2].heading,
        "3. At-least-once vs exactly-once: crash after event 6"
    );
    let append = row(&s[2], "non-idempotent sink");
    let idempotent = row(&s[2], "idempotent sink");
    assert_eq!(append, ["2", "7", "9", "7", "2 (keys `3:10`, `6:10`)"]);
    assert_eq!(idempotent, ["2", "5 (skipped 2)", "7", "7", "0"]);
    let text = prose(&s[2]);
    assert!(
        text.contains(&format!(
            "over-counts {} records (keys the sink saw twice)",
            lead(&append[4])
        )),
        "{text}"
    );
    assert!(
        text.contains("replayed the records too, but recognised their keys (skipped 2)"),
        "{text}"
    );

    // 4. The exercises: both duplicate counts, the denser interval and what it costs.
    assert_eq!(s[3].heading, "4. Exercises (the same crash after event 6)");
    let every_8 = row(&s[3], "checkpoint every 8");
    let every_3 = row(&s[3], "checkpoint every 3");
    let processing_time = row(&s[3], "key (processing time, window end)");
    assert_eq!(every_8, ["append", "-", "0", "2", "7", "2", "2"]);
    assert_eq!(every_3, ["append", "index=6", "6", "6", "7", "1", "1"]);
    assert_eq!(
        processing_time,
        ["idempotent", "-", "0", "2", "9", "0", "2"]
    );
    let text = prose(&s[3]);
    let expected = [
        format!(
            "Every 3 instead of every 8: the checkpoint at index {} is written before the crash after event 6, so less is replayed: {} record delivered more than once instead of {}.",
            every_3[1].trim_start_matches("index="), every_3[6], every_8[6]
        ),
        format!("({} checkpoints without a crash instead of {})", every_3[3], every_8[3]),
        format!(
            "the replay emits 3:10 and 6:10 again at a later simulated time, under a new key each time; the idempotent sink sees {} different keys (the run without a crash has {} records) and keeps both copies: {} records delivered more than once.",
            processing_time[4],
            s[0].computed.iter().filter(|l| l.trim_start().starts_with('{')).count(),
            processing_time[6]
        ),
        format!(
            "they part: the sink saw {} keys twice, yet {} records were delivered more than once.",
            processing_time[5], processing_time[6]
        ),
    ];
    for sentence in expected {
        assert!(text.contains(&sentence), "{sentence:?} not in\n{text}");
    }

    // 5. Every crash point: each figure of the sentence is its row's.
    let append = row(&s[4], "append");
    let idempotent = row(&s[4], "idempotent");
    let committed = row(&s[4], "transactional | read_committed");
    let uncommitted = row(&s[4], "transactional | read_uncommitted");
    assert_eq!(append, ["-", "45", "29", "0", "0", "0"]);
    assert_eq!(committed, ["55", "0", "0", "0", "2000"]);
    let text = prose(&s[4]);
    for sentence in [
        format!(
            "the append sink at {} of its {} crash points",
            append[2], append[1]
        ),
        format!(
            "the idempotent sink at {} of its {} crash points",
            idempotent[2], idempotent[1]
        ),
        format!("at every one of its {} crash points", committed[0]),
        format!("here up to {} ms after it was sent", committed[4]),
        format!(
            "{} dirty reads over the {} crash points",
            uncommitted[3], uncommitted[0]
        ),
    ] {
        assert!(text.contains(&sentence), "{sentence:?} not in\n{text}");
    }

    // 6. The timeout table agrees with the rule it states, and says so.
    assert_eq!(row(&s[5], "2000 ms"), ["11", "8", "0", "0", "0"]);
    assert!(prose(&s[5]).contains("A checkpoint interval here is 2400 ms"));
    assert!(prose(&s[5]).ends_with("Every cell of this table agrees with that rule."));
}

#[test]
fn a_second_stream_is_taught_with_its_own_figures_in_chinese() {
    let path = events_file("second-zh.jsonl", &SECOND_STREAM);
    let md = teach_events(&path, "zh");
    assert_prose_figures_are_computed(&md);
    for figure in ["138", "155"] {
        assert!(
            !numbers(&md).contains(&figure.to_string()),
            "{figure} in\n{md}"
        );
    }
    for text in ["13:10", "index 15", "index=15", "[20,30)"] {
        assert!(!md.contains(text), "{text:?} in\n{md}");
    }
    let s = sections(&md);
    assert!(prose(&s[0]).starts_with("窗口 [0,10) 出现了 2 条记录：先 3:10 触发时是 13，之后一条迟到事件到达（6:10）把它更新成 22。"), "{}", prose(&s[0]));
    assert!(prose(&s[0]).ends_with("这条流上还有 2 个窗口也触发了多次。"));
    assert!(prose(&s[1])
        .starts_with("进程被杀，快照停在 index=8。重启从快照继续（resume_from_index=8）"));
    assert_eq!(
        s[2].heading,
        "3. 至少一次与恰好一次：处理到第 6 个事件后崩溃"
    );
    let append = row(&s[2], "非幂等 sink");
    assert_eq!(append, ["2", "7", "9", "7", "2 (键 `3:10`, `6:10`)"]);
    assert_eq!(row(&s[2], "幂等 sink"), ["2", "5 (跳过 2)", "7", "7", "0"]);
    assert!(prose(&s[2]).contains(&format!(
        "下游就多算 {} 条（sink 重复见到的键）",
        lead(&append[4])
    )));
    assert!(prose(&s[2]).contains("（skipped=2）"));
    let every_8 = row(&s[3], "每 8 个事件快照");
    let every_3 = row(&s[3], "每 3 个事件快照");
    let processing_time = row(&s[3], "键 (处理时间戳, 窗口结束)");
    let text = prose(&s[3]);
    for sentence in [
        format!(
            "把 --checkpoint-every 从 8 改成 3：崩溃前已经写下 {} 的快照，重放得更少：重复投递 {} 条，而不是 {} 条。",
            every_3[1], every_3[6], every_8[6]
        ),
        format!("无故障运行提交 {} 次快照，而不是 {} 次", every_3[3], every_8[3]),
        format!("幂等 sink 看到 {} 个不同的键（无故障运行只有 7 条记录）", processing_time[4]),
        format!(
            "sink 重复见到的键 {} 个，重复投递的记录却有 {} 条。",
            processing_time[5], processing_time[6]
        ),
    ] {
        assert!(text.contains(&sentence), "{sentence:?} not in\n{text}");
    }
    let committed = row(&s[4], "transactional | read_committed");
    let uncommitted = row(&s[4], "transactional | read_uncommitted");
    let text = prose(&s[4]);
    assert!(
        text.contains(&format!("在全部 {} 个崩溃点都是恰好一次", committed[0])),
        "{text}"
    );
    assert!(
        text.contains(&format!("这里最长要等 {} ms", committed[4])),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} 个崩溃点里共 {} 次脏读",
            uncommitted[0], uncommitted[3]
        )),
        "{text}"
    );
    assert!(prose(&s[5]).ends_with("这张表的每一格都符合这条规则。"));
}

#[test]
fn a_stream_without_a_refire_or_a_duplicate_says_so() {
    let path = events_file("quiet.jsonl", &QUIET_STREAM);
    for (lang, phrases) in [
        (
            "en",
            [
                "Every window has exactly one record here",
                "killed before its first checkpoint; the restart began again (resume_from_index=0)",
                "no key was written twice, and neither sink over-counts. The idempotent sink had nothing to skip (skipped 0).",
                "neither interval delivers a record more than once at this crash point",
                "the idempotent sink sees 1 different key (the run without a crash has 1 record) and no record is delivered more than once",
            ],
        ),
        (
            "zh",
            [
                "这里每个窗口只有一条记录",
                "进程在第一次快照之前被杀，重启只能从头来（resume_from_index=0）",
                "没有哪个键被写两遍，两种 sink 都没有多算。幂等 sink 也没有要跳过的（skipped=0）。",
                "这个崩溃点上两种间隔都没有重复投递",
                "幂等 sink 看到 1 个不同的键（无故障运行 1 条记录），没有重复投递",
            ],
        ),
    ] {
        let md = teach_events(&path, lang);
        assert_prose_figures_are_computed(&md);
        for phrase in phrases {
            assert!(md.contains(phrase), "{phrase:?} not in\n{md}");
        }
        let s = sections(&md);
        assert_eq!(row(&s[2], if lang == "en" { "non-idempotent sink" } else { "非幂等 sink" }), ["0", "1", "1", "1", "0"]);
        // The rule of the timeout table fails where no checkpoint ever pre-commits records:
        // the prose names that cell instead of claiming every cell agrees.
        assert_eq!(row(&s[5], "500 ms"), ["0", "0", "0", "0", "0"]);
        assert!(
            md.contains("restart delay 500 ms with timeout 1000 ms (0 crash points losing records)")
                || md.contains("重启 500 ms、超时 1000 ms（0 个崩溃点丢数）"),
            "{md}"
        );
    }
}

#[test]
fn teach_rejects_an_empty_events_file_and_a_scenario_with_events() {
    let path = events_file("empty.jsonl", &[]);
    let cli = Cli::try_parse_from(["keel", "teach", "--events", &path]).unwrap();
    let err = execute(&cli).unwrap_err();
    assert_eq!(err.to_string(), format!("no events in {path}"));
    assert!(Cli::try_parse_from(["keel", "teach", "ch04", "--events", &path]).is_err());
    // `--format table` is the same as `--format text`.
    assert_eq!(keel(&["teach", "--format", "table"]), keel(&["teach"]));
}

/// `keel teach <args>` as a process, stderr piped: exit code, stdout, stderr.
fn keel_piped(args: &[&str]) -> (Option<i32>, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .expect("keel runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn teach_takes_the_knobs_every_command_takes() {
    // The defaults are the chapter's, however given; the scenario by name or by option.
    let chapter = keel(&["teach"]);
    assert_eq!(
        keel(&[
            "teach",
            "--window",
            "10",
            "--out-of-orderness",
            "5",
            "--checkpoint-every",
            "8",
            "--scenario",
            "ch04",
            "--quiet",
        ]),
        chapter
    );
    assert_eq!(keel(&["teach", "ch04"]), chapter);
    // A knob changes the runs taught with: the kill section names the interval.
    let every_4 = keel(&[
        "teach",
        "--checkpoint-every",
        "4",
        "--allowed-lateness",
        "0",
    ]);
    assert!(
        every_4.contains("== 2. kill -9 after 2.6 s (a checkpoint every 4 events) =="),
        "{every_4}"
    );
    assert!(chapter.contains("== 2. kill -9 after 2.6 s (a checkpoint every 8 events) =="));
    // Options that would change nothing are refused, once, on stderr.
    for (option, value) in [("--seed", "3"), ("--key", "processing-time")] {
        let (code, out, err) = keel_piped(&["teach", option, value]);
        assert_eq!((code, out.as_str()), (Some(2), ""), "{option}");
        assert!(
            err.starts_with(&format!("error: {option} has no effect on `keel teach`")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn teach_shows_no_progress_when_stderr_is_not_a_terminal() {
    let path = events_file("progress.jsonl", &[(1, 2), (3, 4), (12, 5), (25, 1)]);
    let (code, out, err) = keel_piped(&["teach", "--events", &path]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(out, keel(&["teach", "--events", &path]));
}
