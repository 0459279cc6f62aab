//! The generated parts of the API's page, `docs/hangar-api.md`: its options, from [`Args`], and
//! when it exits with which code, from [`EXITS`] (each code's name and meaning are
//! `hangar_runtime::exit::CODES`'). The test keeps the page's copies up to date.

use clap::CommandFactory;
use hangar_runtime::docs_gen::check_binary_page;
use hangar_runtime::exit::{EX_CONFIG, EX_OK, EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE};

use crate::args::Args;

/// When the API exits with which code.
const EXITS: &[(u8, &str)] = &[
    (EX_OK, "drained and stopped"),
    (EX_USAGE, "a usage mistake, or an `--otlp-endpoint` that cannot be used"),
    (EX_UNAVAILABLE, "something already answers on `--listen`"),
    (EX_SOFTWARE, "the HTTP server failed or stopped by itself"),
    (EX_CONFIG, "an `--api-keys` file that cannot be used"),
];

#[test]
fn generated_docs_of_its_page_are_up_to_date() {
    let checked = check_binary_page(env!("CARGO_MANIFEST_DIR"), "hangar-api.md", &Args::command(), Some(EXITS));
    checked.unwrap_or_else(|stale| panic!("{stale}"));
}
