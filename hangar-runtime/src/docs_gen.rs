//! The generated parts of the docs: markdown tables rendered from what the code declares (a
//! binary's clap definitions, the exit codes of [`crate::exit::CODES`], the `/metrics` families of
//! `hangar_core::metrics::FAMILIES`), and the check that a page's copy is up to date.
//!
//! A page holds each generated part between `<!-- generated: ID -->` and `<!-- end generated -->`;
//! the rest of the page is written by hand. The tests that own a page (each binary's, and
//! `hangar-runtime`'s `generated_docs`) call [`ensure`], which fails on a stale part and, under
//! `HANGAR_UPDATE_DOCS=1`, rewrites it instead, as the config reference's test does.

use std::path::Path;

use clap::{Arg, ArgAction, Command};
use hangar_core::metrics::Family;

use crate::exit::{self, CODES};

/// The environment variable that makes [`ensure`] rewrite a stale part instead of failing.
pub const UPDATE_ENV: &str = "HANGAR_UPDATE_DOCS";

/// The line that ends every generated part.
const END: &str = "<!-- end generated -->";

/// A markdown table: a header row, then one row per entry.
fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut out = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// Text made fit for one table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// `text` in backticks.
fn code(text: &str) -> String {
    format!("`{text}`")
}

/// The options of `command` and of its subcommands: a table of the subcommands, if any, then one
/// table of every option (a subcommand's prefixed with its name; one the subcommands share, with
/// theirs: `{call,stdio} --requests N`), each with its environment variable, default and help as
/// `--help` says them.
pub fn flags(command: &Command) -> String {
    let mut out = String::new();
    let commands: Vec<&Command> = command.get_subcommands().filter(|sub| !sub.is_hide_set()).collect();
    if !commands.is_empty() {
        let rows = commands.iter().map(|sub| vec![code(sub.get_name()), cell(&about(sub))]);
        out.push_str(&table(&["command", "what"], rows));
        out.push('\n');
    }
    let mut rows: Vec<(Vec<&str>, Vec<String>)> = options(command).into_iter().map(|row| (Vec::new(), row)).collect();
    for sub in commands {
        for row in options(sub) {
            match rows.iter_mut().find(|(owners, known)| !owners.is_empty() && *known == row) {
                Some((owners, _)) => owners.push(sub.get_name()),
                None => rows.push((vec![sub.get_name()], row)),
            }
        }
    }
    let rows = rows.into_iter().map(|(owners, mut row)| {
        let usage = &row[0];
        row[0] = code(&match owners.as_slice() {
            [] => usage.clone(),
            [one] => format!("{one} {usage}"),
            many => format!("{{{}}} {usage}", many.join(",")),
        })
        .replace('|', "\\|");
        row
    });
    out.push_str(&table(&["option", "environment", "default", "what"], rows));
    out
}

/// A command's whole description, as `--help` prints it (without a last full stop, as clap
/// prints a one-line help).
fn about(command: &Command) -> String {
    let about = command.get_long_about().or(command.get_about()).map(|about| about.to_string()).unwrap_or_default();
    about.trim().trim_end_matches('.').to_owned()
}

/// One row per visible argument of `command`: its usage (bare), environment variable, default
/// and help.
fn options(command: &Command) -> Vec<Vec<String>> {
    let visible = command.get_arguments().filter(|arg| !arg.is_hide_set() && !is_builtin(arg));
    visible
        .map(|arg| {
            let (help, default) = help_and_default(arg);
            let env = arg.get_env().map(|env| code(&env.to_string_lossy())).unwrap_or_default();
            vec![usage(arg), env, default, cell(&help)]
        })
        .collect()
}

/// `--help` and `--version`, which every binary has and its page mentions once.
fn is_builtin(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version)
}

/// How the argument is written: `-n, --lines N`, `--log-format human|json`, `NAME`.
fn usage(arg: &Arg) -> String {
    let value = arg.get_action().takes_values().then(|| value_name(arg));
    if arg.is_positional() {
        return value.unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    }
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let names = names.join(", ");
    match value {
        Some(value) => format!("{names} {value}"),
        None => names,
    }
}

/// The value's possible values (`human|json`), else its name as declared (the derive names it
/// after the field), else the argument's id in capitals.
fn value_name(arg: &Arg) -> String {
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| value.get_name().to_owned())
        .collect();
    if !possible.is_empty() {
        return possible.join("|");
    }
    match arg.get_value_names() {
        Some(names) => names.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(" "),
        None => arg.get_id().as_str().to_uppercase(),
    }
}

