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
    parse(&std::env::var(DELAY_VAR).ok()?)
}

fn parse(micros: &str) -> Option<Duration> {
    let micros: u64 = micros.trim().parse().ok()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback: what it reads it writes back, until the end of its input.
    fn echo_server() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer) {
                    if n == 0 || stream.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        });
        address
    }

    #[test]
    fn bytes_arrive_whole_in_order_and_no_sooner_than_the_delay_each_way() {
        let delay = Duration::from_millis(30);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = listener.local_addr().unwrap();
        forward(listener, echo_server(), delay);
        let mut client = TcpStream::connect(proxy).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let sent: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let start = Instant::now();
        client.write_all(&sent[..1]).unwrap();
        let mut first = [0u8; 1];
        client.read_exact(&mut first).unwrap();
        assert!(start.elapsed() >= 2 * delay, "{:?}", start.elapsed());
        assert_eq!(first[0], sent[0]);
        // The rest, larger than a read: back whole and in order, then the end of the stream.
        let writer = {
            let mut client = client.try_clone().unwrap();
            let rest = sent[1..].to_vec();
            thread::spawn(move || {
                client.write_all(&rest).unwrap();
                client.shutdown(Shutdown::Write).unwrap();
            })
        };
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert_eq!(back, sent[1..]);
    }

    #[test]
    fn the_delay_is_asked_for_in_microseconds_and_zero_is_none() {
        assert_eq!(parse(" 250"), Some(Duration::from_micros(250)));
        assert_eq!(parse("0"), None);
        assert_eq!(parse("x"), None);
    }
}
