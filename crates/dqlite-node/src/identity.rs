//! Who this node is: its id and address, kept in its data directory so
//! that a restart comes back as the same Raft member (libdqlite itself
//! does not remember them), and chosen only when the operator said how:
//! `--bootstrap` (node 1, the first of a new cluster) or `--join` (an id
//! from libdqlite's generator).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const FILE: &str = "piw-node";

/// A node's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub id: u64,
    pub address: String,
}

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The identity stored in `dir`, if any.
pub fn load(dir: &Path) -> Result<Option<Identity>, String> {
    let text = match fs::read_to_string(path(dir)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path(dir).display())),
    };
    parse(&text).map(Some).ok_or_else(|| {
        format!(
            "{}: not a node identity (expected id= and address= lines)",
            path(dir).display()
        )
    })
}

fn parse(text: &str) -> Option<Identity> {
    let mut id = None;
    let mut address = None;
    for line in text.lines() {
        match line.split_once('=') {
            Some(("id", v)) => id = v.trim().parse::<u64>().ok().filter(|&v| v != 0),
            Some(("address", v)) => address = Some(v.trim().to_owned()).filter(|a| !a.is_empty()),
            _ => {}
        }
    }
    Some(Identity {
        id: id?,
        address: address?,
    })
}

/// How a node without an identity was asked to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// `--bootstrap`: the first node of a new cluster.
    Bootstrap,
    /// `--join`: a new member of an existing cluster.
    Join,
    /// Neither: only a restart (an identity in the data directory) may start so.
    Restart,
}

/// This node's identity: the one `dir` holds (checked against `address`),
/// or a new one as `start` says (node 1 to bootstrap, `generate()` to join,
/// stored in `dir`, created if missing). Without an identity and without
/// `--bootstrap` or `--join`, a refusal that says which to pass: nothing
/// is created then.
pub fn choose(
    dir: &Path,
    address: &str,
    start: Start,
    generate: impl FnOnce() -> Result<u64, String>,
) -> Result<Identity, String> {
    if let Some(me) = load(dir)? {
        if me.address != address {
            return Err(format!(
                "{} is the data directory of node {} at {}: to restart that node, start it with \
                 --address {} (a node's address cannot change); a node at {address} needs a data \
                 directory of its own (two nodes never share one)",
                dir.display(),
                me.id,
                me.address,
                me.address
            ));
        }
        return Ok(me);
    }
    let id = match start {
        Start::Bootstrap => 1,
        Start::Join => generate()?,
        Start::Restart => {
            return Err(format!(
                "{} holds no node yet, and a new node needs to be told what to do: pass \
                 --bootstrap to form a new cluster with it as the first node (once, on one node \
                 only), or --join ADDR[,ADDR] to join the cluster those nodes belong to",
                dir.display()
            ))
        }
    };
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let me = Identity {
        id,
        address: address.to_owned(),
    };
    store(dir, &me)?;
    Ok(me)
}

/// Store `identity` in `dir` durably (written beside, synced, renamed, the
/// directory synced): a crash leaves the old file or the new one.
pub fn store(dir: &Path, identity: &Identity) -> Result<(), String> {
    let fail = |e: io::Error| format!("{}: {e}", path(dir).display());
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = File::create(&tmp).map_err(fail)?;
    write!(f, "id={}\naddress={}\n", identity.id, identity.address).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    fs::rename(&tmp, path(dir)).map_err(fail)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_identity_loads_back_and_garbage_is_refused() {
        let dir = std::env::temp_dir().join(format!("piw-node-identity-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(load(&dir).unwrap(), None);
        let me = Identity {
            id: 0x2dc1_7185_8c31_55be,
            address: "10.0.0.2:9001".into(),
        };
        store(&dir, &me).unwrap();
        assert_eq!(load(&dir).unwrap(), Some(me));
        fs::write(path(&dir), "id=0\naddress=x\n").unwrap();
        assert!(load(&dir).is_err(), "id 0 is not a node id");
        fs::write(path(&dir), "address=x\n").unwrap();
        assert!(load(&dir).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_node_starts_only_when_told_how_and_a_stored_one_restarts() {
        let dir = std::env::temp_dir().join(format!("piw-node-choose-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let never = || -> Result<u64, String> { panic!("no id to generate") };
        let e = choose(&dir, "a:1", Start::Restart, never).unwrap_err();
        assert!(e.contains("--bootstrap") && e.contains("--join"), "{e}");
        assert!(!dir.exists(), "a refused start creates nothing");
        let joiner = choose(&dir, "a:1", Start::Join, || Ok(77)).unwrap();
        assert_eq!(joiner.id, 77);
        // A restart needs no flag, and --bootstrap does not make it node 1.
        assert_eq!(choose(&dir, "a:1", Start::Restart, never).unwrap(), joiner);
        assert_eq!(
            choose(&dir, "a:1", Start::Bootstrap, never).unwrap(),
            joiner
        );
        let e = choose(&dir, "b:1", Start::Restart, never).unwrap_err();
        assert!(
            e.contains("start it with --address a:1")
                && e.contains("a node at b:1 needs a data directory of its own"),
            "{e}"
        );
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(choose(&dir, "a:1", Start::Bootstrap, never).unwrap().id, 1);
        fs::remove_dir_all(&dir).unwrap();
    }
}
