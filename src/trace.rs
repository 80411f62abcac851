//! Statement recording for the benchmark's floor (`npm run bench`, bench/floor).
//!
//! While recording is on, every connection the core opens gets an `sqlite3_trace_v2` hook that
//! writes each executed statement — its unexpanded SQL once, then its expanded SQL (bound values
//! as literals) at each run, and how many rows the caller stepped — to a trace file, together
//! with connection opens and closes and the labels the bench marks its timed operations with.
//! bench/floor replays that stream through rusqlite to time pure SQLite doing the same work.
//! Recording is off unless the bench switches it on; then no hook is installed at all.
//!
//! Trace lines (tab-separated, strings as JSON):
//! `O conn readOnly` · `C conn` · `T template-id "sql"` · `S conn template-id "expanded"` ·
//! `R statement-seq rows` · `M "label"`.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{ffi, Connection};

struct Recorder {
    out: BufWriter<File>,
    templates: HashMap<String, usize>,
    /// Statements being stepped (by handle): their sequence number and rows so far.
    running: HashMap<usize, (u64, u64)>,
    statements: u64,
    connections: u64,
}

static RECORDER: Mutex<Option<Recorder>> = Mutex::new(None);

fn recorder() -> MutexGuard<'static, Option<Recorder>> {
    RECORDER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts recording into `path` (truncated), or stops and flushes with `None`.
pub fn record_to(path: Option<&str>) -> std::io::Result<()> {
    let mut guard = recorder();
    if let Some(mut previous) = guard.take() {
        previous.out.flush()?;
    }
    if let Some(path) = path {
        *guard = Some(Recorder {
            out: BufWriter::with_capacity(1 << 20, File::create(path)?),
            templates: HashMap::new(),
            running: HashMap::new(),
            statements: 0,
            connections: 0,
        });
    }
    Ok(())
}

/// Marks the start of a timed operation (`""` ends timing until the next mark).
pub fn mark(label: &str) {
    if let Some(recorder) = recorder().as_mut() {
        let _ = writeln!(recorder.out, "M\t{}", json_string(label));
    }
}

/// Hooks a newly opened connection when recording is on; returns its number in the trace.
pub fn attach(conn: &Connection, read_only: bool) -> Option<u64> {
    let id = {
        let mut guard = recorder();
        let recorder = guard.as_mut()?;
        recorder.connections += 1;
        let id = recorder.connections;
        let _ = writeln!(recorder.out, "O\t{id}\t{}", u8::from(read_only));
        id
    };
    let mask =
        (ffi::SQLITE_TRACE_STMT | ffi::SQLITE_TRACE_ROW | ffi::SQLITE_TRACE_PROFILE) as c_uint;
    // SAFETY: the handle is the live connection's; the context is a plain integer, not a pointer.
    unsafe {
        ffi::sqlite3_trace_v2(
            conn.handle(),
            mask,
            Some(on_trace),
            id as usize as *mut c_void,
        );
    }
    Some(id)
}

/// Records that connection `id` closed.
pub fn detach(id: u64) {
    if let Some(recorder) = recorder().as_mut() {
        let _ = writeln!(recorder.out, "C\t{id}");
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.into()).to_string()
}

unsafe extern "C" fn on_trace(
    event: c_uint,
    context: *mut c_void,
    p: *mut c_void,
    x: *mut c_void,
) -> c_int {
    let mut guard = recorder();
    let Some(recorder) = guard.as_mut() else {
        return 0;
    };
    let statement = p as *mut ffi::sqlite3_stmt;
    match event {
        ffi::SQLITE_TRACE_STMT => {
            // Trigger subprograms are reported as `-- trigger` comments: part of their statement.
            if CStr::from_ptr(x as *const _).to_bytes().starts_with(b"--") {
                return 0;
            }
            recorder.finish(p as usize);
            let template = CStr::from_ptr(ffi::sqlite3_sql(statement)).to_string_lossy();
            let expanded_ptr = ffi::sqlite3_expanded_sql(statement);
            if expanded_ptr.is_null() {
                return 0;
            }
            let expanded = CStr::from_ptr(expanded_ptr).to_string_lossy().into_owned();
            ffi::sqlite3_free(expanded_ptr as *mut c_void);
            recorder.statement(context as usize as u64, &template, &expanded, p as usize);
        }
        ffi::SQLITE_TRACE_ROW => {
            if let Some((_, rows)) = recorder.running.get_mut(&(p as usize)) {
                *rows += 1;
            }
        }
        ffi::SQLITE_TRACE_PROFILE => recorder.finish(p as usize),
        _ => {}
    }
    0
}

impl Recorder {
    fn statement(&mut self, conn: u64, template: &str, expanded: &str, handle: usize) {
        let id = match self.templates.get(template) {
            Some(&id) => id,
            None => {
                let id = self.templates.len();
                self.templates.insert(template.to_owned(), id);
                let _ = writeln!(self.out, "T\t{id}\t{}", json_string(template));
                id
            }
        };
        let _ = writeln!(self.out, "S\t{conn}\t{id}\t{}", json_string(expanded));
        self.running.insert(handle, (self.statements, 0));
        self.statements += 1;
    }

    fn finish(&mut self, handle: usize) {
        if let Some((seq, rows)) = self.running.remove(&handle) {
            let _ = writeln!(self.out, "R\t{seq}\t{rows}");
        }
    }
}
