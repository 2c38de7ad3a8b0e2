//! The steps a fault-free run takes, restated from each checkpoint protocol's documented
//! recipe (docs/design/engine-and-verdicts.md and docs/design/sweeps.md) apart from the engine's
//! code, so an fsync, rename or removal the engine drops, adds or reorders fails
//! `matches-model` even where no verdict changes (a sink name left without its directory
//! fsync, say: only a power loss before the first checkpoint could tell, and recovery from
//! event 0 hides it).
//!
//! Full checkpoints only (`--state-backend full`, the default): incremental mode's steps
//! are not restated here (its files are checked by `model::check_manifest_files`).
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
//!
//! And the recipe of a recovery after one kill -9 on a file sink (every completed operation
//! survives it, so the process finds what the fault-free run had left by then):
//! - `disk.list .`;
//! - `disk.remove` of every `.tmp` file found, by name (a kill between a checkpoint's
//!   create and its rename leaves one);
//! - the newest numbered checkpoint, if any: `disk.read state-<n>.json`, then its
//!   `disk.fsync` (not under `no-fsync-rename` or `size-only`) and `disk.fsync-dir .` (not
//!   under `no-dir-fsync`), and only where both made it durable, `disk.remove` of every older
//!   one, oldest first; under `in-place`, `disk.read state.json` if it exists;
//! - `sink.open <file>`; if the sink existed, its `disk.fsync` (the file written back over
//!   itself made durable; not under `trust-page-cache-after-eio`, which writes nothing
//!   back); then `disk.fsync-dir .`, whether the sink existed or not (the process before
//!   may have created it and died before it synced the directory).

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

/// What the recipe of each protocol does, as the design notes state it (not read from
/// `keel_engine::CheckpointProtocol`'s own predicates, which are what is under test).
struct Recipe {
    in_place: bool,
    fsync_data: bool,
    fsync_dir: bool,
    delete_before_rename: bool,
    sink_sync_first: bool,
    /// Recovery writes a sink file it finds back over itself and syncs it.
    sink_rewrite: bool,
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
            sink_rewrite: protocol != P::TrustPageCacheAfterEio,
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

/// What a process restarted after a kill -9 finds on the disk: the numbered checkpoints
/// (ascending), the in-place file (None: absent; Some(None): not a whole checkpoint, Some(i):
/// checkpoint i), and whether the sink file exists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    pub checkpoints: Vec<u64>,
    /// The `.tmp` files left (a checkpoint's, between its create and its rename), by name.
    pub temps: Vec<String>,
    pub in_place: Option<Option<u64>>,
    pub sink: bool,
}

/// What a restarted process would find after each step of the fault-free run: the steps at
/// which it changes, with what it is from there on (a handful of entries per checkpoint).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoundTimeline {
    /// (steps completed, what is found once they are), ascending by steps.
    changes: Vec<(u64, Found)>,
}

impl FoundTimeline {
    /// Read off the recipe's steps: renames and removals of numbered checkpoints, the
    /// in-place file's create (it is cut to nothing) and write (it holds the checkpoint of
    /// the events read so far), and the sink's open.
    pub fn of(recipe: &[RecipeStep]) -> FoundTimeline {
        let mut found = Found::default();
        let mut changes = vec![(0, found.clone())];
        let mut events_read = 0;
        let index_of = |name: &str| -> u64 {
            name.strip_prefix("state-")
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse().ok())
                .expect("the recipe names numbered checkpoints state-<n>.json")
        };
        for (i, step) in recipe.iter().enumerate() {
            let target = step.target.as_deref().unwrap_or("");
            let before = found.clone();
            match (step.op, target) {
                ("source.read", "end-of-input") => {}
                ("source.read", _) => events_read += 1,
                ("sink.open", _) => found.sink = true,
                ("disk.create", temp) if temp.ends_with(".tmp") => {
                    found.temps.push(temp.to_string());
                    found.temps.sort();
                    found.temps.dedup();
                }
                ("disk.rename", names) => {
                    let (temp, name) = names.split_once(" -> ").expect("a rename names both");
                    found.temps.retain(|t| t != temp);
                    let index = index_of(name);
                    if !found.checkpoints.contains(&index) {
                        found.checkpoints.push(index);
                        found.checkpoints.sort_unstable();
                    }
                }
                ("disk.remove", name) => found.checkpoints.retain(|&c| c != index_of(name)),
                ("disk.create", "state.json") => found.in_place = Some(None),
                ("disk.write", "state.json") => found.in_place = Some(Some(events_read)),
                _ => {}
            }
            if found != before {
                changes.push((i as u64 + 1, found.clone()));
            }
        }
        FoundTimeline { changes }
    }

    /// What a process finds once `steps_done` steps of the fault-free run have completed.
    pub fn after(&self, steps_done: u64) -> &Found {
        let at = self
            .changes
            .partition_point(|(steps, _)| *steps <= steps_done);
        assert!(at > 0, "the timeline starts at 0 steps");
        &self.changes[at - 1].1
    }
}

