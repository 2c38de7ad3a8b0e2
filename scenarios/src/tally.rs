//! Tallying a sweep: point records, in point order, folded one at a time into the report's
//! rows. What it keeps grows with the rows and their distinct outcomes, not with the points
//! (a point's record is dropped once counted; a row keeps only its first failure, and the
//! sweep only its first violation), so a sweep of millions of points tallies in little memory.

use crate::property::Expectation;
use crate::reproduce::with_expect;
use crate::runner::View;
use crate::spec::ScenarioSpec;
use crate::sweep::{
    digest_hash, digest_number, outcome_key, run_term, ClassedStates, FirstFailure, Folded,
    PointRecord, PowerLossPoints, Sampled, SampledSteps, SweepReport, SweepRow, SweepSpec,
    ViewExpectations,
};
use keel_sim::{Fault, FaultKind};
use num_bigint::BigUint;
use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// The crash states a row of class points stands for, while tallying ([`ClassedStates`]).
#[derive(Clone, Debug, Default)]
struct ClassedSums {
    states: BigUint,
    with_duplicates: BigUint,
    with_loss: BigUint,
    failing: BigUint,
}

/// What a row's sampled steps add up to, while tallying.
#[derive(Clone, Debug)]
struct Coverage {
    /// The states of sampled steps that did not run, exactly (None: unknown, at depth 2).
    unrun: Option<BigUint>,
    /// The points of the current sampled step (or steps) still to come.
    drawn_to_come: u64,
    sampled: SampledSteps,
}

impl Default for Coverage {
    fn default() -> Self {
        Coverage {
            unrun: Some(BigUint::ZERO),
            drawn_to_come: 0,
            sampled: SampledSteps {
                steps: 0,
                states: Some(BigUint::ZERO),
                drawn: 0,
            },
        }
    }
}

impl Coverage {
    /// Counts `points` points of the row (a record and its span), and the sampled steps the
    /// first opens.
    fn count(&mut self, opens: &[Sampled], points: u64) {
        assert!(points >= 1);
        for step in opens {
            self.sampled.steps += 1;
            let states = step.states.as_ref();
            self.sampled.states = self
                .sampled
                .states
                .take()
                .zip(states)
                .map(|(sum, states)| sum + states);
            self.unrun = self.unrun.take().zip(states).map(|(sum, states)| {
                let drawn = BigUint::from(step.drawn);
                if *states > drawn {
                    sum + states - drawn
                } else {
                    sum
                }
            });
            // A step nested in another (depth 2) lies within its points.
            self.drawn_to_come = self.drawn_to_come.max(step.drawn);
        }
        let drawn = self.drawn_to_come.min(points);
        self.drawn_to_come -= drawn;
        self.sampled.drawn += drawn;
    }

    /// Fills in the row's states and sampled steps.
    fn finish(&self, row: &mut SweepRow) {
        row.states_run = row.points;
        row.exhaustive = self.sampled.steps == 0;
        row.states_total = self.unrun.as_ref().map(|unrun| unrun + row.points);
        row.sampled = (!row.exhaustive).then(|| self.sampled.clone());
    }
}

/// A row's distinct outcome digests: each the 16 hex digits of a 64-bit hash, kept as that
/// number (a depth-2 row on a long stream has millions, and comparing them as strings was a
/// tenth of its time); a digest of another form (a shard file written by hand) as its text.
/// Only counted, never iterated: no order of a hash set reaches the report.
#[derive(Debug, Default)]
struct Outcomes {
    hashes: HashSet<u64, BuildHasherDefault<SpreadHasher>>,
    others: BTreeSet<String>,
    /// The digest inserted last: records of points judged once share it (`Arc`), and
    /// consecutive points of a row often are.
    last: Option<Arc<str>>,
}

/// Hashes a `u64` that is already a hash (a digest) by spreading its bits (Fibonacci
/// hashing): deterministic, no seed, and no second pass of a general hash over the key.
#[derive(Debug, Default)]
struct SpreadHasher(u64);

