//! Legacy `Mcp-Session-Id`s, stateless so any API instance accepts any other's.
//!
//! An id is `hgr1-<negotiated version>-<32 random lower-case hex>`. Nothing is stored: an id
//! in that shape is a session, anything else is unknown.

use hangar_core::mcp::LEGACY_REVISIONS;

use crate::random;

const PREFIX: &str = "hgr1-";
const RANDOM_HEX: usize = 32;

pub fn mint(version: &str) -> String {
    format!("{PREFIX}{version}-{}", random::hex(RANDOM_HEX / 2))
}

/// The negotiated version an id carries, if it is one of ours.
pub fn parse(id: &str) -> Option<&str> {
    let (version, hex) = id.strip_prefix(PREFIX)?.rsplit_once('-')?;
    let hex_ok = hex.len() == RANDOM_HEX && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex_ok && LEGACY_REVISIONS.contains(&version)).then_some(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_parse_back_to_their_version() {
        let id = mint("2025-06-18");
        assert!(id.starts_with("hgr1-2025-06-18-"));
        assert_eq!(id.len(), "hgr1-2025-06-18-".len() + 32);
        assert_eq!(parse(&id), Some("2025-06-18"));
        assert_ne!(mint("2025-06-18"), id);
    }

    #[test]
    fn foreign_ids_are_unknown() {
        for id in [
            "",
            "hgr1-",
            "abc",
            "hgr1-2025-06-18-0123",
            "hgr1-2025-06-18-0123456789ABCDEF0123456789abcdef",
            "hgr1-2030-01-01-0123456789abcdef0123456789abcdef",
            "hgr2-2025-06-18-0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(parse(id), None, "{id}");
        }
        assert_eq!(parse("hgr1-2024-11-05-0123456789abcdef0123456789abcdef"), Some("2024-11-05"));
    }
}
