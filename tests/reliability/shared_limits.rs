//! Rate limits across replicas (`LOOM_RATE_LIMIT_STORE`): with the local
//! store each replica keeps its own buckets; with `postgres` or `redis`
//! three replicas together hold a caller, and an org, to one budget. A
//! shared store that does not answer leaves each replica its own buckets.
//!
//! The PostgreSQL store needs `LOOM_TEST_DATABASE_URL`; the Redis one also
//! `LOOM_TEST_REDIS_URL` (`.ci/run` sets it when Redis answers on
//! 127.0.0.1:6379). Budgets are a few calls a minute (a token every 12 s
//! or more), so refills during a test's second of calls change nothing.

use loom_core::Role;
use loom_server::config::RateLimitStore;
use loom_server::{Config, RunningServer};
use loom_tests::servers;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::replicas::{replicas, spec};

const BUDGET: u32 = 5;

fn redis_url() -> Option<String> {
    std::env::var("LOOM_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

fn limits(store: RateLimitStore, redis: Option<&str>, prefix: &str) -> impl Fn(&mut Config) {
    let redis = redis.map(str::to_owned);
    let prefix = prefix.to_owned();
    move |c: &mut Config| {
        c.rate_limit_store = store;
        c.redis_url.clone_from(&redis);
        c.redis_key_prefix.clone_from(&prefix);
        c.rate_write_per_min = BUDGET;
        c.rate_org_write_per_min = 1_000_000;
        // Slow answers on a loaded test machine must not hand the decision
        // to the local buckets (the fallback has its own test).
        c.rate_limit_store_timeout = std::time::Duration::from_secs(30);
    }
}

/// `calls` memory.set calls as `token`, all at once, spread round-robin over
/// the replicas: (accepted, refused with RATE_LIMITED and a Retry-After).
async fn spread(rs: &[RunningServer], token: &str, calls: usize, tag: &str) -> (usize, usize) {
    let client = reqwest::Client::new();
    let mut set = JoinSet::new();
    for i in 0..calls {
        let url = rs[i % rs.len()].url();
        let client = client.clone();
        let token = token.to_owned();
        let key = format!("{tag}-{i}");
        set.spawn(async move {
            let resp = client
                .post(format!("{url}/v1/memory.set"))
                .bearer_auth(&token)
                .json(&json!({"memory_key": key, "content": "c"}))
                .send()
                .await
                .expect("an answer");
            let status = resp.status().as_u16();
            let retry_after = resp.headers().get("retry-after").is_some();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            (status, retry_after, body)
        });
    }
    let (mut ok, mut refused) = (0, 0);
    while let Some(r) = set.join_next().await {
        match r.expect("a call panicked") {
            (200, _, _) => ok += 1,
            (429, true, b) if b["error"]["code"] == "RATE_LIMITED" => refused += 1,
            other => panic!("{tag}: neither served nor rate-limited: {other:?}"),
        }
    }
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_buckets_are_per_replica() {
    let Some((rs, _db)) = replicas(limits(RateLimitStore::Local, None, "")).await else {
        eprintln!("LOOM_TEST_DATABASE_URL is not set: replicas need PostgreSQL");
        return;
    };
    let (token, _) = rs[0].app.keys.mint(spec("bo")).expect("mint");
    let per_replica = BUDGET as usize + 2;
    let (ok, refused) = spread(&rs, &token, 3 * per_replica, "local").await;
    // each replica holds its own bucket: together they let three budgets through
    assert_eq!((ok, refused), (3 * BUDGET as usize, 3 * 2));
    for r in rs {
        r.shutdown().await;
    }
}

/// Three replicas on one store: one caller gets exactly its budget, and two
/// callers under their own budgets together get exactly the org's.
async fn shared_budget(store: RateLimitStore, redis: Option<&str>) {
    let prefix = || format!("loom-test-{:016x}:", rand::random::<u64>());
    let Some((rs, _db)) = replicas(limits(store, redis, &prefix())).await else {
        eprintln!("LOOM_TEST_DATABASE_URL is not set: replicas need PostgreSQL");
        return;
    };
    let n = store.as_str();
    let budget = BUDGET as usize;
    let extra = 7;
    let (token, _) = rs[0].app.keys.mint(spec("ana")).expect("mint");
    let (ok, refused) = spread(&rs, &token, budget + extra, "caller").await;
    assert_eq!(
        (ok, refused),
        (budget, extra),
        "{n}: one caller over three replicas"
    );
    eprintln!(
        "{n}: 3 replicas, budget {budget}/min, {} calls: {ok} served, {refused} RATE_LIMITED",
        budget + extra
    );
    for r in rs {
        r.shutdown().await;
    }

    // the org's bucket is shared too: 8 a minute for the org, 5 for each caller
    let org_budget = 8;
    let prefix = prefix();
    let Some((rs, _db)) = replicas(|c| {
        limits(store, redis, &prefix)(c);
        c.rate_org_write_per_min = org_budget;
    })
    .await
    else {
        return;
    };
    let (ana, _) = rs[0].app.keys.mint(spec("org-ana")).expect("mint");
    let (bo, _) = rs[0].app.keys.mint(spec("org-bo")).expect("mint");
    let (a, b) = tokio::join!(
        spread(&rs, &ana, budget + 1, "org-ana"),
        spread(&rs, &bo, budget + 1, "org-bo")
    );
    assert_eq!(
        (a.0 + b.0, a.1 + b.1),
        (org_budget as usize, 2 * (budget + 1) - org_budget as usize),
        "{n}: two callers together hold to the org's budget"
    );
    assert!(a.0 <= budget && b.0 <= budget, "{n}: {a:?} {b:?}");
    for r in rs {
        r.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_buckets_hold_a_caller_to_its_budget_across_replicas() {
    shared_budget(RateLimitStore::Postgres, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_buckets_hold_a_caller_to_its_budget_across_replicas() {
    let Some(url) = redis_url() else {
        eprintln!("LOOM_TEST_REDIS_URL is not set: the Redis store is not tested");
        return;
    };
    shared_budget(RateLimitStore::Redis, Some(&url)).await;
}

/// A Redis that does not answer: every call is still answered, and this
/// replica's own buckets still hold the caller to its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_falls_back_to_local_buckets() {
    // a port nothing listens on
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://{}", dead.local_addr().expect("addr"));
    drop(dead);
    let tweak = limits(RateLimitStore::Redis, Some(&url), "loom:");
    for t in servers(|c| {
        tweak(c);
        c.rate_limit_store_timeout = std::time::Duration::from_millis(250);
    })
    .await
    {
        let n = t.name();
        let token = t.token("default", "cut-off", Role::Writer, &[]);
        let rs = std::slice::from_ref(&t.server);
        let (ok, refused) = spread(rs, &token, BUDGET as usize + 3, "dead").await;
        assert_eq!(
            (ok, refused),
            (BUDGET as usize, 3),
            "{n}: local buckets decide"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_postgres_store_on_sqlite_is_refused_at_start() {
    let (url, dir) = loom_ops::store::testing::sqlite_url();
    let config = Config {
        port: 0,
        database_url: url,
        rate_limit_store: RateLimitStore::Postgres,
        ..Config::default()
    };
    let e = loom_server::spawn(config).await.expect_err("refused");
    assert!(
        e.contains("LOOM_RATE_LIMIT_STORE=postgres") && e.contains("LOOM_DATABASE_URL"),
        "{e}"
    );
    assert!(
        !dir.join("loom.db").exists(),
        "refused before the database was touched"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_redis_store_without_a_url_is_refused_at_start() {
    let config = Config {
        port: 0,
        rate_limit_store: RateLimitStore::Redis,
        ..Config::default()
    };
    let e = loom_server::spawn(config).await.expect_err("refused");
    assert!(e.contains("LOOM_REDIS_URL"), "{e}");
}
