//! The `sandbox:` block of a server and the top-level `sandbox_defaults:`: what a spawned
//! upstream may read, write, reach and use, enforced by the kernel (Landlock, namespaces,
//! rlimits, seccomp, cgroups) between fork and exec (`hangar-supervisor/src/spawn.rs`).
//!
//! A server's `sandbox:` is one of:
//! - absent: `sandbox_defaults:` applies (itself absent: no sandbox);
//! - `none`: no sandbox, whatever `sandbox_defaults:` says;
//! - `strict`: the documented preset ([`Sandbox::strict`]);
//! - a mapping of the keys below; with `preset: strict` in it, every key not written takes the
//!   preset's value (so the preset can be given, say, its one writable directory).
//!
//! A block replaces the defaults whole (no key-by-key merge), so what a server runs with reads
//! in one place. A box holds no capability but those `capabilities:` names (checked by name
//! here), and no `filesystem` grant may cover the hangar's own places, the control socket's
//! directory and the state directory ([`Sandbox::grant_over`], checked by the supervisor, which
//! alone knows where they are). Only rules are checked here; whether a user exists or the kernel can enforce a
//! rule is judged when the server starts.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// System paths an upstream may read (and run programs from) unless `filesystem.read` says
/// otherwise; those missing on a machine are skipped. Not all of `/etc`: `/etc/shadow` and
/// friends stay out.
pub const SYSTEM_READ_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/group",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/ssl",
];

/// What `sandbox: strict` limits memory to.
pub const STRICT_MEMORY_MB: u64 = 512;
/// What `sandbox: strict` limits processes (threads included, as the kernel counts) to.
pub const STRICT_MAX_PROCESSES: u64 = 64;

/// A server's `sandbox:` as written, before `sandbox_defaults:` is applied.
// One per server, read at load: its size does not matter, and a box would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Default, PartialEq)]
pub enum SandboxSetting {
    /// Not written: `sandbox_defaults:` applies. Never left after the config is loaded.
    #[default]
    Inherit,
    /// `none`: no sandbox.
    Off,
    /// A block, or the `strict` preset resolved to its values.
    On(Sandbox),
}

impl SandboxSetting {
    /// The sandbox in effect, if any.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        match self {
            SandboxSetting::On(sandbox) => Some(sandbox),
            SandboxSetting::Inherit | SandboxSetting::Off => None,
        }
    }

    /// `self`, or `defaults` when `self` was not written.
    pub fn or_defaults(self, defaults: Option<&SandboxSetting>) -> SandboxSetting {
        match (self, defaults) {
            (SandboxSetting::Inherit, Some(defaults)) => match defaults {
                SandboxSetting::Inherit => SandboxSetting::Off,
                other => other.clone(),
            },
            (SandboxSetting::Inherit, None) => SandboxSetting::Off,
            (own, _) => own,
        }
    }
}

/// One server's sandbox, every default filled in. In the mapping form, `preset: strict` takes
/// the preset's values for every key not written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RawSandbox")]
pub struct Sandbox {
    /// Run as this user (name or numeric uid) and its primary group, with no supplementary
    /// groups. Needs root or CAP_SETUID/CAP_SETGID. `None`: the hangar's own user.
    pub user: Option<String>,
    pub filesystem: Filesystem,
    pub network: Network,
    /// The upstream's memory (its cgroup's `memory.max`, else `RLIMIT_AS`).
    pub memory_mb: Option<u64>,
    /// The upstream's processes and threads (its cgroup's `pids.max`, else `RLIMIT_NPROC`).
    pub max_processes: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub max_open_files: Option<u64>,
    /// `RLIMIT_CPU`: CPU seconds before the kernel kills it.
    pub cpu_seconds: Option<u64>,
    pub syscalls: Syscalls,
    /// The capabilities it keeps (e.g. `CAP_NET_BIND_SERVICE`), by name as [`CAPABILITIES`]
    /// spells them; every other one is dropped (bounding, ambient, inheritable, permitted and
    /// effective sets) before exec. Default: none.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Refuse to start when the kernel cannot enforce all of this (the default); `false` runs
    /// it with what the kernel can do, and the server's details say what is missing.
    pub require: bool,
    /// Which preset this came from, if any (shown in the server's details).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
}

