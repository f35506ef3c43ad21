//! The server's configuration: every `LOOM_*` variable, parsed once at
//! start. A bad value is a start-up error naming the variable, never a
//! silent fallback. The README lists every variable with its default.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// Everything `loom serve` reads from the environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// `LOOM_BIND_HOST` (127.0.0.1).
    pub bind_host: String,
    /// `LOOM_PORT` (8080; 0 picks a free port).
    pub port: u16,
    /// `LOOM_DATABASE_URL` (`sqlite://loom.db` in the working folder).
    pub database_url: String,
    /// PostgreSQL schema to use (tests run each server in a fresh one); not an environment variable.
    pub pg_schema: Option<String>,
    /// `LOOM_DATABASE_MAX_CONNECTIONS` (unset: 16 on PostgreSQL, one
    /// reader per core on SQLite; see `loom_ops::store::default_connections`).
    pub database_max_connections: Option<u32>,
    /// `LOOM_AUTH_REQUIRED` (true).
    pub auth_required: bool,
    /// `LOOM_ALLOW_INSECURE` (false): serve without auth on a non-loopback bind.
    pub allow_insecure: bool,
    /// `LOOM_JWT_SECRET`: HS256 key overriding the stored one (at least 32 bytes).
    pub jwt_secret: Option<Vec<u8>>,
    /// `LOOM_JWT_ISSUER` (`loom`).
    pub jwt_issuer: String,
    /// `LOOM_JWT_AUDIENCE` (`loom`).
    pub jwt_audience: String,
    /// `LOOM_JWT_LEEWAY_SECS` (30): clock skew allowed on `exp`, `nbf` and `iat`.
    pub jwt_leeway_secs: u64,
    /// `LOOM_PLATFORM_ADMINS`: comma-separated subjects that may act in any org.
    pub platform_admins: Vec<String>,
    /// `LOOM_MAX_BODY_BYTES` (1 MiB).
    pub max_body_bytes: usize,
    /// `LOOM_HEADER_READ_TIMEOUT_SECS` (10): a client must send its headers within this.
    pub header_read_timeout: Duration,
    /// `LOOM_BODY_READ_TIMEOUT_SECS` (30): a client must send its body within this.
    pub body_read_timeout: Duration,
    /// `LOOM_RATE_LIMIT_READ_PER_MIN` (1200).
    pub rate_read_per_min: u32,
    /// `LOOM_RATE_LIMIT_WRITE_PER_MIN` (300).
    pub rate_write_per_min: u32,
    /// `LOOM_RATE_LIMIT_HEAVY_PER_MIN` (60).
    pub rate_heavy_per_min: u32,
    /// `LOOM_RATE_LIMIT_ORG_READ_PER_MIN` (12000): all of an org's callers together.
    pub rate_org_read_per_min: u32,
    /// `LOOM_RATE_LIMIT_ORG_WRITE_PER_MIN` (3000).
    pub rate_org_write_per_min: u32,
    /// `LOOM_RATE_LIMIT_ORG_HEAVY_PER_MIN` (600).
    pub rate_org_heavy_per_min: u32,
    /// `LOOM_RATE_LIMIT_STORE` (`local`): where the buckets live.
    pub rate_limit_store: RateLimitStore,
    /// `LOOM_RATE_LIMIT_STORE_TIMEOUT_MS` (250): a shared store slower than
    /// this leaves the decision to this replica's own buckets.
    pub rate_limit_store_timeout: Duration,
    /// `LOOM_REDIS_URL`: the Redis the `redis` store uses (required with it).
    pub redis_url: Option<String>,
    /// `LOOM_REDIS_KEY_PREFIX` (`loom:`): prefixes every Redis key, so
    /// deployments can share one Redis.
    pub redis_key_prefix: String,
    /// `LOOM_REVOCATION_REFRESH_SECS` (10): how often every replica reloads the revocation list.
    pub revocation_refresh: Duration,
    /// `LOOM_ACCESS_CACHE_MS` (1000; 0 keeps nothing): how long a server keeps
    /// what it read of a namespace and of a caller's grant on it. Changes made
    /// through this server apply at once; made by another replica or
    /// straight in the database, within this time.
    pub access_cache: Duration,
    /// `LOOM_IDEMPOTENCY_TTL_SECS` (86400): how long a stored answer is replayed.
    pub idempotency_ttl: Duration,
    /// `LOOM_SHUTDOWN_GRACE_SECS` (30): how long in-flight calls may finish on shutdown.
    pub shutdown_grace: Duration,
    /// `LOOM_LEDGER_RETENTION_DAYS` (30; 0 keeps every row): how long the
    /// call ledger keeps a call (and so a run its calls).
    pub ledger_retention: Option<Duration>,
    /// `LOOM_EXPOSURE_RETENTION_DAYS` (30; 0 keeps every row): how long the
    /// record of who was served which memory keeps a read.
    pub exposure_retention: Option<Duration>,
    /// `LOOM_AUDIT_RETENTION_DAYS` (0: every row is kept): how long the
    /// audit log keeps a row. Kept for ever by default: an audit log is a
    /// record an operator deletes from only when a policy says so.
    pub audit_retention: Option<Duration>,
    /// `LOOM_LOG` (`info`): the log filter, in `tracing` syntax.
    pub log_filter: String,
    /// `LOOM_LOG_FORMAT` (`text`): `text` or `json` (one JSON object per line).
    pub log_json: bool,
    /// Load the revocation list at start (always, outside tests of the not-ready state).
    pub load_revocations: bool,
    /// The MCP transport's `LOOM_MCP_*` settings.
    pub mcp: crate::transport::mcp::config::McpConfig,
    /// `LOOM_SEARCH_FANOUT` (5): the most namespaces one `loom_search` reads.
    pub search_fan_out: usize,
    /// `LOOM_WORKERS` (true): run background workers (the MCP session-run
    /// sweep). A deployment where no replica runs them keeps idle runs open.
    pub workers: bool,
    /// `LOOM_FTS_MERGE_IDLE_SECS` (0.25; 0 turns it off; fractions of a
    /// second allowed): on SQLite, merge the full-text index once nobody
    /// has written it for this long (a worker that looks this often).
    /// Why a quarter of a second: searches right after a burst of writes
    /// walk the unmerged index, at about half the rate, until the merge
    /// ends, and a look costs one row's read. With a 1 s look the first
    /// 3-4 s of searches after 20 s of sets were slow; at 0.25 s (and the
    /// merge's steps paced 1:1, `store::full_text`) only the first second
    /// is (bench/RESULTS.md). Looks every 0.1 s gained nothing more. How
    /// often the index is merged is bounded by what makes a merge worth it
    /// (`store::full_text`), not by this.
    pub fts_merge_idle: Option<Duration>,
    /// `LOOM_OAUTH_ENABLED` (false): serve OAuth 2.1 sign-in (`/oauth/*`, discovery).
    pub oauth_enabled: bool,
    /// `LOOM_OAUTH_ISSUER`: the public base URL (`https://host[:port]`, no path);
    /// required with OAuth on; `http://` only for a loopback host.
    pub oauth_issuer: Option<String>,
    /// `LOOM_OAUTH_LOGIN_PROVIDER` (`password`): how people sign in.
    pub oauth_login_provider: String,
    /// `LOOM_OAUTH_CODE_TTL_SECS` (60): lifetime of an authorization code (at most 600).
    pub oauth_code_ttl: Duration,
    /// `LOOM_OAUTH_ACCESS_TTL_SECS` (3600): lifetime of an access token issued by OAuth.
    pub oauth_access_ttl: Duration,
    /// `LOOM_OAUTH_REFRESH_TTL_SECS` (2592000, 30 days): a refresh token lapses
    /// when unused this long (each rotation starts a new period).
    pub oauth_refresh_ttl: Duration,
    /// `LOOM_OAUTH_SIGNIN_TTL_SECS` (600): how long a sign-in and consent may take.
    pub oauth_signin_ttl: Duration,
    /// `LOOM_OAUTH_REGISTER_PER_MIN` (30): client registrations per minute, server-wide.
    pub oauth_register_per_min: u32,
    /// `LOOM_OAUTH_SIGNIN_FAILURES_PER_USER` (5): failed password sign-ins one
    /// username may have within the window before sign-in is refused for it.
    pub signin_failures_per_user: u32,
    /// `LOOM_OAUTH_SIGNIN_FAILURES_PER_IP` (20): the same, per client address.
    pub signin_failures_per_ip: u32,
    /// `LOOM_OAUTH_SIGNIN_WINDOW_SECS` (900): the window failures are counted
    /// in; a locked username or address is refused until it ends.
    pub signin_window: Duration,
    /// `LOOM_OAUTH_TRUST_FORWARDED_FOR` (false): take the client address from
    /// the last `X-Forwarded-For` entry (set it only behind a proxy that
    /// appends one) instead of the connection's peer.
    pub trust_forwarded_for: bool,
    /// `LOOM_OIDC_ISSUER`: the OpenID Connect provider sign-in is delegated to
    /// (with `LOOM_OAUTH_LOGIN_PROVIDER=oidc`).
    pub oidc_issuer: Option<String>,
    /// `LOOM_OIDC_CLIENT_ID`: Loom's client id at the provider.
    pub oidc_client_id: Option<String>,
    /// `LOOM_OIDC_CLIENT_SECRET`: Loom's client secret at the provider
    /// (unset: a public client, PKCE only).
    pub oidc_client_secret: Option<Secret>,
    /// `LOOM_OIDC_USERNAME_CLAIM` (`sub`): the id_token claim naming the Loom
    /// user, `sub` or `email` (which must then be verified).
    pub oidc_username_claim: String,
}

