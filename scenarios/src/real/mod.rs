//! Real mode: the engine on a real directory, each incarnation a real process killed with a
//! real SIGKILL. The only module besides `cli` and `commands` that touches `std::fs`.

pub mod dir;

pub use dir::{disk_listing, listing, ListedFile, RealDir};