/// The mapping form as written: an absent key takes the preset's value, else the default.
/// The limits tell "absent" (`None`) from `null` (`Some(None)`: no limit). Its doc comments
/// describe the keys in `docs/config.md`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Sandbox")]
struct RawSandbox {
    /// `strict`: every key not written takes the `strict` preset's value (no network, 512 MB of
    /// memory, 64 processes). Default: no preset, so unwritten keys take their own defaults.
    #[serde(default)]
    preset: Option<Preset>,
    /// Run as this user (a name or a numeric uid) and its primary group, with no supplementary
    /// groups; needs root or CAP_SETUID/CAP_SETGID. Default: the hangar's own user.
    #[serde(default)]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$"))]
    user: Option<String>,
    /// What the upstream may read and write. Default: the system paths read-only, nothing
    /// writable, a private `$HOME` and `/tmp`.
    #[serde(default)]
    filesystem: Option<Filesystem>,
    /// What the upstream may reach. Default: `any` (`preset: strict`: `none`).
    #[serde(default)]
    network: Option<Network>,
    /// Memory in MB, at least 16 (its cgroup's `memory.max`, else `RLIMIT_AS`); `null`: no
    /// limit. Default: no limit (`preset: strict`: 512).
    #[serde(default, deserialize_with = "written")]
    #[schemars(with = "Option<u64>", range(min = 16))]
    memory_mb: Option<Option<u64>>,
    /// Processes and threads, at least 1 (its cgroup's `pids.max`, else `RLIMIT_NPROC`);
    /// `null`: no limit. Default: no limit (`preset: strict`: 64).
    #[serde(default, deserialize_with = "written")]
    #[schemars(with = "Option<u64>", range(min = 1))]
    max_processes: Option<Option<u64>>,
    /// Open files, at least 16 (`RLIMIT_NOFILE`); `null`: no limit. Default: no limit.
    #[serde(default, deserialize_with = "written")]
    #[schemars(with = "Option<u64>", range(min = 16))]
    max_open_files: Option<Option<u64>>,
    /// CPU seconds, at least 1, before the kernel kills the upstream (`RLIMIT_CPU`); `null`: no
    /// limit. Default: no limit.
    #[serde(default, deserialize_with = "written")]
    #[schemars(with = "Option<u64>", range(min = 1))]
    cpu_seconds: Option<Option<u64>>,
    /// The system-call filter. Default: `default`.
    #[serde(default)]
    syscalls: Option<Syscalls>,
    /// The capabilities the upstream keeps (e.g. `CAP_NET_BIND_SERVICE`, or `net_bind_service`:
    /// case and the `CAP_` prefix are optional); every other one is dropped before exec.
    /// Default: none.
    #[serde(default)]
    capabilities: Option<Vec<String>>,
    /// Refuse to start the upstream when the kernel cannot enforce all of this; `false` runs it
    /// with what the kernel can do, and the server's details say what is missing. Default: `true`.
    #[serde(default)]
    require: Option<bool>,
}

/// A key that was written, `null` included.
fn written<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(deserializer).map(Some)
}

