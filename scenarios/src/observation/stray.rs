//! Stray files: what a run left on its disk besides its sink file and its newest
//! checkpoint (the `bounded-disk` property counts them).

use keel_engine::incremental::{self, FileKind};
use keel_engine::{Checkpoint, IN_PLACE_FILE};

/// The files of `files` other than the sink file `sink_file` and the newest checkpoint: a
/// committed checkpoint with a smaller index than another one, the in-place protocol's file
/// beside numbered ones, and every temporary or unknown file. With incremental checkpoints
/// (a `manifest-<i>.json` is there), the newest checkpoint is the newest manifest with its
/// chain, known by name: the newest base at or below its index and every delta after that
/// base up to it (a chain holds one delta per checkpoint since its base); everything else
/// is stray.
pub(super) fn stray_files(files: &[String], sink_file: &str) -> Vec<String> {
    let chain = NewestChain::of(files);
    let newest = files
        .iter()
        .filter_map(|name| Checkpoint::index_from_file_name(name).map(|index| (index, name)))
        .max()
        .map(|(_, name)| name.as_str())
        .or_else(|| {
            files
                .iter()
                .map(String::as_str)
                .find(|&n| n == IN_PLACE_FILE)
        });
    let kept = |name: &str| match &chain {
        Some(chain) => chain.contains(name),
        None => Some(name) == newest,
    };
    let mut stray: Vec<String> = files
        .iter()
        .filter(|&name| name != sink_file && !kept(name))
        .cloned()
        .collect();
    stray.sort();
    stray
}

/// The newest incremental checkpoint's manifest and chain, if there is a manifest: the
/// manifest's index, and the base's (the newest at or below it) whose deltas after it up to
/// the manifest are in the chain.
#[derive(Clone, Copy, Debug)]
struct NewestChain {
    manifest: u64,
    base: Option<u64>,
}

impl NewestChain {
    fn of(files: &[String]) -> Option<NewestChain> {
        let parsed: Vec<(FileKind, u64)> = files
            .iter()
            .filter_map(|name| incremental::parse_file_name(name))
            .collect();
        let manifest = parsed
            .iter()
            .filter(|(kind, _)| *kind == FileKind::Manifest)
            .map(|&(_, index)| index)
            .max()?;
        let base = parsed
            .iter()
            .filter(|&&(kind, index)| kind == FileKind::Base && index <= manifest)
            .map(|&(_, index)| index)
            .max();
        Some(NewestChain { manifest, base })
    }

    /// Whether the file `name` is the manifest, the base or a delta of the chain, named as
    /// the engine names them (`FileKind::file_name`: no leading zero), without making the
    /// names (a sweep asks this of every file every point leaves).
    fn contains(&self, name: &str) -> bool {
        let Some((kind, index)) = incremental::parse_canonical_file_name(name) else {
            return false;
        };
        match kind {
            FileKind::Manifest => index == self.manifest,
            FileKind::Base => Some(index) == self.base,
            FileKind::Delta => self
                .base
                .is_some_and(|b| b < index && index <= self.manifest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(files: &[&str], sink_file: &str, stray: &[&str]) {
        let files: Vec<String> = files.iter().map(|f| f.to_string()).collect();
        assert_eq!(stray_files(&files, sink_file), stray, "{files:?}");
    }

    #[test]
    fn stray_files_are_all_but_the_sink_and_the_newest_checkpoint() {
        let sink = "sink-append.jsonl";
        check(&[sink, "state-16.json"], sink, &[]);
        check(&[sink], sink, &[]);
        check(&[], sink, &[]);
        // By index, not by name: state-8 sorts after state-16.
        check(
            &["state-16.json", sink, "state-8.json"],
            sink,
            &["state-8.json"],
        );
        check(
            &[sink, "state-24.json", "state-24.json.tmp", "state-16.json"],
            sink,
            &["state-16.json", "state-24.json.tmp"],
        );
        check(&[sink, "state.json"], sink, &[]);
        check(&[sink, "state.json", "state-8.json"], sink, &["state.json"]);
        check(&["state-8.json.tmp"], sink, &["state-8.json.tmp"]);
    }

    #[test]
    fn with_incremental_checkpoints_the_newest_manifest_and_its_chain_are_kept() {
        let sink = "sink-append.jsonl";
        check(
            &[sink, "base-8.json", "delta-16.json", "manifest-16.json"],
            sink,
            &[],
        );
        check(
            &[
                sink,
                "base-8.json",
                "delta-16.json",
                "base-24.json",
                "manifest-16.json",
                "manifest-24.json",
                "manifest-32.json.tmp",
                "delta-32.json",
            ],
            sink,
            &[
                "base-8.json",
                "delta-16.json",
                "delta-32.json",
                "manifest-16.json",
                "manifest-32.json.tmp",
            ],
        );
        check(&[sink, "manifest-8.json"], sink, &[]);
        // Only names as the engine makes them: a padded index is another file.
        check(
            &[
                sink,
                "base-8.json",
                "delta-016.json",
                "delta-16.json",
                "manifest-16.json",
            ],
            sink,
            &["delta-016.json"],
        );
        check(
            &[sink, "base-8.json", "state-8.json"],
            sink,
            &["base-8.json"],
        );
    }
}
