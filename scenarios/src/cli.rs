//! The `keel` command line: the top-level clap definitions (doc comments are the help text),
//! dispatch to one module per command under `crate::commands`, and `main`.
//! Only this module and `crate::commands` print, read files or write them.

pub use crate::commands::output::{Output, EXIT_VIOLATION};

use crate::commands::bench::{cmd_bench, BenchArgs};
use crate::commands::disk_error::{cmd_disk_error_guest, DiskErrorGuestArgs};
use crate::commands::explore::{cmd_explore, ExploreArgs};
use crate::commands::fidelity::{cmd_fidelity, FidelityArgs};
use crate::commands::files::write_out;
use crate::commands::gen::{cmd_gen, GenArgs};
use crate::commands::incarnation::{cmd_incarnation, IncarnationArgs};
use crate::commands::interrupt::install_handler;
use crate::commands::job::{cmd_job, JobCommandArgs};
use crate::commands::merge::{cmd_merge, MergeArgs};
use crate::commands::replay::{cmd_replay, ReplayArgs};
use crate::commands::run::{cmd_run, RunArgs};
use crate::commands::shrink::{cmd_shrink, ShrinkArgs};
use crate::commands::sites::{cmd_sites, SitesArgs};
use crate::commands::sweep::{cmd_sweep, SweepArgs};
use crate::commands::teach::{cmd_teach, TeachArgs};
use crate::error::KeelError;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

/// keel: deterministic simulation testing for a small stream-processing engine.
///
/// Runs the chapter-04 engine on a simulated clock and an in-memory disk, kills it where you
/// ask, restarts it from its last checkpoint and counts what the sink ends up with.
#[derive(Debug, Parser)]
#[command(name = "keel", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario once, optionally with one fault, and compare with the fault-free run.
    /// (With --sources or --parallelism: a parallel job, `keel job run`.)
    Run(RunArgs),
    /// List every step of the fault-free run and the faults that apply at each.
    Sites(SitesArgs),
    /// Inject every single fault at every step where it applies, and tally what the sink got.
    /// (With --sources or --parallelism: a parallel job, `keel job sweep`.)
    Sweep(SweepArgs),
    /// Run thousands of seeds, each a swarm-drawn fault plan; tally per seed and per sink.
    /// (With --sources or --parallelism: a parallel job, `keel job explore`.)
    Explore(ExploreArgs),
    /// Replay one seed (or a plan file) step by step: the whole trace, tallies, fingerprint.
    Replay(ReplayArgs),
    /// Write a synthetic event stream (JSON lines, deterministic per seed) to a file or stdout.
    Gen(GenArgs),
    /// Reduce a failing seed's plan (or a plan file) to a minimal one that fails the same way.
    Shrink(ShrinkArgs),
    /// Combine `--shard` output files into exactly the report an unsharded run prints.
    Merge(MergeArgs),
    /// The chapter's tables (and more), each computed live, in English or Chinese; pictures.
    Teach(TeachArgs),
    /// A parallel job (sources, keyed window operators, a sink) under a seeded scheduler:
    /// barriers, aligned, unaligned and at-least-once checkpoints, two-phase commit.
    Job(JobCommandArgs),
    /// Measure simulation speed: explore seeds on the wall clock, print runs and steps per second.
    #[command(mut_arg("seed", |a| a.hide(true)))]
    Bench(BenchArgs),
    /// Does the simulator predict reality? Run each crash point simulated and for real, compare.
    Fidelity(FidelityArgs),
    /// (internal) One real-mode process incarnation; `keel run --real-dir` starts them.
    #[command(name = "__incarnation", hide = true)]
    Incarnation(IncarnationArgs),
    /// (internal) The guest half of `keel fidelity disk-error`, run inside user-mode Linux.
    #[command(name = "__disk-error-guest", hide = true)]
    DiskErrorGuest(DiskErrorGuestArgs),
}

/// Runs a parsed command line and returns what to print on stdout (nothing, when `--out`
/// wrote it to a file).
pub fn execute(cli: &Cli) -> Result<Output, KeelError> {
    execute_to(cli, None)
}

