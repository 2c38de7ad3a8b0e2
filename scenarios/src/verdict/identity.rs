//! Record identity and the tallies it gives (the module documentation of `verdict.rs`
//! defines them): a record's slot and content, the reference's copies per slot, and the
//! judgement of a whole list of records. `splice.rs` judges a splice with the same pieces.

use keel_engine::{KeyScheme, Record, RecordKind};
use std::collections::BTreeMap;

/// The reference's records by slot and content, and their windows' last values. Sorted
/// vectors, not nested maps: a million-event reference has a slot per record, most with one
/// content, and a map per slot cost a B-tree node each (about 400 bytes).
#[derive(Clone, Debug)]
pub(super) struct ReferenceTallies {
    /// Every slot in order, with its copies and the end of its contents in `contents` (they
    /// start where the previous slot's end).
    slots: Vec<(Slot, u64, usize)>,
    /// Each slot's contents in order, with their copies.
    contents: Vec<(Content, u64)>,
    /// The records applied in order as an upsert by window end.
    pub(super) windows: BTreeMap<i64, i128>,
}

impl ReferenceTallies {
    pub(super) fn of(records: &[Record], key: KeyScheme) -> ReferenceTallies {
        let mut identities: Vec<(Slot, Content)> = records
            .iter()
            .map(|record| (slot(record, key), content(record)))
            .collect();
        identities.sort_unstable();
        let mut slots = Vec::new();
        let mut contents = Vec::new();
        for run in identities.chunk_by(|a, b| a.0 == b.0) {
            for copies in run.chunk_by(|a, b| a.1 == b.1) {
                contents.push((copies[0].1, copies.len() as u64));
            }
            slots.push((run[0].0.clone(), run.len() as u64, contents.len()));
        }
        slots.shrink_to_fit();
        contents.shrink_to_fit();
        ReferenceTallies {
            slots,
            contents,
            windows: upsert(records),
        }
    }

    /// The reference's copies in `slot`, and how many of each content (sorted by content).
    pub(super) fn slot(&self, slot: &Slot) -> (u64, Option<&[(Content, u64)]>) {
        match self.slots.binary_search_by(|(s, _, _)| s.cmp(slot)) {
            Ok(i) => {
                let start = if i == 0 { 0 } else { self.slots[i - 1].2 };
                let (_, total, end) = &self.slots[i];
                (*total, Some(&self.contents[start..*end]))
            }
            Err(_) => (0, None),
        }
    }

    /// How many records the reference has.
    pub(super) fn records_len(&self) -> u64 {
        self.slots.iter().map(|(_, total, _)| total).sum()
    }
}

/// Where a record sits: window end, kind, and the triggering event when the key names one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Slot {
    window_end: i64,
    kind: RecordKind,
    /// The key's event index or "flush"; None when the run's keys name no event.
    trigger: Option<Trigger>,
}

/// The part of a key before its last ':': an event index written in plain decimal (no sign,
/// no leading zero) as its number, so that a record's slot costs no allocation; any other
/// text ("flush", or what a wrong engine wrote) as it is. Two keys have equal triggers
/// exactly when their texts are equal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Trigger {
    Index(u64),
    Text(String),
}

impl Trigger {
    pub(super) fn of(text: &str) -> Trigger {
        let plain = !text.is_empty()
            && text.bytes().all(|b| b.is_ascii_digit())
            && (text == "0" || !text.starts_with('0'));
        match text.parse() {
            Ok(index) if plain => Trigger::Index(index),
            _ => Trigger::Text(text.to_string()),
        }
    }
}

pub(super) fn slot(record: &Record, key: KeyScheme) -> Slot {
    let trigger = match key {
        KeyScheme::EventIndex => Some(Trigger::of(
            record
                .key
                .rsplit_once(':')
                .map_or(record.key.as_str(), |(prefix, _)| prefix),
        )),
        KeyScheme::ProcessingTime => None,
    };
    Slot {
        window_end: record.window_end,
        kind: record.kind,
        trigger,
    }
}

/// A record's content within its slot: every field the slot does not hold, the key aside.
pub(super) type Content = (i128, i64);

pub(super) fn content(record: &Record) -> Content {
    (record.sum, record.watermark)
}

/// The counts of one view's records, or of one slot's, against the reference (the module's
/// documentation defines them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) delivered: u64,
    pub(super) duplicates: u64,
    pub(super) wrong: u64,
    pub(super) lost: u64,
    /// Wrong records standing in for missing ones.
    pub(super) stand_ins: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.delivered += other.delivered;
        self.duplicates += other.duplicates;
        self.wrong += other.wrong;
        self.lost += other.lost;
        self.stand_ins += other.stand_ins;
    }
}

