//! The one error type of the `keel` command: a message for the user and an exit code.

use std::fmt;
use std::process::ExitCode;

/// Exit status 2: the command line or an input file is wrong (same code clap uses).
pub const EXIT_USAGE: u8 = 2;

/// Exit status 130: stopped by Ctrl-C (SIGINT) before the end; nothing was printed as if
/// complete (128 + the signal's number, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// An error that stops `keel`, printed once as `error: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeelError {
    pub message: String,
    pub exit_code: u8,
}

impl KeelError {
    /// A bad option, a bad input file or an impossible combination of them.
    pub fn usage(message: impl Into<String>) -> Self {
        KeelError {
            message: message.into(),
            exit_code: EXIT_USAGE,
        }
    }

    /// Stopped by Ctrl-C: `message` says how far the command got.
    pub fn interrupted(message: impl Into<String>) -> Self {
        KeelError {
            message: message.into(),
            exit_code: EXIT_INTERRUPTED,
        }
    }

    /// The values of `results`, or the first error as a failure (exit 1): a point that could
    /// not be run at all (a real child or a guest that failed) fails the whole command.
    pub fn all_ok<T>(results: Vec<Result<T, String>>) -> Result<Vec<T>, KeelError> {
        results
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|message| KeelError {
                message,
                exit_code: 1,
            })
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit_code)
    }
}

impl fmt::Display for KeelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KeelError {}
