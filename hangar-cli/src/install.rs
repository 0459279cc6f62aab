//! From a `server.json` to a hangar server: which remote or package to use, and the
//! `mcp_servers.<id>` entry that runs it, with every value the user gave or was asked for.
//!
//! - **The pick**: a `streamable-http` remote first (the hangar does not speak the legacy SSE
//!   transport), then the first package this host can run: npm through `npx`, PyPI through
//!   `uvx`, NuGet through `dnx` (or the package's `runtimeHint`), pinned to its version, its
//!   runner on `PATH`; an `mcpb` bundle last (its digest is checked, see `add.rs`).
//! - **The values**: each environment variable, argument, header and template variable is an
//!   input named by its `name`, `valueHint` or variable key; its value is a fixed `value`, or
//!   `--set NAME=VALUE`, or what the user answers on a terminal, or its `default`. A secret
//!   (`isSecret`) is only ever a file: `--secret NAME=@FILE` (or a path typed at the prompt)
//!   becomes `{file: PATH}`, never the value.
//! - **Headers** are written as references only (`auth.headers` holds no text): a secret one
//!   as `{file: ...}`, any other as `{env: NAME}`, with the variable to set told to the user.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use hangar_core::server_edit::{EnvEntry, Reach, Reference, ServerEntry};
use indexmap::IndexMap;

use crate::registry::{Argument, Input, KeyValueInput, Package, ServerDetail, Transport};
use crate::setup::SetupError;

/// The runners the hangar can start a package with, by the registry type they serve.
const RUNNERS: &[(&str, &str)] = &[("npm", "npx"), ("pypi", "uvx"), ("nuget", "dnx")];

/// What `hangar add` installs.
#[derive(Debug)]
pub enum Plan<'a> {
    Remote(&'a Transport),
    Package {
        package: &'a Package,
        runner: &'static str,
        version: String,
    },
    /// An `mcpb` bundle: downloaded, its digest checked.
    Bundle(&'a Package),
}

/// The remote or package to use, or why each one cannot be (`on_path` says whether a program
/// is on this host's `PATH`).
pub fn choose<'a>(detail: &'a ServerDetail, on_path: &dyn Fn(&str) -> bool) -> Result<Plan<'a>, Vec<String>> {
    let mut reasons = Vec::new();
    for remote in &detail.remotes {
        match remote.kind.as_str() {
            "streamable-http" if remote.url.is_some() => return Ok(Plan::Remote(remote)),
            "sse" => reasons.push("a remote over the legacy SSE transport, which the hangar does not speak".into()),
            other => reasons.push(format!("a remote of transport `{other}`")),
        }
    }
    let mut bundle = None;
    for package in &detail.packages {
        let what = format!("the {} package {}", package.registry_type, package.identifier);
        if package.registry_type == "mcpb" {
            bundle = bundle.or(Some(package));
            continue;
        }
        let default_runner = RUNNERS.iter().find(|(kind, _)| *kind == package.registry_type).map(|(_, r)| *r);
        let hint = package.runtime_hint.as_deref().or(default_runner);
        let Some(runner) = RUNNERS.iter().map(|(_, r)| *r).find(|r| Some(*r) == hint) else {
            reasons.push(format!("{what}: the hangar runs npm (npx), PyPI (uvx) and NuGet (dnx) packages"));
            continue;
        };
        let transport = package.transport.as_ref().map_or("stdio", |t| t.kind.as_str());
        if !matches!(transport, "stdio" | "streamable-http") {
            reasons.push(format!("{what}: its transport `{transport}` is not one the hangar speaks"));
            continue;
        }
        let Some(version) = package.version.clone().or_else(|| Some(detail.version.clone())).filter(|v| !v.is_empty())
        else {
            reasons.push(format!("{what}: no version to pin"));
            continue;
        };
        if !on_path(runner) {
            reasons.push(format!("{what}: needs `{runner}`, which is not on PATH"));
            continue;
        }
        return Ok(Plan::Package { package, runner, version });
    }
    if let Some(package) = bundle {
        return Ok(Plan::Bundle(package));
    }
    if reasons.is_empty() {
        reasons.push("it lists no remote and no package".into());
    }
    Err(reasons)
}