impl From<RawSandbox> for Sandbox {
    fn from(raw: RawSandbox) -> Sandbox {
        let base = match raw.preset {
            Some(Preset::Strict) => Sandbox::strict(),
            None => Sandbox::unlimited(),
        };
        Sandbox {
            user: raw.user.or(base.user),
            filesystem: raw.filesystem.unwrap_or(base.filesystem),
            network: raw.network.unwrap_or(base.network),
            memory_mb: raw.memory_mb.unwrap_or(base.memory_mb),
            max_processes: raw.max_processes.unwrap_or(base.max_processes),
            max_open_files: raw.max_open_files.unwrap_or(base.max_open_files),
            cpu_seconds: raw.cpu_seconds.unwrap_or(base.cpu_seconds),
            syscalls: raw.syscalls.unwrap_or(base.syscalls),
            capabilities: raw
                .capabilities
                .map(|names| names.iter().map(|name| canonical_capability(name)).collect())
                .unwrap_or(base.capabilities),
            require: raw.require.unwrap_or(base.require),
            preset: raw.preset,
        }
    }
}

/// The named presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    Strict,
}

/// `filesystem:`. Besides these, an upstream may always read its own command's directory and
/// interpreter, `/proc`, and the devices every program expects (`/dev/null`, `/dev/zero`,
/// `/dev/random`, `/dev/urandom`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filesystem {
    /// Absolute paths the upstream may read, and run programs from. Default: the system's
    /// library and program directories and a few files of `/etc` ([`SYSTEM_READ_PATHS`]).
    #[serde(default = "system_read_paths")]
    pub read: Vec<PathBuf>,
    /// Absolute paths the upstream may read and write. Default: none.
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// A fresh, empty `$HOME` and `/tmp` for each start (read-write; `/tmp` by a mount namespace).
    #[serde(default = "default_private")]
    pub private: bool,
}

impl Default for Filesystem {
    fn default() -> Self {
        Filesystem { read: system_read_paths(), write: Vec::new(), private: true }
    }
}

fn system_read_paths() -> Vec<PathBuf> {
    SYSTEM_READ_PATHS.iter().map(PathBuf::from).collect()
}

fn default_private() -> bool {
    true
}

/// `network:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Network {
    /// No network at all: a network namespace of its own (only a loopback, down).
    None,
    /// TCP only to these ports (connect) and on these ports (bind); Landlock, ABI 4 or later.
    /// Other protocols (UDP, Unix sockets) are not restricted by this form.
    Ports { tcp_connect: Vec<u16>, tcp_bind: Vec<u16> },
    /// Unrestricted.
    #[default]
    Any,
}

/// `syscalls:`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Syscalls {
    /// A deny-list of dangerous system calls (ptrace, mount, bpf, kexec, module loading, ...),
    /// answered with EPERM.
    #[default]
    Default,
    /// No filter.
    None,
}

impl Sandbox {
    /// A mapping with nothing written: the default file-system rules, any network, no limits.
    pub fn unlimited() -> Sandbox {
        Sandbox {
            user: None,
            filesystem: Filesystem::default(),
            network: Network::Any,
            memory_mb: None,
            max_processes: None,
            max_open_files: None,
            cpu_seconds: None,
            syscalls: Syscalls::Default,
            capabilities: Vec::new(),
            require: true,
            preset: None,
        }
    }

    /// `sandbox: strict`: no network; read-only system paths; the command's own directory
    /// readable (always true); a private `$HOME` and `$TMPDIR` (the host's `/tmp` refused, not
    /// replaced); 512 MB of memory; 64 processes.
    pub fn strict() -> Sandbox {
        Sandbox {
            user: None,
            filesystem: Filesystem::default(),
            network: Network::None,
            memory_mb: Some(STRICT_MEMORY_MB),
            max_processes: Some(STRICT_MAX_PROCESSES),
            max_open_files: None,
            cpu_seconds: None,
            syscalls: Syscalls::Default,
            capabilities: Vec::new(),
            require: true,
            preset: Some(Preset::Strict),
        }
    }

