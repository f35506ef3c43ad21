//! Shared rate-limit buckets on PostgreSQL (`LOOM_RATE_LIMIT_STORE=postgres`):
//! the same token buckets as the server's in-process limiter, in the
//! `rate_buckets` table, so every replica on one database draws from one
//! budget. A take is one statement: it locks the caller's row and the org's
//! row (in a fixed order, so two takes never deadlock), refills both from the
//! database's clock, and takes a token from both or from neither.

use std::time::Duration;

use loom_core::{LoomError, OpResult};

use super::{Backend, Store, db_error};

/// One take: refill the caller's and the org's bucket, take from both when
/// both hold a token. Rows come back only for buckets that exist.
const TAKE: &str = "\
WITH clock AS (
    SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) AS ms
),
cur AS (
    SELECT b.subject, c.cap,
           LEAST(c.cap, b.tokens
               + CAST(GREATEST(clock.ms - b.updated_ms, 0) AS DOUBLE PRECISION) * c.cap / 60000.0) AS tokens
    FROM rate_buckets b
    JOIN (VALUES ($2, CAST($4 AS DOUBLE PRECISION)), ('', CAST($5 AS DOUBLE PRECISION))) AS c (subject, cap)
        ON b.subject = c.subject
    CROSS JOIN clock
    WHERE b.org = $1 AND b.class = $3
    ORDER BY b.subject
    FOR UPDATE OF b
),
verdict AS (
    SELECT COUNT(*) = 2 AND MIN(tokens) >= 1 AS take FROM cur
)
UPDATE rate_buckets b
SET tokens = cur.tokens - CASE WHEN verdict.take THEN 1 ELSE 0 END,
    updated_ms = clock.ms
FROM cur, verdict, clock
WHERE b.org = $1 AND b.class = $3 AND b.subject = cur.subject
RETURNING CAST(CASE WHEN verdict.take THEN 1 ELSE 0 END AS BIGINT), cur.tokens, cur.cap";

/// Creates the two buckets full when they do not exist yet.
const CREATE: &str = "\
INSERT INTO rate_buckets (org, subject, class, tokens, updated_ms)
SELECT $1, v.subject, $3, v.cap, CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)
FROM (VALUES ($2, CAST($4 AS DOUBLE PRECISION)), ('', CAST($5 AS DOUBLE PRECISION))) AS v (subject, cap)
ON CONFLICT (org, subject, class) DO NOTHING";

/// The budgets of one take: tokens a minute, each bucket holding at most one minute's worth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateBudget {
    /// The caller's bucket.
    pub caller_per_min: u32,
    /// The org's bucket, shared by all its callers.
    pub org_per_min: u32,
}

/// The wait until a bucket holding `tokens` of `cap` a minute has one token.
fn wait_for_one(tokens: f64, cap: f64) -> Duration {
    if tokens >= 1.0 || cap <= 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64((1.0 - tokens) * 60.0 / cap)
    }
}

impl Store {
    /// Takes one token from `subject`'s `class` bucket and from `org`'s:
    /// `Ok(Ok(()))` when the call may run, `Ok(Err(wait))` with how long
    /// until both hold a token when not. PostgreSQL only.
    pub async fn rate_take(
        &self,
        org: &str,
        subject: &str,
        class: &str,
        budget: RateBudget,
    ) -> OpResult<Result<(), Duration>> {
        if self.backend() != Backend::Postgres {
            return Err(LoomError::internal(
                "shared rate-limit buckets need PostgreSQL",
            ));
        }
        // The org's bucket is the row with subject ''.
        let subject = if subject.is_empty() { "-" } else { subject };
        let caller_cap = f64::from(budget.caller_per_min);
        let org_cap = f64::from(budget.org_per_min);
        // A bucket seen for the first time is created full, then taken from.
        for attempt in 0..2 {
            let rows: Vec<(i64, f64, f64)> = sqlx::query_as(TAKE)
                .bind(org)
                .bind(subject)
                .bind(class)
                .bind(caller_cap)
                .bind(org_cap)
                .fetch_all(self.writer())
                .await
                .map_err(db_error)?;
            if rows.len() == 2 {
                if rows.iter().all(|(take, _, _)| *take == 1) {
                    return Ok(Ok(()));
                }
                let wait = rows
                    .iter()
                    .map(|(_, tokens, cap)| wait_for_one(*tokens, *cap))
                    .max()
                    .unwrap_or_default();
                return Ok(Err(wait));
            }
            if attempt == 0 {
                sqlx::query(CREATE)
                    .bind(org)
                    .bind(subject)
                    .bind(class)
                    .bind(caller_cap)
                    .bind(org_cap)
                    .execute(self.writer())
                    .await
                    .map_err(db_error)?;
            }
        }
        Err(LoomError::internal(
            "rate_buckets: a created bucket was not found",
        ))
    }

    /// Deletes buckets idle for over a minute (full again, so nothing
    /// changes); returns how many. PostgreSQL only; a no-op elsewhere.
    pub async fn rate_prune(&self) -> OpResult<u64> {
        if self.backend() != Backend::Postgres {
            return Ok(0);
        }
        let done = sqlx::query(
            "DELETE FROM rate_buckets WHERE updated_ms < \
             CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) - 61000",
        )
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[tokio::test]
    async fn takes_from_both_buckets_or_neither() {
        let Some(t) = testing::postgres().await else {
            eprintln!("LOOM_TEST_DATABASE_URL is not set: shared buckets need PostgreSQL");
            return;
        };
        let s = &t.store;
        let budget = RateBudget {
            caller_per_min: 3,
            org_per_min: 4,
        };
        for _ in 0..3 {
            assert_eq!(
                s.rate_take("a", "ana", "read", budget).await.unwrap(),
                Ok(())
            );
        }
        let wait = s
            .rate_take("a", "ana", "read", budget)
            .await
            .unwrap()
            .unwrap_err();
        // 3 a minute: one token every 20 s
        assert!(
            wait > Duration::from_secs(19) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert_eq!(
            s.rate_take("a", "bob", "read", budget).await.unwrap(),
            Ok(())
        );
        assert!(
            s.rate_take("a", "bob", "read", budget)
                .await
                .unwrap()
                .is_err(),
            "the org's budget is spent"
        );
        assert_eq!(
            s.rate_take("a", "bob", "write", budget).await.unwrap(),
            Ok(()),
            "another class has its own buckets"
        );
        assert_eq!(
            s.rate_take("b", "bob", "read", budget).await.unwrap(),
            Ok(()),
            "another org has its own"
        );
        // a refused take took nothing: bob's own bucket still holds 2
        let (tokens,): (f64,) = sqlx::query_as(
            "SELECT tokens FROM rate_buckets WHERE org = 'a' AND subject = 'bob' AND class = 'read'",
        )
        .fetch_one(s.reader())
        .await
        .unwrap();
        assert!((2.0..2.1).contains(&tokens), "{tokens}");
        assert_eq!(s.rate_prune().await.unwrap(), 0, "nothing idle yet");
    }

    #[tokio::test]
    async fn sqlite_has_no_shared_buckets() {
        let t = testing::sqlite().await;
        let budget = RateBudget {
            caller_per_min: 1,
            org_per_min: 1,
        };
        assert!(t.store.rate_take("a", "ana", "read", budget).await.is_err());
        assert_eq!(t.store.rate_prune().await.unwrap(), 0);
    }
}
