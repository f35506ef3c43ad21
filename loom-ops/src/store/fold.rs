//! Sums gathered per key off the request path and written a slice at a
//! time: what a batch sink holds back ([`super::BatchSink::holds`]) when
//! many rows would each rewrite a random page, as the usage log's recall
//! and exposure counts would (`memory::usage`).

use std::collections::BTreeMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use foldhash::{HashMap, HashMapExt};

/// How long recalls and exposure counts are gathered and summed before
/// they are written. A recall lands on a random row of `memories`:
/// written with its batch, each batch rewrote about as many pages of the
/// table as it had recalls (~1,750 of the bench's 6,776 pages for a batch
/// of 2,000, ten batches a second). Gathered and written in the order of
/// the rows' ids, where they lie in the table on SQLite, each page is
/// written about once a fold however many of its rows were recalled. The
/// same holds for the exposure counts, in key order.
///
/// Why five seconds, not one: under memory.get's full load (~13,000 gets
/// a second over 100,000 memories) a second's recalls still touched ~80%
/// of the table's pages, so each page went to the WAL and was checkpointed
/// about once a second. Over five seconds each is written once in five:
/// the direct writer's thread used 35% less CPU (385-394 against 592-603
/// ticks in paired 20 s runs), and gets served 0-16% more a second with
/// no p99 behind a writer that fell behind (8.1-9.7 ms, against 8.4-377
/// ms). The cost: another caller sees a recall within about six seconds
/// instead of two (a caller's own count never waits, `memory::usage`), and
/// a `kill -9` can lose that much more of these counts.
pub const FOLD: Duration = Duration::from_secs(5);

/// The most gathered rows written with one batch of exposures, of each
/// kind: the gathered rows go out in slices of neighbouring rows, one per
/// batch, so no one batch holds the writer for the whole second's work
/// (28,000 recall counts at once held it ~460 ms under memory.get's full
/// load, and the calls queued behind it waited).
pub const SLICE: usize = 2_000;

/// What a fold sums per key.
pub trait Sum: Default {
    /// Adds `other` to this sum.
    fn absorb(&mut self, other: Self);
}

impl Sum for i64 {
    fn absorb(&mut self, other: i64) {
        *self += other;
    }
}

/// Values summed per key for [`FOLD`], then written a slice at a time.
///
/// Gathered in a hash map and put in key order once per fold: a row is
/// gathered per exposure, under memory.get's full load ~30,000 a second,
/// and kept in key order as they came (a `BTreeMap` of five-string keys)
/// each cost ~17 key comparisons, ~4% of the server's CPU in `perf`.
#[derive(Debug)]
pub struct Fold<K, V> {
    /// Gathered since `since`.
    gathering: HashMap<K, V>,
    /// When the first of `gathering` came.
    since: Option<Instant>,
    /// The last second's, going out a slice per batch.
    writing: BTreeMap<K, V>,
}

impl<K, V> Default for Fold<K, V> {
    fn default() -> Self {
        Fold {
            gathering: HashMap::new(),
            since: None,
            writing: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Hash, V: Sum> Fold<K, V> {
    /// The gathered value of `key`, to add to.
    pub fn at(&mut self, key: K) -> &mut V {
        self.since.get_or_insert_with(Instant::now);
        self.gathering.entry(key).or_default()
    }

    /// The next slice to write: the first keys of `writing`, once the
    /// gathered values have waited [`FOLD`] and the last fold's are out.
    pub fn next_slice(&mut self) -> Vec<(K, V)> {
        if self.writing.is_empty() && self.since.is_some_and(|t| t.elapsed() >= FOLD) {
            // Sorted once, then built in one pass.
            self.writing = std::mem::take(&mut self.gathering).into_iter().collect();
            self.since = None;
        }
        std::iter::from_fn(|| self.writing.pop_first())
            .take(SLICE)
            .collect()
    }

    /// Everything held, a key's values summed.
    pub fn take_all(&mut self) -> Vec<(K, V)> {
        let mut all = std::mem::take(&mut self.writing);
        for (key, value) in std::mem::take(&mut self.gathering) {
            all.entry(key).or_default().absorb(value);
        }
        self.since = None;
        all.into_iter().collect()
    }

    /// A slice that was not written goes back.
    pub fn put_back(&mut self, slice: Vec<(K, V)>) {
        for (key, value) in slice {
            self.writing.entry(key).or_default().absorb(value);
        }
    }

    /// How long the writer may wait for a batch before writing what is
    /// held: a slice waiting goes out after a batch's linger.
    pub fn wait(&self) -> Option<Duration> {
        if !self.writing.is_empty() {
            Some(super::LINGER)
        } else {
            self.since.map(|t| FOLD.saturating_sub(t.elapsed()))
        }
    }

    /// As if what is gathered had waited a fold (tests of a sink's slices).
    #[cfg(test)]
    pub fn as_if_waited(&mut self) {
        self.since = self.since.map(|t| t - FOLD);
    }
}
