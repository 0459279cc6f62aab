//! The reference of `hangar.yaml`, generated: its JSON Schema (`docs/hangar.schema.json`),
//! derived from the config types with `schemars`, and the page `docs/config.md`, rendered from
//! that schema. The config types' doc comments are the one source of every key's description;
//! where a type reads YAML by hand (`sandbox:`, `network:`), its `JsonSchema` is written by hand
//! beside that `Deserialize`, to accept what the loader accepts.
//!
//! The schema checks each key on its own (type, bounds, unknown keys); rules across keys (a
//! `subprocess` server needs `command`, a key's profile exists, no two keys share a hash) are
//! the loader's alone, and `docs/config.md` states them in each key's description.
//!
//! `hangar-core/tests/config_docs.rs` fails when a committed file is stale; [`UPDATE_COMMAND`]
//! writes them again.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::config::Config;

/// The one command that writes `docs/hangar.schema.json` and `docs/config.md` again.
pub const UPDATE_COMMAND: &str = "HANGAR_UPDATE_DOCS=1 cargo test -p hangar-core --test config_docs";

/// The JSON Schema (draft 07, which every editor's yaml-language-server reads) of `hangar.yaml`.
pub fn schema() -> Value {
    let generator = SchemaSettings::draft07().into_generator();
    let mut schema = generator.into_root_schema_for::<Config>().to_value();
    schema["title"] = json!("hangar.yaml");
    if let Some(properties) = schema["properties"].as_object_mut()
        && let Some(servers) = properties.get("mcp_servers").cloned()
    {
        // serde's `alias`, which schemars does not carry: the loader takes either key, not both.
        let mut old = servers;
        old["description"] = json!("The old name of `mcp_servers` (the Python `mcp-hangar`'s); use `mcp_servers`.");
        old["deprecated"] = json!(true);
        properties.insert("providers".into(), old);
        schema["not"] = json!({"required": ["mcp_servers", "providers"]});
    }
    tidy_descriptions(&mut schema);
    formats_as_bounds(&mut schema);
    schema
}

/// The Rust number formats schemars writes (`uint32`, `double`, ...), which JSON Schema does
/// not define and editors warn of, made bounds: the largest value of a bounded integer (the
/// loader refuses more), the rest dropped.
fn formats_as_bounds(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let format = map.get("format").and_then(Value::as_str).unwrap_or_default().to_owned();
            let most = match format.as_str() {
                "uint8" => Some(u64::from(u8::MAX)),
                "uint16" => Some(u64::from(u16::MAX)),
                "uint32" => Some(u64::from(u32::MAX)),
                _ => None,
            };
            if let Some(most) = most {
                map.entry("maximum").or_insert(json!(most));
            }
            if ["uint", "int", "double", "float"].iter().any(|rust| format.starts_with(rust)) {
                map.remove("format");
            }
            map.values_mut().for_each(formats_as_bounds);
        }
        Value::Array(items) => items.iter_mut().for_each(formats_as_bounds),
        _ => {}
    }
}

/// [`schema`] as the text of `docs/hangar.schema.json`.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Doc comments made plain text: one paragraph per line, rustdoc's links (`` [`X`] ``) as code.
fn tidy_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item {
                    Value::String(text) if key == "description" => *text = plain(text),
                    _ => tidy_descriptions(item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_descriptions),
        _ => {}
    }
}

fn plain(text: &str) -> String {
    let paragraphs: Vec<String> =
        text.split("\n\n").map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" ")).collect();
    paragraphs.join("\n\n").replace("[`", "`").replace("`]", "`")
}

/// The text of `docs/config.md`: every key of [`schema`] with its dotted path, type, bounds,
/// default and description, one section per top-level block (`mcp_servers` first, then the
/// others in alphabetical order).
pub fn markdown() -> String {
    let schema = schema();
    let mut page =
        Page { definitions: schema["definitions"].as_object().cloned().unwrap_or_default(), ..Page::default() };
    let properties = schema["properties"].as_object().cloned().unwrap_or_default();
    // Blocks a server repeats (`limits`, `recovery`, `sandbox_defaults`) are described at the
    // top, before the servers; the old name `providers` last.
    let mut order: Vec<&String> = properties.keys().collect();
    order.sort_by_key(|key| (key.as_str() == "providers", key.as_str() == "mcp_servers", key.as_str()));

    let mut out = String::new();
    out.push_str(HEADER);
    for key in &order {
        let _ = writeln!(out, "- [`{key}`](#{key})");
    }
    for key in order {
        let node = &properties[key];
        let (_, description) = page.resolve(node);
        let _ = write!(out, "\n## `{key}`\n\n");
        if !description.is_empty() {
            let _ = write!(out, "{description}\n\n");
        }
        page.rows.clear();
        page.walk(key, node, true);
        out.push_str("| Key | Type | Default | Description |\n|---|---|---|---|\n");
        for row in &page.rows {
            out.push_str(row);
        }
    }
    out
}

