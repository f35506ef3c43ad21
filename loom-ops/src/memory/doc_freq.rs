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
//!
//! A count is made once, however many searches want it at the same time:
//! the first counts, and the others wait for its answer. On a fresh server
//! every search's words are new, and 32 searches at once each walked the
//! same doclists (on an index fragmented by writes, ~1 ms a word: the
//! first second of searches ran at a p99 of 56-63 ms, against 39-41 with
//! the counts made beforehand). A count older than [`KEEP_FOR`] is counted
//! again by the first search to find it so, while the others go on using
//! it: searches never all wait for their words at once, as they did when
//! every count made in a server's first second expired together.

use std::sync::Mutex;
use std::time::Duration;

use foldhash::HashMap;
use loom_core::OpResult;
use sqlx::AnyConnection;
use tokio::sync::watch;
use tokio::time::Instant;

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
    kept: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
enum Entry {
    /// A count, and when it was made (or its recount begun).
    Kept(i64, Instant),
    /// Being counted by one search; the others wait for its answer here
    /// (`None` until it comes; the sender dropped: the count failed).
    Counting(watch::Receiver<Option<i64>>),
}

/// What a search does for one term.
enum Claim {
    /// Use this count.
    Use(i64),
    /// Count it, for everyone ([`Counting`] puts the answer in the map).
    Count(watch::Sender<Option<i64>>),
    /// Count it again: the kept count is stale, and the others use it
    /// meanwhile.
    Recount,
    /// Wait for the search counting it.
    Wait(watch::Receiver<Option<i64>>),
}

impl DocFreqs {
    /// The number of rows of the full-text index holding each of `terms`
    /// (letters and digits only, as [`super::rank::terms`] makes them).
    pub async fn counts(&self, conn: &mut AnyConnection, terms: &[String]) -> OpResult<Vec<i64>> {
        let mut out = Vec::with_capacity(terms.len());
        for term in terms {
            let n = self
                .count_with(term, async |term| {
                    let (n,): (i64,) = sqlx::query_as(
                        "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH $1",
                    )
                    .bind(format!("\"{term}\""))
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db_error)?;
                    Ok(n)
                })
                .await?;
            out.push(n);
        }
        Ok(out)
    }

    /// `term`'s count: kept, waited for, or counted with `count`.
    async fn count_with(
        &self,
        term: &str,
        count: impl AsyncFnOnce(&str) -> OpResult<i64>,
    ) -> OpResult<i64> {
        let sender = loop {
            match self.claim(term) {
                Claim::Use(n) => return Ok(n),
                Claim::Count(sender) => break sender,
                Claim::Recount => {
                    let n = count(term).await?;
                    self.settle(term, n, None);
                    return Ok(n);
                }
                Claim::Wait(mut waiting) => {
                    // Err: the counting search failed or was dropped; the
                    // map no longer names it, so look again.
                    if let Ok(answer) = waiting.wait_for(Option::is_some).await
                        && let Some(n) = *answer
                    {
                        return Ok(n);
                    }
                }
            }
        };
        let counting = Counting {
            freqs: self,
            term,
            sender,
        };
        let n = count(term).await?;
        counting.done(n);
        Ok(n)
    }

    fn claim(&self, term: &str) -> Claim {
        let mut kept = self.lock();
        match kept.get_mut(term) {
            Some(Entry::Kept(n, at)) if at.elapsed() < KEEP_FOR => Claim::Use(*n),
            Some(Entry::Kept(_, at)) => {
                // Stale: this search recounts it and the others use it
                // meanwhile, as if it had been counted now (a failed
                // recount leaves it so for another KEEP_FOR).
                *at = Instant::now();
                Claim::Recount
            }
            Some(Entry::Counting(waiting)) => Claim::Wait(waiting.clone()),
            None => {
                if kept.len() >= MOST_KEPT {
                    kept.clear();
                }
                let (sender, waiting) = watch::channel(None);
                kept.insert(term.to_owned(), Entry::Counting(waiting));
                Claim::Count(sender)
            }
        }
    }

    /// Files `term`'s count `n`: kept when common; when rare, counted per
    /// query from here on, so the entry goes (unless it is another count's
    /// claim: the map was cleared and the term claimed again since; `ours`
    /// is the claim of the count filing it, if any).
    fn settle(&self, term: &str, n: i64, ours: Option<&watch::Sender<Option<i64>>>) {
        let mut kept = self.lock();
        if n >= KEEP_FROM {
            kept.insert(term.to_owned(), Entry::Kept(n, Instant::now()));
        } else if matches!(kept.get(term), Some(Entry::Kept(..)))
            || ours.is_some_and(|ours| owns(ours, kept.get(term)))
        {
            kept.remove(term);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One search counting a term for everyone: its answer goes in the map (a
/// common term's) and to the searches waiting for it. Dropped without an
/// answer (the count failed, or the call was dropped), it takes its claim
/// out of the map, and the searches waiting for it look again.
struct Counting<'a> {
    freqs: &'a DocFreqs,
    term: &'a str,
    sender: watch::Sender<Option<i64>>,
}

impl Counting<'_> {
    fn done(self, n: i64) {
        self.freqs.settle(self.term, n, Some(&self.sender));
        self.sender.send_replace(Some(n));
        // The map no longer names this count: dropping it changes nothing.
    }
}

impl Drop for Counting<'_> {
    fn drop(&mut self) {
        let mut kept = self.freqs.lock();
        if self.sender.borrow().is_none() && owns(&self.sender, kept.get(self.term)) {
            kept.remove(self.term);
        }
    }
}

