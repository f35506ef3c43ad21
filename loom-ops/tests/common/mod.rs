//! Test harness: a store with an org and namespaces, and op calls made
//! through the registry (schema validation, then the type-erased handler),
//! as the pipeline makes them.
#![allow(dead_code)]

use std::sync::Arc;

use loom_core::{Caller, LoomError, OpCx, Registry, Role, Scope, Services};
use loom_ops::memory::usage::{self, UsageLog};
use loom_ops::store::testing::{self, TestStore};
use loom_ops::store::{Store, now_ms};
use serde_json::Value;

/// The org every test acts in.
pub const ORG: &str = "acme";
/// The caller's namespace.
pub const NS: &str = "main";
/// A second namespace of the org.
pub const OTHER_NS: &str = "team";
/// The calling agent.
pub const AGENT: &str = "alice";
/// The run a call belongs to unless it says otherwise.
const RUN: &str = "run-1";

/// One backend, seeded, with services holding its store.
pub struct Harness {
    pub t: TestStore,
    services: Arc<Services>,
}

/// A harness per backend this machine can test.
pub async fn all() -> Vec<Harness> {
    let mut out = Vec::new();
    for t in testing::all().await {
        out.push(Harness::seeded(t).await);
    }
    out
}

/// A SQLite harness.
pub async fn sqlite() -> Harness {
    Harness::seeded(testing::sqlite().await).await
}

fn services(store: Store) -> Arc<Services> {
    let mut s = Services::new();
    s.insert(usage::start(store.clone()));
    s.insert(store);
    Arc::new(s)
}

impl Harness {
    /// A harness on `t`, with [`ORG`] and its namespaces created.
    pub async fn seeded(t: TestStore) -> Harness {
        let w = t.store.writer();
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ($1, $2)")
            .bind(ORG)
            .bind(now_ms())
            .execute(w)
            .await
            .unwrap();
        for ns in [NS, OTHER_NS] {
            sqlx::query("INSERT INTO namespaces (org, namespace, created_ms) VALUES ($1, $2, $3)")
                .bind(ORG)
                .bind(ns)
                .bind(now_ms())
                .execute(w)
                .await
                .unwrap();
        }
        let services = services(t.store.clone());
        Harness { t, services }
    }

