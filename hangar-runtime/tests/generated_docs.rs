//! The generated parts of `docs/operating.md`, the exit codes every binary shares and the
//! `/metrics` families, are what `hangar_runtime::exit::CODES` and
//! `hangar_core::metrics::FAMILIES` say today. Each binary's own page is checked by that binary's
//! tests.

use std::path::Path;

use hangar_core::metrics::FAMILIES;
use hangar_runtime::docs_gen::{ensure, exit_codes, metric_families};

#[test]
fn generated_docs_of_operating_md_are_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = crate_dir.parent().unwrap_or(crate_dir).join("docs/operating.md");
    let parts = [("exit-codes", exit_codes()), ("metrics", metric_families(FAMILIES))];
    if let Err(stale) = ensure(&page, &parts, "cargo test -p hangar-runtime --test generated_docs") {
        panic!("{stale}");
    }
}
