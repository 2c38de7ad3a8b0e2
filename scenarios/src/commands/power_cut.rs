//! `keel fidelity power-cut`: for each point (a power cut right after step N, as `keel sweep
//! --faults power-loss` has its steps), a real power cut in a user-mode Linux guest on a
//! fresh image, the surviving directory checked against the crash states the simulated
//! disk's model enumerates at step N, under the file system's own profile and under posix
//! (admitted or not by each), and, for an admitted state, real
//! recovery on a copy of it judged against the simulator's verdict for that state (agree or
//! not). Rows per file system, sink and delay; exit 1 on any point not admitted or any
//! disagreement. Ctrl-C stops at the next point boundary (the guests run in their own
//! process groups, so the running point ends by itself), exit 130, no report. Reads the
//! wall clock only to time whole points.

use super::args::{
    dedup_kinds, jobs, table_format, JobArgs, ScenarioArgs, SinkArg, TableFormatArg,
};
use super::files::prepare;
use super::interrupt::par_map_interruptible;
use super::output::{Output, EXIT_VIOLATION};
use super::progress::Progress;
use crate::baseline::{baselines, Baseline};
use crate::error::KeelError;
use crate::power_cut::{
    admit, aggregate, at_step, cut_plan, listing, model_states, recovered, simulated, Admission,
    PointResult, PowerCutReport,
};
use crate::real::recover_real;
use crate::runner::RunSpec;
use crate::uml::{fresh_scratch, kernel, kernel_version, power_cut, CutSetup, FileSystem};
use clap::{Args, ValueEnum};
use keel_engine::SinkKind;
use keel_sim::{FaultKind, FaultPlan};
use std::path::Path;
use std::time::Instant;

/// The longest delay between the process's death and the power cut.
const DELAY_S_MAX: u64 = 60;

#[derive(Debug, Args)]
pub struct PowerCutArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The file systems to cut the power on (each a fresh image per point).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ext4")]
    pub fs: Vec<FsArg>,

    /// The sinks (append and idempotent; the transactional sink is simulation-only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "append")]
    pub sinks: Vec<SinkArg>,

    /// The steps to cut the power after (default: every step of the fault-free run, as
    /// `keel sweep --faults power-loss` has them), e.g. 13,23,57.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub points: Option<Vec<u64>>,

    /// Seconds of real time between the process's death and the power cut, so journal
    /// commits and writeback can run (0 to 60), e.g. 0,6.
    #[arg(long, value_delimiter = ',', default_value = "0", value_name = "LIST")]
    pub delays_s: Vec<u64>,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format. Wall times differ from run to run; what survived may too (that is
    /// what is checked).
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

/// A file system with a user-mode Linux guest behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FsArg {
    Ext4,
    Xfs,
    Btrfs,
}

impl From<FsArg> for FileSystem {
    fn from(fs: FsArg) -> Self {
        match fs {
            FsArg::Ext4 => FileSystem::Ext4,
            FsArg::Xfs => FileSystem::Xfs,
            FsArg::Btrfs => FileSystem::Btrfs,
        }
    }
}

/// One point to cut.
#[derive(Clone, Copy, Debug)]
struct Item {
    fs: FileSystem,
    sink: SinkKind,
    delay_s: u64,
    step: u64,
}

pub(crate) fn cmd_power_cut(args: &PowerCutArgs) -> Result<Output, KeelError> {
    if args.job.shard.is_some() {
        return Err(KeelError::usage(
            "keel fidelity power-cut takes no --shard: its wall times do not merge",
        ));
    }
    if let Some(&delay) = args.delays_s.iter().find(|&&d| d > DELAY_S_MAX) {
        return Err(KeelError::usage(format!(
            "--delays-s {delay}: at most {DELAY_S_MAX} seconds"
        )));
    }
    let (spec, events) = prepare(&args.scenario)?;
    if !spec.fs_model.is_posix() {
        return Err(KeelError::usage(format!(
            "keel fidelity power-cut takes no --fs-model {}: it checks each file system against its own profile and against posix",
            spec.fs_model
        )));
    }
    let sinks = dedup_kinds(args.sinks.iter().map(|&s| SinkKind::from(s)));
    if sinks.iter().any(SinkKind::is_transactional) {
        return Err(KeelError::usage(
            "keel fidelity power-cut: the transactional sink is simulation-only (its log is simulated)",
        ));
    }
    let baselines = baselines(&spec, &events, &sinks)?;
    let file_systems = dedup_kinds(args.fs.iter().map(|&f| FileSystem::from(f)));
    let delays = dedup_kinds(args.delays_s.iter().copied());
    let mut items = Vec::new();
    for &fs in &file_systems {
        for &sink in &sinks {
            let steps = power_loss_steps(&baselines[&sink]);
            let chosen = match &args.points {
                None => steps.clone(),
                Some(points) => {
                    if let Some(&missing) = points.iter().find(|p| !steps.contains(p)) {
                        return Err(KeelError::usage(format!(
                            "--points {missing}: the {sink} sink's fault-free run has no such step (it has 0 to {})",
                            steps.last().copied().unwrap_or(0)
                        )));
                    }
                    dedup_kinds(points.iter().copied())
                }
            };
            for &delay_s in &delays {
                items.extend(chosen.iter().map(|&step| Item {
                    fs,
                    sink,
                    delay_s,
                    step,
                }));
            }
        }
    }
    let kernel = kernel().map_err(|message| KeelError {
        message,
        exit_code: 2,
    })?;
    let exe = std::env::current_exe().map_err(|e| KeelError {
        message: format!("cannot find keel itself: {e}"),
        exit_code: 1,
    })?;
    let progress = Progress::new(items.len(), args.job.quiet);
    let prefix = spec.command("fidelity power-cut");
    let results: Vec<Result<PointResult, String>> = par_map_interruptible(
        &items,
        jobs(&args.job),
        |item| {
            let reproduce = format!(
                "{prefix} --fs {} --sinks {} --points {} --delays-s {}",
                item.fs.name(),
                item.sink,
                item.step,
                item.delay_s
            );
            cut_point(&baselines[&item.sink], *item, &kernel, &exe, reproduce)
        },
        &|result: &Result<PointResult, String>| {
            progress.done(
                result
                    .as_ref()
                    .map_or(true, |p| !p.admitted() || p.agree == Some(false)),
            )
        },
        &progress,
    )?;
    let points: Vec<PointResult> = KeelError::all_ok(results)?;
    let report = aggregate(
        &spec.label(),
        spec.protocol.name(),
        &kernel_version(&kernel),
        points,
    );
    Ok(power_cut_output(&report, args.format))
}

