//! How many memories hold each search term: the document frequencies
//! SQLite search ranks with (`loom_bm25`, see the loom-fts5 crate).
//!
//! FTS5's own bm25() counted them on every query by walking each term's
//! whole doclist, half of a search's CPU over 100,000 memories. A common
//! term's count moves by a fraction of a percent a second even under heavy
//! writing, and it only sets how much the term weighs against the query's
//! other terms, so it is counted once and kept for [`KEEP_FOR`]. A rare
//! term costs next to nothing to count and is counted on every query, so
//! a small store ranks exactly as bm25() would.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use foldhash::HashMap;
use loom_core::OpResult;
use sqlx::AnyConnection;

use crate::store::db_error;

/// Counts from this size up are kept; smaller ones are recounted per query.
const KEEP_FROM: i64 = 1_000;
/// How long a kept count is used before it is counted again.
const KEEP_FOR: Duration = Duration::from_secs(10);
/// The most terms kept; past it the whole map is dropped and refills.
const MOST_KEPT: usize = 10_000;

/// Kept document frequencies of one store.
#[derive(Debug, Default)]
pub struct DocFreqs {
    kept: Mutex<HashMap<String, (i64, Instant)>>,
}

impl DocFreqs {
    /// The number of rows of the full-text index holding each of `terms`
    /// (letters and digits only, as [`super::rank::terms`] makes them).
    pub async fn counts(&self, conn: &mut AnyConnection, terms: &[String]) -> OpResult<Vec<i64>> {
        let mut out = Vec::with_capacity(terms.len());
        for term in terms {
            if let Some(n) = self.kept(term) {
                out.push(n);
                continue;
            }
            let (n,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH $1")
                    .bind(format!("\"{term}\""))
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db_error)?;
            if n >= KEEP_FROM {
                self.keep(term, n);
            }
            out.push(n);
        }
        Ok(out)
    }

    fn kept(&self, term: &str) -> Option<i64> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.get(term)
            .filter(|(_, at)| at.elapsed() < KEEP_FOR)
            .map(|(n, _)| *n)
    }

    fn keep(&self, term: &str, n: i64) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MOST_KEPT && !kept.contains_key(term) {
            kept.clear();
        }
        kept.insert(term.to_owned(), (n, Instant::now()));
    }
}
