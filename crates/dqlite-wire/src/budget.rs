//! How much one reply may bring: a cap on its rows and on its bytes.
//!
//! A result streams in batches until the server says it is done; a server
//! that never says so (or a query that returns far more than expected) would
//! otherwise grow the client's memory without end. The bytes are counted as
//! the decoded rows take them in memory (each value's slot, its text or blob,
//! and the allocations around them), close to the wire's size for text and
//! blobs and a few times it for small numbers, so that the cap bounds what
//! the client holds. A frame is refused before it is read when it alone
//! would not fit what is left, so no buffer larger than the cap is ever
//! allocated.

use crate::error::{Error, ErrorKind, Outcome, ReplyLimit, Result};
use crate::value::Value;

/// Bookkeeping of one heap allocation (malloc's header and rounding).
const ALLOCATION: u64 = 16;
/// A row: its `Vec` in the result's list, and its own allocation.
const ROW: u64 = std::mem::size_of::<Vec<Value>>() as u64 + ALLOCATION;
/// A value's slot in its row.
const VALUE: u64 = std::mem::size_of::<Value>() as u64;

/// The most one reply (every batch of a result together) may bring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyLimits {
    pub rows: u64,
    /// Bytes as the decoded reply takes them in memory.
    pub bytes: u64,
}

impl ReplyLimits {
    /// Nothing a server sends is refused for its size (up to the frame
    /// limit of [`crate::wire::MAX_BODY_BYTES`]).
    pub const UNLIMITED: ReplyLimits = ReplyLimits {
        rows: u64::MAX,
        bytes: u64::MAX,
    };
}

impl Default for ReplyLimits {
    /// 250,000 rows and 32 MiB. The store's largest replies are its listings
    /// (`listWorkflowRuns` of a project: 1.9 KiB a run as counted here, so
    /// 32 MiB lists some 17,000 runs); every other reply is a few KiB (a
    /// store's whole open: 53 KiB). A server that never ends a result then
    /// costs the client at most twice the cap (the rows so far, and one
    /// frame that fits what is left).
    fn default() -> Self {
        ReplyLimits {
            rows: 250_000,
            bytes: 32 << 20,
        }
    }
}

/// What is left of one reply's limits.
#[derive(Debug, Clone)]
pub struct Budget {
    limits: ReplyLimits,
    rows: u64,
    bytes: u64,
}

impl Budget {
    pub fn new(limits: ReplyLimits) -> Budget {
        Budget {
            limits,
            rows: 0,
            bytes: 0,
        }
    }

    fn too_large(limit: ReplyLimit) -> Error {
        Error::new(ErrorKind::ReplyTooLarge { limit }, Outcome::Failed)
    }

    /// A frame with a body of `len` bytes may be read: it must fit what is
    /// left of the bytes.
    pub fn admit_frame(&self, len: usize) -> Result<()> {
        if (len as u64) > self.limits.bytes.saturating_sub(self.bytes) {
            return Err(Budget::too_large(ReplyLimit::Bytes(self.limits.bytes)));
        }
        Ok(())
    }

    /// Count `len` bytes of a reply that is not rows.
    pub fn charge_bytes(&mut self, len: u64) -> Result<()> {
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes > self.limits.bytes {
            return Err(Budget::too_large(ReplyLimit::Bytes(self.limits.bytes)));
        }
        Ok(())
    }

    /// Count one decoded row.
    pub fn charge_row(&mut self, row: &[Value]) -> Result<()> {
        self.rows += 1;
        if self.rows > self.limits.rows {
            return Err(Budget::too_large(ReplyLimit::Rows(self.limits.rows)));
        }
        let heap = |len: usize| match len {
            0 => 0,
            n => n as u64 + ALLOCATION,
        };
        let size = row.iter().fold(ROW, |size, value| {
            size + VALUE
                + match value {
                    Value::Text(s) | Value::Iso8601(s) => heap(s.len()),
                    Value::Blob(b) => heap(b.len()),
                    _ => 0,
                }
        });
        self.charge_bytes(size)
    }

    /// Rows counted so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_bytes_are_capped_separately() {
        let mut b = Budget::new(ReplyLimits {
            rows: 2,
            bytes: 1 << 20,
        });
        b.charge_row(&[Value::Integer(1)]).unwrap();
        b.charge_row(&[Value::Null]).unwrap();
        let e = b.charge_row(&[Value::Null]).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::ReplyTooLarge {
                limit: ReplyLimit::Rows(2)
            }
        ));
        assert_eq!(e.outcome(), Outcome::Failed);

        let mut b = Budget::new(ReplyLimits {
            rows: 1_000,
            bytes: 1_000,
        });
        b.admit_frame(1_000).unwrap();
        assert!(b.admit_frame(1_001).is_err(), "a frame larger than the cap");
        b.charge_row(&[Value::Text("x".repeat(500))]).unwrap();
        let e = b.charge_row(&[Value::Blob(vec![0; 500])]).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::ReplyTooLarge {
                limit: ReplyLimit::Bytes(1_000)
            }
        ));
    }

    #[test]
    fn a_row_counts_what_it_holds_in_memory() {
        let mut b = Budget::new(ReplyLimits::UNLIMITED);
        b.charge_row(&[Value::Integer(1), Value::Text("abc".into())])
            .unwrap();
        assert_eq!(b.bytes, ROW + 2 * VALUE + 3 + ALLOCATION);
        assert_eq!(b.rows(), 1);
    }
}
