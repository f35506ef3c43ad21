//! Step 4: rate limits. One token bucket per (org, subject, class), filled
//! at `LOOM_RATE_LIMIT_<CLASS>_PER_MIN` tokens a minute and holding at most
//! one minute's worth, so a caller may burst up to its per-minute budget;
//! and one per (org, class), `LOOM_RATE_LIMIT_ORG_<CLASS>_PER_MIN`, that all
//! of an org's callers draw from together. A call takes a token from both or
//! from neither, and waits for whichever refills last.
//!
//! Where the buckets live is `LOOM_RATE_LIMIT_STORE`:
//! - `local` ([`InProcessLimiter`]): this process's memory; N replicas let a
//!   caller through N times its budget.
//! - `postgres` ([`postgres_buckets::PostgresBuckets`]): the `rate_buckets` table of
//!   the server's own PostgreSQL database, shared by every replica on it.
//! - `redis` ([`redis_buckets::RedisBuckets`]): a Lua script over `LOOM_REDIS_URL`.
//!
//! A shared store that fails or is slow does not stop the server: see
//! [`shared::SharedLimiter`] for the fallback.

mod local;
pub mod postgres_buckets;
pub mod redis_buckets;
pub mod shared;

use std::sync::Arc;

use loom_core::{RateClass, RateLimiter};
use loom_ops::store::{RateBudget, Store};

pub use local::InProcessLimiter;

use crate::config::{Config, RateLimitStore};

/// The per-minute budgets of every class, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    read: RateBudget,
    write: RateBudget,
    heavy: RateBudget,
}

impl Budgets {
    /// Sized from `LOOM_RATE_LIMIT_*`.
    pub fn new(config: &Config) -> Self {
        Budgets {
            read: RateBudget {
                caller_per_min: config.rate_read_per_min,
                org_per_min: config.rate_org_read_per_min,
            },
            write: RateBudget {
                caller_per_min: config.rate_write_per_min,
                org_per_min: config.rate_org_write_per_min,
            },
            heavy: RateBudget {
                caller_per_min: config.rate_heavy_per_min,
                org_per_min: config.rate_org_heavy_per_min,
            },
        }
    }

    /// The budget of one class.
    pub fn of(&self, class: RateClass) -> RateBudget {
        match class {
            RateClass::Read => self.read,
            RateClass::Write => self.write,
            RateClass::Heavy => self.heavy,
        }
    }
}

/// The limiter `LOOM_RATE_LIMIT_STORE` chose. Must run on a Tokio runtime.
pub fn from_config(config: &Config, store: &Store) -> Result<Arc<dyn RateLimiter>, String> {
    let local = InProcessLimiter::new(config);
    Ok(match config.rate_limit_store {
        RateLimitStore::Local => Arc::new(local),
        RateLimitStore::Postgres => Arc::new(shared::SharedLimiter::new(
            postgres_buckets::PostgresBuckets::new(store.clone()),
            Budgets::new(config),
            local,
            config.rate_limit_store_timeout,
        )),
        RateLimitStore::Redis => {
            let url = config
                .redis_url
                .as_deref()
                .ok_or("LOOM_RATE_LIMIT_STORE=redis needs LOOM_REDIS_URL")?;
            Arc::new(shared::SharedLimiter::new(
                redis_buckets::RedisBuckets::new(
                    url,
                    &config.redis_key_prefix,
                    config.rate_limit_store_timeout,
                )?,
                Budgets::new(config),
                local,
                config.rate_limit_store_timeout,
            ))
        }
    })
}
