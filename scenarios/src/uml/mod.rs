//! Real power cuts and real disk errors on real file systems: user-mode Linux guests (a
//! Linux kernel run as an ordinary process, no root, no KVM) on file-backed images, driven
//! from the host. Like `real`, it touches files and starts processes and prints nothing.

pub mod disk_error;
pub mod flakey;
pub mod guest;
pub mod point;
pub mod power_cut;

pub use disk_error::{disk_error, ErrorSetup};
pub use guest::{
    dm_modules_dir, kernel, kernel_version, require_program, FileSystem, INSTALL_COMMAND,
    KERNEL_PATH,
};
pub use point::{fresh_scratch, read_files, Files};
pub use power_cut::{power_cut, CutSetup};
