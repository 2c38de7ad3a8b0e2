//! `keel teach`: the chapter's tables, and more, each computed live by the simulator, in
//! English or in the chapter's own Chinese; and SVG pictures of them.
//!
//! Nothing here is typed in: every number comes from a run or a sweep made on the spot.

use crate::error::KeelError;
use crate::report::{run_report, CrashRequest, RunReport};
use crate::runner::View;
use crate::spec::ScenarioSpec;
use crate::sweep::{
    aggregate, baselines, run_point, sites, sweep_points, PointRecord, SweepReport, SweepSpec,
};
use crate::table::{Table, TableFormat};
use keel_engine::{Event, KeyScheme, SinkKind};
use keel_sim::{FaultKind, FaultPlan};
use plotters::prelude::*;

/// The language of the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

/// A phrase in both languages; the Chinese is the chapter's own where it has one.
fn t(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// Restart delays (rows) and transaction timeouts (columns) of the timeout table, in ms.
pub const TIMEOUT_TABLE_RESTART_DELAYS_MS: [u64; 4] = [500, 2_000, 5_000, 10_000];
pub const TIMEOUT_TABLE_TIMEOUTS_MS: [u64; 5] = [1_000, 3_000, 6_000, 15_000, 60_000];

/// Everything `keel teach` computes, ready to print or draw.
pub struct Lessons {
    pub spec: ScenarioSpec,
    pub baseline: RunReport,
    pub kill_2600: RunReport,
    pub append_14: RunReport,
    pub idempotent_14: RunReport,
    pub every_3_14: RunReport,
    pub processing_time_14: RunReport,
    /// Process crashes at every step, for append, idempotent and transactional.
    pub crash_sweep: SweepReport,
    pub crash_records: Vec<PointRecord>,
    /// [restart delay][timeout]: crash points losing records in the read_committed view.
    pub timeout_losses: Vec<Vec<u64>>,
    /// Steps where each sink's fault-free run commits a checkpoint (for the pictures).
    pub checkpoint_steps: Vec<(SinkKind, Vec<(u64, String)>)>,
}

fn run(
    spec: &ScenarioSpec,
    events: &[Event],
    sink: SinkKind,
    crash: Option<CrashRequest>,
) -> Result<RunReport, KeelError> {
    run_report(
        &spec.label(),
        &spec.run_spec(events, sink, FaultPlan::none())?,
        crash,
        &crate::report::Judging::default(),
        String::new(),
    )
}

fn crash_sweep(
    spec: &ScenarioSpec,
    events: &[Event],
    sinks: &[SinkKind],
) -> Result<(SweepReport, Vec<PointRecord>), KeelError> {
    let sweep = SweepSpec {
        sinks: sinks.to_vec(),
        faults: vec![FaultKind::ProcessCrash],
        depth: 1,
        outage_ms: 2_000,
        expect: None,
    };
    let baselines = baselines(spec, events, &sweep.sinks)?;
    let points = sweep_points(spec, &sweep, &baselines);
    let records: Vec<PointRecord> = points
        .iter()
        .enumerate()
        .flat_map(|(i, point)| run_point(spec, &baselines, i as u64, point))
        .collect();
    Ok((
        aggregate(&spec.label(), spec.protocol.name(), &records, None),
        records,
    ))
}

/// Runs everything the lessons show.
pub fn lessons(spec: &ScenarioSpec, events: &[Event]) -> Result<Lessons, KeelError> {
    let with_k = |k: u64| ScenarioSpec {
        checkpoint_every: k,
        ..spec.clone()
    };
    let eight = with_k(8);
    let after_14 = Some(CrashRequest::AfterEvent(14));
    let sinks = [
        SinkKind::Append,
        SinkKind::Idempotent,
        SinkKind::Transactional,
    ];
    let (crash_sweep_report, crash_records) = crash_sweep(spec, events, &sinks)?;
    let mut timeout_losses = Vec::new();
    for &restart_delay_ms in &TIMEOUT_TABLE_RESTART_DELAYS_MS {
        let mut row = Vec::new();
        for &transaction_timeout_ms in &TIMEOUT_TABLE_TIMEOUTS_MS {
            let cell = ScenarioSpec {
                restart_delay_ms,
                transaction_timeout_ms,
                ..spec.clone()
            };
            let (report, _) = crash_sweep(&cell, events, &[SinkKind::Transactional])?;
            let committed = report
                .rows
                .iter()
                .find(|r| r.view.as_deref() == Some(View::ReadCommitted.name()))
                .expect("the transactional sweep has a read_committed row");
            row.push(committed.points_with_loss);
        }
        timeout_losses.push(row);
    }
    let mut checkpoint_steps = Vec::new();
    for sink in sinks {
        let (_, rows) = sites(&spec.run_spec(events, sink, FaultPlan::none())?);
        let marks = rows
            .iter()
            .filter(|s| s.op == "disk.rename" || s.op == "disk.write" && s.target == "state.json")
            .map(|s| {
                (
                    s.step,
                    s.target.rsplit(' ').next().unwrap_or("").to_string(),
                )
            })
            .collect();
        checkpoint_steps.push((sink, marks));
    }
    Ok(Lessons {
        baseline: run(&eight, events, SinkKind::Append, None)?,
        kill_2600: run(
            &eight,
            events,
            SinkKind::Append,
            Some(CrashRequest::AtMs(2_600)),
        )?,
        append_14: run(&eight, events, SinkKind::Append, after_14)?,
        idempotent_14: run(&eight, events, SinkKind::Idempotent, after_14)?,
        every_3_14: run(&with_k(3), events, SinkKind::Append, after_14)?,
        processing_time_14: run(
            &ScenarioSpec {
                key: KeyScheme::ProcessingTime,
                ..eight.clone()
            },
            events,
            SinkKind::Idempotent,
            after_14,
        )?,
        crash_sweep: crash_sweep_report,
        crash_records,
        timeout_losses,
        checkpoint_steps,
        spec: spec.clone(),
    })
}

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

fn code(out: &mut String, format: TableFormat, lines: &[String]) {
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
        out
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
        para(out, t(lang,
            "Window [20,30) has two records: 24:20 fires with 138, then a late event (25:20) updates it to 155. One window can fire more than once.",
            "窗口 [20,30) 出现了两条记录：先 24:20 触发时是 138，之后一条迟到事件到达（25:20）把它更新成 155。这就是第 03 章说的「一个窗口触发多次」。"));
    }

    fn kill_section(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(
            out,
            format,
            t(
                lang,
                "2. kill -9 after 2.6 s (a checkpoint every 8 events)",
                "2. 每 8 个事件存一次快照，跑 2.6 秒后 kill -9",
            ),
        );
        let k = &self.kill_2600;
        let crash = k.crash.as_ref().expect("the kill happened");
        let recovery = k.recovery.as_ref().expect("the process restarted");
        let checkpoint = crash
            .checkpoint
            .as_ref()
            .expect("a checkpoint was committed");
        let lines = vec![
            format!(
                "{} = {}",
                t(lang, "sink written at the crash", "崩溃时 sink 已写"),
                crash.written
            ),
            format!(
                "{}index={} max_ts={} windows={}",
                t(lang, "checkpoint at the crash: ", "崩溃时快照进度："),
                checkpoint.index,
                checkpoint
                    .max_ts
                    .map_or("none".to_string(), |m| m.to_string()),
                checkpoint.windows
            ),
            format!(
                "resume_from_index={} watermark={}",
                recovery.resume_from_index,
                recovery
                    .watermark
                    .map_or("none".to_string(), |w| w.to_string())
            ),
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
        ];
        code(out, format, &lines);
        para(out, t(lang,
            "BASE and RUN are identical. Crash recovery is correct not when the numbers look right, but when the end is exactly that of the run that never crashed.",
            "BASE 和 RUN 完全相同。崩溃恢复的正确性不是「数字看起来对」，是「和不中断跑出来的结尾一模一样」。"));
    }

    fn chapter_table(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(
            out,
            format,
            t(
                lang,
                "3. At-least-once vs exactly-once: crash after event 14",
                "3. 至少一次与恰好一次：处理到第 14 个事件后崩溃",
            ),
        );
        let mut table = Table::new(&[
            t(lang, "scheme", "方案"),
            t(lang, "written before the crash", "崩溃后写入"),
            t(lang, "written after recovery", "恢复后写入"),
            t(lang, "total records", "总记录"),
            t(lang, "after dedup", "去重后"),
            t(lang, "over-counted", "多算"),
        ]);
        for (name, report) in [
            (
                t(lang, "non-idempotent sink", "非幂等 sink"),
                &self.append_14,
            ),
            (t(lang, "idempotent sink", "幂等 sink"), &self.idempotent_14),
        ] {
            let crash = report.crash.as_ref().expect("crashed");
            let recovery = report.recovery.as_ref().expect("recovered");
            let after = if recovery.skipped > 0 {
                format!(
                    "{} ({} {})",
                    recovery.written,
                    t(lang, "skipped", "跳过"),
                    recovery.skipped
                )
            } else {
                recovery.written.to_string()
            };
            let over = match report.duplicated_keys.as_slice() {
                [] => report.tally.duplicates.to_string(),
                keys => {
                    let names: Vec<String> = keys.iter().map(|k| format!("`{}`", k.key)).collect();
                    format!(
                        "{} ({} {})",
                        report.tally.duplicates,
                        t(lang, "key", "键"),
                        names.join(", ")
                    )
                }
            };
            table.push(vec![
                name.to_string(),
                crash.written.to_string(),
                after,
                report.tally.total_records.to_string(),
                report.tally.unique_keys.to_string(),
                over,
            ]);
        }
        out.push_str(&table.render(format));
        out.push('\n');
        para(out, t(lang,
            "Same input, same crash point; the only difference is whether the sink honours the idempotency key, and downstream over-counts one record. The idempotent sink replayed the record too, but recognised the key (skipped 1).",
            "同一份输入、同一个崩溃点，区别只是 sink 认不认幂等键，下游就多算 1 条。幂等 sink 靠的不是「不重放」，而是「重放了但认出来是同一个键」（skipped=1）。"));
    }

    fn exercises(&self, out: &mut String, lang: Lang, format: TableFormat) {
        heading(out, format, t(lang, "4. Exercises", "4. 动手"));
        let mut table = Table::new(&[
            t(lang, "experiment", "实验"),
            t(lang, "sink", "sink"),
            t(lang, "checkpoint at the crash", "崩溃时快照"),
            t(lang, "resume from", "从哪继续"),
            t(lang, "distinct keys", "不同的键"),
            t(lang, "duplicates (by identity)", "重复（按逻辑身份）"),
        ]);
        for (name, report) in [
            (
                t(lang, "checkpoint every 8", "每 8 个事件快照"),
                &self.append_14,
            ),
            (
                t(lang, "checkpoint every 3", "每 3 个事件快照"),
                &self.every_3_14,
            ),
            (
                t(
                    lang,
                    "key (event index, window end)",
                    "键 (事件序号, 窗口结束)",
                ),
                &self.idempotent_14,
            ),
            (
                t(
                    lang,
                    "key (processing time, window end)",
                    "键 (处理时间戳, 窗口结束)",
                ),
                &self.processing_time_14,
            ),
        ] {
            let crash = report.crash.as_ref().expect("crashed");
            let recovery = report.recovery.as_ref().expect("recovered");
            table.push(vec![
                name.to_string(),
                report.config.sink.clone(),
                crash
                    .checkpoint
                    .as_ref()
                    .map_or("-".to_string(), |c| format!("index={}", c.index)),
                recovery.resume_from_index.to_string(),
                report.tally.unique_keys.to_string(),
                report.oracle.duplicates.to_string(),
            ]);
        }
        out.push_str(&table.render(format));
        out.push('\n');
        para(out, t(lang,
            "Every 3 instead of every 8: the checkpoint at index 15 is written before the crash after event 14, so the record 13:10 is never replayed and the duplicate disappears. The price: a checkpoint every 3 events costs more during normal running.",
            "把 --checkpoint-every 从 8 改成 3：崩溃前已经写下 index=15 的快照，13:10 不会被重放，重复消失。代价是正常运行时 checkpoint 更频繁、开销更大。"));
        para(out, t(lang,
            "A processing-time key: the replay emits 13:10 again at a later simulated time, so it gets a new key; the idempotent sink sees five different keys and keeps both copies. Dedup only works with a key that is stable across restarts.",
            "把幂等键换成 (处理时间戳, 窗口结束)：重放时同一条输出拿到新的处理时间，于是是新键；幂等 sink 看到 5 个不同的键，两份都留下，去重立刻失效。幂等键必须跨重启稳定。"));
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
        para(out, t(lang,
            "The two-phase-commit sink is exactly-once for a read_committed consumer at every crash point, paid for in visibility: a record becomes visible only when the checkpoint after it commits its transaction. A read_uncommitted consumer sees the records of aborted transactions: dirty reads.",
            "两阶段提交 sink 对 read_committed 的消费者在每个崩溃点都是恰好一次，代价是可见性：记录要等到它之后的 checkpoint 提交事务才可见。read_uncommitted 的消费者会读到被中止事务里的记录：脏读。"));
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
        let interval_ms = self.spec.checkpoint_every * self.spec.event_interval_ms;
        para(out, &match lang {
            Lang::En => format!(
                "Each cell: crash points (of a process-crash sweep) whose read_committed view loses records. A checkpoint interval here is {interval_ms} ms of simulated time. When the timeout is shorter than the interval plus the restart delay, the log aborts a pre-committed transaction before recovery can commit it, and its records are gone for good: Flink and Kafka ask for transaction.timeout.ms above the checkpoint interval plus the longest restart."
            ),
            Lang::Zh => format!(
                "每格：进程崩溃扫描中 read_committed 视图丢数的崩溃点个数。这里一个 checkpoint 间隔是模拟时间 {interval_ms} ms。事务超时小于「checkpoint 间隔 + 重启时长」时，日志会在恢复提交之前把已预提交的事务中止，其中的记录永久丢失：所以 Flink 与 Kafka 文档要求 transaction.timeout.ms 大于最大 checkpoint 时长与最大重启时长之和。"
            ),
        });
    }

    /// Writes the pictures: per sink (and view), duplicates and losses per crash point along
    /// the run with its checkpoints marked; and the timeout heat map. Returns the file names.
    pub fn svgs(&self, lang: Lang) -> Vec<(String, String)> {
        let mut files = Vec::new();
        for row in &self.crash_sweep.rows {
            let records: Vec<&PointRecord> = self
                .crash_records
                .iter()
                .filter(|r| {
                    r.sink.name() == row.sink && r.view.map(|v| v.name().to_string()) == row.view
                })
                .collect();
            let marks = self
                .checkpoint_steps
                .iter()
                .find(|(sink, _)| sink.name() == row.sink)
                .map(|(_, marks)| marks.clone())
                .unwrap_or_default();
            let name = match &row.view {
                Some(view) => format!("crash-points-{}-{view}.svg", row.sink),
                None => format!("crash-points-{}.svg", row.sink),
            };
            let title = format!(
                "{} {} {}",
                row.sink,
                row.view.clone().unwrap_or_default(),
                t(
                    lang,
                    "duplicates and losses per crash point",
                    "每个崩溃点的重复与丢失"
                )
            );
            files.push((name, timeline_svg(&title, &records, &marks, lang)));
        }
        files.push((
            "transaction-timeout.svg".to_string(),
            heatmap_svg(&self.timeout_losses, lang),
        ));
        files
    }
}

