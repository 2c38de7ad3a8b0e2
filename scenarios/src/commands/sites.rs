//! `keel sites`: every step of the fault-free run and the faults that apply at each.

use super::args::{table_format, ScenarioArgs, SinkArg, TableFormatArg};
use super::files::prepare;
use super::output::Output;
use crate::error::KeelError;
use crate::sites::{sites, sites_table};
use clap::Args;
use keel_sim::FaultPlan;

#[derive(Debug, Args)]
// --seed is refused here (the fault-free run draws nothing), so --help does not show it.
#[command(mut_arg("seed", |arg| arg.hide(true)))]
pub struct SitesArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sink.
    #[arg(long, value_enum, default_value_t = SinkArg::Append)]
    pub sink: SinkArg,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

pub(crate) fn cmd_sites(args: &SitesArgs) -> Result<Output, KeelError> {
    if args.scenario.given.has("seed") {
        return Err(KeelError::usage(
            "--seed has no effect on `keel sites`: it lists the steps of the fault-free run, which draws nothing from a seed",
        ));
    }
    let (spec, events) = prepare(&args.scenario)?;
    let (_, rows) = sites(&spec.run_spec(&events, args.sink.into(), FaultPlan::none())?);
    Ok(Output::ok(match table_format(args.format) {
        Some(format) => sites_table(&rows).render(format),
        None => serde_json::to_string_pretty(&rows).expect("sites serialize") + "\n",
    }))
}
