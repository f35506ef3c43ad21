//! The command line: `loom <command>`.
//!
//! Usage errors (an unknown flag, a bad `--format`) print clap's message and
//! exit with code 2; failures while running exit with code 1.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use loom_core::{Registry, Role};
use loom_ops::store::Store;

use crate::config::Config;
use crate::tokens::{JwtKeys, MintSpec};
use loom_core::export::{self, Format};

#[derive(Debug, Parser)]
#[command(
    name = "loom",
    version,
    about = "Loom: long-term, shared memory and context for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serves the HTTP API (configuration from `LOOM_*` variables; see the README).
    Serve,
    /// Runs the database migrations and exits.
    Migrate,
    /// Mints or revokes access tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manages the people who sign in through OAuth (`LOOM_OAUTH_ENABLED=true`).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Creates and lists namespaces (and the orgs that hold them).
    Namespace {
        #[command(subcommand)]
        command: NamespaceCommand,
    },
    /// Writes the action schema a policy gateway governs Loom's tools with.
    ExportActions {
        /// `json`: the MCP tools/list manifest plus a `loom` block per tool;
        /// `cedar`: a Cedar schema with one action per op.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Where to write; `-` (the default) is standard output.
        #[arg(short = 'o', long = "output", default_value = "-")]
        output: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Prints one signed access token on standard output, and nothing else.
    Mint {
        /// The org the token acts in (`*`: any org).
        #[arg(long)]
        org: String,
        /// The subject (who the token is for).
        #[arg(long)]
        subject: String,
        /// viewer, writer or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// A namespace the token names (repeat for more; the first is its
        /// default workspace). None: every namespace of its org.
        #[arg(long = "namespace")]
        namespaces: Vec<String>,
        /// Lifetime in seconds (at most ten years).
        #[arg(long, default_value_t = DEFAULT_TTL_SECS, value_parser = clap::value_parser!(u64).range(1..=MAX_TTL_SECS))]
        ttl: u64,
        /// A platform admin token (may act in any org).
        #[arg(long)]
        platform_admin: bool,
        /// The client the token is for (the `consumer` claim).
        #[arg(long)]
        consumer: Option<String>,
    },
    /// Adds a token id (`jti`) to the revocation list; every server refuses
    /// it within `LOOM_REVOCATION_REFRESH_SECS`.
    Revoke {
        /// The token's `jti` claim.
        jti: String,
    },
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Adds a user who signs in with a password, read from standard input
    /// (one line; at least 8 characters), or with `--no-password` one who
    /// signs in only through the OpenID Connect provider
    /// (`LOOM_OAUTH_LOGIN_PROVIDER=oidc`; the username is then the
    /// provider's subject, or the email with `LOOM_OIDC_USERNAME_CLAIM=email`).
    Add {
        /// The login name, also the subject of the user's tokens.
        username: String,
        /// The org the user's tokens act in (it must exist).
        #[arg(long)]
        org: String,
        /// viewer, writer or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// A namespace the user's tokens name (repeat for more; the first is
        /// the default workspace). None: every namespace of the org.
        #[arg(long = "namespace")]
        namespaces: Vec<String>,
        /// Read no password: the account signs in only through the OpenID
        /// Connect provider.
        #[arg(long)]
        no_password: bool,
    },
    /// Disables a user: no more sign-ins or refreshes, and the access
    /// tokens issued to the user by OAuth are revoked.
    Disable {
        /// The login name.
        username: String,
    },
}

