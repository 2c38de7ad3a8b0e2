//! `Recent`: the newest few entries a memo remembered, shared between threads and bounded
//! (`ChainMemo` and `CheckpointMemo` keep their entries in one).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// At most `MAX` entries, the oldest dropped first. Behind a lock taken only to copy out the
/// entries' handles and to remember one: a lookup's comparisons run outside it.
pub struct Recent<T, const MAX: usize> {
    entries: Mutex<VecDeque<Arc<T>>>,
}

impl<T, const MAX: usize> Default for Recent<T, MAX> {
    fn default() -> Self {
        Recent {
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl<T, const MAX: usize> Recent<T, MAX> {
    /// The newest entry that `matches`.
    pub fn find(&self, matches: impl Fn(&T) -> bool) -> Option<Arc<T>> {
        self.newest_first().into_iter().find(|entry| matches(entry))
    }

    /// Every entry, newest first (handles copied out under the lock).
    pub fn newest_first(&self) -> Vec<Arc<T>> {
        self.entries
            .lock()
            .expect("no holder panics")
            .iter()
            .rev()
            .cloned()
            .collect()
    }

    /// Keeps `entry`, dropping the oldest one if `MAX` are kept.
    pub fn remember(&self, entry: T) {
        let mut entries = self.entries.lock().expect("no holder panics");
        if entries.len() == MAX {
            entries.pop_front();
        }
        entries.push_back(Arc::new(entry));
        assert!(entries.len() <= MAX);
    }

    /// How many entries are kept (0 if a holder panicked: for `Debug`).
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |entries| entries.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
