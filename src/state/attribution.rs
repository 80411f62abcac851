//! Event attribution, one owner: whom an event is attributed to ([`Actor`], every shape the
//! reference's event inserts take) and the one way an `events` row is written with it
//! ([`record_event`]); the row's SQL and its payload blob are [`super::revisions`]'.

use crate::sql::Db;

use super::liveness::Lease;
use super::revisions::{insert_event_params, EventBase, Payload};
use crate::error::Result;
use crate::js::{Bound, Js, Param};

/// Whom an event is attributed to: `(actor_type, actor_id, lease_generation)`, each shape the
/// reference writes, stated once.
#[derive(Debug, Clone)]
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
    /// The control plane under the system lease it took for the change (a stale run's
    /// cancellation): actor `control`, its id as SQLite stored it, that lease's generation.
    ControlLease {
        /// `controlId`, as the lease row stored it.
        control_id: &'a [u8],
        /// The system lease's generation.
        generation: i64,
    },
    /// The store itself (`system`): no id, no generation (an effect the engine applied, a
    /// child workflow's state).
    System,
    /// The origin session that reserved a run (`session`): its id as the reference binds it
    /// (`options.originSessionId`), no generation.
    Session(Param<'a>),
    /// The new holder of a lease just taken (`lease.claimed`): its owner type, the caller's
    /// owner id as bound, the new generation.
    Taker {
        /// `session`, `host` or `controller`.
        owner_type: &'a str,
        /// The caller's owner id (runner id), bound as better-sqlite3 binds it.
        owner_id: Param<'a>,
        /// The generation taken.
        generation: i64,
    },
    /// A run event's runner (`appendWorkflowRunEvent`): `host` or `session` by the runner id,
    /// `options.runnerId ?? null` as bound, the run lease's generation `|| null`.
    Runner {
        /// `host` for `host-…` runners, else `session`.
        owner_type: &'a str,
        /// `options.runnerId ?? null`, bound.
        runner_id: Param<'a>,
        /// The run lease's generation, `None` for 0.
        generation: Option<i64>,
    },
    /// A controller event's caller (`appendControllerEvent`): `controller` with a claim, else
    /// `control`; `options.claim?.ownerId ?? null` and `options.claim?.generation` as bound.
    ControllerEvent {
        /// Whether `options.claim` was given.
        claimed: bool,
        /// `options.claim?.ownerId ?? null`.
        owner_id: Js<'a>,
        /// `options.claim?.generation ?? null`.
        generation: Js<'a>,
    },
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
            Actor::ControlLease {
                control_id,
                generation,
            } => (
                "control",
                Param::Own(Bound::Text(control_id.into())),
                Param::int(generation),
            ),
            Actor::System => ("system", Param::null(), Param::null()),
            Actor::Session(id) => ("session", id, Param::null()),
            Actor::Taker {
                owner_type,
                owner_id,
                generation,
            } => (owner_type, owner_id, Param::int(generation)),
            Actor::Runner {
                owner_type,
                runner_id,
                generation,
            } => (owner_type, runner_id, int_or_null(generation)),
            Actor::ControllerEvent {
                claimed,
                owner_id,
                generation,
            } => (
                if claimed { "controller" } else { "control" },
                Param::Js(owner_id),
                Param::Js(generation),
            ),
        }
    }
}