/// A value: text, or (a secret) the file holding it, after a prefix (`"Bearer "`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    Secret { prefix: String, file: PathBuf },
}

impl Value {
    fn file(file: PathBuf) -> Value {
        Value::Secret { prefix: String::new(), file }
    }
}

/// Asks the user for a value, on a terminal; `None` when they give none.
pub trait Ask {
    /// A secret's answer is the path of a file holding it.
    fn ask(&mut self, name: &str, input: &Input) -> std::io::Result<Option<String>>;
}

/// Where values come from, and what was missing or worth telling.
pub struct Answers<'a> {
    set: IndexMap<String, Vec<String>>,
    secrets: IndexMap<String, PathBuf>,
    ask: Option<&'a mut dyn Ask>,
    /// Checks a secret file a user typed and makes its path absolute.
    secret_file: &'a dyn Fn(&str, &str) -> Result<PathBuf, SetupError>,
    used: HashSet<String>,
    missing: Vec<String>,
    /// Text values by input name, for a package's URL template.
    known: HashMap<String, String>,
    /// What the user should know (a variable to set).
    pub notes: Vec<String>,
}

/// An input's name as `--set` takes it: a flag's dashes dropped (`--port` is `port`).
fn key(name: &str) -> &str {
    name.trim_start_matches('-')
}

