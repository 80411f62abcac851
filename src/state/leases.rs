//! Leases and fencing for both kinds of holder: controller resources and workflow runs.
//!
//! Every read and write of the `leases` table lives here: the generation-0 row of a new
//! resource, reading it, taking it (free, expired, or by generation alone), renewing and
//! releasing it, the liveness rule, and the event a holder's change is attributed to. Callers
//! pass a resource id and a [`Holder`] (owner type, owner id, token hash), never a run or
//! controller row; their own rules (pending interactions, queue states, finalizers) stay
//! with them.
//!
//! Every write is fenced: a take by the generation it read, a renewal or release by the
//! generation and the token hash (and, where the reference checks them, the owner and the
//! expiry). Values a caller supplied arrive as [`Param`]s and are bound here in statement
//! order through [`bind_params`], with better-sqlite3's rules; values already bound elsewhere
//! arrive as `Param::Own`.

use crate::sql::{params_from_iter, Db, OptionalExtension};

use super::revisions::{insert_event_params, EventBase, Payload};
use crate::error::{Result, StoreError};
use crate::js::{bind_params, Bound, Js, Param};

/// The `leases` row of a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// Incremented by every claim; the fencing number.
    pub generation: i64,
    /// `session`, `host`, `controller` or `system`; `None` when unowned.
    pub owner_type: Option<String>,
    /// The owner's id; `None` when unowned.
    pub owner_id: Option<String>,
    /// SHA-256 of the owner's token.
    pub token_hash: Option<Vec<u8>>,
    /// Lease expiry (epoch ms).
    pub expires_at: Option<i64>,
}

/// The lease columns of a statement that joins `leases l` to the row it reads, in the order
/// [`Lease::from_columns`] reads them (a macro, so callers can `concat!` it into their own list).
macro_rules! lease_columns {
    () => {
        "l.generation, l.owner_type, l.owner_id, l.token_hash,
    l.expires_at"
    };
}
pub(crate) use lease_columns;

/// A controller take's expiry rule as a condition over `leases l` (free, or expired at the `?`
/// bound to `now`): how a read finds the rows [`take`] with [`HolderKind::Controller`] can take.
pub const CONTROLLER_TAKEABLE: &str = "(l.owner_id IS NULL OR l.expires_at <= ?)";

impl Lease {
    /// The lease read by [`lease_columns!`] from column `first` on; `None` when a left join
    /// found no lease row (a NULL generation).
    pub fn from_columns(
        row: &crate::sql::Row<'_>,
        first: usize,
    ) -> rusqlite::Result<Option<Lease>> {
        let generation: Option<i64> = row.get(first)?;
        Ok(match generation {
            None => None,
            Some(generation) => Some(Lease {
                generation,
                owner_type: row.get(first + 1)?,
                owner_id: row.get(first + 2)?,
                token_hash: row.get(first + 3)?,
                expires_at: row.get(first + 4)?,
            }),
        })
    }

    /// Whether the lease has an expiry after `now` (an undated lease is expired).
    pub fn is_unexpired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|expires| expires > now)
    }

    /// `lease.generation || undefined`: generation 0 is recorded as no generation.
    pub fn event_generation(&self) -> Option<i64> {
        (self.generation != 0).then_some(self.generation)
    }

    /// Whether the stored token hash equals `hash`.
    pub fn token_matches(&self, hash: &[u8]) -> bool {
        self.token_hash.as_deref() == Some(hash)
    }

    /// Whether someone holds the lease and it has not expired at `now` (an undated lease is
    /// not live).
    pub fn is_live(&self, now: i64) -> bool {
        self.owner_id.is_some() && self.is_unexpired(now)
    }
}

/// Which kind of holder takes, renews or releases a lease; it decides the owner type stored
/// and the expiry rule of a take.
#[derive(Debug, Clone)]
pub enum HolderKind<'a> {
    /// A workflow run's runner (`session` or `host`, bound as given): takes by generation
    /// alone (the caller has judged the current holder's liveness).
    Runner(Param<'a>),
    /// A controller (`owner_type = 'controller'`): takes a free or expired lease.
    Controller,
    /// The control plane's short lease (`owner_type = 'system'`): takes a free, expired or
    /// undated lease.
    System,
}

