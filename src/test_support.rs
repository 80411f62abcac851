//! What the crate's own tests share: scratch folders, opening a state file as the JS layer
//! would, and a row-for-row dump of a database.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::state::{Mode, OpenOptions, StateDb};

/// A scratch folder of its own (process, thread and time in the name), removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty folder under the system temp folder.
    pub fn new(label: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "piw-{label}-{}-{:?}-{nanos}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        Scratch(dir)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `name` inside the folder.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens `file` read-write at `now`, making its folder first as the JS layer does
/// (lib/state-database.js) before the core opens the file.
pub fn open_read_write(file: &Path, now: i64) -> StateDb {
    if let Some(folder) = file.parent() {
        std::fs::create_dir_all(folder).expect("state folder");
    }
    StateDb::open(OpenOptions {
        file_path: file.to_path_buf(),
        mode: Mode::ReadWrite,
        now,
    })
    .expect("open")
}

/// Every table `keep` accepts, row for row in rowid order, one line per row.
pub fn dump_tables(conn: &Connection, keep: impl Fn(&str) -> bool) -> rusqlite::Result<String> {
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = String::new();
    for table in tables.iter().filter(|table| keep(table)) {
        let mut statement = conn.prepare(&format!("SELECT * FROM \"{table}\" ORDER BY rowid"))?;
        let columns = statement.column_count();
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            out.push_str(table);
            for index in 0..columns {
                out.push_str(&format!("|{:?}", row.get_ref(index)?));
            }
            out.push('\n');
        }
    }
    Ok(out)
}

thread_local! {
    static VM_STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The SQLite virtual-machine instructions `work` runs on `conn`: a count of work that does
/// not depend on the machine, for tests that bound how much a call reads.
pub fn vm_steps<T>(conn: &Connection, work: impl FnOnce() -> T) -> (T, u64) {
    extern "C" fn count_step(_: *mut std::ffi::c_void) -> std::ffi::c_int {
        VM_STEPS.with(|steps| steps.set(steps.get() + 1));
        0
    }
    VM_STEPS.with(|steps| steps.set(0));
    // SAFETY: the handle is live while `conn` is; the callback takes no data.
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(
            conn.handle(),
            1,
            Some(count_step),
            std::ptr::null_mut(),
        );
    }
    let outcome = work();
    // SAFETY: as above; removes the handler.
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(conn.handle(), 0, None, std::ptr::null_mut());
    }
    (outcome, VM_STEPS.with(|steps| steps.get()))
}
