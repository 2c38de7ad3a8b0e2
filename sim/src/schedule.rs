//! The scheduler: which of the enabled actions of concurrent tasks runs next.
//!
//! Schedule model. A job of several tasks offers, between two actions, a list of enabled
//! actions (delivering the record at the head of a channel, emitting a barrier, an
//! acknowledgement, ...), each named by a stable label. The scheduler picks one:
//!
//! - `random` (the default): uniformly among the enabled ones, drawn from the seed's own
//!   `Subsystem::Schedule` stream, so adding a fault knob never reshuffles a schedule and a
//!   new schedule draw never reshuffles the faults;
//! - `round-robin`: the first enabled action whose label comes after the label last chosen,
//!   in label order, wrapping around: a fixed order for teaching;
//! - a script: a list of choices (indexes into the enabled list, in the order the job offers
//!   it) that a replay or an exhaustive enumeration hands in; after the script, the policy,
//!   or (a shrunk schedule, written without its trailing round-robin choices) round-robin.
//!   In that last mode the scheduler also records, for every choice, the one round-robin
//!   would have made then ([`Scheduler::round_robin_picks`]): the canonical order a shrinker
//!   moves choices to.
//!
//! Every choice is recorded ([`Scheduler::choices`]): the schedule that ran is data, as a
//! fault plan is, and replaying it gives the same run byte for byte.

use crate::rng::{SeedTree, Subsystem};
use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A schedule longer than this is a bug (a livelock), not a long job.
pub const CHOICES_MAX: usize = 50_000_000;

/// How the scheduler chooses when nothing is scripted.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulePolicy {
    /// Uniformly among the enabled actions, from the seed's schedule stream.
    #[default]
    Random,
    /// The next enabled action after the last chosen one, in label order.
    RoundRobin,
}

impl fmt::Display for SchedulePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchedulePolicy::Random => "random",
            SchedulePolicy::RoundRobin => "round-robin",
        })
    }
}

/// Chooses among enabled actions and remembers every choice.
#[derive(Clone, Debug)]
pub struct Scheduler {
    policy: SchedulePolicy,
    rng: ChaCha8Rng,
    /// Choices to make first (a replayed or enumerated schedule).
    script: Vec<u32>,
    /// The choices made so far, scripted or drawn: the schedule that ran.
    choices: Vec<u32>,
    /// The label chosen last (round-robin goes on after it).
    last_label: Option<String>,
    /// After the script, round-robin (a shrunk schedule) instead of the policy; every
    /// choice's round-robin pick is recorded.
    round_robin_after_script: bool,
    /// With `round_robin_after_script`: the choice round-robin would have made at each choice.
    round_robin_picks: Vec<u32>,
}

impl Scheduler {
    pub fn new(seeds: SeedTree, policy: SchedulePolicy) -> Scheduler {
        Scheduler {
            policy,
            rng: seeds.stream(Subsystem::Schedule),
            script: Vec::new(),
            choices: Vec::new(),
            last_label: None,
            round_robin_after_script: false,
            round_robin_picks: Vec::new(),
        }
    }

    /// This scheduler making `script`'s choices first and then round-robin's: a schedule
    /// written without its trailing round-robin choices.
    pub fn scripted_then_round_robin(mut self, script: Vec<u32>) -> Scheduler {
        self.script = script;
        self.round_robin_after_script = true;
        self
    }

    /// This scheduler making `script`'s choices first.
    pub fn scripted(mut self, script: Vec<u32>) -> Scheduler {
        self.script = script;
        self
    }

    pub fn policy(&self) -> SchedulePolicy {
        self.policy
    }

    /// The choices made so far: the schedule that ran.
    pub fn choices(&self) -> &[u32] {
        &self.choices
    }

    /// For each choice made (with [`Scheduler::scripted_then_round_robin`]), the one
    /// round-robin would have made then, given the choices before it.
    pub fn round_robin_picks(&self) -> &[u32] {
        &self.round_robin_picks
    }

    /// Picks one of `labels` (the enabled actions, in the job's order; at least one) and
    /// returns its index: [`Scheduler::choose_among`] with the labels at hand.
    pub fn choose(&mut self, labels: &[String]) -> usize {
        self.choose_among(labels.len(), |i| labels[i].clone())
    }

