//! Who leads, as this node sees it: one log line each time that changes
//! (this node gained or lost leadership, another node leads now, no leader
//! is known). libdqlite 1.x has no callback for it, so a thread asks the
//! node itself (the Leader request, over loopback) a few times a second.

use std::thread;
use std::time::Duration;

use dqlite_wire::{Connection, Timeouts};

/// What a Leader request answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Not asked yet, or the node did not answer.
    Unknown,
    /// The node knows no leader (an election is under way).
    NoLeader,
    /// The leader's address.
    Leader(String),
}

/// The log line for a change from `before` to `now`, as seen by the node
/// at `me`; `None` when there is nothing new to say.
pub fn change(before: &Seen, now: &Seen, me: &str) -> Option<String> {
    let led = matches!(before, Seen::Leader(a) if a == me);
    match now {
        _ if now == before => None,
        Seen::Unknown => None,
        Seen::Leader(a) if a == me => Some(format!("leadership gained: this node ({me}) leads")),
        Seen::Leader(a) if led => Some(format!("leadership lost: the leader is now {a}")),
        Seen::Leader(a) => Some(format!("the leader is now {a}")),
        Seen::NoLeader if led => Some("leadership lost: no leader yet".into()),
        // Nothing to say before a first leader was seen.
        Seen::NoLeader if *before == Seen::Unknown => None,
        Seen::NoLeader => Some("no leader known: an election is under way".into()),
    }
}

/// Watch the node at `me` for as long as the process runs, calling `log`
/// with each change, asking every `every`.
pub fn watch(me: String, every: Duration, log: fn(&str)) {
    let timeouts = Timeouts {
        connect: Duration::from_secs(1),
        request: Duration::from_secs(2),
    };
    let spawned = thread::Builder::new()
        .name("leadership".into())
        .spawn(move || {
            let mut seen = Seen::Unknown;
            let mut conn: Option<Connection> = None;
            loop {
                if conn.as_ref().is_none_or(Connection::is_broken) {
                    conn = Connection::connect(&me, timeouts).ok();
                }
                let now = match conn.as_mut().map(Connection::leader) {
                    Some(Ok(Some(leader))) => Seen::Leader(leader.address),
                    Some(Ok(None)) => Seen::NoLeader,
                    // Not answering (stopping, or busy): say nothing, keep what was seen.
                    _ => seen.clone(),
                };
                if let Some(line) = change(&seen, &now, &me) {
                    log(&line);
                }
                seen = now;
                thread::sleep(every);
            }
        });
    if let Err(e) = spawned {
        log(&format!("leadership changes will not be logged: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "10.0.0.1:9001";

    fn leader(a: &str) -> Seen {
        Seen::Leader(a.into())
    }

    #[test]
    fn gained_and_lost_leadership_name_the_new_leader() {
        assert_eq!(
            change(&Seen::Unknown, &leader(ME), ME).as_deref(),
            Some("leadership gained: this node (10.0.0.1:9001) leads")
        );
        assert_eq!(
            change(&leader(ME), &leader("10.0.0.2:9001"), ME).as_deref(),
            Some("leadership lost: the leader is now 10.0.0.2:9001")
        );
        assert_eq!(
            change(&leader(ME), &Seen::NoLeader, ME).as_deref(),
            Some("leadership lost: no leader yet")
        );
        assert_eq!(
            change(&Seen::NoLeader, &leader("10.0.0.3:9001"), ME).as_deref(),
            Some("the leader is now 10.0.0.3:9001")
        );
    }

    #[test]
    fn nothing_is_logged_without_a_change() {
        assert_eq!(change(&leader(ME), &leader(ME), ME), None);
        assert_eq!(change(&Seen::Unknown, &Seen::NoLeader, ME), None);
        assert_eq!(change(&leader("b:1"), &Seen::Unknown, ME), None);
        assert!(change(&leader("b:1"), &Seen::NoLeader, ME).is_some());
    }
}
