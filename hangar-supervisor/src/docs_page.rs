//! The generated parts of the supervisor's page, `docs/hangar-supervisor.md`: its options, from
//! [`Args`], and when it exits with which code, from [`EXITS`] (each code's name and meaning are
//! `hangar_runtime::exit::CODES`'). The test keeps the page's copies up to date.

use clap::CommandFactory;
use hangar_runtime::docs_gen::check_binary_page;
use hangar_runtime::exit::{EX_CANTCREAT, EX_CONFIG, EX_OK, EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE};

use crate::args::Args;

/// When the supervisor exits with which code.
const EXITS: &[(u8, &str)] = &[
    (EX_OK, "stopped by SIGTERM or SIGINT"),
    (EX_USAGE, "a usage mistake on the command line"),
    (
        EX_UNAVAILABLE,
        "another supervisor answers on the socket, or holds the state directory (`journal.lock`); a kill mode that \
         cannot be had",
    ),
    (EX_SOFTWARE, "an internal failure"),
    (
        EX_CANTCREAT,
        "something other than a stale socket is at the socket's path, its directory is unsafe, or the journal cannot \
         be opened or read",
    ),
    (EX_CONFIG, "a bad config, an unknown `--socket-group`, or a journal written by a newer hangar"),
];

#[test]
fn generated_docs_of_its_page_are_up_to_date() {
    let checked = check_binary_page(env!("CARGO_MANIFEST_DIR"), "hangar-supervisor.md", &Args::command(), Some(EXITS));
    checked.unwrap_or_else(|stale| panic!("{stale}"));
}
