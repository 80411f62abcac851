//! The holder kinds' suite of [`super`] (`leases.rs`).

use super::lease_columns;
use super::{
    insert_attributed_event, insert_lease, release, renew, require_lease, stored_expires_at,
    stored_owner_id, take, Actor, Fence, Holder, HolderKind, Lease, CONTROLLER_TAKEABLE,
};
use crate::error::StoreError;
use crate::js::token_hash;
use crate::js::{Js, Param};
use crate::sql::{Db, OptionalExtension};
use crate::state::schema::STATE_SCHEMA_SQL;

/// A holder kind under test: how it is built, the owner type it stores, the fence its
/// domain releases it by, and whether its take refuses a lease another holder has live.
struct Kind {
    name: &'static str,
    kind: fn() -> HolderKind<'static>,
    owner_type: &'static str,
    fence: Fence,
    take_refuses_live: bool,
}

const HOLDERS: &[Kind] = &[
    Kind {
        name: "session runner",
        kind: || HolderKind::Runner(Param::text("session")),
        owner_type: "session",
        fence: Fence::LiveToken,
        take_refuses_live: false,
    },
    Kind {
        name: "host runner (verified release)",
        kind: || HolderKind::Runner(Param::text("host")),
        owner_type: "host",
        fence: Fence::Token,
        take_refuses_live: false,
    },
    Kind {
        name: "controller",
        kind: || HolderKind::Controller,
        owner_type: "controller",
        fence: Fence::Owner,
        take_refuses_live: true,
    },
    Kind {
        name: "system",
        kind: || HolderKind::System,
        owner_type: "system",
        fence: Fence::LiveSystemOwner,
        take_refuses_live: true,
    },
];

const RESOURCE: &str = "resource-1";
const NOW: i64 = 1_000;
const EXPIRES: i64 = 31_000;

fn database() -> Db {
    let conn = Db::File(rusqlite::Connection::open_in_memory().unwrap());
    conn.execute_batch(STATE_SCHEMA_SQL).unwrap();
    conn.execute(
        "INSERT INTO resources(resource_id, resource_type, aggregate_key, created_at, updated_at)
         VALUES (?, 'run', 'key', 0, 0)",
        [RESOURCE],
    )
    .unwrap();
    insert_lease(&conn, RESOURCE).unwrap();
    conn
}

fn holder<'a>(kind: &Kind, owner: &'a str, hash: &'a [u8]) -> Holder<'a> {
    Holder {
        kind: (kind.kind)(),
        owner_id: Param::text(owner),
        token_hash: hash,
    }
}

fn lease(conn: &Db) -> Lease {
    require_lease(conn, RESOURCE).unwrap()
}

/// `holder` takes the fresh lease at generation 1 until [`EXPIRES`].
fn taken<'a>(conn: &Db, kind: &Kind, owner: &'a str, hash: &'a [u8]) -> Holder<'a> {
    let holder = holder(kind, owner, hash);
    let took = take(conn, RESOURCE, &holder, 0, Param::int(EXPIRES), NOW).unwrap();
    assert!(took, "{}: take of a free lease", kind.name);
    holder
}

#[test]
fn a_joined_read_finds_what_a_controller_take_can_take() {
    let sql = format!(
        "SELECT {} FROM resources r LEFT JOIN leases l ON l.resource_id = r.resource_id
         WHERE r.resource_id = ? AND {CONTROLLER_TAKEABLE}",
        lease_columns!()
    );
    let takeable = |conn: &Db, now: i64| -> Option<Option<Lease>> {
        conn.prepare(&sql)
            .unwrap()
            .query_row(crate::sql::params![RESOURCE, now], |row| {
                Lease::from_columns(row, 0)
            })
            .optional()
            .unwrap()
    };
    for kind in HOLDERS {
        let conn = database();
        assert_eq!(
            takeable(&conn, NOW),
            Some(Some(lease(&conn))),
            "{}",
            kind.name
        );
        let hash = token_hash("token-a");
        taken(&conn, kind, "owner-a", &hash);
        for now in [NOW, EXPIRES] {
            let found = takeable(&conn, now);
            assert_eq!(
                lease(&conn).is_unexpired(now),
                now < EXPIRES,
                "{}",
                kind.name
            );
            let controller_hash = token_hash("token-c");
            let controller = holder(&HOLDERS[2], "owner-c", &controller_hash);
            let took = take(&conn, RESOURCE, &controller, 1, Param::int(now + 1), now);
            assert_eq!(found.is_some(), took.unwrap(), "{} at {now}", kind.name);
        }
    }
    let conn = database();
    conn.execute("DELETE FROM leases", []).unwrap();
    let unleased = conn
        .query_row(
            &format!(
                "SELECT {} FROM resources r LEFT JOIN leases l ON l.resource_id = r.resource_id",
                lease_columns!()
            ),
            [],
            |row| Lease::from_columns(row, 0),
        )
        .unwrap();
    assert_eq!(unleased, None);
}

