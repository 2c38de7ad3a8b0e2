//! The parent of a real run: one real child process per incarnation on one real directory,
//! restarted after every SIGKILL until the input is done, as the simulated runner does.

use super::dir::{listing, ListedFile};
use super::incarnation::{ChildEnd, IncarnationSpec, PostMortem};
use super::pacing::Pacing;
use crate::runner::{Incarnation, IncarnationEnd, Outcome, RunSpec, RESTARTS_MAX};
use keel_engine::{EngineError, OperatorState};
use keel_sim::fault::PlanFile;
use keel_sim::{input_line, Crash, CrashKind, Fault, Fingerprint, Resume};
use serde::Serialize;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The name of the hidden subcommand a child runs.
pub const INCARNATION_COMMAND: &str = "__incarnation";

/// How one child process ended, as the parent saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChildExit {
    pub incarnation: u32,
    /// The signal that killed it ("SIGKILL"), if one did.
    pub signal: Option<String>,
    /// Its exit code, if it exited.
    pub exit_code: Option<i32>,
}

impl std::fmt::Display for ChildExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.signal, self.exit_code) {
            (Some(signal), _) => write!(f, "p{} killed by {signal}", self.incarnation),
            (None, Some(code)) => write!(f, "p{} exited {code}", self.incarnation),
            (None, None) => write!(f, "p{} ended", self.incarnation),
        }
    }
}

/// A finished real run: what the children left and what the parent saw.
#[derive(Clone, Debug)]
pub struct RealRun {
    pub incarnations: Vec<Incarnation>,
    pub children: Vec<ChildExit>,
    pub outcome: Outcome,
    pub final_state: OperatorState,
    /// The children's trace lines, in order.
    pub trace: Vec<String>,
    /// The digest of the run's input (`RunSpec::input_digest`), which the fingerprint hashes
    /// first, as a simulated run's does.
    pub input: u64,
    /// The faults that took effect.
    pub plan: PlanFile,
    /// The sink file's bytes (None if it does not exist).
    pub sink: Option<Vec<u8>>,
    /// The directory's final listing.
    pub listing: Vec<ListedFile>,
}

impl RealRun {
    /// The names of the files the run left in its directory.
    pub fn file_names(&self) -> Vec<String> {
        self.listing.iter().map(|file| file.name.clone()).collect()
    }

    /// FNV-1a 64 of the input's line and the trace's text, as `Trace::fingerprint` computes
    /// it for a simulated run (each step's data digest is on its line).
    pub fn fingerprint(&self) -> Fingerprint {
        let mut text = input_line(self.input);
        text.push('\n');
        for line in &self.trace {
            text.push_str(line);
            text.push('\n');
        }
        Fingerprint::of(text.as_bytes())
    }
}

/// Checks that real mode can run `spec`: file sinks, process crashes and kills by the clock.
pub fn check_supported(spec: &RunSpec) -> Result<(), String> {
    if spec.config.sink.is_transactional() {
        return Err(
            "--real-dir: the transactional sink is simulation-only (its log is simulated)"
                .to_string(),
        );
    }
    for planned in spec.plan.to_file().faults {
        if !matches!(planned.fault, Fault::ProcessCrash { .. }) {
            return Err(format!(
                "--real-dir supports process crashes only; {} is simulation-only",
                planned.fault.kind()
            ));
        }
    }
    Ok(())
}

/// Checks that `dir` is an empty directory, or absent and then creates it (with its
/// parents): a path that cannot be made a directory is refused here, as bad input, before
/// anything runs. Never deletes anything.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    check_dir_empty(dir)?;
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "--real-dir {}: cannot create the directory: {e}",
            dir.display()
        )
    })
}

/// Checks that `dir` is absent or an empty directory. Never deletes anything.
fn check_dir_empty(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(format!(
                    "--real-dir {}: the directory is not empty (keel never deletes your files; give an empty or absent one)",
                    dir.display()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("--real-dir {}: {e}", dir.display())),
    }
}

/// Runs `spec` for real in `dir` (empty or absent), one child process per incarnation (`exe
/// __incarnation`), keeping the children's trace, spec and post-mortem files in `work`; with
/// `pacing`, each child sleeps until the wall time of each step's simulated time.
pub fn run_real(
    spec: &RunSpec,
    dir: &Path,
    work: &Path,
    exe: &Path,
    pacing: Option<Pacing>,
) -> Result<RealRun, String> {
    check_supported(spec)?;
    check_dir(dir)?;
    run_children(spec, dir, work, exe, pacing, None)
}