#[derive(Debug, Subcommand)]
enum NamespaceCommand {
    /// Creates a namespace, and its org when the org is new. One that
    /// exists already is left as it is (exit 0 when it has the kind and
    /// restriction asked, else 1).
    Add {
        /// The org.
        org: String,
        /// The namespace.
        namespace: String,
        /// personal, memory, collection, code or tracker.
        #[arg(long, default_value = "memory")]
        kind: String,
        /// Refuses every other org, platform admins included.
        #[arg(long)]
        restricted: bool,
        /// What it holds, in words (`namespace.get` shows it).
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Lists namespaces: org, namespace, kind, and `restricted` for those
    /// that are.
    List {
        /// Only this org's.
        #[arg(long)]
        org: Option<String>,
    },
}

/// The lifetime of a minted token when `--ttl` is not given: 30 days.
pub const DEFAULT_TTL_SECS: u64 = 30 * 24 * 3600;
/// The longest `--ttl`: ten years. Beyond it a lifetime is a typo, and one
/// near `u64::MAX` overflowed the expiry.
pub const MAX_TTL_SECS: u64 = 10 * 365 * 24 * 3600;

fn parse_role(s: &str) -> Result<Role, String> {
    s.parse()
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExportFormat {
    Json,
    Cedar,
}

impl From<ExportFormat> for Format {
    fn from(f: ExportFormat) -> Format {
        match f {
            ExportFormat::Json => Format::Json,
            ExportFormat::Cedar => Format::Cedar,
        }
    }
}

/// Runs the command line and returns the process's exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match cli.command {
        Command::ExportActions { format, output } => export_actions(format.into(), &output),
        Command::Serve => with_runtime(serve()),
        Command::Migrate => with_runtime(migrate()),
        Command::Token {
            command:
                TokenCommand::Mint {
                    org,
                    subject,
                    role,
                    namespaces,
                    ttl,
                    platform_admin,
                    consumer,
                },
        } => with_runtime(mint(MintSpec {
            org,
            subject,
            role,
            namespaces,
            ttl_secs: ttl,
            platform_admin,
            consumer,
        })),
        Command::Token {
            command: TokenCommand::Revoke { jti },
        } => with_runtime(revoke(jti)),
        Command::User {
            command:
                UserCommand::Add {
                    username,
                    org,
                    role,
                    namespaces,
                    no_password,
                },
        } => with_runtime(user_add(username, org, role, namespaces, no_password)),
        Command::User {
            command: UserCommand::Disable { username },
        } => with_runtime(user_disable(username)),
        Command::Namespace {
            command:
                NamespaceCommand::Add {
                    org,
                    namespace,
                    kind,
                    restricted,
                    description,
                },
        } => with_runtime(namespace_add(loom_ops::store::NewNamespace {
            org: &org,
            namespace: &namespace,
            kind: &kind,
            restricted,
            description: &description,
        })),
        Command::Namespace {
            command: NamespaceCommand::List { org },
        } => with_runtime(namespace_list(org)),
    }
}

fn with_runtime(work: impl std::future::Future<Output = Result<(), String>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loom: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loom: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(config: &Config) -> Result<(), String> {
    misspelt_level(&config.log_filter)?;
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_filter)
        .map_err(|e| format!("LOOM_LOG={:?} is not valid: {e}", config.log_filter))?;
    // Colour only for a person at a terminal: a service manager, a
    // container runtime or a file gets the escape codes as text otherwise.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    let _ = if config.log_json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    Ok(())
}

/// Refuses a `LOOM_LOG` directive that is a misspelt level: the filter
/// syntax reads a bare word as a target to log everything of, so `warning`
/// or `inof` was a filter matching nothing, and the server ran with no
/// log at all, errors included. A bare word that is a level, or none
/// near one (`loom_server`), is what it says.
fn misspelt_level(filter: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for directive in filter.split(',').map(str::trim) {
        let word = directive.to_ascii_lowercase();
        if word.is_empty() || word.contains(['=', '[', ':']) || LEVELS.contains(&word.as_str()) {
            continue;
        }
        // One edit from a level, or a level with more after it (`warning`,
        // `errors`); short words (`mio`) are module names.
        if let Some(level) = LEVELS[1..].iter().find(|level| {
            word.len() >= 4
                && (strsim::damerau_levenshtein(&word, level) <= 1 || word.starts_with(*level))
        }) {
            return Err(format!(
                "LOOM_LOG={filter:?} is not valid: {directive:?} would be read as a module to log, not a level (did you mean {level}?)"
            ));
        }
    }
    Ok(())
}

/// A line of the server's banner on standard output. A server outlives
/// whoever reads its output: with that gone (a closed pipe, `| head`) a
/// line is dropped, where `println!` would panic and take the server down.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// A line of a command's answer on standard output. Unlike the server's
/// banner ([`say!`]) the line is what the command was run for: one that
/// cannot be written (a full disk) fails the command with exit code 1, as
/// every other failure does, instead of a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
            .map_err(|e| format!("cannot write to standard output: {e}"))?
    }};
}

