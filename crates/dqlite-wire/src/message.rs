//! The request and response messages of protocol version 1.
//!
//! Requests are encoded into complete frames (header + body); responses are
//! decoded from a header and its body: the messages a SQL client needs, and
//! the membership changes (add, assign, remove, transfer) that the node
//! program (`crates/dqlite-node`) sends to join a cluster or leave its
//! leadership. Dump is not here.

use crate::budget::{Budget, ReplyLimits};
use crate::error::{Error, Result};
use crate::value::Value;
use crate::wire::{Decoder, Encoder, Header, ROWS_DONE, ROWS_PART};

/// Request type codes.
pub mod request {
    pub const LEADER: u8 = 0;
    pub const CLIENT: u8 = 1;
    pub const HEARTBEAT: u8 = 2;
    pub const OPEN: u8 = 3;
    pub const PREPARE: u8 = 4;
    pub const EXEC: u8 = 5;
    pub const QUERY: u8 = 6;
    pub const FINALIZE: u8 = 7;
    pub const EXEC_SQL: u8 = 8;
    pub const QUERY_SQL: u8 = 9;
    pub const INTERRUPT: u8 = 10;
    pub const ADD: u8 = 12;
    pub const ASSIGN: u8 = 13;
    pub const REMOVE: u8 = 14;
    pub const CLUSTER: u8 = 16;
    pub const TRANSFER: u8 = 17;
}

/// Response type codes.
pub mod response {
    pub const FAILURE: u8 = 0;
    pub const SERVER: u8 = 1;
    pub const WELCOME: u8 = 2;
    pub const SERVERS: u8 = 3;
    pub const DB: u8 = 4;
    pub const STMT: u8 = 5;
    pub const RESULT: u8 = 6;
    pub const ROWS: u8 = 7;
    pub const EMPTY: u8 = 8;
}

/// `Cluster` request format that also returns each node's role.
pub const CLUSTER_FORMAT_V1: u64 = 1;

/// A request, borrowed from the caller's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Request<'a> {
    /// Who is the leader? (answered by voters; "" when unknown)
    Leader,
    /// Register the client; answered with Welcome.
    Client {
        id: u64,
    },
    /// Open (creating if needed) the database with this name.
    Open {
        name: &'a str,
    },
    Prepare {
        db: u32,
        sql: &'a str,
    },
    Exec {
        db: u32,
        stmt: u32,
        params: &'a [Value],
    },
    Query {
        db: u32,
        stmt: u32,
        params: &'a [Value],
    },
    Finalize {
        db: u32,
        stmt: u32,
    },
    /// Run every statement of a text; parameters bind to the first one.
    ExecSql {
        db: u32,
        sql: &'a str,
        params: &'a [Value],
    },
    /// Run the first statement of a text and return its rows.
    QuerySql {
        db: u32,
        sql: &'a str,
        params: &'a [Value],
    },
    /// Stop the query streaming rows on this connection.
    Interrupt {
        db: u32,
    },
    /// Add a node to the configuration as a spare (sent to the leader).
    Add {
        id: u64,
        address: &'a str,
    },
    /// Give node `id` a role (0 voter, 1 stand-by, 2 spare; sent to the
    /// leader, answered once the change is committed).
    Assign {
        id: u64,
        role: u64,
    },
    /// Remove node `id` from the configuration (sent to the leader).
    Remove {
        id: u64,
    },
    /// The cluster's configuration (id, address, role of every node).
    Cluster,
    /// Hand leadership to the voter with this id (sent to the leader).
    Transfer {
        id: u64,
    },
}

impl Request<'_> {
    pub fn type_code(&self) -> u8 {
        match self {
            Request::Leader => request::LEADER,
            Request::Client { .. } => request::CLIENT,
            Request::Open { .. } => request::OPEN,
            Request::Prepare { .. } => request::PREPARE,
            Request::Exec { .. } => request::EXEC,
            Request::Query { .. } => request::QUERY,
            Request::Finalize { .. } => request::FINALIZE,
            Request::ExecSql { .. } => request::EXEC_SQL,
            Request::QuerySql { .. } => request::QUERY_SQL,
            Request::Interrupt { .. } => request::INTERRUPT,
            Request::Add { .. } => request::ADD,
            Request::Assign { .. } => request::ASSIGN,
            Request::Remove { .. } => request::REMOVE,
            Request::Cluster => request::CLUSTER,
            Request::Transfer { .. } => request::TRANSFER,
        }
    }

    /// True for requests that may change the database (so a lost reply
    /// leaves their outcome unknown).
    pub fn may_write(&self) -> bool {
        matches!(self, Request::Exec { .. } | Request::ExecSql { .. })
    }

    /// The complete frame. Fails, without side effects, on arguments the
    /// protocol cannot carry.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut e = Encoder::new();
        match self {
            Request::Leader | Request::Cluster => {
                let format = if *self == Request::Cluster {
                    CLUSTER_FORMAT_V1
                } else {
                    0
                };
                e.u64(format);
            }
            Request::Client { id } | Request::Transfer { id } | Request::Remove { id } => {
                e.u64(*id);
            }
            Request::Add { id, address } => {
                e.u64(*id).text(address)?;
            }
            Request::Assign { id, role } => {
                e.u64(*id).u64(*role);
            }
            Request::Open { name } => {
                // flags and vfs are ignored by the server; go-dqlite sends
                // these same values.
                e.text(name)?.u64(0).text("volatile")?;
            }
            Request::Prepare { db, sql } => {
                e.u64(u64::from(*db)).text(sql)?;
            }
            Request::Exec { db, stmt, params } | Request::Query { db, stmt, params } => {
                e.u32_pair(*db, *stmt).params(params)?;
            }
            Request::Finalize { db, stmt } => {
                e.u32_pair(*db, *stmt);
            }
            Request::ExecSql { db, sql, params } | Request::QuerySql { db, sql, params } => {
                e.u64(u64::from(*db)).text(sql)?.params(params)?;
            }
            Request::Interrupt { db } => {
                e.u64(u64::from(*db));
            }
        }
        e.finish(self.type_code(), 0)
    }
}

