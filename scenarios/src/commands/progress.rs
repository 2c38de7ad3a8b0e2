//! The progress bar of long jobs, on stderr.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

/// A progress bar on stderr (runs done, failures so far, rate, time left), hidden with
/// `--quiet` or when stderr is not a terminal.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    failures: AtomicU64,
    runs_done: AtomicU64,
    /// The runs the job has (its items may be chunks of several).
    runs: u64,
}

impl Progress {
    pub(crate) fn new(len: usize, quiet: bool) -> Progress {
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs, {msg} failing, {rate}, eta {eta}",
        )
        .expect("a valid template")
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} runs/s", state.per_sec());
            },
        );
        let progress = Progress::with_style(len as u64, quiet, style);
        if let Some(bar) = &progress.bar {
            bar.set_message("0");
        }
        progress
    }

    /// The bar of a depth-2 sweep's count of its pairs, before any point runs: `len` first
    /// faults, each run once to its end (silent, this took minutes on long streams).
    pub(crate) fn counting(len: u64, quiet: bool) -> Progress {
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} first faults run to count the pairs, eta {eta}",
        )
        .expect("a valid template");
        Progress::with_style(len, quiet, style)
    }

    /// The bar of `keel teach`: the crash points of its sweeps, each sweep's added to its
    /// length once the sweep knows them ([`Progress::grow`]), so it starts empty.
    pub(crate) fn teaching(quiet: bool) -> Progress {
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} crash points of the sweeps planned so far, {rate}",
        )
        .expect("a valid template")
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} points/s", state.per_sec());
            },
        );
        Progress::shown(0, !quiet && std::io::stderr().is_terminal(), style)
    }

    /// `items` more items to run.
    pub(crate) fn grow(&self, items: u64) {
        if let Some(bar) = &self.bar {
            bar.inc_length(items);
        }
    }

    /// A bar of `len` items drawn in `style`, if it is to be seen.
    fn with_style(len: u64, quiet: bool, style: ProgressStyle) -> Progress {
        Progress::shown(
            len,
            !quiet && std::io::stderr().is_terminal() && len > 1,
            style,
        )
    }

    /// A bar of `len` items drawn in `style`, drawn only if `visible`.
    fn shown(len: u64, visible: bool, style: ProgressStyle) -> Progress {
        let bar = visible.then(|| {
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            bar.set_style(style.progress_chars("=> "));
            bar
        });
        Progress {
            bar,
            failures: AtomicU64::new(0),
            runs_done: AtomicU64::new(0),
            runs: len,
        }
    }

    pub(crate) fn done(&self, failed: bool) {
        self.done_many(1, failed);
    }

    /// `items` finished alike (a sweep record's span of points): all failed, or none.
    pub(crate) fn done_many(&self, items: u64, failed: bool) {
        self.runs_done.fetch_add(items, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            if failed {
                let failures = self.failures.fetch_add(items, Ordering::Relaxed) + items;
                bar.set_message(failures.to_string());
            }
            bar.inc(items);
        }
    }

    /// Items finished so far.
    pub(crate) fn runs_done(&self) -> u64 {
        self.runs_done.load(Ordering::Relaxed)
    }

    /// The runs the job has.
    pub(crate) fn runs(&self) -> u64 {
        self.runs
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// The bar never outlives its job, whatever way the job ends.
    fn drop(&mut self) {
        self.finish();
    }
}
