//! How a hangar process ends early: the sysexits(3) codes every binary uses, and the one edge
//! where a fatal error is said on stderr and becomes the exit code.
//!
//! Libraries return their own `thiserror` types; an error that ends a process implements
//! [`Sysexit`] (which code it means), or is wrapped into an [`Exit`] at the binary's edge with
//! the code it means there. [`run_main`] is that edge.

use std::fmt::Display;
use std::io::Write;
use std::process::ExitCode;

/// One exit code: its number, its sysexits(3) name, and what it means for any hangar binary
/// (each binary's page says when it exits with it, `docs/operating.md` what each one means).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    pub code: u8,
    pub name: &'static str,
    pub meaning: &'static str,
}

/// Declares each code as a constant and lists it, with its doc comment as its meaning, in
/// [`CODES`], so the constants and the documented table cannot drift apart.
macro_rules! codes {
    ($($(#[doc = $doc:literal])+ $name:ident = $code:literal;)+) => {
        $($(#[doc = $doc])+ pub const $name: u8 = $code;)+

        /// Every exit code a hangar binary uses, in order: the table the docs are generated from.
        pub const CODES: &[Code] = &[$(Code { code: $code, name: stringify!($name), meaning: concat!($($doc),+) }),+];
    };
}

codes! {
    /// It did what it was asked.
    EX_OK = 0;
    /// It ran, and what it was asked to do failed: the API refused a request, a benchmark's
    /// request failed (not a sysexits code).
    EX_FAILURE = 1;
    /// The command line was wrong.
    EX_USAGE = 64;
    /// Input data it was given is wrong, or cannot be handled safely (a config `hangar pin
    /// --write` cannot edit without risk).
    EX_DATAERR = 65;
    /// A service it needs is unavailable (a port or socket held by another, an API that does not
    /// answer, a kill mode that cannot be had, a server `hangar run` started that did not become
    /// ready).
    EX_UNAVAILABLE = 69;
    /// An internal failure.
    EX_SOFTWARE = 70;
    /// The operating system refused something it needs (`hangar run`: a port, a temporary
    /// directory, a binary to start).
    EX_OSERR = 71;
    /// It cannot create a file it needs (something else is at the control socket's path).
    EX_CANTCREAT = 73;
    /// Its output could not be written.
    EX_IOERR = 74;
    /// An answer was not of the shape the protocol promises.
    EX_PROTOCOL = 76;
    /// The configuration is bad.
    EX_CONFIG = 78;
}

/// The table entry of `code`, if it is one of [`CODES`].
pub fn describe(code: u8) -> Option<&'static Code> {
    CODES.iter().find(|known| known.code == code)
}

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
    fn the_table_lists_every_constant_in_order_with_its_doc_comment() {
        assert_eq!(
            describe(EX_CONFIG),
            Some(&Code { code: 78, name: "EX_CONFIG", meaning: " The configuration is bad." })
        );
        assert!(describe(EX_DATAERR).is_some_and(|code| code.meaning.contains("`hangar pin --write`")));
        assert!(CODES.windows(2).all(|pair| pair[0].code < pair[1].code), "{CODES:?}");
        assert_eq!(describe(2), None);
    }

    #[test]
    fn a_quiet_exit_only_sets_the_code() {
        assert_eq!(said(Err(Exit::quiet(EX_USAGE))), (64, String::new()));
        assert_eq!(said(Err(Exit::quiet(0))), (0, String::new()));
    }
}
