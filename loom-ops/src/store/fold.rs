//! Sums gathered per key off the request path and written a slice at a
//! time: what a batch sink holds back ([`super::BatchSink::holds`]) when
//! many rows would each rewrite a random page, as the usage log's recall
//! and exposure counts would (`memory::usage`).

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
/// each cost ~17 key comparisons, ~4% of the server's CPU in `perf`. The
/// fold's keys are then sorted once into a vector the slices are cut from
/// (a `BTreeMap` built from them and emptied key by key cost ~1% more).
#[derive(Debug)]
pub struct Fold<K, V> {
    /// Gathered since `since`.
    gathering: HashMap<K, V>,
    /// When the first of `gathering` came.
    since: Option<Instant>,
    /// The last fold's, in reverse key order (the next slice is at the
    /// end), going out a slice per batch.
    writing: Vec<(K, V)>,
}

impl<K, V> Default for Fold<K, V> {
    fn default() -> Self {
        Fold {
            gathering: HashMap::new(),
            since: None,
            writing: Vec::new(),
        }
    }
}

impl<K: Ord + Hash, V: Sum> Fold<K, V> {
    /// The gathered value of `key`, to add to.
    pub fn at(&mut self, key: K) -> &mut V {
        self.since.get_or_insert_with(Instant::now);
        self.gathering.entry(key).or_default()
    }

    /// The next slice to write, in key order: the first keys of `writing`,
    /// once the gathered values have waited [`FOLD`] and the last fold's
    /// are out.
    pub fn next_slice(&mut self) -> Vec<(K, V)> {
        if self.writing.is_empty() && self.since.is_some_and(|t| t.elapsed() >= FOLD) {
            // The next fold's map starts at this one's size, which a steady
            // load gathers again, instead of growing to it by rehashing.
            let size = self.gathering.len();
            let gathered = std::mem::replace(&mut self.gathering, HashMap::with_capacity(size));
            self.writing = gathered.into_iter().collect();
            self.writing.sort_unstable_by(|a, b| b.0.cmp(&a.0));
            self.since = None;
        } else if self.since.is_none() && self.gathering.capacity() > 0 {
            // Nothing gathered since the last fold: let its room go.
            self.gathering = HashMap::new();
        }
        let mut slice = self
            .writing
            .split_off(self.writing.len().saturating_sub(SLICE));
        slice.reverse();
        slice
    }

    /// Everything held, a key's values summed, in key order.
    pub fn take_all(&mut self) -> Vec<(K, V)> {
        let mut all = std::mem::take(&mut self.writing);
        all.extend(std::mem::take(&mut self.gathering));
        self.since = None;
        summed(all)
    }

    /// A slice that was not written goes back.
    pub fn put_back(&mut self, slice: Vec<(K, V)>) {
        let mut writing = std::mem::take(&mut self.writing);
        writing.extend(slice);
        self.writing = summed(writing);
        self.writing.reverse();
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

/// `rows` in key order, the values of a key summed into one.
fn summed<K: Ord, V: Sum>(mut rows: Vec<(K, V)>) -> Vec<(K, V)> {
    rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(K, V)> = Vec::with_capacity(rows.len());
    for (key, value) in rows {
        match out.last_mut() {
            Some((last, sum)) if *last == key => sum.absorb(value),
            _ => out.push((key, value)),
        }
    }
    out
}