/// Writes the event `(resource_id, revision, event_type)` attributed to `actor`; `payload` is
/// canonical JSON text, stored as `kind` says. The type is a [`Param`]: a caller's value is
/// bound as better-sqlite3 binds it. Returns the event id.
pub fn record_event(
    conn: &Db,
    (resource_id, revision, event_type): (&str, i64, Param<'_>),
    actor: Actor<'_>,
    payload: &str,
    now: i64,
    kind: Payload<'_>,
) -> Result<String> {
    let (actor_type, actor_id, lease_generation) = actor.attribution();
    let event = EventBase {
        resource_id,
        revision,
        actor_type,
        payload,
        now,
    };
    insert_event_params(conn, &event, [event_type, actor_id, lease_generation], kind)
}

/// [`record_event`] of a type the store names, with a payload events repeat.
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

/// [`record_event`] of a type the store names.
pub fn insert_attributed_event_of(
    conn: &Db,
    (resource_id, revision, event_type): (&str, i64, &str),
    actor: Actor<'_>,
    payload: &str,
    now: i64,
    kind: Payload<'_>,
) -> Result<String> {
    let event = (resource_id, revision, Param::text(event_type));
    record_event(conn, event, actor, payload, now, kind)
}

/// `Bound` of an optional text the store read (NULL for `None`).
pub fn bound_text(text: Option<&str>) -> Param<'_> {
    match text {
        Some(text) => Param::text(text),
        None => Param::Own(Bound::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::{record_event, Actor};
    use crate::js::{Bound, Js, Param};
    use crate::sql::Db;
    use crate::state::liveness::Lease;
    use crate::state::revisions::Payload;
    use crate::state::schema::STATE_SCHEMA_SQL;

    type Attribution = (String, Option<String>, Option<i64>);

    /// The `(actor_type, actor_id, lease_generation)` an event attributed to `actor` stores.
    fn stored(actor: Actor<'_>) -> Attribution {
        let conn = Db::File(rusqlite::Connection::open_in_memory().unwrap());
        conn.execute_batch(STATE_SCHEMA_SQL).unwrap();
        conn.execute(
            "INSERT INTO resources(resource_id, resource_type, aggregate_key, created_at, updated_at)
             VALUES ('resource-1', 'run', 'key', 0, 0)",
            [],
        )
        .unwrap();
        let event = ("resource-1", 1, Param::text("test"));
        record_event(&conn, event, actor, "{}", 0, Payload::Fresh).unwrap();
        conn.query_row(
            "SELECT actor_type, actor_id, lease_generation FROM events",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap()
    }

    fn expected(actor_type: &str, id: Option<&str>, generation: Option<i64>) -> Attribution {
        (actor_type.to_owned(), id.map(str::to_owned), generation)
    }

    #[test]
    fn every_shape_stores_the_reference_attribution() {
        let unowned = Lease {
            generation: 0,
            owner_type: None,
            owner_id: None,
            token_hash: None,
            expires_at: None,
        };
        let held = Lease {
            generation: 3,
            owner_type: Some("host".into()),
            owner_id: Some("host-a".into()),
            ..unowned.clone()
        };
        let cases = [
            (Actor::Holder(&unowned), expected("system", None, None)),
            (
                Actor::Holder(&held),
                expected("host", Some("host-a"), Some(3)),
            ),
            (
                Actor::Claim {
                    owner_id: Js::String("worker"),
                    generation: Js::Undefined,
                },
                expected("controller", Some("worker"), None),
            ),
            (Actor::Control(None), expected("control", None, None)),
            (
                Actor::Control(Some(b"ops")),
                expected("control", Some("ops"), None),
            ),
            (
                Actor::ControlLease {
                    control_id: b"workflow-control",
                    generation: 4,
                },
                expected("control", Some("workflow-control"), Some(4)),
            ),
            (Actor::System, expected("system", None, None)),
            (
                Actor::Session(Param::text("session-1")),
                expected("session", Some("session-1"), None),
            ),
            (
                Actor::Taker {
                    owner_type: "controller",
                    owner_id: Param::Own(Bound::Real(5.0)),
                    generation: 2,
                },
                expected("controller", Some("5.0"), Some(2)),
            ),
            (
                Actor::Runner {
                    owner_type: "session",
                    runner_id: Param::null(),
                    generation: None,
                },
                expected("session", None, None),
            ),
            (
                Actor::ControllerEvent {
                    claimed: false,
                    owner_id: Js::Null,
                    generation: Js::Null,
                },
                expected("control", None, None),
            ),
            (
                Actor::ControllerEvent {
                    claimed: true,
                    owner_id: Js::String("worker"),
                    generation: Js::Number(7.0),
                },
                expected("controller", Some("worker"), Some(7)),
            ),
        ];
        for (actor, attribution) in cases {
            let shape = format!("{actor:?}");
            assert_eq!(stored(actor), attribution, "{shape}");
        }
    }
}
