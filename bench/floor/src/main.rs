//! The benchmark floor: replays a statement trace recorded by the addon (one workload of
//! bench/bench.js) through rusqlite — the same statements with the same values, in the same
//! transactions, on a fresh copy of the same starting database — and reports, per label the
//! bench marked, how long pure SQLite took. Statements are prepared once (`prepare_cached`),
//! values are bound directly, and every column of every row the addon stepped is read.
//!
//! `piw-floor --trace FILE --db PATH [--seed FILE] [--repetitions N] [--profile]`
//! prints `{"labels": {label: {"micros": median total, "segments": n}}, "errors": n}`.

mod trace;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use trace::{Op, Statement, Trace};

/// As the addon opens its connections (src/state/mod.rs).
const BUSY_TIMEOUT: Duration = Duration::from_millis(5_000);
const STATEMENT_CACHE_CAPACITY: usize = 256;

struct Options {
    trace: PathBuf,
    db: PathBuf,
    seed: Option<PathBuf>,
    repetitions: usize,
    profile: bool,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut trace = None;
    let mut db = None;
    let mut seed = None;
    let mut repetitions = 5;
    let mut profile = false;
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--trace" => trace = Some(PathBuf::from(value()?)),
            "--db" => db = Some(PathBuf::from(value()?)),
            "--seed" => seed = Some(PathBuf::from(value()?)),
            "--repetitions" => repetitions = value()?.parse().map_err(|_| "bad --repetitions")?,
            "--profile" => profile = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Options {
        trace: trace.ok_or("--trace is required")?,
        db: db.ok_or("--db is required")?,
        seed,
        repetitions: repetitions.max(1),
        profile,
    })
}

/// Time per label over one replay.
#[derive(Default)]
struct Replay {
    labels: HashMap<String, (Duration, usize)>,
    statements: HashMap<usize, (Duration, usize)>,
    errors: usize,
}

fn remove_database(db: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = db.to_path_buf().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(path));
    }
}

fn fresh_database(options: &Options) -> Result<(), String> {
    remove_database(&options.db);
    if let Some(seed) = &options.seed {
        std::fs::copy(seed, &options.db).map_err(|e| format!("copy seed: {e}"))?;
    }
    Ok(())
}

fn open(db: &Path, read_only: bool) -> rusqlite::Result<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(db, flags)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

fn execute(conn: &Connection, sql: &str, statement: &Statement) -> rusqlite::Result<()> {
    let mut prepared = conn.prepare_cached(sql)?;
    for (index, value) in &statement.params {
        prepared.raw_bind_parameter(*index, value)?;
    }
    let columns = prepared.column_count();
    let mut rows = prepared.raw_query();
    let mut stepped = 0;
    while let Some(row) = rows.next()? {
        for column in 0..columns {
            std::hint::black_box(row.get_ref(column)?);
        }
        stepped += 1;
        if stepped >= statement.rows {
            break;
        }
    }
    Ok(())
}

fn replay(trace: &Trace, options: &Options) -> Result<Replay, String> {
    fresh_database(options)?;
    let mut result = Replay::default();
    let mut connections: HashMap<u64, Connection> = HashMap::new();
    let mut label: Option<&str> = None;
    let mut started = Instant::now();
    for op in &trace.ops {
        match op {
            Op::Mark(next) => {
                let now = Instant::now();
                if let Some(label) = label {
                    let entry = result.labels.entry(label.to_owned()).or_default();
                    entry.0 += now - started;
                }
                label = (!next.is_empty()).then_some(next.as_str());
                if let Some(label) = label {
                    result.labels.entry(label.to_owned()).or_default().1 += 1;
                }
                started = Instant::now();
            }
            Op::Open { conn, read_only } => {
                let connection = open(&options.db, *read_only).map_err(|e| format!("open: {e}"))?;
                connections.insert(*conn, connection);
            }
            Op::Close { conn } => {
                connections.remove(conn);
            }
            Op::Statement(statement) => {
                let Some(conn) = connections.get(&statement.conn) else {
                    result.errors += 1;
                    continue;
                };
                let sql = &trace.templates[statement.template];
                let begun = options.profile.then(Instant::now);
                if execute(conn, sql, statement).is_err() {
                    result.errors += 1;
                }
                if let Some(begun) = begun {
                    let entry = result.statements.entry(statement.template).or_default();
                    entry.0 += begun.elapsed();
                    entry.1 += 1;
                }
            }
        }
    }
    if let Some(label) = label {
        result.labels.entry(label.to_owned()).or_default().0 += started.elapsed();
    }
    drop(connections);
    Ok(result)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    if let Err(error) = run() {
        eprintln!("piw-floor: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let options = options()?;
    let text = std::fs::read_to_string(&options.trace).map_err(|e| format!("read trace: {e}"))?;
    let trace = trace::parse(&text)?;
    let replays = (0..options.repetitions)
        .map(|_| replay(&trace, &options))
        .collect::<Result<Vec<_>, _>>()?;
    remove_database(&options.db);
    let mut labels = serde_json::Map::new();
    for (label, (_, segments)) in &replays[0].labels {
        let micros = median(
            replays
                .iter()
                .map(|replay| {
                    replay
                        .labels
                        .get(label)
                        .map_or(0.0, |entry| entry.0.as_secs_f64() * 1e6)
                })
                .collect(),
        );
        labels.insert(
            label.clone(),
            serde_json::json!({ "micros": micros, "segments": segments }),
        );
    }
    let output = serde_json::json!({ "labels": labels, "errors": replays[0].errors });
    println!("{output}");
    if options.profile {
        print_profile(&trace, &replays[0]);
    }
    Ok(())
}

/// The statements by total time (first replay), on stderr.
fn print_profile(trace: &Trace, replay: &Replay) {
    let mut entries: Vec<_> = replay.statements.iter().collect();
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.1 .0));
    for (template, (total, count)) in entries.into_iter().take(40) {
        let sql: String = trace.templates[*template]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        eprintln!(
            "{:>10.0} µs {:>7} × {:>8.2} µs  {}",
            total.as_secs_f64() * 1e6,
            count,
            total.as_secs_f64() * 1e6 / *count as f64,
            &sql[..sql.len().min(150)]
        );
    }
}
