//! Parallelism across independent runs only: a map over items on N threads whose result is
//! in item order, so every output is the same, byte for byte, whatever N is.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// `f` over `items` on `jobs` threads; results in `items` order. `on_done` is called once
/// per finished item (from any thread), e.g. to move a progress bar.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
) -> Vec<R> {
    let never = AtomicBool::new(false);
    par_map_until(items, jobs, f, on_done, &never).expect("nothing sets the stop flag")
}

/// [`par_map`] that stops when `stop` is set (Ctrl-C): no thread starts another item after
/// it sees the flag, items already running finish (a run is never cut in the middle), and the
/// result is `None`: an incomplete map is never returned as if complete.
pub fn par_map_until<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    stop: &AtomicBool,
) -> Option<Vec<R>> {
    let mut results = Vec::with_capacity(items.len());
    let complete = par_fold_until(items, jobs, f, on_done, &mut |r| results.push(r), stop);
    complete.then_some(results)
}

/// How far results may run ahead of the oldest one still running, per thread: what
/// [`par_fold_until`] holds at most while it waits to hand results over in order.
pub const REORDER_WINDOW_ITEMS_PER_JOB: usize = 1024;

/// `f` over `items` on `jobs` threads, handing each result to `consume` in item order (the
/// order, and so every output, is the same whatever `jobs` is), as soon as every earlier one
/// has been handed over: at most `REORDER_WINDOW_ITEMS_PER_JOB * jobs` results wait at once,
/// so memory does not grow with the items (a sweep of millions of points tallies them as
/// they finish). `on_done` is called once per finished item, from its thread. Stops as
/// [`par_map_until`] does when `stop` is set: `false` then, and `consume` has seen a prefix
/// of the results only.
pub fn par_fold_until<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    consume: &mut (dyn FnMut(R) + Send),
    stop: &AtomicBool,
) -> bool {
    par_fold_until_with(
        items,
        Threads::new(jobs),
        |_| (),
        |_, item| f(item),
        on_done,
        consume,
        stop,
    )
}

/// How a fold runs: on `jobs` threads, with at most `window_items_per_job * jobs` results
/// waiting to be handed over in order ([`REORDER_WINDOW_ITEMS_PER_JOB`] where an item is a
/// run; fewer where an item is a chunk of many runs, whose results wait with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threads {
    pub jobs: usize,
    pub window_items_per_job: usize,
}

impl Threads {
    /// `jobs` threads, each result a run's.
    pub fn new(jobs: usize) -> Threads {
        Threads {
            jobs,
            window_items_per_job: REORDER_WINDOW_ITEMS_PER_JOB,
        }
    }
}

/// [`par_fold_until`] where each thread has a state of its own: thread `w` (0 to `jobs` - 1;
/// the single-threaded path is thread 0) makes it with `worker(w)` before its first item,
/// and `f` gets it with every item that thread runs. For what threads would otherwise share
/// and contend on (a sweep's snapshots: two threads that clone and drop the same reference
/// counts spend a tenth of their time waiting on each other's cache lines). What an item
/// returns must not depend on which thread ran it.
pub fn par_fold_until_with<T: Sync, W, R: Send>(
    items: &[T],
    threads: Threads,
    worker: impl Fn(usize) -> W + Sync,
    f: impl Fn(&mut W, &T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
    consume: &mut (dyn FnMut(R) + Send),
    stop: &AtomicBool,
) -> bool {
    let Threads {
        jobs,
        window_items_per_job,
    } = threads;
    assert!(jobs >= 1);
    assert!(window_items_per_job >= 1);
    let stopped = || stop.load(Ordering::SeqCst);
    if jobs == 1 || items.len() <= 1 {
        let mut own = None;
        for item in items {
            if stopped() {
                return false;
            }
            let own = own.get_or_insert_with(|| worker(0));
            let result = f(own, item);
            on_done(&result);
            consume(result);
        }
        return true;
    }
    let window_items = window_items_per_job * jobs;
    struct Waiting<'c, R> {
        /// Finished results not yet handed over, by index (all above `next_to_consume`).
        results: std::collections::BTreeMap<usize, R>,
        next_to_consume: usize,
        consume: &'c mut (dyn FnMut(R) + Send),
    }
    let next = AtomicUsize::new(0);
    let waiting = Mutex::new(Waiting {
        results: std::collections::BTreeMap::new(),
        next_to_consume: 0,
        consume,
    });
    let handed_over = Condvar::new();
    std::thread::scope(|scope| {
        for thread in 0..jobs.min(items.len()) {
            let (worker, f) = (&worker, &f);
            let (next, waiting, handed_over) = (&next, &waiting, &handed_over);
            let stopped = &stopped;
            scope.spawn(move || {
                let mut own = None;
                loop {
                    if stopped() {
                        break;
                    }
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= items.len() {
                        break;
                    }
                    // Never more than the window ahead of the oldest result still to come (the
                    // thread that runs that one never waits here: its index is below the bound).
                    {
                        let mut state = waiting.lock().expect("no thread panics holding it");
                        while index >= state.next_to_consume + window_items && !stopped() {
                            state = handed_over
                                .wait(state)
                                .expect("no thread panics holding it");
                        }
                    }
                    if stopped() {
                        break;
                    }
                    let own = own.get_or_insert_with(|| worker(thread));
                    let result = f(own, &items[index]);
                    on_done(&result);
                    let mut state = waiting.lock().expect("no thread panics holding it");
                    assert!(index >= state.next_to_consume);
                    state.results.insert(index, result);
                    assert!(state.results.len() <= window_items);
                    let Waiting {
                        results,
                        next_to_consume,
                        consume,
                    } = &mut *state;
                    while let Some(result) = results.remove(next_to_consume) {
                        consume(result);
                        *next_to_consume += 1;
                    }
                    handed_over.notify_all();
                }
            });
        }
    });
    let state = waiting.into_inner().expect("no thread panicked");
    state.next_to_consume == items.len()
}