const HEADER: &str =
    "<!-- Generated from hangar-core's config types (hangar-core/src/config_reference.rs); do not edit.
     Update: HANGAR_UPDATE_DOCS=1 cargo test -p hangar-core --test config_docs -->

# `hangar.yaml` reference

Every key of the config, with its type, bounds, default and effect. Every key is optional
unless its type says *required*; an empty file is a hangar with no servers. An unknown key
is refused, naming its path. The same keys are described by the JSON Schema
[`hangar.schema.json`](hangar.schema.json): a config that starts with

```yaml
# yaml-language-server: $schema=../docs/hangar.schema.json
```

(the schema's path relative to the config, or its URL), as `examples/hangar.yaml` does, is
completed and checked by any editor with yaml-language-server. The schema checks each key on
its own; the rules across keys (a `subprocess` server needs `command`, a key's profile
exists, ...) are checked when the config is loaded, and are stated below.

In a path, `<id>` is a server id and `<name>` any name; `[]` is each item of a list.

";

/// The rows of one section, and which definitions were already described (a block used in two
/// places, such as `limits`, is described once and referred to after).
#[derive(Default)]
struct Page {
    definitions: Map<String, Value>,
    described: BTreeMap<String, String>,
    rows: Vec<String>,
}

impl Page {
    /// `node` with its `$ref` (bare, in `allOf`, or in `anyOf` with `null`) followed, and its
    /// description: the node's own (the field's doc comment), else the definition's.
    fn resolve<'a>(&'a self, node: &'a Value) -> (&'a Value, String) {
        let own = node["description"].as_str().map(str::to_owned);
        let target = self.target(node).and_then(|name| self.definitions.get(name)).unwrap_or(node);
        let description = own.or_else(|| target["description"].as_str().map(str::to_owned)).unwrap_or_default();
        (target, description)
    }

    /// The definition `node` refers to, if any.
    fn target<'a>(&self, node: &'a Value) -> Option<&'a str> {
        let reference = |n: &'a Value| n["$ref"].as_str().and_then(|r| r.strip_prefix("#/definitions/"));
        if let Some(name) = reference(node) {
            return Some(name);
        }
        for list in ["allOf", "anyOf"] {
            if let Some(items) = node[list].as_array()
                && let Some(name) = items.iter().find_map(reference)
            {
                return Some(name);
            }
        }
        None
    }

    /// The rows of the key at `path` and of every key below it. `top`: a section's own key,
    /// whose description the section's heading already gives.
    fn walk(&mut self, path: &str, node: &Value, top: bool) {
        let (resolved, description) = self.resolve(node);
        let resolved = resolved.clone();
        let definition = self.target(node).map(str::to_owned);
        let description = if top { String::new() } else { description };
        let (kind, mapping) = self.kind(&resolved, node);
        let mut effect = description;
        if let Some(variants) = variants(&resolved) {
            append(&mut effect, &variants);
        }
        // A key written in several forms (`sandbox:`, `network:`): the forms, from their type.
        if resolved["oneOf"].is_array()
            && constants(&resolved).is_none()
            && let Some(forms) = resolved["description"].as_str()
        {
            append(&mut effect, forms);
        }
        if let Some(definition) = &definition
            && mapping.is_some()
        {
            if let Some(first) = self.described.get(definition) {
                let section = first.split(['.', '[']).next().unwrap_or(first);
                append(&mut effect, &format!("The same keys as [`{first}`](#{section})."));
                self.row(path, &kind, node, &resolved, &effect);
                return;
            }
            self.described.insert(definition.clone(), path.to_owned());
        }
        // A plain block's own row would only repeat its section's heading.
        if !(top && kind == "mapping") {
            self.row(path, &kind, node, &resolved, &effect);
        }
        match mapping {
            Some(Mapping::Keys(properties)) => {
                let required: Vec<&str> =
                    resolved["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                for (key, child) in properties {
                    let mut child = child.clone();
                    if required.contains(&key.as_str()) {
                        child["x-required"] = json!(true);
                    }
                    self.walk(&format!("{path}.{key}"), &child, false);
                }
            }
            Some(Mapping::Each(suffix, child)) => self.walk(&format!("{path}{suffix}"), &child, false),
            None => {}
        }
    }

    /// What `node` is, in words, and what lies below it.
    fn kind(&self, node: &Value, original: &Value) -> (String, Option<Mapping>) {
        let nullable = original["anyOf"].as_array().is_some_and(|a| a.iter().any(|n| n["type"] == "null"))
            || node["type"].as_array().is_some_and(|t| t.contains(&json!("null")));
        let (mut kind, mapping) = self.shape(node);
        if nullable && let Some(forms) = kind.strip_suffix(", or a mapping") {
            kind = format!("{forms}, a mapping, or null");
        } else if nullable && !kind.starts_with("one of") {
            kind.push_str(" or null");
        }
        if original["x-required"] == true {
            kind.push_str(", *required*");
        }
        let bounds = bounds(node);
        if !bounds.is_empty() {
            let _ = write!(kind, "; {bounds}");
        }
        (kind, mapping)
    }

    /// The type of `node` in words, without null or bounds, and what lies below it.
    fn shape(&self, node: &Value) -> (String, Option<Mapping>) {
        if let Some(properties) = node["properties"].as_object() {
            return ("mapping".into(), Some(Mapping::Keys(properties.clone())));
        }
        if let Some(forms) = node["oneOf"].as_array()
            && let Some(object) = forms.iter().find_map(|f| self.target(f).and_then(|name| self.definitions.get(name)))
        {
            let words: Vec<String> = forms
                .iter()
                .flat_map(|f| f["enum"].as_array().cloned().unwrap_or_default())
                .map(|v| code(&v))
                .collect();
            let (_, below) = self.shape(object);
            return (format!("{}, or a mapping", words.join(", ")), below);
        }
        if let Some(words) = constants(node) {
            return (format!("one of {}", words.join(", ")), None);
        }
        let types: Vec<&str> = match &node["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
            _ => vec![],
        };
        match types.first().copied() {
            Some("array") => {
                let items = &node["items"];
                let (inner, below) = self.shape(self.resolve(items).0);
                (format!("list of {inner}"), below.map(|_| Mapping::Each("[]", items.clone())))
            }
            Some("object") => match &node["additionalProperties"] {
                Value::Object(_) => {
                    let values = &node["additionalProperties"];
                    let (inner, below) = self.shape(self.resolve(values).0);
                    let key = if node["propertyNames"]["maxLength"] == 64 { ".<id>" } else { ".<name>" };
                    (format!("mapping of name → {inner}"), below.map(|_| Mapping::Each(key, values.clone())))
                }
                _ => ("mapping".into(), None),
            },
            Some("integer") => ("integer".into(), None),
            Some("number") => ("number".into(), None),
            Some("boolean") => ("boolean".into(), None),
            Some("string") => ("string".into(), None),
            _ => ("any".into(), None),
        }
    }

    /// One row of the table: key, type, default (none for a block) and effect.
    fn row(&mut self, path: &str, kind: &str, node: &Value, resolved: &Value, effect: &str) {
        let default = match node.get("default").or_else(|| resolved.get("default")) {
            None | Some(Value::Null) | Some(Value::Object(_)) => String::new(),
            Some(value) => code(value),
        };
        self.rows.push(format!("| `{path}` | {} | {} | {} |\n", cell(kind), cell(&default), cell(effect)));
    }
}