    /// Why this block is invalid, if it is: `(key under the block, message)`.
    pub fn problem(&self) -> Option<(String, String)> {
        if let Some(user) = &self.user
            && !valid_user(user)
        {
            return Some(("user".into(), "expected a user name or a numeric uid".into()));
        }
        for (list, paths) in [("read", &self.filesystem.read), ("write", &self.filesystem.write)] {
            for (n, path) in paths.iter().enumerate() {
                if let Some(message) = path_problem(path) {
                    return Some((format!("filesystem.{list}[{n}]"), message));
                }
            }
        }
        for (n, name) in self.capabilities.iter().enumerate() {
            if capability_number(name).is_none() {
                return Some((
                    format!("capabilities[{n}]"),
                    format!(
                        "`{}` is not a capability (expected a name such as CAP_NET_BIND_SERVICE)",
                        crate::echo::bounded(name)
                    ),
                ));
            }
        }
        if let Network::Ports { tcp_connect, tcp_bind } = &self.network {
            for (list, ports) in [("tcp_connect", tcp_connect), ("tcp_bind", tcp_bind)] {
                if let Some(n) = ports.iter().position(|port| *port == 0) {
                    return Some((format!("network.{list}[{n}]"), "expected a port from 1 to 65535".into()));
                }
            }
        }
        let at_least = [
            ("memory_mb", self.memory_mb, 16, "MB"),
            ("max_processes", self.max_processes, 1, "processes"),
            ("max_open_files", self.max_open_files, 16, "files"),
            ("cpu_seconds", self.cpu_seconds, 1, "seconds"),
        ];
        for (key, value, least, unit) in at_least {
            if let Some(value) = value
                && value < least
            {
                return Some((key.into(), format!("expected at least {least} {unit}, or null for no limit")));
            }
        }
        None
    }

    /// The capabilities it keeps, as a mask of their numbers (names already checked by
    /// [`Sandbox::problem`]; an unknown one counts as none).
    pub fn capability_mask(&self) -> u64 {
        self.capabilities.iter().filter_map(|name| capability_number(name)).fold(0, |mask, n| mask | 1 << n)
    }

    /// The first `filesystem` grant that would open one of `protected` (the hangar's own
    /// places: what each is, where, and whether nothing inside it may be granted either) to
    /// the box: a grant of the place itself or of a directory above it, or, where so marked, of
    /// anything inside it. `resolve` gives a path as the kernel reaches it (symbolic links
    /// followed), so `/var/run` is seen to cover `/run/hangar`. Gives the key under the block
    /// (`filesystem.read[2]`) and why, in the hangar's words.
    pub fn grant_over(
        &self,
        protected: &[(&str, PathBuf, bool)],
        resolve: impl Fn(&Path) -> PathBuf,
    ) -> Option<(String, String)> {
        for (list, paths) in [("read", &self.filesystem.read), ("write", &self.filesystem.write)] {
            for (n, path) in paths.iter().enumerate() {
                let grant = resolve(path);
                for (what, place, whole) in protected {
                    if place.starts_with(&grant) || (*whole && grant.starts_with(place)) {
                        return Some((
                            format!("filesystem.{list}[{n}]"),
                            format!(
                                "{} would open {what} ({}) to the box: nothing in a sandbox may reach it; grant narrower paths",
                                path.display(),
                                place.display()
                            ),
                        ));
                    }
                }
            }
        }
        None
    }
}

/// Every capability the kernel knows, by number (`capability.h`): what `sandbox.capabilities`
/// accepts, with or without the `CAP_` prefix, in any case.
pub const CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// A capability's name as [`CAPABILITIES`] spells it (`net_bind_service` reads
/// `CAP_NET_BIND_SERVICE`); an unknown name is kept as written, for [`Sandbox::problem`].
fn canonical_capability(name: &str) -> String {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") { upper } else { format!("CAP_{upper}") };
    if CAPABILITIES.contains(&full.as_str()) { full } else { name.to_owned() }
}

/// A capability's number, by its name as [`CAPABILITIES`] spells it.
pub fn capability_number(name: &str) -> Option<u32> {
    CAPABILITIES.iter().position(|known| *known == name).map(|n| n as u32)
}

