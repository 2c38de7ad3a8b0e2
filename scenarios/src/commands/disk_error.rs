//! `keel fidelity disk-error`: for each disk-error point (the fsync of a file at step N, as
//! `keel sweep --faults disk-error` fails it), a real fsync EIO in a user-mode Linux guest
//! on a fresh image (dm-flakey under the file's blocks), what the process saw and what
//! survived a power cut checked against the simulated disk's model (agree, admitted). Rows
//! per file system and sink; exit 1 on any point that disagrees or is not admitted. Ctrl-C
//! stops at the next point boundary, exit 130, no report. Reads the wall clock only to time
//! whole points. Also the hidden `keel __disk-error-guest`, the half that runs in the guest.

use super::args::{
    dedup_kinds, jobs, table_format, JobArgs, ScenarioArgs, SinkArg, TableFormatArg,
};
use super::files::prepare;
use super::interrupt::par_map_interruptible;
use super::output::{Output, EXIT_VIOLATION};
use super::power_cut::FsArg;
use super::progress::Progress;
use crate::baseline::{baselines, Baseline};
use crate::disk_error::{
    aggregate, check, model_point, DiskErrorPoint, DiskErrorReport, ModelPoint, PointLabel,
    Unchecked, INLINE, NOTHING_WRITTEN,
};
use crate::error::KeelError;
use crate::power_cut::crash_plan;
use crate::runner::RunSpec;
use crate::uml::flakey::{guest_fail, guest_setup, Cause, GuestSpec};
use crate::uml::{
    disk_error, dm_modules_dir, fresh_scratch, kernel, kernel_version, require_program, ErrorSetup,
    FileSystem,
};
use clap::{Args, ValueEnum};
use keel_engine::SinkKind;
use keel_sim::disk::BTRFS_INLINE_MAX_BYTES;
use keel_sim::{CrashPoint, FaultKind};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, Args)]
pub struct DiskErrorArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The file systems to fail the fsync on (each a fresh image per point), each checked
    /// against its own profile of the model (`--fs-model ext4`, `xfs`, `btrfs`).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ext4")]
    pub fs: Vec<FsArg>,

    /// The sinks (append and idempotent; the transactional sink is simulation-only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "append")]
    pub sinks: Vec<SinkArg>,

    /// What the device fails: `write`, the fsync's data writes, once (device-mapper's
    /// `error` target, which passes cache flushes); `write-and-flush`, dm-flakey, which also
    /// fails every cache flush after them; `model` (the default), per point the cause the
    /// model's failed fsync stands for: `write`, except for a file btrfs keeps inline (at
    /// most 2 KiB: no data write to fail), where the model's read-only file system is
    /// btrfs's reaction to a failed flush and `write-and-flush` fails only flushes.
    #[arg(long, value_enum, default_value_t = CauseArg::Model)]
    pub cause: CauseArg,

    /// The fsync steps to fail (default: every fsync of a file in the fault-free run, as
    /// `keel sweep --faults disk-error` fails them), e.g. 11,14.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub points: Option<Vec<u64>>,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format. Wall times differ from run to run; what the process saw and what
    /// survived may too (that is what is checked).
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

/// `--cause`: a device fault, or per point the one the model names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CauseArg {
    Model,
    Write,
    WriteAndFlush,
}

impl CauseArg {
    pub fn name(&self) -> &'static str {
        match self {
            CauseArg::Model => "model",
            CauseArg::Write => Cause::Write.name(),
            CauseArg::WriteAndFlush => Cause::WriteAndFlush.name(),
        }
    }

    /// The cause for a point on `fs` whose file is `len_bytes` long at the fsync.
    fn for_point(&self, fs: FileSystem, len_bytes: u64) -> Cause {
        match self {
            CauseArg::Model if fs == FileSystem::Btrfs && len_bytes <= BTRFS_INLINE_MAX_BYTES => {
                Cause::WriteAndFlush
            }
            CauseArg::Model | CauseArg::Write => Cause::Write,
            CauseArg::WriteAndFlush => Cause::WriteAndFlush,
        }
    }
}

/// One point to fail.
#[derive(Clone, Debug)]
struct Item {
    fs: FileSystem,
    sink: SinkKind,
    step: u64,
    file: String,
}

