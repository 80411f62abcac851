//! Reading a statement trace (see src/trace.rs of the addon) and recovering each statement's
//! bound values from its expanded SQL.

use std::collections::HashMap;

use rusqlite::types::Value;

/// One step of the replay.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Open { conn: u64, read_only: bool },
    Close { conn: u64 },
    Mark(String),
    Statement(Statement),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub conn: u64,
    pub template: usize,
    /// `(parameter index, value)`, 1-based as `sqlite3_bind_*` counts.
    pub params: Vec<(usize, Value)>,
    /// Rows the caller stepped through (0: executed once).
    pub rows: u64,
}

pub struct Trace {
    pub templates: Vec<String>,
    pub ops: Vec<Op>,
}

/// Parses the whole trace; statement values are recovered against their template.
pub fn parse(text: &str) -> Result<Trace, String> {
    let mut templates: Vec<String> = Vec::new();
    let mut ops = Vec::new();
    let mut statement_ops: Vec<usize> = Vec::new();
    let mut pending_rows: HashMap<u64, u64> = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let fail = |what: &str| format!("trace line {}: {what}", number + 1);
        let mut fields = line.splitn(4, '\t');
        let kind = fields.next().unwrap_or_default();
        let mut next = || fields.next().ok_or_else(|| fail("missing field"));
        match kind {
            "O" => ops.push(Op::Open {
                conn: number_of(next()?).map_err(|e| fail(&e))?,
                read_only: next()? == "1",
            }),
            "C" => ops.push(Op::Close {
                conn: number_of(next()?).map_err(|e| fail(&e))?,
            }),
            "M" => ops.push(Op::Mark(json_text(next()?).map_err(|e| fail(&e))?)),
            "T" => {
                let id: usize = number_of(next()?).map_err(|e| fail(&e))? as usize;
                if id != templates.len() {
                    return Err(fail("templates out of order"));
                }
                templates.push(json_text(next()?).map_err(|e| fail(&e))?);
            }
            "S" => {
                let conn = number_of(next()?).map_err(|e| fail(&e))?;
                let template = number_of(next()?).map_err(|e| fail(&e))? as usize;
                let expanded = json_text(next()?).map_err(|e| fail(&e))?;
                let sql = templates
                    .get(template)
                    .ok_or_else(|| fail("unknown template"))?;
                let params = recover_params(sql, &expanded).map_err(|e| fail(&e))?;
                statement_ops.push(ops.len());
                ops.push(Op::Statement(Statement {
                    conn,
                    template,
                    params,
                    rows: 0,
                }));
            }
            "R" => {
                let seq = number_of(next()?).map_err(|e| fail(&e))?;
                let rows = number_of(next()?).map_err(|e| fail(&e))?;
                pending_rows.insert(seq, rows);
            }
            "" => {}
            other => return Err(fail(&format!("unknown record {other:?}"))),
        }
    }
    for (seq, rows) in pending_rows {
        if let Some(Op::Statement(statement)) = statement_ops
            .get(seq as usize)
            .and_then(|&index| ops.get_mut(index))
        {
            statement.rows = rows;
        }
    }
    Ok(Trace { templates, ops })
}

fn number_of(text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("not a number: {text:?}"))
}

fn json_text(text: &str) -> Result<String, String> {
    serde_json::from_str(text).map_err(|error| format!("bad JSON string: {error}"))
}

