//! The generated part of the fake's page, `docs/hangar-upstream-fake.md`: its options, from
//! [`Args`]. Its exit codes are its own (deliberate failures, not sysexits), said on the page.

use clap::CommandFactory;
use hangar_runtime::docs_gen::check_binary_page;

use crate::args::Args;

#[test]
fn generated_docs_of_its_page_are_up_to_date() {
    let checked = check_binary_page(env!("CARGO_MANIFEST_DIR"), "hangar-upstream-fake.md", &Args::command(), None);
    checked.unwrap_or_else(|stale| panic!("{stale}"));
}
