//! Merging SQLite's full-text index while the store is quiet.
//!
//! FTS5 keeps its index as segments: every commit that changed memories'
//! text adds one (see `full_text_queue`), and its automerge combines them
//! a level at a time (two of a level into one of the next, migration
//! 0011), so a store that has seen writes holds a few segments: 4 after
//! the benchmark's pre-fill, 6-18 after 20 seconds of writes. A search
//! opens an iterator per word per segment, and walks them all: on 100,000
//! memories a fully merged index served 22% more searches a second than
//! the pre-filled one. Those merges are most of what the index costs a
//! write (23% of the direct writer's samples under `memory.set`); wider
//! ones (automerge 8) served 4-15% more sets, but the index they left
//! searched at half the rate until merged (bench/RESULTS.md), so two it
//! stays.
//!
//! Rewrites cost a search more than the segments they add. A changed
//! memory's old words stay in the segment that holds them, cancelled by
//! deletions in a newer segment, until a merge takes in both; the large
//! old segments are the last automerge reaches. After 20 seconds of
//! `memory.set` on 100,000 memories (most of them rewritten) the index
//! held 1.7 times the leaf pages of the pre-fill, and a search cost 1,190
//! µs of the server's CPU against 700-750 on the pre-filled index or the
//! same one fully merged; merging only its small segments (17 down to 4)
//! left it at 1,180.
//!
//! Merging everything into one segment rewrites the whole index, which
//! would be waste while writes keep adding segments (that is why FTS5's
//! own automerge does not). So the server merges only an index nobody has
//! written for a while (`loom-server`'s `full_text` worker), and only one
//! worth it: in [`MERGE_FROM_SEGMENTS`] segments or more, or grown by
//! [`MERGE_FROM_GROWTH_PCT`] percent in leaf pages over its size after
//! the last full merge (before one, the fewest pages seen the index hold).
//! That clean size is kept in the store ([`CLEAN_PAGES`]), so a restart
//! counts growth from it: counting from what a new server first sees, a
//! server restarted more often than its index grows by a quarter would
//! never merge it, and one restarted right after a burst of rewrites
//! would leave searches walking the stale words until the next quarter
//! (after 20 s of sets on 100,000 memories, 2,233 searches/s at p99 42 ms
//! against 3,633 at 17 once merged). It merges in steps of [`STEP_PAGES`] pages,
//! each a write of its own through the one writer, and stops as soon as
//! anyone else writes the index.

use loom_core::OpResult;

use super::{Backend, Store, db_error};

/// Pages one merge step writes (FTS5's `merge` command with -N): ~10-30
/// ms of the writer, which other writes wait behind; a pause as long
/// follows each.
const STEP_PAGES: i64 = 200;
/// A quiet index is merged from this many segments up: fewer cost a search
/// little, and each merge rewrites the whole index.
const MERGE_FROM_SEGMENTS: i64 = 8;
/// ... or from this much growth of its leaf pages (stale words and their
/// deletions, or new memories) over its clean size. A full merge
/// rewrites every page, so at a quarter the index is rewritten at most
/// once per quarter of its size written anew: about five pages written
/// for each page of growth, as an LSM tree's upkeep goes.
const MERGE_FROM_GROWTH_PCT: i64 = 25;
/// The `settings` row keeping the index's clean size in leaf pages.
const CLEAN_PAGES: &str = "full_text.clean_pages";
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
    /// The rows queued for the index (`full_text_queue`): writes show here
    /// before the index takes them, a batch at a time.
    queued: i64,
    /// How many segments the index holds.
    pub segments: i64,
    /// The leaf pages of all its segments (`None`: a structure record
    /// this code cannot read; only the segment count then decides).
    pub pages: Option<i64>,
}

/// What the merge worker remembers between two looks at the index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FullTextWatch {
    /// The index at the last look.
    last: Option<FullTextState>,
    /// Its clean size: its leaf pages after the last full merge, or the
    /// fewest it held at any look since (or before one).
    least_pages: Option<i64>,
    /// The clean size as the store keeps it ([`CLEAN_PAGES`]); `None`
    /// until read.
    saved: Option<Option<i64>>,
}

