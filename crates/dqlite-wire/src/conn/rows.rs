//! A result set streamed batch by batch from its connection.

use std::vec;

use super::framing::Reply;
use super::{Connection, QueryResult};
use crate::error::Result;
use crate::value::Value;

/// A result set being streamed. Dropping it before the end interrupts the
/// query (and breaks the connection if that fails).
#[derive(Debug)]
pub struct Rows<'c> {
    pub(super) conn: &'c mut Connection,
    pub(super) reply: Reply,
    pub(super) columns: Vec<String>,
    pub(super) pending: vec::IntoIter<Vec<Value>>,
    pub(super) more: bool,
    pub(super) batches: u64,
}

impl Rows<'_> {
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Rows responses received so far (the server sends about a memory page
    /// of rows per response).
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// The next row, `None` at the end.
    pub fn next_row(&mut self) -> Result<Option<Vec<Value>>> {
        loop {
            if let Some(row) = self.pending.next() {
                return Ok(Some(row));
            }
            if !self.more {
                return Ok(None);
            }
            // The stream is over whatever happens next.
            self.more = false;
            let batch = self.conn.next_batch(&mut self.reply)?;
            self.batches += 1;
            self.more = batch.more;
            self.pending = batch.rows.into_iter();
        }
    }

    /// Read everything left.
    pub fn collect_all(mut self) -> Result<QueryResult> {
        let mut rows = Vec::new();
        while let Some(row) = self.next_row()? {
            rows.push(row);
        }
        Ok(QueryResult {
            columns: std::mem::take(&mut self.columns),
            rows,
        })
    }

    /// Stop the query. Returns the number of rows the server had already
    /// produced and this client discarded (buffered ones included).
    pub fn interrupt(mut self) -> Result<u64> {
        let buffered = self.pending.len() as u64;
        self.pending = Vec::new().into_iter();
        if !self.more {
            return Ok(buffered);
        }
        self.more = false;
        Ok(buffered + self.conn.interrupt_stream()?)
    }
}

impl Iterator for Rows<'_> {
    type Item = Result<Vec<Value>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}

impl Drop for Rows<'_> {
    fn drop(&mut self) {
        if self.more {
            self.more = false;
            if self.conn.interrupt_stream().is_err() {
                self.conn.broken = true;
            }
        }
    }
}