/// [`execute`], with `stdout` for what a command prints as it goes rather than at its end
/// (a shard's lines, without `--out`): `keel`'s `main` passes its stdout, and the
/// output returned then holds the rest.
pub fn execute_to(cli: &Cli, stdout: Option<&mut (dyn Write + Send)>) -> Result<Output, KeelError> {
    match &cli.command {
        Command::Run(args) => cmd_run(args),
        Command::Sites(args) => cmd_sites(args),
        Command::Sweep(args) => cmd_sweep(args, stdout),
        Command::Explore(args) => cmd_explore(args, stdout),
        Command::Replay(args) => cmd_replay(args),
        Command::Shrink(args) => cmd_shrink(args),
        Command::Gen(args) => cmd_gen(args),
        Command::Job(args) => cmd_job(args),
        Command::Merge(args) => cmd_merge(args),
        Command::Teach(args) => cmd_teach(args),
        Command::Bench(args) => cmd_bench(args),
        Command::Fidelity(args) => write_out(args.out(), cmd_fidelity(args)?),
        Command::Incarnation(args) => cmd_incarnation(args),
        Command::DiskErrorGuest(args) => cmd_disk_error_guest(args),
    }
}

/// `keel run|sweep|explore` given `--sources` or `--parallelism` are the parallel job's
/// commands, `keel job run|sweep|explore` (which, for a graph that chains, are the chapter's
/// again: `crate::commands::chaining`). Any other command line is returned as it is.
pub fn job_alias(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let is_graph_option = |arg: &std::ffi::OsString| {
        let arg = arg.to_string_lossy();
        ["--sources", "--parallelism"]
            .iter()
            .any(|name| arg == *name || arg.starts_with(&format!("{name}=")))
    };
    let aliased = args
        .get(1)
        .is_some_and(|sub| ["run", "sweep", "explore"].iter().any(|c| sub == *c))
        && args.iter().skip(2).any(is_graph_option);
    if !aliased {
        return args;
    }
    let mut job = vec![args[0].clone(), "job".into()];
    job.extend(args.into_iter().skip(1));
    job
}

/// Why a command line did not become a [`Cli`].
#[derive(Debug)]
pub enum ParseError {
    /// Clap's own (it prints it, help and version included, and picks the exit code).
    Clap(clap::Error),
    /// keel's: the events of a job could not be read, or a chained job was given an option
    /// of the task graph.
    Keel(KeelError),
}

/// A command line as `keel` takes it: `keel run|sweep|explore` with `--sources` or
/// `--parallelism` are `keel job ...` ([`job_alias`]), and a job whose graph chains (one
/// source, one operator, events without keys) is the chapter's command
/// (`crate::commands::chaining`).
pub fn parse_command_line(argv: Vec<std::ffi::OsString>) -> Result<Cli, ParseError> {
    use crate::commands::chaining::{refused_on_chained, resolve, Resolved};
    use crate::commands::job::JobCommand;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match resolve(job_alias(argv)).map_err(ParseError::Keel)? {
        Resolved::AsGiven(argv) => Cli::try_parse_from(argv).map_err(ParseError::Clap),
        Resolved::Chained(argv) => {
            let command = argv
                .get(1)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(option) = task_graph_option(&command, &argv) {
                return Err(ParseError::Keel(refused_on_chained(&command, &option)));
            }
            Cli::try_parse_from(&argv).map_err(|error| {
                match (error.kind(), error.get(ContextKind::InvalidArg)) {
                    (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) => {
                        let option = arg.split('=').next().unwrap_or(arg);
                        ParseError::Keel(refused_on_chained(&command, option))
                    }
                    _ => ParseError::Clap(error),
                }
            })
        }
        Resolved::TasksWithStdin(argv, events) => {
            let cli = Cli::try_parse_from(argv).map_err(ParseError::Clap)?;
            if let Command::Job(job) = &cli.command {
                let args = match &job.command {
                    JobCommand::Run(a) => &a.job,
                    JobCommand::Sweep(a) => &a.job,
                    JobCommand::Explore(a) => &a.job,
                    JobCommand::Teach(_) => unreachable!("teach is never resolved"),
                };
                assert!(args.events_read.set(events).is_ok(), "set once");
            }
            Ok(cli)
        }
    }
}