#[test]
fn a_new_resource_has_an_unowned_generation_zero_lease() {
    let conn = database();
    let fresh = lease(&conn);
    assert_eq!(fresh.generation, 0);
    assert_eq!(fresh.owner_id, None);
    assert_eq!(fresh.event_generation(), None);
    assert!(!fresh.is_live(NOW));
    let missing = require_lease(&conn, "resource-2").unwrap_err();
    assert!(
        matches!(&missing, StoreError::Plain(message) if message == "Lease is missing: resource-2"),
        "{missing}"
    );
}

#[test]
fn a_take_moves_the_generation_on_and_stores_the_holder() {
    for kind in HOLDERS {
        let conn = database();
        let hash = token_hash("token-a");
        taken(&conn, kind, "owner-a", &hash);
        let held = lease(&conn);
        assert_eq!(held.generation, 1, "{}", kind.name);
        assert_eq!(
            held.owner_type.as_deref(),
            Some(kind.owner_type),
            "{}",
            kind.name
        );
        assert_eq!(held.owner_id.as_deref(), Some("owner-a"), "{}", kind.name);
        assert!(held.token_matches(&hash), "{}", kind.name);
        assert_eq!(held.expires_at, Some(EXPIRES), "{}", kind.name);
        assert!(held.is_live(NOW) && !held.is_live(EXPIRES), "{}", kind.name);
        let owner = stored_owner_id(&conn, RESOURCE).unwrap();
        assert_eq!(owner.as_deref(), Some(&b"owner-a"[..]), "{}", kind.name);
        assert_eq!(stored_expires_at(&conn, RESOURCE).unwrap(), Some(EXPIRES));
    }
}

#[test]
fn a_take_is_fenced_by_the_generation_it_read() {
    for kind in HOLDERS {
        let conn = database();
        let hash = token_hash("token-a");
        taken(&conn, kind, "owner-a", &hash);
        let other_hash = token_hash("token-b");
        let other = holder(kind, "owner-b", &other_hash);
        let late = EXPIRES + 1;
        // Even once the lease expired, a take from the generation before it fails.
        assert!(!take(&conn, RESOURCE, &other, 0, Param::int(late + 1), late).unwrap());
        assert_eq!(
            lease(&conn).owner_id.as_deref(),
            Some("owner-a"),
            "{}",
            kind.name
        );
        assert!(take(&conn, RESOURCE, &other, 1, Param::int(late + 1), late).unwrap());
        assert_eq!(lease(&conn).generation, 2, "{}", kind.name);
        assert_eq!(
            lease(&conn).owner_id.as_deref(),
            Some("owner-b"),
            "{}",
            kind.name
        );
    }
}

#[test]
fn a_live_lease_is_refused_to_the_kinds_that_judge_expiry_in_sql() {
    for kind in HOLDERS {
        let conn = database();
        let hash = token_hash("token-a");
        taken(&conn, kind, "owner-a", &hash);
        let other_hash = token_hash("token-b");
        let other = holder(kind, "owner-b", &other_hash);
        let took = take(&conn, RESOURCE, &other, 1, Param::int(EXPIRES), NOW).unwrap();
        // A runner's take is fenced by generation alone: the run claim judges the holder.
        assert_eq!(took, !kind.take_refuses_live, "{}", kind.name);
    }
}