/// The claim check both holders' verifications share: the lease has an owner, an expiry and a
/// token, the presented token hashes to it, and it is unexpired at `now`. `presented` (the
/// presented token's hash) is asked for only once the lease has an owner, an expiry and a
/// token, so a token the caller cannot hash fails only then, as in the reference.
pub fn holds_live<E>(
    owner_id: Option<&str>,
    token_hash: Option<&[u8]>,
    expires_at: Option<i64>,
    now: i64,
    presented: impl FnOnce() -> std::result::Result<[u8; 32], E>,
) -> std::result::Result<bool, E> {
    let (Some(_), Some(expires_at), Some(hash)) = (owner_id, expires_at, token_hash) else {
        return Ok(false);
    };
    Ok(hash == presented()? && expires_at > now)
}

/// [`holds_live`] with the expiry judged before the token is hashed (`terminalRun`,
/// `deleteWorkflowRun`): on an expired lease a token the caller cannot hash is not asked for.
pub fn holds_unexpired<E>(
    owner_id: Option<&str>,
    token_hash: Option<&[u8]>,
    expires_at: Option<i64>,
    now: i64,
    presented: impl FnOnce() -> std::result::Result<[u8; 32], E>,
) -> std::result::Result<bool, E> {
    if expires_at.is_none_or(|expires_at| expires_at <= now) {
        return Ok(false);
    }
    holds_live(owner_id, token_hash, expires_at, now, presented)
}

/// Who holds (or is to hold) a lease.
#[derive(Debug, Clone)]
pub struct Holder<'a> {
    /// The owner type and its take rule.
    pub kind: HolderKind<'a>,
    /// `leases.owner_id`, bound in statement order.
    pub owner_id: Param<'a>,
    /// SHA-256 of the holder's token.
    pub token_hash: &'a [u8],
}

/// What a release is fenced by, beside the resource and the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The token hash (the caller verified the claim in this transaction).
    Token,
    /// The token hash, unexpired at `now`.
    LiveToken,
    /// The owner id and the token hash (a controller's verified claim).
    Owner,
    /// The system owner, its id and token hash, unexpired at `now`.
    LiveSystemOwner,
}

/// The resource's lease, or `Lease is missing: <id>`.
pub fn require_lease(conn: &Db, resource_id: &str) -> Result<Lease> {
    conn.prepare_cached(
        "SELECT generation, owner_type, owner_id, token_hash, expires_at
         FROM leases WHERE resource_id = ?",
    )?
    .query_row([resource_id], |row| {
        Ok(Lease {
            generation: row.get(0)?,
            owner_type: row.get(1)?,
            owner_id: row.get(2)?,
            token_hash: row.get(3)?,
            expires_at: row.get(4)?,
        })
    })
    .optional()?
    .ok_or_else(|| StoreError::plain(format!("Lease is missing: {resource_id}")))
}

/// Inserts the generation-0 lease row every new resource gets.
pub fn insert_lease(conn: &Db, resource_id: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO leases(resource_id, generation) VALUES (?, 0)")?
        .execute([resource_id])?;
    Ok(())
}

/// The bytes of `leases.owner_id` as SQLite stored it (a number bound as a double becomes its
/// text, `5.0`; a caller's lone surrogates stay the WTF-8 V8 wrote), `None` when unowned.
pub fn stored_owner_id(conn: &Db, resource_id: &str) -> Result<Option<Vec<u8>>> {
    Ok(conn
        .prepare_cached("SELECT owner_id FROM leases WHERE resource_id = ?")?
        .query_row([resource_id], |row| {
            Ok(row.get_ref(0)?.as_bytes_or_null()?.map(<[u8]>::to_vec))
        })?)
}

/// `leases.expires_at` as the STRICT column holds it after binding (a numeric text converted).
pub fn stored_expires_at(conn: &Db, resource_id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT expires_at FROM leases WHERE resource_id = ?")?
        .query_row([resource_id], |row| row.get(0))?)
}

