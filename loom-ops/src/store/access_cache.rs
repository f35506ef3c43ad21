//! What authorization read of a namespace and of a subject's grant on it,
//! kept a short while ([`Store::namespace_access`](super::Store::namespace_access)).
//!
//! Why: every call's pipeline asks it, and on SQLite it was a read
//! transaction of its own next to the op's: under memory.get's full load
//! the read was ~9% of the server's CPU (its share of SQLite's shared-memory
//! locks, and the page cache every commit of the bookkeeping empties);
//! answered from memory, gets cost 4% fewer instructions and served 8% more
//! a second on average over seven paired runs (bench/RESULTS.md).
//!
//! What it may cost: a change made through this process is seen at once
//! (grants.set forgets everything kept after its commit,
//! [`AccessCache::forget_all`]);
//! a change another replica or another program makes straight in the
//! database is seen within the time kept (`LOOM_ACCESS_CACHE_MS`, 1 s by
//! default; 0 keeps nothing). A namespace found missing is never kept, so
//! one created meanwhile is found on the next call.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use foldhash::{HashMap, HashMapExt};

use super::NamespaceAccess;

/// Answers kept at most; when full it starts over (one read per key).
const KEPT: usize = 4096;

/// One kept answer.
#[derive(Debug)]
struct Kept {
    access: NamespaceAccess,
    /// When the read it came from started.
    read_at: Instant,
    /// [`AccessCache::epoch`] when that read started.
    epoch: u64,
}

/// The kept answers of one store.
#[derive(Debug)]
pub(super) struct AccessCache {
    ttl: Duration,
    /// Moves on at every [`AccessCache::forget_all`]: an answer read before
    /// it is never served after it, even if it was kept after it.
    epoch: AtomicU64,
    kept: Mutex<HashMap<Box<str>, Kept>>,
}

/// A read [`AccessCache::begin_read`] started: what keeping its answer needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Read {
    at: Instant,
    epoch: u64,
}

impl AccessCache {
    /// Keeps answers for `ttl` (zero: keeps none).
    pub(super) fn new(ttl: Duration) -> AccessCache {
        AccessCache {
            ttl,
            epoch: AtomicU64::new(0),
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The answer kept for the key, if it is still fresh at `now`.
    pub(super) fn get(
        &self,
        org: &str,
        namespace: &str,
        subject: &str,
        now: Instant,
    ) -> Option<NamespaceAccess> {
        if self.ttl.is_zero() {
            return None;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let k = kept.get(key(org, namespace, subject).as_str())?;
        (k.epoch == epoch && now.saturating_duration_since(k.read_at) < self.ttl)
            .then(|| k.access.clone())
    }

    /// Marks the start of a read whose answer may be kept: taken before
    /// the read, so a change committed during it is never hidden.
    pub(super) fn begin_read(&self, now: Instant) -> Read {
        Read {
            at: now,
            epoch: self.epoch.load(Ordering::Acquire),
        }
    }

    /// Keeps what `read` found (a missing namespace is not kept).
    pub(super) fn keep(
        &self,
        org: &str,
        namespace: &str,
        subject: &str,
        access: &NamespaceAccess,
        read: Read,
    ) {
        if self.ttl.is_zero() || !access.exists {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= KEPT {
            kept.clear();
        }
        kept.insert(
            key(org, namespace, subject).into_boxed_str(),
            Kept {
                access: access.clone(),
                read_at: read.at,
                epoch: read.epoch,
            },
        );
    }

    /// Forgets every kept answer, and any read still running: called after
    /// a change to namespaces or grants commits.
    pub(super) fn forget_all(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// One string for the three names, each but the last prefixed by its
/// length, so no two triples share a key whatever characters they hold.
fn key(org: &str, namespace: &str, subject: &str) -> String {
    let mut k = String::with_capacity(org.len() + namespace.len() + subject.len() + 8);
    for part in [org, namespace] {
        // Writing to a String cannot fail.
        let _ = write!(k, "{}:{part}", part.len());
    }
    k.push_str(subject);
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_core::Role;

    fn found(granted: Option<Role>) -> NamespaceAccess {
        NamespaceAccess {
            exists: true,
            restricted: false,
            granted,
        }
    }

    #[test]
    fn an_answer_is_served_while_fresh_then_read_again() {
        let cache = AccessCache::new(Duration::from_secs(1));
        let t0 = Instant::now();
        let read = cache.begin_read(t0);
        cache.keep("acme", "ops", "ana", &found(Some(Role::Writer)), read);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(
            cache.get("acme", "ops", "ana", at(999)),
            Some(found(Some(Role::Writer)))
        );
        assert_eq!(cache.get("acme", "ops", "ana", at(1000)), None);
        assert_eq!(
            cache.get("acme", "ops", "bob", at(0)),
            None,
            "another subject"
        );
    }

    #[test]
    fn a_read_started_before_a_change_is_not_served_after_it() {
        let cache = AccessCache::new(Duration::from_secs(1));
        let now = Instant::now();
        let read = cache.begin_read(now);
        // grants.set commits while the read runs; the read kept the old role.
        cache.forget_all();
        cache.keep("acme", "ops", "ana", &found(Some(Role::Admin)), read);
        assert_eq!(cache.get("acme", "ops", "ana", now), None);
        // A read started after the change is kept.
        let read = cache.begin_read(now);
        cache.keep("acme", "ops", "ana", &found(None), read);
        assert_eq!(cache.get("acme", "ops", "ana", now), Some(found(None)));
        cache.forget_all();
        assert_eq!(cache.get("acme", "ops", "ana", now), None);
    }

    #[test]
    fn a_missing_namespace_and_a_zero_ttl_keep_nothing() {
        let now = Instant::now();
        let cache = AccessCache::new(Duration::from_secs(1));
        let missing = NamespaceAccess {
            exists: false,
            restricted: false,
            granted: None,
        };
        cache.keep("acme", "new", "ana", &missing, cache.begin_read(now));
        assert_eq!(cache.get("acme", "new", "ana", now), None);
        let off = AccessCache::new(Duration::ZERO);
        off.keep("acme", "ops", "ana", &found(None), off.begin_read(now));
        assert_eq!(off.get("acme", "ops", "ana", now), None);
    }

    #[test]
    fn keys_never_collide_across_the_names() {
        assert_ne!(key("a", "bc", "d"), key("ab", "c", "d"));
        assert_ne!(key("a", "b", "cd"), key("a", "bc", "d"));
        assert_ne!(key("1:a", "b", "c"), key("1", "a1:b", "c"));
    }
}
