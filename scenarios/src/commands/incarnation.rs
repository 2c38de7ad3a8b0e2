//! `keel __incarnation SPEC.json` (hidden): one real-mode process incarnation, started by
//! `keel run --real-dir` and `keel fidelity kill`, never by hand.

use super::output::Output;
use crate::error::KeelError;
use crate::real::incarnation::incarnation_main;
use crate::real::run::run_real;
use crate::real::{Pacing, RealRun};
use crate::runner::RunSpec;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Args)]
pub struct IncarnationArgs {
    /// The incarnation's spec (JSON), written by the parent.
    pub spec: PathBuf,
}

pub(crate) fn cmd_incarnation(args: &IncarnationArgs) -> Result<Output, KeelError> {
    incarnation_main(&args.spec).map_err(|message| KeelError {
        message,
        exit_code: 1,
    })?;
    Ok(Output {
        stdout: String::new(),
        exit_code: 0,
    })
}

/// Runs `spec` for real in `dir` with this very binary as the child, keeping the children's
/// files in a fresh directory under the system's temporary directory (removed afterwards);
/// `pacing` as [`run_real`] takes it.
pub(crate) fn run_real_here(
    spec: &RunSpec,
    dir: &Path,
    pacing: Option<Pacing>,
) -> Result<RealRun, String> {
    static WORK_NEXT: AtomicU64 = AtomicU64::new(0);
    let work = std::env::temp_dir().join(format!(
        "keel-incarnations-{}-{}",
        std::process::id(),
        WORK_NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find keel itself: {e}"))?;
    let result = run_real(spec, dir, &work, &exe, pacing);
    // Only files this run created live there.
    let _ = std::fs::remove_dir_all(&work);
    result
}