/// Runs `sql` with `params` bound as better-sqlite3 binds them; the number of rows changed.
fn execute(conn: &Db, sql: &str, params: &[Param<'_>]) -> Result<usize> {
    let mut statement = conn.prepare_cached(sql)?;
    Ok(statement.execute(params_from_iter(bind_params(params)?))?)
}

/// Takes generation `from_generation + 1` for `holder` until `expires_at`, fenced by
/// `from_generation` and the holder kind's expiry rule; false when it did not take.
pub fn take(
    conn: &Db,
    resource_id: &str,
    holder: &Holder<'_>,
    from_generation: i64,
    expires_at: Param<'_>,
    now: i64,
) -> Result<bool> {
    let generation = Param::int(from_generation + 1);
    let owner_id = holder.owner_id.clone();
    let token_hash = Param::blob(holder.token_hash);
    let changed = match &holder.kind {
        HolderKind::Runner(owner_type) => execute(
            conn,
            "UPDATE leases SET generation = ?, owner_type = ?, owner_id = ?, token_hash = ?,
                acquired_at = ?, heartbeat_at = ?, expires_at = ?
         WHERE resource_id = ? AND generation = ?",
            &[
                generation,
                owner_type.clone(),
                owner_id,
                token_hash,
                Param::int(now),
                Param::int(now),
                expires_at,
                Param::text(resource_id),
                Param::int(from_generation),
            ],
        )?,
        HolderKind::Controller => execute(
            conn,
            "UPDATE leases
         SET generation = ?, owner_type = 'controller', owner_id = ?, token_hash = ?,
             acquired_at = ?, heartbeat_at = ?, expires_at = ?
         WHERE resource_id = ? AND generation = ?
           AND (owner_id IS NULL OR expires_at <= ?)",
            &[
                generation,
                owner_id,
                token_hash,
                Param::int(now),
                Param::int(now),
                expires_at,
                Param::text(resource_id),
                Param::int(from_generation),
                Param::int(now),
            ],
        )?,
        HolderKind::System => execute(
            conn,
            "UPDATE leases
                 SET generation = ?, owner_type = 'system', owner_id = ?, token_hash = ?,
                     acquired_at = ?, heartbeat_at = ?, expires_at = ?
                 WHERE resource_id = ? AND generation = ?
                   AND (owner_id IS NULL OR expires_at IS NULL OR expires_at <= ?)",
            &[
                generation,
                owner_id,
                token_hash,
                Param::int(now),
                Param::int(now),
                expires_at,
                Param::text(resource_id),
                Param::int(from_generation),
                Param::int(now),
            ],
        )?,
    };
    Ok(changed == 1)
}

/// Extends the holder's lease at `generation` to `expires_at` when it is unexpired at `now`;
/// false when it did not.
pub fn renew(
    conn: &Db,
    resource_id: &str,
    holder: &Holder<'_>,
    generation: Param<'_>,
    expires_at: Param<'_>,
    now: i64,
) -> Result<bool> {
    let owner_id = holder.owner_id.clone();
    let token_hash = Param::blob(holder.token_hash);
    let bound_owner_type = |owner_type: Param<'_>| {
        execute(
            conn,
            "UPDATE leases SET heartbeat_at = ?, expires_at = ?
                 WHERE resource_id = ? AND owner_type = ? AND owner_id = ?
                   AND token_hash = ? AND generation = ? AND expires_at > ?",
            &[
                Param::int(now),
                expires_at.clone(),
                Param::text(resource_id),
                owner_type,
                owner_id.clone(),
                token_hash.clone(),
                generation.clone(),
                Param::int(now),
            ],
        )
    };
    let changed = match &holder.kind {
        HolderKind::Runner(owner_type) => bound_owner_type(owner_type.clone())?,
        HolderKind::System => bound_owner_type(Param::text("system"))?,
        HolderKind::Controller => execute(
            conn,
            "UPDATE leases SET heartbeat_at = ?, expires_at = ?
         WHERE resource_id = ? AND owner_type = 'controller' AND owner_id = ?
           AND token_hash = ? AND generation = ? AND expires_at > ?",
            &[
                Param::int(now),
                expires_at.clone(),
                Param::text(resource_id),
                owner_id.clone(),
                token_hash.clone(),
                generation.clone(),
                Param::int(now),
            ],
        )?,
    };
    Ok(changed == 1)
}