impl std::ops::SubAssign for Tally {
    fn sub_assign(&mut self, other: Tally) {
        self.delivered -= other.delivered;
        self.duplicates -= other.duplicates;
        self.wrong -= other.wrong;
        self.lost -= other.lost;
        self.stand_ins -= other.stand_ins;
    }
}

/// What judging a view's records comes to: the tally, the place of the first wrong record,
/// and the stale windows.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Judged {
    pub(super) tally: Tally,
    pub(super) first_wrong_at: Option<usize>,
    pub(super) stale_windows: u64,
}

/// One slot's tally: the reference has `total` copies in it, `want` of each content; the
/// view has `copies` (content, copies, place of the first). Also the place of the view's
/// first record of a content the reference lacks in the slot.
pub(super) fn slot_tally(
    total: u64,
    want: Option<&[(Content, u64)]>,
    copies: impl Iterator<Item = (Content, u64, usize)>,
) -> (Tally, Option<usize>) {
    let (mut delivered, mut duplicates, mut foreign) = (0, 0, 0);
    let mut first_wrong_at: Option<usize> = None;
    for (content, got, first_at) in copies {
        let want = want
            .and_then(|wanted| {
                wanted
                    .binary_search_by(|(c, _)| c.cmp(&content))
                    .ok()
                    .map(|i| wanted[i].1)
            })
            .unwrap_or(0);
        if want == 0 {
            foreign += got;
            first_wrong_at = earlier(first_wrong_at, Some(first_at));
        } else {
            delivered += want.min(got);
            duplicates += got.saturating_sub(want);
        }
    }
    let missing = total - delivered;
    let tally = Tally {
        delivered,
        duplicates,
        wrong: foreign,
        lost: missing.saturating_sub(foreign),
        stand_ins: missing.min(foreign),
    };
    (tally, first_wrong_at)
}

/// Judges `records`, a whole view, against `tallies` (a reference of `reference_len`
/// records).
pub(super) fn judge_records(
    tallies: &ReferenceTallies,
    reference_len: u64,
    records: &[Record],
    key: KeyScheme,
) -> Judged {
    // The view's records by slot and content, each with its place in sink order: sorted, so
    // each slot's records, and within it each content's, are one run.
    let mut keyed: Vec<(Slot, Content, usize)> = records
        .iter()
        .enumerate()
        .map(|(at, record)| (slot(record, key), content(record), at))
        .collect();
    keyed.sort_unstable();
    let mut tally = Tally::default();
    let mut first_wrong_at: Option<usize> = None;
    // The reference's records in slots the view has nothing in: all lost, none stood in for.
    let mut untouched = reference_len;
    for slot_run in keyed.chunk_by(|a, b| a.0 == b.0) {
        let (total, want) = tallies.slot(&slot_run[0].0);
        untouched -= total;
        // The run is sorted by place too: a content's first is its run's first.
        let copies = slot_run
            .chunk_by(|a, b| a.1 == b.1)
            .map(|run| (run[0].1, run.len() as u64, run[0].2));
        let (slot_tally, wrong_at) = slot_tally(total, want, copies);
        tally += slot_tally;
        first_wrong_at = earlier(first_wrong_at, wrong_at);
    }
    tally.lost += untouched;
    Judged {
        tally,
        first_wrong_at,
        stale_windows: stale_windows(&tallies.windows, records),
    }
}

/// `records` applied in sink order as an upsert by window end: each window's last value.
pub(super) fn upsert(records: &[Record]) -> BTreeMap<i64, i128> {
    records.iter().map(|r| (r.window_end, r.sum)).collect()
}

/// The consumer view: records applied in sink order as an upsert by window end. Counts the
/// windows whose last value differs from the reference's (`want`, the reference's upsert):
/// missing and extra windows too.
pub(super) fn stale_windows(want: &BTreeMap<i64, i128>, seen: &[Record]) -> u64 {
    // Each window's records in sink order, windows in order: a window's last value is its
    // run's last.
    let mut places: Vec<(i64, usize)> = seen
        .iter()
        .enumerate()
        .map(|(at, record)| (record.window_end, at))
        .collect();
    places.sort_unstable();
    let mut stale = 0;
    let mut wanted = want.iter().peekable();
    for (i, &(end, at)) in places.iter().enumerate() {
        if places.get(i + 1).is_some_and(|&(next, _)| next == end) {
            continue;
        }
        // Windows the reference has before this one and the view has not.
        while wanted.next_if(|&(&want_end, _)| want_end < end).is_some() {
            stale += 1;
        }
        match wanted.next_if(|&(&want_end, _)| want_end == end) {
            Some((_, &sum)) if sum == seen[at].sum => {}
            _ => stale += 1,
        }
    }
    stale + wanted.count() as u64
}

/// The earlier of two places, either of which may be missing.
pub(super) fn earlier(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}
