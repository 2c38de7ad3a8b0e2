//! The properties a run is judged by, each defined once, by name, here and nowhere else.
//!
//! Every command (`run`, `sweep`, `explore`, `replay`, `shrink`, `merge`, `teach`) asks
//! [`Property::holds`] and [`Expectation`] what a verdict means; none of them decides on its own
//! what "exactly-once" is.
//!
//! - `no-loss`: every record of the fault-free run reached the consumer (by identity: logical
//!   content and occurrence, see `verdict.rs`).
//! - `no-duplicates`: no record reached the consumer more often than the fault-free run
//!   emitted it.
//! - `no-wrong`: every record the consumer saw is one the fault-free run emitted, field for
//!   field (window end, kind, sum, watermark, and the triggering event where the key names
//!   it; the sink's own key aside), and every line is a whole record (no corruption).
//! - `no-rollback`: no restart restored an older checkpoint than the newest one committed.
//! - `recovers`: the run completed (recovery neither failed nor looped) with the fault-free
//!   run's final windows and its count of events dropped as too late.
//! - `consistent-view`: a consumer that applies the records in sink order as an upsert by
//!   window end ends with the fault-free run's final value for every window.
//! - `at-least-once` = all of the above but `no-duplicates`; `exactly-once` = all of the above.
//! - `bounded-disk`: the run leaves in its directory the sink file and at most its newest
//!   checkpoint, nothing older and no temporary file (a resource property, not a delivery
//!   one: no shorthand includes it and no sink promises it unasked; ask with
//!   `--expect exactly-once,bounded-disk`).
//!
//! Independently of any expectation, `matches-model` fails every command: a fault-free run
//! that disagrees with the independent reference model (`model.rs`: its records, final
//! windows, counts and checkpoints on the documented cadence), or a simulated run on a file
//! sink whose reported sink writes (written plus skipped) differ from the ones the simulated
//! sink served (the world's own count), or whose written ones differ from the writes that
//! changed the sink file (where the run ran them itself), or that restarted over one sink outage the
//! documented retries ride out (`observation.rs`). See `Verdict::failures` (`verdict.rs`).
//!
//! The definitions read a run's figures through [`Judged`], which the oracle's `Verdict`
//! implements: the oracle depends on these definitions, not the other way round.

pub mod mutant;

use crate::observation::Recovery;
use crate::runner::View;
use keel_engine::SinkKind;
use mutant::OracleMutant;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;

/// The figures the properties are defined on: what the oracle (`verdict.rs`) found in one
/// consumer view of one run, its `Verdict` being the one implementation.
pub trait Judged {
    /// Records of the fault-free run the consumer never saw.
    fn lost(&self) -> u64;
    /// Records seen more often than the fault-free run emitted them.
    fn duplicates(&self) -> u64;
    /// Records seen that the fault-free run never emitted.
    fn wrong(&self) -> u64;
    /// Lines that are not whole records.
    fn corrupt(&self) -> u64;
    /// Restarts that restored an older checkpoint than the newest one committed.
    fn rolled_back(&self) -> u64;
    fn recovery(&self) -> Recovery;
    /// The final operator state equals the fault-free run's.
    fn final_windows_match(&self) -> bool;
    /// Windows whose value, upserted in sink order, is not the fault-free final one.
    fn stale_windows(&self) -> u64;
    /// Files left beside the sink and its newest checkpoint.
    fn stray_files(&self) -> u64;
}

/// One named property of a run, as seen by one consumer view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Property {
    Recovers,
    NoWrong,
    NoLoss,
    ConsistentView,
    NoRollback,
    NoDuplicates,
    BoundedDisk,
}

impl Property {
    /// Every property: the delivery properties most serious first (the order shrinking
    /// prefers to keep), then the resource property.
    pub const ALL: [Property; 7] = [
        Property::Recovers,
        Property::NoWrong,
        Property::NoLoss,
        Property::ConsistentView,
        Property::NoRollback,
        Property::NoDuplicates,
        Property::BoundedDisk,
    ];

    /// What a consumer of the sink can see: `exactly-once` is all of these (every property
    /// but the resource one, which comes last in [`Property::ALL`]).
    pub const DELIVERY: &'static [Property] = Property::ALL.split_at(Property::ALL.len() - 1).0;
}

// `DELIVERY` is `ALL` less its last property, which must be the resource one.
const _: () = assert!(matches!(
    Property::ALL[Property::ALL.len() - 1],
    Property::BoundedDisk
));

