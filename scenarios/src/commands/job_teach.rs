//! `keel job teach`: the exactly-once article's trade-off computed live on a job of the user's
//! choosing (`keel teach` shows the same lesson on its events as its last section).

use super::job::{spec_of, JobArgs};
use super::output::Output;
use crate::error::KeelError;
use crate::table::TableFormat;
use crate::teach::job::JobLesson;
use crate::teach::Lang;
use clap::{Args, ValueEnum};
use keel_engine::job::{AlignmentMode, JobSinkKind};

#[derive(Debug, Args)]
pub struct JobTeachArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The language of the text.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    Zh,
}

/// The three modes behind a transactional sink, each killed at the same simulated time.
pub(super) fn cmd_job_teach(args: &JobTeachArgs) -> Result<Output, KeelError> {
    let base = spec_of(
        &args.job,
        AlignmentMode::Aligned,
        JobSinkKind::Transactional,
    )?;
    let lang = match args.lang {
        LangArg::En => Lang::En,
        LangArg::Zh => Lang::Zh,
    };
    let mut out = String::new();
    JobLesson::compute(&base).render(&mut out, lang, TableFormat::Markdown);
    Ok(Output::ok(out))
}
