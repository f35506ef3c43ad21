//! The in-process limiter (`LOOM_RATE_LIMIT_STORE=local`, the default):
//! buckets in this process's memory, so each replica has its own. Also what
//! a shared limiter falls back to while its store is unreachable.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use foldhash::HashMap;
use loom_core::{BoxFuture, RateClass, RateKey, RateLimiter};

use super::Budgets;
use crate::config::Config;

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// One key's bucket per rate class (`None` until its first call).
type Classes = [Option<Bucket>; 3];

/// A class's place in [`Classes`].
fn slot(class: RateClass) -> usize {
    match class {
        RateClass::Read => 0,
        RateClass::Write => 1,
        RateClass::Heavy => 2,
    }
}

/// Buckets in this process's memory: each caller's, and each org's shared
/// one, looked up by reference, so a call whose buckets exist allocates
/// nothing (a tuple key cloned for every lookup was four `String`s a call).
pub struct InProcessLimiter {
    budgets: Budgets,
    buckets: Mutex<Buckets>,
}

#[derive(Default)]
struct Buckets {
    callers: HashMap<RateKey, Classes>,
    orgs: HashMap<String, Classes>,
}

/// How many idle buckets may pile up before full buckets are dropped.
const PRUNE_AT: usize = 100_000;

impl InProcessLimiter {
    /// Buckets sized from the configuration.
    pub fn new(config: &Config) -> Self {
        InProcessLimiter {
            budgets: Budgets::new(config),
            buckets: Mutex::new(Buckets::default()),
        }
    }

    /// A bucket's tokens a minute: a caller's own, or its org's shared one.
    fn capacity(&self, class: RateClass, caller: bool) -> f64 {
        let budget = self.budgets.of(class);
        f64::from(if caller {
            budget.caller_per_min
        } else {
            budget.org_per_min
        })
    }

    pub(super) fn take(
        &self,
        key: &RateKey,
        class: RateClass,
        now: Instant,
    ) -> Result<(), Duration> {
        let (mine_cap, org_cap) = (self.capacity(class, true), self.capacity(class, false));
        let mut guard = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Buckets { callers, orgs } = &mut *guard;
        if callers.len() + orgs.len() >= PRUNE_AT {
            let caps = |caller: bool| {
                [RateClass::Read, RateClass::Write, RateClass::Heavy]
                    .map(|class| self.capacity(class, caller))
            };
            let (caller_caps, org_caps) = (caps(true), caps(false));
            callers.retain(|_, classes| !refilled(classes, &caller_caps, now));
            orgs.retain(|_, classes| !refilled(classes, &org_caps, now));
        }
        // Read, refilled and written back; a bucket's first call finds it
        // full.
        let fresh = |tokens| Bucket { tokens, at: now };
        let mut mine = bucket(callers, key, class).unwrap_or(fresh(mine_cap));
        let mut shared = bucket(orgs, key.org.as_str(), class).unwrap_or(fresh(org_cap));
        let mine_wait = refill(&mut mine, mine_cap, now);
        let org_wait = refill(&mut shared, org_cap, now);
        let taken = mine_wait.is_zero() && org_wait.is_zero();
        if taken {
            mine.tokens -= 1.0;
            shared.tokens -= 1.0;
        }
        put(callers, key, || key.clone(), class, mine);
        put(orgs, key.org.as_str(), || key.org.clone(), class, shared);
        if taken {
            Ok(())
        } else {
            Err(mine_wait.max(org_wait))
        }
    }
}

/// Whether every bucket of a key would be full again by `now` (`caps`: each
/// class's tokens a minute): such a key is dropped when buckets pile up.
fn refilled(classes: &Classes, caps: &[f64; 3], now: Instant) -> bool {
    classes.iter().zip(caps).all(|(bucket, &cap)| {
        bucket.is_none_or(|b| b.tokens + now.duration_since(b.at).as_secs_f64() * cap / 60.0 >= cap)
    })
}

/// `key`'s bucket of `class`, if it has one.
fn bucket<K, Q>(map: &HashMap<K, Classes>, key: &Q, class: RateClass) -> Option<Bucket>
where
    K: Borrow<Q> + Hash + Eq,
    Q: Hash + Eq + ?Sized,
{
    map.get(key).and_then(|classes| classes[slot(class)])
}

