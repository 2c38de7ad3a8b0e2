//! The judgement of a spliced view (`observation/records.rs`: a known file's records with a
//! run of them replaced by a middle of the view's own) from what differs: the known file is
//! judged once, slot by slot and window by window ([`Base`]), and each splice re-judges only
//! the slots and windows that its replaced run and its middle touch. The tally of a slot
//! depends on nothing but the slot's own records, and a window's staleness on nothing but its
//! own, so the rest stand as the base judged them. Equal to judging the whole view
//! (`judge_records`): checked on every judgement of a debug build, and by the test below.

use super::identity::{
    content, earlier, slot, slot_tally, stale_windows, Content, Judged, ReferenceTallies, Slot,
    Tally,
};
use crate::observation::records::{Segment, Splice};
use keel_engine::{KeyScheme, Record};
use std::collections::BTreeMap;

/// A known file's records judged against a reference, kept to judge its splices.
#[derive(Debug)]
pub(super) struct Base {
    /// The known file's slots, in slot order; a slot's number is its place here.
    slots: Vec<BaseSlot>,
    /// Each slot, by number (sorted: found by a binary search).
    slot_keys: Vec<Slot>,
    /// Each known record's slot number: a splice's known records, and its middle's runs of
    /// them, are sorted into slots without making or comparing a slot.
    slot_of: Vec<u32>,
    /// Every slot's contents, slot after slot (each slot's sorted by content), with the end
    /// of each content's places in `places` (they start where the previous content's end).
    contents: Vec<Content>,
    contents_places_end: Vec<u32>,
    /// The places of each content's copies, in order.
    places: Vec<u32>,
    tally: Tally,
    /// For each slot with a content the reference lacks there: the place of its first such
    /// record, by place (and the slot's number).
    wrong_firsts: BTreeMap<usize, usize>,
    /// Each window end with a record in the known file (sorted), with the end of its
    /// records' places in `window_places` (in order; they start where the previous end's end).
    window_ends: Vec<(i64, u32)>,
    window_places: Vec<u32>,
    stale_windows: u64,
}

/// One slot of the known file: its tally and the end of its contents in `Base::contents`
/// (they start where the previous slot's end). Flat vectors, not a map or a box per slot: a
/// base holds a slot a record of a million-event run's file, and a slot mostly holds one
/// record (boxes per slot and a vector per window cost 41 MB on the two sinks of the
/// million-event sweep).
#[derive(Debug)]
struct BaseSlot {
    tally: Tally,
    contents_end: u32,
}

/// `n` as a place or a count in a base's flat vectors: a sink file of more than 4 billion
/// records is beyond any sweep.
fn small(n: usize) -> u32 {
    u32::try_from(n).expect("a known file holds fewer than 2^32 records")
}

/// A slot a splice touches: one of the known file's (by number), or one only its middle has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Touched {
    Known(usize),
    New(Slot),
}

/// 1 where a window whose last value is `last` (None: the view has none) is stale against
/// the reference's `want`.
fn stale(last: Option<i128>, want: Option<&i128>) -> u64 {
    match (last, want) {
        (None, None) => 0,
        (Some(last), Some(&want)) if last == want => 0,
        _ => 1,
    }
}

/// How many records `splice` holds, if it is nothing but runs of its known file, each
/// starting at or before the end of the one before it, the first at the known file's start
/// and the last at its end (empty runs left out): then it holds every known record at least
/// once, and a window's last record in it is the known file's last of that window.
fn chain_copies(splice: &Splice) -> Option<u64> {
    let known_len = splice.known.records.len();
    let mut middle_runs = Vec::with_capacity(splice.middle.len());
    for segment in &splice.middle {
        match segment {
            Segment::Known(run) => middle_runs.push(run.clone()),
            Segment::Own(records) if records.is_empty() => {}
            Segment::Own(_) => return None,
        }
    }
    let runs = std::iter::once(0..splice.head)
        .chain(middle_runs)
        .chain(std::iter::once(splice.tail_from..known_len));
    let mut end_before: Option<usize> = None;
    let mut copies = 0;
    for run in runs.filter(|run| !run.is_empty()) {
        let joined = match end_before {
            None => run.start == 0,
            Some(end) => run.start <= end,
        };
        if !joined {
            return None;
        }
        end_before = Some(run.end);
        copies += run.len() as u64;
    }
    (end_before.unwrap_or(0) == known_len).then_some(copies)
}

