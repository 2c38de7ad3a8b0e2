//! keel-scenarios: the scenario catalogue, the runner, the oracle's tallies, reports and the CLI.
//!
//! Everything here except `cli` is pure: it builds values and strings. Only `cli` reads and
//! writes files and prints.

pub mod catalogue;
pub mod cli;
pub mod error;
pub mod explore;
pub mod oracle;
pub mod parallel;
pub mod report;
pub mod runner;
pub mod shrink;
pub mod spec;
pub mod swarm;
pub mod sweep;
pub mod table;
pub mod teach;
