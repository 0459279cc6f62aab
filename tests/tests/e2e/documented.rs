//! The reference in `docs/` tells the truth about the running binaries: a hangar's `/metrics`
//! serves exactly the families `docs/operating.md` lists, with their types, and every binary
//! exits on a usage mistake with the code its own page gives. The tables are generated from the
//! code; these read them as a user would and hold them against what the binaries do.

use std::process::{Command, Stdio};

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, bin, repo_root};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add"]
"#;

/// The cells of each row of the generated part `id` of `docs/<page>`, header and rule left out.
fn generated_rows(page: &str, id: &str) -> Vec<Vec<String>> {
    let path = repo_root().join("docs").join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let start = format!("<!-- generated: {id} -->");
    let Some((_, part)) = text.split_once(&start) else { panic!("{page} has no `{start}`") };
    let part = part.split("<!-- end generated -->").next().unwrap_or_default();
    part.lines()
        .filter(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| line.trim_matches('|').split(" | ").map(|cell| cell.trim().trim_matches('`').to_owned()).collect())
        .collect()
}

#[test]
fn metrics_serves_exactly_the_families_the_operating_page_lists() {
    let hangar = Hangar::start(CONFIG);
    assert_eq!(hangar.call("math", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
    let served: Vec<(String, String)> = hangar
        .metrics()
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|family| family.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.to_owned()))
        .collect();
    let documented: Vec<(String, String)> =
        generated_rows("operating.md", "metrics").into_iter().map(|row| (row[0].clone(), row[1].clone())).collect();
    assert!(!served.is_empty());
    assert_eq!(served, documented, "GET /metrics (left) against docs/operating.md's families (right)");
}

#[test]
fn every_binary_exits_on_a_usage_mistake_with_the_code_its_page_gives() {
    for (binary, page) in [
        ("hangar-supervisor", "hangar-supervisor.md"),
        ("hangar-api", "hangar-api.md"),
        ("hangar-prober", "hangar-prober.md"),
        ("hangar", "hangar.md"),
        ("hangar-bench", "hangar-bench.md"),
    ] {
        let rows = generated_rows(page, "exit-codes");
        let usage = rows.iter().find(|row| row.get(1).is_some_and(|name| name == "EX_USAGE"));
        let Some(documented) = usage.and_then(|row| row[0].parse::<i32>().ok()) else {
            panic!("docs/{page} gives no exit code for a usage mistake: {rows:?}")
        };
        let output = Command::new(bin(binary))
            .arg("--no-such-option")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("run {binary}: {err}"));
        assert_eq!(
            output.status.code(),
            Some(documented),
            "{binary} --no-such-option, against docs/{page}; it said: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