/// The bound values of `expanded`, which is `template` with each parameter replaced by a
/// literal as `sqlite3_expanded_sql` writes it (NULL, integer, real, '…', x'…', zeroblob(n)).
pub fn recover_params(template: &str, expanded: &str) -> Result<Vec<(usize, Value)>, String> {
    let t = template.as_bytes();
    let e = expanded.as_bytes();
    let (mut i, mut j) = (0, 0);
    let mut params = Vec::new();
    let mut last_index = 0;
    let mut quote: Option<u8> = None;
    while i < t.len() {
        let c = t[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
        } else if c == b'\'' || c == b'"' || c == b'`' {
            quote = Some(c);
        } else if c == b'[' {
            quote = Some(b']');
        } else if c == b'-' && t.get(i + 1) == Some(&b'-') {
            let end = t[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(t.len(), |p| i + p);
            expect_same(t, e, i, j, end - i)?;
            j += end - i;
            i = end;
            continue;
        } else if c == b'/' && t.get(i + 1) == Some(&b'*') {
            let end = find(t, i + 2, b"*/").map_or(t.len(), |p| p + 2);
            expect_same(t, e, i, j, end - i)?;
            j += end - i;
            i = end;
            continue;
        } else if c == b'?' {
            let digits = t[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            let index = if digits == 0 {
                last_index + 1
            } else {
                number_of(&template[i + 1..i + 1 + digits])? as usize
            };
            last_index = last_index.max(index);
            let (value, length) = literal(&expanded[j..])?;
            params.push((index, value));
            i += 1 + digits;
            j += length;
            continue;
        } else if matches!(c, b':' | b'@' | b'$')
            && t.get(i + 1).is_some_and(u8::is_ascii_alphabetic)
        {
            return Err("named parameters are not supported".into());
        }
        if e.get(j) != Some(&c) {
            return Err(format!(
                "expanded SQL differs from its template at byte {i}"
            ));
        }
        i += 1;
        j += 1;
    }
    if j != e.len() {
        return Err("expanded SQL is longer than its template".into());
    }
    Ok(params)
}

fn find(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    haystack[from..]
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|p| from + p)
}

fn expect_same(t: &[u8], e: &[u8], i: usize, j: usize, length: usize) -> Result<(), String> {
    if e.get(j..j + length) == Some(&t[i..i + length]) {
        Ok(())
    } else {
        Err("expanded SQL differs from its template in a comment".into())
    }
}

/// One literal at the start of `text`: its value and its length in bytes.
fn literal(text: &str) -> Result<(Value, usize), String> {
    let b = text.as_bytes();
    if text.starts_with("NULL") {
        return Ok((Value::Null, 4));
    }
    if b.first() == Some(&b'\'') {
        let mut out = Vec::new();
        let mut k = 1;
        loop {
            match b.get(k) {
                None => return Err("unterminated text literal".into()),
                Some(b'\'') if b.get(k + 1) == Some(&b'\'') => {
                    out.push(b'\'');
                    k += 2;
                }
                Some(b'\'') => break,
                Some(&byte) => {
                    out.push(byte);
                    k += 1;
                }
            }
        }
        let text = String::from_utf8(out).map_err(|_| "text literal is not UTF-8".to_string())?;
        return Ok((Value::Text(text), k + 1));
    }
    if let Some(rest) = text.strip_prefix("x'") {
        let end = rest.find('\'').ok_or("unterminated blob literal")?;
        let hex = &rest[..end];
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|k| u8::from_str_radix(&hex[k..k + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| "bad blob literal".to_string())?;
        return Ok((Value::Blob(bytes), end + 3));
    }
    if let Some(rest) = text.strip_prefix("zeroblob(") {
        let end = rest.find(')').ok_or("unterminated zeroblob")?;
        let size: usize = rest[..end].parse().map_err(|_| "bad zeroblob size")?;
        return Ok((Value::Blob(vec![0; size]), "zeroblob(".len() + end + 1));
    }
    let length = b
        .iter()
        .enumerate()
        .take_while(|&(k, &c)| {
            c.is_ascii_digit()
                || c == b'.'
                || c == b'e'
                || c == b'E'
                || c == b'-' && (k == 0 || matches!(b[k - 1], b'e' | b'E'))
                || c == b'+'
        })
        .count();
    let number = &text[..length];
    if number.is_empty() {
        return Err(format!("no literal at {:?}", &text[..text.len().min(20)]));
    }
    if number.contains(['.', 'e', 'E']) {
        number
            .parse::<f64>()
            .map(|value| (Value::Real(value), length))
            .map_err(|_| format!("bad real literal {number:?}"))
    } else {
        number
            .parse::<i64>()
            .map(|value| (Value::Integer(value), length))
            .map_err(|_| format!("bad integer literal {number:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_each_kind_of_literal() {
        let template = "INSERT INTO t(a, b, c, d, e) VALUES (?, ?, ?, ?, ?) -- why?\n";
        let expanded =
            "INSERT INTO t(a, b, c, d, e) VALUES (NULL, -12, 'it''s ?', x'00ff', 1.5) -- why?\n";
        assert_eq!(
            recover_params(template, expanded).unwrap(),
            vec![
                (1, Value::Null),
                (2, Value::Integer(-12)),
                (3, Value::Text("it's ?".into())),
                (4, Value::Blob(vec![0, 255])),
                (5, Value::Real(1.5)),
            ]
        );
    }

    #[test]
    fn ignores_question_marks_in_quotes_and_numbers_parameters() {
        let template = "SELECT '?', \"a?\" FROM t WHERE x = ?2 AND y = ?1 AND z = ?";
        let expanded = "SELECT '?', \"a?\" FROM t WHERE x = 'b' AND y = 7 AND z = 1e+20";
        assert_eq!(
            recover_params(template, expanded).unwrap(),
            vec![
                (2, Value::Text("b".into())),
                (1, Value::Integer(7)),
                (3, Value::Real(1e20)),
            ]
        );
    }

    #[test]
    fn rejects_a_mismatch() {
        assert!(recover_params("SELECT ?", "SELECT 1 + 1").is_err());
    }
}