/// What `GET /api/mcp_servers/{id}` shows of a server's sandbox: what is configured and what
/// its last start got from the kernel, so an operator sees what it can and cannot do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxDetails {
    /// The sandbox configured (a preset expanded, `sandbox_defaults:` applied).
    pub configured: Sandbox,
    /// What its process's last start got; `None` before its first start in this hangar's run.
    pub in_effect: Option<SandboxInEffect>,
}

/// What one start of a sandboxed process got, in the hangar's words.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxInEffect {
    /// The Landlock ABI the rules were written for; `None`: no Landlock.
    pub landlock_abi: Option<u32>,
    /// The identity it runs as, e.g. `nobody (uid 65534, gid 65534)`; `None`: the hangar's own.
    pub user: Option<String>,
    /// Its private `$HOME`, when `filesystem.private`.
    pub home: Option<PathBuf>,
    /// Each protection in force, e.g. `file system: Landlock ABI 7`.
    pub enforced: Vec<String>,
    /// Each thing weaker than configured, and why (a kernel feature missing with `require:
    /// false`, or a limit enforced by a fallback). Empty when it got everything asked.
    pub fallbacks: Vec<String>,
}

/// A name (letters, digits, `_`, `-`, `.`, not starting with `-`) or a numeric uid.
fn valid_user(user: &str) -> bool {
    !user.is_empty()
        && user.len() <= 64
        && !user.starts_with('-')
        && user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// An absolute path with no `..` (Landlock rules follow the path as written at start).
fn path_problem(path: &Path) -> Option<String> {
    if !path.is_absolute() {
        return Some("expected an absolute path".into());
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Some("expected a path without `..`".into());
    }
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Some("a path cannot contain a NUL byte".into());
    }
    None
}

impl<'de> Deserialize<'de> for SandboxSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Setting;
        impl<'de> Visitor<'de> for Setting {
            type Value = SandboxSetting;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`strict`, `none`, or a mapping of sandbox keys")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<SandboxSetting, E> {
                match value {
                    "strict" => Ok(SandboxSetting::On(Sandbox::strict())),
                    "none" => Ok(SandboxSetting::Off),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<SandboxSetting, M::Error> {
                Sandbox::deserialize(de::value::MapAccessDeserializer::new(map)).map(SandboxSetting::On)
            }
        }
        deserializer.deserialize_any(Setting)
    }
}

/// The mapping form of `network:`.
/// The ports form of `network:`: TCP only to and on these ports (Landlock, ABI 4 or later);
/// other protocols (UDP, Unix sockets) are not restricted by this form.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "NetworkPorts")]
struct Ports {
    /// Ports (1 to 65535) the upstream may connect to over TCP. Default: none.
    #[serde(default)]
    #[schemars(extend("items" = {"type": "integer", "minimum": 1, "maximum": 65535}))]
    tcp_connect: Vec<u16>,
    /// Ports (1 to 65535) the upstream may listen on over TCP. Default: none.
    #[serde(default)]
    #[schemars(extend("items" = {"type": "integer", "minimum": 1, "maximum": 65535}))]
    tcp_bind: Vec<u16>,
}

/// `sandbox:` as the loader reads it (a hand-written `Deserialize`): `strict`, `none`, or the
/// mapping form.
impl JsonSchema for SandboxSetting {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SandboxSetting".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        word_or_mapping::<RawSandbox>(
            generator,
            "`strict` (the preset: no network, read-only system paths, a private `$HOME` and `/tmp`, 512 MB of memory, 64 processes), `none` (no sandbox, whatever `sandbox_defaults` says), or a mapping of the keys below.",
            &["strict", "none"],
        )
    }
}

/// `network:` as the loader reads it (a hand-written `Deserialize`).
impl JsonSchema for Network {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Network".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        word_or_mapping::<Ports>(
            generator,
            "`none` (a network namespace of its own: no network at all), `any` (unrestricted), or a mapping of TCP ports.",
            &["none", "any"],
        )
    }
}