pub(crate) fn cmd_disk_error(args: &DiskErrorArgs) -> Result<Output, KeelError> {
    if args.job.shard.is_some() {
        return Err(KeelError::usage(
            "keel fidelity disk-error takes no --shard: its wall times do not merge",
        ));
    }
    let (spec, events) = prepare(&args.scenario)?;
    if !spec.fs_model.is_posix() {
        return Err(KeelError::usage(format!(
            "keel fidelity disk-error takes no --fs-model {}: it checks each file system against its own profile",
            spec.fs_model
        )));
    }
    let sinks = dedup_kinds(args.sinks.iter().map(|&s| SinkKind::from(s)));
    if sinks.iter().any(SinkKind::is_transactional) {
        return Err(KeelError::usage(
            "keel fidelity disk-error: the transactional sink is simulation-only (its log is simulated)",
        ));
    }
    let file_systems = dedup_kinds(args.fs.iter().map(|&f| FileSystem::from(f)));
    let baselines = baselines(&spec, &events, &sinks)?;
    let mut items = Vec::new();
    for &fs in &file_systems {
        for &sink in &sinks {
            let steps = fsync_steps(&baselines[&sink]);
            let chosen: Vec<(u64, String)> = match &args.points {
                None => steps.clone(),
                Some(points) => {
                    let mut chosen = Vec::new();
                    for &point in &dedup_kinds(points.iter().copied()) {
                        let found = steps.iter().find(|(step, _)| *step == point).ok_or_else(|| {
                            let list: Vec<String> = steps.iter().map(|(s, _)| s.to_string()).collect();
                            KeelError::usage(format!(
                                "--points {point}: not an fsync of a file in the {sink} sink's fault-free run (those are steps {})",
                                list.join(",")
                            ))
                        })?;
                        chosen.push(found.clone());
                    }
                    chosen
                }
            };
            items.extend(chosen.into_iter().map(|(step, file)| Item {
                fs,
                sink,
                step,
                file,
            }));
        }
    }
    let kernel = kernel().map_err(|message| KeelError {
        message,
        exit_code: 2,
    })?;
    let mut programs = vec![("dmsetup", "dmsetup"), ("filefrag", "e2fsprogs")];
    if file_systems.contains(&FileSystem::Btrfs) {
        programs.push(("btrfs", "btrfs-progs"));
    }
    for (program, package) in programs {
        require_program(program, package).map_err(|message| KeelError {
            message,
            exit_code: 2,
        })?;
    }
    let version = kernel_version(&kernel);
    let modules_dir = dm_modules_dir(&version).map_err(|message| KeelError {
        message,
        exit_code: 2,
    })?;
    let exe = std::env::current_exe().map_err(|e| KeelError {
        message: format!("cannot find keel itself: {e}"),
        exit_code: 1,
    })?;
    let mut checked = Vec::new();
    let mut nothing_to_fail = Vec::new();
    for item in items {
        // The file system's own profile (the fault-free run does not depend on it).
        let own = RunSpec {
            fs_model: item.fs.profile(),
            ..baselines[&item.sink].spec.clone()
        };
        let model = model_point(&own, item.step, &item.file).map_err(|message| KeelError {
            message,
            exit_code: 1,
        })?;
        // A data-write error fails nothing where btrfs keeps the file inline (its size at
        // the fsync within the limit the btrfs profile states).
        let inline = item.fs == FileSystem::Btrfs
            && args.cause == CauseArg::Write
            && model.before.len() as u64 <= BTRFS_INLINE_MAX_BYTES;
        let reason = if model.dirty_bytes == 0 {
            Some(NOTHING_WRITTEN)
        } else if inline {
            Some(INLINE)
        } else {
            None
        };
        if let Some(reason) = reason {
            nothing_to_fail.push(Unchecked {
                fs: item.fs.name().to_string(),
                sink: item.sink.to_string(),
                step: item.step,
                file: item.file,
                reason,
            });
        } else {
            checked.push((item, model));
        }
    }
    let progress = Progress::new(checked.len(), args.job.quiet);
    let prefix = spec.command("fidelity disk-error");
    let results: Vec<Result<DiskErrorPoint, String>> = par_map_interruptible(
        &checked,
        jobs(&args.job),
        |(item, model)| {
            let cause = args.cause.for_point(item.fs, model.before.len() as u64);
            let reproduce = format!(
                "{prefix} --fs {} --sinks {} --cause {} --points {}",
                item.fs.name(),
                item.sink,
                args.cause.name(),
                item.step,
            );
            let setup = ErrorSetup {
                kernel: kernel.clone(),
                exe: exe.clone(),
                fs: item.fs,
                cause,
                modules_dir: modules_dir.clone(),
                scratch: fresh_scratch("disk-error"),
            };
            fail_point(&baselines[&item.sink], item, model, &setup, reproduce)
        },
        &|result: &Result<DiskErrorPoint, String>| {
            progress.done(
                result
                    .as_ref()
                    .map_or(true, |p| !p.admitted() || !p.agrees()),
            )
        },
        &progress,
    )?;
    let points: Vec<DiskErrorPoint> = KeelError::all_ok(results)?;
    let mut report = aggregate(
        &spec.label(),
        spec.protocol.name(),
        &version,
        points,
        nothing_to_fail,
    );
    report.cause = args.cause.name().to_string();
    Ok(disk_error_output(&report, args.format))
}

