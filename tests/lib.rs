//! Shared helpers for Loom's end-to-end tests: a real server on an
//! ephemeral loopback port, on every backend this machine can test, and a
//! client that speaks HTTP to it.

use loom_core::Role;
use loom_ops::store::testing::{self, TestStore};
use loom_server::tokens::MintSpec;
use loom_server::{Config, RunningServer};
use serde_json::Value;

/// Makes sure every op crate is linked into the test binary.
pub fn link() {
    loom_ops::link();
}

/// A server under test and the store it runs on.
pub struct TestServer {
    /// The running server.
    pub server: RunningServer,
    /// The same database, opened by the test (to count rows).
    pub db: TestStore,
    /// The client.
    pub client: reqwest::Client,
}

/// One answer.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body as text.
    pub text: String,
}

impl Answer {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The envelope's error code.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

/// Rate limits no test's calls come near, for tests that are not about
/// rate limits.
pub fn generous(c: &mut Config) {
    c.rate_read_per_min = 1_000_000;
    c.rate_org_read_per_min = 1_000_000;
    c.rate_write_per_min = 1_000_000;
    c.rate_org_write_per_min = 1_000_000;
    c.rate_heavy_per_min = 1_000_000;
    c.rate_org_heavy_per_min = 1_000_000;
}

/// Another program's connection to a SQLite store holding the file's
/// write lock (`BEGIN IMMEDIATE`) until it runs `ROLLBACK` or is dropped;
/// with `telemetry`, the lock of the store's telemetry file too (the call
/// ledger's and the usage counts' file, `<file>-telemetry`).
pub async fn hold_write_lock(t: &TestServer, telemetry: bool) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let url = &t.db.options.url;
    let mut holder = sqlx::SqliteConnection::connect(url)
        .await
        .expect("a second connection");
    if telemetry {
        let file = url
            .trim_start_matches("sqlite://")
            .split('?')
            .next()
            .expect("a path");
        // the path is the test's own temporary file, quoted
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "ATTACH DATABASE '{}-telemetry' AS telemetry",
            file.replace('\'', "''")
        )))
        .execute(&mut holder)
        .await
        .expect("the telemetry file");
    }
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .expect("the write lock");
    holder
}

/// What [`TestServer::token`] mints: an hour, no platform admin, no
/// consumer claim; change a field for anything else.
pub fn mint_spec(org: &str, subject: &str, role: Role, namespaces: &[&str]) -> MintSpec {
    MintSpec {
        org: org.into(),
        subject: subject.into(),
        role,
        namespaces: namespaces.iter().map(|s| (*s).to_owned()).collect(),
        ttl_secs: 3600,
        platform_admin: false,
        consumer: None,
    }
}

/// A server per backend (SQLite, and PostgreSQL when `LOOM_TEST_DATABASE_URL`
/// is set), each on a fresh database, configured by `tweak`, and ready.
pub async fn servers(tweak: impl Fn(&mut Config)) -> Vec<TestServer> {
    link();
    let mut out = Vec::new();
    for db in testing::all().await {
        let mut config = Config {
            bind_host: "127.0.0.1".into(),
            port: 0,
            database_url: db.options.url.clone(),
            pg_schema: db.options.pg_schema.clone(),
            database_max_connections: Some(4),
            ..Config::default()
        };
        tweak(&mut config);
        let wait_ready = config.load_revocations || !config.auth_required;
        let server = loom_server::spawn(config).await.expect("server starts");
        let t = TestServer {
            server,
            db,
            client: reqwest::Client::new(),
        };
        if wait_ready {
            t.wait_ready().await;
        }
        out.push(t);
    }
    out
}

