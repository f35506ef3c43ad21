//! Multi-row statements for batches (the call ledger, exposures, recall
//! counts): a statement per chunk of rows, not a statement per row, as each
//! statement is a round trip (on SQLite, to the connection's worker thread).
//!
//! SQLite's direct writer ([`super::direct`]) has no round trips, and still
//! writes a chunk per statement ([`execute_chunked_direct`]): each run of a
//! statement costs SQLite nearly as much as the row it inserts (its
//! program starts, opens a cursor on the table and one on each index, for
//! the ledger reads and writes the AUTOINCREMENT counter, then halts and
//! resets), and a multi-row statement pays that once for up to 64 rows.
//! `bench/instructions.sh`, 2,000 calls: memory.get 229,447 -> 216,027
//! instructions a call (-5.8%; each get leaves a ledger row, an exposure
//! and an exposure count), memory.set 2,802,214 -> 2,736,702 (-2.3%).

use loom_core::OpResult;
use rusqlite::types::{ToSqlOutput, ValueRef};
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AnyConnection};

use super::{Backend, db_error};

/// The most rows per statement: at 14 parameters a row (the ledger's) a
/// statement stays far below SQLite's and PostgreSQL's parameter limits.
const ROWS_PER_STATEMENT: usize = 64;

/// A statement with its parameters bound so far.
pub(crate) type AnyQuery<'q> = Query<'q, Any, AnyArguments>;

/// The `VALUES` rows of a multi-row statement whose every parameter is in
/// the list, in order: `rows` tuples of `cols` parameters, written as
/// binds fastest on `backend`. PostgreSQL numbers them (`($1, $2), ($3,
/// $4)`); on SQLite they are anonymous (`(?, ?), (?, ?)`), as SQLite keeps
/// a statement's named parameters (`$n` is a name to it) in a list it
/// searches from the start for each one bound: binding the ~900
/// parameters of a 64-row ledger statement walked that list ~400,000
/// times, a tenth of the server's CPU under a read load.
fn values_list(backend: Backend, rows: usize, cols: usize) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 1..=cols {
            if c > 1 {
                out.push_str(", ");
            }
            match backend {
                Backend::Postgres => {
                    let _ = write!(out, "${}", r * cols + c);
                }
                Backend::Sqlite => out.push('?'),
            }
        }
        out.push(')');
    }
    out
}

/// `rows` cut into chunks: each as long as the largest power of two that
/// fits, up to `max`. A statement's text depends on its row count, and the
/// connection caches prepared statements by text; with power-of-two chunks
/// a batch of any length reuses a handful of cached statements instead of
/// preparing a new one per batch.
fn pow2_chunks<T>(mut rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        if rows.is_empty() {
            return None;
        }
        let fit = 1usize << rows.len().ilog2();
        let (chunk, rest) = rows.split_at(fit.min(max.max(1)));
        rows = rest;
        Some(chunk)
    })
}

/// Runs `statement(values)` once per chunk of `rows`, where `values` is the
/// chunk's `VALUES` rows of `cols` parameters each (the statement's only
/// parameters), which `bind` binds row by row.
pub(crate) async fn execute_chunked<T>(
    conn: &mut AnyConnection,
    rows: &[T],
    cols: usize,
    statement: impl Fn(&str) -> String,
    bind: impl for<'q> Fn(AnyQuery<'q>, &'q T) -> AnyQuery<'q>,
) -> OpResult<()> {
    let backend = Backend::of(conn);
    for chunk in pow2_chunks(rows, ROWS_PER_STATEMENT) {
        let sql = statement(&values_list(backend, chunk.len(), cols));
        let query = chunk
            .iter()
            .fold(sqlx::query(sqlx::AssertSqlSafe(sql)), &bind);
        query.execute(&mut *conn).await.map_err(db_error)?;
    }
    Ok(())
}

/// [`execute_chunked`] on a rusqlite connection (SQLite's direct writer):
/// `statement(values)` once per chunk of `rows`, where `values` is the
/// chunk's `VALUES` rows of `COLS` anonymous parameters each, and `row`
/// gives a row's values in that order. Answers the rows written.
pub(crate) fn execute_chunked_direct<T, const COLS: usize>(
    conn: &rusqlite::Connection,
    rows: &[T],
    statement: impl Fn(&str) -> String,
    row: impl for<'a> Fn(&'a T) -> [ValueRef<'a>; COLS],
) -> rusqlite::Result<usize> {
    for chunk in pow2_chunks(rows, ROWS_PER_STATEMENT) {
        let sql = statement(&values_list(Backend::Sqlite, chunk.len(), COLS));
        let mut stmt = conn.prepare_cached(&sql)?;
        let indexes = 1..;
        for (index, value) in indexes.zip(chunk.iter().flat_map(&row)) {
            stmt.raw_bind_parameter(index, ToSqlOutput::Borrowed(value))?;
        }
        stmt.raw_execute()?;
    }
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn pow2_chunks_cover_every_row_once_in_few_shapes() {
        let rows: Vec<usize> = (0..237).collect();
        let chunks: Vec<&[usize]> = super::pow2_chunks(&rows, 64).collect();
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        assert_eq!(lens, [64, 64, 64, 32, 8, 4, 1]);
        assert_eq!(chunks.concat(), rows);
        assert_eq!(super::pow2_chunks::<u8>(&[], 64).count(), 0);
    }

    #[test]
    fn values_list_writes_every_parameter_once() {
        use super::{Backend, values_list};
        assert_eq!(values_list(Backend::Postgres, 1, 1), "($1)");
        assert_eq!(
            values_list(Backend::Postgres, 2, 3),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(values_list(Backend::Sqlite, 2, 3), "(?, ?, ?), (?, ?, ?)");
    }

    /// Every row of a batch longer than a chunk is written once, with its
    /// values in their columns, and so is a batch of one.
    #[test]
    fn direct_chunks_write_every_row_in_its_columns() {
        use rusqlite::types::ValueRef;
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER, name TEXT, note TEXT)")
            .unwrap();
        let rows: Vec<(i64, String, Option<String>)> = (0..150)
            .map(|n| {
                (
                    n,
                    format!("row {n}"),
                    (n % 2 == 0).then(|| "even".to_owned()),
                )
            })
            .collect();
        let insert = |values: &str| format!("INSERT INTO t (n, name, note) VALUES {values}");
        fn values(r: &(i64, String, Option<String>)) -> [ValueRef<'_>; 3] {
            [
                ValueRef::Integer(r.0),
                ValueRef::from(r.1.as_str()),
                ValueRef::from(r.2.as_deref()),
            ]
        }
        let written = super::execute_chunked_direct(&conn, &rows, insert, values).unwrap();
        assert_eq!(written, 150);
        let one = [(150, "last".to_owned(), None)];
        super::execute_chunked_direct(&conn, &one, insert, values).unwrap();
        let stored: Vec<(i64, String, Option<String>)> = conn
            .prepare("SELECT n, name, note FROM t ORDER BY n")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(stored, [rows, one.to_vec()].concat());
    }
}
