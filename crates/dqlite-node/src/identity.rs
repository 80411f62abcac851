//! Who this node is: its id and address, kept in its data directory so
//! that a restart comes back as the same Raft member (libdqlite itself
//! does not remember them).

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
}
