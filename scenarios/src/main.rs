//! The `keel` binary: everything lives in `keel_scenarios::cli`.

/// mimalloc, not the system allocator: a sweep's points clone, compare and drop small values
/// by the million (a third of a ch04 depth-2 sweep's time went to glibc's malloc and free).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    keel_scenarios::cli::main()
}