/// The first option on a chained job's command line (`argv`, the chapter's `command`'s) that
/// belongs to the task graph: one `keel job COMMAND` takes and `keel COMMAND` does not, or
/// spells with another meaning (`--checkpoint-mode`, which the chapter's engine refuses).
fn task_graph_option(command: &str, argv: &[std::ffi::OsString]) -> Option<String> {
    use clap::CommandFactory;
    let cli = Cli::command();
    let longs = |c: &clap::Command| -> Vec<String> {
        c.get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    };
    let chapter = longs(cli.find_subcommand(command)?);
    let job = longs(cli.find_subcommand("job")?.find_subcommand(command)?);
    argv.iter().skip(2).find_map(|arg| {
        let arg = arg.to_string_lossy();
        let name = arg.split('=').next().unwrap_or(&arg);
        let graph_only = job.iter().any(|j| j == name)
            && (!chapter.iter().any(|c| c == name) || name == "--checkpoint-mode");
        graph_only.then(|| name.to_string())
    })
}

/// `keel`'s whole life: parse, execute, print once, exit with a clear code. Ctrl-C stops a
/// long job at the next run boundary (exit 130, no report) and any other command at once.
pub fn main() -> ExitCode {
    let cli = match parse_command_line(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(ParseError::Clap(error)) => error.exit(),
        Err(ParseError::Keel(error)) => {
            eprintln!("error: {error}");
            return error.exit_code();
        }
    };
    #[cfg(feature = "mutants")]
    if let Err(error) = crate::property::mutant::install_from_env() {
        eprintln!("error: {error}");
        return ExitCode::from(2);
    }
    install_handler();
    let mut stdout = std::io::BufWriter::new(std::io::stdout());
    let executed = execute_to(&cli, Some(&mut stdout));
    drop(stdout);
    match executed {
        Ok(output) => match print_report(&output.stdout) {
            Ok(()) => ExitCode::from(output.exit_code),
            Err(error) => {
                eprintln!("error: cannot write the report to stdout: {error}");
                ExitCode::from(2)
            }
        },
        Err(error) => {
            eprintln!("error: {error}");
            error.exit_code()
        }
    }
}

/// Prints the report. A reader that stops early (`keel sweep | head`) closes the pipe: that
/// is not an error of the run, so the verdict's exit code stands and nothing is printed.
fn print_report(report: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(report.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::fidelity::FidelityCheck;
    use clap::{CommandFactory, Parser};

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Each command's scenario options record which were given on the command line (what
    /// `replay` and `shrink` pass on), and none that was not.
    #[test]
    fn given_sees_every_option() {
        let given = |argv: &[&str]| {
            let cli = Cli::try_parse_from(argv).expect("a valid command line");
            match cli.command {
                Command::Run(args) => args.scenario.given,
                Command::Sites(args) => args.scenario.given,
                Command::Sweep(args) => args.scenario.given,
                Command::Explore(args) => args.scenario.given,
                Command::Replay(args) => args.target.scenario.given,
                Command::Shrink(args) => args.target.scenario.given,
                Command::Bench(args) => args.scenario.given,
                Command::Fidelity(cmd) => match cmd.check {
                    FidelityCheck::Kill(args) => args.scenario.given,
                    FidelityCheck::PowerCut(args) => args.scenario.given,
                    FidelityCheck::DiskError(args) => args.scenario.given,
                },
                Command::Merge(_)
                | Command::Teach(_)
                | Command::Gen(_)
                | Command::Job(_)
                | Command::Incarnation(_)
                | Command::DiskErrorGuest(_) => {
                    unreachable!("no scenario options")
                }
            }
        };
        for (argv, id) in [
            (&["keel", "run", "--seed", "5"][..], "seed"),
            (&["keel", "run", "--sink", "idempotent"][..], "sink"),
            (&["keel", "run", "--format", "json"][..], "format"),
            (&["keel", "sites", "--seed", "5"][..], "seed"),
            (&["keel", "sweep", "--outage-ms", "5"][..], "outage_ms"),
            (&["keel", "explore", "--seed", "5"][..], "seed"),
            (&["keel", "explore", "--outage-ms", "5"][..], "outage_ms"),
            (&["keel", "replay", "--view", "read_committed"][..], "view"),
            (
                &["keel", "replay", "--check-determinism"][..],
                "check_determinism",
            ),
            (&["keel", "shrink", "--window", "20"][..], "window"),
            (&["keel", "bench", "--seed", "5"][..], "seed"),
        ] {
            let given = given(argv);
            assert!(given.has(id), "{argv:?}: {given:?}");
            assert!(!given.has("checkpoint_every"), "{argv:?}: {given:?}");
        }
    }
}
