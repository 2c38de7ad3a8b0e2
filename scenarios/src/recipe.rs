//! The steps a fault-free run takes, restated from each checkpoint protocol's documented
//! recipe (README, "The engine, exactly" and "Checkpoint protocols") apart from the engine's
//! code, so an fsync, rename or removal the engine drops, adds or reorders fails
//! `matches-model` even where no verdict changes (a sink name left without its directory
//! fsync, say: only a power loss before the first checkpoint could tell, and recovery from
//! event 0 hides it).
//!
//! The recipe of a fault-free run over N events with a checkpoint every K:
//! - `disk.list .` (recovery finds no checkpoint);
//! - a file sink: `sink.open <file>`, then `disk.fsync-dir .` (a new file's name is durable
//!   only once its directory is synced); the transactional sink: `log.init-producer`,
//!   `log.begin`;
//! - for each event i: `source.read event i`, one sink request per record it emits
//!   (`sink.write <key>` or `log.send <key>`), and a checkpoint of index i + 1 when
//!   (i + 1) % K == 0;
//! - `source.read end-of-input`, one request per flushed record, then a file sink's
//!   `disk.fsync <file>`, or the transactional sink's final checkpoint of index N;
//! - a checkpoint of index n: the file sink's `disk.fsync <file>` first (last under
//!   `checkpoint-before-sink-sync`); under `in-place`, `disk.create state.json` and
//!   `disk.write state.json`; otherwise `disk.create` and `disk.write` of
//!   `state-<n>.json.tmp`, its `disk.fsync` (not under `no-fsync-rename` or `size-only`),
//!   `disk.rename state-<n>.json.tmp -> state-<n>.json`, `disk.fsync-dir .` (not under
//!   `no-dir-fsync`) and `disk.remove` of the previous checkpoint (before the rename under
//!   `delete-then-rename`); then the transactional sink's `log.commit`, followed by
//!   `log.init-producer` and `log.begin` unless it was the last.

use crate::model::ModelMismatch;
use keel_engine::{CheckpointProtocol, EngineConfig, KeyScheme, Record, SinkKind};

/// One step of the recipe: an effect and, where the recipe fixes it, its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecipeStep {
    pub op: &'static str,
    /// `None` where the target is not the recipe's to fix (a transaction's id, a
    /// processing-time key).
    pub target: Option<String>,
}

fn step(op: &'static str, target: impl Into<String>) -> RecipeStep {
    RecipeStep {
        op,
        target: Some(target.into()),
    }
}

fn untargeted(op: &'static str) -> RecipeStep {
    RecipeStep { op, target: None }
}

/// What the recipe of each protocol does, as the README states it (not read from
/// `keel_engine::CheckpointProtocol`'s own predicates, which are what is under test).
struct Recipe {
    in_place: bool,
    fsync_data: bool,
    fsync_dir: bool,
    delete_before_rename: bool,
    sink_sync_first: bool,
}

impl Recipe {
    fn of(protocol: CheckpointProtocol) -> Recipe {
        use CheckpointProtocol as P;
        Recipe {
            in_place: protocol == P::InPlace,
            fsync_data: !matches!(protocol, P::InPlace | P::NoFsyncRename | P::SizeOnly),
            fsync_dir: !matches!(protocol, P::InPlace | P::NoDirFsync),
            delete_before_rename: protocol == P::DeleteThenRename,
            sink_sync_first: protocol != P::CheckpointBeforeSinkSync,
        }
    }
}