/// The report in `format`; exit 1 if any point is not admitted or disagrees.
fn power_cut_output(report: &PowerCutReport, format: TableFormatArg) -> Output {
    let stdout = match table_format(format) {
        Some(format) => report.render(format),
        None => report.to_json(),
    };
    Output {
        stdout,
        exit_code: if report.failures() > 0 {
            EXIT_VIOLATION
        } else {
            0
        },
    }
}

/// The steps of a baseline where a power loss applies, as the sweep has them.
fn power_loss_steps(baseline: &Baseline) -> Vec<u64> {
    baseline
        .sites
        .aims()
        .filter(|s| s.faults.contains(&FaultKind::PowerLoss))
        .map(|s| s.step)
        .collect()
}

/// One point: the real cut, the model's states, and recovery on what survived. Its scratch
/// directory (image, scripts, consoles) is removed afterwards, kept on an error.
fn cut_point(
    baseline: &Baseline,
    item: Item,
    kernel: &Path,
    exe: &Path,
    reproduce: String,
) -> Result<PointResult, String> {
    let scratch = fresh_scratch("power-cut");
    let started = Instant::now();
    let profile = item.fs.profile();
    // The same baseline (the fault-free run does not depend on the profile) under the file
    // system's own profile; `baseline` is posix's.
    let own = Baseline {
        spec: RunSpec {
            fs_model: profile,
            ..baseline.spec.clone()
        },
        ..baseline.clone()
    };
    let states_at = |baseline: &Baseline| {
        let at = at_step(&baseline.spec, item.step)
            .ok_or_else(|| format!("step {}: the run ends before it", item.step))?;
        let states = model_states(&at.disk).map_err(|e| format!("step {}: {e}", item.step))?;
        Ok::<_, String>((at, states))
    };
    let (at, states) = states_at(&own)?;
    let (_, states_posix) = states_at(baseline)?;
    let setup = CutSetup {
        kernel: kernel.to_path_buf(),
        exe: exe.to_path_buf(),
        fs: item.fs,
        delay_s: item.delay_s,
        scratch: scratch.clone(),
    };
    let cut = RunSpec {
        plan: cut_plan(item.step),
        ..baseline.spec.clone()
    };
    let observed = power_cut(&setup, &cut).map_err(|e| {
        format!(
            "{} step {}: {e} (files kept in {})",
            item.fs.name(),
            item.step,
            scratch.display()
        )
    })?;
    let admission = admit(&observed, &states);
    let admission_posix = admit(&observed, &states_posix);
    // The own profile's state, unless only posix admits the directory.
    let (judge, judge_states, state) = match (&admission, &admission_posix) {
        (Admission::Admitted { state }, _) => (&own, &states, *state),
        (_, Admission::Admitted { state }) => (baseline, &states_posix, *state),
        (Admission::NotAdmitted { closest }, _) => (&own, &states, *closest),
    };
    let (mut simulated_verdict, mut real_verdict, mut agree) = (None, None, None);
    if judge_states[state as usize].files == observed {
        let (verdict, first) = simulated(judge, item.step, state);
        let dir = scratch.join("recover");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (name, bytes) in &observed {
            std::fs::write(dir.join(name), bytes).map_err(|e| format!("{name}: {e}"))?;
        }
        let rest = RunSpec {
            plan: FaultPlan::none(),
            ..judge.spec.clone()
        };
        let real = recover_real(&rest, &dir, &scratch.join("work"), exe, at.resume)?;
        let real = recovered(judge, first, &real);
        agree = Some(verdict == real);
        simulated_verdict = Some(verdict.summary());
        real_verdict = Some(real.summary());
    }
    let model = &judge_states[state as usize];
    let result = PointResult {
        fs: item.fs.name().to_string(),
        sink: item.sink,
        delay_s: item.delay_s,
        step: item.step,
        profile: profile.name().to_string(),
        states: states.len() as u64,
        admission,
        states_posix: states_posix.len() as u64,
        admission_posix,
        observed: listing(&observed),
        model: listing(&model.files),
        model_description: model.description.clone(),
        simulated_verdict,
        real_verdict,
        agree,
        seconds: started.elapsed().as_secs_f64(),
        reproduce,
    };
    // The directory is this point's own, made above.
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(result)
}
