//! Whose socket is listening on a port: so an answer on a managed server's endpoint counts only
//! when it comes from that server's own processes (its whole subtree, however it regrouped
//! itself: a server that daemonizes listens in a descendant in a session of its own), never from
//! a leftover.
//!
//! Linux only (it reads `/proc`); elsewhere it cannot tell and says so with `None`.

use std::collections::{BTreeSet, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether every socket that could have accepted a connection to `addr` (a listener on that
/// address, or on the wildcard address of its port) belongs to one of the processes `pids`.
/// `None` when it cannot tell (no `/proc`, or nothing listening there).
pub fn held_by(addr: SocketAddr, pids: &BTreeSet<u32>) -> Option<bool> {
    let inodes = listening_inodes(addr)?;
    if inodes.is_empty() {
        return None;
    }
    let ours = socket_inodes_of(pids);
    Some(inodes.iter().all(|inode| ours.contains(inode)))
}

/// Inodes of the TCP sockets in LISTEN state that could accept a connection to `addr`.
fn listening_inodes(addr: SocketAddr) -> Option<HashSet<u64>> {
    let mut inodes = HashSet::new();
    let mut readable = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        readable = true;
        inodes.extend(text.lines().skip(1).filter_map(|line| listening_inode(line, addr)));
    }
    readable.then_some(inodes)
}

/// The inode of one `/proc/net/tcp{,6}` row if it is a listener that covers `addr`.
fn listening_inode(row: &str, addr: SocketAddr) -> Option<u64> {
    let fields: Vec<&str> = row.split_whitespace().collect();
    let (ip, port) = fields.get(1)?.split_once(':')?;
    // 0A is TCP_LISTEN.
    if *fields.get(3)? != "0A" || u16::from_str_radix(port, 16).ok()? != addr.port() {
        return None;
    }
    covers(parse_ip(ip)?, addr.ip()).then(|| fields.get(9)?.parse().ok()).flatten()
}

/// Whether a listener bound to `bound` accepts connections to `target`.
fn covers(bound: IpAddr, target: IpAddr) -> bool {
    let as_v4 = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    };
    bound == target
        || bound == IpAddr::V4(Ipv4Addr::UNSPECIFIED) && target.is_ipv4()
        // A dual-stack wildcard takes both families.
        || bound == IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        || as_v4(bound).is_some() && as_v4(bound) == as_v4(target)
}

/// An address as `/proc/net/tcp` prints it: 32-bit words in host byte order, in hex.
fn parse_ip(hex: &str) -> Option<IpAddr> {
    // Each word is the network-order bytes read as a host-order integer.
    let word = |i: usize| u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok().map(u32::to_ne_bytes);
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// Inodes of every socket open in one of the processes `pids`.
fn socket_inodes_of(pids: &BTreeSet<u32>) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for pid in pids {
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).ok().into_iter().flatten().flatten() {
            let target = std::fs::read_link(fd.path()).ok();
            let inode: Option<u64> = target
                .as_ref()
                .and_then(|t| t.to_str())
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse().ok());
            inodes.extend(inode);
        }
    }
    inodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_listening_row() {
        let row = "   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 100 0 0 10 0";
        let at = |addr: &str| addr.parse::<SocketAddr>().unwrap();
        assert_eq!(listening_inode(row, at("127.0.0.1:8080")), Some(123_456));
        assert_eq!(listening_inode(row, at("127.0.0.1:8081")), None);
        assert_eq!(listening_inode(row, at("[::1]:8080")), None, "127.0.0.1 does not take ::1");
        let established = row.replace(" 0A ", " 01 ");
        assert_eq!(listening_inode(&established, at("127.0.0.1:8080")), None);
        let wildcard = row.replace("0100007F:1F90", "00000000:1F90");
        assert_eq!(listening_inode(&wildcard, at("127.0.0.1:8080")), Some(123_456));
    }

    #[test]
    fn parses_both_families() {
        assert_eq!(parse_ip("0100007F"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(parse_ip("00000000000000000000000001000000"), Some("::1".parse().unwrap()));
        assert_eq!(parse_ip("xyz"), None);
    }

    #[test]
    fn tells_our_own_listener_from_a_strangers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let me = BTreeSet::from([std::process::id()]);
        assert_eq!(held_by(addr, &me), Some(true));
        assert_eq!(held_by(addr, &BTreeSet::from([std::process::id() + 1_000_000])), Some(false));
        drop(listener);
        assert_eq!(held_by(addr, &me), None, "nothing listens any more");
    }
}
