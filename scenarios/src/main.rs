//! The `keel` binary: everything lives in `keel_scenarios::cli`.

fn main() -> std::process::ExitCode {
    keel_scenarios::cli::main()
}
