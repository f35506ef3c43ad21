//! The server: opening the store, the shared state every call reads
//! ([`App`]), serving it on a socket ([`spawn`]) and shutting down cleanly.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use loom_core::{RateLimiter, Registry, Services};
use loom_ops::memory::usage::UsageLog;
use loom_ops::store::Store;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::pipeline::ledger::Ledger;
use crate::tokens::{JwtKeys, Revocations};

/// What every call shares.
pub struct App {
    /// The configuration.
    pub config: Config,
    /// The store.
    pub store: Store,
    /// Every op.
    pub registry: &'static Registry,
    /// What handlers receive (the store).
    pub services: Arc<Services>,
    /// The token keys.
    pub keys: JwtKeys,
    /// The revocation list.
    pub revocations: Revocations,
    /// Whether the store answers, as `/readyz` last found.
    pub store_check: crate::readiness::StoreCheck,
    /// The rate limiter.
    pub limiter: Arc<dyn RateLimiter>,
    /// The call ledger writer.
    pub ledger: Ledger,
    /// The writer of what reads leave behind (exposures, recall counts).
    pub usage: UsageLog,
    /// Whether this start created org `default` on an empty store.
    pub first_start: bool,
    /// OAuth sign-in (`LOOM_OAUTH_ENABLED=true`), else `None`.
    pub oauth: Option<Arc<crate::oauth::OAuth>>,
    /// The hosts a request's `Host` and `Origin` may name
    /// ([`crate::transport::guard`]).
    pub guard: crate::transport::guard::Guard,
    /// The calls running on tasks of their own
    /// ([`crate::pipeline::call_to_completion`]): shutdown waits for them
    /// before it closes the writers and the store.
    pub calls: TaskTracker,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("store", &self.store.backend())
            .finish_non_exhaustive()
    }
}

fn text(e: &loom_core::LoomError) -> String {
    e.internal_message().unwrap_or(e.message()).to_owned()
}

impl App {
    /// Opens the store (running migrations), creates org `default` on an
    /// empty store and loads the signing key. Must run on a Tokio runtime
    /// (it starts the ledger writer).
    pub async fn open(config: Config) -> Result<Arc<App>, String> {
        config.check()?;
        let registry = Registry::global().map_err(|errors| {
            let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
            format!("the op registry is invalid: {}", list.join("; "))
        })?;
        let store = Store::open(config.store_options()).await?;
        let first_start = store.ensure_default_org().await.map_err(|e| text(&e))?;
        let keys = JwtKeys::load(&store, &config).await?;
        let usage = loom_ops::memory::usage::start(store.clone());
        let mut services = Services::new();
        services.insert(store.clone());
        services.insert(usage.clone());
        services.insert(loom_ops::search::SearchSettings {
            fan_out: config.search_fan_out,
        });
        let limiter = crate::pipeline::ratelimit::from_config(&config, &store)?;
        let oauth = crate::oauth::OAuth::from_config(&config)?;
        let ledger = crate::pipeline::ledger::start(Arc::new(store.clone()));
        services.insert(ledger.clone());
        Ok(Arc::new(App {
            registry,
            services: Arc::new(services),
            keys,
            revocations: Revocations::default(),
            store_check: crate::readiness::StoreCheck::default(),
            limiter,
            ledger,
            usage,
            first_start,
            oauth,
            guard: crate::transport::guard::Guard::from_config(&config),
            calls: TaskTracker::new(),
            store,
            config,
        }))
    }

    /// Whether the server can check credentials: the revocation list has
    /// loaded (or authentication is off). Migrations ran before [`App`] existed.
    pub fn ready(&self) -> bool {
        !self.config.auth_required || self.revocations.loaded()
    }

    /// Why the server cannot serve calls now, if it cannot: what `/readyz`
    /// answers. The revocation list has not loaded, or the store does not
    /// answer ([`crate::readiness`]).
    pub async fn not_ready(&self) -> Option<&'static str> {
        if !self.ready() {
            return Some("the revocation list has not loaded yet");
        }
        if !self.store_check.answers(&self.store).await {
            return Some("the store does not answer");
        }
        None
    }
}

/// Keeps the revocation list fresh: loads it now, then every
/// `LOOM_REVOCATION_REFRESH_SECS`; a failed first load is retried every second.
fn start_revocation_refresh(app: Arc<App>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let wait = match app.revocations.refresh(&app.store).await {
                Ok(n) => {
                    tracing::debug!(revoked = n, "revocation list loaded");
                    app.config.revocation_refresh
                }
                Err(e) => {
                    tracing::error!(cause = %text(&e), "revocation list not loaded");
                    if app.revocations.loaded() {
                        app.config.revocation_refresh
                    } else {
                        std::time::Duration::from_secs(1)
                    }
                }
            };
            tokio::time::sleep(wait).await;
        }
    })
}