/// The argument's help, and its default: clap's unless hidden, else the `[default: ...]` its
/// help states (a default computed at start), else `required`, `off` (a flag) or `none`.
fn help_and_default(arg: &Arg) -> (String, String) {
    let mut help = arg.get_long_help().or(arg.get_help()).map(|help| help.to_string()).unwrap_or_default();
    let mut default = String::new();
    if let Some(start) = help.find("[default: ")
        && let Some(length) = help[start..].find(']')
    {
        default = cell(&help[start + "[default: ".len()..start + length]);
        help = format!("{}{}", help[..start].trim_end(), &help[start + length + 1..]);
    }
    let help = help.trim().trim_end_matches('.').trim_end().to_owned();
    let declared: Vec<String> =
        arg.get_default_values().iter().map(|value| value.to_string_lossy().into_owned()).collect();
    if default.is_empty() {
        default = if !declared.is_empty() && !arg.is_hide_default_value_set() {
            code(&declared.join(",")).replace('|', "\\|")
        } else if arg.is_required_set() {
            "required".to_owned()
        } else if arg.get_action().takes_values() {
            "none".to_owned()
        } else {
            "off".to_owned()
        };
    }
    (help, default)
}

/// Every exit code a hangar binary uses: code, name and meaning.
pub fn exit_codes() -> String {
    let rows = CODES.iter().map(|known| vec![known.code.to_string(), code(known.name), cell(known.meaning)]);
    table(&["code", "name", "meaning"], rows)
}

/// A binary's exit codes, each with when that binary exits with it. `Err` names a code that
/// is not one of [`CODES`].
pub fn exits_of(uses: &[(u8, &str)]) -> Result<String, String> {
    let mut rows = Vec::new();
    for &(number, when) in uses {
        let known = exit::describe(number)
            .ok_or_else(|| format!("exit code {number} is not in hangar_runtime::exit::CODES"))?;
        rows.push(vec![number.to_string(), code(known.name), cell(when)]);
    }
    Ok(table(&["code", "name", "when"], rows))
}

/// The metric families of `/metrics`: name, type, labels and help.
pub fn metric_families(families: &[Family]) -> String {
    let rows = families.iter().map(|family| {
        let labels = family.labels.iter().map(|label| code(label)).collect::<Vec<_>>().join(", ");
        vec![code(family.name), family.kind.as_str().to_owned(), labels, cell(family.help)]
    });
    table(&["family", "type", "labels", "help"], rows)
}

/// `page` with the part `id` replaced by `fresh`. `Err` if the page lacks the part's markers.
fn splice(page: &str, id: &str, fresh: &str) -> Result<String, String> {
    let start_marker = format!("<!-- generated: {id} -->\n");
    let start = page.find(&start_marker).ok_or_else(|| format!("no `{}` line", start_marker.trim_end()))?;
    let body = start + start_marker.len();
    let end = page[body..].find(END).ok_or_else(|| format!("no `{END}` after `{}`", start_marker.trim_end()))?;
    Ok(format!("{}{fresh}{}", &page[..body], &page[body + end..]))
}