impl FullTextWatch {
    /// Remembers a look; true when nobody wrote the index since the last.
    fn look(&mut self, now: &FullTextState) -> bool {
        let quiet = self.last.as_ref() == Some(now);
        if let Some(pages) = now.pages {
            self.least_pages = Some(self.least_pages.map_or(pages, |least| least.min(pages)));
        }
        self.last = Some(now.clone());
        quiet
    }

    /// Goes on from the clean size the store kept (`saved`), should it be
    /// smaller than the fewest pages seen so far.
    fn resume(&mut self, saved: Option<i64>) {
        self.least_pages = match (self.least_pages, saved) {
            (Some(seen), Some(saved)) => Some(seen.min(saved)),
            (seen, saved) => seen.or(saved),
        };
        self.saved = Some(saved);
    }

    /// The clean size to keep in the store, when it differs from what the
    /// store holds.
    fn to_save(&self) -> Option<i64> {
        let saved = self.saved?;
        self.least_pages.filter(|&pages| Some(pages) != saved)
    }

    /// Remembers that a merge finished at the last look: the index's size
    /// then is its clean size from now on, grown or shrunk (new memories
    /// merged in are not growth to merge again).
    fn merged(&mut self) {
        self.least_pages = self.last.as_ref().and_then(|last| last.pages);
    }

    /// Whether the index, as last seen, is worth a full merge.
    fn worth_merging(&self) -> bool {
        let Some(now) = &self.last else {
            return false;
        };
        let grown = match (now.pages, self.least_pages) {
            (Some(pages), Some(least)) => {
                i128::from(pages) * 100
                    >= i128::from(least) * i128::from(100 + MERGE_FROM_GROWTH_PCT)
            }
            _ => false,
        };
        now.segments >= MERGE_FROM_SEGMENTS || (now.segments >= 2 && grown)
    }
}

/// The segments and leaf pages FTS5's structure record lists, read as
/// SQLite's `fts5StructureDecode` reads it: a 4-byte cookie, a 4-byte
/// marker on a version-2 record, then varints: the levels, the segments,
/// a write counter, and per level the segments being merged and its
/// segments, each an id, a first and a last leaf page (five more varints
/// each on a version-2 record). `None` for a record it cannot read.
fn decode_structure(record: &[u8]) -> Option<(i64, i64)> {
    const V2: [u8; 4] = [0xff, 0x00, 0x00, 0x01];
    let mut at = 4;
    let v2 = record.get(4..8) == Some(&V2[..]);
    if v2 {
        at += 4;
    }
    let mut next = || varint(record, &mut at);
    let levels = next()?;
    let segments = next()?;
    next()?; // the write counter
    let (mut counted, mut pages) = (0_u64, 0_u64);
    for _ in 0..levels {
        next()?; // segments being merged
        let on_level = next()?;
        for _ in 0..on_level {
            next()?; // the segment's id
            let (first, last) = (next()?, next()?);
            pages = pages.checked_add(last.checked_sub(first)?.checked_add(1)?)?;
            if v2 {
                for _ in 0..5 {
                    next()?;
                }
            }
        }
        counted = counted.checked_add(on_level)?;
    }
    (counted == segments)
        .then(|| Some((i64::try_from(segments).ok()?, i64::try_from(pages).ok()?)))
        .flatten()
}

