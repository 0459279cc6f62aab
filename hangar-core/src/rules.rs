//! `profiles.<name>.rules`: a profile's rules on calls, by tool and by their arguments, the
//! first that matches deciding: `allow`, `deny` (the call is `forbidden`, with the rule's
//! `reason`), or `approve` (the call waits for a person's decision, `crate::approvals`). No
//! rule matching allows the call.
//!
//! A rule's `when` is a CEL expression (the `cel` crate of cel-rust) over `args` (the call's
//! arguments), `identity`, `profile`, `server`, `tool` (the name the upstream declared) and
//! `time` (now, a timestamp). It is compiled when the config loads: a syntax error, a variable
//! it cannot read or a function CEL does not have refuses the config at the rule's key path.
//!
//! Evaluation is bounded, so no call can make a rule stall the supervisor: an expression is at
//! most [`MAX_WHEN_BYTES`] long, with no comprehension (`all`, `exists`, `map`, `filter`)
//! inside another (so its work grows at most linearly with the arguments), and the arguments it
//! reads are at most [`MAX_ARGUMENT_BYTES`] of JSON. A `when` that cannot be evaluated (a key
//! the arguments lack, a value of the wrong type, arguments over the bound) or that is not a
//! boolean denies the call: a rule fails closed.

use globset::{Glob, GlobMatcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::key_error::KeyError;

/// The longest `when` accepted, in bytes.
pub const MAX_WHEN_BYTES: usize = 1024;
/// The most JSON a rule's `args` may be; a call with more is denied by any rule with a `when`
/// that applies to its tool.
pub const MAX_ARGUMENT_BYTES: u64 = 256 * 1024;

/// The variables a `when` may read.
const VARIABLES: [&str; 6] = ["args", "identity", "profile", "server", "tool", "time"];

/// The functions a `when` may call: CEL's standard ones (operators are `_..._`).
const FUNCTIONS: [&str; 24] = [
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "string",
    "int",
    "uint",
    "double",
    "bool",
    "bytes",
    "timestamp",
    "duration",
    "getFullYear",
    "getMonth",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
];

/// One rule as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A glob over tool names: the name the upstream declared, qualified as the front door
    /// names it (`<server>__<tool>`, or the server's `expose_as`), or bare; it matches a call
    /// by either, through the front door or `hangar_call` alike.
    pub tool: String,
    /// A CEL expression over `args`, `identity`, `profile`, `server`, `tool` and `time`: the
    /// rule applies only when it is true. Default: always.
    #[serde(default)]
    pub when: Option<String>,
    /// What the rule decides.
    pub then: Then,
    /// Said to the caller when the rule denies (default: the rule's key path).
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    Allow,
    Deny,
    /// A person decides: the call waits for an admin's or an approver's decision, up to
    /// `approvals.timeout_s`.
    Approve,
}

/// A profile's rules, compiled.
#[derive(Debug, Default)]
pub struct CompiledRules {
    rules: Vec<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    /// `profiles.<name>.rules[<n>]`.
    path: String,
    tool: GlobMatcher,
    when: Option<cel::Program>,
    then: Then,
    reason: Option<String>,
}

/// A call as the rules see it.
pub struct Call<'a> {
    pub server: &'a str,
    /// The server's prefix in qualified names (its `expose_as`, else its id).
    pub prefix: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub identity: &'a str,
    pub profile: &'a str,
}

/// The rule that decided a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Its key path, `profiles.<name>.rules[<n>]` (what the audit records).
    pub rule: String,
    /// `Deny` also when its `when` could not be evaluated.
    pub then: Then,
    /// Why, for a denial: the rule's `reason`, or what went wrong evaluating it.
    pub reason: String,
}

