//! Fuzz target 2: the files keel reads back, on arbitrary bytes and on structurally valid
//! JSON with hostile values: plan files (`keel replay --plan`), shard files (`keel merge`)
//! and the reports they carry (sweep points, explore rows), and depth-2 counts files
//! (`keel sweep --counts`).
//!
//! The first byte chooses the surface: 0 plan file, 1 shard file and 5 counts file take the
//! rest as raw bytes; 2 to 4 and 6 take a valid file keel wrote (a saved plan, a sweep
//! shard, an explore shard, a counts file) and let the rest of the bytes replace values in
//! it by hostile ones (extreme
//! numbers, wrong types, empty lists) or drop, repeat and swap its lines. Every input goes
//! through the real command (`cli::execute` on a file): it must end with output or an error
//! of exit status 2, never a panic or a hang; a shard file's parse errors name the file.
#![no_main]

use arbitrary::Unstructured;
use clap::Parser;
use keel_scenarios::cli::{execute, Cli};
use keel_scenarios::commands::shard::parse_shard_file;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

struct Templates {
    dir: PathBuf,
    plan: Value,
    sweep_shard: Vec<Value>,
    explore_shard: Vec<Value>,
    counts: Value,
}

/// The depth-2 sweep whose counts file the counts surfaces read (with `--counts <path>`).
const COUNTED_SWEEP: [&str; 10] = [
    "keel", "sweep", "--depth", "2", "--faults", "process-crash", "--sinks", "append", "--shard",
    "0/1",
];

fn keel(args: &[&str]) -> String {
    let cli = Cli::try_parse_from(args).expect("a valid command line");
    execute(&cli).expect("the template command runs").stdout
}

fn templates() -> &'static Templates {
    static TEMPLATES: OnceLock<Templates> = OnceLock::new();
    TEMPLATES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("keel-fuzz-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plan_path = dir.join("template-plan.json");
        let plan_path = plan_path.to_str().unwrap();
        keel(&[
            "keel", "run", "--sink", "idempotent", "--fault", "power-loss", "--at-step", "29",
            "--crash-state", "1", "--save-plan", plan_path,
        ]);
        let plan = serde_json::from_str(&std::fs::read_to_string(plan_path).unwrap()).unwrap();
        let lines = |text: String| -> Vec<Value> {
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
        };
        let sweep_shard = lines(keel(&[
            "keel", "sweep", "--faults", "sink-error,ack-lost", "--sinks", "append", "--shard",
            "0/1", "--quiet",
        ]));
        let explore_shard = lines(keel(&[
            "keel", "explore", "--seeds", "0..3", "--shard", "0/1", "--quiet",
        ]));
        let counts_path = dir.join("template-counts.json");
        let counts_path = counts_path.to_str().unwrap();
        let mut counted = COUNTED_SWEEP.to_vec();
        counted.extend_from_slice(&["--quiet", "--counts", counts_path]);
        keel(&counted);
        let counts = serde_json::from_str(&std::fs::read_to_string(counts_path).unwrap()).unwrap();
        Templates {
            dir,
            plan,
            sweep_shard,
            explore_shard,
            counts,
        }
    })
}

/// Values that break assumptions: extremes, wrong types, empties.
fn hostile(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=17)? {
        0 => json!(0),
        1 => json!(1),
        2 => json!(-1),
        3 => json!(u64::MAX),
        4 => json!(i64::MIN),
        5 => json!(i64::MAX),
        6 => json!(9_007_199_254_740_992_u64),
        7 => json!(1e300),
        8 => json!(-0.5),
        9 => json!(""),
        10 => json!("\n\"'"),
        11 => Value::Null,
        12 => json!(true),
        13 => json!([]),
        14 => json!({}),
        15 => json!(u.arbitrary::<u64>()?),
        16 => json!(u.arbitrary::<i64>()?),
        _ => json!(u.arbitrary::<String>()?),
    })
}