/// Stores `bucket` as `key`'s bucket of `class`; `owned` makes the key on
/// its first call, the only time a call allocates here.
fn put<K, Q>(
    map: &mut HashMap<K, Classes>,
    key: &Q,
    owned: impl FnOnce() -> K,
    class: RateClass,
    bucket: Bucket,
) where
    K: Borrow<Q> + Hash + Eq,
    Q: Hash + Eq + ?Sized,
{
    match map.get_mut(key) {
        Some(classes) => classes[slot(class)] = Some(bucket),
        None => {
            let mut classes = Classes::default();
            classes[slot(class)] = Some(bucket);
            map.insert(owned(), classes);
        }
    }
}

/// Refills `bucket`, of `capacity` tokens a minute, to `now` (a new one
/// starts full); the wait for one token, zero when it holds one.
fn refill(bucket: &mut Bucket, capacity: f64, now: Instant) -> Duration {
    let per_sec = capacity / 60.0;
    bucket.tokens =
        (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * per_sec).min(capacity);
    bucket.at = now;
    if bucket.tokens >= 1.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64((1.0 - bucket.tokens) / per_sec)
    }
}

impl RateLimiter for InProcessLimiter {
    fn check<'a>(
        &'a self,
        key: &'a RateKey,
        class: RateClass,
    ) -> BoxFuture<'a, Result<(), Duration>> {
        let result = self.take(key, class, Instant::now());
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_orgs_callers_share_its_budget() {
        let config = Config {
            rate_read_per_min: 3,
            rate_org_read_per_min: 4,
            ..Config::default()
        };
        let limiter = InProcessLimiter::new(&config);
        let now = Instant::now();
        let key = |org: &str, subject: &str| RateKey {
            org: org.into(),
            subject: subject.into(),
        };
        for _ in 0..3 {
            assert!(limiter.take(&key("a", "ana"), RateClass::Read, now).is_ok());
        }
        assert!(
            limiter
                .take(&key("a", "ana"), RateClass::Read, now)
                .is_err(),
            "ana's own budget"
        );
        assert!(limiter.take(&key("a", "bob"), RateClass::Read, now).is_ok());
        let wait = limiter
            .take(&key("a", "bob"), RateClass::Read, now)
            .unwrap_err();
        assert!(wait > Duration::ZERO, "the org's budget is spent");
        assert!(
            limiter.take(&key("b", "bob"), RateClass::Read, now).is_ok(),
            "another org's is not"
        );
    }

    #[test]
    fn a_bucket_holds_a_minute_and_refills() {
        let config = Config {
            rate_write_per_min: 2,
            ..Config::default()
        };
        let limiter = InProcessLimiter::new(&config);
        let key = RateKey {
            org: "acme".into(),
            subject: "ana".into(),
        };
        let t0 = Instant::now();
        assert!(limiter.take(&key, RateClass::Write, t0).is_ok());
        assert!(limiter.take(&key, RateClass::Write, t0).is_ok());
        let wait = limiter.take(&key, RateClass::Write, t0).unwrap_err();
        assert!(
            wait > Duration::from_secs(29) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        // another class, another caller: their own buckets
        assert!(limiter.take(&key, RateClass::Read, t0).is_ok());
        let other = RateKey {
            org: "acme".into(),
            subject: "bo".into(),
        };
        assert!(limiter.take(&other, RateClass::Write, t0).is_ok());
        // 30 s later one token is back
        assert!(
            limiter
                .take(&key, RateClass::Write, t0 + Duration::from_secs(30))
                .is_ok()
        );
    }

    #[test]
    fn piled_up_buckets_are_dropped_once_full_again() {
        let limiter = InProcessLimiter::new(&Config {
            rate_read_per_min: 60,
            rate_org_read_per_min: 10_000_000,
            ..Config::default()
        });
        let key = |n: usize| RateKey {
            org: "acme".into(),
            subject: format!("s{n}"),
        };
        let t0 = Instant::now();
        for n in 0..PRUNE_AT {
            assert!(limiter.take(&key(n), RateClass::Read, t0).is_ok());
        }
        // s0 spends all it has.
        while limiter.take(&key(0), RateClass::Read, t0).is_ok() {}
        let count = || {
            let b = limiter.buckets.lock().unwrap();
            (b.callers.len(), b.orgs.len())
        };
        assert_eq!(count(), (PRUNE_AT, 1));
        // Half a minute on, every other bucket is full again and goes.
        let later = t0 + Duration::from_secs(30);
        assert!(limiter.take(&key(1), RateClass::Read, later).is_ok());
        assert_eq!(count(), (2, 1), "s0, still refilling, and s1, just taken");
    }
}
