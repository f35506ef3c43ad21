//! A limiter whose buckets live in a store every replica shares, and what
//! it does when that store fails.
//!
//! A take that errors or takes longer than `LOOM_RATE_LIMIT_STORE_TIMEOUT_MS`
//! (250 ms by default) is decided by
//! this replica's in-process buckets instead (the same budgets, per
//! replica), with a logged warning, and the store is left alone for
//! [`BACKOFF`] before it is asked again. So while the store is down a
//! caller gets at most its budget from each replica: the limits loosen to
//! what `LOOM_RATE_LIMIT_STORE=local` gives, they never vanish (fail open
//! would let a flood through exactly when a dependency is already failing),
//! and calls are never refused for the limiter's own fault (fail closed
//! would turn a Redis outage into a Loom outage).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use loom_core::{BoxFuture, RateClass, RateKey, RateLimiter};
use loom_ops::store::RateBudget;

use super::{Budgets, InProcessLimiter};

/// How long the store is left alone after it failed.
pub const BACKOFF: Duration = Duration::from_secs(1);
/// At most one warning per this interval while the store keeps failing.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Buckets in a shared store.
pub trait SharedBuckets: Send + Sync + 'static {
    /// The store's name for logs (`postgres`, `redis`).
    fn name(&self) -> &'static str;

    /// Takes one token from `key`'s `class` bucket and from its org's:
    /// `Ok(Ok(()))` to run, `Ok(Err(wait))` to refuse, `Err(cause)` when the
    /// store did not answer.
    fn take<'a>(
        &'a self,
        key: &'a RateKey,
        class: RateClass,
        budget: RateBudget,
    ) -> BoxFuture<'a, Result<Result<(), Duration>, String>>;
}

#[derive(Default)]
struct Health {
    /// The store is not asked before this.
    down_until: Option<Instant>,
    /// When the last warning was logged.
    warned_at: Option<Instant>,
    /// Takes decided locally since the last warning.
    fell_back: u64,
}

/// Shared buckets, with this replica's own as the fallback.
pub struct SharedLimiter<B> {
    store: B,
    budgets: Budgets,
    local: InProcessLimiter,
    timeout: Duration,
    health: Mutex<Health>,
}

impl<B: SharedBuckets> SharedLimiter<B> {
    /// Takes from `store`, falling back to `local` on an error or after `timeout`.
    pub fn new(store: B, budgets: Budgets, local: InProcessLimiter, timeout: Duration) -> Self {
        SharedLimiter {
            store,
            budgets,
            local,
            timeout,
            health: Mutex::new(Health::default()),
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn take(&self, key: &RateKey, class: RateClass) -> Result<(), Duration> {
        let now = Instant::now();
        let skip = self.health().down_until.is_some_and(|t| now < t);
        if !skip {
            let answer = tokio::time::timeout(
                self.timeout,
                self.store.take(key, class, self.budgets.of(class)),
            )
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {:?}", self.timeout)));
            match answer {
                Ok(verdict) => {
                    let mut h = self.health();
                    if h.down_until.take().is_some() {
                        tracing::warn!(
                            store = self.store.name(),
                            "the shared rate-limit store answers again; buckets are shared again"
                        );
                        h.warned_at = None;
                        h.fell_back = 0;
                    }
                    return verdict;
                }
                Err(cause) => {
                    let mut h = self.health();
                    h.down_until = Some(now + BACKOFF);
                    if h.warned_at
                        .is_none_or(|t| now.duration_since(t) >= WARN_EVERY)
                    {
                        tracing::warn!(
                            store = self.store.name(),
                            cause = %cause,
                            decided_locally = h.fell_back,
                            "the shared rate-limit store failed; this replica's own buckets decide meanwhile"
                        );
                        h.warned_at = Some(now);
                        h.fell_back = 0;
                    }
                }
            }
        }
        self.health().fell_back += 1;
        self.local.take(key, class, now)
    }
}

impl<B: SharedBuckets> RateLimiter for SharedLimiter<B> {
    fn check<'a>(
        &'a self,
        key: &'a RateKey,
        class: RateClass,
    ) -> BoxFuture<'a, Result<(), Duration>> {
        Box::pin(self.take(key, class))
    }
}