/// `range` (indices of consecutive items) cut into chunks at the multiples of `size`: the
/// same cuts whatever the thread count, and a chunk a thread runs at a time.
pub fn chunks_at_multiples(range: std::ops::Range<u64>, size: u64) -> Vec<std::ops::Range<u64>> {
    assert!(size >= 1);
    let mut chunks = Vec::new();
    let mut start = range.start;
    while start < range.end {
        let end = ((start / size + 1) * size).min(range.end);
        chunks.push(start..end);
        start = end;
    }
    chunks
}

/// The machine's cores, the default for `--jobs`.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_in_item_order_whatever_the_jobs() {
        let items: Vec<u64> = (0..1000).collect();
        let square = |x: &u64| x * x;
        let one = par_map(&items, 1, square, &|_| {});
        let four = par_map(&items, 4, square, &|_| {});
        assert_eq!(one, four);
        assert_eq!(one[999], 998_001);
        let done = AtomicUsize::new(0);
        par_map(&items, 3, square, &|_| {
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(done.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn a_fold_hands_results_over_in_item_order_whatever_the_jobs() {
        let items: Vec<u64> = (0..10_000).collect();
        let never = AtomicBool::new(false);
        for jobs in [1, 2, 5] {
            let mut seen = Vec::new();
            let done = AtomicUsize::new(0);
            let complete = par_fold_until(
                &items,
                jobs,
                |x| x * 3,
                &|_| {
                    done.fetch_add(1, Ordering::Relaxed);
                },
                &mut |r| seen.push(r),
                &never,
            );
            assert!(complete);
            assert_eq!(done.load(Ordering::Relaxed), 10_000);
            assert_eq!(seen, par_map(&items, 1, |x| x * 3, &|_| {}), "jobs={jobs}");
        }
        // A stop hands over a prefix only, and says so.
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        let complete = par_fold_until(
            &items,
            2,
            |x| *x,
            &|&x| {
                if x == 100 {
                    stop.store(true, Ordering::SeqCst);
                }
            },
            &mut |r| seen.push(r),
            &stop,
        );
        assert!(!complete);
        assert!(seen.len() < items.len());
        assert_eq!(seen, items[..seen.len()].to_vec());
    }

    #[test]
    fn each_thread_makes_its_own_state_once_and_keeps_it() {
        let items: Vec<u64> = (0..5_000).collect();
        let never = AtomicBool::new(false);
        for jobs in [1, 2, 3] {
            let made = Mutex::new(Vec::new());
            let mut seen = Vec::new();
            // A thread's state counts the items it ran: each result says how many that thread
            // had run before, which only a state kept from item to item can know.
            let threads = Threads {
                jobs,
                window_items_per_job: 7,
            };
            let complete = par_fold_until_with(
                &items,
                threads,
                |thread| {
                    made.lock().unwrap().push(thread);
                    (thread, 0u64)
                },
                |own: &mut (usize, u64), x| {
                    own.1 += 1;
                    (*x, own.0, own.1)
                },
                &|_| {},
                &mut |r| seen.push(r),
                &never,
            );
            assert!(complete);
            // At most one state a thread, made before its first item (a thread that ran no
            // item made none).
            let mut made = made.into_inner().unwrap();
            made.sort_unstable();
            let mut ran: Vec<usize> = seen.iter().map(|r| r.1).collect();
            ran.sort_unstable();
            ran.dedup();
            assert_eq!(made, ran, "jobs={jobs}");
            assert!(made.iter().all(|&thread| thread < jobs));
            assert_eq!(seen.iter().map(|r| r.0).collect::<Vec<_>>(), items);
            for thread in 0..jobs {
                let counts: Vec<u64> = seen.iter().filter(|r| r.1 == thread).map(|r| r.2).collect();
                assert_eq!(counts, (1..=counts.len() as u64).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_stop_flag_ends_the_map_at_a_run_boundary_with_no_result() {
        let items: Vec<u64> = (0..1000).collect();
        for jobs in [1, 3] {
            let stop = AtomicBool::new(false);
            let done = AtomicUsize::new(0);
            let result = par_map_until(
                &items,
                jobs,
                |x| x * 2,
                &|_| {
                    if done.fetch_add(1, Ordering::SeqCst) + 1 == 10 {
                        stop.store(true, Ordering::SeqCst);
                    }
                },
                &stop,
            );
            assert_eq!(result, None);
            // Each thread finishes the item it holds, then starts no other.
            let finished = done.load(Ordering::SeqCst);
            assert!((10..10 + jobs).contains(&finished), "{finished}");
            let never = AtomicBool::new(false);
            let all = par_map_until(&items, jobs, |x| x * 2, &|_| {}, &never).unwrap();
            assert_eq!(all, par_map(&items, 1, |x| x * 2, &|_| {}));
        }
    }
}