impl Property {
    pub fn name(self) -> &'static str {
        match self {
            Property::NoLoss => "no-loss",
            Property::NoDuplicates => "no-duplicates",
            Property::NoWrong => "no-wrong",
            Property::NoRollback => "no-rollback",
            Property::Recovers => "recovers",
            Property::ConsistentView => "consistent-view",
            Property::BoundedDisk => "bounded-disk",
        }
    }

    /// What the property asks, in one line (help text and reports).
    pub fn description(self) -> &'static str {
        match self {
            Property::NoLoss => "every record of the fault-free run reached the consumer",
            Property::NoDuplicates => "no record reached the consumer more than once",
            Property::NoWrong => {
                "every record is the fault-free run's, field for field, and no line is corrupt"
            }
            Property::NoRollback => {
                "no restart restored an older checkpoint than the newest committed"
            }
            Property::Recovers => {
                "the run completed with the fault-free run's final windows and dropped-late count"
            }
            Property::ConsistentView => {
                "upserting the records by window end gives the fault-free final values"
            }
            Property::BoundedDisk => {
                "the run leaves the sink and at most its newest checkpoint, no older or temporary file"
            }
        }
    }

    /// The one definition of each property.
    pub fn holds(self, judged: &impl Judged) -> bool {
        match mutant::active() {
            Some(OracleMutant::Off(off)) if off == self => return true,
            Some(OracleMutant::RecoversIgnoresFinalWindows) if self == Property::Recovers => {
                return judged.recovery() == Recovery::Ok;
            }
            _ => {}
        }
        match self {
            Property::NoLoss => judged.lost() == 0,
            Property::NoDuplicates => judged.duplicates() == 0,
            Property::NoWrong => judged.wrong() == 0 && judged.corrupt() == 0,
            Property::NoRollback => judged.rolled_back() == 0,
            Property::Recovers => judged.recovery() == Recovery::Ok && judged.final_windows_match(),
            Property::ConsistentView => judged.stale_windows() == 0,
            Property::BoundedDisk => judged.stray_files() == 0,
        }
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Property {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Property {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Property::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown property '{name}'")))
    }
}

/// A set of properties a run must hold (`--expect`), e.g. `exactly-once` or
/// `no-loss,no-rollback`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expectation {
    properties: BTreeSet<Property>,
}

/// The names `--expect` takes, for help text and errors.
pub const EXPECT_NAMES: &str = "exactly-once, at-least-once, no-loss, no-duplicates, no-wrong, no-rollback, recovers, consistent-view, bounded-disk";

impl Expectation {
    pub fn of(properties: impl IntoIterator<Item = Property>) -> Expectation {
        Expectation {
            properties: properties.into_iter().collect(),
        }
    }

    pub fn exactly_once() -> Expectation {
        Expectation::of(Property::DELIVERY.iter().copied())
    }

    pub fn at_least_once() -> Expectation {
        Expectation::of(
            Property::DELIVERY
                .iter()
                .copied()
                .filter(|&p| p != Property::NoDuplicates),
        )
    }

    /// Parses a comma-separated list of property names and the two shorthands.
    pub fn parse(text: &str) -> Result<Expectation, String> {
        let mut properties = BTreeSet::new();
        for name in text.split(',').map(str::trim) {
            match name {
                "exactly-once" => properties.extend(Property::DELIVERY.iter().copied()),
                "at-least-once" => properties.extend(Expectation::at_least_once().properties),
                _ => match Property::ALL.into_iter().find(|p| p.name() == name) {
                    Some(p) => {
                        properties.insert(p);
                    }
                    None => {
                        return Err(format!(
                            "unknown property '{name}': expected a comma-separated list of {EXPECT_NAMES}"
                        ))
                    }
                },
            }
        }
        Ok(Expectation { properties })
    }

    /// What a sink promises to a consumer of `view` when the user asks nothing: at-least-once
    /// for the append sink and a read_uncommitted consumer, exactly-once otherwise.
    pub fn promised(sink: SinkKind, view: Option<View>) -> Expectation {
        match (sink, view) {
            (SinkKind::Append, _) | (_, Some(View::ReadUncommitted)) => {
                Expectation::at_least_once()
            }
            _ => Expectation::exactly_once(),
        }
    }

    /// The expectation a view is judged by: what was asked, within what the view promises. A
    /// read_uncommitted consumer has opted into dirty reads, so duplicates are a figure there,
    /// never a failure; every other view is held to all that was asked.
    pub fn for_view(
        asked: Option<&Expectation>,
        sink: SinkKind,
        view: Option<View>,
    ) -> Expectation {
        match asked {
            None => Expectation::promised(sink, view),
            Some(asked) if view == Some(View::ReadUncommitted) => Expectation::of(
                asked
                    .properties
                    .iter()
                    .copied()
                    .filter(|&p| p != Property::NoDuplicates),
            ),
            Some(asked) => asked.clone(),
        }
    }

