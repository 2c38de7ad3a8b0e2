//! `keel fidelity kill`: every process-crash point of a scenario, simulated and with a real
//! SIGKILL on a real directory, compared; rows per sink with wall times (this command, its
//! sibling `keel fidelity power-cut` in `power_cut.rs` and `keel bench` are the only ones
//! that time runs on the wall clock, from outside). With `--shard i/n`, one slice of the
//! points as JSON lines for `keel merge`.

use super::args::{
    dedup_kinds, jobs, table_format, FsModelArg, JobArgs, ScenarioArgs, SinkArg, TableFormatArg,
};
use super::disk_error::{cmd_disk_error, DiskErrorArgs};
use super::files::prepare;
use super::incarnation::run_real_here;
use super::interrupt::par_map_interruptible;
use super::output::{Output, EXIT_VIOLATION};
use super::power_cut::{cmd_power_cut, PowerCutArgs};
use super::progress::Progress;
use super::shard::{shard_output, ShardLine};
use crate::baseline::{baselines, Baseline};
use crate::error::KeelError;
use crate::fidelity::{aggregate, differences, FidelityReport, PointComparison, Side};
use crate::reproduce::reproduce_point;
use crate::runner::{self, RunSpec};
use crate::sweep::{points, SweepSpec, POWER_LOSS_STATES_MAX_DEFAULT};
use clap::{Args, Subcommand};
use keel_engine::SinkKind;
use keel_sim::{FaultKind, FaultPlan, PlannedFault};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug, Args)]
pub struct FidelityArgs {
    #[command(subcommand)]
    pub check: FidelityCheck,
}

#[derive(Debug, Subcommand)]
pub enum FidelityCheck {
    /// Every process-crash point (as `keel sweep --faults process-crash` has them), run
    /// simulated and for real (a child process on a fresh temporary directory, killed with
    /// SIGKILL at the step), compared: sink, final windows, verdict, directory, trace. Exit 1
    /// if any point disagrees.
    #[command(mut_arg("seed", |a| a.hide(true)), mut_arg("fs_model", |a| a.hide(true)))]
    Kill(KillArgs),
    /// Every power-loss point (a power cut right after step N, as `keel sweep --faults
    /// power-loss` has its steps), cut for real in a user-mode Linux guest on a fresh image
    /// of a real file system: is the surviving directory one of the crash states the model
    /// enumerates at step N (admitted), and does real recovery on it reach the simulator's
    /// verdict for that state (agree)? Needs /usr/bin/linux.uml (install with: apt-get
    /// install user-mode-linux e2fsprogs xfsprogs btrfs-progs). Exit 1 if any point is not
    /// admitted or disagrees.
    #[command(mut_arg("fs_model", |a| a.hide(true)), mut_arg("shard", |a| a.hide(true)))]
    PowerCut(PowerCutArgs),
    /// Every disk-error point on an fsync (as `keel sweep --faults disk-error` fails a
    /// file's fsync), failed for real in a user-mode Linux guest: device-mapper's `error`
    /// target under the file's blocks for that fsync's data writes (or, `--cause`, dm-flakey,
    /// which also fails cache flushes), the fsync returns EIO; does the process see what the
    /// model says (the fsync's
    /// result, a read, a second fsync, a read after the page cache dropped the pages: agree),
    /// and is the directory left by a power cut after it one of the model's crash states
    /// (admitted)? Needs /usr/bin/linux.uml, its dm-flakey module, dmsetup and filefrag
    /// (install with: apt-get install user-mode-linux e2fsprogs xfsprogs dmsetup). Exit 1 if
    /// any point disagrees or is not admitted.
    DiskError(DiskErrorArgs),
}

#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sinks (append and idempotent; the transactional sink is simulation-only).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,idempotent"
    )]
    pub sinks: Vec<SinkArg>,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format (not with --shard, which prints JSON lines for `keel merge`). Wall
    /// times differ from run to run; everything else does not.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table, conflicts_with = "shard")]
    pub format: TableFormatArg,
}

impl FidelityArgs {
    /// `--out FILE`, if given.
    pub(crate) fn out(&self) -> Option<&str> {
        match &self.check {
            FidelityCheck::Kill(args) => args.job.out.as_deref(),
            FidelityCheck::PowerCut(args) => args.job.out.as_deref(),
            FidelityCheck::DiskError(args) => args.job.out.as_deref(),
        }
    }
}

pub(crate) fn cmd_fidelity(args: &FidelityArgs) -> Result<Output, KeelError> {
    match &args.check {
        FidelityCheck::Kill(args) => cmd_kill(args),
        FidelityCheck::PowerCut(args) => cmd_power_cut(args),
        FidelityCheck::DiskError(args) => cmd_disk_error(args),
    }
}