    /// Picks one of `n` enabled actions (at least one), the i-th named `label(i)`, and
    /// returns its index. A scripted choice beyond the list is taken modulo its length, so
    /// any script is a schedule (a shrunk or hand-edited one included). Only round-robin
    /// reads labels: the other policies never render one, which keeps a random schedule's
    /// step to one draw.
    pub fn choose_among(&mut self, n: usize, label: impl Fn(usize) -> String) -> usize {
        assert!(n > 0, "a choice among no action");
        assert!(
            self.choices.len() < CHOICES_MAX,
            "schedule exceeded {CHOICES_MAX} choices"
        );
        let reads_labels =
            self.policy == SchedulePolicy::RoundRobin || self.round_robin_after_script;
        let labels: Vec<String> = if reads_labels {
            (0..n).map(&label).collect()
        } else {
            Vec::new()
        };
        let round_robin_pick =
            reads_labels.then(|| round_robin(&labels, self.last_label.as_deref()));
        let index = if let Some(&scripted) = self.script.get(self.choices.len()) {
            scripted as usize % n
        } else if n == 1 {
            0
        } else if let (true, Some(pick)) = (self.round_robin_after_script, round_robin_pick) {
            pick
        } else {
            match self.policy {
                SchedulePolicy::Random => (self.rng.next_u64() % n as u64) as usize,
                SchedulePolicy::RoundRobin => round_robin_pick.expect("labels read"),
            }
        };
        assert!(index < n);
        self.choices.push(index as u32);
        if self.round_robin_after_script {
            let pick = round_robin_pick.expect("labels read");
            self.round_robin_picks.push(pick as u32);
        }
        if reads_labels {
            self.last_label = Some(labels[index].clone());
        }
        index
    }
}

/// The first label after `last` in label order, wrapping around (the smallest with no last).
fn round_robin(labels: &[String], last: Option<&str>) -> usize {
    let smallest = (0..labels.len()).min_by(|&a, &b| labels[a].cmp(&labels[b]));
    let after = last.and_then(|last| {
        (0..labels.len())
            .filter(|&i| labels[i].as_str() > last)
            .min_by(|&a, &b| labels[a].cmp(&labels[b]))
    });
    after.or(smallest).expect("at least one label")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn round_robin_cycles_in_label_order() {
        let mut scheduler = Scheduler::new(SeedTree::new(0), SchedulePolicy::RoundRobin);
        let enabled = labels(&["b", "a", "c"]);
        let picked: Vec<usize> = (0..4).map(|_| scheduler.choose(&enabled)).collect();
        assert_eq!(picked, vec![1, 0, 2, 1]);
        assert_eq!(scheduler.choices(), &[1, 0, 2, 1]);
    }

    #[test]
    fn random_is_a_function_of_the_seed_and_a_script_replays_it() {
        let enabled = labels(&["a", "b", "c", "d", "e"]);
        let draw = |seed| {
            let mut scheduler = Scheduler::new(SeedTree::new(seed), SchedulePolicy::Random);
            (0..32)
                .map(|_| scheduler.choose(&enabled))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let ran: Vec<u32> = draw(7).into_iter().map(|i| i as u32).collect();
        let mut replay =
            Scheduler::new(SeedTree::new(99), SchedulePolicy::Random).scripted(ran.clone());
        let replayed: Vec<u32> = (0..32).map(|_| replay.choose(&enabled) as u32).collect();
        assert_eq!(replayed, ran);
    }

    #[test]
    fn after_its_script_a_shrunk_schedule_goes_round_robin_and_records_its_picks() {
        let mut scheduler = Scheduler::new(SeedTree::new(0), SchedulePolicy::Random)
            .scripted_then_round_robin(vec![2]);
        let enabled = labels(&["b", "a", "c"]);
        let picked: Vec<usize> = (0..3).map(|_| scheduler.choose(&enabled)).collect();
        // "c" scripted (round-robin would have taken "a"), then round-robin after "c".
        assert_eq!(picked, vec![2, 1, 0]);
        assert_eq!(scheduler.round_robin_picks(), &[1, 1, 0]);
    }

    #[test]
    fn a_scripted_choice_beyond_the_list_wraps() {
        let mut scheduler =
            Scheduler::new(SeedTree::new(0), SchedulePolicy::Random).scripted(vec![7]);
        assert_eq!(scheduler.choose(&labels(&["a", "b", "c"])), 1);
    }
}
