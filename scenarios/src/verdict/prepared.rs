//! What judging prepares of a reference once and reuses for every run judged against it:
//! the reference side of a judgement per key scheme, known files judged as splice bases, and
//! shared final windows already compared with the reference's. Caches, not part of the
//! reference's value.

use super::identity::ReferenceTallies;
use super::{splice, Reference};
use crate::observation::records::KnownRecords;
use crate::observation::SharedWindows;
use keel_engine::KeyScheme;
use keel_sim::Fingerprint;
use std::sync::{Arc, Mutex, OnceLock};

/// The reference side of every judgement, built once per key scheme (a processing-time key
/// names no event, so its slots are coarser), and the final windows' text.
#[derive(Clone, Debug, Default)]
pub(super) struct Prepared {
    event_index: OnceLock<ReferenceTallies>,
    processing_time: OnceLock<ReferenceTallies>,
    /// The hash of the final windows' text (`Reference::final_windows_hash`).
    final_windows_hash: OnceLock<u64>,
    spliced: SpliceBases,
    compared_windows: ComparedWindows,
}

/// The most shared final windows whose comparison with the reference's a reference keeps.
const COMPARED_WINDOWS_MAX: usize = 16;

/// Shared final windows (`observation::FinalState`) already compared with the reference's,
/// and whether they were equal, the oldest dropped beyond [`COMPARED_WINDOWS_MAX`]: the
/// points of a sweep that end alike share one map, compared once instead of once a point.
/// Each is kept alive here, so its address is not reused while it is remembered. A cache: a
/// clone starts empty.
#[derive(Debug, Default)]
struct ComparedWindows(Mutex<Vec<ComparedWindow>>);

/// Shared final windows, whether they are the reference's, and the hash of their text.
#[derive(Clone, Debug)]
struct ComparedWindow {
    windows: SharedWindows,
    equal: bool,
    text_hash: u64,
}

impl Clone for ComparedWindows {
    fn clone(&self) -> ComparedWindows {
        ComparedWindows::default()
    }
}

/// The most known files whose judgement a reference keeps (one a sink and key scheme is what
/// a sweep needs).
const SPLICE_BASES_MAX: usize = 4;

/// Known files judged against the reference, by key scheme, to judge their splices from
/// (`verdict/splice.rs`), the oldest dropped beyond [`SPLICE_BASES_MAX`]. A cache: a clone
/// starts empty.
#[derive(Debug, Default)]
struct SpliceBases(Mutex<Vec<SpliceBase>>);

/// A known file, the key scheme it was judged as, and its judgement.
type SpliceBase = (Arc<KnownRecords>, KeyScheme, Arc<splice::Base>);

impl Clone for SpliceBases {
    fn clone(&self) -> SpliceBases {
        SpliceBases::default()
    }
}

/// A cache, not part of the reference's value: two references with the same fields are equal
/// whatever either has prepared.
impl PartialEq for Prepared {
    fn eq(&self, _: &Prepared) -> bool {
        true
    }
}

impl Eq for Prepared {}

impl Reference {
    /// The FNV-1a 64 of `keel_engine::format_windows(windows)` (hashed once per shared map).
    pub fn final_windows_hash(&self, windows: &SharedWindows) -> u64 {
        self.compared_windows(windows).text_hash
    }

    /// Whether `windows` are the reference's final windows (compared once per shared map).
    pub fn has_final_windows(&self, windows: &SharedWindows) -> bool {
        self.compared_windows(windows).equal
    }

    /// What is known of `windows`, worked out at the first sight of the shared map.
    fn compared_windows(&self, windows: &SharedWindows) -> ComparedWindow {
        let mut compared = self
            .prepared
            .compared_windows
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(known) = compared.iter().find(|c| Arc::ptr_eq(&c.windows, windows)) {
            return known.clone();
        }
        let text_hash =
            |windows| Fingerprint::of(keel_engine::format_windows(windows).as_bytes()).0;
        let equal = **windows == self.final_windows;
        let known = ComparedWindow {
            windows: Arc::clone(windows),
            equal,
            text_hash: if equal {
                *self
                    .prepared
                    .final_windows_hash
                    .get_or_init(|| text_hash(&self.final_windows))
            } else {
                text_hash(windows)
            },
        };
        if compared.len() == COMPARED_WINDOWS_MAX {
            compared.remove(0);
        }
        compared.push(known.clone());
        known
    }

    /// `known` judged against the reference as a run keyed by `key`, built at the first call.
    pub(super) fn splice_base(
        &self,
        known: &Arc<KnownRecords>,
        key: KeyScheme,
    ) -> Arc<splice::Base> {
        let mut bases = self
            .prepared
            .spliced
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, _, base)) = bases
            .iter()
            .find(|(k, scheme, _)| Arc::ptr_eq(k, known) && *scheme == key)
        {
            return Arc::clone(base);
        }
        // Another sink's known file with the same records (a fault-free run writes the same
        // lines on the append and the idempotent sink): its judgement, not a second one.
        let same_records = bases
            .iter()
            .find(|(k, scheme, _)| *scheme == key && k.records == known.records)
            .map(|(_, _, base)| Arc::clone(base));
        let base = same_records.unwrap_or_else(|| {
            Arc::new(splice::Base::of(
                self.tallies(key),
                self.records.len() as u64,
                &known.records,
                key,
            ))
        });
        if bases.len() == SPLICE_BASES_MAX {
            bases.remove(0);
        }
        bases.push((Arc::clone(known), key, Arc::clone(&base)));
        base
    }

    /// The reference side of a judgement of a run keyed by `key`, built at the first call.
    pub(super) fn tallies(&self, key: KeyScheme) -> &ReferenceTallies {
        let cell = match key {
            KeyScheme::EventIndex => &self.prepared.event_index,
            KeyScheme::ProcessingTime => &self.prepared.processing_time,
        };
        let tallies = cell.get_or_init(|| ReferenceTallies::of(&self.records, key));
        debug_assert_eq!(
            tallies.records_len(),
            self.records.len() as u64,
            "the records did not change since they were tallied"
        );
        tallies
    }
}