/// The steps the recipe prescribes for a fault-free run of `config` over `events` events
/// whose records (with the chapter's stable keys, "<event index>:<end>" and "flush:<end>",
/// in emission order) are `records`.
pub fn fault_free_steps(config: &EngineConfig, events: u64, records: &[Record]) -> Vec<RecipeStep> {
    assert!(config.checkpoint_every > 0);
    let recipe = Recipe::of(config.protocol);
    let sink_file = match config.sink {
        SinkKind::Append => Some("sink-append.jsonl"),
        SinkKind::Idempotent => Some("sink-idempotent.jsonl"),
        SinkKind::Transactional => None,
    };
    // Requests per event, and the flush's, from the stable keys.
    let mut requests_after: Vec<Vec<&Record>> = vec![Vec::new(); events as usize];
    let mut flushed: Vec<&Record> = Vec::new();
    for record in records {
        let (trigger, _) = record
            .key
            .split_once(':')
            .expect("a stable key is <trigger>:<end>");
        match trigger.parse::<usize>() {
            Ok(index) if index < requests_after.len() => requests_after[index].push(record),
            _ => {
                assert_eq!(trigger, "flush", "a stable key names an event or the flush");
                flushed.push(record);
            }
        }
    }
    let request = |steps: &mut Vec<RecipeStep>, record: &Record| {
        let op = if sink_file.is_some() {
            "sink.write"
        } else {
            "log.send"
        };
        steps.push(match config.key {
            KeyScheme::EventIndex => step(op, record.key.clone()),
            KeyScheme::ProcessingTime => untargeted(op),
        });
    };
    let mut steps = vec![step("disk.list", ".")];
    match sink_file {
        Some(file) => {
            steps.push(step("sink.open", file));
            steps.push(step("disk.fsync-dir", "."));
        }
        None => {
            steps.push(untargeted("log.init-producer"));
            steps.push(untargeted("log.begin"));
        }
    }
    let mut previous: Option<u64> = None;
    let mut checkpoint = |steps: &mut Vec<RecipeStep>, index: u64, last: bool| {
        let sink_sync = |steps: &mut Vec<RecipeStep>| {
            if let Some(file) = sink_file {
                steps.push(step("disk.fsync", file));
            }
        };
        if recipe.sink_sync_first {
            sink_sync(steps);
        }
        if recipe.in_place {
            steps.push(step("disk.create", "state.json"));
            steps.push(step("disk.write", "state.json"));
        } else {
            let name = format!("state-{index}.json");
            let temp = format!("{name}.tmp");
            // The transactional sink's last checkpoint may share the index of the one before
            // (N a multiple of K): the rename then replaces it and nothing older is left.
            let older = previous
                .filter(|&p| p < index)
                .map(|p| format!("state-{p}.json"));
            steps.push(step("disk.create", temp.clone()));
            steps.push(step("disk.write", temp.clone()));
            if recipe.fsync_data {
                steps.push(step("disk.fsync", temp.clone()));
            }
            if recipe.delete_before_rename {
                steps.extend(older.clone().map(|o| step("disk.remove", o)));
            }
            steps.push(step("disk.rename", format!("{temp} -> {name}")));
            if recipe.fsync_dir {
                steps.push(step("disk.fsync-dir", "."));
            }
            if !recipe.delete_before_rename {
                steps.extend(older.map(|o| step("disk.remove", o)));
            }
            previous = Some(index);
        }
        if !recipe.sink_sync_first {
            sink_sync(steps);
        }
        if sink_file.is_none() {
            steps.push(untargeted("log.commit"));
            if !last {
                steps.push(untargeted("log.init-producer"));
                steps.push(untargeted("log.begin"));
            }
        }
    };
    for (index, requests) in requests_after.iter().enumerate() {
        steps.push(step("source.read", format!("event {index}")));
        for record in requests {
            request(&mut steps, record);
        }
        let read = index as u64 + 1;
        if read % config.checkpoint_every == 0 {
            checkpoint(&mut steps, read, false);
        }
    }
    steps.push(step("source.read", "end-of-input"));
    for record in &flushed {
        request(&mut steps, record);
    }
    match sink_file {
        Some(file) => steps.push(step("disk.fsync", file)),
        None => checkpoint(&mut steps, events, true),
    }
    steps
}