impl Base {
    /// `known` judged against `tallies` (a reference of `reference_len` records).
    pub(super) fn of(
        tallies: &ReferenceTallies,
        reference_len: u64,
        known: &[Record],
        key: KeyScheme,
    ) -> Base {
        // Sorted, not gathered in maps: a million-event run's file has a slot a record.
        let mut entries: Vec<(Slot, Content, usize)> = known
            .iter()
            .enumerate()
            .map(|(at, record)| (slot(record, key), content(record), at))
            .collect();
        entries.sort_unstable();
        let mut by_window: Vec<(i64, u32)> = known
            .iter()
            .enumerate()
            .map(|(at, record)| (record.window_end, small(at)))
            .collect();
        by_window.sort_unstable();
        let mut window_ends = Vec::new();
        let mut window_places = Vec::with_capacity(known.len());
        for run in by_window.chunk_by(|a, b| a.0 == b.0) {
            window_places.extend(run.iter().map(|&(_, at)| at));
            window_ends.push((run[0].0, small(window_places.len())));
        }
        drop(by_window);
        let mut tally = Tally::default();
        let mut untouched = reference_len;
        let mut wrong_firsts = BTreeMap::new();
        let mut slots = Vec::new();
        let mut slot_keys = Vec::new();
        let mut slot_of = vec![u32::MAX; known.len()];
        let mut contents = Vec::new();
        let mut contents_places_end = Vec::new();
        let mut places = Vec::with_capacity(known.len());
        for (number, run) in entries.chunk_by(|a, b| a.0 == b.0).enumerate() {
            let slot = &run[0].0;
            let (total, want) = tallies.slot(slot);
            untouched -= total;
            // Each content's places, in order (sorted by content, then place).
            let mut copies = Vec::new();
            for run in run.chunk_by(|a, b| a.1 == b.1) {
                contents.push(run[0].1);
                places.extend(run.iter().map(|&(_, _, at)| small(at)));
                contents_places_end.push(small(places.len()));
                copies.push((run[0].1, run.len() as u64, run[0].2));
            }
            let (slot_tally, wrong_at) = slot_tally(total, want, copies.into_iter());
            tally += slot_tally;
            if let Some(at) = wrong_at {
                wrong_firsts.insert(at, number);
            }
            for &(_, _, at) in run {
                slot_of[at] = small(number);
            }
            slots.push(BaseSlot {
                tally: slot_tally,
                contents_end: small(contents.len()),
            });
            slot_keys.push(slot.clone());
        }
        drop(entries);
        slots.shrink_to_fit();
        slot_keys.shrink_to_fit();
        contents.shrink_to_fit();
        contents_places_end.shrink_to_fit();
        window_ends.shrink_to_fit();
        assert!(slot_of
            .iter()
            .all(|&number| (number as usize) < slots.len()));
        assert_eq!(places.len(), known.len());
        assert_eq!(window_places.len(), known.len());
        tally.lost += untouched;
        assert!(slot_keys.is_sorted());
        Base {
            slots,
            slot_keys,
            slot_of,
            contents,
            contents_places_end,
            places,
            tally,
            wrong_firsts,
            window_ends,
            window_places,
            stale_windows: stale_windows(&tallies.windows, known),
        }
    }

