//! `keel teach`: the chapter's tables in English or Chinese, and SVG pictures of them.

use super::args::{scenario_spec, ScenarioArgs};
use super::files::{prepare_spec, write_atomically};
use super::output::Output;
use super::progress::Progress;
use crate::error::KeelError;
use crate::table::TableFormat;
use crate::teach::{lessons, Lang, Tick};
use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct TeachArgs {
    /// The stream and the knobs, as every command takes them: `--events FILE.jsonl` teaches
    /// with an events file (every figure of the lessons, the prose included, comes from runs
    /// on it); `--window`, `--checkpoint-every` and the others change the runs taught with.
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The scenario to teach with (the same as --scenario).
    #[arg(value_name = "SCENARIO", conflicts_with_all = ["scenario", "events"])]
    pub name: Option<String>,

    /// The language of the tables and their explanations.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TeachFormat::Text)]
    pub format: TeachFormat,

    /// Also write SVG pictures into this directory (created if needed); the names of the
    /// files written go to stderr.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<String>,

    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The language of `keel teach`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    /// 中文 (the chapter's own words)
    Zh,
}

/// How `keel teach` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TeachFormat {
    /// Aligned text tables (also accepted as `table`).
    #[value(alias = "table")]
    Text,
    Markdown,
}

/// The bar's side of the lessons' progress.
impl Tick for Progress {
    fn planned(&self, points: u64) {
        self.grow(points);
    }

    fn ran(&self, points: u64) {
        self.done_many(points, false);
    }
}

/// Options of the shared group that change nothing `keel teach` shows, refused rather than
/// ignored: its sweeps draw no crash state from a seed, and its exercise sets the key itself.
fn reject_unused(scenario: &ScenarioArgs) -> Result<(), KeelError> {
    if scenario.given.has("seed") {
        return Err(KeelError::usage(
            "--seed has no effect on `keel teach`: its sweeps inject process crashes, which draw no crash state from a seed",
        ));
    }
    if scenario.given.has("key") {
        return Err(KeelError::usage(
            "--key has no effect on `keel teach`: its lessons use the chapter's stable key, and its exercise runs the processing-time key beside it",
        ));
    }
    Ok(())
}

pub(crate) fn cmd_teach(args: &TeachArgs) -> Result<Output, KeelError> {
    reject_unused(&args.scenario)?;
    let mut spec = scenario_spec(&args.scenario);
    if let Some(name) = &args.name {
        spec.scenario = Some(name.clone());
    }
    let (mut spec, events) = prepare_spec(spec)?;
    // The lessons name no digest (as `teach_spec` makes none): their text is what it was.
    spec.events_digest = None;
    let progress = Progress::teaching(args.quiet);
    let lessons = lessons(&spec, &events, &progress)?;
    progress.finish();
    let lang = match args.lang {
        LangArg::En => Lang::En,
        LangArg::Zh => Lang::Zh,
    };
    let format = match args.format {
        TeachFormat::Text => TableFormat::Table,
        TeachFormat::Markdown => TableFormat::Markdown,
    };
    let stdout = lessons.render(lang, format);
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)
            .map_err(|e| KeelError::usage(format!("cannot create {dir}: {e}")))?;
        for (name, svg) in lessons.svgs(lang) {
            let path = std::path::Path::new(dir).join(&name);
            write_atomically(&path, svg.as_bytes())
                .map_err(|e| KeelError::usage(format!("cannot write {}: {e}", path.display())))?;
            // A status line, not part of the lessons: stdout stays the report alone.
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(Output::ok(stdout))
}
