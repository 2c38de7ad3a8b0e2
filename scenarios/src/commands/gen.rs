//! `keel gen`: writes a synthetic event stream (JSON lines) to a file or stdout.

use super::files::write_atomically;
use super::output::Output;
use crate::error::KeelError;
use crate::gen::{generate, GenSpec};
use clap::Args;
use std::path::Path;

#[derive(Debug, Args)]
pub struct GenArgs {
    /// How many events (1 to 1,000,000, the most an events file may hold).
    #[arg(long, value_name = "N")]
    pub events: u64,

    /// The seed: the same seed and options always write the same bytes.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,

    /// Out-of-orderness D: an event that is not late lags its position by 0 to D
    /// (event-time units; event i sits at position i).
    #[arg(
        long,
        value_name = "D",
        default_value_t = 5,
        allow_negative_numbers = true
    )]
    pub out_of_orderness: i64,

    /// The fraction of late events (0 to 1): each lags its position by more than D, so it
    /// is behind the watermark when it arrives.
    #[arg(
        long,
        value_name = "F",
        default_value_t = 0.1,
        allow_negative_numbers = true
    )]
    pub late_fraction: f64,

    /// A late event lags by D + 1 to D + M (event-time units).
    #[arg(
        long,
        value_name = "M",
        default_value_t = 200,
        allow_negative_numbers = true
    )]
    pub late_by_max: i64,

    /// Values are drawn uniformly from 1 to V.
    #[arg(
        long,
        value_name = "V",
        default_value_t = 100,
        allow_negative_numbers = true
    )]
    pub value_max: i64,

    /// Keys k0 to k(K-1), one drawn per event, for keyed jobs (`keel job`); 0: no key.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub keys: u64,

    /// Write the stream to FILE (atomically: a temp file, fsync, rename) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
}

pub(crate) fn cmd_gen(args: &GenArgs) -> Result<Output, KeelError> {
    let spec = GenSpec {
        events: args.events,
        seed: args.seed,
        out_of_orderness: args.out_of_orderness,
        late_fraction: args.late_fraction,
        late_by_max: args.late_by_max,
        value_max: args.value_max,
        keys: args.keys,
    };
    spec.validate().map_err(KeelError::usage)?;
    let text = generate(&spec);
    match &args.out {
        None => Ok(Output::ok(text)),
        Some(path) => {
            write_atomically(Path::new(path), text.as_bytes())
                .map_err(|e| KeelError::usage(format!("cannot write {path}: {e}")))?;
            Ok(Output::ok(String::new()))
        }
    }
}
