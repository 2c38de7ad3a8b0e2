//! One module per `keel` command (its clap arguments, whose doc comments are the help text,
//! and its `cmd_*` function), and the helpers they share. With `crate::cli`, the only code
//! that prints, reads files or writes them.

pub mod args;
pub mod bench;
pub mod chaining;
pub mod disk_error;
pub mod explore;
pub mod fidelity;
pub(crate) mod files;
pub mod gen;
pub mod incarnation;
pub mod interrupt;
pub mod job;
mod job_plan;
mod job_teach;
pub mod merge;
pub mod output;
pub mod power_cut;
mod progress;
pub mod replay;
pub mod run;
pub mod shard;
pub mod shrink;
pub mod sites;
pub mod sweep;
mod target;
pub mod teach;
