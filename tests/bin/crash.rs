//! `loom-crash`: the crash-safety driver behind `bench/crash.sh`.
//!
//! Starts `loom serve` (the binary given), drives `memory.set` from several
//! concurrent writers and records every acknowledged write, kills the
//! server with SIGKILL at a random moment, restarts it, and checks that
//! every acknowledged write reads back with its content and version. Prints
//! `acknowledged N, lost L` and the restart-to-ready times; exits non-zero
//! when anything was lost.
//!
//! Usage: `loom-crash LOOM_BINARY DATABASE_URL [KILLS] [WRITERS]`. For
//! PostgreSQL the driver makes a fresh schema and points the server at it.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

/// Keys each writer cycles through (so versions climb across kills).
const KEYS_PER_WRITER: usize = 16;

struct Server {
    child: Child,
    port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn envs(url: &str, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("LOOM_DATABASE_URL", url.to_owned()),
        ("LOOM_PORT", port.to_string()),
        ("LOOM_BIND_HOST", "127.0.0.1".into()),
        ("LOOM_RATE_LIMIT_READ_PER_MIN", "100000000".into()),
        ("LOOM_RATE_LIMIT_WRITE_PER_MIN", "100000000".into()),
        ("LOOM_RATE_LIMIT_ORG_READ_PER_MIN", "100000000".into()),
        ("LOOM_RATE_LIMIT_ORG_WRITE_PER_MIN", "100000000".into()),
        ("LOOM_LOG", "warn".into()),
    ]
}