/// Every path to a leaf (or container) of `value`, as JSON pointers.
fn pointers(value: &Value, prefix: String, out: &mut Vec<String>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                pointers(child, format!("{prefix}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{prefix}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Replaces up to a few values of `value` by hostile ones, or removes them.
fn mutate(u: &mut Unstructured<'_>, value: &mut Value) -> arbitrary::Result<()> {
    let mut all = Vec::new();
    pointers(value, String::new(), &mut all);
    for _ in 0..u.int_in_range(1..=3)? {
        let pointer = u.choose(&all)?.clone();
        if pointer.is_empty() {
            continue;
        }
        let remove = u.ratio(1, 8)?;
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        match value.pointer_mut(parent) {
            Some(Value::Object(map)) if remove => {
                map.remove(key);
            }
            _ => {
                if let Some(slot) = value.pointer_mut(&pointer) {
                    *slot = hostile(u)?;
                }
            }
        }
    }
    Ok(())
}

fn mutate_lines(u: &mut Unstructured<'_>, lines: &[Value]) -> arbitrary::Result<String> {
    let mut lines = lines.to_vec();
    for _ in 0..u.int_in_range(0..=2)? {
        let i = u.choose_index(lines.len())?;
        mutate(u, &mut lines[i])?;
    }
    let mut text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match u.int_in_range(0..=5)? {
        0 if text.len() > 1 => {
            let i = u.choose_index(text.len())?;
            text.remove(i);
        }
        1 => {
            let i = u.choose_index(text.len())?;
            text.insert(i, text[i].clone());
        }
        2 => {
            let (i, j) = (u.choose_index(text.len())?, u.choose_index(text.len())?);
            text.swap(i, j);
        }
        _ => {}
    }
    let mut out = text.join("\n") + "\n";
    if u.ratio(1, 16)? {
        // Cut short, as a killed writer would leave it.
        let cut = u.choose_index(out.len())?;
        if !out.is_char_boundary(cut) {
            return Ok(out);
        }
        out.truncate(cut);
    }
    Ok(out)
}

fn run_file(command: &[&str], path: &str, text: &[u8]) {
    std::fs::write(path, text).unwrap();
    let mut args: Vec<&str> = vec!["keel"];
    args.extend_from_slice(command);
    let cli = Cli::try_parse_from(&args).expect("a valid command line");
    match execute(&cli) {
        Ok(output) => assert!(output.exit_code <= 1),
        Err(error) => {
            assert_eq!(error.exit_code, 2, "{}", error.message);
            assert!(!error.message.is_empty());
        }
    }
}

fn replay(path: &str, text: &[u8]) {
    run_file(&["replay", "--plan", path, "--format", "json"], path, text);
}

fn merge(path: &str, text: &[u8]) {
    if let Ok(text) = std::str::from_utf8(text) {
        if let Err(error) = parse_shard_file(path, text) {
            assert!(error.message.starts_with(&format!("{path}: line ")), "{error}");
        }
    }
    run_file(&["merge", path, "--format", "json"], path, text);
}

fn sweep_with_counts(path: &str, text: &[u8]) {
    let mut command = COUNTED_SWEEP[1..].to_vec();
    command.extend_from_slice(&["--quiet", "--counts", path]);
    run_file(&command, path, text);
}

fuzz_target!(|data: &[u8]| {
    let Some((&surface, rest)) = data.split_first() else {
        return;
    };
    let templates = templates();
    let plan_path = templates.dir.join("plan.json");
    let plan_path = plan_path.to_str().unwrap();
    let shard_path = templates.dir.join("shard.jsonl");
    let shard_path = shard_path.to_str().unwrap();
    let counts_path = templates.dir.join("counts.json");
    let counts_path = counts_path.to_str().unwrap();
    let mut u = Unstructured::new(rest);
    match surface % 7 {
        0 => replay(plan_path, rest),
        1 => merge(shard_path, rest),
        5 => sweep_with_counts(counts_path, rest),
        6 => {
            let mut counts = templates.counts.clone();
            if mutate(&mut u, &mut counts).is_ok() {
                sweep_with_counts(counts_path, counts.to_string().as_bytes());
            }
        }
        2 => {
            let mut plan = templates.plan.clone();
            if mutate(&mut u, &mut plan).is_ok() {
                replay(plan_path, plan.to_string().as_bytes());
            }
        }
        3 => {
            if let Ok(text) = mutate_lines(&mut u, &templates.sweep_shard) {
                merge(shard_path, text.as_bytes());
            }
        }
        _ => {
            if let Ok(text) = mutate_lines(&mut u, &templates.explore_shard) {
                merge(shard_path, text.as_bytes());
            }
        }
    }
});
