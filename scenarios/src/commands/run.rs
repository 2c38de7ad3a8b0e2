//! `keel run`: one scenario, optionally with one fault, against the fault-free run.

use super::args::{
    parse_expectation, view_for, FaultArg, RunFormat, ScenarioArgs, SinkArg, ViewArg,
};
use super::files::{prepare, write_plan_file};
use super::incarnation::run_real_here;
use super::output::{Output, EXIT_VIOLATION};
use crate::error::KeelError;
use crate::plan_file::SavedPlan;
use crate::property::{Expectation, MATCHES_MODEL};
use crate::real::run::check_dir;
use crate::real::Pacing;
use crate::report::{real_run_report, run_report, CrashRequest, Judging, RunReport};
use crate::runner::View;
use crate::spec::ScenarioSpec;
use clap::{Args, ValueEnum};
use keel_engine::SinkKind;
use keel_sim::{CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sink.
    #[arg(long, value_enum, default_value_t = SinkArg::Append)]
    pub sink: SinkArg,

    /// Kill the process after event C (and after its checkpoint, if one was due).
    #[arg(long, value_name = "C", conflicts_with_all = ["crash_at_ms", "fault"])]
    pub crash_after_event: Option<u64>,

    /// Kill the process when the simulated clock reaches T ms (the chapter's "kill -9 after 2.6 s").
    #[arg(long, value_name = "T", conflicts_with = "fault")]
    pub crash_at_ms: Option<u64>,

    /// Inject one fault of this kind at --at-step (as `keel sweep` names a point).
    #[arg(long, value_enum, requires = "at_step")]
    pub fault: Option<FaultArg>,

    /// The step of --fault (`keel sites` lists them).
    #[arg(long, value_name = "N", requires = "fault")]
    pub at_step: Option<u64>,

    /// For --fault process-crash or power-loss: before or after the step's effect
    /// [default: after].
    #[arg(long, value_enum, requires = "fault")]
    pub at: Option<AtArg>,

    /// For --fault power-loss: which crash state the disk is left in (`keel sites` counts
    /// them per step) [default: 0].
    #[arg(long, value_name = "S", requires = "fault")]
    pub crash_state: Option<u64>,

    /// For --fault power-loss: which class of crash states the disk is left in, as a sweep
    /// with `--power-loss-points classes` numbers them (the class's first state)
    #[arg(
        long,
        value_name = "C",
        requires = "fault",
        conflicts_with = "crash_state"
    )]
    pub crash_state_class: Option<u64>,

    /// For --fault sink-unavailable: the outage, in simulated milliseconds [default: 2000].
    #[arg(long, value_name = "MS", requires = "fault")]
    pub outage_ms: Option<u64>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,

    /// Print the run's whole trace (every step, fault, crash, restart and recovery decision);
    /// with --format json, as the field `trace` (one string per line).
    #[arg(long)]
    pub trace: bool,

    /// Write the faults that took effect, with the run they belong to (scenario, knobs,
    /// seed, sink, view), to this plan file: `keel replay --plan FILE` alone replays it.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// The consumer view to judge (transactional sink only; default read_committed).
    #[arg(long, value_enum)]
    pub view: Option<ViewArg>,

    /// What the run must hold: a comma-separated list of no-loss, no-duplicates, no-wrong,
    /// no-rollback, recovers, consistent-view, or at-least-once / exactly-once (default: what
    /// the sink promises to the view; the verdict is printed either way). Exit 1 if the run
    /// breaks it.
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_expectation)]
    pub expect: Option<Expectation>,

    /// Run for real in DIR (empty or absent): each incarnation a real child process on a
    /// real directory, a process crash a real SIGKILL (append and idempotent sinks; process
    /// crashes and --crash-at-ms only). Time stays simulated unless --real-pacing.
    #[arg(long, value_name = "DIR")]
    pub real_dir: Option<std::path::PathBuf>,

    /// With --real-dir: the children sleep until each step's simulated time (an event's
    /// arrival, a restart delay, a kill by the clock) on the wall clock, scaled by
    /// --pacing-scale. The trace, the fingerprint and every figure stay those of the unpaced
    /// run.
    #[arg(long, requires = "real_dir")]
    pub real_pacing: bool,

    /// With --real-pacing: wall milliseconds per simulated millisecond (0.001 to 1000;
    /// 0.1 runs ten times faster than the simulated clock) [default: 1].
    #[arg(long, value_name = "F", requires = "real_pacing", value_parser = parse_pacing)]
    pub pacing_scale: Option<Pacing>,
}

