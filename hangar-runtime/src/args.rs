//! Command-line parsing with sysexits: every hangar daemon answers `--help` and `--version`
//! with 0 and a usage mistake with 64, not clap's default 2.

use std::process::ExitCode;

/// sysexits(3) EX_USAGE.
pub const EX_USAGE: u8 = 64;

/// The parsed arguments, or the exit code to return after clap has printed its message.
pub fn parse<T: clap::Parser>() -> Result<T, ExitCode> {
    T::try_parse().map_err(|err| {
        let _ = err.print();
        if err.use_stderr() { ExitCode::from(EX_USAGE) } else { ExitCode::SUCCESS }
    })
}
