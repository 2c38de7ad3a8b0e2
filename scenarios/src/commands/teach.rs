//! `keel teach`: the chapter's tables in English or Chinese, and SVG pictures of them.

use super::files::load_events;
use super::output::Output;
use crate::error::KeelError;
use crate::runner::{
    RESTART_DELAY_MS_DEFAULT, SECTOR_SIZE_BYTES_DEFAULT, TRANSACTION_TIMEOUT_MS_DEFAULT,
};
use crate::spec::ScenarioSpec;
use crate::table::TableFormat;
use crate::teach::{lessons, Lang};
use clap::{Args, ValueEnum};
use keel_engine::{CheckpointProtocol, KeyScheme};

#[derive(Debug, Args)]
pub struct TeachArgs {
    /// The scenario to teach with.
    #[arg(default_value = "ch04", value_name = "SCENARIO")]
    pub scenario: String,

    /// The language of the tables and their explanations.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TeachFormat::Text)]
    pub format: TeachFormat,

    /// Also write SVG pictures into this directory (created if needed).
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
    Text,
    Markdown,
}

pub(crate) fn cmd_teach(args: &TeachArgs) -> Result<Output, KeelError> {
    let spec = ScenarioSpec {
        scenario: Some(args.scenario.clone()),
        events: None,
        window: 10,
        out_of_orderness: 5,
        checkpoint_every: 8,
        event_interval_ms: 300,
        restart_delay_ms: RESTART_DELAY_MS_DEFAULT,
        protocol: CheckpointProtocol::Safe,
        key: KeyScheme::EventIndex,
        transaction_timeout_ms: TRANSACTION_TIMEOUT_MS_DEFAULT,
        seed: 0,
        sector_size_bytes: SECTOR_SIZE_BYTES_DEFAULT,
    };
    let events = load_events(&spec)?;
    let lessons = lessons(&spec, &events)?;
    let lang = match args.lang {
        LangArg::En => Lang::En,
        LangArg::Zh => Lang::Zh,
    };
    let format = match args.format {
        TeachFormat::Text => TableFormat::Table,
        TeachFormat::Markdown => TableFormat::Markdown,
    };
    let mut stdout = lessons.render(lang, format);
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)
            .map_err(|e| KeelError::usage(format!("cannot create {dir}: {e}")))?;
        for (name, svg) in lessons.svgs(lang) {
            let path = std::path::Path::new(dir).join(&name);
            std::fs::write(&path, svg)
                .map_err(|e| KeelError::usage(format!("cannot write {}: {e}", path.display())))?;
            stdout.push_str(&format!("wrote {}\n", path.display()));
        }
    }
    Ok(Output::ok(stdout))
}
