//! Parallelism across independent runs only: a map over items on N threads whose result is
//! in item order, so every output is the same, byte for byte, whatever N is.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` over `items` on `jobs` threads; results in `items` order. `on_done` is called once
/// per finished item (from any thread), e.g. to move a progress bar.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    on_done: &(dyn Fn(&R) + Sync),
) -> Vec<R> {
    assert!(jobs >= 1);
    if jobs == 1 || items.len() <= 1 {
        return items
            .iter()
            .map(|item| {
                let result = f(item);
                on_done(&result);
                result
            })
            .collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(items.len()) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= items.len() {
                    break;
                }
                let result = f(&items[index]);
                on_done(&result);
                *slots[index]
                    .lock()
                    .expect("no worker panics while holding a slot") = Some(result);
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("no worker panicked")
                .expect("every item was mapped")
        })
        .collect()
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
}