/// Goes on with a run whose process died where `resume` says (a power cut, say), on `dir` as
/// it holds what survived: one child per incarnation from the next one on, as [`run_real`]
/// after a crash. The report's incarnations, children and trace are the new ones only.
pub fn recover_real(
    spec: &RunSpec,
    dir: &Path,
    work: &Path,
    exe: &Path,
    resume: Resume,
) -> Result<RealRun, String> {
    check_supported(spec)?;
    run_children(spec, dir, work, exe, None, Some(resume))
}

fn run_children(
    spec: &RunSpec,
    dir: &Path,
    work: &Path,
    exe: &Path,
    pacing: Option<Pacing>,
    mut resume: Option<Resume>,
) -> Result<RealRun, String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let mut incarnations = Vec::new();
    let mut children = Vec::new();
    let mut trace = Vec::new();
    let mut injected = Vec::new();
    let mut finished = None;
    let first = resume.map_or(0, |r| r.incarnation + 1);
    for incarnation in first..=first + RESTARTS_MAX {
        let file = |suffix: &str| -> PathBuf { work.join(format!("p{incarnation}.{suffix}")) };
        let child_spec = IncarnationSpec {
            events: spec.events.to_vec(),
            config: spec.config,
            plan: spec.plan.to_file(),
            seed: spec.seed,
            restart_delay_ms: spec.restart_delay_ms,
            transaction_timeout_ms: spec.transaction_timeout_ms,
            resume,
            dir: dir.clone(),
            trace_file: file("trace"),
            post_mortem_file: file("post-mortem.json"),
            pacing,
        };
        let spec_file = file("spec.json");
        std::fs::write(
            &spec_file,
            serde_json::to_vec(&child_spec).expect("a spec serializes"),
        )
        .map_err(|e| format!("{}: {e}", spec_file.display()))?;
        let status = Command::new(exe)
            .arg(INCARNATION_COMMAND)
            .arg(&spec_file)
            .status()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let exit = ChildExit {
            incarnation,
            signal: status.signal().map(signal_name),
            exit_code: status.code(),
        };
        let lines = std::fs::read_to_string(&child_spec.trace_file).unwrap_or_default();
        trace.extend(lines.lines().map(str::to_string));
        let post_mortem: PostMortem = std::fs::read(&child_spec.post_mortem_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| format!("{exit} and left no post-mortem"))?;
        let killed = status.signal() == Some(libc::SIGKILL);
        if killed != matches!(post_mortem.end, ChildEnd::Crashed { .. }) {
            return Err(format!(
                "{exit}, but its post-mortem says {:?}",
                post_mortem.end
            ));
        }
        children.push(exit);
        injected.extend(post_mortem.injected.iter().copied());
        resume = Some(post_mortem.resume);
        let (end, outcome) = match post_mortem.end {
            ChildEnd::Completed => (IncarnationEnd::Completed, Some(Outcome::Completed)),
            ChildEnd::Crashed { step, at, time_ms } => (
                IncarnationEnd::Crashed(Crash {
                    step,
                    at,
                    time_ms,
                    kind: CrashKind::Process,
                }),
                None,
            ),
            ChildEnd::Aborted(message) => (IncarnationEnd::Aborted(EngineError { message }), None),
            ChildEnd::Failed(message) => {
                let error = EngineError { message };
                (
                    IncarnationEnd::Failed(error.clone()),
                    Some(Outcome::RecoveryFailed(error)),
                )
            }
        };
        incarnations.push(Incarnation {
            stats: post_mortem.stats,
            end,
        });
        if let Some(outcome) = outcome {
            finished = Some((outcome, post_mortem.state));
            break;
        }
    }
    let (outcome, final_state) =
        finished.unwrap_or((Outcome::RestartLimit, OperatorState::default()));
    let sink_path = dir.join(crate::observation::documented_sink_file(spec.config.sink));
    Ok(RealRun {
        incarnations,
        children,
        outcome,
        final_state,
        trace,
        input: spec.input_digest(),
        plan: PlanFile {
            faults: injected,
            kill_at_ms: spec.plan.kill_time_ms(),
        },
        sink: std::fs::read(sink_path).ok(),
        listing: listing(&dir).map_err(|e| format!("{}: {e}", dir.display()))?,
    })
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGKILL => "SIGKILL".to_string(),
        libc::SIGABRT => "SIGABRT".to_string(),
        libc::SIGSEGV => "SIGSEGV".to_string(),
        other => format!("signal {other}"),
    }
}
