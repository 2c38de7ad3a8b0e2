//! `Output`: what a command prints on stdout and the status `keel` exits with.

/// What `keel` prints on stdout, and the status it exits with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    /// 0: held what was asked; 1: a violation of `--expect` (or of determinism) was found.
    pub exit_code: u8,
}

impl Output {
    pub(crate) fn ok(stdout: String) -> Output {
        Output {
            stdout,
            exit_code: 0,
        }
    }
}

/// Exit status 1: the run found what `--expect` forbids.
pub const EXIT_VIOLATION: u8 = 1;