/// The schema of a key written as one of `words` or as the mapping `T` reads.
fn word_or_mapping<T: JsonSchema>(
    generator: &mut schemars::SchemaGenerator,
    description: &str,
    words: &[&str],
) -> schemars::Schema {
    schemars::json_schema!({
        "description": description,
        "oneOf": [
            {"type": "string", "enum": words},
            generator.subschema_for::<T>(),
        ]
    })
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> Visitor<'de> for Form {
            type Value = Network;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`none`, `any`, or {tcp_connect: [ports], tcp_bind: [ports]}")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Network, E> {
                match value {
                    "none" => Ok(Network::None),
                    "any" => Ok(Network::Any),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Network, M::Error> {
                let Ports { tcp_connect, tcp_bind } = Ports::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Network::Ports { tcp_connect, tcp_bind })
            }
        }
        deserializer.deserialize_any(Form)
    }
}

impl Serialize for Network {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Network::None => serializer.serialize_str("none"),
            Network::Any => serializer.serialize_str("any"),
            Network::Ports { tcp_connect, tcp_bind } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("tcp_connect", tcp_connect)?;
                map.serialize_entry("tcp_bind", tcp_bind)?;
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(yaml: &str) -> Result<SandboxSetting, String> {
        serde_norway::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn strict_is_the_documented_preset() {
        let strict = setting("strict").unwrap();
        let sandbox = strict.sandbox().unwrap();
        assert_eq!(sandbox.network, Network::None);
        assert_eq!(sandbox.memory_mb, Some(512));
        assert_eq!(sandbox.max_processes, Some(64));
        assert!(sandbox.filesystem.private);
        assert!(sandbox.filesystem.write.is_empty());
        assert!(sandbox.filesystem.read.contains(&PathBuf::from("/usr")));
        assert!(!sandbox.filesystem.read.iter().any(|p| p == Path::new("/etc")), "not all of /etc");
        assert!(sandbox.require);
        assert_eq!(sandbox.syscalls, Syscalls::Default);
        assert_eq!(sandbox.preset, Some(Preset::Strict));
    }

    #[test]
    fn a_block_fills_every_default() {
        let sandbox = setting("{}").unwrap().sandbox().cloned().unwrap();
        assert_eq!(sandbox.network, Network::Any);
        assert_eq!(sandbox.filesystem, Filesystem::default());
        assert!(sandbox.require);
        assert_eq!((sandbox.memory_mb, sandbox.max_processes, sandbox.cpu_seconds), (None, None, None));
        assert_eq!(sandbox.preset, None);
    }

    #[test]
    fn a_preset_in_a_block_gives_every_key_not_written() {
        let sandbox = setting("{preset: strict, filesystem: {write: [/srv/shared]}, memory_mb: null}").unwrap();
        let sandbox = sandbox.sandbox().unwrap();
        assert_eq!(sandbox.filesystem.write, [PathBuf::from("/srv/shared")]);
        assert_eq!(sandbox.filesystem.read, Filesystem::default().read);
        assert_eq!((&sandbox.network, sandbox.memory_mb, sandbox.max_processes), (&Network::None, None, Some(64)));
        assert_eq!(sandbox.preset, Some(Preset::Strict));
        assert!(setting("{preset: lax}").is_err());
    }

    #[test]
    fn network_has_three_forms() {
        let net = |yaml: &str| setting(&format!("{{network: {yaml}}}")).map(|s| s.sandbox().unwrap().network.clone());
        assert_eq!(net("none").unwrap(), Network::None);
        assert_eq!(net("any").unwrap(), Network::Any);
        assert_eq!(net("{tcp_connect: [443]}").unwrap(), Network::Ports { tcp_connect: vec![443], tcp_bind: vec![] });
        assert!(net("some").is_err());
        assert!(net("{udp: [53]}").is_err());
    }

    #[test]
    fn none_is_off_and_inherit_takes_the_defaults() {
        assert_eq!(setting("none").unwrap(), SandboxSetting::Off);
        assert!(setting("lax").is_err());
        let strict = SandboxSetting::On(Sandbox::strict());
        assert_eq!(SandboxSetting::Inherit.or_defaults(Some(&strict)), strict);
        assert_eq!(SandboxSetting::Off.or_defaults(Some(&strict)), SandboxSetting::Off);
        assert_eq!(SandboxSetting::Inherit.or_defaults(None), SandboxSetting::Off);
    }

    #[test]
    fn capabilities_are_named_in_any_case_with_or_without_the_prefix_and_none_by_default() {
        let caps = |yaml: &str| setting(yaml).unwrap().sandbox().cloned().unwrap();
        assert_eq!(Sandbox::strict().capabilities, Vec::<String>::new());
        assert_eq!(caps("strict").capability_mask(), 0);
        let kept = caps("{preset: strict, capabilities: [CAP_NET_BIND_SERVICE, net_raw, Cap_Chown]}");
        assert_eq!(kept.capabilities, ["CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_CHOWN"]);
        assert_eq!(kept.capability_mask(), 1 << 10 | 1 << 13 | 1);
        assert_eq!(kept.problem(), None);
        let unknown = caps("{capabilities: [CAP_CHOWN, CAP_EVERYTHING]}");
        assert_eq!(unknown.problem().map(|(key, _)| key).as_deref(), Some("capabilities[1]"));
        assert_eq!(capability_number("CAP_CHECKPOINT_RESTORE"), Some(40));
    }

    #[test]
    fn a_grant_over_or_above_a_protected_place_is_refused_and_inside_only_where_marked() {
        let sandbox = |read: &str| setting(&format!("{{filesystem: {{read: [/usr, {read}]}}}}")).unwrap();
        let places = [
            ("the socket's directory", PathBuf::from("/run/hangar"), false),
            ("state_dir", "/var/lib/hangar".into(), true),
        ];
        let over = |read: &str| {
            sandbox(read).sandbox().unwrap().grant_over(&places, |p| {
                // `/var/run` is a link to `/run` here.
                p.strip_prefix("/var/run").map_or_else(|_| p.to_path_buf(), |rest| Path::new("/run").join(rest))
            })
        };
        for covering in
            ["/", "/run", "/run/hangar", "/var/run", "/var", "/var/lib/hangar", "/var/lib/hangar/journal.sqlite"]
        {
            let (key, message) = over(covering).unwrap_or_else(|| panic!("{covering} was not refused"));
            assert_eq!(key, "filesystem.read[1]", "{covering}");
            assert!(message.contains(covering), "{message}");
        }
        for beside in ["/run/hangar/shared", "/run/other", "/var/lib/other", "/srv"] {
            assert_eq!(over(beside), None, "{beside}");
        }
    }

    #[test]
    fn problems_name_their_key() {
        let problem = |yaml: &str| setting(yaml).unwrap().sandbox().unwrap().problem().map(|(key, _)| key);
        assert_eq!(problem("{filesystem: {read: [/usr, relative]}}").as_deref(), Some("filesystem.read[1]"));
        assert_eq!(problem("{filesystem: {write: [/srv/../etc]}}").as_deref(), Some("filesystem.write[0]"));
        assert_eq!(problem("{network: {tcp_bind: [0]}}").as_deref(), Some("network.tcp_bind[0]"));
        assert_eq!(problem("{memory_mb: 1}").as_deref(), Some("memory_mb"));
        assert_eq!(problem("{max_processes: 0}").as_deref(), Some("max_processes"));
        assert_eq!(problem("{user: 'x y'}").as_deref(), Some("user"));
        assert_eq!(problem("{user: hangar-mcp, memory_mb: 512, cpu_seconds: null}"), None);
    }
}