/// Compares the steps a fault-free run took (`(op, target)` in step order) with the
/// recipe's, naming the first step where they part.
pub fn check_steps<'a>(
    run: impl IntoIterator<Item = (&'a str, &'a str)>,
    recipe: &[RecipeStep],
) -> Option<ModelMismatch> {
    let show_recipe = |s: Option<&RecipeStep>| {
        s.map_or("none".to_string(), |s| match &s.target {
            Some(target) => format!("{} {target}", s.op),
            None => format!("{} (any target)", s.op),
        })
    };
    let mismatch = |i: usize, engine: String| ModelMismatch {
        at: format!("step {i} of the fault-free run (the protocol's recipe)"),
        model: show_recipe(recipe.get(i)),
        engine,
    };
    let mut taken = 0;
    for (i, (op, target)) in run.into_iter().enumerate() {
        let parts = recipe
            .get(i)
            .is_none_or(|want| op != want.op || want.target.as_ref().is_some_and(|t| t != target));
        if parts {
            return Some(mismatch(i, format!("{op} {target}")));
        }
        taken = i + 1;
    }
    (taken < recipe.len()).then(|| mismatch(taken, "none".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{run, RunSpec};
    use crate::verdict::Reference;
    use keel_sim::disk::FsModel;
    use keel_sim::TraceLine;

    fn steps_of(spec: &RunSpec) -> Vec<(String, String)> {
        run(spec)
            .world
            .trace()
            .lines()
            .filter_map(|line| match line {
                TraceLine::Step { op, target, .. } => Some((op.to_string(), target.clone())),
                _ => None,
            })
            .collect()
    }

    fn pairs(run: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
        run.iter()
            .map(|(op, target)| (op.as_str(), target.as_str()))
    }

    /// Checks ch04's fault-free run under `protocol`, `sink`, `key` and K against the
    /// recipe: the same steps, and `steps` of them.
    fn check(protocol: CheckpointProtocol, sink: SinkKind, key: KeyScheme, k: u64, steps: usize) {
        let mut spec = RunSpec::ch04_on(FsModel::Posix);
        spec.config.protocol = protocol;
        spec.config.sink = sink;
        spec.config.key = key;
        spec.config.checkpoint_every = k;
        let reference = Reference::for_spec(&spec);
        let recipe = fault_free_steps(&spec.config, spec.events.len() as u64, &reference.records);
        let run = steps_of(&spec);
        let case = format!("{protocol} {sink} {key:?} K={k}");
        assert_eq!(check_steps(pairs(&run), &recipe), None, "{case}");
        assert_eq!(recipe.len(), steps, "{case}");
        assert_eq!(run.len(), steps, "{case}");
    }

    #[test]
    fn every_protocol_and_sink_takes_the_recipes_steps() {
        use CheckpointProtocol as P;
        use KeyScheme::{EventIndex, ProcessingTime};
        use SinkKind::{Append, Idempotent, Transactional};
        // ch04: 30 events, 4 records, K = 8 gives checkpoints at 8, 16 and 24 (and the
        // transactional sink's at 30). safe on a file sink: 3 opening steps, 30 reads, 4
        // writes, the end of input, the final sync, and 6 steps per checkpoint plus the
        // removal of the one before: 3 + 30 + 4 + 1 + 1 + 3 * 6 + 2 = 59.
        check(P::Safe, Append, EventIndex, 8, 59);
        check(P::Safe, Idempotent, EventIndex, 8, 59);
        check(P::Safe, Append, ProcessingTime, 8, 59);
        // The log: 3 opening steps, 30 reads, 4 sends, the end of input, and per checkpoint
        // 5 file steps, a removal but for the first, a commit and (but for the last) a new
        // producer and transaction: 3 + 30 + 4 + 1 + 4 * 6 + 3 + 3 * 2 = 71.
        check(P::Safe, Transactional, EventIndex, 8, 71);
        check(P::Safe, Transactional, ProcessingTime, 8, 71);
        // K = 5 puts a checkpoint at 30, the transactional sink's last: it replaces it.
        check(
            P::Safe,
            Transactional,
            EventIndex,
            5,
            3 + 30 + 4 + 1 + 7 * 6 + 5 + 6 * 2,
        );
        check(
            P::Safe,
            Append,
            EventIndex,
            5,
            3 + 30 + 4 + 1 + 1 + 6 * 6 + 5,
        );
        // One step fewer per checkpoint without the data fsync, or the directory's.
        for protocol in [P::NoFsyncRename, P::SizeOnly, P::NoDirFsync] {
            check(protocol, Append, EventIndex, 8, 59 - 3);
        }
        for protocol in [
            P::DeleteThenRename,
            P::CheckpointBeforeSinkSync,
            P::NoTailRepair,
            P::TrustPageCacheAfterEio,
        ] {
            check(protocol, Append, EventIndex, 8, 59);
            check(protocol, Idempotent, EventIndex, 8, 59);
        }
        // in-place: a sync (or a commit), a create and a write per checkpoint.
        check(
            P::InPlace,
            Append,
            EventIndex,
            8,
            3 + 30 + 4 + 1 + 1 + 3 * 3,
        );
        check(
            P::InPlace,
            Transactional,
            EventIndex,
            8,
            3 + 30 + 4 + 1 + 4 * 3 + 3 * 2,
        );
    }

    #[test]
    fn the_first_step_that_parts_is_named_with_both_sides() {
        let spec = RunSpec::ch04_on(FsModel::Posix);
        let reference = Reference::for_spec(&spec);
        let recipe = fault_free_steps(&spec.config, 30, &reference.records);
        let mut run = steps_of(&spec);
        // The sink's name left without its directory fsync.
        let fsync_dir = run.remove(2);
        assert_eq!(fsync_dir, ("disk.fsync-dir".to_string(), ".".to_string()));
        let mismatch = check_steps(pairs(&run), &recipe).expect("a missing step");
        assert_eq!(
            mismatch.at,
            "step 2 of the fault-free run (the protocol's recipe)"
        );
        assert_eq!(mismatch.model, "disk.fsync-dir .");
        assert_eq!(mismatch.engine, "source.read event 0");
        // A step too many at the end, and a wrong target.
        let mut run = steps_of(&spec);
        run.push(("disk.fsync-dir".to_string(), ".".to_string()));
        let mismatch = check_steps(pairs(&run), &recipe).expect("an extra step");
        assert_eq!(
            (mismatch.model.as_str(), mismatch.engine.as_str()),
            ("none", "disk.fsync-dir .")
        );
        let mut run = steps_of(&spec);
        run[32].1 = "state-16.json".to_string();
        let mismatch = check_steps(pairs(&run), &recipe).expect("a wrong removal");
        assert_eq!(mismatch.model, "disk.remove state-8.json");
        assert_eq!(mismatch.engine, "disk.remove state-16.json");
    }
}
