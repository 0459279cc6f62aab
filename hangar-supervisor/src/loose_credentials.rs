//! A credential file other users may read is said aloud, by path and mode, at start and on each
//! reload: the hangar still reads it (systemd's `LoadCredential=` and a secret store mount give
//! files their own modes), but a token any local user can read is a token any local user holds.
//! Nothing of the file's content is read here.

use std::os::unix::fs::PermissionsExt;

use hangar_core::config::Config;

/// Warns, once per file, of each credential file (`env:`, `auth.headers`, an OAuth client's
/// `secret_file`) whose mode lets its group or others read or write it.
pub fn warn(config: &Config) {
    let directory = hangar_core::credential::credentials_directory();
    let mut seen = Vec::new();
    for (id, server) in &config.mcp_servers {
        for path in server.secret_paths(directory.as_deref()) {
            if seen.contains(&path) {
                continue;
            }
            let Ok(metadata) = std::fs::metadata(&path) else { continue };
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    mcp_server = %id,
                    path = %path.display(),
                    mode = format!("{mode:04o}"),
                    "a credential file others may read or write: chmod 600 it (or 400)"
                );
            }
            seen.push(path);
        }
    }
}
