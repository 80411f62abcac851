//! Lease liveness, one owner: the `leases` row as read ([`Lease`]), whether it is live or
//! unexpired at a time, whether a caller's token holds it ([`Claim`]), the same rules as
//! SQL conditions for the reads that find takeable rows, and the system lease's expiry.

use crate::sql::Row;

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

/// A runner's take rule as a condition over `leases l`: free, expired at the first `?` (bound
/// to `now`), or already the runner's of the second — what [`Lease::is_live`] and the owner
/// test of a run claim decide for one lease.
pub const RUN_TAKEABLE: &str = "(l.owner_id IS NULL OR l.expires_at <= ? OR l.owner_id = ?)";

/// Whether a lease is free or expired at `now` as [`CONTROLLER_TAKEABLE`] and [`RUN_TAKEABLE`]
/// judge it in SQL (for a reader that mirrors the table): an owned lease without an expiry is
/// held there (`NULL <= ?` is not true), unlike [`Lease::is_live`], the rule the reference's
/// JavaScript applies to a lease it read.
pub fn free_or_expired(owned: bool, expires_at: Option<i64>, now: i64) -> bool {
    !owned || expires_at.is_some_and(|expires_at| expires_at <= now)
}

/// How long the control plane's own lease lasts (`cancelStaleWorkflowRun`'s 30 s).
pub const SYSTEM_LEASE_MS: i64 = 30_000;

/// The expiry of a system lease taken at `now`.
pub fn system_lease_expiry(now: i64) -> i64 {
    now + SYSTEM_LEASE_MS
}

impl Lease {
    /// Its claim columns, borrowed, for a claim check.
    pub fn claim(&self) -> Claim<'_> {
        Claim {
            owner_id: self.owner_id.as_deref(),
            token_hash: self.token_hash.as_deref(),
            expires_at: self.expires_at,
        }
    }

    /// The lease read by [`lease_columns!`] from column `first` on; `None` when a left join
    /// found no lease row (a NULL generation).
    pub fn from_columns(row: &Row<'_>, first: usize) -> rusqlite::Result<Option<Lease>> {
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

/// A lease's claim columns as a claim check reads them (a run row's or a [`Lease`]'s).
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub owner_id: Option<&'a str>,
    pub token_hash: Option<&'a [u8]>,
    pub expires_at: Option<i64>,
}

impl Claim<'_> {
    /// The claim check both holders' verifications share: the lease has an owner, an expiry
    /// and a token, the presented token hashes to it, and it is unexpired at `now`.
    /// `presented` (the presented token's hash) is asked for only once the lease has an owner,
    /// an expiry and a token, so a token the caller cannot hash fails only then, as in the
    /// reference.
    pub fn holds_live<E>(
        self,
        now: i64,
        presented: impl FnOnce() -> std::result::Result<[u8; 32], E>,
    ) -> std::result::Result<bool, E> {
        let (Some(_), Some(expires_at), Some(hash)) =
            (self.owner_id, self.expires_at, self.token_hash)
        else {
            return Ok(false);
        };
        Ok(hash == presented()? && expires_at > now)
    }

    /// [`Claim::holds_live`] with the expiry judged before the token is hashed
    /// (`terminalRun`, `deleteWorkflowRun`): on an expired lease a token the caller cannot
    /// hash is not asked for.
    pub fn holds_unexpired<E>(
        self,
        now: i64,
        presented: impl FnOnce() -> std::result::Result<[u8; 32], E>,
    ) -> std::result::Result<bool, E> {
        if self.expires_at.is_none_or(|expires_at| expires_at <= now) {
            return Ok(false);
        }
        self.holds_live(now, presented)
    }
}

#[cfg(test)]
mod tests {
    use super::Claim;
    use crate::js::token_hash;

    const NOW: i64 = 1_000;
    const EXPIRES: i64 = 31_000;

    fn claim<'a>(
        owner_id: Option<&'a str>,
        token_hash: Option<&'a [u8]>,
        expires_at: Option<i64>,
    ) -> Claim<'a> {
        Claim {
            owner_id,
            token_hash,
            expires_at,
        }
    }

    #[test]
    fn a_live_claim_needs_owner_expiry_and_the_token_and_hashes_only_then() {
        let hash = token_hash("token-a");
        let refused = || Err::<[u8; 32], &str>("not hashable");
        let live = |owner, stored: Option<&[u8]>, expires, now| {
            claim(owner, stored, expires).holds_live(now, || Ok::<_, &str>(token_hash("token-a")))
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
            assert_eq!(
                claim(owner, stored, expires).holds_live(NOW, refused),
                Ok(false)
            );
        }
        let asked = claim(Some("a"), Some(&hash), Some(EXPIRES)).holds_live(EXPIRES, refused);
        assert_eq!(asked, Err("not hashable"));
    }

    #[test]
    fn an_unexpired_claim_is_judged_by_its_expiry_before_the_token_is_hashed() {
        let hash = token_hash("token-a");
        let refused = || Err::<[u8; 32], &str>("not hashable");
        let presented = || Ok::<_, &str>(token_hash("token-a"));
        let held = claim(Some("a"), Some(&hash), Some(EXPIRES));
        assert_eq!(held.holds_unexpired(NOW, presented), Ok(true));
        assert_eq!(held.holds_unexpired(EXPIRES, refused), Ok(false));
        assert_eq!(held.holds_unexpired(NOW, refused), Err("not hashable"));
        let ownerless = claim(None, Some(&hash), Some(EXPIRES));
        assert_eq!(ownerless.holds_unexpired(NOW, refused), Ok(false));
    }
}

#[cfg(test)]
mod sql_rules {
    use super::{free_or_expired, CONTROLLER_TAKEABLE, RUN_TAKEABLE};

    /// [`free_or_expired`] is what the SQL conditions decide of a lease held by another owner.
    #[test]
    fn the_rust_rule_is_the_sql_rule() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let now = 1_000;
        for owner in [None, Some("other")] {
            for expires_at in [None, Some(999), Some(1_000), Some(1_001)] {
                let judged = |condition: &str, params: &[&dyn rusqlite::ToSql]| -> bool {
                    let sql = format!(
                        "SELECT coalesce({condition}, 0) FROM (SELECT ?{} AS owner_id, ?{} AS expires_at) l",
                        params.len() + 1,
                        params.len() + 2
                    );
                    let mut all: Vec<&dyn rusqlite::ToSql> = params.to_vec();
                    all.extend([&owner as &dyn rusqlite::ToSql, &expires_at]);
                    conn.query_row(&sql, all.as_slice(), |row| row.get(0))
                        .unwrap()
                };
                let rust = free_or_expired(owner.is_some(), expires_at, now);
                let case = format!("{owner:?} {expires_at:?}");
                assert_eq!(judged(CONTROLLER_TAKEABLE, &[&now]), rust, "{case}");
                assert_eq!(judged(RUN_TAKEABLE, &[&now, &"runner"]), rust, "{case}");
            }
        }
    }
}
