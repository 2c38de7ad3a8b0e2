//! The text of `keel teach`: its sections, tables and the prose around them, written from
//! the [`Lessons`] the runs computed, in either language.

use super::{count, t, Lang, Lessons, TIMEOUT_TABLE_RESTART_DELAYS_MS, TIMEOUT_TABLE_TIMEOUTS_MS};
use crate::report::RunReport;
use crate::runner::View;
use crate::sweep::SweepRow;
use crate::table::{Table, TableFormat};
use keel_engine::{Record, RecordKind, SinkKind};
use std::collections::BTreeMap;

fn heading(out: &mut String, format: TableFormat, text: &str) {
    match format {
        TableFormat::Markdown => out.push_str(&format!("\n## {text}\n\n")),
        _ => out.push_str(&format!("\n== {text} ==\n\n")),
    }
}

fn para(out: &mut String, text: &str) {
    out.push_str(text);
    out.push_str("\n\n");
}

pub(super) fn code(out: &mut String, format: TableFormat, lines: &[String]) {
    if format == TableFormat::Markdown {
        out.push_str("```text\n");
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    if format == TableFormat::Markdown {
        out.push_str("```\n");
    }
    out.push('\n');
}

/// "a", "a and b", "a, b and c"; in Chinese "a、b、c".
fn list(lang: Lang, items: &[String]) -> String {
    match (lang, items) {
        (Lang::Zh, _) => items.join("、"),
        (Lang::En, []) => String::new(),
        (Lang::En, [one]) => one.clone(),
        (Lang::En, [init @ .., last]) => format!("{} and {last}", init.join(", ")),
    }
}

/// Simulated milliseconds as seconds, as the chapter writes them: 2600 -> "2.6".
fn seconds(ms: u64) -> String {
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The event-time range a window end stands for: "[10,20)".
fn window_range(end: i64, window: i64) -> String {
    format!("[{},{end})", end - window)
}

/// The records of `sink` grouped by window end, in the order of their first record.
fn by_window(sink: &[Record]) -> Vec<(i64, Vec<&Record>)> {
    let mut groups: Vec<(i64, Vec<&Record>)> = Vec::new();
    for record in sink {
        match groups.iter_mut().find(|(end, _)| *end == record.window_end) {
            Some((_, records)) => records.push(record),
            None => groups.push((record.window_end, vec![record])),
        }
    }
    groups
}

/// The records `sink` holds more than once by content (the sink's key aside), named by the
/// key the same record has in `reference` (the fault-free run), with the number of copies.
fn repeated_records(sink: &[Record], reference: &[Record]) -> Vec<(String, usize)> {
    let content = |r: &Record| (r.window_end, r.kind, r.sum, r.watermark);
    let mut copies: BTreeMap<(i64, RecordKind, i128, i64), usize> = BTreeMap::new();
    for record in sink {
        *copies.entry(content(record)).or_default() += 1;
    }
    reference
        .iter()
        .filter_map(|r| {
            let n = copies.remove(&content(r))?;
            (n > 1).then(|| (r.key.clone(), n))
        })
        .collect()
}

fn written_after(report: &RunReport) -> Option<(u64, u64)> {
    report.recovery.as_ref().map(|r| (r.written, r.skipped))
}

fn checkpoint_index(report: &RunReport) -> Option<u64> {
    report
        .crash
        .as_ref()
        .and_then(|c| c.checkpoint.as_ref())
        .map(|c| c.index)
}

impl Lessons {
    /// Every table, with the chapter's words around them.
    pub fn render(&self, lang: Lang, format: TableFormat) -> String {
        let mut out = String::new();
        let title = t(
            lang,
            "keel teach: state and fault tolerance (chapter 04)",
            "keel teach：04 · 状态与容错",
        );
        match format {
            TableFormat::Markdown => out.push_str(&format!("# {title}\n")),
            _ => out.push_str(&format!("{title}\n")),
        }
        self.baseline_section(&mut out, lang, format);
        self.kill_section(&mut out, lang, format);
        self.chapter_table(&mut out, lang, format);
        self.exercises(&mut out, lang, format);
        self.sweep_section(&mut out, lang, format);
        self.timeout_section(&mut out, lang, format);
        self.job_section(&mut out, lang, format);
        out
    }

    fn job_section(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(
            out,
            format,
            t(
                lang,
                "7. A parallel job: aligned, unaligned and at-least-once checkpoints",
                "7. 并行作业：对齐、非对齐与 at-least-once 检查点",
            ),
        );
        self.job.render(out, lang, format);
    }

    fn baseline_section(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(
            out,
            format,
            t(
                lang,
                "1. The baseline: no crash",
                "1. 先拿基线（不中断跑完）",
            ),
        );
        let b = &self.baseline;
        let mut lines = vec![
            format!(
                "processed_upto_index={} written={}",
                b.processed_upto_index, b.written
            ),
            format!("final_windows={}", b.final_windows),
            "sink:".to_string(),
        ];
        lines.extend(b.sink.iter().map(|r| format!("  {r}")));
        code(out, format, &lines);
        para(out, &self.baseline_prose(lang));
    }

    /// A window with more than one record, told record by record; or that there is none.
    fn baseline_prose(&self, lang: Lang) -> String {
        let groups = by_window(&self.baseline.sink);
        let mut repeated = groups.iter().filter(|(_, records)| records.len() > 1);
        let Some((end, records)) = repeated.next() else {
            return t(lang,
                "Every window has exactly one record here: no event arrived for a window after it had fired, so no window fired more than once on this stream (such a late event updates its window and writes a second record).",
                "这里每个窗口只有一条记录：没有事件在它的窗口触发之后才到达，所以这条流上没有窗口触发多次（这样的迟到事件会更新窗口，再写一条记录）。").to_string();
        };
        let others = repeated.count() as u64;
        let range = window_range(*end, self.spec.window);
        let first = records[0];
        let mut text = match lang {
            Lang::En => format!(
                "Window {range} has {} records: {} {} {}",
                records.len(),
                first.key,
                match first.kind {
                    RecordKind::Flush => "is flushed with",
                    _ => "fires with",
                },
                first.sum
            ),
            Lang::Zh => format!(
                "窗口 {range} 出现了 {} 条记录：先 {} {}是 {}",
                records.len(),
                first.key,
                match first.kind {
                    RecordKind::Flush => "刷出时",
                    _ => "触发时",
                },
                first.sum
            ),
        };
        for (i, record) in records[1..].iter().enumerate() {
            text.push_str(&match (lang, i) {
                (Lang::En, 0) => format!(
                    ", then a late event ({}) updates it to {}",
                    record.key, record.sum
                ),
                (Lang::En, _) => format!(", then another ({}) to {}", record.key, record.sum),
                (Lang::Zh, 0) => format!(
                    "，之后一条迟到事件到达（{}）把它更新成 {}",
                    record.key, record.sum
                ),
                (Lang::Zh, _) => format!("，又一条（{}）更新成 {}", record.key, record.sum),
            });
        }
        text.push_str(t(
            lang,
            ". One window can fire more than once.",
            "。这就是第 03 章说的「一个窗口触发多次」。",
        ));
        if others > 0 {
            text.push_str(&match lang {
                Lang::En => format!(
                    " On this stream {} more than once.",
                    count(others, "other window fires", "other windows fire")
                ),
                Lang::Zh => format!("这条流上还有 {others} 个窗口也触发了多次。"),
            });
        }
        text
    }

    fn kill_section(&self, out: &mut String, lang: Lang, format: TableFormat) {
        let k = &self.kill;
        let every = self.spec.checkpoint_every;
        let at = seconds(self.knobs.kill_at_ms);
        heading(
            out,
            format,
            &match lang {
                Lang::En => format!(
                    "2. kill -9 after {at} s (a checkpoint every {})",
                    count(every, "event", "events")
                ),
                Lang::Zh => format!("2. 每 {every} 个事件存一次快照，跑 {at} 秒后 kill -9"),
            },
        );
        let none = || "none".to_string();
        let mut lines = Vec::new();
        match &k.crash {
            Some(crash) => {
                lines.push(format!(
                    "{} = {}",
                    t(lang, "sink written at the crash", "崩溃时 sink 已写"),
                    crash.written
                ));
                lines.push(match &crash.checkpoint {
                    Some(checkpoint) => format!(
                        "{}index={} max_ts={} windows={}",
                        t(lang, "checkpoint at the crash: ", "崩溃时快照进度："),
                        checkpoint.index,
                        checkpoint.max_ts.map_or_else(none, |m| m.to_string()),
                        checkpoint.windows
                    ),
                    None => format!(
                        "{}none",
                        t(lang, "checkpoint at the crash: ", "崩溃时快照进度：")
                    ),
                });
            }
            None => lines.push(t(lang, "no crash", "没有崩溃").to_string()),
        }
        if let Some(recovery) = &k.recovery {
            lines.push(format!(
                "resume_from_index={} watermark={}",
                recovery.resume_from_index,
                recovery.watermark.map_or_else(none, |w| w.to_string())
            ));
        }
        lines.extend([
            format!(
                "processed_upto_index={} written={}",
                k.processed_upto_index, k.written
            ),
            format!("BASE  final_windows={}", k.baseline_final_windows),
            format!("RUN   final_windows={}", k.final_windows),
            if k.final_windows_match {
                t(
                    lang,
                    "=> equal: checkpoint + replay did not miscount the final result",
                    "=> 一致：快照 + 重放没有算错最终结果",
                )
                .to_string()
            } else {
                t(lang, "=> DIFFERENT", "=> 不一致").to_string()
            },
        ]);
        code(out, format, &lines);
        let resume = k.recovery.as_ref().map(|r| r.resume_from_index);
        let mut text = match (lang, checkpoint_index(k), resume) {
            (Lang::En, Some(index), Some(resume)) => format!(
                "The process was killed with its checkpoint at index={index}; the restart continued from it (resume_from_index={resume}) and replayed the events after it. "
            ),
            (Lang::En, None, Some(resume)) => format!(
                "The process was killed before its first checkpoint; the restart began again (resume_from_index={resume}) and replayed every event. "
            ),
            (Lang::Zh, Some(index), Some(resume)) => format!(
                "进程被杀，快照停在 index={index}。重启从快照继续（resume_from_index={resume}），重放它之后的事件。"
            ),
            (Lang::Zh, None, Some(resume)) => format!(
                "进程在第一次快照之前被杀，重启只能从头来（resume_from_index={resume}），重放全部事件。"
            ),
            (_, _, None) => String::new(),
        };
        text.push_str(if k.final_windows_match {
            t(lang,
                "BASE and RUN are identical. Crash recovery is correct not when the numbers look right, but when the end is exactly that of the run that never crashed.",
                "BASE 和 RUN 完全相同。崩溃恢复的正确性不是「数字看起来对」，是「和不中断跑出来的结尾一模一样」。")
        } else {
            t(lang,
                "BASE and RUN differ: this recovery did not end exactly as the run that never crashed, and that, not numbers that look right, is what makes crash recovery correct.",
                "BASE 和 RUN 不一致：这次恢复没有得到不中断跑出来的结尾。崩溃恢复的正确性不是「数字看起来对」，是「和不中断跑出来的结尾一模一样」。")
        });
        para(out, &text);
    }

    fn chapter_table(&self, out: &mut String, lang: Lang, format: TableFormat) {
        let after = self.knobs.crash_after_event;
        heading(
            out,
            format,
            &match lang {
                Lang::En => {
                    format!("3. At-least-once vs exactly-once: crash after event {after}")
                }
                Lang::Zh => format!("3. 至少一次与恰好一次：处理到第 {after} 个事件后崩溃"),
            },
        );
        let mut table = Table::new(&[
            t(lang, "scheme", "方案"),
            t(lang, "written before the crash", "崩溃后写入"),
            t(lang, "written after recovery", "恢复后写入"),
            t(lang, "total records", "总记录"),
            t(lang, "after dedup", "去重后"),
            t(
                lang,
                "over-counted (keys the sink saw twice)",
                "多算（sink 重复见到的键）",
            ),
        ]);
        for (name, report) in [
            (
                t(lang, "non-idempotent sink", "非幂等 sink"),
                &self.append_crash,
            ),
            (
                t(lang, "idempotent sink", "幂等 sink"),
                &self.idempotent_crash,
            ),
        ] {
            let before = report
                .crash
                .as_ref()
                .map_or("-".to_string(), |c| c.written.to_string());
            let after = match written_after(report) {
                Some((written, skipped)) if skipped > 0 => {
                    format!("{written} ({} {skipped})", t(lang, "skipped", "跳过"))
                }
                Some((written, _)) => written.to_string(),
                None => "-".to_string(),
            };
            let over = match report.duplicated_keys.as_slice() {
                [] => report.tally.duplicates.to_string(),
                keys => {
                    let names: Vec<String> = keys.iter().map(|k| format!("`{}`", k.key)).collect();
                    format!(
                        "{} ({} {})",
                        report.tally.duplicates,
                        if names.len() == 1 {
                            t(lang, "key", "键")
                        } else {
                            t(lang, "keys", "键")
                        },
                        names.join(", ")
                    )
                }
            };
            table.push(vec![
                name.to_string(),
                before,
                after,
                report.tally.total_records.to_string(),
                report.tally.unique_keys.to_string(),
                over,
            ]);
        }
        out.push_str(&table.render(format));
        out.push('\n');
        para(out, &self.chapter_prose(lang));
    }

    fn chapter_prose(&self, lang: Lang) -> String {
        let over = self.append_crash.tally.duplicates;
        let idempotent_over = self.idempotent_crash.tally.duplicates;
        let skipped = written_after(&self.idempotent_crash).map_or(0, |(_, s)| s);
        let mut text = match (lang, over) {
            (Lang::En, 0) => "Same input, same crash point; the only difference is whether the sink honours the idempotency key, but this crash replays nothing that was already written: no key was written twice, and neither sink over-counts.".to_string(),
            (Lang::En, n) => format!(
                "Same input, same crash point; the only difference is whether the sink honours the idempotency key, and downstream over-counts {} (keys the sink saw twice).",
                count(n, "record", "records")
            ),
            (Lang::Zh, 0) => "同一份输入、同一个崩溃点，区别只是 sink 认不认幂等键；但这次崩溃没有重放已经写出的记录：没有哪个键被写两遍，两种 sink 都没有多算。".to_string(),
            (Lang::Zh, n) => format!(
                "同一份输入、同一个崩溃点，区别只是 sink 认不认幂等键，下游就多算 {n} 条（sink 重复见到的键）。"
            ),
        };
        text.push_str(&match (lang, skipped) {
            (Lang::En, 0) => " The idempotent sink had nothing to skip (skipped 0).".to_string(),
            (Lang::En, n) => format!(
                " The idempotent sink replayed {} too, but recognised {} (skipped {n}).",
                if n == 1 { "the record" } else { "the records" },
                if n == 1 { "the key" } else { "their keys" }
            ),
            (Lang::Zh, 0) => "幂等 sink 也没有要跳过的（skipped=0）。".to_string(),
            (Lang::Zh, n) => format!(
                "幂等 sink 靠的不是「不重放」，而是「重放了但认出来是同一个键」（skipped={n}）。"
            ),
        });
        if idempotent_over > 0 {
            text.push_str(&match lang {
                Lang::En => format!(
                    " Yet the idempotent sink still over-counts {}.",
                    count(idempotent_over, "record", "records")
                ),
                Lang::Zh => format!("可幂等 sink 仍然多算了 {idempotent_over} 条。"),
            });
        }
        text
    }

    fn exercises(&self, out: &mut String, lang: Lang, format: TableFormat) {
        let after = self.knobs.crash_after_event;
        heading(
            out,
            format,
            &match lang {
                Lang::En => format!("4. Exercises (the same crash after event {after})"),
                Lang::Zh => format!("4. 动手（同样在第 {after} 个事件后崩溃）"),
            },
        );
        let every = self.spec.checkpoint_every;
        let dense = self.knobs.dense_checkpoint_every;
        let mut table = Table::new(&[
            t(lang, "experiment", "实验"),
            t(lang, "sink", "sink"),
            t(lang, "checkpoint at the crash", "崩溃时快照"),
            t(lang, "resume from", "从哪继续"),
            t(lang, "checkpoints without a crash", "无故障运行的快照数"),
            t(lang, "distinct keys", "不同的键"),
            t(lang, "keys the sink saw twice", "sink 重复见到的键"),
            t(
                lang,
                "records delivered more than once",
                "重复投递的记录（按逻辑身份）",
            ),
        ]);
        let (committed, committed_dense) = self.checkpoints_committed;
        for (name, report, committed) in [
            (
                match lang {
                    Lang::En => format!("checkpoint every {every}"),
                    Lang::Zh => format!("每 {every} 个事件快照"),
                },
                &self.append_crash,
                committed,
            ),
            (
                match lang {
                    Lang::En => format!("checkpoint every {dense}"),
                    Lang::Zh => format!("每 {dense} 个事件快照"),
                },
                &self.dense_crash,
                committed_dense,
            ),
            (
                t(
                    lang,
                    "key (event index, window end)",
                    "键 (事件序号, 窗口结束)",
                )
                .to_string(),
                &self.idempotent_crash,
                committed,
            ),
            (
                t(
                    lang,
                    "key (processing time, window end)",
                    "键 (处理时间戳, 窗口结束)",
                )
                .to_string(),
                &self.processing_time_crash,
                committed,
            ),
        ] {
            table.push(vec![
                name,
                report.config.sink.clone(),
                checkpoint_index(report).map_or("-".to_string(), |i| format!("index={i}")),
                report
                    .recovery
                    .as_ref()
                    .map_or("-".to_string(), |r| r.resume_from_index.to_string()),
                committed.to_string(),
                report.tally.unique_keys.to_string(),
                report.tally.duplicates.to_string(),
                report.oracle.duplicates.to_string(),
            ]);
        }
        out.push_str(&table.render(format));
        out.push('\n');
        para(out, &self.dense_prose(lang));
        para(out, &self.processing_time_prose(lang));
        para(out, &self.two_counts_prose(lang));
    }

    /// The denser checkpoint interval: what it changes at the crash, and what it costs.
    fn dense_prose(&self, lang: Lang) -> String {
        let (every, dense) = (
            self.spec.checkpoint_every,
            self.knobs.dense_checkpoint_every,
        );
        let after = self.knobs.crash_after_event;
        let (sparse_run, dense_run) = (&self.append_crash, &self.dense_crash);
        let (dup, dup_dense) = (sparse_run.oracle.duplicates, dense_run.oracle.duplicates);
        let gone: Vec<String> = sparse_run
            .duplicated_keys
            .iter()
            .filter(|k| !dense_run.duplicated_keys.iter().any(|d| d.key == k.key))
            .map(|k| k.key.clone())
            .collect();
        let mut text = match (lang, checkpoint_index(dense_run)) {
            (Lang::En, Some(index)) => format!(
                "Every {dense} instead of every {every}: the checkpoint at index {index} is written before the crash after event {after}"
            ),
            (Lang::En, None) => format!(
                "Every {dense} instead of every {every}: still no checkpoint is written before the crash after event {after}"
            ),
            (Lang::Zh, Some(index)) => format!(
                "把 --checkpoint-every 从 {every} 改成 {dense}：崩溃前已经写下 index={index} 的快照"
            ),
            (Lang::Zh, None) => format!(
                "把 --checkpoint-every 从 {every} 改成 {dense}：崩溃前仍然一份快照都没有写下"
            ),
        };
        let sparse_index =
            checkpoint_index(sparse_run).map_or("none".to_string(), |i| format!("index={i}"));
        text.push_str(&match lang {
            Lang::En => {
                if dup == 0 && dup_dense == 0 {
                    ": neither interval delivers a record more than once at this crash point.".to_string()
                } else if dup_dense == 0 && !gone.is_empty() {
                    format!(
                        ", so {} never replayed and the duplicate{} disappear{}.",
                        if gone.len() == 1 {
                            format!("the record {} is", gone[0])
                        } else {
                            format!("the records {} are", list(lang, &gone))
                        },
                        if dup == 1 { "" } else { "s" },
                        if dup == 1 { "s" } else { "" },
                    )
                } else if dup_dense == 0 {
                    ", so nothing already written is replayed and the duplicates disappear.".to_string()
                } else if dup_dense < dup {
                    format!(
                        ", so less is replayed: {} instead of {dup}.",
                        count(dup_dense, "record delivered more than once", "records delivered more than once")
                    )
                } else if dup_dense == dup {
                    format!(
                        ", and the replay still delivers {} more than once: here the denser interval does not help.",
                        count(dup, "record", "records")
                    )
                } else {
                    format!(
                        ", earlier than the checkpoint every {every} leaves ({sparse_index}), so more is replayed: {} instead of {dup}.",
                        count(dup_dense, "record delivered more than once", "records delivered more than once")
                    )
                }
            }
            Lang::Zh => {
                if dup == 0 && dup_dense == 0 {
                    "；这个崩溃点上两种间隔都没有重复投递。".to_string()
                } else if dup_dense == 0 && !gone.is_empty() {
                    format!("，{} 不会被重放，重复消失。", list(lang, &gone))
                } else if dup_dense == 0 {
                    "，已经写出的记录不会被重放，重复消失。".to_string()
                } else if dup_dense < dup {
                    format!("，重放得更少：重复投递 {dup_dense} 条，而不是 {dup} 条。")
                } else if dup_dense == dup {
                    format!("，重放仍然重复投递 {dup} 条：在这个崩溃点上更密的快照没有帮助。")
                } else {
                    format!(
                        "，比每 {every} 个事件的快照（{sparse_index}）还早，重放得更多：重复投递 {dup_dense} 条，而不是 {dup} 条。"
                    )
                }
            }
        });
        let (committed, committed_dense) = self.checkpoints_committed;
        text.push_str(&match lang {
            Lang::En if committed_dense != committed => format!(
                " The price: a checkpoint every {dense} events costs more during normal running ({} without a crash instead of {committed}).",
                count(committed_dense, "checkpoint", "checkpoints")
            ),
            Lang::En => format!(
                " Without a crash both intervals commit {} here.",
                count(committed, "checkpoint", "checkpoints")
            ),
            Lang::Zh if committed_dense != committed => format!(
                "代价是正常运行时 checkpoint 更频繁、开销更大（无故障运行提交 {committed_dense} 次快照，而不是 {committed} 次）。"
            ),
            Lang::Zh => format!("这里无故障运行时两种间隔都提交 {committed} 次快照。"),
        });
        text
    }

    /// The processing-time key: whether the replay made new keys the sink could not dedup.
    fn processing_time_prose(&self, lang: Lang) -> String {
        let report = &self.processing_time_crash;
        let keys = report.tally.unique_keys;
        let records = self.baseline.sink.len() as u64;
        let delivered_twice = report.oracle.duplicates;
        let repeated = repeated_records(&report.sink, &self.baseline.sink);
        let names: Vec<String> = repeated.iter().map(|(key, _)| key.clone()).collect();
        let copies = if repeated.iter().all(|(_, n)| *n == 2) {
            t(lang, "both copies", "两份都留下")
        } else {
            t(lang, "every copy", "每一份都留下")
        };
        match lang {
            Lang::En if delivered_twice > 0 => format!(
                "A processing-time key: the replay emits {} again at a later simulated time, under a new key each time; the idempotent sink sees {} (the run without a crash has {}) and keeps {copies}: {} more than once. Dedup only works with a key that is stable across restarts.",
                if names.is_empty() { "records".to_string() } else { list(lang, &names) },
                count(keys, "different key", "different keys"),
                count(records, "record", "records"),
                count(delivered_twice, "record delivered", "records delivered"),
            ),
            Lang::En => format!(
                "A processing-time key: a record emitted again at a later simulated time gets a new key. At this crash point the replay emits nothing that was already written, so the idempotent sink sees {} (the run without a crash has {}) and no record is delivered more than once. Dedup only works with a key that is stable across restarts: a crash that replays a written record would show it.",
                count(keys, "different key", "different keys"),
                count(records, "record", "records"),
            ),
            Lang::Zh if delivered_twice > 0 => format!(
                "把幂等键换成 (处理时间戳, 窗口结束)：重放时同一条输出{}拿到新的处理时间，于是是新键；幂等 sink 看到 {keys} 个不同的键（无故障运行只有 {records} 条记录），{copies}，重复投递 {delivered_twice} 条，去重立刻失效。幂等键必须跨重启稳定。",
                if names.is_empty() { String::new() } else { format!("（{}）", list(lang, &names)) },
            ),
            Lang::Zh => format!(
                "把幂等键换成 (处理时间戳, 窗口结束)：重放时再输出的记录会拿到新的处理时间，于是是新键。这个崩溃点的重放没有再输出已经写过的记录，幂等 sink 看到 {keys} 个不同的键（无故障运行 {records} 条记录），没有重复投递。但只要重放了已写过的记录，去重就会失效：幂等键必须跨重启稳定。"
            ),
        }
    }

    /// The two duplicate counts of the table, side by side, for the processing-time key.
    fn two_counts_prose(&self, lang: Lang) -> String {
        let report = &self.processing_time_crash;
        let (keys_twice, delivered_twice) = (report.tally.duplicates, report.oracle.duplicates);
        let mut text = t(lang,
            "Two duplicate counts: \"keys the sink saw twice\" counts what the sink itself can see, its own keys (each extra write of a key counts); \"records delivered more than once\" is the oracle's count, which knows a record by what the run without a crash emitted, whatever its key (each extra copy counts).",
            "两个「重复」的数含义不同：「sink 重复见到的键」只看 sink 自己的键（一个键每多写一次算一个）；「重复投递的记录」是判定器（oracle）的计数，按无故障运行输出的逻辑身份认记录，不管键是什么（多出的每一份都算）。").to_string();
        text.push_str(&match (lang, keys_twice == delivered_twice) {
            (Lang::En, false) => format!(
                " With the processing-time key they part: the sink saw {} twice, yet {} more than once.",
                count(keys_twice, "key", "keys"),
                count(delivered_twice, "record was delivered", "records were delivered"),
            ),
            (Lang::En, true) => format!(
                " With the processing-time key both are {keys_twice} at this crash point; they part as soon as a replay writes a record under a new key."
            ),
            (Lang::Zh, false) => format!(
                "换成处理时间键，两者就分开了：sink 重复见到的键 {keys_twice} 个，重复投递的记录却有 {delivered_twice} 条。"
            ),
            (Lang::Zh, true) => format!(
                "换成处理时间键，在这个崩溃点上两者都是 {keys_twice}；只要重放用新键写下一条记录，两者就会分开。"
            ),
        });
        text
    }

    fn sweep_row(&self, sink: SinkKind, view: Option<View>) -> Option<&SweepRow> {
        self.crash_sweep
            .rows
            .iter()
            .find(|r| r.sink == sink.name() && r.view.as_deref() == view.map(|v| v.name()))
    }

    fn sweep_section(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(
            out,
            format,
            t(
                lang,
                "5. Every crash point: append vs idempotent vs two-phase commit",
                "5. 每一个崩溃点：非幂等 vs 幂等 vs 两阶段提交",
            ),
        );
        let mut table = Table::new(&[
            t(lang, "sink", "sink"),
            t(lang, "view", "读取方式"),
            t(lang, "crash points", "崩溃点"),
            t(lang, "with duplicates", "有重复"),
            t(lang, "with losses", "有丢失"),
            t(lang, "dirty reads", "脏读"),
            t(lang, "max visibility delay (ms)", "最长可见延迟 (ms)"),
        ]);
        for row in &self.crash_sweep.rows {
            table.push(vec![
                row.sink.clone(),
                row.view.clone().unwrap_or_else(|| "-".to_string()),
                row.points.to_string(),
                row.points_with_duplicates.to_string(),
                row.points_with_loss.to_string(),
                row.dirty_reads.to_string(),
                row.visibility_delay_ms_max.to_string(),
            ]);
        }
        out.push_str(&table.render(format));
        out.push('\n');
        para(out, &self.sweep_prose(lang));
    }

    fn sweep_prose(&self, lang: Lang) -> String {
        let mut text = String::new();
        let file_sinks: Vec<&SweepRow> = [SinkKind::Append, SinkKind::Idempotent]
            .into_iter()
            .filter_map(|sink| self.sweep_row(sink, None))
            .collect();
        let parts: Vec<String> = file_sinks
            .iter()
            .map(|row| {
                let mut part = match lang {
                    Lang::En => format!(
                        "the {} sink at {} of its {} crash points",
                        row.sink, row.points_with_duplicates, row.points
                    ),
                    Lang::Zh => format!(
                        "{} sink 在 {} 个崩溃点中的 {} 个",
                        row.sink, row.points, row.points_with_duplicates
                    ),
                };
                if row.points_with_loss > 0 {
                    part.push_str(&match lang {
                        Lang::En => format!(" (and loses records at {})", row.points_with_loss),
                        Lang::Zh => format!("（另有 {} 个丢数）", row.points_with_loss),
                    });
                }
                part
            })
            .collect();
        if !parts.is_empty() {
            text.push_str(&match lang {
                Lang::En => format!(
                    "A process crash at every step delivers records more than once: {}. ",
                    list(lang, &parts)
                ),
                Lang::Zh => format!(
                    "在每一步让进程崩溃一次，重复投递的崩溃点：{}。",
                    parts.join("，")
                ),
            });
        }
        if let Some(rc) = self.sweep_row(SinkKind::Transactional, Some(View::ReadCommitted)) {
            let clean = rc.points_with_duplicates == 0
                && rc.points_with_loss == 0
                && rc.wrong == 0
                && rc.corrupt == 0;
            let delay = rc.visibility_delay_ms_max;
            text.push_str(&match (lang, clean) {
                (Lang::En, true) => format!(
                    "The two-phase-commit sink is exactly-once for a read_committed consumer at every one of its {} crash points, paid for in visibility: a record becomes visible only when the checkpoint after it commits its transaction, here up to {delay} ms after it was sent.",
                    rc.points
                ),
                (Lang::En, false) => format!(
                    "The two-phase-commit sink is not exactly-once for a read_committed consumer here: of its {} crash points, {} deliver records more than once and {} lose records. It pays in visibility all the same: a record becomes visible only when the checkpoint after it commits its transaction, here up to {delay} ms after it was sent.",
                    rc.points, rc.points_with_duplicates, rc.points_with_loss
                ),
                (Lang::Zh, true) => format!(
                    "两阶段提交 sink 对 read_committed 的消费者在全部 {} 个崩溃点都是恰好一次，代价是可见性：记录要等到它之后的 checkpoint 提交事务才可见，这里最长要等 {delay} ms。",
                    rc.points
                ),
                (Lang::Zh, false) => format!(
                    "两阶段提交 sink 对 read_committed 的消费者在这里不是恰好一次：{} 个崩溃点中，{} 个有重复投递，{} 个丢数。可见性的代价照样要付：记录要等到它之后的 checkpoint 提交事务才可见，这里最长要等 {delay} ms。",
                    rc.points, rc.points_with_duplicates, rc.points_with_loss
                ),
            });
        }
        if let Some(ru) = self.sweep_row(SinkKind::Transactional, Some(View::ReadUncommitted)) {
            text.push_str(&match (lang, ru.dirty_reads) {
                (Lang::En, 0) => " A read_uncommitted consumer would see the records of aborted transactions (dirty reads); no crash point here leaves one.".to_string(),
                (Lang::En, n) => format!(
                    " A read_uncommitted consumer sees the records of aborted transactions: {} over the {} crash points.",
                    count(n, "dirty read", "dirty reads"),
                    ru.points
                ),
                (Lang::Zh, 0) => "read_uncommitted 的消费者会读到被中止事务里的记录（脏读）；这里没有哪个崩溃点留下脏读。".to_string(),
                (Lang::Zh, n) => format!(
                    "read_uncommitted 的消费者会读到被中止事务里的记录：{} 个崩溃点里共 {n} 次脏读。",
                    ru.points
                ),
            });
        }
        text
    }

    fn timeout_section(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(
            out,
            format,
            t(
                lang,
                "6. Transaction timeout vs restart delay",
                "6. 事务超时 vs 重启时长",
            ),
        );
        let mut headers =
            vec![t(lang, "restart delay \\ timeout", "重启时长 \\ 事务超时").to_string()];
        headers.extend(
            TIMEOUT_TABLE_TIMEOUTS_MS
                .iter()
                .map(|ms| format!("{ms} ms")),
        );
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut table = Table::new(&refs);
        for (delay_ms, row) in TIMEOUT_TABLE_RESTART_DELAYS_MS
            .iter()
            .zip(&self.timeout_losses)
        {
            let mut cells = vec![format!("{delay_ms} ms")];
            cells.extend(row.iter().map(|n| n.to_string()));
            table.push(cells);
        }
        out.push_str(&table.render(format));
        out.push('\n');
        let interval_ms = self.checkpoint_interval_ms();
        let mut text = match lang {
            Lang::En => format!(
                "Each cell: crash points (of a process-crash sweep) whose read_committed view loses records. A checkpoint interval here is {interval_ms} ms of simulated time. When the timeout is shorter than the interval plus the restart delay, the log aborts a pre-committed transaction before recovery can commit it, and its records are gone for good: Flink and Kafka ask for transaction.timeout.ms above the checkpoint interval plus the longest restart."
            ),
            Lang::Zh => format!(
                "每格：进程崩溃扫描中 read_committed 视图丢数的崩溃点个数。这里一个 checkpoint 间隔是模拟时间 {interval_ms} ms。事务超时小于「checkpoint 间隔 + 重启时长」时，日志会在恢复提交之前把已预提交的事务中止，其中的记录永久丢失：所以 Flink 与 Kafka 文档要求 transaction.timeout.ms 大于最大 checkpoint 时长与最大重启时长之和。"
            ),
        };
        let exceptions = self.timeout_rule_exceptions();
        text.push_str(&match (lang, exceptions.as_slice()) {
            (Lang::En, []) => " Every cell of this table agrees with that rule.".to_string(),
            (Lang::Zh, []) => "这张表的每一格都符合这条规则。".to_string(),
            (Lang::En, cells) => {
                let cells: Vec<String> = cells
                    .iter()
                    .map(|(delay, timeout, lost)| {
                        format!(
                            "restart delay {delay} ms with timeout {timeout} ms ({} losing records)",
                            count(*lost, "crash point", "crash points")
                        )
                    })
                    .collect();
                format!(
                    " In this table {} not: {}.",
                    count(cells.len() as u64, "cell does", "cells do"),
                    list(lang, &cells)
                )
            }
            (Lang::Zh, cells) => {
                let cells: Vec<String> = cells
                    .iter()
                    .map(|(delay, timeout, lost)| {
                        format!("重启 {delay} ms、超时 {timeout} ms（{lost} 个崩溃点丢数）")
                    })
                    .collect();
                format!(
                    "这张表里有 {} 格不符合：{}。",
                    cells.len(),
                    list(lang, &cells)
                )
            }
        });
        para(out, &text);
    }
}