/// The report in `format`; exit 1 if any point disagrees or is not admitted.
fn disk_error_output(report: &DiskErrorReport, format: TableFormatArg) -> Output {
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

/// The steps of a baseline that fsync a file (a disk error applies), with the file: its
/// fault-free run again, as rows (a baseline keeps only what a sweep aims at).
fn fsync_steps(baseline: &Baseline) -> Vec<(u64, String)> {
    crate::sites::sites(&baseline.spec)
        .1
        .into_iter()
        .filter(|s| s.op == "disk.fsync" && s.faults.contains(&FaultKind::DiskError))
        .map(|s| (s.step, s.target.clone()))
        .collect()
}

/// One point: the model's side, the real fsync EIO and power cut, the check. Its scratch
/// directory (image, scripts, consoles) is removed afterwards, kept on an error.
fn fail_point(
    baseline: &Baseline,
    item: &Item,
    model: &ModelPoint,
    setup: &ErrorSetup,
    reproduce: String,
) -> Result<DiskErrorPoint, String> {
    let started = Instant::now();
    let run = RunSpec {
        plan: crash_plan(item.step, CrashPoint::Before),
        ..baseline.spec.clone()
    };
    let observed = disk_error(setup, &run, &item.file).map_err(|e| {
        format!(
            "{} step {}: {e} (files kept in {})",
            item.fs.name(),
            item.step,
            setup.scratch.display()
        )
    })?;
    let label = PointLabel {
        fs: item.fs.name().to_string(),
        sink: item.sink,
        step: item.step,
        cause: setup.cause.name(),
        seconds: started.elapsed().as_secs_f64(),
        reproduce,
    };
    let point = check(label, model, &observed.view, &observed.survived);
    // The directory is this point's own, made by `disk_error`.
    let _ = std::fs::remove_dir_all(&setup.scratch);
    Ok(point)
}

/// What the guest half does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GuestPhase {
    /// Before the engine: load dm-mod and dm-flakey, make the linear device.
    Setup,
    /// After the engine was killed before its fsync: dm-flakey under the file, the fsync,
    /// what the process sees.
    Fail,
}

#[derive(Debug, Args)]
pub struct DiskErrorGuestArgs {
    pub phase: GuestPhase,
    /// The guest's spec (JSON), written by the host.
    pub spec: PathBuf,
}

/// `keel __disk-error-guest PHASE SPEC.json` (hidden): run inside the guest, never by hand.
pub(crate) fn cmd_disk_error_guest(args: &DiskErrorGuestArgs) -> Result<Output, KeelError> {
    let error = |message: String| KeelError {
        message,
        exit_code: 1,
    };
    let spec = read_guest_spec(&args.spec).map_err(error)?;
    match args.phase {
        GuestPhase::Setup => guest_setup(&spec),
        GuestPhase::Fail => guest_fail(&spec),
    }
    .map_err(error)?;
    Ok(Output {
        stdout: String::new(),
        exit_code: 0,
    })
}

fn read_guest_spec(path: &Path) -> Result<GuestSpec, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}