async fn serve() -> Result<(), String> {
    let config = Config::from_env()?;
    init_logging(&config)?;
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    for (name, near) in crate::config::unknown_vars(names.iter().map(String::as_str)) {
        match near {
            Some(near) => {
                tracing::warn!("{name} is not a Loom setting and is ignored; did you mean {near}?")
            }
            None => tracing::warn!("{name} is not a Loom setting and is ignored"),
        }
    }
    for (name, why) in crate::config::idle_vars(names.iter().map(String::as_str), &config) {
        tracing::warn!("{name} has no effect: {why}");
    }
    registry_or_report().ok_or("the op registry is invalid")?;
    // Listening for the stop signals starts before serving: a SIGTERM that
    // comes as soon as the server answers (an orchestrator stopping what it
    // just started) still stops it cleanly, where it killed the process.
    let mut stop = std::pin::pin!(stop_signal());
    // A signal while the store opens or migrates (a database that does not
    // answer, a long migration) stops the start there, rather than being
    // held until the start ends or fails; a migration is a transaction, so
    // one stopped half-way left nothing half-written.
    let server = tokio::select! {
        () = &mut stop => {
            tracing::info!("signal received while starting; stopped before serving");
            return Ok(());
        }
        started = crate::app::spawn(config) => started?,
    };
    let app = server.app.clone();
    let base = server.url();
    say!(
        "loom: serving the HTTP API at {base}/v1/<op> (health {base}/healthz, readiness {base}/readyz)"
    );
    say!(
        "loom: serving MCP at {base}/mcp (toolset {}, schema profile {})",
        app.config.mcp.toolset,
        app.config.mcp.profile.as_str()
    );
    say!(
        "loom: store {}",
        loom_ops::store::store_place(&app.config.database_url)
    );
    if app.config.oauth_enabled {
        say!(
            "loom: OAuth sign-in on, issuer {} (login {})",
            app.config.oauth_issuer.as_deref().unwrap_or("?"),
            app.config.oauth_login_provider
        );
    }
    for warning in app.store.setup_warnings().await {
        tracing::warn!("{warning}");
    }
    if app.config.store_options().in_memory() {
        tracing::warn!(
            "the store is in memory (LOOM_DATABASE_URL={}): everything it holds is lost when the server stops",
            app.config.database_url
        );
    }
    if !app.config.auth_required {
        say!("loom: authentication is OFF (LOOM_AUTH_REQUIRED=false): every call acts as admin");
    }
    if app.first_start {
        say!("loom: created org 'default' with namespace 'default'. Mint a token with:");
        say!("  loom token mint --org default --subject you --role admin");
        say!(
            "then call: curl -X POST {base}/v1/ops.capabilities -H \"Authorization: Bearer $TOKEN\" -H 'content-type: application/json' -d '{{}}'"
        );
    }
    stop.await;
    tracing::info!("signal received");
    // A second signal while calls finish and the ledger is written stops
    // the process at once: an operator's way out of a shutdown that waits
    // on a store that does not answer. What was acknowledged is committed;
    // the ledger and audit rows not yet written are lost.
    // One sent within a second of the first is the same request arriving
    // twice (GNU timeout signals the process and then its group), not an
    // operator asking again.
    let first = std::time::Instant::now();
    let again = async {
        loop {
            stop_signal().await;
            if first.elapsed() >= std::time::Duration::from_secs(1) {
                break;
            }
            tracing::debug!("a second signal within a second of the first: taken as the same");
        }
    };
    tokio::select! {
        () = server.shutdown() => Ok(()),
        () = again => {
            tracing::warn!("a second signal: stopping now, without the calls in flight and the rows not yet written");
            std::process::exit(SECOND_SIGNAL_EXIT);
        }
    }
}

/// The exit code of a process stopped by a second signal during shutdown
/// (128 + SIGINT, as shells report an interrupted command).
const SECOND_SIGNAL_EXIT: i32 = 130;

/// SIGTERM or SIGINT (Ctrl-C), each listened for from this call on.
#[cfg(unix)]
fn stop_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    async fn received(signal: std::io::Result<Signal>) {
        match signal {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    }
    let term = received(signal(SignalKind::terminate()));
    let interrupt = received(signal(SignalKind::interrupt()));
    async move {
        tokio::select! {
            () = term => {},
            () = interrupt => {},
        }
    }
}

/// Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> impl Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// What a command prints of a store call that failed: its cause.
fn store_fault(e: &loom_core::LoomError) -> String {
    e.internal_message().unwrap_or(e.message()).to_owned()
}

async fn open_store(config: &Config) -> Result<Store, String> {
    Store::open(config.store_options()).await
}

/// [`open_store`] for a command that acts on a server's store (a token is
/// good only on the store whose key signed it; an account, a namespace
/// only on the store that holds it): when no store was there, the one
/// made now is said on standard error, since run from another folder than
/// the server's it is not the server's store.
async fn open_server_store(command: &str, config: &Config) -> Result<Store, String> {
    let options = config.store_options();
    if options.in_memory() {
        return Err(format!(
            "{command}: LOOM_DATABASE_URL names a store in memory, which lives and dies with its server's process: what this made would be lost at once (serve it with LOOM_AUTH_REQUIRED=false, or use a file)"
        ));
    }
    if let Some(path) = options.new_sqlite_file() {
        eprintln!(
            "loom: note: {command}: no store was at {} and a new one was made there; a server on another store will not accept what this made (run this where `loom serve` runs, or set LOOM_DATABASE_URL to its store)",
            path.display()
        );
    }
    Store::open(options).await
}

async fn migrate() -> Result<(), String> {
    let config = Config::from_env()?;
    let store = open_store(&config).await?;
    store.close().await;
    out!(
        "loom: the store is migrated and up to date ({})",
        store.backend().as_str()
    );
    Ok(())
}

async fn mint(spec: MintSpec) -> Result<(), String> {
    let config = Config::from_env()?;
    if spec.org.trim().is_empty() || spec.subject.trim().is_empty() {
        return Err("token mint: --org and --subject must not be empty".into());
    }
    // The subject becomes the agent of the token's calls, and the org keys
    // every row: names as a call may send them (`*` is any org).
    for (flag, name) in [("--org", &spec.org), ("--subject", &spec.subject)] {
        if name != "*" && !valid_scope_name(name) {
            return Err(not_a_name("token mint", flag, name, ""));
        }
    }
    refuse_bad_namespace("token mint", &spec.namespaces)?;
    let store = open_server_store("token mint", &config).await?;
    let keys = JwtKeys::load(&store, &config).await;
    let unknown = unknown_namespaces(&store, &spec.org, &spec.namespaces).await;
    store.close().await;
    let (token, _claims) = keys?.mint(spec)?;
    note_unknown(unknown);
    out!("{token}");
    Ok(())
}

/// The namespaces a token would name (its default `default` when it names
/// none) that do not exist in its org; none for an org-wide token.
async fn unknown_namespaces(
    store: &Store,
    org: &str,
    namespaces: &[String],
) -> Vec<(String, String)> {
    // A fresh store gets its default org and namespace here, as on `serve`.
    if org == "*" || store.ensure_default_org().await.is_err() {
        return Vec::new();
    }
    let Ok(existing) = store.namespaces(Some(org)).await else {
        return Vec::new();
    };
    let default = [crate::pipeline::identity::DEFAULT_NAMESPACE.to_owned()];
    let named = if namespaces.is_empty() {
        &default[..]
    } else {
        namespaces
    };
    named
        .iter()
        .filter(|n| *n != "*" && !existing.iter().any(|(_, e, _, _)| e == *n))
        .map(|n| (org.to_owned(), n.clone()))
        .collect()
}

/// The first of `namespaces` that is no name a token may hold (`*`, every
/// one, is), with the command's refusal.
fn refuse_bad_namespace(command: &str, namespaces: &[String]) -> Result<(), String> {
    match namespaces
        .iter()
        .find(|n| *n != "*" && !valid_scope_name(n))
    {
        Some(bad) => Err(not_a_name(command, "--namespace", bad, "")),
        None => Ok(()),
    }
}

/// A command's refusal of `name`, given as `what`, which [`valid_scope_name`]
/// refused (`also` names what else it may not be).
fn not_a_name(command: &str, what: &str, name: &str, also: &str) -> String {
    format!(
        "{command}: {what} {name:?} is not a name: 1 to 256 bytes, no control characters, no space at either end, not blank{also}"
    )
}

