//! Multi-row statements for batches (the call ledger, exposures, recall
//! counts): a statement per chunk of rows, not a statement per row, as each
//! statement is a round trip (on SQLite, to the connection's worker thread).

use loom_core::OpResult;
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AnyConnection};

use super::{Backend, db_error};

/// The most rows per statement: at 14 parameters a row (the ledger's) a
/// statement stays far below SQLite's and PostgreSQL's parameter limits.
const ROWS_PER_STATEMENT: usize = 64;

/// A statement with its parameters bound so far.
pub(crate) type AnyQuery<'q> = Query<'q, Any, AnyArguments<'q>>;

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
        let query = chunk.iter().fold(sqlx::query(&sql), &bind);
        query.execute(&mut *conn).await.map_err(db_error)?;
    }
    Ok(())
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
}