#[test]
fn a_renewal_needs_the_holder_token_and_generation_unexpired() {
    for kind in HOLDERS {
        let conn = database();
        let hash = token_hash("token-a");
        let holder = taken(&conn, kind, "owner-a", &hash);
        let wrong_hash = token_hash("token-b");
        let wrong_token = Holder {
            token_hash: &wrong_hash,
            ..holder.clone()
        };
        let wrong_owner = Holder {
            owner_id: Param::text("owner-b"),
            ..holder.clone()
        };
        let renew_at = |holder: &Holder<'_>, generation: i64, now: i64| {
            renew(
                &conn,
                RESOURCE,
                holder,
                Param::int(generation),
                Param::int(now + 5),
                now,
            )
            .unwrap()
        };
        assert!(!renew_at(&wrong_token, 1, NOW), "{}: token", kind.name);
        assert!(!renew_at(&wrong_owner, 1, NOW), "{}: owner", kind.name);
        assert!(!renew_at(&holder, 2, NOW), "{}: generation", kind.name);
        assert!(!renew_at(&holder, 1, EXPIRES), "{}: expired", kind.name);
        assert_eq!(lease(&conn).expires_at, Some(EXPIRES), "{}", kind.name);
        assert!(renew_at(&holder, 1, EXPIRES - 1), "{}", kind.name);
        assert_eq!(lease(&conn).expires_at, Some(EXPIRES + 4), "{}", kind.name);
        assert_eq!(lease(&conn).generation, 1, "{}", kind.name);
    }
}

#[test]
fn a_release_is_fenced_and_keeps_the_generation() {
    for kind in HOLDERS {
        let conn = database();
        let hash = token_hash("token-a");
        let holder = taken(&conn, kind, "owner-a", &hash);
        let wrong_hash = token_hash("token-b");
        let wrong_token = Holder {
            token_hash: &wrong_hash,
            ..holder.clone()
        };
        let release_at = |holder: &Holder<'_>, generation: i64, now: i64| {
            release(
                &conn,
                RESOURCE,
                holder,
                Param::int(generation),
                kind.fence,
                now,
            )
            .unwrap()
        };
        assert!(!release_at(&wrong_token, 1, NOW), "{}: token", kind.name);
        assert!(!release_at(&holder, 2, NOW), "{}: generation", kind.name);
        let live_fence = matches!(kind.fence, Fence::LiveToken | Fence::LiveSystemOwner);
        assert_eq!(
            release_at(&holder, 1, EXPIRES),
            !live_fence,
            "{}: expired",
            kind.name
        );
        if live_fence {
            assert!(release_at(&holder, 1, NOW), "{}", kind.name);
        }
        let released = lease(&conn);
        assert_eq!(released.generation, 1, "{}", kind.name);
        assert_eq!(released.owner_type, None, "{}", kind.name);
        assert_eq!(released.owner_id, None, "{}", kind.name);
        assert_eq!(released.token_hash, None, "{}", kind.name);
        assert_eq!(released.expires_at, None, "{}", kind.name);
        assert!(!released.is_live(NOW), "{}", kind.name);
    }
}

#[test]
fn only_the_system_holder_is_released_by_owner_and_expiry() {
    let conn = database();
    let hash = token_hash("token-a");
    let controller = taken(&conn, &HOLDERS[2], "owner-a", &hash);
    let refused = release(
        &conn,
        RESOURCE,
        &controller,
        Param::int(1),
        Fence::LiveSystemOwner,
        NOW,
    );
    assert!(refused.is_err());
    assert_eq!(lease(&conn).owner_id.as_deref(), Some("owner-a"));
}

#[test]
fn the_holder_event_is_attributed_to_the_lease_read_before_the_change() {
    for kind in HOLDERS {
        let conn = database();
        let hash = token_hash("token-a");
        let fresh = lease(&conn);
        taken(&conn, kind, "owner-a", &hash);
        let held = lease(&conn);
        for (revision, read) in [(1, &fresh), (2, &held)] {
            let holder = Actor::Holder(read);
            insert_attributed_event(&conn, RESOURCE, revision, "test", holder, "{}", NOW).unwrap();
        }
        // A controller's claim event names the owner type it verified, `controller`, and
        // the claim's own owner and generation.
        let controller = Actor::Claim {
            owner_id: Js::String("owner-a"),
            generation: Js::Number(1.0),
        };
        insert_attributed_event(&conn, RESOURCE, 3, "test", controller, "{}", NOW).unwrap();
        let events: Vec<(String, Option<String>, Option<i64>)> = conn
            .prepare(
                "SELECT actor_type, actor_id, lease_generation FROM events
                 ORDER BY event_seq",
            )
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected = vec![
            ("system".to_owned(), None, None),
            (
                kind.owner_type.to_owned(),
                Some("owner-a".to_owned()),
                Some(1),
            ),
            ("controller".to_owned(), Some("owner-a".to_owned()), Some(1)),
        ];
        assert_eq!(events, expected, "{}", kind.name);
    }
}