/// Notes on standard error each namespace a token or user names that its
/// org does not have yet: minted or added all the same (the namespace may
/// be created after), but a call there is refused until it is.
fn note_unknown(unknown: Vec<(String, String)>) {
    for (org, namespace) in unknown {
        eprintln!(
            "loom: note: org {org} has no namespace {namespace} yet; create it with: loom namespace add {org} {namespace}"
        );
    }
}

async fn revoke(jti: String) -> Result<(), String> {
    if jti.trim().is_empty() {
        return Err("token revoke: the jti must not be empty".into());
    }
    // Every token Loom issues has a jti of 32 hex digits (a UUID's simple
    // form): anything else, a line break or a paste of the whole token, is
    // a mistake that would revoke nothing and say it had.
    let jti = jti.trim().to_ascii_lowercase();
    if !crate::tokens::is_jti(&jti) {
        // A whole token pasted is a secret: not written back to the
        // terminal (or a CI log) it came from.
        let shown = if jti.contains('.') || jti.len() > 64 {
            "what was given (a whole token? it is not shown)".to_owned()
        } else {
            format!("{jti:?}")
        };
        return Err(format!(
            "token revoke: {shown} is not a token's jti (32 hex digits, the token's `jti` claim)"
        ));
    }
    let config = Config::from_env()?;
    let store = open_server_store("token revoke", &config).await?;
    let added = store.revoke_token(&jti).await;
    store.close().await;
    match added {
        Ok(true) => out!("loom: revoked {jti}"),
        Ok(false) => out!("loom: {jti} was already revoked"),
        Err(e) => return Err(store_fault(&e)),
    }
    Ok(())
}

