//! The generated parts of the prober's page, `docs/hangar-prober.md`: its options, from
//! [`Args`], and when it exits with which code, from [`EXITS`] (each code's name and meaning
//! are `hangar_runtime::exit::CODES`'). The test keeps the page's copies up to date.

use clap::CommandFactory;
use hangar_runtime::docs_gen::check_binary_page;
use hangar_runtime::exit::{EX_OK, EX_SOFTWARE, EX_USAGE};

use crate::Args;

/// When the prober exits with which code. A supervisor that is down is not one: the prober
/// reconnects with backoff.
const EXITS: &[(u8, &str)] =
    &[(EX_OK, "stopped by SIGTERM or SIGINT"), (EX_USAGE, "a usage mistake"), (EX_SOFTWARE, "an internal failure")];

#[test]
fn generated_docs_of_its_page_are_up_to_date() {
    let checked = check_binary_page(env!("CARGO_MANIFEST_DIR"), "hangar-prober.md", &Args::command(), Some(EXITS));
    checked.unwrap_or_else(|stale| panic!("{stale}"));
}
