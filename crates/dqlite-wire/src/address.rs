//! Node addresses and `dqlite://` URLs, checked before any I/O.
//!
//! A malformed address is refused here, with what is wrong, so that it is
//! never retried and never reaches the system's name resolver: only a host
//! that is a syntactically valid DNS name is ever resolved (an IP literal
//! needs no resolver). Every resolution goes through [`resolve`], which
//! counts its calls per thread for the tests ([`resolver_calls`]) and waits
//! for the resolver no longer than the caller's deadline.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Instant;

use crate::error::{Error, ErrorKind, Outcome, Result};

const SCHEME: &str = "dqlite://";
const FORM: &str = "dqlite://host:port[,host:port...]/database";
/// Longest database name (a file name on the nodes).
const MAX_NAME: usize = 255;

/// The host of a node address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// A syntactically valid DNS name (RFC 1123 labels).
    Name(String),
}

/// A node's address, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddr {
    pub host: Host,
    pub port: u16,
}

/// Parse `host:port` (IPv4, `[IPv6]` or a DNS name). The error is the
/// reason, for a message that quotes the whole address.
pub fn parse_node(text: &str) -> std::result::Result<NodeAddr, String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (ip, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("\"{text}\" opens a '[' it does not close"))?;
        let ip: Ipv6Addr = ip
            .parse()
            .map_err(|_| format!("\"{ip}\" in brackets is not an IPv6 address"))?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| format!("\"{text}\" has no port (host:port)"))?;
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("\"{text}\" has no port (host:port)"))?;
        (parse_host(host)?, port)
    };
    Ok(NodeAddr {
        host,
        port: parse_port(text, port)?,
    })
}

fn parse_host(host: &str) -> std::result::Result<Host, String> {
    if host.is_empty() {
        return Err("the host before the ':' is empty".into());
    }
    if host.contains(':') {
        return Err(format!(
            "\"{host}\" is not a host name or IP address (an IPv6 address goes in brackets: [::1]:9001)"
        ));
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    let labels: Vec<&str> = name.split('.').collect();
    let label_ok = |l: &&str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let numeric_end = labels
        .last()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()));
    if name.len() > 253 || !labels.iter().all(label_ok) {
        return Err(format!(
            "\"{host}\" is not a host name or IP address (letters, digits and '-' between dots)"
        ));
    }
    if numeric_end {
        return Err(format!("\"{host}\" is not a valid IPv4 address"));
    }
    Ok(Host::Name(host.to_owned()))
}

fn parse_port(text: &str, port: &str) -> std::result::Result<u16, String> {
    if port.is_empty() {
        return Err(format!("\"{text}\" has no port after the ':'"));
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the port \"{port}\" of \"{text}\" is not a number"));
    }
    match port.parse::<u32>() {
        Ok(p @ 1..=65535) => Ok(p as u16),
        _ => Err(format!(
            "the port {port} of \"{text}\" is out of range (1 to 65535)"
        )),
    }
}

/// Whether `name` can name a database: letters, digits, `.`, `_`, `-`.
fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err(format!("no database name after the '/' ({FORM})"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "the database name \"{name}\" has an unsupported character {c:?} (letters, digits, '.', '_' and '-' only)"
        ));
    }
    if name == "." || name == ".." || name.len() > MAX_NAME {
        return Err(format!(
            "\"{name}\" cannot be a database name (1 to {MAX_NAME} characters, not . or ..)"
        ));
    }
    Ok(())
}

/// Parse `dqlite://host1:9001,host2:9001/database` into the node addresses
/// (as written) and the database name. Every address is checked.
pub fn parse_url(url: &str) -> Result<(Vec<String>, String)> {
    let bad = |reason: String| Error::bad_address(url, reason);
    let rest = url
        .strip_prefix(SCHEME)
        .ok_or_else(|| bad(format!("it does not start with {SCHEME}")))?;
    let Some((hosts, name)) = rest.split_once('/') else {
        return Err(bad(if rest.is_empty() {
            format!("no node addresses and no database name ({FORM})")
        } else {
            format!("no database name ({FORM})")
        }));
    };
    if hosts.trim().is_empty() {
        return Err(bad(format!(
            "no node addresses before the database name ({FORM})"
        )));
    }
    let mut addrs = Vec::new();
    for host in hosts.split(',').map(str::trim) {
        if host.is_empty() {
            return Err(bad("an empty address between commas".into()));
        }
        parse_node(host).map_err(&bad)?;
        addrs.push(host.to_owned());
    }
    check_name(name).map_err(bad)?;
    Ok((addrs, name.to_owned()))
}

thread_local! {
    static RESOLVER_CALLS: Cell<u64> = const { Cell::new(0) };
}

/// How many times this thread asked the system's resolver (tests only need
/// it: a malformed address must never get there).
pub fn resolver_calls() -> u64 {
    RESOLVER_CALLS.with(Cell::get)
}