/// Asks `answer` every 100 ms until it gives `want` or `bound` has
/// passed; its last answer. For what a server does in the background
/// (a recheck, a sweep), which no call of the test can wait for.
pub async fn poll_until<T, F>(
    bound: std::time::Duration,
    want: T,
    mut answer: impl FnMut() -> F,
) -> T
where
    T: PartialEq,
    F: std::future::Future<Output = T>,
{
    let deadline = std::time::Instant::now() + bound;
    loop {
        let got = answer().await;
        if got == want || std::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Polls `<url>/readyz` (bounded) until it answers 200: a server checks
/// no token before it has loaded the revocation list.
pub async fn wait_ready(client: &reqwest::Client, url: &str, name: &str) {
    for _ in 0..500 {
        let r = client
            .get(format!("{url}/readyz"))
            .send()
            .await
            .expect("readyz");
        if r.status() == 200 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{name}: the server never became ready");
}

impl TestServer {
    /// The backend's name, for assertion messages.
    pub fn name(&self) -> &'static str {
        self.db.name()
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Polls `/readyz` (bounded) until it answers 200.
    pub async fn wait_ready(&self) {
        wait_ready(&self.client, &self.url(), self.name()).await;
    }

    /// Mints a token with this server's key.
    pub fn token(&self, org: &str, subject: &str, role: Role, namespaces: &[&str]) -> String {
        self.mint(mint_spec(org, subject, role, namespaces))
    }

    /// Mints a token from a full spec.
    pub fn mint(&self, spec: MintSpec) -> String {
        self.server.app.keys.mint(spec).expect("mint").0
    }

    /// Sends a prepared request.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let r = request.send().await.expect("request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            body,
            text,
        }
    }

    /// `POST /v1/<op>` with a JSON body and an optional bearer.
    pub async fn post(&self, op: &str, token: Option<&str>, body: Value) -> Answer {
        self.send(self.request(op, token).json(&body)).await
    }

    /// A `POST /v1/<op>` request to finish.
    pub fn request(&self, op: &str, token: Option<&str>) -> reqwest::RequestBuilder {
        let mut r = self.client.post(format!("{}/v1/{op}", self.url()));
        if let Some(token) = token {
            r = r.bearer_auth(token);
        }
        r
    }

    /// Counts rows with a query returning one BIGINT.
    pub async fn count(&self, sql: &str) -> i64 {
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_one(self.db.store.reader())
            .await
            .expect(sql);
        n
    }

    /// Creates a namespace straight in the database (no op creates one).
    pub async fn create_namespace(&self, org: &str, namespace: &str) {
        sqlx::query("INSERT INTO namespaces (org, namespace, created_ms) VALUES ($1, $2, 0)")
            .bind(org)
            .bind(namespace)
            .execute(self.db.store.writer())
            .await
            .expect("namespace");
    }

    /// Writes the queued ledger rows and what reads left behind (exposures,
    /// recall counts).
    pub async fn flush_ledger(&self) {
        self.server.app.ledger.flush().await;
        self.server.app.usage.flush().await;
    }
}

/// An MCP client over the real socket: `POST /mcp` with a bearer, the
/// session header once `initialize` assigned one, and the query string of
/// the connection (`?toolset=…`).
pub struct McpClient<'a> {
    /// The server.
    pub server: &'a TestServer,
    /// The bearer, if any.
    pub token: Option<String>,
    /// The session id, once assigned.
    pub session: Option<String>,
    /// `?toolset=…&schema_profile=…`, without the `?`.
    pub query: String,
    /// The `MCP-Protocol-Version` sent (the negotiated one after `initialize`).
    pub version: String,
    next_id: std::sync::atomic::AtomicI64,
}

impl<'a> McpClient<'a> {
    /// A client with a bearer (or none) and a query string.
    pub fn new(server: &'a TestServer, token: Option<&str>, query: &str) -> Self {
        McpClient {
            server,
            token: token.map(str::to_owned),
            session: None,
            query: query.to_owned(),
            version: "2025-11-25".to_owned(),
            next_id: std::sync::atomic::AtomicI64::new(1),
        }
    }

    /// The `/mcp` URL of this connection.
    pub fn url(&self) -> String {
        if self.query.is_empty() {
            format!("{}/mcp", self.server.url())
        } else {
            format!("{}/mcp?{}", self.server.url(), self.query)
        }
    }

    /// A POST to finish (bearer and session set).
    pub fn post(&self) -> reqwest::RequestBuilder {
        let mut r = self
            .server
            .client
            .post(self.url())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", &self.version);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s);
        }
        r
    }

    /// Sends a raw JSON body.
    pub async fn raw(&self, body: Value) -> Answer {
        self.server.send(self.post().json(&body)).await
    }

    /// Sends one request and returns the whole answer.
    pub async fn request(&self, method: &str, params: Value) -> Answer {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.raw(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await
    }

    /// `initialize` with a client name; keeps the session id.
    pub async fn initialize(&mut self, client: &str, version: &str) -> Answer {
        let a = self
            .request(
                "initialize",
                serde_json::json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}),
            )
            .await;
        self.session = a.header("mcp-session-id").map(str::to_owned);
        if let Some(v) = a.body["result"]["protocolVersion"].as_str() {
            self.version = v.to_owned();
        }
        a
    }

    /// `tools/call`; returns the JSON-RPC `result` (or the whole body on an error).
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        let a = self
            .request(
                "tools/call",
                serde_json::json!({"name": tool, "arguments": arguments}),
            )
            .await;
        assert_eq!(a.status, 200, "{tool}: {}", a.text);
        if a.body.get("result").is_some() {
            a.body["result"].clone()
        } else {
            a.body
        }
    }
}
