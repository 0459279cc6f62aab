//! Where the control socket lives when `--socket` is not given.

use std::path::PathBuf;

/// The file name of the supervisor's control socket inside its runtime directory.
pub const SOCKET_FILE: &str = "supervisor.sock";

/// `$RUNTIME_DIRECTORY` (set by systemd's `RuntimeDirectory=`), else `$XDG_RUNTIME_DIR/hangar`,
/// else `/tmp/hangar-$USER`. Every process resolves it the same way, so they meet without flags.
pub fn default_socket_path() -> PathBuf {
    socket_path_from(|key| std::env::var_os(key).filter(|v| !v.is_empty()))
}

fn socket_path_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    if let Some(dir) = var("RUNTIME_DIRECTORY") {
        // systemd may hand several directories separated by ':'; the first is ours.
        let first = dir.to_string_lossy().split(':').next().unwrap_or_default().to_owned();
        return PathBuf::from(first).join(SOCKET_FILE);
    }
    if let Some(dir) = var("XDG_RUNTIME_DIR") {
        return PathBuf::from(dir).join("hangar").join(SOCKET_FILE);
    }
    let user = var("USER").map(|u| u.to_string_lossy().into_owned()).unwrap_or_else(|| "default".into());
    PathBuf::from(format!("/tmp/hangar-{user}")).join(SOCKET_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
        move |key| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).into())
    }

    #[test]
    fn prefers_systemd_runtime_directory() {
        let path =
            socket_path_from(env(&[("RUNTIME_DIRECTORY", "/run/hangar:/run/x"), ("XDG_RUNTIME_DIR", "/run/user/1")]));
        assert_eq!(path, PathBuf::from("/run/hangar/supervisor.sock"));
    }

    #[test]
    fn falls_back_to_xdg_then_tmp() {
        assert_eq!(
            socket_path_from(env(&[("XDG_RUNTIME_DIR", "/run/user/1")])),
            PathBuf::from("/run/user/1/hangar/supervisor.sock")
        );
        assert_eq!(socket_path_from(env(&[("USER", "ops")])), PathBuf::from("/tmp/hangar-ops/supervisor.sock"));
    }
}
