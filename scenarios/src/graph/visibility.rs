//! When a parallel job's records became visible to a consumer, read from its trace: the
//! delay from the sink taking a record to a consumer seeing it, and the records a consumer
//! saw only after a restart (visible late).
//!
//! An appending or upserting sink makes a record visible in the action that takes it (delay
//! 0). A two-phase-commit sink makes the records it took into transaction N (those taken
//! since it pre-committed N - 1) visible when it commits N, at the coordinator's completion
//! notification or at a recovery's re-commit: the article's price of exactly-once, a delay
//! of up to a checkpoint interval, and more when a crash falls between pre-commit and
//! commit. Records taken but not pre-committed when the process died were never visible and
//! are taken again after the replay. A record's first visibility counts (a duplicate is
//! the oracle's business). Measured in simulated ms; a power loss that later undoes a commit
//! does not unsee what a consumer read.

use crate::graph::GraphRun;
use keel_sim::TraceLine;
use std::collections::{BTreeMap, BTreeSet};

/// What the consumers of one run saw, and when.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Visibility {
    /// Records (by identity) that became visible.
    pub records: u64,
    /// The longest delay from the sink taking a record to its visibility, in simulated ms.
    pub delay_ms_max: u64,
    /// Records that became visible in a later incarnation than the one whose sink took
    /// them first: visible only after a restart.
    pub visible_late: u64,
}

impl Visibility {
    /// Record `id`, first taken as `first_taken` says, is visible at `time_ms` in
    /// `incarnation` (counted once).
    fn see(
        &mut self,
        seen: &mut BTreeSet<String>,
        first_taken: &BTreeMap<String, Taken>,
        id: &str,
        time_ms: u64,
        incarnation: u32,
    ) {
        if !seen.insert(id.to_string()) {
            return;
        }
        let taken = first_taken[id];
        assert!(time_ms >= taken.time_ms, "visible after it was taken");
        self.records += 1;
        self.delay_ms_max = self.delay_ms_max.max(time_ms - taken.time_ms);
        if incarnation > taken.incarnation {
            self.visible_late += 1;
        }
    }
}

/// A record the sink took: when, and in which incarnation.
#[derive(Clone, Copy, Debug)]
struct Taken {
    time_ms: u64,
    incarnation: u32,
}

/// The visibility of `run`'s records, or None when its trace no longer holds every line
/// (a streamed run: `graph::run_streamed`).
pub fn visibility(run: &GraphRun) -> Option<Visibility> {
    if !run.world.trace().is_whole() {
        return None;
    }
    let mut first_taken: BTreeMap<String, Taken> = BTreeMap::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    // Taken since the last pre-commit, in this incarnation.
    let mut open: Vec<String> = Vec::new();
    // Pre-committed transactions (by file name), with their records: they outlive a crash.
    let mut precommitted: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut visibility = Visibility::default();
    for line in run.world.trace().lines() {
        let TraceLine::Step {
            op,
            target,
            time_ms,
            incarnation,
            ..
        } = line
        else {
            if matches!(line, TraceLine::Restart { .. }) {
                open.clear();
            }
            continue;
        };
        match *op {
            "sink.take" => {
                let Some((_, id)) = target.split_once(" record ") else {
                    continue;
                };
                first_taken.entry(id.to_string()).or_insert(Taken {
                    time_ms: *time_ms,
                    incarnation: *incarnation,
                });
                open.push(id.to_string());
            }
            "sink.append" | "sink.upsert" => {
                if let Some(id) = open.pop() {
                    visibility.see(&mut seen, &first_taken, &id, *time_ms, *incarnation);
                }
            }
            "sink.pre-commit" => {
                precommitted.insert(target.clone(), std::mem::take(&mut open));
            }
            "sink.commit" | "sink.recommit" => {
                for id in precommitted.remove(target.as_str()).unwrap_or_default() {
                    visibility.see(&mut seen, &first_taken, &id, *time_ms, *incarnation);
                }
            }
            "sink.abort" => {
                precommitted.remove(target.as_str());
            }
            _ => {}
        }
    }
    Some(visibility)
}
