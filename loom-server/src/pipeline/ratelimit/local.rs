//! The in-process limiter (`LOOM_RATE_LIMIT_STORE=local`, the default):
//! buckets in this process's memory, so each replica has its own. Also what
//! a shared limiter falls back to while its store is unreachable.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use foldhash::{HashMap, HashMapExt};
use loom_core::{BoxFuture, RateClass, RateKey, RateLimiter};

use super::Budgets;
use crate::config::Config;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets in this process's memory.
pub struct InProcessLimiter {
    budgets: Budgets,
    buckets: Mutex<HashMap<(RateKey, RateClass), Bucket>>,
}

/// How many idle buckets may pile up before full buckets are dropped.
const PRUNE_AT: usize = 100_000;

impl InProcessLimiter {
    /// Buckets sized from the configuration.
    pub fn new(config: &Config) -> Self {
        InProcessLimiter {
            budgets: Budgets::new(config),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The per-minute budget of a bucket: an org's shared one has no subject.
    fn capacity(&self, key: &RateKey, class: RateClass) -> f64 {
        let budget = self.budgets.of(class);
        f64::from(if key.subject.is_empty() {
            budget.org_per_min
        } else {
            budget.caller_per_min
        })
    }

    /// Refills a bucket to `now`; returns its tokens and the wait for one more.
    fn refill(
        &self,
        buckets: &mut HashMap<(RateKey, RateClass), Bucket>,
        key: &RateKey,
        class: RateClass,
        now: Instant,
    ) -> (f64, Duration) {
        let capacity = self.capacity(key, class);
        let per_sec = capacity / 60.0;
        let bucket = buckets.entry((key.clone(), class)).or_insert(Bucket {
            tokens: capacity,
            at: now,
        });
        bucket.tokens =
            (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * per_sec).min(capacity);
        bucket.at = now;
        let wait = if bucket.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - bucket.tokens) / per_sec)
        };
        (bucket.tokens, wait)
    }

    pub(super) fn take(
        &self,
        key: &RateKey,
        class: RateClass,
        now: Instant,
    ) -> Result<(), Duration> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= PRUNE_AT {
            buckets.retain(|(k, c), b| {
                let cap = self.capacity(k, *c);
                b.tokens + now.duration_since(b.at).as_secs_f64() * cap / 60.0 < cap
            });
        }
        let org = RateKey {
            org: key.org.clone(),
            subject: String::new(),
        };
        let (mine, my_wait) = self.refill(&mut buckets, key, class, now);
        let (shared, org_wait) = self.refill(&mut buckets, &org, class, now);
        if mine >= 1.0 && shared >= 1.0 {
            for k in [key, &org] {
                if let Some(b) = buckets.get_mut(&(k.clone(), class)) {
                    b.tokens -= 1.0;
                }
            }
            Ok(())
        } else {
            Err(my_wait.max(org_wait))
        }
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
}