impl Hasher for SpreadHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Outcomes {
    /// `digest`, whose [`digest_number`] is `number`.
    fn insert(&mut self, digest: &Arc<str>, number: Option<u64>) {
        if self
            .last
            .as_ref()
            .is_some_and(|last| Arc::ptr_eq(last, digest))
        {
            return;
        }
        self.last = Some(Arc::clone(digest));
        match number {
            Some(hash) => {
                self.hashes.insert(hash);
            }
            None => {
                if !self.others.contains(&**digest) {
                    self.others.insert(digest.to_string());
                }
            }
        }
    }

    fn len(&self) -> u64 {
        (self.hashes.len() + self.others.len()) as u64
    }
}

/// The first point that breaks what was asked (or, whatever was asked, where the fault-free
/// run departs from the model): what `keel sweep` names under its table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub sink: String,
    pub row: String,
    pub view: Option<View>,
    pub failures: Vec<String>,
    pub outcome: String,
    pub reproduce: String,
}

/// A sweep's report, tallied so far.
pub struct SweepTally<'a> {
    spec: &'a ScenarioSpec,
    sweep: &'a SweepSpec,
    asked: Option<&'a Expectation>,
    rows: Vec<SweepRow>,
    /// Per row: the distinct outcome digests seen.
    outcomes: Vec<Outcomes>,
    coverage: Vec<Coverage>,
    /// Per row, with `--power-loss-points classes` on a power-loss row: the crash states its
    /// points stand for.
    classed: Vec<Option<ClassedSums>>,
    /// Every run's term, in point order (`sweep/fingerprint.rs`).
    fingerprint: Folded,
    /// The digest of the last record and its number: records of points judged once share it.
    digest_last: Option<(Arc<str>, Option<u64>)>,
    model_mismatch: Option<String>,
    violation: Option<Violation>,
    /// What each view of the sweep's sinks is judged by, built once.
    expectations: ViewExpectations,
}

