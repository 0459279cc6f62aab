//! How a hangar process ends early: the sysexits(3) codes every binary uses, and the one edge
//! where a fatal error is said on stderr and becomes the exit code.
//!
//! Libraries return their own `thiserror` types; an error that ends a process implements
//! [`Sysexit`] (which code it means), or is wrapped into an [`Exit`] at the binary's edge with
//! the code it means there. [`run_main`] is that edge.

use std::fmt::Display;
use std::io::Write;
use std::process::ExitCode;

/// The command line was wrong.
pub const EX_USAGE: u8 = 64;
/// Input data it was given is wrong, or cannot be handled safely (a config `hangar pin --write`
/// cannot edit without risk).
pub const EX_DATAERR: u8 = 65;
/// A service it needs is unavailable (a port or socket held by another, an API that does not
/// answer, a kill mode that cannot be had).
pub const EX_UNAVAILABLE: u8 = 69;
/// An internal failure.
pub const EX_SOFTWARE: u8 = 70;
/// It cannot create a file it needs (something else is at the control socket's path).
pub const EX_CANTCREAT: u8 = 73;
/// Its output could not be written.
pub const EX_IOERR: u8 = 74;
/// An answer was not of the shape the protocol promises.
pub const EX_PROTOCOL: u8 = 76;
/// The configuration is bad.
pub const EX_CONFIG: u8 = 78;

/// An error that knows the exit code it ends a process with.
pub trait Sysexit: Display {
    fn exit_code(&self) -> u8;
}

/// An early end of the process: the code to exit with and, unless it was said already, the
/// one-line reason to print.
#[derive(Debug, PartialEq, Eq)]
pub struct Exit {
    code: u8,
    reason: Option<String>,
}

impl Exit {
    /// Exit with `code`, saying `reason`.
    pub fn new(code: u8, reason: impl Display) -> Exit {
        Exit { code, reason: Some(reason.to_string()) }
    }

    /// Exit with `code`, the reason already said (clap printed its message, or it was logged).
    pub fn quiet(code: u8) -> Exit {
        Exit { code, reason: None }
    }

    pub fn code(&self) -> u8 {
        self.code
    }
}

impl<E: Sysexit> From<E> for Exit {
    fn from(err: E) -> Exit {
        Exit::new(err.exit_code(), err)
    }
}

/// The edge of every hangar binary: runs `body`; an [`Exit`] is printed as `name: reason` on
/// stderr (stdout is kept for what a process announces) and becomes the exit code.
pub fn run_main(name: &str, body: impl FnOnce() -> Result<(), Exit>) -> ExitCode {
    ExitCode::from(finish(name, body(), &mut std::io::stderr().lock()))
}

/// The exit code of `outcome`, after writing its reason to `stderr`.
fn finish(name: &str, outcome: Result<(), Exit>, stderr: &mut impl Write) -> u8 {
    match outcome {
        Ok(()) => 0,
        Err(Exit { code, reason }) => {
            if let Some(reason) = reason {
                // Nothing is left to tell if stderr itself is gone.
                let _ = writeln!(stderr, "{name}: {reason}");
            }
            code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Held;

    impl Display for Held {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the socket is held")
        }
    }

    impl Sysexit for Held {
        fn exit_code(&self) -> u8 {
            EX_UNAVAILABLE
        }
    }

    fn said(outcome: Result<(), Exit>) -> (u8, String) {
        let mut stderr = Vec::new();
        let code = finish("hangar-x", outcome, &mut stderr);
        (code, String::from_utf8_lossy(&stderr).into_owned())
    }

    #[test]
    fn success_says_nothing_and_exits_0() {
        assert_eq!(said(Ok(())), (0, String::new()));
    }

    #[test]
    fn a_fatal_error_is_one_line_named_after_the_process() {
        assert_eq!(said(Err(Exit::new(EX_CONFIG, "bad key"))), (78, "hangar-x: bad key\n".to_owned()));
    }

    #[test]
    fn an_error_that_knows_its_code_keeps_it_and_its_words() {
        let exit: Exit = Held.into();
        assert_eq!(said(Err(exit)), (69, "hangar-x: the socket is held\n".to_owned()));
    }

    #[test]
    fn a_quiet_exit_only_sets_the_code() {
        assert_eq!(said(Err(Exit::quiet(EX_USAGE))), (64, String::new()));
        assert_eq!(said(Err(Exit::quiet(0))), (0, String::new()));
    }
}