/// One of SQLite's varints at `at`: big-endian groups of 7 bits, the high
/// bit set on every byte but the last; a ninth byte gives all its 8 bits.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0_u64;
    for n in 0..9 {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if n == 8 {
            return Some((value << 8) | u64::from(byte));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

impl Store {
    /// The full-text index's state; `None` on PostgreSQL (its GIN index
    /// needs no merging of ours).
    pub async fn full_text_state(&self) -> OpResult<Option<FullTextState>> {
        if self.backend() != Backend::Sqlite {
            return Ok(None);
        }
        // id 10 is FTS5's structure record: it lists the segments and their
        // pages. Counting the segments in the term index instead, a scan of
        // it, is left for a record this code cannot read.
        let structure: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT block FROM memories_fts_data WHERE id = 10")
                .fetch_optional(self.reader())
                .await
                .map_err(db_error)?;
        let structure = structure.unwrap_or_default();
        let (segments, pages) = match decode_structure(&structure) {
            Some((segments, pages)) => (segments, Some(pages)),
            None => (
                sqlx::query_scalar("SELECT count(DISTINCT segid) FROM memories_fts_idx")
                    .fetch_one(self.reader())
                    .await
                    .map_err(db_error)?,
                None,
            ),
        };
        Ok(Some(FullTextState {
            structure,
            queued: self.queued_for_full_text().await?,
            segments,
            pages,
        }))
    }

    /// One look at the full-text index, for a worker that looks every
    /// quarter of a second or so: when nobody wrote it since the last look
    /// (`watch`) and it is worth it (the module doc), merges it step by
    /// step into one, stopping early when a segment it did not write
    /// appears (someone wrote). `None` when it did not merge.
    pub async fn merge_full_text_if_quiet(
        &self,
        watch: &mut FullTextWatch,
    ) -> OpResult<Option<Merged>> {
        let Some(mut now) = self.full_text_state().await? else {
            return Ok(None);
        };
        if watch.saved.is_none() {
            watch.resume(self.saved_clean_pages().await?);
        }
        if !watch.look(&now) || !watch.worth_merging() {
            self.save_clean_pages(watch).await?;
            return Ok(None);
        }
        if now.queued > 0 {
            // Rows a write left queued (the last of a burst): every write
            // hands them to the index, the first merge step's too, and the
            // segments they add would read as someone else's write.
            self.index_queued_writes().await?;
            let Some(after) = self.full_text_state().await? else {
                return Ok(None);
            };
            watch.look(&after);
            now = after;
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
            // it is as long, so under load the batched bookkeeping of
            // reads (recall counts, the ledger) and the reads themselves
            // keep half of both while a merge runs. Why not longer: the
            // searches meanwhile walk the unmerged index at about half
            // their rate, so the sooner it is merged the better for them
            // (paused three times as long, 100,000 memories took 1.7 s to
            // merge instead of 0.8, and searches were slow that much longer).
            tokio::time::sleep(started.elapsed()).await;
            let Some(after) = self.full_text_state().await? else {
                break;
            };
            merged.to = after.segments;
            watch.look(&after);
            if after.segments > most {
                merged.interrupted = true;
                break;
            }
            most = after.segments;
        }
        if !merged.interrupted {
            watch.merged();
            self.save_clean_pages(watch).await?;
            // The merge read and wrote the whole index through the writer.
            self.release_writer_pages().await.map_err(db_error)?;
        }
        Ok(Some(merged))
    }

    /// The clean size the store keeps ([`CLEAN_PAGES`]); `None` before
    /// the first look of any server at the index.
    async fn saved_clean_pages(&self) -> OpResult<Option<i64>> {
        let mut conn = self.read().await?;
        let value = super::settings::read(&mut conn, CLEAN_PAGES)
            .await
            .map_err(db_error)?;
        // A value this code did not write counts as none: the size is then
        // counted from what this server sees.
        Ok(value.and_then(|v| v.parse().ok()))
    }

    /// Keeps the watch's clean size in the store when it changed: at the
    /// first look of a store's first server, after each full merge, and
    /// when the index shrinks below it.
    async fn save_clean_pages(&self, watch: &mut FullTextWatch) -> OpResult<()> {
        let Some(pages) = watch.to_save() else {
            return Ok(());
        };
        let mut tx = self.begin_write().await?;
        super::settings::write(tx.conn(), CLEAN_PAGES, &pages.to_string())
            .await
            .map_err(db_error)?;
        tx.commit_unaudited().await?;
        watch.saved = Some(Some(pages));
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Records read from the benchmark's stores: the pre-filled index (4
    /// segments of 120, 349, 697 and 1393 pages) and the same after 20
    /// seconds of `memory.set` (17 segments on 6 levels).
    #[test]
    fn structure_records_give_their_segments_and_pages() {
        let prefilled = bytes("000000010404940b000101017800010701825d000104018539000103018a71");
        assert_eq!(decode_structure(&prefilled), Some((4, 2559)));
        let rewritten = bytes(
            "000000010a1181812a000c0401010601010701020801010901010a01020b01010c01020d01010e01010f\
             0102100101000115010b000103011e000000000000000102018266000000010101897e000105019514",
        );
        assert_eq!(decode_structure(&rewritten), Some((17, 4401)));
        // Cut short, or counting segments it does not list: unreadable.
        assert_eq!(decode_structure(&prefilled[..prefilled.len() - 1]), None);
        let mut miscounted = prefilled.clone();
        miscounted[5] = 5;
        assert_eq!(decode_structure(&miscounted), None);
        assert_eq!(decode_structure(&[]), None);
        // A segment whose last page comes before its first, or page
        // numbers past any count: unreadable, not a panic.
        let mut backwards = prefilled.clone();
        backwards[11] = 0x79; // first page 121, last 120
        assert_eq!(decode_structure(&backwards), None);
        // One level, one segment: id 1, pages 0 to u64::MAX.
        let mut huge = bytes("00000001010100000101");
        huge.push(0x00);
        huge.extend([0xff; 9]);
        assert_eq!(decode_structure(&huge), None);
    }

    #[test]
    fn varints_take_seven_bits_a_byte_and_all_eight_of_a_ninth() {
        let read = |b: &[u8]| varint(b, &mut 0);
        assert_eq!(read(&[0x78]), Some(120));
        assert_eq!(read(&[0x82, 0x5d]), Some(349));
        assert_eq!(read(&[0xff; 9]), Some(u64::MAX));
        assert_eq!(read(&[0x80]), None);
    }

    fn state(segments: i64, pages: i64, cookie: u8) -> FullTextState {
        FullTextState {
            structure: vec![cookie],
            queued: 0,
            segments,
            pages: Some(pages),
        }
    }

    #[test]
    fn a_quiet_index_is_worth_merging_when_fragmented_or_grown() {
        let mut watch = FullTextWatch::default();
        assert!(!watch.look(&state(4, 1000, 1)));
        assert!(watch.look(&state(4, 1000, 1)));
        assert!(!watch.worth_merging());
        // Writes queued for the index and not in it yet: not quiet.
        let queued = FullTextState {
            queued: 2,
            ..state(4, 1000, 1)
        };
        assert!(!watch.look(&queued));
        assert!(!watch.look(&state(4, 1000, 1)));
        // Grown by a fifth: not yet.
        watch.look(&state(5, 1200, 2));
        assert!(!watch.worth_merging());
        // By a quarter over the fewest pages seen.
        watch.look(&state(5, 1250, 3));
        assert!(watch.worth_merging());
        // One segment, however large, has nothing to merge.
        watch.look(&state(1, 5000, 4));
        assert!(!watch.worth_merging());
        // Eight segments, grown or not.
        watch.look(&state(8, 1000, 5));
        assert!(watch.worth_merging());
        // Merged into one larger than the fewest pages seen (new memories):
        // the new size is the one growth counts from.
        watch.look(&state(1, 1400, 6));
        watch.merged();
        watch.look(&state(2, 1450, 7));
        assert!(!watch.worth_merging());
        watch.look(&state(2, 1750, 8));
        assert!(watch.worth_merging());
        // A record this code cannot read: only the segments count.
        let unread = FullTextState {
            pages: None,
            ..state(7, 0, 9)
        };
        watch.look(&unread);
        assert!(!watch.worth_merging());
    }

    #[test]
    fn a_restart_counts_growth_from_the_clean_size_the_store_kept() {
        // The store kept 1,000 pages; the index holds 1,300 in 3 segments.
        let mut watch = FullTextWatch::default();
        watch.resume(Some(1000));
        watch.look(&state(3, 1300, 1));
        assert!(watch.worth_merging());
        assert_eq!(watch.to_save(), None, "the store holds it already");
        // Counted from what it first sees, the same index is not worth it.
        let mut fresh = FullTextWatch::default();
        fresh.look(&state(3, 1300, 1));
        assert!(!fresh.worth_merging());
        assert_eq!(fresh.to_save(), None, "the kept size not read yet");
        // The index shrunk below the kept size (memories forgotten), then
        // merged larger: each is the clean size to keep.
        watch.look(&state(3, 900, 2));
        assert_eq!(watch.to_save(), Some(900));
        watch.look(&state(1, 1100, 3));
        watch.merged();
        assert_eq!(watch.to_save(), Some(1100));
        // A store no server looked at yet: the fewest pages seen.
        let mut first = FullTextWatch::default();
        first.resume(None);
        first.look(&state(2, 800, 1));
        assert_eq!(first.to_save(), Some(800));
    }
}
