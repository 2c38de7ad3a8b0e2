//! Ctrl-C: a long job (`sweep`, `explore`, `bench`, `fidelity kill`) stops at the next run
//! boundary, clears its progress bar and exits 130 without printing a partial report; any
//! other command is ended at once (it has nothing half-written: keel writes every file
//! through a temp file and a rename, see `files::write_atomically`).

use super::progress::Progress;
use crate::error::KeelError;
use crate::parallel::{par_fold_until_with, Threads};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the Ctrl-C handler while a long job runs: its threads start no other run.
static STOP: AtomicBool = AtomicBool::new(false);

/// Whether a long job is running (and so stops by itself at the next run boundary).
static LONG_JOB: AtomicBool = AtomicBool::new(false);

/// Installs the Ctrl-C (SIGINT) handler; `keel`'s `main` calls it once. The first Ctrl-C
/// during a long job asks it to stop; a Ctrl-C at any other time, or a second one, exits 130.
pub fn install_handler() {
    // Without a handler (e.g. the process already has one) Ctrl-C keeps its default action.
    let _ = ctrlc::set_handler(|| {
        if LONG_JOB.load(Ordering::SeqCst) && !STOP.swap(true, Ordering::SeqCst) {
            return;
        }
        eprintln!("error: interrupted (Ctrl-C)");
        std::process::exit(i32::from(crate::error::EXIT_INTERRUPTED));
    });
}

/// `f` over `items` on `jobs` threads, as `par_map`, stopping at the next run boundary on
/// Ctrl-C: then the progress bar is cleared and the error says how far the job got.
pub(crate) fn par_map_interruptible<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    progress: &Progress,
) -> Result<Vec<R>, KeelError> {
    let run = |_: &mut (), item: &T| f(item);
    par_map_interruptible_with(items, Threads::new(jobs), |_| (), run, on_done, progress)
}

/// [`par_map_interruptible`] with a state of each thread's own and a window of results
/// (`par_fold_until_with`).
pub(crate) fn par_map_interruptible_with<T: Sync, W, R: Send>(
    items: &[T],
    threads: Threads,
    worker: impl Fn(usize) -> W + Sync,
    f: impl Fn(&mut W, &T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    progress: &Progress,
) -> Result<Vec<R>, KeelError> {
    let mut results = Vec::with_capacity(items.len());
    let mut push = |r| results.push(r);
    par_fold_interruptible_with(items, threads, worker, f, on_done, &mut push, progress)?;
    Ok(results)
}

/// `f` over `items` on `jobs` threads, each result handed to `consume` in item order as it
/// is ready (`par_fold_until`: memory does not grow with the items), stopping at the next run
/// boundary on Ctrl-C as [`par_map_interruptible`] does; each thread with a state of its own,
/// at most `threads.window_items_per_job` results a thread waiting (`par_fold_until_with`).
pub(crate) fn par_fold_interruptible_with<T: Sync, W, R: Send>(
    items: &[T],
    threads: Threads,
    worker: impl Fn(usize) -> W + Sync,
    f: impl Fn(&mut W, &T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    consume: &mut (dyn FnMut(R) + Send),
    progress: &Progress,
) -> Result<(), KeelError> {
    LONG_JOB.store(true, Ordering::SeqCst);
    let complete = par_fold_until_with(items, threads, worker, f, on_done, consume, &STOP);
    LONG_JOB.store(false, Ordering::SeqCst);
    progress.finish();
    if complete {
        Ok(())
    } else {
        Err(KeelError::interrupted(format!(
            "interrupted (Ctrl-C) after {} of {} runs; no report printed",
            progress.runs_done(),
            progress.runs()
        )))
    }
}

/// [`par_fold_interruptible_with`] that also stops at the next run boundary once `deadline`
/// (a wall-clock budget) passes, or once `consume` returns false (it asks no more: then no
/// later result is handed to it). The items consumed are a prefix, and their number is
/// returned (all of them unless the fold was stopped). Where the deadline stops it depends
/// on the clock; what was consumed up to there does not, and where `consume` stops it does
/// not either.
#[allow(clippy::too_many_arguments)]
pub(crate) fn par_fold_budgeted_with<T: Sync, W, R: Send>(
    items: &[T],
    threads: Threads,
    worker: impl Fn(usize) -> W + Sync,
    f: impl Fn(&mut W, &T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    consume: &mut (dyn FnMut(R) -> bool + Send),
    progress: &Progress,
    deadline: Option<std::time::Instant>,
) -> Result<usize, KeelError> {
    let past = |deadline: Option<std::time::Instant>| {
        deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline)
    };
    // Stops on the deadline, on Ctrl-C (looked at as each run ends), or when consume asks.
    let stop = AtomicBool::new(past(deadline));
    let on_done_then_look = |r: &R| {
        on_done(r);
        if STOP.load(Ordering::SeqCst) || past(deadline) {
            stop.store(true, Ordering::SeqCst);
        }
    };
    let (mut consumed, mut halted) = (0usize, false);
    let mut counted = |r: R| {
        if halted {
            return;
        }
        consumed += 1;
        if !consume(r) {
            halted = true;
            stop.store(true, Ordering::SeqCst);
        }
    };
    LONG_JOB.store(true, Ordering::SeqCst);
    par_fold_until_with(
        items,
        threads,
        worker,
        f,
        &on_done_then_look,
        &mut counted,
        &stop,
    );
    LONG_JOB.store(false, Ordering::SeqCst);
    progress.finish();
    if STOP.load(Ordering::SeqCst) {
        return Err(KeelError::interrupted(format!(
            "interrupted (Ctrl-C) after {} of {} runs; no report printed",
            progress.runs_done(),
            progress.runs()
        )));
    }
    Ok(consumed)
}