/// The steps of the recovery of `protocol` on `sink` (a file sink) finding `found`: from
/// the directory listing to the sink's open (the first read of an event comes after).
pub fn recovery_steps(
    protocol: CheckpointProtocol,
    sink: SinkKind,
    found: &Found,
) -> Vec<RecipeStep> {
    let recipe = Recipe::of(protocol);
    let sink_file = match sink {
        SinkKind::Append => "sink-append.jsonl",
        SinkKind::Idempotent => "sink-idempotent.jsonl",
        SinkKind::Transactional => unreachable!("a file sink's recovery"),
    };
    let mut steps = vec![step("disk.list", ".")];
    steps.extend(found.temps.iter().map(|t| step("disk.remove", t.clone())));
    if recipe.in_place {
        if found.in_place.is_some() {
            steps.push(step("disk.read", "state.json"));
        }
    } else if let Some((&newest, older)) = found.checkpoints.split_last() {
        let name = format!("state-{newest}.json");
        steps.push(step("disk.read", name.clone()));
        if recipe.fsync_data {
            steps.push(step("disk.fsync", name));
        }
        if recipe.fsync_dir {
            steps.push(step("disk.fsync-dir", "."));
        }
        if recipe.fsync_data && recipe.fsync_dir {
            steps.extend(
                older
                    .iter()
                    .map(|o| step("disk.remove", format!("state-{o}.json"))),
            );
        }
    }
    steps.push(step("sink.open", sink_file));
    if found.sink && recipe.sink_rewrite {
        steps.push(step("disk.fsync", sink_file));
    }
    steps.push(step("disk.fsync-dir", "."));
    steps
}

/// Compares the steps a fault-free run took (`(op, target)` in step order) with the
/// recipe's, naming the first step where they part.
pub fn check_steps<'a>(
    run: impl IntoIterator<Item = (&'a str, &'a str)>,
    recipe: &[RecipeStep],
) -> Option<ModelMismatch> {
    check_steps_of(run, recipe, 0, "the fault-free run")
}