    /// Slot `number`'s contents, each with the places of its copies (in order).
    fn slot_contents(&self, number: usize) -> impl Iterator<Item = (&Content, &[u32])> + '_ {
        let start = number
            .checked_sub(1)
            .map_or(0, |before| self.slots[before].contents_end as usize);
        (start..self.slots[number].contents_end as usize).map(move |i| {
            let from = i
                .checked_sub(1)
                .map_or(0, |before| self.contents_places_end[before] as usize);
            let to = self.contents_places_end[i] as usize;
            (&self.contents[i], &self.places[from..to])
        })
    }

    /// The places of the known file's records in window `end`, in order.
    fn window_places(&self, end: i64) -> &[u32] {
        match self.window_ends.binary_search_by(|&(e, _)| e.cmp(&end)) {
            Ok(i) => {
                let from = i
                    .checked_sub(1)
                    .map_or(0, |before| self.window_ends[before].1 as usize);
                &self.window_places[from..self.window_ends[i].1 as usize]
            }
            Err(_) => &[],
        }
    }

    /// Whether the known file holds exactly the reference's copies in every slot (no
    /// duplicate, no wrong record, none lost): the fault-free run's file.
    fn is_exact(&self) -> bool {
        let Tally {
            delivered: _,
            duplicates,
            wrong,
            lost,
            stand_ins,
        } = self.tally;
        duplicates == 0 && wrong == 0 && lost == 0 && stand_ins == 0 && self.wrong_firsts.is_empty()
    }

    /// The judgement of `splice` (of this base's known file).
    pub(super) fn judge(
        &self,
        tallies: &ReferenceTallies,
        key: KeyScheme,
        splice: &Splice,
    ) -> Judged {
        let known = &splice.known.records;
        let (head, tail_from) = (splice.head, splice.tail_from);
        assert!(head <= tail_from);
        assert!(tail_from <= known.len());
        if self.is_exact() {
            if let Some(copies) = chain_copies(splice) {
                // The view is runs of the known file, each starting at or before the end of
                // the one before, the first at its start and the last at its end (an append
                // sink's replays), over a file that holds every slot's reference copies
                // exactly: each record beyond the known file's own is one more copy of a
                // content its slot wants no more of, a duplicate. A window's last value stays
                // the known file's: the last run that holds one of the window's records holds
                // its last one too (else the next run, starting at or before that run's end,
                // would hold it, up to the last run, which ends at the file's end).
                let mut tally = self.tally;
                tally.duplicates += copies - known.len() as u64;
                return Judged {
                    tally,
                    first_wrong_at: None,
                    stale_windows: self.stale_windows,
                };
            }
        }
        // Every slot the splice touches (its replaced run's, with no copy: `None`, and its
        // middle's), with the middle's copies and their places: sorted, so each slot is one
        // run, and within it each content's copies, the first first. Sorted lists, not maps:
        // a point judges a few hundred records, and a map's nodes cost more than the sort.
        let middle: Vec<&Record> = splice.middle_records().collect();
        let mut entries: Vec<(Touched, Option<Content>, usize)> =
            Vec::with_capacity(tail_from - head + middle.len());
        entries.extend(
            (head..tail_from).map(|at| (Touched::Known(self.slot_of[at] as usize), None, 0)),
        );
        let mut place = head;
        for segment in &splice.middle {
            match segment {
                Segment::Known(run) => entries.extend(
                    (self.slot_of[run.clone()].iter().zip(&known[run.clone()])).map(
                        |(&number, record)| {
                            place += 1;
                            (
                                Touched::Known(number as usize),
                                Some(content(record)),
                                place - 1,
                            )
                        },
                    ),
                ),
                Segment::Own(records) => entries.extend(records.iter().map(|record| {
                    let slot = slot(record, key);
                    let touched = match self.slot_keys.binary_search(&slot) {
                        Ok(number) => Touched::Known(number),
                        Err(_) => Touched::New(slot),
                    };
                    place += 1;
                    (touched, Some(content(record)), place - 1)
                })),
            }
        }
        assert_eq!(place, head + middle.len());
        entries.sort_unstable();
        let mut touched_known: Vec<usize> = Vec::new();
        let mut tally = self.tally;
        let mut first_wrong_at = None;
        let mut contents: Vec<(Content, u64, usize)> = Vec::new();
        for run in entries.chunk_by(|a, b| a.0 == b.0) {
            contents.clear();
            for copies in run.chunk_by(|a, b| a.1 == b.1) {
                if let Some(content) = copies[0].1 {
                    contents.push((content, copies.len() as u64, copies[0].2));
                }
            }
            let (total, want) = match &run[0].0 {
                Touched::Known(number) => {
                    touched_known.push(*number);
                    let base = &self.slots[*number];
                    tally -= base.tally;
                    for (content, places) in self.slot_contents(*number) {
                        let replaced_from = places.partition_point(|&at| (at as usize) < head);
                        let replaced_to = places.partition_point(|&at| (at as usize) < tail_from);
                        let kept = places.len() - (replaced_to - replaced_from);
                        if kept == 0 {
                            continue;
                        }
                        let first = if replaced_from > 0 {
                            places[0]
                        } else {
                            places[replaced_to]
                        };
                        let first = splice.place_of_known(first as usize);
                        // A slot holds a few contents: found by looking.
                        match contents.iter_mut().find(|(c, _, _)| c == content) {
                            Some(copies) => {
                                copies.1 += kept as u64;
                                copies.2 = copies.2.min(first);
                            }
                            None => contents.push((*content, kept as u64, first)),
                        }
                    }
                    tallies.slot(&self.slot_keys[*number])
                }
                Touched::New(slot) => {
                    let (total, want) = tallies.slot(slot);
                    tally -= Tally {
                        lost: total,
                        ..Tally::default()
                    };
                    (total, want)
                }
            };
            let (slot_tally, wrong_at) = slot_tally(total, want, contents.iter().copied());
            tally += slot_tally;
            first_wrong_at = earlier(first_wrong_at, wrong_at);
        }
        // Sorted: Known slots come first in `entries`, by number.
        debug_assert!(touched_known.is_sorted());
        // The slots the splice left alone keep their first wrong record, at its new place;
        // places keep their order, so the first such slot's is the earliest.
        let untouched_wrong = self
            .wrong_firsts
            .iter()
            .find(|(_, number)| touched_known.binary_search(number).is_err())
            .map(|(&at, _)| splice.place_of_known(at));
        first_wrong_at = earlier(first_wrong_at, untouched_wrong);

        // Each touched window's last value: the known file's after the middle, else the
        // middle's, else the known file's before it. The middle's last value of a window is
        // its last record's: sorted by end and place, the last of each end's run.
        let mut middle_by_end: Vec<(i64, usize)> = middle
            .iter()
            .enumerate()
            .map(|(i, record)| (record.window_end, i))
            .collect();
        middle_by_end.sort_unstable();
        let middle_last = |end: i64| {
            let after = middle_by_end.partition_point(|&(e, _)| e <= end);
            after
                .checked_sub(1)
                .filter(|&i| middle_by_end[i].0 == end)
                .map(|i| middle[middle_by_end[i].1].sum)
        };
        let mut windows: Vec<i64> = known[head..tail_from]
            .iter()
            .map(|record| record.window_end)
            .chain(middle_by_end.iter().map(|&(end, _)| end))
            .collect();
        windows.sort_unstable();
        windows.dedup();
        let mut stale_windows = self.stale_windows;
        for end in windows {
            let places = self.window_places(end);
            let sum_at = |at: u32| known[at as usize].sum;
            let before = places.last().map(|&at| sum_at(at));
            let after = match places.last() {
                Some(&last) if last as usize >= tail_from => Some(sum_at(last)),
                _ => middle_last(end).or_else(|| {
                    let kept = places.partition_point(|&at| (at as usize) < head);
                    kept.checked_sub(1).map(|i| sum_at(places[i]))
                }),
            };
            let want = tallies.windows.get(&end);
            stale_windows = stale_windows - stale(before, want) + stale(after, want);
        }
        Judged {
            tally,
            first_wrong_at,
            stale_windows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::identity::judge_records;
    use super::super::Reference;
    use crate::observation::records::{own_and_known_middles, KnownRecords, Segment, Splice};
    use keel_engine::{KeyScheme, Record, RecordKind};
    use std::sync::Arc;

    fn rec(key: &str, window_end: i64, sum: i128, kind: RecordKind) -> Record {
        Record {
            key: key.to_string(),
            window_end,
            sum,
            watermark: 24,
            kind,
        }
    }

    /// Every splice of `known` (replaced runs at every place, with each of `middles`) is
    /// judged against `reference` as its whole view is, under both key schemes. Returns how
    /// many splices were judged.
    fn check(reference: &Reference, known: &[Record], middles: &[Vec<Record>]) -> u64 {
        let shared = Arc::new(KnownRecords::new(known.to_vec().into()));
        let middles = own_and_known_middles(known.len(), middles);
        let mut judged = 0;
        for key in [KeyScheme::EventIndex, KeyScheme::ProcessingTime] {
            let tallies = reference.tallies(key);
            let reference_len = reference.records.len() as u64;
            let base = reference.splice_base(&shared, key);
            for head in 0..=known.len() {
                for tail_from in head..=known.len() {
                    for middle in &middles {
                        let splice = Splice {
                            known: Arc::clone(&shared),
                            head,
                            middle: middle.clone(),
                            tail_from,
                        };
                        let mut whole = known[..head].to_vec();
                        whole.extend(splice.middle_records().cloned());
                        whole.extend(known[tail_from..].iter().cloned());
                        assert_eq!(
                            base.judge(tallies, key, &splice),
                            judge_records(tallies, reference_len, &whole, key),
                            "{key:?}: {head}..{tail_from} replaced by {middle:?}"
                        );
                        judged += 1;
                    }
                }
            }
        }
        judged
    }

    #[test]
    fn a_splice_is_judged_as_its_whole_view() {
        use RecordKind::{Fire, Flush, LateUpdate};
        // The chapter's output, one of its records twice.
        let mut want = vec![
            rec("13:10", 10, 55, Fire),
            rec("24:20", 20, 138, Fire),
            rec("25:20", 20, 155, LateUpdate),
            rec("flush:30", 30, 255, Flush),
            rec("flush:30", 30, 255, Flush),
        ];
        let reference = crate::verdict::tests::reference(want.clone());
        let chapter = want.clone();
        // A known file that is not the reference: a duplicate, a wrong sum, a loss, a record
        // in a slot the reference lacks, and a stale window.
        want[2].sum = 999;
        want.insert(1, want[0].clone());
        want.remove(4);
        want.push(rec("7:40", 40, 1, Fire));
        let known = want;
        let middles = [
            vec![],
            vec![known[0].clone()],
            vec![rec("25:20", 20, 155, LateUpdate)],
            vec![rec("25:20", 20, 1, LateUpdate), rec("13:10", 10, 55, Fire)],
            vec![
                rec("flush:30", 30, 255, Flush),
                rec("flush:30", 30, 255, Flush),
            ],
            vec![rec("9:50", 50, 3, Fire), rec("24:20", 20, 138, Fire)],
            // Another copy of the known file's wrong record: its first place moves.
            vec![rec("25:20", 20, 999, LateUpdate)],
        ];
        // Both key schemes, 28 (head, tail) pairs, 7 middles of their own, 28 runs, 28 × 18
        // pairs of runs and 2 × 28 runs with a middle of its own after.
        assert_eq!(
            check(&reference, &known, &middles),
            2 * 28 * (7 + 28 + 28 * 18 + 2 * 28)
        );
        assert_eq!(check(&reference, &[], &middles), 2 * (7 + 1 + 1 + 2));
        // The reference's own records (a fault-free run's file): runs of them written again,
        // each from at or before the end of the one before, are judged without their slots
        // (`Base::is_exact`, `chain_copies`).
        assert_eq!(
            check(&reference, &chapter, &middles),
            2 * 21 * (7 + 21 + 21 * 15 + 2 * 21)
        );
    }

    /// Which splices are chains of runs of the known file, and how many records they hold.
    #[test]
    fn a_chain_is_runs_that_overlap_or_touch_from_start_to_end() {
        let known: Vec<Record> = (0..5)
            .map(|i| rec(&format!("{i}:10"), 10, i.into(), RecordKind::Fire))
            .collect();
        let shared = Arc::new(KnownRecords::new(known.into()));
        // Runs as (from, to).
        let chain = |head: usize, runs: &[(usize, usize)], tail_from: usize| {
            super::chain_copies(&Splice {
                known: Arc::clone(&shared),
                head,
                middle: runs
                    .iter()
                    .map(|&(from, to)| Segment::Known(from..to))
                    .collect(),
                tail_from,
            })
        };
        // The fault-free file, and a replay of 1..3 after 0..3.
        assert_eq!(chain(5, &[], 5), Some(5));
        assert_eq!(chain(3, &[(1, 3)], 3), Some(7));
        // Two replays (a second crash after the first), one going back before the first.
        assert_eq!(chain(3, &[(1, 4), (0, 2)], 2), Some(3 + 3 + 2 + 3));
        // A gap (2..3 never written), a run starting past the one before, a missing end, a
        // missing start, and an empty run left out.
        assert_eq!(chain(2, &[(3, 5)], 5), None);
        assert_eq!(chain(3, &[(1, 2), (3, 4)], 4), None);
        assert_eq!(chain(3, &[(1, 4)], 5), None);
        assert_eq!(chain(0, &[(1, 5)], 5), None);
        assert_eq!(chain(3, &[(1, 4)], 4), Some(3 + 3 + 1));
        assert_eq!(chain(3, &[(2, 2), (3, 5)], 5), Some(3 + 2));
        // A middle of its own is not a chain.
        let own = Splice {
            known: Arc::clone(&shared),
            head: 5,
            middle: vec![Segment::Own(vec![rec("x", 1, 1, RecordKind::Fire)])],
            tail_from: 5,
        };
        assert_eq!(super::chain_copies(&own), None);
    }
}