impl<'a> SweepTally<'a> {
    /// An empty tally; each point will be judged by `asked` (None: what its sink promises
    /// to its view).
    pub fn new(
        spec: &'a ScenarioSpec,
        sweep: &'a SweepSpec,
        asked: Option<&'a Expectation>,
    ) -> SweepTally<'a> {
        SweepTally {
            spec,
            sweep,
            asked,
            rows: Vec::new(),
            outcomes: Vec::new(),
            coverage: Vec::new(),
            classed: Vec::new(),
            fingerprint: Folded::default(),
            digest_last: None,
            model_mismatch: None,
            violation: None,
            expectations: ViewExpectations::new(asked, &sweep.sinks),
        }
    }

    /// Counts the next point record (records come in point order), in the row it belongs
    /// to, opened where it first appears.
    pub fn add(&mut self, record: &PointRecord) {
        let sink = record.sink.name();
        let view = record.view.map(|v| v.name());
        let is_its_row =
            |r: &SweepRow| r.sink == sink && *r.fault == *record.row && r.view.as_deref() == view;
        // Points come row by row (views alternating): the last two rows first.
        let recent = self.rows.len().saturating_sub(2);
        let position = (recent..self.rows.len())
            .rev()
            .find(|&i| is_its_row(&self.rows[i]))
            .or_else(|| self.rows.iter().position(is_its_row));
        let position = position.unwrap_or_else(|| {
            self.rows.push(SweepRow {
                sink: sink.to_string(),
                fault: record.row.to_string(),
                view: view.map(str::to_string),
                ..SweepRow::default()
            });
            self.outcomes.push(Outcomes::default());
            self.coverage.push(Coverage::default());
            let classed = self.sweep.power_loss_points == PowerLossPoints::Classes
                && record
                    .faults
                    .iter()
                    .any(|f| f.fault.kind() == FaultKind::PowerLoss);
            self.classed.push(classed.then(ClassedSums::default));
            self.rows.len() - 1
        });
        let points = record.points();
        let number = match &self.digest_last {
            Some((last, number)) if Arc::ptr_eq(last, &record.outcome_digest) => *number,
            _ => {
                let number = digest_number(&record.outcome_digest);
                self.digest_last = Some((Arc::clone(&record.outcome_digest), number));
                number
            }
        };
        let row = &mut self.rows[position];
        self.outcomes[position].insert(&record.outcome_digest, number);
        row.distinct_outcomes = self.outcomes[position].len();
        self.coverage[position].count(&record.sampled, points);
        // One term per run: a transactional point's second view is the same run.
        if record.view != Some(View::ReadUncommitted) {
            match record.span {
                Some(span) => self.fingerprint.append(span),
                None => {
                    let digest = number.unwrap_or_else(|| digest_hash(&record.outcome_digest));
                    let key = outcome_key(record.sink, digest);
                    self.fingerprint.push(run_term(key, &record.faults));
                }
            }
        }
        // Each of a span's points has the record's outcome.
        let each = |yes: bool| points * u64::from(yes);
        row.points += points;
        row.points_with_duplicates += each(record.duplicates > 0);
        row.duplicates += points * record.duplicates;
        row.points_with_loss += each(record.lost > 0);
        row.lost += points * record.lost;
        row.wrong += points * record.wrong;
        row.corrupt += points * record.corrupt;
        row.points_with_stale_windows += each(record.stale_windows > 0);
        row.stale_windows += points * record.stale_windows;
        row.rolled_back += each(record.rolled_back > 0);
        row.failed_recoveries += each(record.failed_recovery);
        row.points_with_dirty_reads += each(record.dirty_reads > 0);
        row.dirty_reads += points * record.dirty_reads;
        row.visibility_delay_ms_max = row
            .visibility_delay_ms_max
            .max(record.visibility_delay_ms_max);
        let broken = record.failures_in(&self.expectations);
        row.failing_points += each(!broken.is_empty());
        if let Some(sums) = &mut self.classed[position] {
            // A class stands for its states; a state drawn where classes are not numbered
            // stands for itself.
            let states = record
                .class_states
                .clone()
                .unwrap_or_else(|| BigUint::from(1u32))
                * points;
            if record.duplicates > 0 {
                sums.with_duplicates += &states;
            }
            if record.lost > 0 {
                sums.with_loss += &states;
            }
            if !broken.is_empty() {
                sums.failing += &states;
            }
            sums.states += states;
        }
        if row.first_failure.is_none() && !broken.is_empty() {
            let first = record.faults[0];
            row.first_failure = Some(FirstFailure {
                broken: broken.clone(),
                step: first.step,
                crash_state: match first.fault {
                    Fault::PowerLoss { state, .. } => Some(state),
                    _ => None,
                },
                crash_state_class: match first.fault {
                    Fault::PowerLossClass { class, .. } => Some(class),
                    _ => None,
                },
                outcome: record.outcome.to_string(),
                reproduce: with_expect(&record.reproduce(self.spec), self.asked),
            });
        }
        if self.model_mismatch.is_none() {
            self.model_mismatch = record.model_mismatch.clone();
        }
        let violates =
            !broken.is_empty() && (self.asked.is_some() || record.model_mismatch.is_some());
        if self.violation.is_none() && violates {
            self.violation = Some(Violation {
                sink: sink.to_string(),
                row: record.row.to_string(),
                view: record.view,
                failures: broken,
                outcome: record.outcome.to_string(),
                reproduce: with_expect(&record.reproduce(self.spec), self.asked),
            });
        }
    }

    /// The report of every record added, and the first violation among them.
    pub fn finish(mut self) -> (SweepReport, Option<Violation>) {
        for (row, coverage) in self.rows.iter_mut().zip(&self.coverage) {
            coverage.finish(row);
        }
        for (row, sums) in self.rows.iter_mut().zip(&self.classed) {
            row.crash_states = sums.as_ref().map(|sums| ClassedStates {
                states: sums.states.to_string(),
                with_duplicates: sums.with_duplicates.to_string(),
                with_loss: sums.with_loss.to_string(),
                failing: sums.failing.to_string(),
            });
        }
        let report = SweepReport {
            scenario: self.spec.label(),
            protocol: self.spec.protocol.name().to_string(),
            state_backend: (!self.spec.state_backend.is_full())
                .then(|| self.spec.state_backend.to_string()),
            fs_model: self.spec.fs_model.to_string(),
            seed: self.spec.seed,
            power_loss_states_max: self.sweep.power_loss_states_max,
            judged_by: self.asked.map_or("promised".to_string(), Expectation::name),
            model_mismatch: self.model_mismatch,
            rows: self.rows,
            fingerprint: self.fingerprint.fingerprint().to_string(),
            stopped: None,
        };
        (report, self.violation)
    }
}