/// Starts the server and waits (bounded) until `/readyz` answers 200.
async fn start(bin: &str, url: &str, log: &std::path::Path) -> (Server, Duration) {
    let port = free_port();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    let started = Instant::now();
    let mut child = Command::new(bin)
        .arg("serve")
        .envs(envs(url, port))
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("loom serve starts");
    let client = reqwest::Client::new();
    let ready = format!("http://127.0.0.1:{port}/readyz");
    for _ in 0..6000 {
        if let Ok(r) = client.get(&ready).send().await
            && r.status() == 200
        {
            return (Server { child, port }, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("loom serve was not ready within 30 s");
}

fn mint(bin: &str, url: &str) -> String {
    let out = Command::new(bin)
        .args([
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "crash",
            "--role",
            "writer",
        ])
        .envs(envs(url, 0))
        .output()
        .expect("loom token mint");
    assert!(
        out.status.success(),
        "token mint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

#[derive(Clone, Debug)]
struct Acked {
    content: String,
    version: i64,
}

/// One writer until its first transport error (the kill): the writes it
/// saw acknowledged, and the one in flight when the server died.
async fn writer(
    base: String,
    token: String,
    id: usize,
    round: usize,
    known: HashMap<String, Acked>,
) -> (HashMap<String, Acked>, Option<(String, String)>, usize) {
    let client = reqwest::Client::new();
    let mut acked = known;
    let mut n = 0;
    loop {
        let key = format!("w{id}-k{}", n % KEYS_PER_WRITER);
        let content = format!("writer {id} round {round} write {n}");
        n += 1;
        let r = client
            .post(format!("{base}/v1/memory.set"))
            .bearer_auth(&token)
            .json(&json!({"memory_key": key, "content": content}))
            .send()
            .await;
        let body: Option<Value> = match r {
            Ok(r) if r.status() == 200 => r.json().await.ok(),
            Ok(r) => panic!("memory.set answered {}: {:?}", r.status(), r.text().await),
            Err(_) => None,
        };
        match body {
            Some(b) => {
                let version = b["version"].as_i64().expect("a version");
                acked.insert(key, Acked { content, version });
            }
            None => return (acked, Some((key, content)), n - 1),
        }
    }
}

/// Reads `key`, retrying (bounded) an answer that is not 200 or 404 the way
/// a client honouring `retryable` would: (status, content, version, retries).
async fn read(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    key: &str,
) -> (u16, String, i64, usize) {
    let mut tries = 0;
    loop {
        let r = client
            .post(format!("{base}/v1/memory.get"))
            .bearer_auth(token)
            .json(&json!({"memory_key": key}))
            .send()
            .await
            .expect("memory.get");
        let status = r.status().as_u16();
        let b: Value = r.json().await.unwrap_or(Value::Null);
        if status == 200 || status == 404 || tries == 5 {
            let content = b["content"].as_str().unwrap_or("").to_owned();
            return (status, content, b["version"].as_i64().unwrap_or(0), tries);
        }
        tries += 1;
    }
}

/// What one verification found.
#[derive(Default)]
struct Verdict {
    checked: usize,
    /// Read back with another content or version, or not found.
    lost: Vec<String>,
    /// Still refused (5xx) after the retries: not known to be lost, checked again next round.
    unreadable: Vec<String>,
    /// Reads that needed a retry.
    retried: usize,
}

async fn verify(
    base: &str,
    token: &str,
    acked: &HashMap<String, Acked>,
    in_flight: &HashMap<String, String>,
) -> Verdict {
    let client = reqwest::Client::new();
    let mut v = Verdict {
        checked: acked.len(),
        ..Verdict::default()
    };
    for (key, a) in acked {
        let (status, content, version, tries) = read(&client, base, token, key).await;
        v.retried += usize::from(tries > 0);
        if status != 200 && status != 404 {
            v.unreadable
                .push(format!("{key}: {status} after {tries} retries"));
            continue;
        }
        let exact = status == 200 && content == a.content && version == a.version;
        // the write in flight at the kill may have committed: one version on
        let next = in_flight.get(key).is_some_and(|c| *c == content) && version == a.version + 1;
        if !(exact || next) {
            v.lost.push(format!(
                "{key}: acknowledged v{} {:?}, read {status} v{version} {content:?}",
                a.version, a.content
            ));
        }
    }
    v
}

async fn fresh_pg_schema(url: &str) -> String {
    sqlx::any::install_default_drivers();
    let schema = format!("loom_crash_{}", uuid_like());
    let pool = sqlx::AnyPool::connect(url).await.expect("PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .expect("create schema");
    pool.close().await;
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}")
}

fn uuid_like() -> String {
    let n: u64 = rand::rng().random();
    format!("{n:016x}")
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: loom-crash LOOM_BINARY DATABASE_URL [KILLS] [WRITERS]");
        std::process::exit(2);
    }
    let bin = args[1].clone();
    let mut url = args[2].clone();
    let kills: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20);
    let writers: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(8);
    if url.starts_with("postgres") {
        url = fresh_pg_schema(&url).await;
    }
    let log = std::env::temp_dir().join(format!("loom-crash-{}.log", std::process::id()));
    let started = Instant::now();
    let (mut server, first) = start(&bin, &url, &log).await;
    let token = mint(&bin, &url);
    let mut known: Vec<HashMap<String, Acked>> = vec![HashMap::new(); writers];
    let mut ready_times = vec![first];
    let mut total_writes = 0;
    let mut lost_total = Vec::new();
    let mut unreadable_total = 0;
    let mut rng = rand::rng();
    for round in 0..kills {
        let base = format!("http://127.0.0.1:{}", server.port);
        let tasks: Vec<_> = (0..writers)
            .map(|id| {
                tokio::spawn(writer(
                    base.clone(),
                    token.clone(),
                    id,
                    round,
                    known[id].clone(),
                ))
            })
            .collect();
        // a random moment while the writers run
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..1500))).await;
        server.child.kill().expect("SIGKILL");
        let _ = server.child.wait();
        let mut in_flight = HashMap::new();
        for (id, t) in tasks.into_iter().enumerate() {
            let (acked, pending, n) = t.await.expect("a writer");
            total_writes += n;
            known[id] = acked;
            if let Some((k, c)) = pending {
                in_flight.insert(k, c);
            }
        }
        let (s, ready) = start(&bin, &url, &log).await;
        server = s;
        ready_times.push(ready);
        let base = format!("http://127.0.0.1:{}", server.port);
        let all: HashMap<String, Acked> = known.iter().flat_map(|m| m.clone()).collect();
        let verdict = verify(&base, &token, &all, &in_flight).await;
        println!(
            "kill {:>2}: {} keys checked, {} lost, {} unreadable, {} reads retried, restart to ready {} ms",
            round + 1,
            verdict.checked,
            verdict.lost.len(),
            verdict.unreadable.len(),
            verdict.retried,
            ready.as_millis()
        );
        unreadable_total += verdict.unreadable.len();
        for u in verdict.unreadable.iter().take(3) {
            println!("  unreadable {u}");
        }
        let lost = verdict.lost;
        // a write in flight that did commit is now the acknowledged state
        for (id, m) in known.iter_mut().enumerate() {
            for (key, a) in m.iter_mut() {
                if key.starts_with(&format!("w{id}-")) && in_flight.contains_key(key) {
                    let r: Value = reqwest::Client::new()
                        .post(format!("{base}/v1/memory.get"))
                        .bearer_auth(&token)
                        .json(&json!({"memory_key": key}))
                        .send()
                        .await
                        .expect("memory.get")
                        .json()
                        .await
                        .expect("json");
                    a.version = r["version"].as_i64().unwrap_or(a.version);
                    a.content = r["content"].as_str().unwrap_or(&a.content).to_owned();
                }
            }
        }
        lost_total.extend(lost);
    }
    server.child.kill().ok();
    let _ = server.child.wait();
    let mut ms: Vec<u128> = ready_times.iter().map(Duration::as_millis).collect();
    ms.sort_unstable();
    println!(
        "backend {}: {kills} kills, {writers} writers, acknowledged {total_writes}, lost {} \
         ({unreadable_total} reads still refused after retries, checked again the next round)",
        if url.starts_with("postgres") {
            "postgres"
        } else {
            "sqlite"
        },
        lost_total.len()
    );
    println!(
        "restart to ready: min {} ms, median {} ms, max {} ms ({} starts); run time {} s",
        ms[0],
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        ms.len(),
        started.elapsed().as_secs()
    );
    for l in lost_total.iter().take(20) {
        println!("LOST {l}");
    }
    if !lost_total.is_empty() {
        std::process::exit(1);
    }
}
