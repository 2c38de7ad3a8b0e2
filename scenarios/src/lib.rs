//! keel-scenarios: the scenario catalogue, the runner, the oracle's tallies, reports and the CLI.
//!
//! Everything here except `cli`, `commands`, `real` and `uml` is pure: it builds values and
//! strings. Only `cli`, `commands`, `real` (real mode: a real directory, real child
//! processes) and `uml` (user-mode Linux guests for real power cuts) touch files, and only
//! `cli` and `commands` print.

pub mod baseline;
pub mod catalogue;
pub mod cli;
pub mod commands;
pub mod coverage;
pub mod decimal;
pub mod disk_error;
pub mod error;
pub mod explore;
pub mod fidelity;
pub mod fork;
pub mod gen;
pub mod graph;
pub mod model;
pub mod observation;
pub mod parallel;
pub mod plan_file;
pub mod power_cut;
pub mod property;
pub mod real;
pub mod recipe;
pub mod report;
pub mod reproduce;
pub mod runner;
pub mod shrink;
pub mod sites;
pub mod spec;
pub mod swarm;
pub mod sweep;
pub mod table;
pub mod tally;
pub mod teach;
pub mod uml;
pub mod verdict;