    /// The backend's name, for assertion messages.
    pub fn name(&self) -> &'static str {
        self.t.name()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.t.store
    }

    /// Closes the store and opens the same database again (a restart).
    pub async fn restart(&mut self) {
        self.t.store.close().await;
        let store = Store::open(self.t.options.clone()).await.expect("reopen");
        self.t.store = store.clone();
        self.services = services(store);
    }

    /// Calls `op` as [`AGENT`].
    pub async fn call(&self, op: &str, args: Value) -> Result<Value, LoomError> {
        self.call_as(AGENT, op, args).await
    }

    /// Calls `op` as `agent`: validation against the op's schema, scope
    /// from the arguments (explicit namespace and agent win), then the handler.
    pub async fn call_as(&self, agent: &str, op: &str, args: Value) -> Result<Value, LoomError> {
        self.call_in(agent, Some(RUN), op, args).await
    }

    /// Calls `op` as `agent` in run `run_id` (`None`: outside any run).
    pub async fn call_in(
        &self,
        agent: &str,
        run_id: Option<&str>,
        op: &str,
        args: Value,
    ) -> Result<Value, LoomError> {
        self.call_with_token(agent, run_id, &[], op, args).await
    }

    /// Calls `op` with `run_id` as the call's own run (the server's
    /// pipeline checked it open before the op ran; this call skips that
    /// check, as a `run.complete` landing between it and the write would).
    pub async fn call_named_run(
        &self,
        run_id: &str,
        op: &str,
        args: Value,
    ) -> Result<Value, LoomError> {
        self.call_scoped_with(AGENT, Some(run_id), &[], false, true, op, args)
            .await
    }

    /// Calls `op` as the server does once authorization found the call's
    /// namespace (`Scope::namespace_found`): the op asks the store nothing
    /// more about it, so a write reaches the writer without a read of its
    /// own on the way.
    pub async fn call_found(&self, op: &str, args: Value) -> Result<Value, LoomError> {
        self.call_scoped(AGENT, Some(RUN), &[], true, op, args)
            .await
    }

    /// Calls `op` with a token that names `token_namespaces`.
    pub async fn call_with_token(
        &self,
        agent: &str,
        run_id: Option<&str>,
        token_namespaces: &[&str],
        op: &str,
        args: Value,
    ) -> Result<Value, LoomError> {
        self.call_scoped(agent, run_id, token_namespaces, false, op, args)
            .await
    }

    async fn call_scoped(
        &self,
        agent: &str,
        run_id: Option<&str>,
        token_namespaces: &[&str],
        namespace_found: bool,
        op: &str,
        args: Value,
    ) -> Result<Value, LoomError> {
        self.call_scoped_with(
            agent,
            run_id,
            token_namespaces,
            namespace_found,
            false,
            op,
            args,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn call_scoped_with(
        &self,
        agent: &str,
        run_id: Option<&str>,
        token_namespaces: &[&str],
        namespace_found: bool,
        run_named: bool,
        op: &str,
        args: Value,
    ) -> Result<Value, LoomError> {
        loom_ops::link();
        let registry = Registry::global().expect("valid registry");
        let entry = registry.get(op).unwrap_or_else(|| panic!("no op {op}"));
        let mut cx = OpCx::new(entry.name.as_str(), self.services.clone());
        cx.audit = entry.meta.audit;
        cx.request_id = uuid::Uuid::new_v4().to_string();
        cx.caller = Caller {
            subject: "user:1".into(),
            org: ORG.into(),
            role: Some(Role::Admin),
            namespaces: token_namespaces.iter().map(|n| (*n).to_owned()).collect(),
            ..Caller::default()
        };
        cx.scope = Scope {
            org: ORG.into(),
            namespace: args
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or(NS)
                .into(),
            agent: args
                .get("agent")
                .and_then(Value::as_str)
                .unwrap_or(agent)
                .into(),
            role: None,
            namespace_found,
        };
        cx.run_id = run_id.map(str::to_owned);
        cx.run_named = run_named;
        // After the scope, as the server reads identity (its `agent` among
        // the keys an op may not declare) before it checks the arguments.
        let args = entry
            .validator()
            .accept(&entry.name, args, !entry.read_only())?;
        (entry.meta.call)(&cx, args)
            .await
            .and_then(loom_core::Output::into_value)
    }

    /// Waits until what reads left behind (exposures, recall counts) is written.
    pub async fn flush_usage(&self) {
        self.services.get::<UsageLog>().unwrap().flush().await;
    }

    /// A count from SQL with no parameters but the org, after the usage log
    /// is written.
    pub async fn count(&self, sql: &str) -> i64 {
        self.flush_usage().await;
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_one(self.store().reader())
            .await
            .unwrap();
        n
    }

    /// The keys `memory.search` finds for `query`, best first.
    pub async fn search_keys(&self, query: &str) -> Vec<String> {
        let found = self
            .call("memory.search", serde_json::json!({ "query": query }))
            .await
            .unwrap();
        hit_keys(&found["hits"])
    }

    /// Rows in `table`.
    pub async fn rows(&self, table: &str) -> i64 {
        self.count(&format!("SELECT COUNT(*) FROM {table}")).await
    }

    /// Audit outcomes of `op`, in order.
    pub async fn audit(&self, op: &str) -> Vec<String> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT outcome FROM audit_log WHERE op = $1 ORDER BY id")
                .bind(op)
                .fetch_all(self.store().reader())
                .await
                .unwrap();
        rows.into_iter().map(|(o,)| o).collect()
    }
}

/// The keys of a search's hits, in their order.
pub fn hit_keys(hits: &Value) -> Vec<String> {
    hits.as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["memory_key"].as_str().unwrap().to_owned())
        .collect()
}

/// The error code of a refusal.
pub fn code(r: Result<Value, LoomError>) -> String {
    match r {
        Ok(v) => panic!("expected a refusal, got {v}"),
        Err(e) => e.code().as_str().to_owned(),
    }
}

/// A SQLite store as a build before migration `before` (its number, as
/// "0009") left it: only the migrations numbered below it applied, by a
/// migrator of their own. Its URL and directory (for
/// [`testing::sqlite_at`], which applies the rest), and a pool on it to
/// write rows as that build would.
pub async fn sqlite_migrated_before(
    before: &str,
) -> (String, std::path::PathBuf, sqlx::SqlitePool) {
    let (url, dir) = testing::sqlite_url();
    let old = dir.join(format!("migrations-before-{before}"));
    std::fs::create_dir_all(&old).unwrap();
    for entry in
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite")).unwrap()
    {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.as_str() < before {
            std::fs::copy(&path, old.join(name)).unwrap();
        }
    }
    let options = url
        .parse::<sqlx::sqlite::SqliteConnectOptions>()
        .unwrap()
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    sqlx::migrate::Migrator::new(old.as_path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    (url, dir, pool)
}

/// Segments of SQLite's full-text index, counted the way FTS5 files them.
pub async fn full_text_segments(h: &Harness) -> i64 {
    h.store().full_text_state().await.unwrap().unwrap().segments
}

/// FTS5's check of the index's own consistency: fails the test on a fault.
pub async fn full_text_integrity_check(h: &Harness) {
    sqlx::query("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        .execute(h.store().writer())
        .await
        .unwrap();
}

/// Sets one of FTS5's settings of the full-text index (`automerge`,
/// `crisismerge`, ...), kept in the index itself.
pub async fn full_text_setting(h: &Harness, setting: &str, value: i64) {
    sqlx::query("INSERT INTO memories_fts (memories_fts, rank) VALUES ($1, $2)")
        .bind(setting)
        .bind(value)
        .execute(h.store().writer())
        .await
        .unwrap();
}
