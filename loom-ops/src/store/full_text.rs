//! Merging SQLite's full-text index while the store is quiet.
//!
//! FTS5 keeps its index as segments: every commit that changed memories'
//! text adds one (see `full_text_queue`), and its automerge combines them
//! a level at a time (two of a level into one of the next, migration
//! 0011), so a store that has seen writes holds a few segments: 4 after
//! the benchmark's pre-fill, about 6 after 20 seconds of writes. A search opens an iterator per word per segment, and
//! walks them all: on 100,000 memories a fully merged index served 22%
//! more searches a second than the pre-filled one.
//!
//! Merging everything into one segment rewrites the whole index, which
//! would be waste while writes keep adding segments (that is why FTS5's
//! own automerge does not). So the server merges only an index nobody has
//! written for a while (`loom-server`'s `full_text` worker), in steps of
//! [`STEP_PAGES`] pages, each a write of its own through the one writer,
//! and stops as soon as anyone else writes the index.

use loom_core::OpResult;

use super::{Backend, Store, db_error};

/// Pages one merge step writes (FTS5's `merge` command with -N): ~10-30
/// ms of the writer, which other writes wait behind; a pause three times
/// as long follows each.
const STEP_PAGES: i64 = 200;
/// A quiet index is merged from this many segments up: fewer cost a search
/// little, and each merge rewrites the whole index.
const MERGE_FROM_SEGMENTS: i64 = 8;
/// A bound on one merge's steps (10 for 100,000 memories), should the index
/// never settle.
const MOST_STEPS: u32 = 10_000;

/// What one merge did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// Segments before.
    pub from: i64,
    /// Segments after.
    pub to: i64,
    /// Merge steps taken.
    pub steps: u32,
    /// Someone else wrote the index meanwhile, so the merge stopped early.
    pub interrupted: bool,
}

/// What the full-text index looks like now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullTextState {
    /// FTS5's structure record: it changes with every write to the index
    /// (its cookie counts them), so equal records mean nobody wrote.
    structure: Vec<u8>,
    /// How many segments the index holds.
    pub segments: i64,
}

impl Store {
    /// The full-text index's state; `None` on PostgreSQL (its GIN index
    /// needs no merging of ours).
    pub async fn full_text_state(&self) -> OpResult<Option<FullTextState>> {
        if self.backend() != Backend::Sqlite {
            return Ok(None);
        }
        // id 10 is FTS5's structure record.
        let (structure, segments): (Option<Vec<u8>>, i64) = sqlx::query_as(
            "SELECT (SELECT block FROM memories_fts_data WHERE id = 10), \
                    (SELECT count(DISTINCT segid) FROM memories_fts_idx)",
        )
        .fetch_one(self.reader())
        .await
        .map_err(db_error)?;
        Ok(Some(FullTextState {
            structure: structure.unwrap_or_default(),
            segments,
        }))
    }

    /// One look at the full-text index, for a worker that looks every few
    /// seconds: when nobody wrote it since the last look (`last`) and it
    /// holds [`MERGE_FROM_SEGMENTS`] segments or more, merges it step by
    /// step into one, stopping early when a segment it did not write
    /// appears (someone wrote). `None` when it did not merge.
    pub async fn merge_full_text_if_quiet(
        &self,
        last: &mut Option<FullTextState>,
    ) -> OpResult<Option<Merged>> {
        let Some(now) = self.full_text_state().await? else {
            return Ok(None);
        };
        let quiet = last.as_ref() == Some(&now);
        *last = Some(now.clone());
        if !quiet || now.segments < MERGE_FROM_SEGMENTS {
            return Ok(None);
        }
        let mut merged = Merged {
            from: now.segments,
            to: now.segments,
            steps: 0,
            interrupted: false,
        };
        // The first step adds the segment it merges into.
        let mut most = now.segments + 1;
        loop {
            let started = std::time::Instant::now();
            if merged.steps >= MOST_STEPS || !self.merge_full_text_step().await? {
                break;
            }
            merged.steps += 1;
            // Paced: a step takes the writer and a core; the pause after
            // it is three times as long, so under load the batched
            // bookkeeping of reads (recall counts, the ledger) and the
            // reads themselves keep most of both while a merge runs.
            tokio::time::sleep(started.elapsed() * 3).await;
            let Some(after) = self.full_text_state().await? else {
                break;
            };
            merged.to = after.segments;
            *last = Some(after.clone());
            if after.segments > most {
                merged.interrupted = true;
                break;
            }
            most = after.segments;
        }
        Ok(Some(merged))
    }

    /// One merge step towards a single segment (SQLite); false when there
    /// was nothing left to merge.
    pub async fn merge_full_text_step(&self) -> OpResult<bool> {
        if self.backend() != Backend::Sqlite {
            return Ok(false);
        }
        let mut tx = self.begin_write().await?;
        // FTS5's documented test: a step that changed fewer than two rows
        // found nothing to merge.
        let (changed,): (i64,) = sqlx::query_as("SELECT total_changes()")
            .fetch_one(tx.conn())
            .await
            .map_err(db_error)?;
        sqlx::query("INSERT INTO memories_fts (memories_fts, rank) VALUES ('merge', $1)")
            .bind(-STEP_PAGES)
            .execute(tx.conn())
            .await
            .map_err(db_error)?;
        let (after,): (i64,) = sqlx::query_as("SELECT total_changes()")
            .fetch_one(tx.conn())
            .await
            .map_err(db_error)?;
        tx.commit_unaudited().await?;
        Ok(after - changed >= 2)
    }
}
