//! Command-line parsing with sysexits: every hangar binary answers `--help` and `--version`
//! with 0 and a usage mistake with 64, not clap's default 2.

use crate::exit::{EX_USAGE, Exit};

/// The parsed arguments, or how to exit once clap has printed its message.
pub fn parse<T: clap::Parser>() -> Result<T, Exit> {
    T::try_parse().map_err(|err| {
        let _ = err.print();
        Exit::quiet(if err.use_stderr() { EX_USAGE } else { 0 })
    })
}