fn cmd_kill(args: &KillArgs) -> Result<Output, KeelError> {
    // Options the shared arguments carry that a kill never reads: refused, not ignored.
    if args.scenario.seed != 0 {
        return Err(KeelError::usage(format!(
            "keel fidelity kill takes no --seed {}: a process-crash point draws nothing",
            args.scenario.seed
        )));
    }
    if args.scenario.fs_model != FsModelArg::Posix {
        return Err(KeelError::usage(
            "keel fidelity kill takes no --fs-model: a kill keeps the page cache, so every file system shows the same files",
        ));
    }
    let (spec, events) = prepare(&args.scenario)?;
    let sinks = dedup_kinds(args.sinks.iter().map(|&s| SinkKind::from(s)));
    if sinks.iter().any(SinkKind::is_transactional) {
        return Err(KeelError::usage(
            "keel fidelity kill: the transactional sink is simulation-only (its log is simulated)",
        ));
    }
    let baselines = baselines(&spec, &events, &sinks)?;
    let items: Vec<(u64, SinkKind, PlannedFault)> = sinks
        .iter()
        .flat_map(|&sink| {
            process_crash_points(&baselines[&sink], spec.seed)
                .into_iter()
                .map(move |point| (sink, point))
        })
        .enumerate()
        .map(|(index, (sink, point))| (index as u64, sink, point))
        .collect();
    let range = args
        .job
        .shard
        .map_or(0..items.len(), |shard| shard.range(items.len()));
    let mine = &items[range];
    let progress = Progress::new(mine.len(), args.job.quiet);
    let prefix = spec.command("run");
    let compared: Vec<Result<PointComparison, String>> = par_map_interruptible(
        mine,
        jobs(&args.job),
        |&(index, sink, point)| compare_point(&baselines[&sink], index, point, &prefix),
        &|result: &Result<PointComparison, String>| {
            progress.done(result.as_ref().map_or(true, |c| !c.differences.is_empty()))
        },
        &progress,
    )?;
    let compared: Vec<PointComparison> = KeelError::all_ok(compared)?;
    if let Some(shard) = args.job.shard {
        let mut lines = vec![ShardLine::FidelityKillHeader {
            spec,
            sinks,
            shard,
            total: items.len() as u64,
        }];
        lines.extend(compared.into_iter().map(ShardLine::FidelityPoint));
        return Ok(Output::ok(shard_output(&lines)));
    }
    let report = aggregate(&spec.label(), spec.protocol.name(), &sinks, &compared);
    Ok(kill_output(&report, args.format))
}

/// The report in `format`; exit 1 if any point disagrees.
pub(crate) fn kill_output(report: &FidelityReport, format: TableFormatArg) -> Output {
    let stdout = match table_format(format) {
        Some(format) => report.render(format),
        None => report.to_json(),
    };
    Output {
        stdout,
        exit_code: if report.disagreements() > 0 {
            EXIT_VIOLATION
        } else {
            0
        },
    }
}

/// The process-crash points of one sink's baseline, as `keel sweep --faults process-crash`
/// has them (every step where a process crash applies, after its effect).
pub(crate) fn process_crash_points(baseline: &Baseline, seed: u64) -> Vec<PlannedFault> {
    let sweep = SweepSpec {
        sinks: vec![baseline.spec.config.sink],
        faults: vec![FaultKind::ProcessCrash],
        depth: 1,
        outage_ms: 2_000,
        expect: None,
        power_loss_states_max: POWER_LOSS_STATES_MAX_DEFAULT,
        power_loss_points: crate::sweep::PowerLossPoints::States,
    };
    points(baseline.sites.aims(), FaultKind::ProcessCrash, seed, &sweep)
        .into_iter()
        .map(|(point, _)| point)
        .collect()
}

