//! The lines of a `--shard` output file, read back by `keel merge`.

use super::args::Shard;
use crate::explore::{ExploreRow, ExploreSpec};
use crate::spec::ScenarioSpec;
use crate::sweep::{PointRecord, SweepSpec};

/// One line of a shard file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub(crate) enum ShardLine {
    SweepHeader {
        spec: ScenarioSpec,
        sweep: SweepSpec,
        shard: Shard,
        total: u64,
    },
    ExploreHeader {
        spec: ScenarioSpec,
        explore: ExploreSpec,
        shard: Shard,
        total: u64,
    },
    Point(PointRecord),
    Row(ExploreRow),
}

pub(crate) fn shard_output(lines: &[ShardLine]) -> String {
    lines
        .iter()
        .map(|line| serde_json::to_string(line).expect("shard lines serialize") + "\n")
        .collect()
}