fn parse_pacing(text: &str) -> Result<Pacing, String> {
    let scale: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    Pacing::new(scale)
}

/// Before or after a step's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AtArg {
    Before,
    After,
}

/// Sink-unavailable's outage when `--outage-ms` is not given.
const OUTAGE_MS_DEFAULT: u64 = 2_000;

/// `--at`, `--crash-state` and `--outage-ms` shape one kind of `--fault` each (clap has
/// already checked that `--fault` is there): anywhere else they would do nothing.
fn check_fault_options(args: &RunArgs) -> Result<(), KeelError> {
    let Some(kind) = args.fault else {
        return Ok(());
    };
    let kind_name = FaultKind::from(kind);
    if args.at.is_some() && !matches!(kind, FaultArg::ProcessCrash | FaultArg::PowerLoss) {
        return Err(KeelError::usage(format!(
            "--at applies to --fault process-crash and --fault power-loss only (a crash before or after the step's effect); a {kind_name} has no before or after"
        )));
    }
    if args.crash_state.is_some() && kind != FaultArg::PowerLoss {
        return Err(KeelError::usage(format!(
            "--crash-state applies to --fault power-loss only (it picks the disk state a power loss leaves); a {kind_name} leaves the disk as it is"
        )));
    }
    if args.crash_state_class.is_some() && kind != FaultArg::PowerLoss {
        return Err(KeelError::usage(format!(
            "--crash-state-class applies to --fault power-loss only (it picks the class of disk states a power loss leaves); a {kind_name} leaves the disk as it is"
        )));
    }
    if args.outage_ms.is_some() && kind != FaultArg::SinkUnavailable {
        return Err(KeelError::usage(format!(
            "--outage-ms applies to --fault sink-unavailable only (it is the length of the outage), not to a {kind_name}"
        )));
    }
    Ok(())
}

/// The fault `keel run` was asked for, if any.
fn run_fault(args: &RunArgs) -> Option<CrashRequest> {
    if let Some(c) = args.crash_after_event {
        return Some(CrashRequest::AfterEvent(c));
    }
    if let Some(t) = args.crash_at_ms {
        return Some(CrashRequest::AtMs(t));
    }
    let (kind, step) = (args.fault?, args.at_step?);
    let at = match args.at.unwrap_or(AtArg::After) {
        AtArg::Before => CrashPoint::Before,
        AtArg::After => CrashPoint::After,
    };
    let fault = match kind {
        FaultArg::ProcessCrash => Fault::ProcessCrash { at },
        FaultArg::PowerLoss => match args.crash_state_class {
            Some(class) => Fault::PowerLossClass {
                at,
                class,
                by_tail: false,
            },
            None => Fault::PowerLoss {
                at,
                state: args.crash_state.unwrap_or(0),
            },
        },
        FaultArg::DiskError => Fault::DiskError,
        FaultArg::SinkError => Fault::SinkError,
        FaultArg::AckLost => Fault::AckLost,
        FaultArg::SinkUnavailable => Fault::SinkUnavailable {
            duration_ms: args.outage_ms.unwrap_or(OUTAGE_MS_DEFAULT),
        },
        FaultArg::Zombie => Fault::Zombie,
        FaultArg::PageEviction => Fault::PageEviction,
    };
    Some(CrashRequest::AtStep(PlannedFault { step, fault }))
}