/// 1 to 255 bytes of letters, digits and `. _ @ - | : +`: room for a
/// provider's subject (`google-oauth2|1234`, a UUID) or an email.
fn valid_username(name: &str) -> bool {
    (1..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-|:+".contains(&b))
}

/// Reads the new user's password from standard input and hashes it.
fn read_password(username: &str) -> Result<String, String> {
    use std::io::{BufRead, IsTerminal};
    if std::io::stdin().is_terminal() {
        eprint!("password for {username} (echoed; pipe it to hide it): ");
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("user add: cannot read the password: {e}"))?;
    let password = line.trim_end_matches(['\n', '\r']);
    if password.chars().count() < crate::oauth::users::MIN_PASSWORD_CHARS {
        return Err(format!(
            "user add: the password must have at least {} characters",
            crate::oauth::users::MIN_PASSWORD_CHARS
        ));
    }
    crate::oauth::users::hash_password(password)
}

async fn user_add(
    username: String,
    org: String,
    role: Role,
    namespaces: Vec<String>,
    no_password: bool,
) -> Result<(), String> {
    if !valid_username(&username) {
        return Err(
            "user add: a username is 1 to 255 characters of letters, digits and . _ @ - | : +"
                .into(),
        );
    }
    refuse_bad_namespace("user add", &namespaces)?;
    let password_hash = if no_password {
        crate::oauth::users::NO_PASSWORD.to_owned()
    } else {
        read_password(&username)?
    };
    let config = Config::from_env()?;
    let store = open_server_store("user add", &config).await?;
    let result = async {
        store.ensure_default_org().await?;
        if !store.org_exists(&org).await? {
            return Ok(Err(format!("user add: there is no org {org:?}")));
        }
        note_unknown(unknown_namespaces(&store, &org, &namespaces).await);
        let added = store
            .user_add(&loom_ops::store::UserRow {
                username: username.clone(),
                org: org.clone(),
                role,
                namespaces,
                password_hash,
                disabled: false,
            })
            .await?;
        Ok(if added {
            Ok(())
        } else {
            Err(format!("user add: {username:?} already exists"))
        })
    }
    .await
    .map_err(|e: loom_core::LoomError| store_fault(&e));
    store.close().await;
    result??;
    out!("loom: added {username} ({role} in org {org})");
    Ok(())
}

async fn user_disable(username: String) -> Result<(), String> {
    let config = Config::from_env()?;
    let store = open_server_store("user disable", &config).await?;
    let done = store.user_disable(&username).await;
    store.close().await;
    match done {
        Ok(true) => out!("loom: disabled {username}; its OAuth tokens are revoked"),
        Ok(false) => return Err(format!("user disable: there is no user {username:?}")),
        Err(e) => return Err(store_fault(&e)),
    }
    Ok(())
}

/// A name an org or namespace may have: what a call may name (at most 256
/// bytes, no control characters, no space at either end: a call's names
/// are trimmed, so ` team ` could be created and never named), not empty
/// or blank, and not `*`, which a token uses for "every one".
fn valid_scope_name(name: &str) -> bool {
    !name.trim().is_empty()
        && name.trim() == name
        && name.len() <= 256
        && name != "*"
        && !name.chars().any(char::is_control)
}

async fn namespace_add(ns: loom_ops::store::NewNamespace<'_>) -> Result<(), String> {
    use loom_ops::namespace::KINDS;
    use loom_ops::store::NamespaceCreated;
    for (what, name) in [("org", ns.org), ("namespace", ns.namespace)] {
        if !valid_scope_name(name) {
            return Err(not_a_name(
                "namespace add",
                &format!("the {what}"),
                name,
                " or *",
            ));
        }
    }
    if !KINDS.contains(&ns.kind) {
        return Err(format!(
            "namespace add: --kind {:?} is none of {}",
            ns.kind,
            KINDS.join(", ")
        ));
    }
    let config = Config::from_env()?;
    let store = open_server_store("namespace add", &config).await?;
    let created = async {
        store.ensure_default_org().await?;
        store.create_namespace(&ns).await
    }
    .await;
    store.close().await;
    let (org, namespace) = (ns.org, ns.namespace);
    match created.map_err(|e| store_fault(&e))? {
        NamespaceCreated::Created => {
            out!(
                "loom: created namespace {namespace} in org {org} ({})",
                ns.kind
            );
            Ok(())
        }
        NamespaceCreated::Existed { kind, restricted }
            if kind == ns.kind && restricted == ns.restricted =>
        {
            out!("loom: namespace {namespace} in org {org} exists already ({kind})");
            Ok(())
        }
        NamespaceCreated::Existed { kind, restricted } => Err(format!(
            "namespace add: namespace {namespace} in org {org} exists already as {kind}, {}; it was left as it is",
            if restricted {
                "restricted"
            } else {
                "not restricted"
            }
        )),
    }
}

async fn namespace_list(org: Option<String>) -> Result<(), String> {
    let config = Config::from_env()?;
    let store = open_server_store("namespace list", &config).await?;
    let listed = async {
        store.ensure_default_org().await?;
        store.namespaces(org.as_deref()).await
    }
    .await;
    store.close().await;
    for (org, namespace, kind, restricted) in listed.map_err(|e| store_fault(&e))? {
        let restricted = if restricted { "\trestricted" } else { "" };
        out!("{org}\t{namespace}\t{kind}{restricted}");
    }
    Ok(())
}

/// The registry, or every fault in it on standard error.
pub fn registry_or_report() -> Option<&'static Registry> {
    match Registry::global() {
        Ok(r) => Some(r),
        Err(errors) => {
            eprintln!("loom: the op registry is invalid:");
            for e in errors {
                eprintln!("  - {e}");
            }
            None
        }
    }
}

fn export_actions(format: Format, output: &std::path::Path) -> ExitCode {
    let Some(registry) = registry_or_report() else {
        return ExitCode::FAILURE;
    };
    let text = export::render(registry, format);
    let written = if output.as_os_str() == "-" {
        std::io::stdout().lock().write_all(text.as_bytes())
    } else {
        std::fs::write(output, text)
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "loom export-actions: cannot write {}: {e}",
                output.display()
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::misspelt_level;

    #[test]
    fn a_misspelt_level_is_refused_and_module_names_are_not() {
        for bad in [
            "warning",
            "inof",
            "debg",
            "errors",
            "loom_server=debug,tarce",
        ] {
            let e = misspelt_level(bad).unwrap_err();
            assert!(e.contains("did you mean"), "{bad}: {e}");
        }
        for fine in [
            "info",
            "WARN",
            "loom_server=debug",
            "loom_server",
            "mio",
            "tracing",
            "info,sqlx=warn",
            "off",
            "",
        ] {
            assert!(misspelt_level(fine).is_ok(), "{fine}");
        }
    }
}