/// Runs one point (the `index`-th of the run) simulated and for real, and compares what
/// they left.
pub(crate) fn compare_point(
    baseline: &Baseline,
    index: u64,
    point: PlannedFault,
    prefix: &str,
) -> Result<PointComparison, String> {
    let sink = baseline.spec.config.sink;
    static DIR_NEXT: AtomicU64 = AtomicU64::new(0);
    let spec = RunSpec {
        plan: FaultPlan::new([point]).expect("one fault"),
        ..baseline.spec.clone()
    };
    let started = Instant::now();
    let simulated = runner::run(&spec);
    let simulated_us = started.elapsed().as_micros() as u64;
    let simulated = Side::simulated(&simulated, baseline);

    let dir = std::env::temp_dir().join(format!(
        "keel-fidelity-{}-{}",
        std::process::id(),
        DIR_NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let started = Instant::now();
    let real = run_real_here(&spec, &dir, None);
    let real_us = started.elapsed().as_micros() as u64;
    // The directory is this point's own, created by `run_real`.
    let _ = std::fs::remove_dir_all(&dir);
    let real = Side::real(&real?, baseline);
    let reproduce_simulated = reproduce_point(prefix, sink, &point);
    Ok(PointComparison {
        index,
        sink,
        point,
        differences: differences(&simulated, &real),
        simulated_us,
        real_us,
        reproduce_real: format!("{reproduce_simulated} --real-dir DIR"),
        reproduce_simulated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_sim::{CrashPoint, Fault};

    fn crash(step: u64, at: CrashPoint) -> PlannedFault {
        PlannedFault {
            step,
            fault: Fault::ProcessCrash { at },
        }
    }

    /// The disagree path without a fault switch in the engine: a "real" side that is the
    /// simulated run of another point (before step 23's sink write instead of after it: no
    /// duplicate instead of one) stands in for a real run that went differently.
    #[test]
    fn a_disagreeing_point_is_reported_with_both_commands_and_exits_1() {
        let spec = RunSpec::ch04_on(keel_sim::disk::FsModel::Posix);
        let baseline = Baseline::new(spec.clone());
        let side = |point| {
            let spec = RunSpec {
                plan: FaultPlan::new([point]).unwrap(),
                ..spec.clone()
            };
            Side::simulated(&runner::run(&spec), &baseline)
        };
        let after = crash(23, CrashPoint::After);
        let simulated = side(after);
        let real = side(crash(23, CrashPoint::Before));
        assert_eq!(
            differences(&simulated, &simulated.clone()),
            Vec::<&str>::new()
        );
        let differ = differences(&simulated, &real);
        // The same final windows; but the sink holds the replayed record twice on one side
        // (so its file, the directory listing and the oracle's tally differ), and the
        // traces differ from step 23 on.
        assert_eq!(differ, vec!["sink", "verdict", "directory", "trace"]);

        let prefix = "keel run --scenario ch04";
        let agreeing = |step| PointComparison {
            index: step,
            sink: SinkKind::Append,
            point: crash(step, CrashPoint::After),
            differences: Vec::new(),
            simulated_us: 100,
            real_us: 50_000,
            reproduce_simulated: String::new(),
            reproduce_real: String::new(),
        };
        let disagreeing = PointComparison {
            index: 23,
            sink: SinkKind::Append,
            point: after,
            differences: differ,
            simulated_us: 100,
            real_us: 50_000,
            reproduce_simulated: format!(
                "{prefix} --sink append --fault process-crash --at-step 23"
            ),
            reproduce_real: format!(
                "{prefix} --sink append --fault process-crash --at-step 23 --real-dir DIR"
            ),
        };
        let points = [agreeing(22), disagreeing, agreeing(24), agreeing(25)];
        let report = aggregate(
            "ch04",
            "safe",
            &[SinkKind::Append, SinkKind::Idempotent],
            &points,
        );
        assert_eq!(report.disagreements(), 1);
        let row = &report.rows[0];
        assert_eq!((row.points, row.agree, row.disagree), (4, 3, 1));
        assert_eq!(row.ratio, 500.0);
        let first = row.first_disagreement.as_ref().unwrap();
        assert_eq!(first.step, 23);
        assert_eq!(first.differs, vec!["sink", "verdict", "directory", "trace"]);
        // A sink without points: an empty row, nothing to disagree with.
        let empty = &report.rows[1];
        assert_eq!((empty.points, empty.agree, empty.disagree), (0, 0, 0));
        assert!(empty.first_disagreement.is_none());

        let table = kill_output(&report, TableFormatArg::Table);
        assert_eq!(table.exit_code, EXIT_VIOLATION);
        assert!(
            table
                .stdout
                .contains("step 23 (sink,verdict,directory,trace)"),
            "{}",
            table.stdout
        );
        assert!(
            table.stdout.ends_with(
                "\nappend step 23: sink, verdict, directory, trace differ\n  \
                 simulated: keel run --scenario ch04 --sink append --fault process-crash --at-step 23\n  \
                 real:      keel run --scenario ch04 --sink append --fault process-crash --at-step 23 --real-dir DIR\n"
            ),
            "{}",
            table.stdout
        );
        let json = kill_output(&report, TableFormatArg::Json);
        assert_eq!(json.exit_code, EXIT_VIOLATION);
        let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(
            json["rows"][0]["first_disagreement"],
            serde_json::json!({
                "step": 23,
                "differs": ["sink", "verdict", "directory", "trace"],
                "reproduce_simulated": "keel run --scenario ch04 --sink append --fault process-crash --at-step 23",
                "reproduce_real": "keel run --scenario ch04 --sink append --fault process-crash --at-step 23 --real-dir DIR",
            })
        );

        let agreed = aggregate("ch04", "safe", &[SinkKind::Append], &points[2..]);
        assert_eq!(kill_output(&agreed, TableFormatArg::Table).exit_code, 0);
    }
}
