//! A depth-2 sweep's pair counts as a file (`keel sweep --counts`): what every shard of one
//! sweep would otherwise count again, running each first fault once (a quarter of a
//! 1,000-event shard's time, measured in `scenarios/SCALE-LOG.md`).
//!
//! The file names the sweep it counted (scenario, options, a digest of the events and the
//! keel version that counted) and carries a digest of its counts, so that a file from
//! another sweep, another build or an edit is refused with what differs, never read as
//! counts: a wrong count would draw pairs that do not exist. The command reads and writes
//! the file; this module does no I/O.

use super::points::PairCounts;
use super::SweepSpec;
use crate::spec::ScenarioSpec;
use keel_engine::Event;
use keel_sim::{hex16, FingerprintBuilder};
use serde::{Deserialize, Serialize};

/// What `--counts` writes: one JSON object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountsFile {
    /// The keel version that counted: another version may count otherwise.
    keel: String,
    spec: ScenarioSpec,
    sweep: SweepSpec,
    /// A digest of the events, as loaded (the spec names only their file).
    events: String,
    counts: PairCounts,
    /// A digest of `counts`.
    digest: String,
}

impl CountsFile {
    /// The file for `counts`, counted for this sweep.
    pub fn new(
        spec: &ScenarioSpec,
        sweep: &SweepSpec,
        events: &[Event],
        counts: &PairCounts,
    ) -> CountsFile {
        CountsFile {
            keel: env!("CARGO_PKG_VERSION").to_string(),
            spec: spec.clone(),
            sweep: sweep.clone(),
            events: events_digest(events),
            counts: counts.clone(),
            digest: counts_digest(counts),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("counts serialize") + "\n"
    }

    /// The counts in `text`, if it is a counts file of this very sweep; else why not.
    pub fn counts_of(
        text: &str,
        spec: &ScenarioSpec,
        sweep: &SweepSpec,
        events: &[Event],
    ) -> Result<PairCounts, String> {
        let file: CountsFile = serde_json::from_str(text)
            .map_err(|e| format!("not a counts file of `keel sweep --counts` ({e})"))?;
        let keel = env!("CARGO_PKG_VERSION");
        if file.keel != keel {
            return Err(format!(
                "counted by keel {}, this is keel {keel}",
                file.keel
            ));
        }
        if file.events != events_digest(events) {
            return Err("counted for other events (their file changed since)".to_string());
        }
        if file.spec != *spec {
            return Err("counted for another scenario or other options".to_string());
        }
        if file.sweep != *sweep {
            return Err(
                "counted for another sweep (sinks, faults, depth or power-loss points)".to_string(),
            );
        }
        if file.digest != counts_digest(&file.counts) {
            return Err("its counts do not match their digest (the file was changed)".to_string());
        }
        Ok(file.counts)
    }
}

fn events_digest(events: &[Event]) -> String {
    crate::catalogue::events_digest(events).to_string()
}

fn counts_digest(counts: &PairCounts) -> String {
    let mut digest = FingerprintBuilder::default();
    for row in &counts.rows {
        digest.write(&(row.len() as u64).to_le_bytes());
        for lens in row {
            digest.write(&(lens.len() as u64).to_le_bytes());
            for len in lens {
                digest.write(&len.to_le_bytes());
            }
        }
    }
    hex16(digest.finish().0).as_str().to_string()
}
