//! Socket I/O that ends by a deadline.
//!
//! A socket timeout bounds each `read()` or `write()` call, not a message: a
//! peer that sends one byte before each timeout holds the caller for as long
//! as it likes. Here each call is given only what is left until the
//! deadline, so a whole frame (and every frame of a reply read against the
//! same deadline) is done or failed by then. While a read waits, an optional
//! [`Idle`] check runs at its interval and may end the wait with an error.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::error::Error;

/// Why an I/O ended early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The socket failed, or the deadline passed (`TimedOut`).
    Io(io::Error),
    /// The idle check gave up on the peer.
    Check(Error),
}

/// A check run every `every` while a read waits for bytes.
pub(crate) struct Idle<'a> {
    pub every: Duration,
    pub check: &'a mut dyn FnMut() -> Option<Error>,
}

/// The shortest timeout a socket takes (zero means "no timeout" to it).
const TICK: Duration = Duration::from_millis(1);

fn timed_out() -> io::Error {
    io::Error::from(io::ErrorKind::TimedOut)
}

/// What is left until `deadline`, or the error once it has passed.
fn left(deadline: Instant) -> io::Result<Duration> {
    let now = Instant::now();
    if now >= deadline {
        return Err(timed_out());
    }
    Ok((deadline - now).max(TICK))
}

/// TCP connect to `addr`, giving up after `timeout` or at `deadline`.
pub(crate) fn connect(
    addr: &SocketAddr,
    timeout: Duration,
    deadline: Instant,
) -> io::Result<TcpStream> {
    let wait = left(deadline)?.min(timeout);
    TcpStream::connect_timeout(addr, wait)
}

/// Write all of `buf` by `deadline`.
pub(crate) fn write_all(
    stream: &mut TcpStream,
    mut buf: &[u8],
    deadline: Instant,
) -> io::Result<()> {
    while !buf.is_empty() {
        stream.set_write_timeout(Some(left(deadline)?))?;
        match stream.write(buf) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => buf = &buf[n..],
            Err(e) if retryable(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fill `buf` by `deadline`, running `idle`'s check while no bytes come.
pub(crate) fn read_exact(
    stream: &mut TcpStream,
    mut buf: &mut [u8],
    deadline: Instant,
    mut idle: Option<Idle<'_>>,
) -> Result<(), Stop> {
    let mut check_at = idle.as_ref().map(|i| Instant::now() + i.every);
    while !buf.is_empty() {
        let mut wait = left(deadline).map_err(Stop::Io)?;
        if let (Some(at), Some(idle)) = (check_at, idle.as_mut()) {
            let now = Instant::now();
            if now >= at {
                if let Some(e) = (idle.check)() {
                    return Err(Stop::Check(e));
                }
                check_at = Some(Instant::now() + idle.every);
                continue;
            }
            wait = wait.min((at - now).max(TICK));
        }
        stream.set_read_timeout(Some(wait)).map_err(Stop::Io)?;
        match stream.read(buf) {
            Ok(0) => return Err(Stop::Io(io::Error::from(io::ErrorKind::UnexpectedEof))),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if retryable(&e) => {}
            Err(e) => return Err(Stop::Io(e)),
        }
    }
    Ok(())
}

/// A timeout of one call (the loop checks the deadline) or a signal.
fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn a_peer_dripping_bytes_cannot_outlast_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // One byte every 50 ms, for at most 2 s.
            for _ in 0..40 {
                if s.write_all(&[1]).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
        });
        let mut stream = TcpStream::connect(addr).unwrap();
        let mut buf = [0u8; 64];
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let err = read_exact(&mut stream, &mut buf, deadline, None).unwrap_err();
        assert!(
            matches!(err, Stop::Io(ref e) if e.kind() == io::ErrorKind::TimedOut),
            "{err:?}"
        );
        let took = started.elapsed();
        assert!(took < Duration::from_millis(450), "{took:?}");
        drop(stream);
        server.join().unwrap();
    }

    #[test]
    fn the_idle_check_runs_while_nothing_comes_and_can_end_the_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            thread::sleep(Duration::from_millis(500));
            drop(s);
        });
        let mut stream = TcpStream::connect(addr).unwrap();
        let mut buf = [0u8; 8];
        let mut checks = 0;
        let mut check = || {
            checks += 1;
            (checks == 3).then(|| Error::protocol("given up"))
        };
        let idle = Idle {
            every: Duration::from_millis(20),
            check: &mut check,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let err = read_exact(&mut stream, &mut buf, deadline, Some(idle)).unwrap_err();
        assert!(matches!(err, Stop::Check(_)), "{err:?}");
        assert_eq!(checks, 3);
        drop(stream);
        server.join().unwrap();
    }
}