/// A configuration value never printed: `Debug` shows `"<redacted>"`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// Where rate-limit buckets live (`LOOM_RATE_LIMIT_STORE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateLimitStore {
    /// In this process: each replica has its own buckets.
    #[default]
    Local,
    /// The `rate_buckets` table of the PostgreSQL database (`LOOM_DATABASE_URL`).
    Postgres,
    /// Redis at `LOOM_REDIS_URL`.
    Redis,
}

impl RateLimitStore {
    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            RateLimitStore::Local => "local",
            RateLimitStore::Postgres => "postgres",
            RateLimitStore::Redis => "redis",
        }
    }
}

fn parse<T: std::str::FromStr>(name: &str, raw: &str, expected: &str) -> Result<T, String> {
    raw.trim()
        .parse()
        .map_err(|_| format!("{name}={raw:?} is not valid: expected {expected}"))
}

/// Variables whose empty value is their default (an empty list).
const BLANK_IS_DEFAULT: &[&str] = &["LOOM_PLATFORM_ADMINS", "LOOM_MCP_ALLOWED_HOSTS"];

/// Refuses a variable Loom reads that is set to nothing (or spaces): most
/// often a reference to another variable that is unset
/// (`LOOM_DATABASE_URL=$DB_URL`), which taken as "unset" would start on
/// the default silently (a new store in the working directory, with a new
/// signing key).
fn refuse_blank(vars: &HashMap<String, String>) -> Result<(), String> {
    let mut blank: Vec<&str> = KNOWN_VARS
        .iter()
        .copied()
        .filter(|name| !BLANK_IS_DEFAULT.contains(name))
        .filter(|name| vars.get(*name).is_some_and(|v| v.trim().is_empty()))
        .collect();
    blank.sort_unstable();
    match blank.as_slice() {
        [] => Ok(()),
        [name] => Err(format!(
            "{name} is set but empty: give it a value, or unset it for its default"
        )),
        names => Err(format!(
            "{} are set but empty: give each a value, or unset it for its default",
            names.join(", ")
        )),
    }
}

fn parse_bool(name: &str, raw: &str) -> Result<bool, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{name}={raw:?} is not valid: expected true or false"
        )),
    }
}

/// The most connections `LOOM_DATABASE_MAX_CONNECTIONS` may ask for
/// (PostgreSQL's own default allows 100 in all).
pub const MAX_DATABASE_CONNECTIONS: u32 = 1_000;

fn positive(name: &str, raw: &str) -> Result<u32, String> {
    // The bound is in the message: a value refused for its size alone is
    // still "a positive whole number" to whoever wrote it.
    const EXPECTED: &str = "a positive whole number up to 4294967295";
    match parse::<u32>(name, raw, EXPECTED)? {
        0 => Err(format!("{name}={raw:?} is not valid: expected {EXPECTED}")),
        n => Ok(n),
    }
}

/// [`positive`], and at most `max`: a value that would size something the
/// process allocates up front (a pool's connections) is bounded, so a
/// typo is refused at start rather than exhausting the machine.
fn positive_at_most(name: &str, raw: &str, max: u32) -> Result<u32, String> {
    match positive(name, raw)? {
        n if n > max => Err(format!("{name}={raw:?} is not valid: at most {max}")),
        n => Ok(n),
    }
}

