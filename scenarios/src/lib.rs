//! keel-scenarios: the scenario catalogue, the runner, the oracle's tallies, reports and the CLI.
//!
//! Everything here except `cli` is pure: it builds values and strings. Only `cli` prints.

pub mod catalogue;
pub mod cli;
pub mod error;
pub mod oracle;
pub mod report;
pub mod runner;
pub mod sweep;
pub mod table;
