//! The generated parts of the CLI's page, `docs/hangar.md`: its commands and options, from
//! [`Cli`], and when it exits with which code, from [`EXITS`] (each code's name and meaning are
//! `hangar_runtime::exit::CODES`'). The test keeps the page's copies up to date.

use clap::CommandFactory;
use hangar_runtime::docs_gen::check_binary_page;
use hangar_runtime::exit::{
    EX_CANTCREAT, EX_CONFIG, EX_DATAERR, EX_FAILURE, EX_IOERR, EX_OK, EX_PROTOCOL, EX_UNAVAILABLE, EX_USAGE,
};

use crate::args::Cli;

/// When `hangar` exits with which code.
const EXITS: &[(u8, &str)] = &[
    (EX_OK, "done"),
    (
        EX_FAILURE,
        "the API refused the request (4xx, 5xx but 503), or the hangar cannot reload; `add`: the registry has no such server or version, or marks it deleted",
    ),
    (EX_USAGE, "a usage mistake; `add`: a required value given nowhere, each one named"),
    (
        EX_DATAERR,
        "`pin --write`, `import`, `add`: a config it cannot edit safely (flow style, an anchor, alias or merge key on the way), or a server id it has already; `import`, `add`: a file to import or a server.json it cannot use; `add`: a bundle whose sha256 is not the registry's",
    ),
    (
        EX_UNAVAILABLE,
        "the API is unreachable or answers 503; `pin`: the server is not running; `add`, `search`: the registry is unreachable or answers 5xx; `add`: nothing of the server can run on this host",
    ),
    (EX_CANTCREAT, "`pin --write`, `import`, `add`: the config file cannot be replaced"),
    (EX_IOERR, "its output cannot be written"),
    (EX_PROTOCOL, "an answer not of the shape the API (or the registry) promises"),
    (EX_CONFIG, "`pin --write`, `import`, `add`: the config cannot be read or is invalid"),
];

#[test]
fn generated_docs_of_its_page_are_up_to_date() {
    let checked = check_binary_page(env!("CARGO_MANIFEST_DIR"), "hangar.md", &Cli::command(), Some(EXITS));
    checked.unwrap_or_else(|stale| panic!("{stale}"));
}
