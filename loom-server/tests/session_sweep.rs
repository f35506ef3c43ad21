//! The MCP session-run sweep across replicas, with real processes: three
//! `loom serve` processes (this build's binary) on one PostgreSQL database
//! and a short `LOOM_MCP_SESSION_RUN_IDLE_SECONDS`. Every idle session's run
//! is closed exactly once between them (each process logs the runs it
//! closed), and a session that keeps calling keeps its run open. Skipped
//! without `LOOM_TEST_DATABASE_URL`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use loom_ops::store::testing;
use serde_json::{Value, json};

/// How long the whole exchange may take before the test gives up.
const DEADLINE: Duration = Duration::from_secs(60);
/// Idle sessions, split among the three processes.
const IDLE_SESSIONS: usize = 6;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `loom` with no `LOOM_*` variable of the environment it runs in.
fn loom(url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loom"));
    for (k, _) in std::env::vars() {
        if k.starts_with("LOOM_") {
            c.env_remove(k);
        }
    }
    c.env("LOOM_DATABASE_URL", url);
    c
}

struct Replica {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Replica {
    fn start(url: &str, log: &Path) -> Replica {
        let port = free_port();
        let file = std::fs::File::create(log).expect("log file");
        let child = loom(url)
            .arg("serve")
            .envs([
                ("LOOM_PORT", port.to_string()),
                ("LOOM_BIND_HOST", "127.0.0.1".into()),
                ("LOOM_MCP_SESSION_RUN_IDLE_SECONDS", "2".into()),
                ("LOOM_LOG", "warn,loom_server::workers=info".into()),
                ("LOOM_LOG_FORMAT", "json".into()),
                ("LOOM_DATABASE_MAX_CONNECTIONS", "4".into()),
                ("LOOM_RATE_LIMIT_READ_PER_MIN", "1000000".into()),
                ("LOOM_RATE_LIMIT_WRITE_PER_MIN", "1000000".into()),
                ("LOOM_RATE_LIMIT_ORG_READ_PER_MIN", "1000000".into()),
                ("LOOM_RATE_LIMIT_ORG_WRITE_PER_MIN", "1000000".into()),
            ])
            .stdout(Stdio::from(file.try_clone().expect("log file")))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("loom serve starts");
        Replica {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log: log.to_owned(),
        }
    }

    async fn wait_ready(&mut self, client: &reqwest::Client) {
        let started = Instant::now();
        while started.elapsed() < DEADLINE {
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send().await
                && r.status() == 200
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("loom serve exited ({status}): {}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("loom serve was not ready: {}", self.logs());
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the process with SIGTERM (a clean shutdown) and returns its log.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        self.logs()
    }

    /// The runs the process says its sweep closed.
    fn closed_runs(log: &str) -> Vec<String> {
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "closed idle MCP session runs")
            .flat_map(|v| {
                v["fields"]["runs"]
                    .as_str()
                    .unwrap_or("")
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An MCP session on one process: `initialize`, then `tools/call`s.
struct Session {
    url: String,
    token: String,
    id: String,
}

impl Session {
    async fn open(client: &reqwest::Client, base: &str, token: &str) -> Session {
        let url = format!("{base}/mcp");
        let r = client
            .post(&url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "sweep-test", "version": "1"}}}),
            )
            .send()
            .await
            .expect("initialize");
        assert_eq!(r.status(), 200);
        let id = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        Session {
            url,
            token: token.to_owned(),
            id,
        }
    }

    async fn call(&self, client: &reqwest::Client, tool: &str, arguments: Value) -> Value {
        let r = client
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &self.id)
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}))
            .send()
            .await
            .expect("tools/call");
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.expect("JSON");
        assert_eq!(body["result"]["isError"], false, "{tool}: {body}");
        body["result"]["structuredContent"].clone()
    }
}