/// Whether `entry` is the claim `sender` answers (the map may have been
/// cleared and the term claimed again since).
fn owns(sender: &watch::Sender<Option<i64>>, entry: Option<&Entry>) -> bool {
    matches!(entry, Some(Entry::Counting(w)) if w.same_channel(&sender.subscribe()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use loom_core::LoomError;
    use tokio::sync::Notify;

    use super::*;

    /// A count of `n` that tallies its runs and waits for `open` (when
    /// given) before answering, so tests can hold it in flight.
    fn counter(
        runs: &AtomicUsize,
        n: i64,
        open: Option<Arc<Notify>>,
    ) -> impl AsyncFnOnce(&str) -> OpResult<i64> {
        async move |_term| {
            runs.fetch_add(1, Ordering::SeqCst);
            if let Some(open) = open {
                open.notified().await;
            }
            Ok(n)
        }
    }

    #[tokio::test]
    async fn searches_at_once_share_one_count() {
        let freqs = DocFreqs::default();
        let runs = AtomicUsize::new(0);
        let open = Arc::new(Notify::new());
        let first = freqs.count_with("deploy", counter(&runs, 5_000, Some(open.clone())));
        let second = freqs.count_with("deploy", counter(&runs, 7, None));
        let third = freqs.count_with("deploy", counter(&runs, 7, None));
        let opener = async {
            // Every search has claimed or is waiting before the count ends.
            tokio::task::yield_now().await;
            open.notify_one();
        };
        let (a, b, c, ()) = tokio::join!(first, second, third, opener);
        assert_eq!((a.unwrap(), b.unwrap(), c.unwrap()), (5_000, 5_000, 5_000));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_count_leaves_the_waiting_to_count_again() {
        let freqs = DocFreqs::default();
        let runs = AtomicUsize::new(0);
        let open = Arc::new(Notify::new());
        let failing = freqs.count_with("deploy", async |_| {
            open.notified().await;
            Err(LoomError::internal("the store went away"))
        });
        let waiting = freqs.count_with("deploy", counter(&runs, 4_000, None));
        let opener = async {
            tokio::task::yield_now().await;
            open.notify_one();
        };
        let (failed, counted, ()) = tokio::join!(failing, waiting, opener);
        assert!(failed.is_err());
        assert_eq!(counted.unwrap(), 4_000);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // The second count is kept.
        assert_eq!(
            freqs
                .count_with("deploy", counter(&runs, 1, None))
                .await
                .unwrap(),
            4_000
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn rare_terms_are_counted_every_time() {
        let freqs = DocFreqs::default();
        let runs = AtomicUsize::new(0);
        for _ in 0..3 {
            let n = freqs.count_with("postgres", counter(&runs, 12, None)).await;
            assert_eq!(n.unwrap(), 12);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert!(freqs.lock().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_count_is_recounted_by_one_search_while_others_use_it() {
        let freqs = DocFreqs::default();
        let runs = AtomicUsize::new(0);
        let n = freqs
            .count_with("deploy", counter(&runs, 5_000, None))
            .await;
        assert_eq!(n.unwrap(), 5_000);
        tokio::time::advance(KEEP_FOR - Duration::from_millis(1)).await;
        let n = freqs.count_with("deploy", counter(&runs, 9, None)).await;
        assert_eq!((n.unwrap(), runs.load(Ordering::SeqCst)), (5_000, 1));

        tokio::time::advance(Duration::from_millis(1)).await;
        let open = Arc::new(Notify::new());
        let recount = freqs.count_with("deploy", counter(&runs, 5_100, Some(open.clone())));
        let meanwhile = async {
            tokio::task::yield_now().await;
            // The recount is in flight: the stale count still answers.
            let n = freqs.count_with("deploy", counter(&runs, 9, None)).await;
            open.notify_one();
            n
        };
        let (recounted, meanwhile) = tokio::join!(recount, meanwhile);
        assert_eq!((recounted.unwrap(), meanwhile.unwrap()), (5_100, 5_000));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        let n = freqs.count_with("deploy", counter(&runs, 9, None)).await;
        assert_eq!((n.unwrap(), runs.load(Ordering::SeqCst)), (5_100, 2));
    }
}
