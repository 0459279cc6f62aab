//! The generated parts of the bench's page, `docs/hangar-bench.md`: its commands and options,
//! from [`Cli`], and when it exits with which code, from [`EXITS`] (each code's name and meaning
//! are `hangar_runtime::exit::CODES`'). The test keeps the page's copies up to date.

use clap::CommandFactory;
use hangar_runtime::docs_gen::check_binary_page;
use hangar_runtime::exit::{EX_FAILURE, EX_OK, EX_SOFTWARE, EX_USAGE};

use crate::Cli;

/// When `hangar-bench` exits with which code. A slow run is never one.
const EXITS: &[(u8, &str)] = &[
    (EX_OK, "every request succeeded"),
    (EX_FAILURE, "a request failed, or a step of `suite` did (a process never ready)"),
    (EX_USAGE, "a usage mistake"),
    (
        EX_SOFTWARE,
        "it could not run: options it cannot use (`--arguments` not a JSON object, no `--server`), a \
     runtime or process that does not start, a result it cannot write",
    ),
];

#[test]
fn generated_docs_of_its_page_are_up_to_date() {
    let checked = check_binary_page(env!("CARGO_MANIFEST_DIR"), "hangar-bench.md", &Cli::command(), Some(EXITS));
    checked.unwrap_or_else(|stale| panic!("{stale}"));
}