/// What lies below a mapping: its keys, or one entry standing for each (a list's items, a
/// map's values), reached with a path suffix.
enum Mapping {
    Keys(Map<String, Value>),
    Each(&'static str, Value),
}

/// `` `a`, `b` `` for an enum of constants (`enum`, or `oneOf` of `const`s).
fn constants(node: &Value) -> Option<Vec<String>> {
    if let Some(values) = node["enum"].as_array() {
        return Some(values.iter().map(code).collect());
    }
    let forms = node["oneOf"].as_array()?;
    forms.iter().map(|f| f.get("const").map(code)).collect()
}

/// "`a`: what a does. `b`: ..." for an enum whose variants carry descriptions.
fn variants(node: &Value) -> Option<String> {
    let forms = node["oneOf"].as_array()?;
    let described: Vec<String> = forms
        .iter()
        .filter_map(|f| Some(format!("{}: {}", code(f.get("const")?), f["description"].as_str()?)))
        .collect();
    (!described.is_empty()).then(|| described.join(" "))
}

/// The bounds a node's schema states, in words.
fn bounds(node: &Value) -> String {
    let mut words = Vec::new();
    let number = |key: &str| node.get(key).and_then(Value::as_f64).map(|v| v.to_string());
    if let Some(v) = number("minimum") {
        words.push(format!("≥ {v}"));
    }
    if let Some(v) = number("exclusiveMinimum") {
        words.push(format!("> {v}"));
    }
    if let Some(v) = number("maximum") {
        words.push(format!("≤ {v}"));
    }
    match (number("minLength"), number("maxLength")) {
        (Some(least), Some(most)) => words.push(format!("{least} to {most} characters")),
        (Some(least), None) if least == "1" => words.push("not empty".into()),
        (Some(least), None) => words.push(format!("at least {least} characters")),
        (None, Some(most)) => words.push(format!("at most {most} characters")),
        (None, None) => {}
    }
    if let Some(pattern) = node["pattern"].as_str() {
        words.push(format!("matching `{pattern}`"));
    }
    words.join(", ")
}

fn append(text: &mut String, more: &str) {
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(more);
}

/// A value as inline code: a string bare, a whole number without `.0`, anything else as
/// compact JSON.
fn code(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        Value::Number(n) => format!("`{}`", n.as_f64().map_or_else(|| n.to_string(), |f| f.to_string())),
        other => format!("`{other}`"),
    }
}

/// Text fit for a table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.replace("\n\n", "<br>").replace('\n', " ").replace('|', "\\|")
}