impl<'a> Answers<'a> {
    /// `set`: `--set NAME=VALUE` pairs (a name given more than once is a repeated argument);
    /// `secrets`: `--secret NAME=@FILE`, the files' absolute paths; `secret_file` checks a path
    /// typed at the prompt.
    pub fn new(
        set: Vec<(String, String)>,
        secrets: Vec<(String, PathBuf)>,
        ask: Option<&'a mut dyn Ask>,
        secret_file: &'a dyn Fn(&str, &str) -> Result<PathBuf, SetupError>,
    ) -> Result<Answers<'a>, SetupError> {
        let mut by_name: IndexMap<String, Vec<String>> = IndexMap::new();
        for (name, value) in set {
            by_name.entry(key(&name).to_owned()).or_default().push(value);
        }
        let mut files = IndexMap::new();
        for (name, path) in secrets {
            if files.insert(key(&name).to_owned(), path).is_some() {
                return Err(SetupError::Usage(format!("--secret {name} is given twice")));
            }
        }
        Ok(Answers {
            set: by_name,
            secrets: files,
            ask,
            secret_file,
            used: HashSet::new(),
            missing: Vec::new(),
            known: HashMap::new(),
            notes: Vec::new(),
        })
    }

    /// The values of the input `name` (several only for a repeated argument given so).
    fn values(&mut self, name: &str, input: &Input, repeated: bool) -> Result<Vec<Value>, SetupError> {
        let name = key(name).to_owned();
        self.used.insert(name.clone());
        if input.is_secret {
            if self.set.contains_key(&name) {
                return Err(SetupError::Usage(format!(
                    "{name} is a secret: give it with --secret {name}=@FILE, so its value is never written in the config"
                )));
            }
            if let Some(path) = self.secrets.get(&name) {
                return Ok(vec![Value::file(path.clone())]);
            }
            if input.is_required {
                if let Some(path) = self.asked(&name, input)? {
                    return Ok(vec![Value::file((self.secret_file)(&name, &path)?)]);
                }
                self.missing.push(name);
            }
            return Ok(Vec::new());
        }
        if self.secrets.contains_key(&name) {
            return Err(SetupError::Usage(format!("{name} is not a secret: give it with --set {name}=VALUE")));
        }
        let given = match self.set.get(&name) {
            Some(values) if values.len() > 1 && !repeated => {
                return Err(SetupError::Usage(format!("--set {name} is given twice, and it is not repeatable")));
            }
            Some(values) => values.clone(),
            None => {
                let asked = if input.is_required { self.asked(&name, input)? } else { None };
                match asked.or_else(|| input.default.clone()) {
                    Some(value) => vec![value],
                    None => {
                        if input.is_required {
                            self.missing.push(name);
                        }
                        return Ok(Vec::new());
                    }
                }
            }
        };
        for value in &given {
            if !input.choices.is_empty() && !input.choices.contains(value) {
                return Err(SetupError::Usage(format!("{name} is one of: {}", input.choices.join(", "))));
            }
        }
        if let Some(first) = given.first() {
            self.known.insert(name, first.clone());
        }
        Ok(given.into_iter().map(Value::Text).collect())
    }

    fn asked(&mut self, name: &str, input: &Input) -> Result<Option<String>, SetupError> {
        let Some(ask) = self.ask.as_deref_mut() else { return Ok(None) };
        Ok(ask.ask(name, input)?.filter(|answer| !answer.is_empty()))
    }

    /// A template's value: `{name}` replaced by the variable `name` of `variables`, or else by
    /// a value already known under that name (a package's URL names its arguments); a name
    /// found nowhere stays as written. A secret variable may only end the template: the text
    /// before it becomes the prefix. `None` when a variable has no value (it is missing).
    fn template(
        &mut self,
        owner: &str,
        template: &str,
        variables: &IndexMap<String, Input>,
    ) -> Result<Option<Value>, SetupError> {
        let mut text = String::new();
        let mut rest = template;
        let mut complete = true;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|i| open + i) else { break };
            let name = &rest[open + 1..close];
            text.push_str(&rest[..open]);
            rest = &rest[close + 1..];
            let Some(variable) = variables.get(name) else {
                match self.known.get(name) {
                    Some(value) => text.push_str(value),
                    None => text.push_str(&format!("{{{name}}}")),
                }
                continue;
            };
            let required = Input { is_required: true, ..variable.clone() };
            match self.values(name, &required, false)?.into_iter().next() {
                Some(Value::Text(value)) => text.push_str(&value),
                Some(Value::Secret { file, .. }) if rest.is_empty() => {
                    return Ok(complete.then_some(Value::Secret { prefix: text, file }));
                }
                Some(Value::Secret { .. }) => {
                    return Err(SetupError::Unmappable {
                        server: owner.to_owned(),
                        reason: format!("the secret {{{name}}} is inside a value, not at its end"),
                    });
                }
                None => complete = false,
            }
        }
        text.push_str(rest);
        Ok(complete.then_some(Value::Text(text)))
    }

    /// One environment variable or header: its fixed value (a template), or its own input.
    fn key_value(&mut self, owner: &str, item: &KeyValueInput) -> Result<Option<Value>, SetupError> {
        match &item.input.value {
            Some(template) => self.template(owner, template, &item.input.variables),
            None => Ok(self.values(&item.name, &item.input, false)?.into_iter().next()),
        }
    }

    /// The command-line words of `arguments`.
    fn arguments(&mut self, owner: &str, arguments: &[Argument]) -> Result<Vec<String>, SetupError> {
        let mut words = Vec::new();
        for (i, argument) in arguments.iter().enumerate() {
            let flag = (argument.kind == "named").then(|| argument.name.clone().unwrap_or_default());
            let label = match (&flag, &argument.value_hint) {
                (Some(flag), _) => flag.clone(),
                (None, Some(hint)) => hint.clone(),
                (None, None) => format!("argument {}", i + 1),
            };
            let values = match &argument.input.value {
                Some(template) => self.template(owner, template, &argument.input.variables)?.into_iter().collect(),
                None => self.values(&label, &argument.input, argument.is_repeated)?,
            };
            for value in values {
                let Value::Text(value) = value else {
                    return Err(SetupError::Unmappable {
                        server: owner.to_owned(),
                        reason: format!(
                            "the argument {label} is a secret, and the hangar passes secrets only in env or headers"
                        ),
                    });
                };
                match &flag {
                    Some(flag) if argument.input.format.as_deref() == Some("boolean") => {
                        if value == "true" {
                            words.push(flag.clone());
                        }
                    }
                    Some(flag) => words.extend([flag.clone(), value]),
                    None => words.push(value),
                }
            }
        }
        Ok(words)
    }

    /// Refuses a `--set` or `--secret` naming no input, and any required value missing.
    fn finish(&self, inputs_of: &str) -> Result<(), SetupError> {
        let unused: Vec<&String> =
            self.set.keys().chain(self.secrets.keys()).filter(|name| !self.used.contains(*name)).collect();
        if let Some(name) = unused.first() {
            let mut known: Vec<&String> = self.used.iter().collect();
            known.sort();
            let known = known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ");
            return Err(SetupError::Usage(format!(
                "{inputs_of} has no input {name} (its inputs: {})",
                if known.is_empty() { "none" } else { &known }
            )));
        }
        if !self.missing.is_empty() {
            return Err(SetupError::Missing(self.missing.clone()));
        }
        Ok(())
    }
}

