//! A problem at one key of the config: what every check of a config block answers.
//!
//! It lives apart from [`crate::config`] so that the blocks the config is made of (cluster,
//! policy, shutdown, journal...) can refuse a value without depending on the config itself.

/// A problem at one key of the config.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct KeyError {
    /// Dotted path of the key, e.g. `mcp_servers.math.command`.
    pub key: String,
    pub message: String,
}