/// The namespace's session runs, by session id: (run_id, status, close_reason).
async fn session_runs(
    client: &reqwest::Client,
    base: &str,
    token: &str,
) -> Vec<(String, String, String, Option<String>)> {
    let r: Value = client
        .post(format!("{base}/v1/run.list"))
        .bearer_auth(token)
        .json(&json!({"limit": 500}))
        .send()
        .await
        .expect("run.list")
        .json()
        .await
        .expect("JSON");
    r["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("run.list: {r}"))
        .iter()
        .filter_map(|run| {
            Some((
                run["session_id"].as_str()?.to_owned(),
                run["run_id"].as_str()?.to_owned(),
                run["status"].as_str()?.to_owned(),
                run["close_reason"].as_str().map(str::to_owned),
            ))
        })
        .collect()
}

#[tokio::test]
async fn three_processes_close_each_idle_session_run_exactly_once_and_spare_a_live_one() {
    loom_ops::link();
    let Some(db) = testing::postgres().await else {
        eprintln!("skipped: LOOM_TEST_DATABASE_URL is not set");
        return;
    };
    let schema = db.options.pg_schema.clone().expect("a fresh schema");
    let sep = if db.options.url.contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!("{}{sep}options=-c%20search_path%3D{schema}", db.options.url);
    let dir = std::env::temp_dir().join(format!("loom-sweep-{schema}"));
    std::fs::create_dir_all(&dir).expect("log dir");
    let client = reqwest::Client::new();
    let mut a = Replica::start(&url, &dir.join("a.log"));
    let mut b = Replica::start(&url, &dir.join("b.log"));
    let mut c = Replica::start(&url, &dir.join("c.log"));
    a.wait_ready(&client).await;
    b.wait_ready(&client).await;
    c.wait_ready(&client).await;
    let out = loom(&url)
        .args([
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "ana",
            "--role",
            "writer",
        ])
        .output()
        .expect("loom token mint");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned();

    // idle sessions on all three processes, each with a run begun by a write
    let mut idle = Vec::new();
    for i in 0..IDLE_SESSIONS {
        let base = [&a.base, &b.base, &c.base][i % 3];
        let s = Session::open(&client, base, &token).await;
        s.call(
            &client,
            "loom_memory_set",
            json!({"memory_key": format!("idle-{i}"), "content": "v"}),
        )
        .await;
        idle.push(s.id);
    }
    let live = Session::open(&client, &a.base, &token).await;
    live.call(
        &client,
        "loom_memory_set",
        json!({"memory_key": "live", "content": "v"}),
    )
    .await;

    // the live session keeps calling while both sweeps find the others idle
    let started = Instant::now();
    let runs = loop {
        assert!(
            started.elapsed() < DEADLINE,
            "the idle runs were not closed in time: {:?}",
            session_runs(&client, &a.base, &token).await
        );
        live.call(&client, "loom_memory_get", json!({"memory_key": "live"}))
            .await;
        let runs = session_runs(&client, &b.base, &token).await;
        let closed = runs
            .iter()
            .filter(|r| idle.contains(&r.0) && r.2 == "closed")
            .count();
        if closed == IDLE_SESSIONS {
            break runs;
        }
        // pace the live session's calls well inside the idle window
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let live_runs: Vec<_> = runs.iter().filter(|r| r.0 == live.id).collect();
    assert_eq!(live_runs.len(), 1, "{runs:?}");
    assert_eq!(live_runs[0].2, "open", "the live session's run: {runs:?}");
    let idle_runs: Vec<&(String, String, String, Option<String>)> =
        runs.iter().filter(|r| idle.contains(&r.0)).collect();
    assert_eq!(idle_runs.len(), IDLE_SESSIONS, "{runs:?}");
    assert!(
        idle_runs.iter().all(|r| r.3.as_deref() == Some("idle")),
        "{runs:?}"
    );

    // each idle run was closed by exactly one sweep of one process
    let log_a = a.stop();
    let log_b = b.stop();
    let log_c = c.stop();
    let mut closed: Vec<String> = Replica::closed_runs(&log_a);
    closed.extend(Replica::closed_runs(&log_b));
    closed.extend(Replica::closed_runs(&log_c));
    closed.sort();
    let mut expected: Vec<String> = idle_runs.iter().map(|r| r.1.clone()).collect();
    expected.sort();
    assert_eq!(closed, expected, "logs:\n{log_a}\n{log_b}\n{log_c}");
    let _ = std::fs::remove_dir_all(dir);
}