/// The environment variable an `{env: NAME}` header reference reads: `<ID>_<HEADER>`, upper
/// case, every other character an underscore.
pub fn header_variable(id: &str, header: &str) -> String {
    format!("{id}_{header}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
        .collect()
}

/// The entry that installs `plan` (a bundle is not installed here), with every value resolved.
pub fn entry(
    id: &str,
    detail: &ServerDetail,
    plan: &Plan<'_>,
    answers: &mut Answers<'_>,
) -> Result<ServerEntry, SetupError> {
    let owner = detail.name.as_str();
    let description = Some(
        format!("{} {}: {}", detail.name, detail.version, detail.description).trim_end_matches([' ', ':']).to_owned(),
    );
    let mut env = IndexMap::new();
    let mut headers = IndexMap::new();
    let reach = match plan {
        Plan::Remote(remote) => {
            let url = remote.url.as_deref().unwrap_or_default();
            let endpoint = match answers.template(owner, url, &remote.variables)? {
                Some(Value::Text(endpoint)) => endpoint,
                Some(Value::Secret { .. }) => {
                    return Err(SetupError::Unmappable {
                        server: owner.to_owned(),
                        reason: "its URL holds a secret; the hangar keeps secrets only in headers".into(),
                    });
                }
                None => String::new(),
            };
            for header in &remote.headers {
                if let Some(reference) = header_reference(id, header, answers)? {
                    headers.insert(header.name.clone(), reference);
                }
            }
            Reach::Remote { endpoint }
        }
        Plan::Package { package, runner, version } => {
            for variable in &package.environment_variables {
                match answers.key_value(owner, variable)? {
                    Some(Value::Text(text)) => {
                        env.insert(variable.name.clone(), EnvEntry::Text(text));
                    }
                    Some(Value::Secret { prefix, file }) => {
                        env.insert(
                            variable.name.clone(),
                            EnvEntry::Reference(Reference::file(file).with_prefix(&prefix)),
                        );
                    }
                    None => {}
                }
            }
            let runtime = answers.arguments(owner, &package.runtime_arguments)?;
            let arguments = answers.arguments(owner, &package.package_arguments)?;
            let command = command(package, runner, version, runtime, arguments);
            match package.transport.as_ref().filter(|t| t.kind == "streamable-http") {
                Some(transport) => {
                    let url = transport.url.as_deref().unwrap_or_default();
                    let endpoint = match answers.template(owner, url, &transport.variables)? {
                        Some(Value::Text(endpoint)) => endpoint,
                        _ => String::new(),
                    };
                    for header in &transport.headers {
                        if let Some(reference) = header_reference(id, header, answers)? {
                            headers.insert(header.name.clone(), reference);
                        }
                    }
                    Reach::Http { command, endpoint }
                }
                None => Reach::Subprocess { command },
            }
        }
        Plan::Bundle(package) => {
            return Err(SetupError::NothingRunnable {
                name: detail.name.clone(),
                reasons: vec![format!(
                    "the mcpb bundle {} (its digest matches): the hangar does not unpack bundles yet",
                    package.identifier
                )],
            });
        }
    };
    answers.finish(&format!("{} {}", detail.name, detail.version))?;
    Ok(ServerEntry { description, reach, env, headers })
}

/// `[runner, runtime arguments (npx: -y by default), the pinned package, package arguments]`.
fn command(
    package: &Package,
    runner: &str,
    version: &str,
    runtime: Vec<String>,
    arguments: Vec<String>,
) -> Vec<String> {
    let mut command = vec![runner.to_owned()];
    if runtime.is_empty() && runner == "npx" {
        command.push("-y".into());
    }
    command.extend(runtime);
    command.push(match runner {
        "uvx" => format!("{}=={version}", package.identifier),
        _ => format!("{}@{version}", package.identifier),
    });
    if runner == "dnx" {
        command.push("--yes".into());
        if !arguments.is_empty() {
            command.push("--".into());
        }
    }
    command.extend(arguments);
    command
}

/// A header as a reference: a secret's file, or else a variable of the hangar's environment
/// the user is told to set (the config never holds a header's text).
fn header_reference(
    id: &str,
    header: &KeyValueInput,
    answers: &mut Answers<'_>,
) -> Result<Option<Reference>, SetupError> {
    Ok(match answers.key_value(id, header)? {
        Some(Value::Secret { prefix, file }) => Some(Reference::file(file).with_prefix(&prefix)),
        Some(Value::Text(text)) => {
            let variable = header_variable(id, &header.name);
            answers.notes.push(format!(
                "set {variable} in the hangar's environment to the {} header's value: {text}",
                header.name
            ));
            Some(Reference::env(&variable))
        }
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use hangar_core::config::Config;
    use hangar_core::server_edit::{Source, with_servers};

    use super::*;
    use crate::registry::parse_server_json;

    fn detail(json: serde_json::Value) -> ServerDetail {
        parse_server_json(&json.to_string()).unwrap().server
    }

    fn no_file(_: &str, _: &str) -> Result<PathBuf, SetupError> {
        Err(SetupError::Usage("no file".into()))
    }

    /// The entry for `server` with `set` and `secrets`, no terminal, every runner on PATH.
    fn mapped(
        server: &ServerDetail,
        set: &[(&str, &str)],
        secrets: &[(&str, &str)],
    ) -> Result<ServerEntry, SetupError> {
        let plan = choose(server, &|_| true)
            .map_err(|reasons| SetupError::NothingRunnable { name: String::new(), reasons })?;
        let set = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let secrets = secrets.iter().map(|(k, v)| (k.to_string(), PathBuf::from(v))).collect();
        let mut answers = Answers::new(set, secrets, None, &no_file)?;
        entry("srv", server, &plan, &mut answers)
    }

    fn filesystem() -> ServerDetail {
        detail(serde_json::json!({
            "name": "io.github.modelcontextprotocol/server-filesystem", "description": "Files", "version": "2026.1.14",
            "packages": [{"registryType": "npm", "identifier": "@modelcontextprotocol/server-filesystem", "version": "2026.1.14",
                "transport": {"type": "stdio"},
                "packageArguments": [{"type": "positional", "valueHint": "allowed_dir", "isRequired": true, "isRepeated": true}],
                "environmentVariables": [{"name": "LOG_LEVEL", "default": "info"}, {"name": "DEBUG"},
                    {"name": "API_KEY", "isSecret": true, "isRequired": true}]}]
        }))
    }

    #[test]
    fn an_npm_package_is_pinned_with_its_arguments_and_a_secret_as_a_file() {
        let server = filesystem();
        let entry =
            mapped(&server, &[("allowed_dir", "/srv/a"), ("allowed_dir", "/srv/b")], &[("API_KEY", "/etc/k")]).unwrap();
        assert_eq!(
            entry.reach,
            Reach::Subprocess {
                command: ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.1.14", "/srv/a", "/srv/b"]
                    .map(String::from)
                    .to_vec()
            }
        );
        assert_eq!(entry.env["LOG_LEVEL"], EnvEntry::Text("info".into()));
        assert!(!entry.env.contains_key("DEBUG"), "an optional value nobody gave is left out");
        assert_eq!(entry.env["API_KEY"], EnvEntry::Reference(Reference::file("/etc/k")));
        let text = with_servers("", &[("srv".into(), entry)]).unwrap();
        assert!(Config::parse(&text).is_ok(), "{text}");
    }

    #[test]
    fn what_is_missing_is_named_all_at_once_and_misuse_refused() {
        let server = filesystem();
        match mapped(&server, &[], &[]) {
            Err(SetupError::Missing(names)) => assert_eq!(names, ["API_KEY", "allowed_dir"], "env, then arguments"),
            other => panic!("{other:?}"),
        }
        let err = mapped(&server, &[("allowed_dir", "/a"), ("API_KEY", "inline!")], &[]).unwrap_err();
        assert!(err.to_string().contains("API_KEY is a secret: give it with --secret"), "{err}");
        let err = mapped(&server, &[("allowed_dir", "/a"), ("TYPO", "x")], &[("API_KEY", "/k")]).unwrap_err();
        assert!(err.to_string().contains("has no input TYPO"), "{err}");
    }

    #[test]
    fn pypi_runs_through_uvx_and_nuget_through_dnx_with_named_arguments() {
        let server = detail(
            serde_json::json!({"name": "io.github.x/time", "version": "2026.10.19", "description": "Time",
            "packages": [{"registryType": "pypi", "identifier": "mcp-server-time", "version": "2026.10.19",
                "transport": {"type": "stdio"},
                "packageArguments": [{"type": "named", "name": "--local-timezone", "default": "UTC", "isRequired": true},
                                     {"type": "named", "name": "--verbose", "format": "boolean", "default": "true"}]}]}),
        );
        let entry = mapped(&server, &[("local-timezone", "Europe/Paris")], &[]).unwrap();
        let Reach::Subprocess { command } = entry.reach else { panic!() };
        assert_eq!(command, ["uvx", "mcp-server-time==2026.10.19", "--local-timezone", "Europe/Paris", "--verbose"]);
        let server = detail(serde_json::json!({"name": "io.github.x/n", "version": "0.4.0", "description": "d",
            "packages": [{"registryType": "nuget", "identifier": "Knapcode.SampleMcpServer", "version": "0.4.0",
                "packageArguments": [{"type": "positional", "value": "mcp"}, {"type": "positional", "value": "start"}]}]}));
        let Reach::Subprocess { command } = mapped(&server, &[], &[]).unwrap().reach else { panic!() };
        assert_eq!(command, ["dnx", "Knapcode.SampleMcpServer@0.4.0", "--yes", "--", "mcp", "start"]);
    }

    #[test]
    fn a_remote_is_preferred_and_its_headers_are_references() {
        let server = detail(serde_json::json!({"name": "com.example/api", "version": "1.0.0", "description": "API",
            "packages": [{"registryType": "npm", "identifier": "@example/api", "version": "1.0.0"}],
            "remotes": [{"type": "sse", "url": "https://api.example.com/sse"},
                {"type": "streamable-http", "url": "https://{region}.api.example.com/mcp",
                 "variables": {"region": {"default": "eu", "choices": ["eu", "us"]}},
                 "headers": [{"name": "Authorization", "value": "Bearer {token}", "variables": {"token": {"isSecret": true}}},
                             {"name": "X-Team", "isRequired": true}]}]}));
        let entry = mapped(&server, &[("X-Team", "core"), ("region", "us")], &[("token", "/run/tok")]).unwrap();
        assert_eq!(entry.reach, Reach::Remote { endpoint: "https://us.api.example.com/mcp".into() });
        assert_eq!(entry.headers["Authorization"], Reference::file("/run/tok").with_prefix("Bearer "));
        assert_eq!(entry.headers["X-Team"].source, Source::Env("SRV_X_TEAM".into()));
        let err = mapped(&server, &[("X-Team", "core"), ("region", "mars")], &[("token", "/t")]).unwrap_err();
        assert!(err.to_string().contains("region is one of: eu, us"), "{err}");
        match mapped(&server, &[("X-Team", "core")], &[]) {
            Err(SetupError::Missing(names)) => assert_eq!(names, ["token"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_cannot_run_here_says_why() {
        let server = detail(serde_json::json!({"name": "a/b", "version": "1", "description": "d",
            "remotes": [{"type": "sse", "url": "https://x/sse"}],
            "packages": [{"registryType": "oci", "identifier": "docker.io/a/b:1"},
                         {"registryType": "pypi", "identifier": "b", "version": "1"}]}));
        let reasons = choose(&server, &|program| program != "uvx").unwrap_err();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(
            reasons[0].contains("legacy SSE") && reasons[1].contains("oci") && reasons[2].contains("`uvx`"),
            "{reasons:?}"
        );
        let bundle = detail(serde_json::json!({"name": "a/b", "version": "1", "description": "d",
            "packages": [{"registryType": "mcpb", "identifier": "https://x/b.mcpb", "fileSha256": "00"},
                         {"registryType": "npm", "identifier": "b", "version": "1"}]}));
        assert!(matches!(choose(&bundle, &|_| true), Ok(Plan::Package { .. })), "a bundle comes last");
        assert!(matches!(choose(&bundle, &|_| false), Ok(Plan::Bundle(_))));
        assert_eq!(header_variable("my.api", "X-Api-Key"), "MY_API_X_API_KEY");
    }
}