/// Tallies point records (in point order) into rows, in the order rows first appear, each
/// point judged by `asked` (None: what its sink promises to its view).
pub fn aggregate(
    spec: &ScenarioSpec,
    sweep: &SweepSpec,
    records: &[PointRecord],
    asked: Option<&Expectation>,
) -> SweepReport {
    let mut tally = SweepTally::new(spec, sweep, asked);
    for record in records {
        tally.add(record);
    }
    tally.finish().0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::property::Property;
    use crate::sweep::run_term;
    use keel_engine::SinkKind;
    use keel_sim::{CrashPoint, PlannedFault};

    /// The record of the pair (crash at 5, crash at `second`) on the append sink, with
    /// `duplicates` and the digest to match.
    fn pair(index: u64, second: u64, duplicates: u64) -> PointRecord {
        let crash = |step| PlannedFault {
            step,
            fault: Fault::ProcessCrash {
                at: CrashPoint::After,
            },
        };
        PointRecord {
            index,
            sink: SinkKind::Append,
            row: Arc::from("process-crash+process-crash"),
            view: None,
            class_states: None,
            dirty_reads: 0,
            visibility_delay_ms_max: 0,
            faults: Arc::new([crash(5), crash(second)]),
            sampled: Vec::new(),
            duplicates,
            lost: 0,
            wrong: 0,
            corrupt: 0,
            stale_windows: 0,
            rolled_back: 0,
            failed_recovery: false,
            broken: if duplicates > 0 {
                Arc::new([Property::NoDuplicates])
            } else {
                Arc::new([])
            },
            model_mismatch: None,
            outcome: Arc::from(format!("duplicates={duplicates}")),
            outcome_digest: Arc::from(format!("{duplicates:016x}")),
            fingerprint: None,
            span: None,
        }
    }

    /// `records` with each run of consecutive records of one outcome made one record with a
    /// span, as `sweep/converged_pairs.rs` makes them.
    fn spanned(records: &[PointRecord]) -> Vec<PointRecord> {
        let mut out: Vec<PointRecord> = Vec::new();
        for record in records {
            match out.last_mut() {
                Some(last) if last.outcome_digest == record.outcome_digest => {
                    let key = outcome_key(last.sink, digest_number(&last.outcome_digest).unwrap());
                    last.span
                        .get_or_insert_with(|| Folded::of(run_term(key, &last.faults)))
                        .push(run_term(key, &record.faults));
                }
                _ => out.push(record.clone()),
            }
        }
        out
    }

    /// Records tallied one a point, and the same points as spans, give the same report
    /// (every count, the distinct outcomes, the first failure and the fingerprint), and the
    /// exact figures of these points; `expect exactly-once` names the first failing point.
    #[test]
    fn a_span_of_points_is_tallied_as_its_points_one_by_one() {
        let spec = ScenarioSpec::ch04(0);
        let sweep = crate::sweep::crash_and_sink_error_sweep(2);
        let duplicates = [0, 0, 2, 2, 2, 0, 1, 1, 0, 0, 0];
        let records: Vec<PointRecord> = duplicates
            .iter()
            .enumerate()
            .map(|(i, &d)| pair(i as u64, 7 + i as u64, d))
            .collect();
        let spans = spanned(&records);
        assert_eq!(spans.len(), 5);
        assert_eq!(spans.iter().map(PointRecord::points).sum::<u64>(), 11);
        let asked = Expectation::parse("exactly-once").unwrap();
        let one_by_one = {
            let mut tally = SweepTally::new(&spec, &sweep, Some(&asked));
            records.iter().for_each(|r| tally.add(r));
            tally.finish()
        };
        let at_once = {
            let mut tally = SweepTally::new(&spec, &sweep, Some(&asked));
            spans.iter().for_each(|r| tally.add(r));
            tally.finish()
        };
        assert_eq!(at_once, one_by_one);
        let (report, violation) = at_once;
        let row = &report.rows[0];
        assert_eq!(report.rows.len(), 1);
        assert_eq!(
            (
                row.points,
                row.points_with_duplicates,
                row.duplicates,
                row.failing_points,
                row.distinct_outcomes
            ),
            (11, 5, 8, 5, 3)
        );
        let first = row.first_failure.as_ref().expect("a failure");
        assert_eq!((first.step, first.outcome.as_str()), (5, "duplicates=2"));
        let third = with_expect(&records[2].reproduce(&spec), Some(&asked));
        assert_eq!(
            violation.unwrap().reproduce,
            third,
            "the third point's plan"
        );
        assert_eq!(first.reproduce, third);
        // Another order of the same points is another fingerprint.
        let mut reordered = records.clone();
        reordered.swap(0, 1);
        let reordered = aggregate(&spec, &sweep, &reordered, Some(&asked));
        assert_ne!(reordered.fingerprint, report.fingerprint);
    }

    /// A row of points, each opening the sampled steps given for it.
    fn row_after(points: &[&[Sampled]]) -> SweepRow {
        let mut coverage = Coverage::default();
        let mut row = SweepRow::default();
        for opens in points {
            row.points += 1;
            coverage.count(opens, 1);
        }
        coverage.finish(&mut row);
        row
    }

    /// `n` as an exact count.
    fn big(n: u64) -> Option<BigUint> {
        Some(BigUint::from(n))
    }

    #[test]
    fn a_row_counts_every_state_of_its_sampled_steps() {
        let row = row_after(&[&[], &[]]);
        assert_eq!(
            (
                row.states_run,
                row.states_total,
                row.exhaustive,
                row.sampled
            ),
            (2, big(2), true, None)
        );
        // Two enumerated points, a step of 10 states with 3 drawn, one more enumerated point.
        let step = Sampled {
            states: big(10),
            drawn: 3,
        };
        let row = row_after(&[&[], &[], &[step], &[], &[], &[]]);
        assert_eq!(
            (row.states_run, row.states_total, row.exhaustive),
            (6, big(13), false)
        );
        assert_eq!(
            row.sampled,
            Some(SampledSteps {
                steps: 1,
                states: big(10),
                drawn: 3
            })
        );
    }

    #[test]
    fn a_nested_sampled_step_is_drawn_once_and_an_uncounted_one_leaves_the_total_unknown() {
        // Depth 2: a sampled first step holds 4 pairs; its first pair also opens a second
        // step of 5 states with 2 drawn; one more point after both.
        let first = Sampled {
            states: None,
            drawn: 4,
        };
        let second = Sampled {
            states: big(5),
            drawn: 2,
        };
        let row = row_after(&[&[first, second], &[], &[], &[], &[]]);
        assert_eq!((row.states_run, row.states_total), (5, None));
        assert_eq!(
            row.sampled,
            Some(SampledSteps {
                steps: 2,
                states: None,
                drawn: 4
            })
        );
    }

    #[test]
    fn a_total_past_two_to_the_64_is_exact() {
        // Two steps of 3^50 states (past 2^64 together and alone), one state drawn at each.
        let huge = BigUint::from(3u32).pow(50);
        let step = Sampled {
            states: Some(huge.clone()),
            drawn: 1,
        };
        let row = row_after(&[
            std::slice::from_ref(&step),
            std::slice::from_ref(&step),
            &[],
        ]);
        let expected = &huge * 2u32 - 2u32 + 3u32;
        assert_eq!(row.states_total, Some(expected));
        assert_eq!(row.sampled.and_then(|s| s.states), Some(huge * 2u32));
    }
}
