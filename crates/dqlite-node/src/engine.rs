//! The libdqlite engine: one node, created, started and stopped through the
//! library's C API (`dqlite.h`, dqlite 1.x). Everything unsafe is here.

use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::path::Path;
use std::ptr;

#[repr(C)]
struct RawNode {
    _private: [u8; 0],
}

#[link(name = "dqlite")]
extern "C" {
    fn dqlite_node_create(
        id: u64,
        address: *const c_char,
        data_dir: *const c_char,
        node: *mut *mut RawNode,
    ) -> c_int;
    fn dqlite_node_destroy(node: *mut RawNode);
    fn dqlite_node_set_bind_address(node: *mut RawNode, address: *const c_char) -> c_int;
    fn dqlite_node_set_network_latency_ms(node: *mut RawNode, ms: c_uint) -> c_int;
    fn dqlite_node_set_snapshot_params(
        node: *mut RawNode,
        threshold: c_uint,
        trailing: c_uint,
    ) -> c_int;
    fn dqlite_node_start(node: *mut RawNode) -> c_int;
    fn dqlite_node_stop(node: *mut RawNode) -> c_int;
    fn dqlite_node_errmsg(node: *mut RawNode) -> *const c_char;
    fn dqlite_generate_node_id(address: *const c_char) -> u64;
    fn dqlite_version_number() -> c_int;
}

/// The id a new node that joins an existing cluster takes (the library's
/// own generator: random, never 1).
pub fn generate_id(address: &str) -> Result<u64, String> {
    let address = c_string("address", address)?;
    // SAFETY: a valid NUL-terminated string, not kept by the library.
    Ok(unsafe { dqlite_generate_node_id(address.as_ptr()) })
}

/// The linked library's version, as `major.minor.release`.
pub fn version() -> String {
    // SAFETY: no arguments, no state.
    let n = unsafe { dqlite_version_number() };
    format!("{}.{}.{}", n / 10_000, n / 100 % 100, n % 100)
}

/// Settings fixed before the node starts.
#[derive(Debug, Clone)]
pub struct Settings {
    pub id: u64,
    /// The address other nodes and clients use.
    pub address: String,
    /// The address to listen on, when it differs from `address`.
    pub bind: Option<String>,
    pub data_dir: std::path::PathBuf,
    /// Average one-way latency; Raft's heartbeat and election timeouts
    /// scale with it.
    pub latency_ms: Option<u32>,
    /// Raft snapshots: taken every `threshold` log entries, `trailing`
    /// entries kept after each (libdqlite checks `trailing >= threshold`
    /// and `trailing >= 4`).
    pub snapshot: Option<Snapshots>,
}

/// When Raft snapshots the database, and how much log it keeps after one.
#[derive(Debug, Clone, Copy)]
pub struct Snapshots {
    pub threshold: u32,
    pub trailing: u32,
}

/// A created node; started by [`Engine::start`], stopped and destroyed on
/// [`Engine::stop`] or drop.
#[derive(Debug)]
pub struct Engine {
    raw: *mut RawNode,
    started: bool,
}

impl Engine {
    pub fn create(settings: &Settings) -> Result<Engine, String> {
        let address = c_string("address", &settings.address)?;
        let dir = path_c_string(&settings.data_dir)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid strings (copied by the library) and an out pointer.
        let rc =
            unsafe { dqlite_node_create(settings.id, address.as_ptr(), dir.as_ptr(), &mut raw) };
        // The library allocates the node even when it fails, so that its
        // message can be read; the Engine owns it either way.
        let engine = Engine {
            raw,
            started: false,
        };
        if rc != 0 {
            return Err(engine.failure("create", rc));
        }
        let bind = c_string(
            "bind address",
            settings.bind.as_deref().unwrap_or(&settings.address),
        )?;
        // SAFETY: a live node that has not started, and a copied string.
        let rc = unsafe { dqlite_node_set_bind_address(engine.raw, bind.as_ptr()) };
        if rc != 0 {
            return Err(engine.failure("set the bind address", rc));
        }
        if let Some(ms) = settings.latency_ms {
            // SAFETY: as above.
            let rc = unsafe { dqlite_node_set_network_latency_ms(engine.raw, ms) };
            if rc != 0 {
                return Err(engine.failure("set the network latency", rc));
            }
        }
        if let Some(snapshots) = settings.snapshot {
            // SAFETY: as above.
            let rc = unsafe {
                dqlite_node_set_snapshot_params(engine.raw, snapshots.threshold, snapshots.trailing)
            };
            if rc != 0 {
                return Err(engine.failure("set the snapshot parameters", rc));
            }
        }
        Ok(engine)
    }

    /// Start the node's thread: it listens, and a new first node
    /// bootstraps a cluster of itself.
    pub fn start(&mut self) -> Result<(), String> {
        // SAFETY: a live, configured node.
        let rc = unsafe { dqlite_node_start(self.raw) };
        if rc != 0 {
            return Err(self.failure("start", rc));
        }
        self.started = true;
        Ok(())
    }

    /// Stop serving (in-flight requests finish) and free the node.
    pub fn stop(mut self) -> Result<(), String> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), String> {
        let mut result = Ok(());
        if self.started {
            self.started = false;
            // SAFETY: a started node, stopped once.
            let rc = unsafe { dqlite_node_stop(self.raw) };
            if rc != 0 {
                result = Err(self.failure("stop", rc));
            }
        }
        if !self.raw.is_null() {
            // SAFETY: the node is not running; destroyed once.
            unsafe { dqlite_node_destroy(self.raw) };
            self.raw = ptr::null_mut();
        }
        result
    }

    fn failure(&self, what: &str, rc: c_int) -> String {
        let message = if self.raw.is_null() {
            None
        } else {
            // SAFETY: the library returns a NUL-terminated message owned by
            // the node, valid until the next call on it.
            let p = unsafe { dqlite_node_errmsg(self.raw) };
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        match message.filter(|m| !m.is_empty()) {
            Some(m) => format!("dqlite could not {what} the node: {m} (code {rc})"),
            None => format!("dqlite could not {what} the node (code {rc})"),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

fn c_string(what: &str, s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("the {what} contains a NUL byte"))
}

fn path_c_string(path: &Path) -> Result<CString, String> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("the data directory {} contains a NUL byte", path.display()))
}