    pub fn properties(&self) -> impl Iterator<Item = Property> + '_ {
        self.properties.iter().copied()
    }

    /// The asked properties the verdict breaks, most serious first.
    pub fn broken(&self, judged: &impl Judged) -> Vec<Property> {
        Property::ALL
            .into_iter()
            .filter(|p| self.properties.contains(p) && !p.holds(judged))
            .collect()
    }

    /// The canonical name: a shorthand where one fits (followed by the properties beyond it),
    /// else the names in severity order.
    pub fn name(&self) -> String {
        let mut names: Vec<&str> = Vec::new();
        let mut rest = self.properties.clone();
        for shorthand in [Expectation::exactly_once(), Expectation::at_least_once()] {
            if shorthand.properties.is_subset(&rest) {
                names.push(if shorthand == Expectation::exactly_once() {
                    "exactly-once"
                } else {
                    "at-least-once"
                });
                rest.retain(|p| !shorthand.properties.contains(p));
                break;
            }
        }
        names.extend(
            Property::ALL
                .into_iter()
                .filter(|p| rest.contains(p))
                .map(Property::name),
        );
        if names.is_empty() {
            "nothing".to_string()
        } else {
            names.join(",")
        }
    }
}

/// The one rule every command applies: why a view of a run fails. `broken` are the
/// properties the view breaks, `asked` the `--expect` given (None: what the sink promises to
/// that view). A fault-free run that disagrees with the independent model fails whatever was
/// asked ("matches-model"). Empty when the view holds.
pub fn failures(
    broken: &[Property],
    model_mismatch: bool,
    asked: Option<&Expectation>,
    sink: SinkKind,
    view: Option<View>,
) -> Vec<String> {
    // Nearly every point of a sweep breaks nothing: no expectation to build for it.
    if broken.is_empty() && !model_mismatch {
        return Vec::new();
    }
    failures_against(
        broken,
        model_mismatch,
        &Expectation::for_view(asked, sink, view),
    )
}

/// [`failures`] against the `expectation` of the view (what [`Expectation::for_view`] gives),
/// for callers that judge many views alike and build it once.
pub fn failures_against(
    broken: &[Property],
    model_mismatch: bool,
    expectation: &Expectation,
) -> Vec<String> {
    let model_mismatch = model_mismatch && mutant::active() != Some(OracleMutant::NoModelMismatch);
    if broken.is_empty() && !model_mismatch {
        return Vec::new();
    }
    let mut failures = Vec::new();
    if model_mismatch {
        failures.push(MATCHES_MODEL.to_string());
    }
    failures.extend(
        Property::ALL
            .into_iter()
            .filter(|p| broken.contains(p) && expectation.properties.contains(p))
            .map(|p| p.name().to_string()),
    );
    failures
}

/// The name of the check every fault-free run must pass: it agrees with the model.
pub const MATCHES_MODEL: &str = "matches-model";

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for Expectation {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Expectation::parse(text)
    }
}

impl Serialize for Expectation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Expectation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Expectation::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, canonical: &str) {
        let expectation = Expectation::parse(text).expect("valid");
        assert_eq!(expectation.name(), canonical, "{text}");
        assert_eq!(Expectation::parse(canonical), Ok(expectation));
    }

    #[test]
    fn names_parse_to_sets_and_back() {
        check("exactly-once", "exactly-once");
        check("at-least-once,no-duplicates", "exactly-once");
        check(
            "no-loss,no-wrong,no-rollback,recovers,consistent-view",
            "at-least-once",
        );
        check("no-loss", "no-loss");
        check("no-rollback, no-loss", "no-loss,no-rollback");
        check("bounded-disk,exactly-once", "exactly-once,bounded-disk");
        check("bounded-disk,at-least-once", "at-least-once,bounded-disk");
        check("bounded-disk", "bounded-disk");
        assert!(!Expectation::exactly_once()
            .properties()
            .any(|p| p == Property::BoundedDisk));
        assert!(Expectation::parse("no-loss,exactly-twice")
            .unwrap_err()
            .contains("unknown property 'exactly-twice'"));
    }

    #[test]
    fn a_read_uncommitted_consumer_is_never_held_to_no_duplicates() {
        let asked = Expectation::exactly_once();
        let view = Some(View::ReadUncommitted);
        assert_eq!(
            Expectation::for_view(Some(&asked), SinkKind::Transactional, view),
            Expectation::at_least_once()
        );
        assert_eq!(
            Expectation::for_view(None, SinkKind::Transactional, Some(View::ReadCommitted)),
            Expectation::exactly_once()
        );
        assert_eq!(
            Expectation::for_view(None, SinkKind::Append, None),
            Expectation::at_least_once()
        );
        assert_eq!(
            Expectation::for_view(Some(&asked), SinkKind::Append, None),
            Expectation::exactly_once()
        );
    }
}