/// A node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub id: u64,
    pub address: String,
    /// 0 voter, 1 stand-by, 2 spare.
    pub role: u64,
}

/// One batch of a result set. Every batch repeats the column names.
#[derive(Debug, Clone, PartialEq)]
pub struct RowsBatch {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// True when another batch follows.
    pub more: bool,
}

/// A decoded response.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    Failure {
        code: u64,
        message: String,
    },
    /// The leader (id 0 and "" when the node knows none).
    Server {
        id: u64,
        address: String,
    },
    Welcome {
        heartbeat_timeout: u64,
    },
    Servers(Vec<NodeInfo>),
    Db {
        id: u32,
    },
    Stmt {
        db: u32,
        id: u32,
        params: u64,
    },
    Result {
        last_insert_id: i64,
        rows_affected: u64,
    },
    Rows(RowsBatch),
    Empty,
}

impl Response {
    /// Decode a body of the given header's type. Fields a newer schema
    /// revision appends are ignored.
    pub fn decode(header: &Header, body: &[u8]) -> Result<Response> {
        Response::decode_within(header, body, &mut Budget::new(ReplyLimits::UNLIMITED))
    }

    /// [`Response::decode`], counting what it decodes against `budget`: each
    /// row as it is decoded (a batch past the limits is not decoded whole),
    /// any other reply by its body.
    pub fn decode_within(header: &Header, body: &[u8], budget: &mut Budget) -> Result<Response> {
        if header.kind != response::ROWS {
            budget.charge_bytes(body.len() as u64)?;
        }
        let mut d = Decoder::new(body);
        Ok(match header.kind {
            response::FAILURE => Response::Failure {
                code: d.u64()?,
                message: d.text()?,
            },
            response::SERVER => Response::Server {
                id: d.u64()?,
                address: d.text()?,
            },
            response::WELCOME => Response::Welcome {
                heartbeat_timeout: d.u64()?,
            },
            response::SERVERS => {
                let n = d.u64()?;
                // Each node takes at least three words; refuse absurd counts.
                if n > (d.remaining() / 24) as u64 {
                    return Err(Error::protocol(format!("{n} nodes do not fit the body")));
                }
                let mut nodes = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    nodes.push(NodeInfo {
                        id: d.u64()?,
                        address: d.text()?,
                        role: d.u64()?,
                    });
                }
                Response::Servers(nodes)
            }
            response::DB => Response::Db {
                id: d.u32_pair()?.0,
            },
            response::STMT => {
                let (db, id) = d.u32_pair()?;
                Response::Stmt {
                    db,
                    id,
                    params: d.u64()?,
                }
            }
            response::RESULT => Response::Result {
                last_insert_id: d.i64()?,
                rows_affected: d.u64()?,
            },
            response::ROWS => Response::Rows(decode_rows(&mut d, budget)?),
            response::EMPTY => Response::Empty,
            other => return Err(Error::protocol(format!("unknown response type {other}"))),
        })
    }

    /// A short name for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Response::Failure { .. } => "failure",
            Response::Server { .. } => "server",
            Response::Welcome { .. } => "welcome",
            Response::Servers(_) => "servers",
            Response::Db { .. } => "db",
            Response::Stmt { .. } => "stmt",
            Response::Result { .. } => "result",
            Response::Rows(_) => "rows",
            Response::Empty => "empty",
        }
    }
}

