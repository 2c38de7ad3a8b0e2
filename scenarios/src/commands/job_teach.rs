//! `keel job teach`: the exactly-once article's trade-off computed live: one job, one kill -9,
//! the three checkpoint modes side by side, in English or Chinese.

use super::job::{job_line, spec_of, JobArgs};
use super::output::Output;
use crate::error::KeelError;
use crate::graph::oracle::judge;
use crate::graph::{run, GraphSpec};
use clap::{Args, ValueEnum};
use keel_engine::job::{AlignmentMode, JobConfig, JobSinkKind};
use keel_sim::FaultPlan;
use std::fmt::Write as _;

#[derive(Debug, Args)]
pub struct JobTeachArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The language of the text.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    Zh,
}

/// The job: its input, its graph and its knobs.
/// The three modes behind a transactional sink, each killed at the same simulated time:
/// the first time at which at-least-once over-counts (searched, so the table always shows
/// the article's point when the job can show it at all).
pub(super) fn cmd_job_teach(args: &JobTeachArgs) -> Result<Output, KeelError> {
    let base = spec_of(
        &args.job,
        AlignmentMode::Aligned,
        JobSinkKind::Transactional,
    )?;
    let with_mode = |mode: AlignmentMode| GraphSpec {
        config: JobConfig {
            mode,
            ..base.config
        },
        ..base.clone()
    };
    let fault_free_ms = run(&with_mode(AlignmentMode::AtLeastOnce)).world.now_ms();
    let kill_ms = (1..fault_free_ms).find(|t| {
        let point = GraphSpec {
            plan: FaultPlan::kill_at_ms(*t),
            ..with_mode(AlignmentMode::AtLeastOnce)
        };
        judge(
            &run(&point),
            &point.events,
            point.config.window_size,
            point.config.sink,
        )
        .over_counted
            > 0
    });
    let zh = args.lang == LangArg::Zh;
    let mut out = String::new();
    writeln!(out, "{}", job_line(&base, base.events.len())).unwrap();
    let Some(kill_ms) = kill_ms else {
        writeln!(
            out,
            "{}",
            if zh { "这个作业在任何时刻被 kill -9 都不会让 at-least-once 重复计数（检查点之间没有越过屏障的记录）。" } else { "No kill -9 of this job makes at-least-once over-count (no record passes a barrier between checkpoints)." }
        )
        .unwrap();
        return Ok(Output {
            stdout: out,
            exit_code: 0,
        });
    };
    if zh {
        writeln!(out, "同一个作业（{} 个 source 分区、{} 个窗口算子、两阶段提交 sink），在 t={kill_ms}ms 被 kill -9，三种检查点模式：", base.config.sources, base.config.parallelism).unwrap();
    } else {
        writeln!(out, "One job ({} source partitions, {} window operators, a two-phase-commit sink), kill -9 at t={kill_ms}ms, three checkpoint modes:", base.config.sources, base.config.parallelism).unwrap();
    }
    let headers = if zh {
        [
            "模式",
            "状态中重复计数的窗口",
            "sink 中的重复",
            "对齐阻塞 (ms)",
            "最大快照 (字节)",
            "快照中的在途数据",
        ]
    } else {
        [
            "mode",
            "windows over-counted in state",
            "duplicates in the sink",
            "alignment (ms)",
            "largest snapshot (bytes)",
            "in-flight items stored",
        ]
    };
    writeln!(out, "| {} |", headers.join(" | ")).unwrap();
    writeln!(out, "|{}", " --- |".repeat(headers.len())).unwrap();
    for mode in AlignmentMode::ALL {
        let point = GraphSpec {
            plan: FaultPlan::kill_at_ms(kill_ms),
            ..with_mode(mode)
        };
        let ran = run(&point);
        let verdict = judge(
            &ran,
            &point.events,
            point.config.window_size,
            point.config.sink,
        );
        let totals = ran.totals();
        writeln!(
            out,
            "| {mode} | {} | {} | {} | {} | {} |",
            verdict.over_counted,
            verdict.duplicates,
            totals.alignment_ms,
            totals.checkpoint_bytes_max,
            totals.in_flight_items
        )
        .unwrap();
    }
    writeln!(
        out,
        "{}",
        if zh {
            "at-least-once 不对齐屏障：越过屏障 n 的记录已计入快照，恢复后又被重放一次，所以状态里重复计数。sink 是事务性的，每条记录只提交一次，结果依然错误：这就是“伪精确一次”——端到端精确一次需要每一个环节。unaligned 不阻塞输入（对齐时间为 0），代价是把在途数据存进快照（快照更大）。"
        } else {
            "At-least-once does not align: records past barrier n are counted in its snapshot and replayed after the recovery, so state counts them twice. The sink is transactional and commits each record once, yet the result is wrong: the article's \"fake exactly-once\"; end-to-end exactly-once needs every link. Unaligned never blocks an input (no alignment time) and pays with in-flight data stored in the snapshot."
        }
    )
    .unwrap();
    Ok(Output::ok(out))
}
