//! A credential file other users may read is said aloud, by path and mode, at start and on each
//! reload: the hangar still reads it (systemd's `LoadCredential=` and a secret store mount give
//! files their own modes), but a token any local user can read is a token any local user holds.
//! Nothing of the file's content is read here.

use std::os::unix::fs::PermissionsExt;

use hangar_core::config::Config;
use hangar_core::credential::{CREDENTIALS_DIRECTORY, file_path};

/// Warns, once per file, of each credential file (`env:`, `auth.headers`, an OAuth client's
/// `secret_file`) whose mode lets its group or others read or write it.
pub fn warn(config: &Config) {
    let directory = std::env::var_os(CREDENTIALS_DIRECTORY).filter(|dir| !dir.is_empty()).map(std::path::PathBuf::from);
    let mut seen = Vec::new();
    for (id, server) in &config.mcp_servers {
        let files = server.credential_files().filter_map(|file| file_path(file, directory.as_deref()));
        let secrets = server.auth.iter().flat_map(|auth| &auth.oauth).map(|oauth| oauth.client.secret_file.clone());
        for path in files.chain(secrets) {
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