fn seconds(name: &str, raw: &str) -> Result<Duration, String> {
    Ok(Duration::from_secs(u64::from(positive(name, raw)?)))
}

const DAY: Duration = Duration::from_secs(86_400);

/// The most days a `LOOM_*_RETENTION_DAYS` may name (a century): past it a
/// cutoff in milliseconds would be no date at all.
const MAX_RETENTION_DAYS: u32 = 36_500;

/// A `LOOM_*_RETENTION_DAYS` value: whole days, `None` for 0 (kept for ever).
fn retention_days(name: &str, raw: &str) -> Result<Option<Duration>, String> {
    match parse::<u32>(name, raw, "a whole number of days (0 keeps every row)")? {
        0 => Ok(None),
        n if n > MAX_RETENTION_DAYS => Err(format!(
            "{name}={raw:?} is not valid: at most {MAX_RETENTION_DAYS} days (0 keeps every row)"
        )),
        n => Ok(Some(DAY * n)),
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind_host: "127.0.0.1".into(),
            port: 8080,
            database_url: loom_ops::store::default_database_url(),
            pg_schema: None,
            database_max_connections: None,
            auth_required: true,
            allow_insecure: false,
            jwt_secret: None,
            jwt_issuer: "loom".into(),
            jwt_audience: "loom".into(),
            jwt_leeway_secs: 30,
            platform_admins: Vec::new(),
            max_body_bytes: 1024 * 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            rate_read_per_min: 1200,
            rate_write_per_min: 300,
            rate_heavy_per_min: 60,
            rate_org_read_per_min: 12_000,
            rate_org_write_per_min: 3_000,
            rate_org_heavy_per_min: 600,
            rate_limit_store: RateLimitStore::Local,
            rate_limit_store_timeout: Duration::from_millis(250),
            redis_url: None,
            redis_key_prefix: "loom:".into(),
            revocation_refresh: Duration::from_secs(10),
            access_cache: loom_ops::store::DEFAULT_ACCESS_CACHE,
            idempotency_ttl: Duration::from_secs(86_400),
            shutdown_grace: Duration::from_secs(30),
            ledger_retention: Some(DAY * 30),
            exposure_retention: Some(DAY * 30),
            audit_retention: None,
            log_filter: "info".into(),
            log_json: false,
            load_revocations: true,
            mcp: Default::default(),
            workers: true,
            fts_merge_idle: Some(Duration::from_millis(250)),
            search_fan_out: loom_ops::search::FAN_OUT,
            oauth_enabled: false,
            oauth_issuer: None,
            oauth_login_provider: "password".into(),
            oauth_code_ttl: Duration::from_secs(60),
            oauth_access_ttl: Duration::from_secs(3600),
            oauth_refresh_ttl: Duration::from_secs(30 * 86_400),
            oauth_signin_ttl: Duration::from_secs(600),
            oauth_register_per_min: 30,
            signin_failures_per_user: 5,
            signin_failures_per_ip: 20,
            signin_window: Duration::from_secs(900),
            trust_forwarded_for: false,
            oidc_issuer: None,
            oidc_client_id: None,
            oidc_client_secret: None,
            oidc_username_claim: "sub".into(),
        }
    }
}

/// Every variable the server reads (a test checks that the readers, here
/// and in the MCP configuration, read no other), for [`unknown_vars`].
pub const KNOWN_VARS: &[&str] = &[
    "LOOM_ACCESS_CACHE_MS",
    "LOOM_ALLOW_INSECURE",
    "LOOM_AUDIT_RETENTION_DAYS",
    "LOOM_AUTH_REQUIRED",
    "LOOM_BIND_HOST",
    "LOOM_BODY_READ_TIMEOUT_SECS",
    "LOOM_DATABASE_MAX_CONNECTIONS",
    "LOOM_DATABASE_URL",
    "LOOM_EXPOSURE_RETENTION_DAYS",
    "LOOM_FTS_MERGE_IDLE_SECS",
    "LOOM_HEADER_READ_TIMEOUT_SECS",
    "LOOM_IDEMPOTENCY_TTL_SECS",
    "LOOM_JWT_AUDIENCE",
    "LOOM_JWT_ISSUER",
    "LOOM_JWT_LEEWAY_SECS",
    "LOOM_JWT_SECRET",
    "LOOM_LEDGER_RETENTION_DAYS",
    "LOOM_LOG",
    "LOOM_LOG_FORMAT",
    "LOOM_MAX_BODY_BYTES",
    "LOOM_MCP_ALLOWED_HOSTS",
    "LOOM_MCP_AUTH_MODE",
    "LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S",
    "LOOM_MCP_SCHEMA_PROFILE",
    "LOOM_MCP_SESSION_CACHE",
    "LOOM_MCP_SESSION_RUN_IDLE_SECONDS",
    "LOOM_MCP_TOOLSET",
    "LOOM_OAUTH_ACCESS_TTL_SECS",
    "LOOM_OAUTH_CODE_TTL_SECS",
    "LOOM_OAUTH_ENABLED",
    "LOOM_OAUTH_ISSUER",
    "LOOM_OAUTH_LOGIN_PROVIDER",
    "LOOM_OAUTH_REFRESH_TTL_SECS",
    "LOOM_OAUTH_REGISTER_PER_MIN",
    "LOOM_OAUTH_SIGNIN_FAILURES_PER_IP",
    "LOOM_OAUTH_SIGNIN_FAILURES_PER_USER",
    "LOOM_OAUTH_SIGNIN_TTL_SECS",
    "LOOM_OAUTH_SIGNIN_WINDOW_SECS",
    "LOOM_OAUTH_TRUST_FORWARDED_FOR",
    "LOOM_OIDC_CLIENT_ID",
    "LOOM_OIDC_CLIENT_SECRET",
    "LOOM_OIDC_ISSUER",
    "LOOM_OIDC_USERNAME_CLAIM",
    "LOOM_PLATFORM_ADMINS",
    "LOOM_PORT",
    "LOOM_RATE_LIMIT_HEAVY_PER_MIN",
    "LOOM_RATE_LIMIT_ORG_HEAVY_PER_MIN",
    "LOOM_RATE_LIMIT_ORG_READ_PER_MIN",
    "LOOM_RATE_LIMIT_ORG_WRITE_PER_MIN",
    "LOOM_RATE_LIMIT_READ_PER_MIN",
    "LOOM_RATE_LIMIT_STORE",
    "LOOM_RATE_LIMIT_STORE_TIMEOUT_MS",
    "LOOM_RATE_LIMIT_WRITE_PER_MIN",
    "LOOM_REDIS_KEY_PREFIX",
    "LOOM_REDIS_URL",
    "LOOM_REVOCATION_REFRESH_SECS",
    "LOOM_SEARCH_FANOUT",
    "LOOM_SHUTDOWN_GRACE_SECS",
    "LOOM_WORKERS",
];

