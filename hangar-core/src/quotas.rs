//! `profiles.<name>.limits`: quotas per identity holding the profile, beside the hangar-wide and
//! per-server limits (`crate::limits`): a rate limit on all its calls, rate limits per tool
//! (`calls_per_minute`), and a number of calls per UTC day. Each identity has its own; a
//! refusal is `rate_limited`, naming the key of the limit it hit and when to retry.

use globset::{Glob, GlobMatcher};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::key_error::KeyError;
use crate::limits::RateLimit;

/// A profile's quotas, per identity, as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileLimits {
    /// Each identity's calls, per second (a token bucket). Default: none.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// Per tool (a glob over the tool's qualified `<server>__<tool>` or bare name): each
    /// identity's calls of it per minute. Default: none.
    #[serde(default)]
    pub tools: IndexMap<String, ToolQuota>,
    /// Each identity's calls per UTC day, 1 or more; counted from the journal's audit, so it
    /// holds across a restart. Default: none.
    #[serde(default)]
    pub daily_calls: Option<u64>,
}

/// One tool's quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolQuota {
    /// Calls per minute (fractions allowed); above 0. A full minute's worth may come at once.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub calls_per_minute: f64,
}

/// A profile's quotas, compiled.
#[derive(Debug, Default)]
pub struct Quotas {
    /// The profile's name, for the keys refusals name.
    pub profile: String,
    pub rate_limit: Option<RateLimit>,
    pub tools: Vec<(String, GlobMatcher, RateLimit)>,
    pub daily_calls: Option<u64>,
}

impl Quotas {
    /// Compiles `limits`, written at `profiles.<profile>.limits`.
    pub fn compile(profile: &str, limits: &ProfileLimits) -> Result<Quotas, KeyError> {
        let at = |key: &str| format!("profiles.{profile}.limits.{key}");
        if let Some(rate) = &limits.rate_limit
            && !(rate.calls_per_s.is_finite() && rate.calls_per_s > 0.0)
        {
            return Err(KeyError { key: at("rate_limit.calls_per_s"), message: "expected a rate above 0".into() });
        }
        if limits.daily_calls == Some(0) {
            return Err(KeyError { key: at("daily_calls"), message: "expected 1 or more".into() });
        }
        let mut tools = Vec::new();
        for (glob, quota) in &limits.tools {
            let key = at(&format!("tools.{glob}"));
            let matcher = Glob::new(glob)
                .map_err(|err| KeyError { key: key.clone(), message: format!("not a valid glob: {}", err.kind()) })?
                .compile_matcher();
            if !(quota.calls_per_minute.is_finite() && quota.calls_per_minute > 0.0) {
                return Err(KeyError { key: format!("{key}.calls_per_minute"), message: "expected above 0".into() });
            }
            let burst = quota.calls_per_minute.ceil().max(1.0) as u32;
            tools.push((
                glob.clone(),
                matcher,
                RateLimit { calls_per_s: quota.calls_per_minute / 60.0, burst: Some(burst) },
            ));
        }
        Ok(Quotas {
            profile: profile.to_owned(),
            rate_limit: limits.rate_limit.clone(),
            tools,
            daily_calls: limits.daily_calls,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rate_limit.is_none() && self.tools.is_empty() && self.daily_calls.is_none()
    }

    /// The key of the profile's `limits` (`profiles.<name>.limits`).
    pub fn key(&self, what: &str) -> String {
        format!("profiles.{}.limits.{what}", self.profile)
    }

    /// The tool quotas `qualified` (`<prefix>__<tool>`) or `bare` matches, by their glob.
    pub fn tools_of<'a>(&'a self, qualified: &'a str, bare: &'a str) -> impl Iterator<Item = (&'a str, &'a RateLimit)> {
        self.tools
            .iter()
            .filter(move |(_, matcher, _)| matcher.is_match(qualified) || matcher.is_match(bare))
            .map(|(glob, _, rate)| (glob.as_str(), rate))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn compiled(yaml: &str) -> Result<Quotas, KeyError> {
        Quotas::compile("ci", &serde_norway::from_str(yaml).unwrap())
    }

    #[test]
    fn the_issues_quotas_compile_and_a_tool_matches_by_either_name() {
        let quotas = compiled(
            "rate_limit: {calls_per_s: 5, burst: 10}\ntools: {\"math__add\": {calls_per_minute: 60}}\ndaily_calls: 10000",
        )
        .unwrap();
        assert_eq!(quotas.daily_calls, Some(10000));
        let add: Vec<_> = quotas.tools_of("math__add", "add").collect();
        assert_eq!(add.len(), 1);
        assert_eq!((add[0].1.calls_per_s, add[0].1.burst), (1.0, Some(60)));
        assert_eq!(quotas.tools_of("math__mul", "mul").count(), 0);
        assert_eq!(quotas.key("daily_calls"), "profiles.ci.limits.daily_calls");
    }

    #[test]
    fn bad_quotas_are_refused_at_their_key() {
        assert_eq!(compiled("daily_calls: 0").unwrap_err().key, "profiles.ci.limits.daily_calls");
        assert_eq!(
            compiled("rate_limit: {calls_per_s: 0}").unwrap_err().key,
            "profiles.ci.limits.rate_limit.calls_per_s"
        );
        let tool = compiled("tools: {\"a\": {calls_per_minute: -1}}").unwrap_err();
        assert_eq!(tool.key, "profiles.ci.limits.tools.a.calls_per_minute");
        assert_eq!(compiled("tools: {\"[\": {calls_per_minute: 1}}").unwrap_err().key, "profiles.ci.limits.tools.[");
    }
}