impl CompiledRules {
    /// Compiles `rules`, written at `at` (`profiles.dev.rules`).
    pub fn compile(at: &str, rules: &[Rule]) -> Result<CompiledRules, KeyError> {
        let compiled = rules.iter().enumerate().map(|(n, rule)| compile_one(&format!("{at}[{n}]"), rule));
        Ok(CompiledRules { rules: compiled.collect::<Result<_, _>>()? })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first rule that matches `call`, if any.
    pub fn judge(&self, call: &Call<'_>) -> Option<Verdict> {
        let qualified = format!("{}{}{}", call.prefix, crate::front_door::SEPARATOR, call.tool);
        for rule in &self.rules {
            if !(rule.tool.is_match(&qualified) || rule.tool.is_match(call.tool)) {
                continue;
            }
            let Some(when) = &rule.when else { return Some(rule.verdict(rule.then, None)) };
            match evaluate(when, call) {
                Ok(true) => return Some(rule.verdict(rule.then, None)),
                Ok(false) => {}
                Err(why) => return Some(rule.verdict(Then::Deny, Some(why))),
            }
        }
        None
    }
}

impl Compiled {
    fn verdict(&self, then: Then, failed: Option<String>) -> Verdict {
        let reason = match (failed, &self.reason) {
            (Some(why), _) => format!("{}.when could not be evaluated ({why}): the rule denies", self.path),
            (None, Some(reason)) => reason.clone(),
            (None, None) => match then {
                Then::Deny => format!("{} denies it", self.path),
                Then::Approve => format!("{} asks a person to approve", self.path),
                Then::Allow => format!("{} allows it", self.path),
            },
        };
        Verdict { rule: self.path.clone(), then, reason }
    }
}

fn compile_one(at: &str, rule: &Rule) -> Result<Compiled, KeyError> {
    let problem = |key: &str, message: String| KeyError { key: format!("{at}.{key}"), message };
    let tool = Glob::new(&rule.tool)
        .map_err(|err| problem("tool", format!("not a valid glob: {}", err.kind())))?
        .compile_matcher();
    let when = match &rule.when {
        None => None,
        Some(source) => Some(compile_when(source).map_err(|message| problem("when", message))?),
    };
    Ok(Compiled { path: at.to_owned(), tool, when, then: rule.then, reason: rule.reason.clone() })
}

/// A `when`, compiled and checked: its length, what it reads and calls, and its nesting.
fn compile_when(source: &str) -> Result<cel::Program, String> {
    if source.len() > MAX_WHEN_BYTES {
        return Err(format!("at most {MAX_WHEN_BYTES} bytes, this is {}", source.len()));
    }
    let program =
        cel::Program::compile(source).map_err(|err| format!("not valid CEL: {}", first_line(&err.to_string())))?;
    let mut bound = Vec::new();
    if comprehensions(program.expression(), &mut bound) > 1 {
        return Err(
            "a comprehension (all, exists, map, filter) inside another could take too long: use one at a time".into()
        );
    }
    let references = program.references();
    let readable = |name: &&str| VARIABLES.contains(name) || bound.iter().any(|b| b == name);
    if let Some(unknown) = references.variables().into_iter().find(|name| !readable(name)) {
        return Err(format!(
            "`{}` is not something a rule can read (it reads {})",
            crate::echo::bounded(unknown),
            VARIABLES.join(", ")
        ));
    }
    let known = |name: &&str| name.starts_with('_') || FUNCTIONS.contains(name) || name.starts_with("@");
    if let Some(unknown) = references.functions().into_iter().find(|name| !known(name)) {
        return Err(format!("CEL has no function `{}` a rule can call", crate::echo::bounded(unknown)));
    }
    Ok(program)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// How deeply comprehensions nest in `expr`, and the names they bind (their iteration and
/// accumulator variables, which a `when` reads beside [`VARIABLES`]).
fn comprehensions(expr: &cel::IdedExpr, bound: &mut Vec<String>) -> usize {
    use cel::common::ast::{EntryExpr, Expr};
    let mut deepest = |exprs: &mut dyn Iterator<Item = &cel::IdedExpr>| {
        exprs.map(|expr| comprehensions(expr, bound)).max().unwrap_or(0)
    };
    fn value(entry: &cel::common::ast::IdedEntryExpr) -> &cel::IdedExpr {
        match &entry.expr {
            EntryExpr::MapEntry(entry) => &entry.value,
            EntryExpr::StructField(field) => &field.value,
        }
    }
    match &expr.expr {
        Expr::Call(call) => deepest(&mut call.target.iter().map(|t| &**t).chain(&call.args)),
        Expr::Comprehension(c) => {
            let parts = [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result];
            let depth = 1 + deepest(&mut parts.into_iter());
            bound.extend([c.iter_var.clone(), c.accu_var.clone()]);
            bound.extend(c.iter_var2.clone());
            depth
        }
        Expr::List(list) => deepest(&mut list.elements.iter()),
        Expr::Map(map) => deepest(&mut map.entries.iter().map(value)),
        Expr::Struct(fields) => deepest(&mut fields.entries.iter().map(value)),
        Expr::Select(select) => deepest(&mut std::iter::once(&*select.operand)),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => 0,
    }
}

/// Evaluates `when` for `call`: whether it holds, or why it could not be told.
fn evaluate(when: &cel::Program, call: &Call<'_>) -> Result<bool, String> {
    let size = crate::json_size::of(call.arguments);
    if size > MAX_ARGUMENT_BYTES {
        return Err(format!("the arguments are {size} bytes, over the {MAX_ARGUMENT_BYTES} a rule reads"));
    }
    // CEL's standard environment, built once: making it per call cost a third of the calls/s.
    static ENV: std::sync::LazyLock<std::sync::Arc<cel::Env>> =
        std::sync::LazyLock::new(|| std::sync::Arc::new(cel::Env::stdlib()));
    let mut context = cel::Context::with_env(ENV.clone());
    let set = |context: &mut cel::Context, name: &str, value: &Value| {
        context.add_variable(name, value.clone()).map_err(|err| format!("`{name}` could not be read: {err}"))
    };
    set(&mut context, "args", call.arguments)?;
    for (name, value) in
        [("identity", call.identity), ("profile", call.profile), ("server", call.server), ("tool", call.tool)]
    {
        context.add_variable_from_value(name, value.to_owned());
    }
    context.add_variable_from_value("time", cel::Value::Timestamp(chrono::Utc::now().fixed_offset()));
    match when.execute(&context) {
        Ok(cel::Value::Bool(holds)) => Ok(holds),
        Ok(other) => Err(format!("it gave a {}, not a boolean", other.type_of())),
        Err(err) => Err(crate::echo::bounded(&err.to_string()).into_owned()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compiled(yaml: &str) -> Result<CompiledRules, KeyError> {
        let rules: Vec<Rule> = serde_norway::from_str(yaml).unwrap();
        CompiledRules::compile("profiles.dev.rules", &rules)
    }

    fn judge(rules: &CompiledRules, tool: &str, arguments: Value) -> Option<Verdict> {
        let call =
            Call { server: "files", prefix: "files", tool, arguments: &arguments, identity: "alice", profile: "dev" };
        rules.judge(&call)
    }

    const ISSUE: &str = r#"
- {tool: "files__write_file", when: 'args.path.startsWith("/data/scratch/")', then: allow}
- {tool: "files__write_file", then: deny, reason: "writes only under /data/scratch"}
- {tool: "query", when: 'args.sql.matches("(?i)\\b(drop|truncate)\\b")', then: deny}
"#;

    #[test]
    fn the_first_rule_that_matches_decides_and_none_allows() {
        let rules = compiled(ISSUE).unwrap();
        assert_eq!(judge(&rules, "write_file", json!({"path": "/data/scratch/a"})).unwrap().then, Then::Allow);
        let denied = judge(&rules, "write_file", json!({"path": "/etc/passwd"})).unwrap();
        assert_eq!((denied.then, denied.reason.as_str()), (Then::Deny, "writes only under /data/scratch"));
        assert_eq!(denied.rule, "profiles.dev.rules[1]");
        let dropped = judge(&rules, "query", json!({"sql": "select 1; DROP TABLE x"})).unwrap();
        assert_eq!((dropped.then, dropped.rule.as_str()), (Then::Deny, "profiles.dev.rules[2]"));
        assert_eq!(judge(&rules, "query", json!({"sql": "select 1"})), None, "no match: allowed");
        assert_eq!(judge(&rules, "read_file", json!({})), None);
    }

    #[test]
    fn a_when_that_cannot_be_evaluated_denies() {
        let rules = compiled(ISSUE).unwrap();
        let missing = judge(&rules, "write_file", json!({})).unwrap();
        assert_eq!((missing.then, missing.rule.as_str()), (Then::Deny, "profiles.dev.rules[0]"), "{missing:?}");
        assert!(missing.reason.contains("could not be evaluated"), "{missing:?}");
        let not_bool = compiled(r#"[{tool: "*", when: "args.n + 1", then: allow}]"#).unwrap();
        assert_eq!(judge(&not_bool, "x", json!({"n": 1})).unwrap().then, Then::Deny);
        let huge = json!({"path": "/data/scratch/".to_owned() + &"a".repeat(300 * 1024)});
        assert_eq!(judge(&rules, "write_file", huge).unwrap().then, Then::Deny, "over the bound");
    }

    #[test]
    fn identity_profile_server_tool_and_time_can_be_read() {
        let rules = compiled(
            r#"[{tool: "*", when: 'identity == "alice" && profile == "dev" && server == "files" && tool == "x" && time.getFullYear() > 2000', then: deny}]"#,
        )
        .unwrap();
        assert_eq!(judge(&rules, "x", json!({})).unwrap().then, Then::Deny);
    }

    #[test]
    fn bad_rules_are_refused_at_their_key_path() {
        let refused = |yaml: &str| compiled(yaml).unwrap_err();
        let syntax = refused(r#"[{tool: "*", when: "args.(", then: deny}]"#);
        assert_eq!(syntax.key, "profiles.dev.rules[0].when");
        let unknown = refused(r#"[{tool: a, then: allow}, {tool: "*", when: "secrets.x", then: deny}]"#);
        assert_eq!(unknown.key, "profiles.dev.rules[1].when");
        assert!(unknown.message.contains("secrets"), "{unknown}");
        let function = refused(r#"[{tool: "*", when: "launch(args)", then: deny}]"#);
        assert!(function.message.contains("launch"), "{function}");
        let nested = refused(r#"[{tool: "*", when: "args.a.all(x, args.b.exists(y, x == y))", then: deny}]"#);
        assert!(nested.message.contains("inside another"), "{nested}");
        let long = refused(&format!(r#"[{{tool: "*", when: "{}", then: deny}}]"#, "true && ".repeat(200) + "true"));
        assert!(long.message.contains("1024"), "{long}");
        assert_eq!(refused(r#"[{tool: "[", then: deny}]"#).key, "profiles.dev.rules[0].tool");
        let approve = compiled(r#"[{tool: "*delete*", then: approve}]"#).unwrap();
        let asked = judge(&approve, "delete_file", json!({})).unwrap();
        assert_eq!(
            (asked.then, asked.reason.as_str()),
            (Then::Approve, "profiles.dev.rules[0] asks a person to approve")
        );
        // One comprehension is fine.
        compiled(r#"[{tool: "*", when: "args.paths.all(p, p.startsWith('/data/'))", then: allow}]"#).unwrap();
    }
}