fn timeline_svg(
    title: &str,
    records: &[&PointRecord],
    marks: &[(u64, String)],
    lang: Lang,
) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
        root.fill(&WHITE).expect("drawing to a string");
        let steps_max = records.iter().map(|r| r.faults[0].step).max().unwrap_or(0) + 1;
        let y_max = records
            .iter()
            .map(|r| r.duplicates.max(r.lost))
            .max()
            .unwrap_or(0)
            .max(1)
            + 1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(40)
            .build_cartesian_2d(0u64..steps_max, 0u64..y_max)
            .expect("a chart");
        chart
            .configure_mesh()
            .x_desc(t(
                lang,
                "crash point (step of the fault-free run)",
                "崩溃点（无故障运行的步骤）",
            ))
            .y_desc(t(lang, "records", "条数"))
            .disable_x_mesh()
            .draw()
            .expect("a mesh");
        for (step, label) in marks {
            chart
                .draw_series(LineSeries::new(
                    [(*step, 0), (*step, y_max)],
                    RGBColor(232, 89, 12).stroke_width(1),
                ))
                .expect("a checkpoint mark");
            chart
                .draw_series([Text::new(
                    label.clone(),
                    (*step, y_max - 1),
                    ("sans-serif", 10).into_font(),
                )])
                .expect("a checkpoint label");
        }
        chart
            .draw_series(records.iter().filter(|r| r.duplicates > 0).map(|r| {
                let x = r.faults[0].step;
                Rectangle::new(
                    [(x, 0), (x + 1, r.duplicates)],
                    RGBColor(112, 72, 232).filled(),
                )
            }))
            .expect("duplicates")
            .label(t(lang, "duplicates", "重复"))
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 10, y + 5)],
                    RGBColor(112, 72, 232).filled(),
                )
            });
        chart
            .draw_series(records.iter().filter(|r| r.lost > 0).map(|r| {
                let x = r.faults[0].step;
                Rectangle::new([(x, 0), (x + 1, r.lost)], RGBColor(201, 42, 42).filled())
            }))
            .expect("losses")
            .label(t(lang, "lost", "丢失"))
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 10, y + 5)],
                    RGBColor(201, 42, 42).filled(),
                )
            });
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .expect("a legend");
        root.present().expect("drawing to a string");
    }
    svg
}