/// Checks that the page at `path` holds each of `parts` (id, fresh text) as generated now; under
/// `HANGAR_UPDATE_DOCS` it writes the fresh parts instead. `Err` says what is stale, and the
/// command (`update`) that brings it up to date.
pub fn ensure(path: &Path, parts: &[(&str, String)], update: &str) -> Result<(), String> {
    let committed = std::fs::read_to_string(path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    let mut fresh = committed.clone();
    for (id, text) in parts {
        fresh = splice(&fresh, id, text).map_err(|err| format!("{}: {err}", path.display()))?;
    }
    if fresh == committed {
        return Ok(());
    }
    if std::env::var_os(UPDATE_ENV).is_some() {
        return std::fs::write(path, fresh).map_err(|err| format!("cannot write {}: {err}", path.display()));
    }
    let stale: Vec<&str> = parts
        .iter()
        .filter(|(id, text)| splice(&committed, id, text).is_ok_and(|page| page != committed))
        .map(|(id, _)| *id)
        .collect();
    Err(format!(
        "{}: the generated {} out of date. Update with\n\n    {UPDATE_ENV}=1 {update}\n\nand commit the result.",
        path.display(),
        match stale.as_slice() {
            [one] => format!("part `{one}` is"),
            many => format!("parts `{}` are", many.join("`, `")),
        }
    ))
}

/// Checks a binary's page, `docs/<page>`, from the binary's tests: its `flags` part is
/// `command`'s options, its `exit-codes` part, if `exits` are given, says when it exits with
/// which code, and its synopsis names no option the binary lacks. `manifest_dir` is the binary's crate (`env!("CARGO_MANIFEST_DIR")`), whose
/// directory is named as its package.
pub fn check_binary_page(
    manifest_dir: &str,
    page: &str,
    command: &Command,
    exits: Option<&[(u8, &str)]>,
) -> Result<(), String> {
    let crate_dir = Path::new(manifest_dir);
    let package = crate_dir.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let mut parts = vec![("flags", flags(command))];
    if let Some(exits) = exits {
        parts.push(("exit-codes", exits_of(exits)?));
    }
    let path = crate_dir.parent().unwrap_or(crate_dir).join("docs").join(page);
    ensure(&path, &parts, &format!("cargo test -p {package} generated_docs"))?;
    let text = std::fs::read_to_string(&path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    unknown_in_synopsis(&text, command).map_err(|err| format!("{}: {err}", path.display()))
}

/// The page's hand-written synopsis (the code block under `## Interface`) names only options
/// `command` or one of its subcommands has, so a renamed or removed option cannot linger there.
fn unknown_in_synopsis(page: &str, command: &Command) -> Result<(), String> {
    let Some((_, interface)) = page.split_once("\n## Interface\n") else { return Ok(()) };
    let synopsis = interface.split("```").nth(1).unwrap_or_default();
    let mut known: Vec<&str> = command.get_arguments().filter_map(Arg::get_long).collect();
    for sub in command.get_subcommands() {
        known.extend(sub.get_arguments().filter_map(Arg::get_long));
    }
    let unknown: Vec<&str> = synopsis
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter_map(|word| word.strip_prefix("--"))
        .filter(|long| !long.is_empty() && !known.contains(long))
        .collect();
    match unknown.as_slice() {
        [] => Ok(()),
        some => {
            Err(format!("the synopsis under `## Interface` names options it does not have: --{}", some.join(", --")))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

    use super::*;

    #[derive(Debug, Clone, ValueEnum)]
    enum Format {
        Human,
        Json,
    }

    /// Runs the thing.
    #[derive(Debug, Parser)]
    struct Cli {
        /// Where to | go [default: somewhere computed]. Anywhere
        #[arg(long, value_name = "URL", env = "X_URL")]
        url: Option<String>,
        /// How to log.
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        /// Be loud.
        ///
        /// Very loud.
        #[arg(short, long)]
        loud: bool,
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(Debug, Subcommand)]
    enum Sub {
        /// Show the logs.
        Logs {
            /// The server's name.
            name: String,
            /// Lines first.
            #[arg(short = 'n', long, default_value_t = 100)]
            lines: u16,
            #[command(flatten)]
            shared: Shared,
        },
        /// Follow the logs.
        Tail {
            #[command(flatten)]
            shared: Shared,
        },
    }

    #[derive(Debug, clap::Args)]
    struct Shared {
        /// Say more.
        #[arg(long)]
        verbose: bool,
    }

    #[test]
    fn the_flags_table_says_each_option_as_help_does() {
        let text = flags(&Cli::command());
        assert!(
            text.starts_with(
                "| command | what |\n|---|---|\n| `logs` | Show the logs |\n| `tail` | Follow the logs |\n\n"
            ),
            "{text}"
        );
        let options = "\
| option | environment | default | what |
|---|---|---|---|
| `--url URL` | `X_URL` | somewhere computed | Where to \\| go. Anywhere |
| `--format human\\|json` |  | `human` | How to log |
| `-l, --loud` |  | off | Be loud. Very loud |
| `logs NAME` |  | required | The server's name |
| `logs -n, --lines LINES` |  | `100` | Lines first |
| `{logs,tail} --verbose` |  | off | Say more |
";
        assert!(text.ends_with(options), "{text}");
    }

    #[test]
    fn a_binarys_exit_codes_are_named_from_the_table() {
        let text = exits_of(&[(0, "stopped"), (78, "a bad config")]).unwrap();
        assert_eq!(
            text,
            "| code | name | when |\n|---|---|---|\n| 0 | `EX_OK` | stopped |\n| 78 | `EX_CONFIG` | a bad config |\n"
        );
        assert!(exits_of(&[(2, "clap's")]).unwrap_err().contains("exit code 2"));
        assert!(exit_codes().contains("| 64 | `EX_USAGE` | The command line was wrong. |\n"), "{}", exit_codes());
    }

    #[test]
    fn the_synopsis_may_name_only_real_options() {
        let page = "# cli\n\n## Interface\n\n```\ncli [--url URL] [--loud] logs NAME [--lines N] [--verbose]\n```\n";
        assert_eq!(unknown_in_synopsis(page, &Cli::command()), Ok(()));
        let renamed = page.replace("--loud", "--noisy").replace("--lines", "--count");
        let err = unknown_in_synopsis(&renamed, &Cli::command()).unwrap_err();
        assert!(err.ends_with("does not have: --noisy, --count"), "{err}");
    }

    #[test]
    fn splicing_replaces_only_the_named_part() {
        let page = "# A\n<!-- generated: x -->\nold\n<!-- end generated -->\ntail\n";
        assert_eq!(
            splice(page, "x", "new\n").unwrap(),
            "# A\n<!-- generated: x -->\nnew\n<!-- end generated -->\ntail\n"
        );
        assert!(splice(page, "y", "new\n").unwrap_err().contains("<!-- generated: y -->"));
    }
}
