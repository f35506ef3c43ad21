//! Stores for tests: SQLite always, PostgreSQL when `LOOM_TEST_DATABASE_URL`
//! is set, each in a fresh file or schema so runs never collide.

use super::{Store, StoreOptions};

/// A fresh SQLite file under the temp folder (removed by [`TestStore`]'s drop).
pub fn sqlite_url() -> (String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("loom-test-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("loom.db");
    (format!("sqlite://{}", path.display()), dir)
}

/// The PostgreSQL URL tests use, when set.
pub fn postgres_url() -> Option<String> {
    std::env::var("LOOM_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// A fresh schema name.
pub fn fresh_schema() -> String {
    format!("loom_test_{}", uuid::Uuid::new_v4().simple())
}

/// A migrated store and what to clean up after it.
pub struct TestStore {
    /// The store.
    pub store: Store,
    /// Options that open the same database again (for restart tests).
    pub options: StoreOptions,
    dir: Option<std::path::PathBuf>,
}

impl TestStore {
    /// Which backend, for test names.
    pub fn name(&self) -> &'static str {
        self.store.backend().as_str()
    }

    /// SQLite's plan for `sql` with `params` bound: each step's detail
    /// (`EXPLAIN QUERY PLAN`), in order. Panics on PostgreSQL.
    pub fn query_plan(&self, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
        self.store
            .read_inline(|c| {
                let mut plan = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                plan.query_map(params, |row| row.get::<_, String>(3))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .expect("inline reads on a SQLite file")
            .expect("a plan")
    }

    /// The opcodes of SQLite's program for `sql` (`EXPLAIN`), in order:
    /// the statement's own, not its triggers'. Panics on PostgreSQL.
    pub fn opcodes(&self, sql: &str) -> Vec<String> {
        self.explained(&format!("EXPLAIN {sql}"), 1)
    }

    /// [`TestStore::query_plan`] with `sql`'s parameters unbound.
    pub fn query_plan_unbound(&self, sql: &str) -> Vec<String> {
        self.explained(&format!("EXPLAIN QUERY PLAN {sql}"), 3)
    }

    /// `column` of each row `explain` answers, its parameters left unbound
    /// (an `EXPLAIN` lists, it runs nothing).
    fn explained(&self, explain: &str, column: usize) -> Vec<String> {
        self.store
            .read_inline(|c| {
                let mut program = c.prepare(explain)?;
                let mut rows = program.raw_query();
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(row.get::<_, String>(column)?);
                }
                Ok(out)
            })
            .expect("inline reads on a SQLite file")
            .expect("an explanation")
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(schema) = self.options.pg_schema.clone() {
            drop_schema(self.options.url.clone(), schema);
        }
    }
}

/// Drops a test's PostgreSQL schema, so test runs do not pile schemas up
/// in the database they share. Drop cannot await, so this runs on a thread
/// of its own with its own runtime and connection. Best effort: a lock
/// timeout keeps it from ever hanging a test, and a failure leaves the
/// schema behind, which harms nothing.
fn drop_schema(url: String, schema: String) {
    let dropped = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::AnyConnection::connect(&url).await.ok()?;
            // A connection the test left inside a transaction holds locks
            // on the schema's tables until it ends: end it.
            sqlx::query(
                "SELECT CAST(COUNT(pg_terminate_backend(pid)) AS BIGINT) FROM \
                 (SELECT DISTINCT l.pid FROM pg_locks l \
                  JOIN pg_class c ON c.oid = l.relation \
                  JOIN pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = $1 AND l.pid <> pg_backend_pid()) holders",
            )
            .bind(&schema)
            .execute(&mut conn)
            .await
            .ok()?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "SET lock_timeout = '2s'; DROP SCHEMA IF EXISTS {schema} CASCADE"
            )))
            .execute(&mut conn)
            .await
            .ok()?;
            conn.close().await.ok()
        })
    });
    let _ = dropped.join();
}

/// A migrated SQLite store in a fresh file.
pub async fn sqlite() -> TestStore {
    let (url, dir) = sqlite_url();
    sqlite_at(url, dir).await
}

/// The SQLite store at `url` (a file in `dir`, from [`sqlite_url`]),
/// migrated as `loom serve` would migrate it; `dir` is removed on drop.
pub async fn sqlite_at(url: String, dir: std::path::PathBuf) -> TestStore {
    let options = StoreOptions::new(url);
    let store = Store::open(options.clone()).await.expect("open sqlite");
    TestStore {
        store,
        options,
        dir: Some(dir),
    }
}

/// A migrated PostgreSQL store in a fresh schema, when `LOOM_TEST_DATABASE_URL` is set.
pub async fn postgres() -> Option<TestStore> {
    postgres_with(|_| {}).await
}

/// [`postgres`] with `adjust` applied to its options first.
pub async fn postgres_with(adjust: impl FnOnce(&mut StoreOptions)) -> Option<TestStore> {
    let url = postgres_url()?;
    let mut options = StoreOptions::new(url);
    options.pg_schema = Some(fresh_schema());
    options.max_connections = Some(8);
    adjust(&mut options);
    let store = Store::open(options.clone()).await.expect("open postgres");
    Some(TestStore {
        store,
        options,
        dir: None,
    })
}

/// Every backend this machine can test: SQLite, and PostgreSQL when set.
pub async fn all() -> Vec<TestStore> {
    let mut stores = vec![sqlite().await];
    stores.extend(postgres().await);
    stores
}
