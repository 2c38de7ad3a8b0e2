//! `keel teach`: the chapter's tables in English or Chinese, and SVG pictures of them.

use super::files::{load_events, write_atomically};
use super::output::Output;
use crate::error::KeelError;
use crate::table::TableFormat;
use crate::teach::{lessons, teach_spec, Lang};
use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct TeachArgs {
    /// The scenario to teach with.
    #[arg(default_value = "ch04", value_name = "SCENARIO")]
    pub scenario: String,

    /// Teach with an events file instead: one JSON object {"ts": <int>, "value": <int>} per
    /// line. Every figure of the lessons, the prose included, comes from runs on it.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "scenario")]
    pub events: Option<String>,

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

pub(crate) fn cmd_teach(args: &TeachArgs) -> Result<Output, KeelError> {
    let spec = match &args.events {
        Some(path) => teach_spec(None, Some(path.clone())),
        None => teach_spec(Some(args.scenario.clone()), None),
    };
    let events = load_events(&spec)?;
    if events.is_empty() {
        return Err(KeelError::usage(format!("no events in {}", spec.label())));
    }
    let lessons = lessons(&spec, &events)?;
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