/// The socket addresses of `text` (`host:port`): an IP literal directly, a
/// valid DNS name through the system's resolver, anything else refused
/// with [`ErrorKind::BadAddress`] before any lookup. The system's resolver
/// takes no timeout, so it runs on a thread of its own, waited for until
/// `deadline` ([`ErrorKind::Timeout`] then; the thread ends with the lookup).
pub fn resolve(text: &str, deadline: Instant) -> Result<Vec<SocketAddr>> {
    let node = parse_node(text).map_err(|reason| Error::bad_address(text, reason))?;
    let name = match node.host {
        Host::Ip(ip) => return Ok(vec![SocketAddr::new(ip, node.port)]),
        Host::Name(name) => name,
    };
    RESOLVER_CALLS.with(|c| c.set(c.get() + 1));
    let unresolved = |error| {
        Error::new(
            ErrorKind::Unresolved {
                address: text.to_owned(),
                error,
            },
            Outcome::NotApplied,
        )
    };
    let (tx, rx) = mpsc::channel();
    let port = node.port;
    std::thread::spawn(move || {
        let found = (name.as_str(), port).to_socket_addrs();
        let _ = tx.send(found.map(Iterator::collect::<Vec<SocketAddr>>));
    });
    let wait = deadline.saturating_duration_since(Instant::now());
    let found = match rx.recv_timeout(wait) {
        Ok(found) => found.map_err(unresolved)?,
        Err(_) => {
            let kind = ErrorKind::Timeout {
                op: "resolve",
                after: wait,
            };
            return Err(Error::new(kind, Outcome::NotApplied));
        }
    };
    if found.is_empty() {
        return Err(unresolved(std::io::Error::other("no address found")));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> String {
        match parse_url(url).unwrap_err().kind() {
            ErrorKind::BadAddress { reason, .. } => reason.clone(),
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn urls_parse_into_addresses_and_database() {
        let (a, d) =
            parse_url("dqlite://h1:9001, h2.example.com:9002,[::1]:7/pi-workflows").unwrap();
        assert_eq!(a, vec!["h1:9001", "h2.example.com:9002", "[::1]:7"]);
        assert_eq!(d, "pi-workflows");
        assert_eq!(
            parse_node("10.0.0.1:9001").unwrap(),
            NodeAddr {
                host: Host::Ip("10.0.0.1".parse().unwrap()),
                port: 9001
            }
        );
    }

    #[test]
    fn each_malformed_url_says_what_is_wrong() {
        for (url, says) in [
            ("sqlite://x:1/db", "does not start with dqlite://"),
            ("dqlite://", "no node addresses and no database name"),
            ("dqlite://h1:9001", "no database name"),
            ("dqlite://h1:9001/", "no database name after the '/'"),
            ("dqlite:///db", "no node addresses"),
            ("dqlite://h1/db", "\"h1\" has no port"),
            ("dqlite://h1:1/a/b", "unsupported character '/'"),
            ("dqlite://h1:1/a b", "unsupported character ' '"),
            ("dqlite://h1:1/a?x=1", "unsupported character '?'"),
            ("dqlite://h1:1/..", "cannot be a database name"),
            (
                "dqlite://127.0.0.1:99999/x",
                "port 99999 of \"127.0.0.1:99999\" is out of range",
            ),
            ("dqlite://127.0.0.1:0/x", "out of range"),
            ("dqlite://127.0.0.1:/x", "no port after the ':'"),
            (
                "dqlite://127.0.0.1:9x/x",
                "\"9x\" of \"127.0.0.1:9x\" is not a number",
            ),
            (
                "dqlite://127.0.0.1:1:2/x",
                "\"127.0.0.1:1\" is not a host name or IP address",
            ),
            ("dqlite://:9001/x", "host before the ':' is empty"),
            ("dqlite://a:1,,b:2/x", "empty address between commas"),
            ("dqlite://999.1.1.1:1/x", "not a valid IPv4 address"),
            ("dqlite://bad_host:1/x", "not a host name or IP address"),
            ("dqlite://-a.b:1/x", "not a host name or IP address"),
            ("dqlite://[::1:1/x", "does not close"),
            ("dqlite://[nope]:1/x", "not an IPv6 address"),
        ] {
            let r = reason(url);
            assert!(r.contains(says), "{url}: {r}");
        }
        // The message quotes the address.
        let e = parse_url("dqlite://127.0.0.1:/x").unwrap_err();
        assert!(e.to_string().contains("\"dqlite://127.0.0.1:/x\""), "{e}");
    }

    fn soon() -> Instant {
        Instant::now() + std::time::Duration::from_secs(5)
    }

    #[test]
    fn a_malformed_host_never_reaches_the_resolver() {
        let before = resolver_calls();
        for bad in ["127.0.0.1:1:2", "bad_host:1", "h:", "999.1.1.1:5", "x y:1"] {
            let e = resolve(bad, soon()).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::BadAddress { .. }),
                "{bad}: {e}"
            );
        }
        assert_eq!(resolve("127.0.0.1:9", soon()).unwrap().len(), 1);
        assert_eq!(resolver_calls(), before);
    }
}