/// [`check_steps`] for the steps of `what` (which begins at step `first_step`).
pub fn check_steps_of<'a>(
    run: impl IntoIterator<Item = (&'a str, &'a str)>,
    recipe: &[RecipeStep],
    first_step: u64,
    what: &str,
) -> Option<ModelMismatch> {
    let show_recipe = |s: Option<&RecipeStep>| {
        s.map_or("none".to_string(), |s| match &s.target {
            Some(target) => format!("{} {target}", s.op),
            None => format!("{} (any target)", s.op),
        })
    };
    let mismatch = |i: usize, engine: String| ModelMismatch {
        at: format!(
            "step {} of {what} (the protocol's recipe)",
            first_step + i as u64
        ),
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

    fn names(steps: &[RecipeStep]) -> Vec<String> {
        steps
            .iter()
            .map(|s| format!("{} {}", s.op, s.target.as_deref().unwrap_or("*")))
            .collect()
    }

    /// ch04's recipe under `protocol` on the append sink, and what a process killed after
    /// `steps_done` steps finds.
    fn found_after(protocol: CheckpointProtocol, steps_done: u64) -> Found {
        let mut spec = RunSpec::ch04_on(FsModel::Posix);
        spec.config.protocol = protocol;
        let reference = Reference::for_spec(&spec);
        let recipe = fault_free_steps(&spec.config, 30, &reference.records);
        FoundTimeline::of(&recipe).after(steps_done).clone()
    }

    #[test]
    fn a_killed_process_finds_what_the_recipe_left_and_recovers_by_it() {
        use CheckpointProtocol as P;
        let found = |checkpoints: &[u64], in_place: Option<Option<u64>>, sink| Found {
            checkpoints: checkpoints.to_vec(),
            temps: Vec::new(),
            in_place,
            sink,
        };
        // safe, ch04 (steps counted from 0): the sink opens at step 1, state-8.json.tmp is
        // created at step 12 and renamed to state-8.json at step 15, state-16 at 30, and
        // state-8 removed at 32.
        assert_eq!(found_after(P::Safe, 1), found(&[], None, false));
        assert_eq!(found_after(P::Safe, 2), found(&[], None, true));
        assert_eq!(found_after(P::Safe, 12), found(&[], None, true));
        let temp = Found {
            temps: vec!["state-8.json.tmp".to_string()],
            ..found(&[], None, true)
        };
        assert_eq!(found_after(P::Safe, 13), temp);
        assert_eq!(found_after(P::Safe, 15), temp);
        assert_eq!(
            names(&recovery_steps(P::Safe, SinkKind::Append, &temp)),
            [
                "disk.list .",
                "disk.remove state-8.json.tmp",
                "sink.open sink-append.jsonl",
                "disk.fsync sink-append.jsonl",
                "disk.fsync-dir ."
            ]
        );
        assert_eq!(found_after(P::Safe, 16), found(&[8], None, true));
        assert_eq!(found_after(P::Safe, 31), found(&[8, 16], None, true));
        assert_eq!(found_after(P::Safe, 33), found(&[16], None, true));
        // in-place: state.json is cut at its create and holds the checkpoint once written.
        assert_eq!(found_after(P::InPlace, 13), found(&[], Some(None), true));
        assert_eq!(found_after(P::InPlace, 14), found(&[], Some(Some(8)), true));
        let two = found(&[8, 16], None, true);
        assert_eq!(
            names(&recovery_steps(P::Safe, SinkKind::Append, &two)),
            [
                "disk.list .",
                "disk.read state-16.json",
                "disk.fsync state-16.json",
                "disk.fsync-dir .",
                "disk.remove state-8.json",
                "sink.open sink-append.jsonl",
                "disk.fsync sink-append.jsonl",
                "disk.fsync-dir ."
            ]
        );
        // Without the data fsync the restored checkpoint may not be durable: keep the older.
        assert_eq!(
            names(&recovery_steps(
                P::NoFsyncRename,
                SinkKind::Idempotent,
                &two
            )),
            [
                "disk.list .",
                "disk.read state-16.json",
                "disk.fsync-dir .",
                "sink.open sink-idempotent.jsonl",
                "disk.fsync sink-idempotent.jsonl",
                "disk.fsync-dir ."
            ]
        );
        assert_eq!(
            names(&recovery_steps(
                P::NoDirFsync,
                SinkKind::Append,
                &found(&[], None, false)
            )),
            [
                "disk.list .",
                "sink.open sink-append.jsonl",
                "disk.fsync-dir ."
            ]
        );
        assert_eq!(
            names(&recovery_steps(
                P::InPlace,
                SinkKind::Append,
                &found(&[], Some(None), true)
            )),
            [
                "disk.list .",
                "disk.read state.json",
                "sink.open sink-append.jsonl",
                "disk.fsync sink-append.jsonl",
                "disk.fsync-dir ."
            ]
        );
        // Trusting the page cache writes nothing back, so it has nothing to sync but the
        // directory.
        assert_eq!(
            names(&recovery_steps(
                P::TrustPageCacheAfterEio,
                SinkKind::Append,
                &found(&[], None, true)
            )),
            [
                "disk.list .",
                "sink.open sink-append.jsonl",
                "disk.fsync-dir ."
            ]
        );
    }

    #[test]
    fn every_recovery_after_a_kill_takes_the_recipes_steps() {
        use crate::observation::Observation;
        use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};
        let full = CheckpointProtocol::ALL
            .into_iter()
            .filter(|p| p.supports(keel_engine::StateBackend::Full));
        for protocol in full {
            for sink in [SinkKind::Append, SinkKind::Idempotent] {
                let mut spec = RunSpec::ch04_on(FsModel::Posix);
                spec.config.protocol = protocol;
                spec.config.sink = sink;
                let mut reference = Reference::for_spec(&spec);
                reference.check_counts(&spec.config, 30, &run(&spec));
                let found = reference
                    .found
                    .clone()
                    .expect("a one-incarnation fault-free run");
                let steps = steps_of(&spec).len() as u64;
                let mut recovered = 0;
                for step in 0..steps {
                    for at in [CrashPoint::Before, CrashPoint::After] {
                        spec.plan = FaultPlan::new([PlannedFault {
                            step,
                            fault: Fault::ProcessCrash { at },
                        }])
                        .unwrap();
                        let observation = Observation::of(&run(&spec), &spec.config);
                        let restart = observation.restart.expect("a kill at a step restarts");
                        assert_eq!(restart.crash_step, step);
                        let case = format!("{protocol} {sink} {at:?} step {step}");
                        assert_eq!(restart.mismatch(&found), None, "{case}");
                        recovered += u64::from(restart.steps.iter().any(|s| s.0 == "disk.read"));
                    }
                }
                // The kills before the first checkpoint's rename find none.
                assert!(
                    recovered > steps,
                    "{protocol} {sink}: {recovered} of {}",
                    2 * steps
                );
            }
        }
        // A recovery that removes what the recipe keeps is named, with the kill's step.
        let restart = crate::observation::RestartSteps {
            protocol: CheckpointProtocol::NoFsyncRename,
            sink: SinkKind::Append,
            crash_step: 28,
            steps_done: 29,
            first_step: 29,
            steps: vec![
                ("disk.list", ".".to_string()),
                ("disk.read", "state-16.json".to_string()),
                ("disk.fsync-dir", ".".to_string()),
                ("disk.remove", "state-8.json".to_string()),
                ("sink.open", "sink-append.jsonl".to_string()),
            ]
            .into(),
        };
        let mut spec = RunSpec::ch04_on(FsModel::Posix);
        spec.config.protocol = CheckpointProtocol::NoFsyncRename;
        let mut reference = Reference::for_spec(&spec);
        reference.check_counts(&spec.config, 30, &run(&spec));
        let mismatch = restart
            .mismatch(reference.found.as_ref().unwrap())
            .expect("a removal the recipe does not have");
        assert_eq!(
            mismatch.at,
            "step 32 of the recovery after a kill -9 at step 28 (the protocol's recipe)"
        );
        assert_eq!(mismatch.model, "sink.open sink-append.jsonl");
        assert_eq!(mismatch.engine, "disk.remove state-8.json");
    }
}
