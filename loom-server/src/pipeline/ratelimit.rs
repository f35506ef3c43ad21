//! Step 4: rate limits. One token bucket per (org, subject, class), filled
//! at `LOOM_RATE_LIMIT_<CLASS>_PER_MIN` tokens a minute and holding at most
//! one minute's worth, so a caller may burst up to its per-minute budget.
//! This is the in-process [`RateLimiter`]; replicas that must share buckets
//! plug a PostgreSQL- or Redis-backed one into the same trait.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use loom_core::{BoxFuture, RateClass, RateKey, RateLimiter};

use crate::config::Config;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets in this process's memory.
pub struct InProcessLimiter {
    per_min: [u32; 3],
    buckets: Mutex<HashMap<(RateKey, RateClass), Bucket>>,
}

/// How many idle buckets may pile up before full buckets are dropped.
const PRUNE_AT: usize = 100_000;

fn index(class: RateClass) -> usize {
    match class {
        RateClass::Read => 0,
        RateClass::Write => 1,
        RateClass::Heavy => 2,
    }
}

impl InProcessLimiter {
    /// Buckets sized from the configuration.
    pub fn new(config: &Config) -> Self {
        InProcessLimiter {
            per_min: [
                config.rate_read_per_min,
                config.rate_write_per_min,
                config.rate_heavy_per_min,
            ],
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn take(&self, key: &RateKey, class: RateClass, now: Instant) -> Result<(), Duration> {
        let capacity = f64::from(self.per_min[index(class)]);
        let per_sec = capacity / 60.0;
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= PRUNE_AT {
            buckets.retain(|(_, c), b| {
                let cap = f64::from(self.per_min[index(*c)]);
                b.tokens + now.duration_since(b.at).as_secs_f64() * cap / 60.0 < cap
            });
        }
        let bucket = buckets.entry((key.clone(), class)).or_insert(Bucket {
            tokens: capacity,
            at: now,
        });
        bucket.tokens =
            (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * per_sec).min(capacity);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_sec))
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