fn decode_rows(d: &mut Decoder<'_>, budget: &mut Budget) -> Result<RowsBatch> {
    let n = d.u64()?;
    // Each column name takes at least one word.
    if n == 0 || n > (d.remaining() / 8) as u64 {
        return Err(Error::protocol(format!("rows with {n} columns")));
    }
    let columns = (0..n).map(|_| d.text()).collect::<Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    loop {
        match d.peek_u64() {
            Some(ROWS_DONE) => {
                d.u64()?;
                return Ok(RowsBatch {
                    columns,
                    rows,
                    more: false,
                });
            }
            Some(ROWS_PART) => {
                d.u64()?;
                return Ok(RowsBatch {
                    columns,
                    rows,
                    more: true,
                });
            }
            Some(_) => {
                let row = d.row(columns.len())?;
                budget.charge_row(&row)?;
                rows.push(row);
            }
            None => return Err(Error::protocol("rows response without an end marker")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::WORD;

    fn split(frame: &[u8]) -> (Header, &[u8]) {
        let mut w = [0u8; WORD];
        w.copy_from_slice(&frame[..WORD]);
        let h = Header::decode(w);
        assert_eq!(h.body_len(), frame.len() - WORD);
        (h, &frame[WORD..])
    }

    #[test]
    fn exec_sql_frame_layout() {
        let params = [Value::Integer(7)];
        let frame = Request::ExecSql {
            db: 0,
            sql: "SELECT ?",
            params: &params,
        }
        .encode()
        .unwrap();
        let (h, body) = split(&frame);
        assert_eq!(h.kind, request::EXEC_SQL);
        let mut d = Decoder::new(body);
        assert_eq!(d.u64().unwrap(), 0);
        assert_eq!(d.text().unwrap(), "SELECT ?");
        assert_eq!(d.params().unwrap(), params);
        assert!(d.is_empty());
    }

    #[test]
    fn exec_uses_a_u32_pair_and_open_sends_name_flags_vfs() {
        let frame = Request::Exec {
            db: 3,
            stmt: 9,
            params: &[],
        }
        .encode()
        .unwrap();
        assert_eq!(frame.len(), 16);
        assert_eq!(&frame[8..], &[3, 0, 0, 0, 9, 0, 0, 0]);
        let frame = Request::Open { name: "db" }.encode().unwrap();
        let (_, body) = split(&frame);
        let mut d = Decoder::new(body);
        assert_eq!(d.text().unwrap(), "db");
        assert_eq!(d.u64().unwrap(), 0);
        assert_eq!(d.text().unwrap(), "volatile");
    }

    #[test]
    fn membership_requests_carry_their_fields() {
        let frame = Request::Add {
            id: 0x1234,
            address: "10.0.0.2:9001",
        }
        .encode()
        .unwrap();
        let (h, body) = split(&frame);
        assert_eq!(h.kind, 12);
        let mut d = Decoder::new(body);
        assert_eq!(d.u64().unwrap(), 0x1234);
        assert_eq!(d.text().unwrap(), "10.0.0.2:9001");
        assert!(d.is_empty());
        // Assign sends the role after the id; without it a 1.x server reads
        // the older "promote to voter" request.
        let frame = Request::Assign { id: 5, role: 1 }.encode().unwrap();
        let (h, body) = split(&frame);
        assert_eq!(h.kind, 13);
        assert_eq!(body, &[5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        let frame = Request::Remove { id: 9 }.encode().unwrap();
        let (h, body) = split(&frame);
        assert_eq!(h.kind, 14);
        assert_eq!(body, &[9, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn rows_batch_decodes_columns_rows_and_marker() {
        let mut e = Encoder::new();
        e.u64(2).text("a").unwrap().text("b").unwrap();
        e.row(&[Value::Integer(1), Value::Text("x".into())])
            .unwrap();
        e.row(&[Value::Null, Value::Float(0.5)]).unwrap();
        e.u64(ROWS_PART);
        let body = e.body().to_vec();
        let h = Header {
            words: (body.len() / 8) as u32,
            kind: response::ROWS,
            revision: 0,
            extra: 0,
        };
        let Response::Rows(batch) = Response::decode(&h, &body).unwrap() else {
            panic!("not rows")
        };
        assert_eq!(batch.columns, vec!["a", "b"]);
        assert_eq!(batch.rows.len(), 2);
        assert!(batch.more);
        // Without its marker the batch is malformed.
        assert!(Response::decode(&h, &body[..body.len() - 8]).is_err());
    }

    #[test]
    fn failure_and_result_decode() {
        let mut e = Encoder::new();
        e.u64(10250).text("not leader").unwrap();
        let h = Header {
            words: 3,
            kind: response::FAILURE,
            revision: 0,
            extra: 0,
        };
        assert_eq!(
            Response::decode(&h, e.body()).unwrap(),
            Response::Failure {
                code: 10250,
                message: "not leader".into()
            }
        );
        let mut e = Encoder::new();
        e.i64(42).u64(1);
        let h = Header {
            words: 2,
            kind: response::RESULT,
            revision: 0,
            extra: 0,
        };
        assert_eq!(
            Response::decode(&h, e.body()).unwrap(),
            Response::Result {
                last_insert_id: 42,
                rows_affected: 1
            }
        );
    }
}