/// The command line that reproduces a run, as a user would type it.
fn reproduce_command(spec: &ScenarioSpec, args: &RunArgs) -> String {
    let mut command = format!(
        "{} --sink {}",
        spec.command("run"),
        SinkKind::from(args.sink)
    );
    match run_fault(args) {
        None => {}
        Some(CrashRequest::AfterEvent(c)) => command.push_str(&format!(" --crash-after-event {c}")),
        Some(CrashRequest::AtMs(t)) => command.push_str(&format!(" --crash-at-ms {t}")),
        Some(CrashRequest::AtStep(planned)) => {
            command.push_str(&format!(
                " --fault {} --at-step {}",
                planned.fault.kind(),
                planned.step
            ));
            match planned.fault {
                Fault::ProcessCrash { at } => command.push_str(&format!(" --at {at}")),
                Fault::PowerLoss { at, state } => {
                    command.push_str(&format!(" --at {at} --crash-state {state}"))
                }
                Fault::PowerLossClass { at, class, .. } => {
                    command.push_str(&format!(" --at {at} --crash-state-class {class}"))
                }
                Fault::SinkUnavailable { duration_ms } => {
                    command.push_str(&format!(" --outage-ms {duration_ms}"))
                }
                _ => {}
            }
        }
    }
    if let Some(view) = args.view {
        command.push_str(&format!(
            " --view {}",
            crate::runner::View::from(view).name()
        ));
    }
    command
}

pub(crate) fn cmd_run(args: &RunArgs) -> Result<Output, KeelError> {
    check_fault_options(args)?;
    let (spec, events) = prepare(&args.scenario)?;
    let sink = SinkKind::from(args.sink);
    let run_spec = spec.run_spec(&events, sink, FaultPlan::none())?;
    let judging = Judging {
        view: view_for(sink, args.view.map(View::from))?,
        expect: args.expect.clone(),
        keep_trace: args.trace,
    };
    let report = match &args.real_dir {
        None => run_report(
            &spec.label(),
            &run_spec,
            run_fault(args),
            &judging,
            reproduce_command(&spec, args),
        )?,
        Some(dir) => {
            crate::real::run::check_supported(&run_spec).map_err(KeelError::usage)?;
            check_dir(dir).map_err(KeelError::usage)?;
            let pacing = args
                .real_pacing
                .then(|| args.pacing_scale.unwrap_or(Pacing { scale: 1.0 }));
            let mut reproduce = format!(
                "{} --real-dir {}",
                reproduce_command(&spec, args),
                dir.display()
            );
            if let Some(pacing) = pacing {
                reproduce.push_str(" --real-pacing");
                if pacing.scale != 1.0 {
                    reproduce.push_str(&format!(" --pacing-scale {}", pacing.scale));
                }
            }
            let (report, _) = real_run_report(
                &spec.label(),
                &run_spec,
                run_fault(args),
                &judging,
                reproduce,
                |spec| run_real_here(spec, dir, pacing),
            )?;
            report
        }
    };
    if let Some(path) = &args.save_plan {
        let injected = FaultPlan::from_file(report.plan.clone()).expect("a plan that ran is valid");
        write_plan_file(path, &SavedPlan::of(&spec, sink, judging.view, &injected))?;
    }
    let violated = !report.failures.is_empty()
        && (args.expect.is_some() || report.failures.iter().any(|f| f == MATCHES_MODEL));
    Ok(Output {
        stdout: match args.format {
            RunFormat::Text if args.trace => {
                format!("{}trace:\n{}\n", report.to_text(), report.trace.join("\n"))
            }
            RunFormat::Text => report.to_text(),
            RunFormat::Json if args.trace => {
                #[derive(serde::Serialize)]
                struct WithTrace<'a> {
                    #[serde(flatten)]
                    report: &'a RunReport,
                    trace: &'a [String],
                }
                let json = WithTrace {
                    report: &report,
                    trace: &report.trace,
                };
                serde_json::to_string_pretty(&json).expect("a report always serializes") + "\n"
            }
            RunFormat::Json => report.to_json() + "\n",
        },
        exit_code: if violated { EXIT_VIOLATION } else { 0 },
    })
}
