//! Shared buckets in Redis (`LOOM_RATE_LIMIT_STORE=redis`): one Lua script
//! takes from the caller's and the org's bucket atomically (Redis runs a
//! script alone), on Redis's clock so replicas agree. Both keys carry the org
//! as hash tag, so they live in one slot of a cluster. A bucket idle for a
//! minute is full again, so its key expires then.

use std::time::Duration;

use loom_core::{BoxFuture, RateClass, RateKey};
use loom_ops::store::RateBudget;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::shared::SharedBuckets;

/// KEYS: the caller's bucket, the org's; ARGV: their budgets a minute.
/// Returns {1 when taken else 0, microseconds until both hold a token}.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local caps = {tonumber(ARGV[1]), tonumber(ARGV[2])}
local tokens = {}
local wait = 0
for i = 1, 2 do
  local b = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local have = caps[i]
  if b[1] and b[2] then
    have = math.min(caps[i], tonumber(b[1]) + math.max(now - tonumber(b[2]), 0) * caps[i] / 60000)
  end
  tokens[i] = have
  if have < 1 then
    wait = math.max(wait, (1 - have) * 60000 / caps[i])
  end
end
local take = 0
if tokens[1] >= 1 and tokens[2] >= 1 then take = 1 end
for i = 1, 2 do
  redis.call('HSET', KEYS[i], 'tokens', tostring(tokens[i] - take), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[i], 61000)
end
return {take, math.ceil(wait * 1000)}
";

/// Buckets in one Redis.
pub struct RedisBuckets {
    conn: ConnectionManager,
    script: redis::Script,
    prefix: String,
}

impl RedisBuckets {
    /// A connection to `url`, made on first use and remade after a failure.
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> Result<Self, String> {
        // Never echo the URL: it may hold a password.
        let client = redis::Client::open(url)
            .map_err(|e| format!("LOOM_REDIS_URL is not a valid Redis URL: {:?}", e.kind()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("cannot set up the Redis connection: {:?}", e.kind()))?;
        Ok(RedisBuckets {
            conn,
            script: redis::Script::new(TAKE),
            prefix: prefix.to_owned(),
        })
    }

    /// `<prefix>rate:{<org>}:<class>:…`: the org in braces is the hash tag.
    fn keys(&self, key: &RateKey, class: RateClass) -> (String, String) {
        let base = format!("{}rate:{{{}}}:{}", self.prefix, key.org, class.as_str());
        (format!("{base}:sub:{}", key.subject), format!("{base}:org"))
    }
}

impl SharedBuckets for RedisBuckets {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn take<'a>(
        &'a self,
        key: &'a RateKey,
        class: RateClass,
        budget: RateBudget,
    ) -> BoxFuture<'a, Result<Result<(), Duration>, String>> {
        Box::pin(async move {
            let (mine, org) = self.keys(key, class);
            let mut conn = self.conn.clone();
            let (taken, wait_us): (i64, i64) = self
                .script
                .key(mine)
                .key(org)
                .arg(budget.caller_per_min)
                .arg(budget.org_per_min)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            Ok(if taken == 1 {
                Ok(())
            } else {
                Err(Duration::from_micros(u64::try_from(wait_us).unwrap_or(0)))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rediss://` (TLS), as the README documents it, is set up like
    /// `redis://`: the connection is made on first use.
    #[tokio::test]
    async fn a_tls_url_is_taken() {
        for url in [
            "redis://127.0.0.1:6379",
            "rediss://redis.example.com:6380/0",
        ] {
            let made = RedisBuckets::new(url, "loom:", Duration::from_millis(250));
            assert!(made.is_ok(), "{url}: {:?}", made.err());
        }
    }
}
