//! A replica whose PostgreSQL becomes unreachable (run when
//! `LOOM_TEST_DATABASE_URL` is set): the server reaches the database
//! through a TCP relay the test cuts, and `/readyz` says not ready while
//! it is cut and ready again once it is mended, so a load balancer stops
//! and resumes sending it calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loom_ops::store::testing;
use loom_server::Config;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A relay from a loopback port to the database's: while cut, it closes
/// the connections it carries and every new one as soon as it comes.
struct Relay {
    port: u16,
    open: Arc<AtomicBool>,
    carried: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Relay {
    async fn to(upstream: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("its address").port();
        let open = Arc::new(AtomicBool::new(true));
        let carried: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (is_open, tasks) = (open.clone(), carried.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !is_open.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks.lock().unwrap().push(task.abort_handle());
            }
        });
        Relay {
            port,
            open,
            carried,
        }
    }

    /// Closes every connection carried and refuses new ones.
    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for task in self.carried.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    fn mend(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// Polls `/readyz` (every 50 ms, for at most 15 s: a check's outcome is
/// kept a second, and a check waits at most 0.8 s) until it answers
/// `status`; the last answer's status, code and `Retry-After`.
async fn readyz_until(
    client: &reqwest::Client,
    url: &str,
    status: u16,
) -> (u16, String, Option<String>) {
    let mut last = (0, String::new(), None);
    for _ in 0..300 {
        let r = client
            .get(format!("{url}/readyz"))
            .send()
            .await
            .expect("readyz answers");
        let retry_after = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let code = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap_or_default();
        let error = body["error"]["code"].as_str().unwrap_or("").to_owned();
        last = (code, error, retry_after);
        if code == status {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_not_ready_while_postgres_is_unreachable() {
    loom_tests::link();
    let Some(db) = testing::postgres().await else {
        return;
    };
    let mut url = url::Url::parse(&db.options.url).expect("LOOM_TEST_DATABASE_URL is a URL");
    let upstream = format!(
        "{}:{}",
        url.host_str().expect("a host"),
        url.port().unwrap_or(5432)
    );
    let relay = Relay::to(upstream).await;
    url.set_port(Some(relay.port)).expect("a port can be set");
    let server = loom_server::spawn(Config {
        bind_host: "127.0.0.1".into(),
        port: 0,
        database_url: url.to_string(),
        pg_schema: db.options.pg_schema.clone(),
        database_max_connections: Some(4),
        ..Config::default()
    })
    .await
    .expect("the server starts through the relay");
    let client = reqwest::Client::new();

    let (status, ..) = readyz_until(&client, &server.url(), 200).await;
    assert_eq!(status, 200, "ready through the relay");

    relay.cut();
    let (status, code, retry_after) = readyz_until(&client, &server.url(), 503).await;
    assert_eq!(
        (status, code.as_str()),
        (503, "NOT_READY"),
        "not ready while the database is unreachable"
    );
    assert_eq!(retry_after.as_deref(), Some("1"));

    relay.mend();
    let (status, ..) = readyz_until(&client, &server.url(), 200).await;
    assert_eq!(status, 200, "ready again once the database answers");
}
