//! A `piw-dqlite-node` the test starts itself, outside the harness's
//! cluster: a free 127.0.0.1 port, a data directory (not created) and a log
//! file under the temporary directory; SIGKILLed and removed on drop. Every
//! wait is bounded.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

pub struct Lone {
    pub address: String,
    pub dir: PathBuf,
    pub log_path: PathBuf,
    root: PathBuf,
    child: Option<Child>,
}

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", listener.local_addr().unwrap().port())
}

impl Lone {
    /// A node at a free address.
    pub fn new(tag: &str) -> Lone {
        Lone::at(&free_address(), tag)
    }

    /// A node at `address`, with a data directory of its own.
    pub fn at(address: &str, tag: &str) -> Lone {
        let stamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let root =
            std::env::temp_dir().join(format!("piw-node-{tag}-{}-{stamp}", std::process::id()));
        fs::create_dir_all(&root).unwrap();
        Lone {
            address: address.to_owned(),
            dir: root.join("data"),
            log_path: root.join("node.log"),
            root,
            child: None,
        }
    }

    /// Start it with `--address` and `--dir` and `args`, its stderr
    /// appended to its log.
    pub fn start(&mut self, args: &[&str]) {
        assert!(self.child.is_none(), "already running");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_piw-dqlite-node"))
            .args(["--address", &self.address, "--dir"])
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Its exit code, once it exits by itself within `timeout` (`None`
    /// when it did not: it is then killed).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let mut child = self.child.take()?;
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// SIGTERM, then [`Lone::wait_exit`].
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        let pid = self.child.as_ref()?.id();
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        self.wait_exit(timeout)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for Lone {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Whether the log at `path` shows `line` within `timeout`.
pub fn log_shows(path: &Path, line: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if fs::read_to_string(path).is_ok_and(|log| log.contains(line)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}