/// Clears the owner, token and times of the holder's lease at `generation`, fenced by `fence`
/// (judged at `now` where it says so); false when it did not release. The generation is kept:
/// the next take moves on from it.
pub fn release(
    conn: &Db,
    resource_id: &str,
    holder: &Holder<'_>,
    generation: Param<'_>,
    fence: Fence,
    now: i64,
) -> Result<bool> {
    let token_hash = Param::blob(holder.token_hash);
    let changed = match fence {
        Fence::Token => execute(
            conn,
            "UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                        acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
                 WHERE resource_id = ? AND token_hash = ? AND generation = ?",
            &[Param::text(resource_id), token_hash, generation],
        )?,
        Fence::LiveToken => execute(
            conn,
            "UPDATE leases
             SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                 acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
             WHERE resource_id = ? AND token_hash = ? AND generation = ? AND expires_at > ?",
            &[
                Param::text(resource_id),
                token_hash,
                generation,
                Param::int(now),
            ],
        )?,
        Fence::Owner => execute(
            conn,
            "UPDATE leases SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
         WHERE resource_id = ? AND owner_id = ? AND token_hash = ? AND generation = ?",
            &[
                Param::text(resource_id),
                holder.owner_id.clone(),
                token_hash,
                generation,
            ],
        )?,
        Fence::LiveSystemOwner => {
            if !matches!(holder.kind, HolderKind::System) {
                return Err(StoreError::plain(
                    "Only the system holder is released by its owner and expiry",
                ));
            }
            execute(
                conn,
                "UPDATE leases
                 SET owner_type = NULL, owner_id = NULL, token_hash = NULL,
                     acquired_at = NULL, heartbeat_at = NULL, expires_at = NULL
                 WHERE resource_id = ? AND owner_type = 'system' AND owner_id = ?
                   AND token_hash = ? AND generation = ? AND expires_at > ?",
                &[
                    Param::text(resource_id),
                    holder.owner_id.clone(),
                    token_hash,
                    generation,
                    Param::int(now),
                ],
            )?
        }
    };
    Ok(changed == 1)
}

