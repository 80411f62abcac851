//! A network between the test cluster's nodes and its clients, for benches: every byte sent to a
//! node's address, and every byte it sends back, arrives a fixed time later (a one-way delay),
//! in order. Each node then listens on a hidden port (`--bind`) and keeps its address in the
//! cluster; a proxy on that address forwards both ways with the delay. So a client's round trip
//! to the leader and the leader's to its followers both cost twice the delay, as between hosts.
//!
//! Std only: per connection, each direction is a reader that stamps what it reads with its due
//! time and a writer that sends it then. Connections end when either side closes; the proxy's
//! listener lives as long as the process.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The variable that asks for the delay, in µs one way (`PIW_DQLITE_DELAY_US=250`: a 0.5 ms
/// round trip). Unset or 0: the nodes listen on their addresses themselves.
pub const DELAY_VAR: &str = "PIW_DQLITE_DELAY_US";

/// The one-way delay [`DELAY_VAR`] asks for, if any.
pub fn from_env() -> Option<Duration> {
    let micros: u64 = std::env::var(DELAY_VAR).ok()?.trim().parse().ok()?;
    (micros > 0).then_some(Duration::from_micros(micros))
}

/// Forwards connections to `listener` to `target`, each byte `delay` later, on threads of its
/// own, for the rest of the process.
pub fn forward(listener: TcpListener, target: String, delay: Duration) {
    thread::spawn(move || {
        for incoming in listener.incoming() {
            let Ok(client) = incoming else { continue };
            let Ok(node) = TcpStream::connect(&target) else {
                // The node is down (killed, restarting): the client sees a closed connection.
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = node.set_nodelay(true);
            if let (Ok(client_read), Ok(node_read)) = (client.try_clone(), node.try_clone()) {
                pump(client_read, node, delay);
                pump(node_read, client, delay);
            }
        }
    });
}

/// Copies `from` to `to`, each chunk `delay` after it was read; shuts `to` down for writing at
/// the end of `from`.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (send, receive) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let read = from.read(&mut buffer);
            // Acknowledge at once, as a host across a network would have by the time the
            // delay passed: a node's Nagle would otherwise hold its next write for the
            // delayed acknowledgement (40 ms) of this loopback hop.
            acknowledge_at_once(&from);
            match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if send
                        .send((Instant::now() + delay, buffer[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    thread::spawn(move || {
        for (due, bytes) in receive {
            let wait = due.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                thread::sleep(wait);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

fn acknowledge_at_once(stream: &TcpStream) {
    #[cfg(target_os = "linux")]
    {
        use std::os::linux::net::TcpStreamExt;
        let _ = stream.set_quickack(true);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}