/// The `LOOM_*` names in `names` that Loom does not read, each with the
/// known name it is most likely a misspelling of: a misspelt limit would
/// otherwise be ignored without a word. `LOOM_TEST_*` are the tests'.
pub fn unknown_vars<'a>(
    names: impl Iterator<Item = &'a str>,
) -> Vec<(String, Option<&'static str>)> {
    let mut unknown: Vec<_> = names
        .filter(|n| n.starts_with("LOOM_") && !n.starts_with("LOOM_TEST_"))
        .filter(|n| !KNOWN_VARS.contains(n))
        .map(|n| {
            // Compared without the prefix they all share, which made any
            // name look close to some known one (LOOM_DEBUG to
            // LOOM_DATABASE_URL).
            let bare = |name: &'static str| name.trim_start_matches("LOOM_");
            let near = loom_core::closest(
                n.trim_start_matches("LOOM_"),
                KNOWN_VARS.iter().copied().map(bare),
                1,
            )
            .first()
            .and_then(|b| KNOWN_VARS.iter().copied().find(|k| bare(k) == *b));
            (n.to_owned(), near)
        })
        .collect();
    unknown.sort();
    unknown
}

/// The `LOOM_*` names in `names` whose setting has no effect under
/// `config` (a feature they belong to is off), each with why: an operator
/// who set `LOOM_OAUTH_ISSUER` and forgot `LOOM_OAUTH_ENABLED` is told at
/// start, not at the first failed sign-in.
pub fn idle_vars<'a>(
    names: impl Iterator<Item = &'a str>,
    config: &Config,
) -> Vec<(String, &'static str)> {
    let sqlite = !config.database_url.starts_with("postgres");
    let mut idle: Vec<_> = names
        .filter_map(|name| {
            let why = if (name.starts_with("LOOM_OAUTH_") && name != "LOOM_OAUTH_ENABLED"
                || name.starts_with("LOOM_OIDC_"))
                && !config.oauth_enabled
            {
                "LOOM_OAUTH_ENABLED is not true"
            } else if name.starts_with("LOOM_OIDC_") && config.oauth_login_provider != "oidc" {
                "LOOM_OAUTH_LOGIN_PROVIDER is not oidc"
            } else if name.starts_with("LOOM_REDIS_")
                && config.rate_limit_store != RateLimitStore::Redis
            {
                "LOOM_RATE_LIMIT_STORE is not redis"
            } else if name == "LOOM_RATE_LIMIT_STORE_TIMEOUT_MS"
                && config.rate_limit_store == RateLimitStore::Local
            {
                "LOOM_RATE_LIMIT_STORE is local"
            } else if name == "LOOM_FTS_MERGE_IDLE_SECS" && !sqlite {
                "the full-text merge is SQLite's"
            } else {
                return None;
            };
            Some((name.to_owned(), why))
        })
        .collect();
    idle.sort();
    idle
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, String> {
        let vars: HashMap<String, String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("LOOM_"))
            .collect();
        Config::from_vars(&vars)
    }

    /// Reads `vars` (name → value); unset names keep their defaults.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Config, String> {
        refuse_blank(vars)?;
        let mut c = Config::default();
        let get = |name: &str| {
            vars.get(name)
                .map(String::as_str)
                .filter(|v| !v.trim().is_empty())
        };
        if let Some(v) = get("LOOM_BIND_HOST") {
            c.bind_host = v.trim().to_owned();
        }
        if let Some(v) = get("LOOM_PORT") {
            c.port = parse("LOOM_PORT", v, "a port number (0 to 65535)")?;
        }
        if let Some(v) = get("LOOM_DATABASE_URL") {
            c.database_url = v.trim().to_owned();
            if !(c.database_url.starts_with("sqlite:")
                || c.database_url.starts_with("postgres://")
                || c.database_url.starts_with("postgresql://"))
            {
                return Err(
                    "LOOM_DATABASE_URL is not valid: expected sqlite://PATH or postgres://…".into(),
                );
            }
            // `sqlite://` with nothing after it (an unset variable in
            // `sqlite://$DIR/loom.db`, say) would be a store in memory,
            // gone at the next start: that is asked for by name only.
            if c.database_url.starts_with("sqlite:")
                && loom_ops::store::sqlite_path(&c.database_url).is_none()
            {
                return Err(format!(
                    "LOOM_DATABASE_URL {:?} names no file: write sqlite://PATH, or sqlite::memory: for a store kept in memory and lost when the server stops",
                    c.database_url
                ));
            }
            // Likewise `postgres://$HOST/$DB` with both unset: PostgreSQL's
            // defaults would pick a database (the user's name) and make a
            // new store there. Not echoed: the URL may hold a password.
            if c.database_url.starts_with("postgres")
                && !loom_ops::store::postgres_names_database(&c.database_url)
            {
                return Err(
                    "LOOM_DATABASE_URL names no PostgreSQL database: write postgres://HOST/DATABASE (or ?dbname=DATABASE)".into(),
                );
            }
        }
        if let Some(v) = get("LOOM_DATABASE_MAX_CONNECTIONS") {
            c.database_max_connections = Some(positive_at_most(
                "LOOM_DATABASE_MAX_CONNECTIONS",
                v,
                MAX_DATABASE_CONNECTIONS,
            )?);
        }
        if let Some(v) = get("LOOM_AUTH_REQUIRED") {
            c.auth_required = parse_bool("LOOM_AUTH_REQUIRED", v)?;
        }
        if let Some(v) = get("LOOM_ALLOW_INSECURE") {
            c.allow_insecure = parse_bool("LOOM_ALLOW_INSECURE", v)?;
        }
        if let Some(v) = vars.get("LOOM_JWT_SECRET") {
            // Never echo the value.
            if v.len() < 32 {
                return Err(format!(
                    "LOOM_JWT_SECRET is too short: {} bytes, at least 32 are required",
                    v.len()
                ));
            }
            c.jwt_secret = Some(v.as_bytes().to_vec());
        }
        if let Some(v) = get("LOOM_JWT_ISSUER") {
            c.jwt_issuer = v.trim().to_owned();
        }
        if let Some(v) = get("LOOM_JWT_AUDIENCE") {
            c.jwt_audience = v.trim().to_owned();
        }
        if let Some(v) = get("LOOM_JWT_LEEWAY_SECS") {
            c.jwt_leeway_secs = parse("LOOM_JWT_LEEWAY_SECS", v, "a whole number of seconds")?;
            if c.jwt_leeway_secs > 300 {
                return Err(format!(
                    "LOOM_JWT_LEEWAY_SECS={v:?} is not valid: at most 300 seconds"
                ));
            }
        }
        if let Some(v) = get("LOOM_PLATFORM_ADMINS") {
            c.platform_admins = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if let Some(v) = get("LOOM_MAX_BODY_BYTES") {
            c.max_body_bytes = positive("LOOM_MAX_BODY_BYTES", v)? as usize;
        }
        if let Some(v) = get("LOOM_HEADER_READ_TIMEOUT_SECS") {
            c.header_read_timeout = seconds("LOOM_HEADER_READ_TIMEOUT_SECS", v)?;
        }
        if let Some(v) = get("LOOM_BODY_READ_TIMEOUT_SECS") {
            c.body_read_timeout = seconds("LOOM_BODY_READ_TIMEOUT_SECS", v)?;
        }
        if let Some(v) = get("LOOM_RATE_LIMIT_READ_PER_MIN") {
            c.rate_read_per_min = positive("LOOM_RATE_LIMIT_READ_PER_MIN", v)?;
        }
        if let Some(v) = get("LOOM_RATE_LIMIT_WRITE_PER_MIN") {
            c.rate_write_per_min = positive("LOOM_RATE_LIMIT_WRITE_PER_MIN", v)?;
        }
        if let Some(v) = get("LOOM_RATE_LIMIT_HEAVY_PER_MIN") {
            c.rate_heavy_per_min = positive("LOOM_RATE_LIMIT_HEAVY_PER_MIN", v)?;
        }
        for (name, slot) in [
            (
                "LOOM_RATE_LIMIT_ORG_READ_PER_MIN",
                &mut c.rate_org_read_per_min,
            ),
            (
                "LOOM_RATE_LIMIT_ORG_WRITE_PER_MIN",
                &mut c.rate_org_write_per_min,
            ),
            (
                "LOOM_RATE_LIMIT_ORG_HEAVY_PER_MIN",
                &mut c.rate_org_heavy_per_min,
            ),
        ] {
            if let Some(v) = get(name) {
                *slot = positive(name, v)?;
            }
        }
        if let Some(v) = get("LOOM_RATE_LIMIT_STORE") {
            c.rate_limit_store = match v.trim().to_ascii_lowercase().as_str() {
                "local" => RateLimitStore::Local,
                "postgres" => RateLimitStore::Postgres,
                "redis" => RateLimitStore::Redis,
                _ => {
                    return Err(format!(
                        "LOOM_RATE_LIMIT_STORE={v:?} is not valid: expected local, postgres or redis"
                    ));
                }
            };
        }
        if let Some(v) = get("LOOM_RATE_LIMIT_STORE_TIMEOUT_MS") {
            c.rate_limit_store_timeout =
                Duration::from_millis(u64::from(positive("LOOM_RATE_LIMIT_STORE_TIMEOUT_MS", v)?));
        }
        if let Some(v) = get("LOOM_REDIS_URL") {
            // Never echo the value: it may hold a password.
            let v = v.trim();
            if !(v.starts_with("redis://")
                || v.starts_with("rediss://")
                || v.starts_with("unix://"))
            {
                return Err(
                    "LOOM_REDIS_URL is not valid: expected redis://, rediss:// or unix://".into(),
                );
            }
            c.redis_url = Some(v.to_owned());
        }
        if let Some(v) = vars.get("LOOM_REDIS_KEY_PREFIX") {
            c.redis_key_prefix = v.clone();
        }
        if let Some(v) = get("LOOM_REVOCATION_REFRESH_SECS") {
            c.revocation_refresh = seconds("LOOM_REVOCATION_REFRESH_SECS", v)?;
        }
        if let Some(v) = get("LOOM_ACCESS_CACHE_MS") {
            c.access_cache = Duration::from_millis(parse::<u64>(
                "LOOM_ACCESS_CACHE_MS",
                v,
                "a whole number of milliseconds",
            )?);
        }
        if let Some(v) = get("LOOM_IDEMPOTENCY_TTL_SECS") {
            c.idempotency_ttl = seconds("LOOM_IDEMPOTENCY_TTL_SECS", v)?;
        }
        if let Some(v) = get("LOOM_SHUTDOWN_GRACE_SECS") {
            c.shutdown_grace = seconds("LOOM_SHUTDOWN_GRACE_SECS", v)?;
        }
        for (name, kept) in [
            ("LOOM_LEDGER_RETENTION_DAYS", &mut c.ledger_retention),
            ("LOOM_EXPOSURE_RETENTION_DAYS", &mut c.exposure_retention),
            ("LOOM_AUDIT_RETENTION_DAYS", &mut c.audit_retention),
        ] {
            if let Some(v) = get(name) {
                *kept = retention_days(name, v)?;
            }
        }
        c.mcp = crate::transport::mcp::config::McpConfig::from_vars(vars)?;
        if let Some(v) = get("LOOM_SEARCH_FANOUT") {
            c.search_fan_out = positive("LOOM_SEARCH_FANOUT", v)? as usize;
        }
        if let Some(v) = get("LOOM_WORKERS") {
            c.workers = parse_bool("LOOM_WORKERS", v)?;
        }
        if let Some(v) = get("LOOM_FTS_MERGE_IDLE_SECS") {
            let secs = parse::<f64>("LOOM_FTS_MERGE_IDLE_SECS", v, "a number of seconds")?;
            c.fts_merge_idle = match Duration::try_from_secs_f64(secs) {
                Ok(d) if d.is_zero() => None,
                Ok(d) if d <= Duration::from_secs(86_400) => Some(d),
                _ => {
                    return Err(format!(
                        "LOOM_FTS_MERGE_IDLE_SECS={v:?} is not valid: expected 0 to 86400 seconds"
                    ));
                }
            };
        }
        if let Some(v) = get("LOOM_LOG") {
            c.log_filter = v.trim().to_owned();
        }
        if let Some(v) = get("LOOM_LOG_FORMAT") {
            c.log_json = match v.trim() {
                "text" => false,
                "json" => true,
                _ => {
                    return Err(format!(
                        "LOOM_LOG_FORMAT={v:?} is not valid: expected text or json"
                    ));
                }
            };
        }
        if let Some(v) = get("LOOM_OAUTH_ENABLED") {
            c.oauth_enabled = parse_bool("LOOM_OAUTH_ENABLED", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_ISSUER") {
            c.oauth_issuer = Some(v.trim().trim_end_matches('/').to_owned());
        }
        if let Some(v) = get("LOOM_OAUTH_LOGIN_PROVIDER") {
            c.oauth_login_provider = v.trim().to_ascii_lowercase();
        }
        if let Some(v) = get("LOOM_OAUTH_CODE_TTL_SECS") {
            c.oauth_code_ttl = seconds("LOOM_OAUTH_CODE_TTL_SECS", v)?;
            if c.oauth_code_ttl > Duration::from_secs(600) {
                return Err(format!(
                    "LOOM_OAUTH_CODE_TTL_SECS={v:?} is not valid: at most 600 seconds"
                ));
            }
        }
        if let Some(v) = get("LOOM_OAUTH_ACCESS_TTL_SECS") {
            c.oauth_access_ttl = seconds("LOOM_OAUTH_ACCESS_TTL_SECS", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_REFRESH_TTL_SECS") {
            c.oauth_refresh_ttl = seconds("LOOM_OAUTH_REFRESH_TTL_SECS", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_SIGNIN_TTL_SECS") {
            c.oauth_signin_ttl = seconds("LOOM_OAUTH_SIGNIN_TTL_SECS", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_REGISTER_PER_MIN") {
            c.oauth_register_per_min = positive("LOOM_OAUTH_REGISTER_PER_MIN", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_SIGNIN_FAILURES_PER_USER") {
            c.signin_failures_per_user = positive("LOOM_OAUTH_SIGNIN_FAILURES_PER_USER", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_SIGNIN_FAILURES_PER_IP") {
            c.signin_failures_per_ip = positive("LOOM_OAUTH_SIGNIN_FAILURES_PER_IP", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_SIGNIN_WINDOW_SECS") {
            c.signin_window = seconds("LOOM_OAUTH_SIGNIN_WINDOW_SECS", v)?;
        }
        if let Some(v) = get("LOOM_OAUTH_TRUST_FORWARDED_FOR") {
            c.trust_forwarded_for = parse_bool("LOOM_OAUTH_TRUST_FORWARDED_FOR", v)?;
        }
        let nonempty = |v: &str| Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        if let Some(v) = get("LOOM_OIDC_ISSUER") {
            c.oidc_issuer = nonempty(v).map(|v| v.trim_end_matches('/').to_owned());
        }
        if let Some(v) = get("LOOM_OIDC_CLIENT_ID") {
            c.oidc_client_id = nonempty(v);
        }
        if let Some(v) = get("LOOM_OIDC_CLIENT_SECRET") {
            c.oidc_client_secret = nonempty(v).map(Secret);
        }
        if let Some(v) = get("LOOM_OIDC_USERNAME_CLAIM") {
            c.oidc_username_claim = v.trim().to_owned();
        }
        Ok(c)
    }

    /// Whether the bind host is a loopback address (`localhost` included).
    pub fn loopback_bind(&self) -> bool {
        let host = self.bind_host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// Refuses a configuration that must not start: no auth on a non-loopback
    /// bind, or MCP's `open` auth mode there.
    pub fn check(&self) -> Result<(), String> {
        use crate::transport::mcp::config::AuthMode;
        if self.mcp.auth_mode == AuthMode::Open && !self.loopback_bind() && !self.allow_insecure {
            return Err(format!(
                "refusing to serve MCP with LOOM_MCP_AUTH_MODE=open on the non-loopback LOOM_BIND_HOST={}; \
                 bind 127.0.0.1, use required or discovery_only, or set LOOM_ALLOW_INSECURE=1",
                self.bind_host
            ));
        }
        if !self.auth_required && !self.loopback_bind() && !self.allow_insecure {
            return Err(format!(
                "refusing to serve without authentication (LOOM_AUTH_REQUIRED=false) on the non-loopback \
                 LOOM_BIND_HOST={}; bind 127.0.0.1, turn authentication on, or set LOOM_ALLOW_INSECURE=1",
                self.bind_host
            ));
        }
        if self.oauth_enabled {
            crate::oauth::check_config(self)?;
        }
        match self.rate_limit_store {
            RateLimitStore::Postgres if !self.database_url.starts_with("postgres") => {
                return Err(
                    "LOOM_RATE_LIMIT_STORE=postgres keeps the buckets in the database, but LOOM_DATABASE_URL \
                     is not PostgreSQL; one SQLite file serves one server, whose local buckets suffice: \
                     use LOOM_RATE_LIMIT_STORE=local (or redis)"
                        .into(),
                );
            }
            RateLimitStore::Redis if self.redis_url.is_none() => {
                return Err(
                    "LOOM_RATE_LIMIT_STORE=redis needs LOOM_REDIS_URL (e.g. redis://127.0.0.1:6379)"
                        .into(),
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// The store options this configuration opens.
    pub fn store_options(&self) -> loom_ops::store::StoreOptions {
        let mut o = loom_ops::store::StoreOptions::new(self.database_url.clone());
        o.pg_schema = self.pg_schema.clone();
        o.max_connections = self.database_max_connections;
        o.access_cache = self.access_cache;
        o
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_variable_read_is_known() {
        let readers = [
            include_str!("config.rs"),
            include_str!("transport/mcp/config.rs"),
        ];
        for text in readers {
            for piece in text.split('"').skip(1).step_by(2) {
                if piece.len() > "LOOM_".len()
                    && piece.starts_with("LOOM_")
                    && !piece.starts_with("LOOM_TEST_")
                    // a family's prefix (`idle_vars`), not a name
                    && !piece.ends_with('_')
                    && piece
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                {
                    assert!(
                        super::KNOWN_VARS.contains(&piece),
                        "{piece} is read but not in KNOWN_VARS"
                    );
                }
            }
        }
        let unknown = super::unknown_vars(
            [
                "LOOM_PORT",
                "LOOM_RATE_LIMIT_WRITE_PER_MINUTE",
                "LOOM_TEST_DATABASE_URL",
                "PATH",
            ]
            .into_iter(),
        );
        assert_eq!(
            unknown,
            [(
                "LOOM_RATE_LIMIT_WRITE_PER_MINUTE".to_owned(),
                Some("LOOM_RATE_LIMIT_WRITE_PER_MIN")
            )]
        );
        // The shared prefix makes no name close to another.
        let unrelated = super::unknown_vars(["LOOM_XYZZY", "LOOM_DEBUG", "LOOM_TOKEN"].into_iter());
        assert!(
            unrelated.iter().all(|(_, near)| near.is_none()),
            "{unrelated:?}"
        );
        let near = super::unknown_vars(["LOOM_WORKER", "LOOM_PROT"].into_iter());
        assert_eq!(
            near.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
            [Some("LOOM_PORT"), Some("LOOM_WORKERS")]
        );
    }

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!((c.bind_host.as_str(), c.port), ("127.0.0.1", 8080));
        assert_eq!(c.database_url, "sqlite://loom.db");
        assert!(c.auth_required);
        assert_eq!(c.max_body_bytes, 1 << 20);
    }

    /// An empty value is most often an unset variable referenced by
    /// another: refused, naming it, where starting on the default would
    /// be silent (LOOM_DATABASE_URL would make a new store).
    #[test]
    fn an_empty_value_is_refused_not_taken_for_the_default() {
        for name in [
            "LOOM_PORT",
            "LOOM_DATABASE_URL",
            "LOOM_JWT_AUDIENCE",
            "LOOM_MCP_TOOLSET",
        ] {
            for blank in ["", "  "] {
                let e = Config::from_vars(&vars(&[(name, blank)])).unwrap_err();
                assert!(e.contains(name) && e.contains("empty"), "{e}");
            }
        }
        let e = Config::from_vars(&vars(&[("LOOM_LOG", ""), ("LOOM_PORT", "")])).unwrap_err();
        assert!(
            e.starts_with("LOOM_LOG, LOOM_PORT are set but empty"),
            "{e}"
        );
        // Lists whose default is empty take an empty value as that.
        let c = Config::from_vars(&vars(&[
            ("LOOM_PLATFORM_ADMINS", ""),
            ("LOOM_MCP_ALLOWED_HOSTS", " "),
        ]))
        .unwrap();
        assert!(c.platform_admins.is_empty());
        // Variables Loom does not read are not its business here.
        Config::from_vars(&vars(&[("LOOM_TEST_DATABASE_URL", "")])).unwrap();
    }

    #[test]
    fn settings_of_a_feature_that_is_off_are_named() {
        let names = [
            "LOOM_OAUTH_ISSUER",
            "LOOM_OAUTH_ENABLED",
            "LOOM_OIDC_ISSUER",
            "LOOM_REDIS_URL",
            "LOOM_PORT",
        ];
        let c = Config::default();
        let idle: Vec<String> = idle_vars(names.into_iter(), &c)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            idle,
            ["LOOM_OAUTH_ISSUER", "LOOM_OIDC_ISSUER", "LOOM_REDIS_URL"]
        );
        let c = Config {
            oauth_enabled: true,
            rate_limit_store: RateLimitStore::Redis,
            ..Config::default()
        };
        let idle = idle_vars(names.into_iter(), &c);
        assert_eq!(
            idle,
            [(
                "LOOM_OIDC_ISSUER".to_owned(),
                "LOOM_OAUTH_LOGIN_PROVIDER is not oidc"
            )]
        );
    }

    #[test]
    fn retention_is_whole_days_and_0_keeps_every_row() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.ledger_retention, Some(DAY * 30));
        assert_eq!(c.exposure_retention, Some(DAY * 30));
        assert_eq!(c.audit_retention, None, "the audit log is kept by default");
        let c = Config::from_vars(&vars(&[
            ("LOOM_LEDGER_RETENTION_DAYS", "0"),
            ("LOOM_EXPOSURE_RETENTION_DAYS", "7"),
            ("LOOM_AUDIT_RETENTION_DAYS", "365"),
        ]))
        .unwrap();
        assert_eq!(c.ledger_retention, None);
        assert_eq!(c.exposure_retention, Some(DAY * 7));
        assert_eq!(c.audit_retention, Some(DAY * 365));
        for bad in ["-1", "1.5", "thirty", "36501"] {
            let e = Config::from_vars(&vars(&[("LOOM_AUDIT_RETENTION_DAYS", bad)])).unwrap_err();
            assert!(e.contains("LOOM_AUDIT_RETENTION_DAYS"), "{e}");
        }
    }

    #[test]
    fn a_bad_value_names_the_variable() {
        let e = Config::from_vars(&vars(&[("LOOM_PORT", "eighty")])).unwrap_err();
        assert!(e.contains("LOOM_PORT"), "{e}");
        let e = Config::from_vars(&vars(&[("LOOM_AUTH_REQUIRED", "maybe")])).unwrap_err();
        assert!(e.contains("LOOM_AUTH_REQUIRED"), "{e}");
        let e = Config::from_vars(&vars(&[("LOOM_RATE_LIMIT_WRITE_PER_MIN", "0")])).unwrap_err();
        assert!(e.contains("LOOM_RATE_LIMIT_WRITE_PER_MIN"), "{e}");
        // A pool is allocated up front: a typo must not size it.
        let e = Config::from_vars(&vars(&[("LOOM_DATABASE_MAX_CONNECTIONS", "4294967295")]))
            .unwrap_err();
        assert!(
            e.contains("LOOM_DATABASE_MAX_CONNECTIONS") && e.contains("at most 1000"),
            "{e}"
        );
        let c = Config::from_vars(&vars(&[("LOOM_DATABASE_MAX_CONNECTIONS", "1000")])).unwrap();
        assert_eq!(c.database_max_connections, Some(1000));
        // A PostgreSQL URL naming no database (unset variables in
        // postgres://$HOST/$DB) is refused, without echoing it.
        for url in [
            "postgres://",
            "postgres:///",
            "postgresql://u:secret@h:5432?sslmode=require",
        ] {
            let e = Config::from_vars(&vars(&[("LOOM_DATABASE_URL", url)])).unwrap_err();
            assert!(
                e.contains("names no PostgreSQL database") && !e.contains("secret"),
                "{e}"
            );
        }
        for url in [
            "postgres://h/loom",
            "postgres:///loom?host=/run/postgresql",
            "postgres://h?dbname=loom",
        ] {
            assert!(
                Config::from_vars(&vars(&[("LOOM_DATABASE_URL", url)])).is_ok(),
                "{url}"
            );
        }
        // Refused for its size: the message gives the bound.
        let e = Config::from_vars(&vars(&[("LOOM_OAUTH_ACCESS_TTL_SECS", "999999999999")]))
            .unwrap_err();
        assert!(e.contains("up to 4294967295"), "{e}");
    }

    #[test]
    fn namespace_access_is_kept_a_second_unless_told_otherwise() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.access_cache, Duration::from_secs(1));
        assert_eq!(c.store_options().access_cache, Duration::from_secs(1));
        let c = Config::from_vars(&vars(&[("LOOM_ACCESS_CACHE_MS", "0")])).unwrap();
        assert_eq!(c.store_options().access_cache, Duration::ZERO);
        let c = Config::from_vars(&vars(&[("LOOM_ACCESS_CACHE_MS", "250")])).unwrap();
        assert_eq!(c.access_cache, Duration::from_millis(250));
        let e = Config::from_vars(&vars(&[("LOOM_ACCESS_CACHE_MS", "1s")])).unwrap_err();
        assert!(e.contains("LOOM_ACCESS_CACHE_MS"), "{e}");
    }

    #[test]
    fn the_full_text_merge_waits_a_quiet_quarter_second_unless_told_otherwise() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.fts_merge_idle, Some(Duration::from_millis(250)));
        let c = Config::from_vars(&vars(&[("LOOM_FTS_MERGE_IDLE_SECS", "60")])).unwrap();
        assert_eq!(c.fts_merge_idle, Some(Duration::from_secs(60)));
        let c = Config::from_vars(&vars(&[("LOOM_FTS_MERGE_IDLE_SECS", "0.5")])).unwrap();
        assert_eq!(c.fts_merge_idle, Some(Duration::from_millis(500)));
        let c = Config::from_vars(&vars(&[("LOOM_FTS_MERGE_IDLE_SECS", "0")])).unwrap();
        assert_eq!(c.fts_merge_idle, None);
        for bad in ["-1", "NaN", "inf", "1e9", "soon"] {
            let e = Config::from_vars(&vars(&[("LOOM_FTS_MERGE_IDLE_SECS", bad)])).unwrap_err();
            assert!(e.contains("LOOM_FTS_MERGE_IDLE_SECS"), "{e}");
        }
    }

    #[test]
    fn a_shared_rate_limit_store_needs_its_server() {
        let c = Config::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.rate_limit_store, RateLimitStore::Local);
        let e = Config::from_vars(&vars(&[("LOOM_RATE_LIMIT_STORE", "memcached")])).unwrap_err();
        assert!(e.contains("LOOM_RATE_LIMIT_STORE"), "{e}");
        let c = Config::from_vars(&vars(&[("LOOM_RATE_LIMIT_STORE", "postgres")])).unwrap();
        let e = c.check().unwrap_err();
        assert!(
            e.contains("LOOM_RATE_LIMIT_STORE=postgres") && e.contains("not PostgreSQL"),
            "{e}"
        );
        let c = Config::from_vars(&vars(&[
            ("LOOM_RATE_LIMIT_STORE", "postgres"),
            ("LOOM_DATABASE_URL", "postgres://db/loom"),
        ]))
        .unwrap();
        assert!(c.check().is_ok());
        let c = Config::from_vars(&vars(&[("LOOM_RATE_LIMIT_STORE", "redis")])).unwrap();
        assert!(c.check().unwrap_err().contains("LOOM_REDIS_URL"));
        let e = Config::from_vars(&vars(&[("LOOM_REDIS_URL", "http://user:pw@host")])).unwrap_err();
        assert!(e.contains("LOOM_REDIS_URL") && !e.contains("pw"), "{e}");
    }

    #[test]
    fn a_short_secret_is_refused_without_echoing_it() {
        let e = Config::from_vars(&vars(&[("LOOM_JWT_SECRET", "hunter2-secret")])).unwrap_err();
        assert!(
            e.contains("LOOM_JWT_SECRET") && !e.contains("hunter2"),
            "{e}"
        );
    }

    #[test]
    fn no_auth_needs_loopback_or_allow_insecure() {
        let open = |host: &str, insecure: &str| {
            Config::from_vars(&vars(&[
                ("LOOM_AUTH_REQUIRED", "false"),
                ("LOOM_BIND_HOST", host),
                ("LOOM_ALLOW_INSECURE", insecure),
            ]))
            .unwrap()
            .check()
        };
        assert!(open("127.0.0.1", "0").is_ok());
        assert!(open("::1", "0").is_ok());
        assert!(
            open("0.0.0.0", "0")
                .unwrap_err()
                .contains("LOOM_ALLOW_INSECURE")
        );
        assert!(open("0.0.0.0", "1").is_ok());
    }

    #[test]
    fn oauth_needs_an_https_issuer_outside_loopback() {
        let with = |issuer: &str| {
            let mut pairs = vec![("LOOM_OAUTH_ENABLED", "true")];
            if !issuer.is_empty() {
                pairs.push(("LOOM_OAUTH_ISSUER", issuer));
            }
            Config::from_vars(&vars(&pairs)).unwrap().check()
        };
        assert!(with("").unwrap_err().contains("LOOM_OAUTH_ISSUER"));
        assert!(with("https://loom.example.com").is_ok());
        assert!(with("https://loom.example.com/").is_ok());
        assert!(with("http://127.0.0.1:8080").is_ok());
        assert!(with("http://[::1]:8080").is_ok());
        assert!(with("http://localhost:8080").is_ok());
        for bad in [
            "http://loom.example.com",
            "http://10.0.0.5:8080",
            "https://loom.example.com/loom",
            "https://loom.example.com?x=1",
            "https://user@loom.example.com",
            "ftp://loom.example.com",
            "loom.example.com",
        ] {
            let e = with(bad).unwrap_err();
            assert!(e.contains("LOOM_OAUTH_ISSUER"), "{bad}: {e}");
        }
        let e = Config::from_vars(&vars(&[
            ("LOOM_OAUTH_ENABLED", "true"),
            ("LOOM_OAUTH_ISSUER", "https://loom.example.com"),
            ("LOOM_OAUTH_CODE_TTL_SECS", "3600"),
        ]))
        .unwrap_err();
        assert!(e.contains("LOOM_OAUTH_CODE_TTL_SECS"), "{e}");
    }
}