/// Whom an event is attributed to: each attribution rule of the event log, stated once.
#[derive(Debug, Clone, Copy)]
pub enum Actor<'a> {
    /// The lease holder read before the change: actor `lease.ownerType ?? "system"` and its
    /// owner, generation `lease.generation || undefined`.
    Holder(&'a Lease),
    /// A controller's verified claim as the caller's object holds it when the event is
    /// written (the reference passes `claim.ownerId` and `claim.generation` to `insertEvent`,
    /// read again there): actor `controller`, the owner id and `generation ?? null` bound as
    /// better-sqlite3 binds them. Made by [`Actor::claim`].
    Claim {
        /// `claim.ownerId`, read at the event.
        owner_id: Js<'a>,
        /// `claim.generation`, read at the event.
        generation: Js<'a>,
    },
    /// The control plane (`control`), with its id if it has one (its text's bytes as they
    /// were bound: a caller's lone surrogates stay WTF-8), no lease generation.
    Control(Option<&'a [u8]>),
}

impl<'a> Actor<'a> {
    /// The claim `claim_of()` gives, read as the reference's event arguments read it:
    /// `claim_of().ownerId`, then `claim_of().generation` (an `options.claim` getter runs
    /// once for each).
    pub fn claim(claim_of: impl Fn() -> Result<Js<'a>>) -> Result<Actor<'a>> {
        let owner_id = claim_of()?.get("ownerId")?;
        let generation = claim_of()?.get("generation")?;
        Ok(Actor::Claim {
            owner_id,
            generation,
        })
    }

    /// `(actor_type, actor_id, lease_generation)` of the event.
    fn attribution(self) -> (&'a str, Param<'a>, Param<'a>) {
        let int_or_null = |value: Option<i64>| value.map_or(Param::null(), Param::int);
        match self {
            Actor::Holder(lease) => (
                lease.owner_type.as_deref().unwrap_or("system"),
                bound_text(lease.owner_id.as_deref()),
                int_or_null(lease.event_generation()),
            ),
            Actor::Claim {
                owner_id,
                generation,
            } => (
                "controller",
                Param::Js(owner_id),
                Param::Js(generation.or(Js::Null)),
            ),
            Actor::Control(id) => (
                "control",
                Param::Own(id.map_or(Bound::Null, |id| Bound::Text(id.into()))),
                Param::null(),
            ),
        }
    }
}

/// Inserts an event attributed to `actor`; `payload` is canonical JSON text. Returns the
/// event id.
pub fn insert_attributed_event(
    conn: &Db,
    resource_id: &str,
    revision: i64,
    event_type: &str,
    actor: Actor<'_>,
    payload: &str,
    now: i64,
) -> Result<String> {
    insert_attributed_event_of(
        conn,
        (resource_id, revision, event_type),
        actor,
        payload,
        now,
        Payload::Repeated,
    )
}

/// [`insert_attributed_event`] with a payload that is [`Payload::Fresh`] or repeated.
pub fn insert_attributed_event_of(
    conn: &Db,
    (resource_id, revision, event_type): (&str, i64, &str),
    actor: Actor<'_>,
    payload: &str,
    now: i64,
    kind: Payload,
) -> Result<String> {
    let (actor_type, actor_id, lease_generation) = actor.attribution();
    let event = EventBase {
        resource_id,
        revision,
        actor_type,
        payload,
        now,
    };
    let params = [Param::text(event_type), actor_id, lease_generation];
    insert_event_params(conn, &event, params, kind)
}

/// `Bound` of an optional text the store read (NULL for `None`).
pub fn bound_text(text: Option<&str>) -> Param<'_> {
    match text {
        Some(text) => Param::text(text),
        None => Param::Own(Bound::Null),
    }
}

/// One suite for every holder kind, the way a driver suite runs each property against every
/// driver: each test loops over [`HOLDERS`], and a new kind is covered by adding it there.
#[cfg(test)]
mod tests {
    use super::{
        holds_live, holds_unexpired, insert_attributed_event, insert_lease, release, renew,
        require_lease, stored_expires_at, stored_owner_id, take, Actor, Fence, Holder, HolderKind,
        Lease, CONTROLLER_TAKEABLE,
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
    fn a_live_claim_needs_owner_expiry_and_the_token_and_hashes_only_then() {
        let hash = token_hash("token-a");
        let refused = || Err::<[u8; 32], &str>("not hashable");
        let live = |owner, stored: Option<&[u8]>, expires, now| {
            holds_live(owner, stored, expires, now, || {
                Ok::<_, &str>(token_hash("token-a"))
            })
        };
        assert_eq!(live(Some("a"), Some(&hash), Some(EXPIRES), NOW), Ok(true));
        assert_eq!(
            live(Some("a"), Some(&hash), Some(EXPIRES), EXPIRES),
            Ok(false)
        );
        let other = token_hash("token-b");
        assert_eq!(live(Some("a"), Some(&other), Some(EXPIRES), NOW), Ok(false));
        for (owner, stored, expires) in [
            (None, Some(&hash[..]), Some(EXPIRES)),
            (Some("a"), None, Some(EXPIRES)),
            (Some("a"), Some(&hash[..]), None),
        ] {
            assert_eq!(holds_live(owner, stored, expires, NOW, refused), Ok(false));
        }
        let asked = holds_live(Some("a"), Some(&hash), Some(EXPIRES), EXPIRES, refused);
        assert_eq!(asked, Err("not hashable"));
    }

    #[test]
    fn an_unexpired_claim_is_judged_by_its_expiry_before_the_token_is_hashed() {
        let hash = token_hash("token-a");
        let refused = || Err::<[u8; 32], &str>("not hashable");
        let presented = || Ok::<_, &str>(token_hash("token-a"));
        let unexpired = holds_unexpired(Some("a"), Some(&hash), Some(EXPIRES), NOW, presented);
        assert_eq!(unexpired, Ok(true));
        let expired = holds_unexpired(Some("a"), Some(&hash), Some(EXPIRES), EXPIRES, refused);
        assert_eq!(expired, Ok(false));
        let asked = holds_unexpired(Some("a"), Some(&hash), Some(EXPIRES), NOW, refused);
        assert_eq!(asked, Err("not hashable"));
        assert_eq!(
            holds_unexpired(None, Some(&hash), Some(EXPIRES), NOW, refused),
            Ok(false)
        );
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
                insert_attributed_event(&conn, RESOURCE, revision, "test", holder, "{}", NOW)
                    .unwrap();
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
}
