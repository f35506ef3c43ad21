//! Micro-benchmarks of what every call pays before and around its handler:
//! the bearer check, the whole gate pipeline for one `memory.get` on an
//! in-process SQLite store, argument checking and listing generation.
//! `cargo bench -p loom-server` times them; CI runs them once each as a
//! smoke (`cargo test -p loom-server --benches`), never as a timing assert.

use std::collections::HashMap;

use criterion::{Criterion, criterion_group, criterion_main};
use loom_core::{Listing, Profile, Registry, Role, Transport};
use loom_server::pipeline::{self, CallRequest};
use loom_server::tokens::MintSpec;
use loom_server::transport::mcp::listing::Listings;
use loom_server::transport::mcp::protocol::Revision;
use loom_server::{App, Config};
use serde_json::json;

fn registry() -> &'static Registry {
    loom_ops::link();
    Registry::global().expect("the registry is valid")
}

fn gates(c: &mut Criterion) {
    let registry = registry();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("loom-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let vars: HashMap<String, String> = [
        (
            "LOOM_DATABASE_URL",
            format!("sqlite://{}", dir.join("loom.db").display()),
        ),
        ("LOOM_JWT_SECRET", "b".repeat(32)),
        ("LOOM_RATE_LIMIT_READ_PER_MIN", "1000000000".into()),
        ("LOOM_RATE_LIMIT_WRITE_PER_MIN", "1000000000".into()),
        // the org's budget too: a timed run makes far more calls than
        // the shipped per-org limit allows in a minute
        ("LOOM_RATE_LIMIT_ORG_READ_PER_MIN", "1000000000".into()),
        ("LOOM_RATE_LIMIT_ORG_WRITE_PER_MIN", "1000000000".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = Config::from_vars(&vars).expect("config");
    let app = runtime.block_on(App::open(config)).expect("app opens");
    runtime
        .block_on(app.revocations.refresh(&app.store))
        .expect("revocations load");
    let (token, _) = app
        .keys
        .mint(MintSpec {
            org: "default".into(),
            subject: "bench".into(),
            role: Role::Writer,
            namespaces: Vec::new(),
            ttl_secs: 3600,
            platform_admin: false,
            consumer: None,
        })
        .expect("mint");
    let bearer = format!("Bearer {token}");
    let caller = pipeline::check_bearer(&app, Some(bearer.as_bytes()))
        .expect("the token is accepted")
        .expect("auth is on");
    let request = |op: &str, args: serde_json::Value| CallRequest {
        op: registry.get(op).expect("op exists"),
        args,
        caller: Some(caller.clone()),
        transport: Transport::Mcp,
        request_id: "bench".into(),
        idempotency_key: None,
        session_id: None,
        run_id: None,
        default_agent: Some("bench".into()),
        policy: pipeline::CallPolicy::default(),
        refuse: None,
        cancel: None,
    };
    let set = runtime.block_on(pipeline::call(
        &app,
        request(
            "memory.set",
            json!({"memory_key": "bench-1", "content": "the benchmark's memory"}),
        ),
    ));
    assert!(set.result.is_ok(), "{:?}", set.result);

    c.bench_function("authenticate (bearer, HS256)", |b| {
        b.iter(|| pipeline::check_bearer(&app, Some(bearer.as_bytes())).is_ok())
    });
    let get = request("memory.get", json!({"memory_key": "bench-1"}));
    c.bench_function("pipeline::call memory.get (SQLite)", |b| {
        b.iter(|| {
            let outcome = runtime.block_on(pipeline::call(&app, get.clone()));
            assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        })
    });
    runtime.block_on(app.ledger.close());
    let _ = std::fs::remove_dir_all(&dir);
}

fn arguments(c: &mut Criterion) {
    let registry = registry();
    let set = registry.get("memory.set").expect("memory.set");
    let good = json!({"memory_key": "notes/today", "content": "a fact", "labels": ["a", "b"]});
    let bad = json!({"memory_key": "notes/today", "contents": "a fact", "lables": ["a"]});
    c.bench_function("validator check memory.set (valid)", |b| {
        b.iter(|| set.validator().check("memory.set", &good, true).is_ok())
    });
    c.bench_function("validator check memory.set (near-miss keys)", |b| {
        b.iter(|| set.validator().check("memory.set", &bad, true).is_err())
    });
}

fn listings(c: &mut Criterion) {
    let registry = registry();
    let core = Listing::parse("core").expect("core");
    let all = Listing::parse("all").expect("all");
    c.bench_function("tools_list core standard (build)", |b| {
        b.iter(|| {
            Listings::new(registry).tools_list(&core, Profile::Standard, Revision::V2025_11_25)
        })
    });
    c.bench_function("tools_list all full (build)", |b| {
        b.iter(|| Listings::new(registry).tools_list(&all, Profile::Full, Revision::V2025_11_25))
    });
    let cached = Listings::new(registry);
    c.bench_function("tools_list core standard (cached)", |b| {
        b.iter(|| cached.tools_list(&core, Profile::Standard, Revision::V2025_11_25))
    });
}

criterion_group!(benches, gates, arguments, listings);
criterion_main!(benches);
