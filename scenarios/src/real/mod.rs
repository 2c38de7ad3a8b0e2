//! Real mode: the engine on a real directory, each incarnation a real child process killed
//! with a real SIGKILL. With `uml` (real power cuts), the only modules besides `cli` and
//! `commands` that touch `std::fs` or start processes; it prints nothing.

pub mod dir;
pub mod incarnation;
pub mod pacing;
pub mod run;

pub use dir::{disk_listing, listing, ListedFile, RealDir};
pub use pacing::{Pacer, Pacing};
pub use run::{recover_real, run_real, ChildExit, RealRun};