/// A server running on a socket.
pub struct RunningServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its shared state (tests read the store and flush the ledger and usage log through it).
    pub app: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections, lets in-flight calls finish (up to
    /// `LOOM_SHUTDOWN_GRACE_SECS`; a call whose client went away included),
    /// writes the queued ledger and usage rows and closes the store.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Waits until the server stops (after [`RunningServer::shutdown`] from
    /// elsewhere, or forever).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}

/// Opens the app and serves it on `LOOM_BIND_HOST:LOOM_PORT` (port 0 picks
/// a free one). Returns once the socket listens; the revocation list loads
/// in the background (`/readyz` says when).
pub async fn spawn(config: Config) -> Result<RunningServer, String> {
    // The socket first: a host that does not resolve or a port in use is
    // refused before a store is made or migrated for a server that cannot
    // serve.
    let host = config
        .bind_host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let listener = TcpListener::bind((host.as_str(), config.port))
        .await
        .map_err(|e| {
            format!(
                "cannot listen on {}:{} (LOOM_BIND_HOST, LOOM_PORT): {e}",
                config.bind_host, config.port
            )
        })?;
    let app = App::open(config).await?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Background tasks that end with the server.
    let mut background: Vec<JoinHandle<()>> = Vec::new();
    if app.config.load_revocations {
        background.push(start_revocation_refresh(app.clone()));
    }
    if app.config.workers {
        background.push(crate::workers::retention::start(app.clone()));
    }
    if let (true, Some(every)) = (app.config.workers, app.config.fts_merge_idle)
        && app.store.backend() == loom_ops::store::Backend::Sqlite
    {
        background.push(crate::workers::full_text::start(app.clone(), every));
    }
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(serve(app.clone(), listener, stopped, background));
    Ok(RunningServer {
        addr,
        app,
        stop: Some(stop),
        task,
    })
}

async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    mut stop: oneshot::Receiver<()>,
    background: Vec<JoinHandle<()>>,
) {
    // Every route answers with a request id and logs under it, OAuth's too.
    let router = crate::transport::http::router(app.clone())
        .merge(crate::oauth::routes(app.clone()))
        .layer(axum::middleware::from_fn(
            crate::transport::http::request_id,
        ));
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                // The peer address, for what limits by client (sign-in failures).
                let service = TowerToHyperService::new(
                    tower::ServiceBuilder::new()
                        .map_request(move |mut req: axum::http::Request<hyper::body::Incoming>| {
                            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                            req
                        })
                        .service(router.clone()),
                );
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(app.config.header_read_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            _ = &mut stop => break,
        }
    }
    drop(listener);
    // Background work stops first (a merge step it leaves is rolled back),
    // so the writer is the in-flight calls'.
    for task in &background {
        task.abort();
    }
    tracing::info!("shutting down: finishing in-flight calls");
    // One grace period for both: the connections, then the calls whose
    // client went away (they run on after their connection closed).
    let deadline = tokio::time::Instant::now() + app.config.shutdown_grace;
    let connections = tokio::time::timeout_at(deadline, graceful.shutdown());
    app.calls.close();
    match connections.await {
        Ok(()) => {
            if tokio::time::timeout_at(deadline, app.calls.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    running = app.calls.len(),
                    "calls still running when the grace period ended are stopped"
                );
            }
        }
        // A connection still open: a call running on it, or a request not
        // yet read whole (a slow upload), which is never answered.
        Err(_) => tracing::warn!(
            running = app.calls.len(),
            "connections still open when the grace period ended are closed"
        ),
    }
    // The rows batched for the store (the call ledger, usage counts) and
    // the store's last commit, within what is left of the grace period and
    // at least FINAL_WRITES: a store another program keeps locked, or an
    // unreachable PostgreSQL, would otherwise hold the exit for every
    // batch's tries (~10 s each on a locked SQLite file), past the time an
    // orchestrator waits before it kills the process.
    let until = deadline.max(tokio::time::Instant::now() + FINAL_WRITES);
    let last = async {
        app.ledger.close().await;
        app.usage.close().await;
        app.store.close().await;
    };
    if tokio::time::timeout_at(until, last).await.is_err() {
        tracing::error!(
            "the store did not take the last batched rows (call ledger, usage counts) before \
             the grace period ended: they are lost; every acknowledged write was committed"
        );
    }
    tracing::info!("stopped");
}

/// The least time the last batched rows and the store's close get at
/// shutdown, after calls that took the whole grace period.
const FINAL_WRITES: std::time::Duration = std::time::Duration::from_secs(2);
