//! `credentials:`: where the key that seals the upstream credentials the hangar stores (OAuth
//! tokens it obtained for an upstream, per identity) is kept. The key never leaves the
//! supervisor; the sealed credentials live in the journal's database.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::key_error::KeyError;

/// `credentials:`: the key that seals stored upstream credentials.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    /// The key file: one or more lines, each 32 random bytes in base64 (`head -c 32
    /// /dev/urandom | base64`). The first line seals; every line opens, so a key is rotated by
    /// putting a new line first and reloading (what the old key sealed is sealed again under the
    /// new one), then removing the old line. An absolute path; the file must be the hangar's
    /// user's and readable by no one else (mode 0600 or 0400), in a directory of its own at
    /// least two levels deep (such as `/etc/hangar/`), which no sandboxed upstream sees.
    /// Default: `credentials.key` in `state_dir`, made (0600) at the first start.
    pub key_file: Option<PathBuf>,
    /// The hangar's address as a person's browser reaches it (`https://hangar.example.com`, no
    /// path): the base of the connect and callback URLs of `per: user` servers
    /// (`/oauth/connect/{server}`, `/oauth/callback`), and of the Client ID Metadata Document's
    /// URL (`/oauth/client.json`). Needed when any server has `auth.oauth.per: user`.
    pub public_url: Option<String>,
}

impl CredentialsConfig {
    pub(crate) fn check(&self) -> Result<(), KeyError> {
        if let Some(url) = &self.public_url {
            let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
            if rest.is_none_or(|rest| rest.is_empty() || rest.contains(['/', '?', '#', ' '])) {
                return Err(KeyError {
                    key: "credentials.public_url".into(),
                    message: "expected the hangar's address as a browser reaches it: an http or https URL with no path, such as https://hangar.example.com".into(),
                });
            }
        }
        let refused = |message: String| Err(KeyError { key: "credentials.key_file".into(), message });
        match &self.key_file {
            Some(path) if !path.is_absolute() => refused(format!("must be an absolute path, got {}", path.display())),
            // Its directory is hidden from every box: a directory of its own, such as
            // /etc/hangar, never one boxes need, such as /etc.
            Some(path) if path.parent().is_none_or(|dir| dir.components().count() < 3) => refused(format!(
                "{} must be in a directory of its own, at least two levels deep (such as /etc/hangar/): \
                 no sandboxed upstream may see that directory",
                path.display()
            )),
            _ => Ok(()),
        }
    }
}
