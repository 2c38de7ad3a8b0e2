//! Real power cuts on real file systems: user-mode Linux guests (a Linux kernel run as an
//! ordinary process, no root, no KVM) on file-backed images, driven from the host. Like
//! `real`, it touches files and starts processes and prints nothing.

pub mod guest;
pub mod power_cut;

pub use guest::{kernel, FileSystem, INSTALL_COMMAND, KERNEL_PATH};
pub use power_cut::{power_cut, read_files, CutSetup, Files};