/// The label of a segment's centre: the value of that row or column, in ms.
fn segment_label(value: &SegmentValue<usize>, values_ms: &[u64]) -> String {
    match value {
        SegmentValue::CenterOf(i) => values_ms.get(*i).map_or(String::new(), |ms| ms.to_string()),
        _ => String::new(),
    }
}

fn heatmap_svg(losses: &[Vec<u64>], lang: Lang) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
        root.fill(&WHITE).expect("drawing to a string");
        let rows = losses.len();
        let cols = losses.first().map_or(0, Vec::len);
        let max = losses.iter().flatten().copied().max().unwrap_or(0).max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(
                t(
                    lang,
                    "crash points losing records (read_committed)",
                    "read_committed 丢数的崩溃点",
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (0..cols - 1).into_segmented(),
                (0..rows - 1).into_segmented(),
            )
            .expect("a chart");
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(t(lang, "transaction timeout (ms)", "事务超时 (ms)"))
            .y_desc(t(lang, "restart delay (ms)", "重启时长 (ms)"))
            .x_labels(cols)
            .y_labels(rows)
            .x_label_formatter(&|x| segment_label(x, &TIMEOUT_TABLE_TIMEOUTS_MS))
            .y_label_formatter(&|y| segment_label(y, &TIMEOUT_TABLE_RESTART_DELAYS_MS))
            .draw()
            .expect("a mesh");
        for (r, row) in losses.iter().enumerate() {
            for (c, &lost) in row.iter().enumerate() {
                let heat = (lost * 200 / max) as u8;
                let colour = RGBColor(255, 255 - heat, 255 - heat);
                let corner = |c, r| (SegmentValue::Exact(c), SegmentValue::Exact(r));
                chart
                    .draw_series([Rectangle::new(
                        [corner(c, r), corner(c + 1, r + 1)],
                        colour.filled(),
                    )])
                    .expect("a cell");
                let centre = (SegmentValue::CenterOf(c), SegmentValue::CenterOf(r));
                chart
                    .draw_series([Text::new(
                        lost.to_string(),
                        centre,
                        ("sans-serif", 16).into_font(),
                    )])
                    .expect("a cell label");
            }
        }
        root.present().expect("drawing to a string");
    }
    svg
}
