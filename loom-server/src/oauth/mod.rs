//! OAuth 2.1 sign-in for MCP clients (on with `LOOM_OAUTH_ENABLED=true`),
//! and the resource-server side of MCP authorization.
//!
//! - [`metadata`]: `/.well-known/oauth-authorization-server` and the
//!   protected-resource metadata at `/.well-known/oauth-protected-resource`
//!   (resource = the issuer) and `/.well-known/oauth-protected-resource/mcp`
//!   (resource = [`OAuth::resource_id`], `<issuer>/mcp`);
//! - [`register`]: dynamic registration of public clients;
//! - [`authorize`]: the sign-in and consent pages ([`pages`]);
//! - [`token`]: code exchange and refresh rotation;
//! - [`users`]: password users (`loom user add`, `loom user disable`);
//! - [`signin_limit`]: the brute-force limit on failed password sign-ins;
//! - [`oidc`] and [`oidc_signin`]: sign-in delegated to an OpenID Connect
//!   provider (`LOOM_OAUTH_LOGIN_PROVIDER=oidc`).
//!
//! Issuer and resource come from `LOOM_OAUTH_ISSUER`, never from a request's
//! `Host`. Access tokens are ordinary Loom JWTs for the signed-in user whose
//! audience is the resource they were requested for; [`audiences`] lists the
//! ones the token check accepts beside `LOOM_JWT_AUDIENCE`.
//!
//! For the transports: [`challenge`] is the `WWW-Authenticate` value of a
//! 401; with OAuth on it carries `resource_metadata="<issuer>/.well-known/
//! oauth-protected-resource/mcp"` so a client can discover where to sign in.

pub mod authorize;
pub mod metadata;
pub mod oidc;
pub mod oidc_signin;
pub mod pages;
pub mod register;
pub mod signin_limit;
pub mod token;
pub mod users;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::config::Config;
use crate::pipeline::auth::{
    CHALLENGE, CHALLENGE_INSUFFICIENT, CHALLENGE_INVALID, CHALLENGE_MALFORMED, Challenge,
};

/// The only scope Loom grants: access as the signed-in user. Roles and
/// namespaces come from the user's account, not from scopes.
pub const SCOPE: &str = "loom";

/// The path of the MCP endpoint, whose URL is the resource id.
pub const MCP_PATH: &str = "/mcp";

/// What OAuth needs at run time, derived once from the configuration.
#[derive(Debug)]
pub struct OAuth {
    /// `LOOM_OAUTH_ISSUER` without a trailing slash.
    pub issuer: String,
    /// `<issuer>/mcp`: the protected-resource metadata's `resource` and the
    /// `aud` of the tokens issued for it.
    pub resource_id: String,
    /// Where the protected-resource metadata of [`OAuth::resource_id`] is served.
    pub resource_metadata_url: String,
    /// The 401 and 403 challenges: `[resource][kind]`, the resource
    /// [`Protected::Mcp`] or [`Protected::Server`], the kind
    /// [`Challenge::Missing`], [`Challenge::InvalidToken`] or
    /// [`Challenge::InsufficientScope`].
    challenges: [[&'static str; 3]; 2],
    register_window: Mutex<(Instant, u32)>,
    secure_cookies: bool,
    /// The OpenID Connect provider sign-in is delegated to, if it is.
    pub oidc: Option<oidc::Provider>,
    /// Failed password sign-ins per username and per client address.
    pub signin_limit: signin_limit::SigninLimit,
}

impl OAuth {
    /// From a configuration that passed [`check_config`]; `None` with OAuth off.
    pub fn from_config(config: &Config) -> Result<Option<Arc<OAuth>>, String> {
        if !config.oauth_enabled {
            return Ok(None);
        }
        let Some(issuer) = config.oauth_issuer.clone() else {
            return Ok(None);
        };
        let oidc = match config.oauth_login_provider.as_str() {
            "oidc" => Some(oidc::Provider::from_config(config, &issuer)?),
            _ => None,
        };
        let resource_id = format!("{issuer}{MCP_PATH}");
        let resource_metadata_url =
            format!("{issuer}/.well-known/oauth-protected-resource{MCP_PATH}");
        // Built once per server and kept for its life: the transports hand
        // challenges around as `&'static str`. `/mcp` names its own
        // metadata, the rest of the server the root one (`resource` = the
        // issuer): a client checks that the metadata's `resource` is the URL
        // it asked (RFC 9728 §3.3).
        let root_metadata_url = format!("{issuer}/.well-known/oauth-protected-resource");
        // The scope a token needs is named too (MCP 2025-11-25: SHOULD), so
        // a client asks for it without reading the metadata first.
        let leak = |challenge: &str, url: &str| -> &'static str {
            Box::leak(
                format!("{challenge}, resource_metadata=\"{url}\", scope=\"{SCOPE}\"")
                    .into_boxed_str(),
            )
        };
        let challenges = [&resource_metadata_url, &root_metadata_url].map(|url| {
            [CHALLENGE, CHALLENGE_INVALID, CHALLENGE_INSUFFICIENT].map(|c| leak(c, url))
        });
        Ok(Some(Arc::new(OAuth {
            secure_cookies: issuer.starts_with("https://"),
            issuer,
            resource_id,
            resource_metadata_url,
            challenges,
            register_window: Mutex::new((Instant::now(), 0)),
            oidc,
            signin_limit: signin_limit::SigninLimit::new(config),
        })))
    }

    /// The resources a client may ask a token for (RFC 8707 `resource`):
    /// the MCP endpoint (the default) and the whole server (the issuer, the
    /// `resource` of the root protected-resource metadata).
    pub fn resources(&self) -> [&str; 2] {
        [self.resource_id.as_str(), self.issuer.as_str()]
    }

    /// Takes one registration from the server-wide per-minute allowance;
    /// `Err(wait)` when it is spent.
    fn take_registration(&self, per_min: u32) -> Result<(), Duration> {
        let mut w = self
            .register_window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        if now.duration_since(w.0) >= Duration::from_secs(60) {
            *w = (now, 0);
        }
        if w.1 >= per_min {
            return Err(Duration::from_secs(60).saturating_sub(now.duration_since(w.0)));
        }
        w.1 += 1;
        Ok(())
    }
}

/// What a 401 was refused access to: the MCP endpoint, or the rest of the
/// server (`/v1`), each with its protected-resource metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protected {
    /// `/mcp`: `<issuer>/mcp`.
    Mcp = 0,
    /// The whole server: the issuer.
    Server = 1,
}

/// The `WWW-Authenticate` value of a refusal: on a 401 `invalid_token`
/// when a bearer was sent and refused, no `error` when none was sent; on a
/// 403 `insufficient_scope`; on a 400 `invalid_request`. With OAuth on the
/// 401s and 403s also name the metadata of the resource refused
/// (`resource_metadata="…"`, RFC 9728 §5.1), which is how a client finds
/// where to sign in, and the scope a token needs.
pub fn challenge(app: &App, resource: Protected, kind: Challenge) -> &'static str {
    match (&app.oauth, kind) {
        (_, Challenge::InvalidRequest) => CHALLENGE_MALFORMED,
        (Some(o), kind) => o.challenges[resource as usize][kind as usize],
        (None, Challenge::Missing) => CHALLENGE,
        (None, Challenge::InvalidToken) => CHALLENGE_INVALID,
        (None, Challenge::InsufficientScope) => CHALLENGE_INSUFFICIENT,
    }
}

/// The audiences the token check accepts besides `LOOM_JWT_AUDIENCE`:
/// with OAuth on, `<issuer>/mcp` and `<issuer>`.
pub fn audiences(config: &Config) -> Vec<String> {
    match (&config.oauth_issuer, config.oauth_enabled) {
        (Some(issuer), true) => vec![format!("{issuer}{MCP_PATH}"), issuer.clone()],
        _ => Vec::new(),
    }
}

/// Whether `host` (as in a URL: brackets allowed) is a loopback name or address.
pub fn loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses an OAuth configuration that must not start: no issuer, an issuer
/// that is not a bare `https://` origin (`http://` only on a loopback host),
/// an unknown sign-in provider, or an OIDC provider configured amiss.
pub fn check_config(config: &Config) -> Result<(), String> {
    let Some(issuer) = &config.oauth_issuer else {
        return Err(
            "LOOM_OAUTH_ENABLED=true needs LOOM_OAUTH_ISSUER, the public https:// base URL of this server"
                .into(),
        );
    };
    let bad = |why: &str| Err(format!("LOOM_OAUTH_ISSUER={issuer:?} is not valid: {why}"));
    let Ok(url) = url::Url::parse(issuer) else {
        return bad("expected an absolute URL such as https://loom.example.com");
    };
    if !matches!(url.scheme(), "https" | "http") {
        return bad("expected an https:// URL");
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return bad("expected a base URL with no path, query or fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("a URL with credentials cannot be an issuer");
    }
    // Clients compare the issuer, and the resource built from it, byte for
    // byte with the URLs they were given, which are normally written the
    // canonical way; the `https` check of the cookies reads it too.
    let canonical = url.as_str().trim_end_matches('/');
    if canonical != issuer {
        return bad(&format!("write it as {canonical}"));
    }
    let host = url.host_str().unwrap_or_default();
    if url.scheme() == "http" && !loopback_host(host) {
        return bad("a server reachable beyond this machine must use https://");
    }
    if !config.auth_required {
        return Err("LOOM_OAUTH_ENABLED=true needs LOOM_AUTH_REQUIRED=true".into());
    }
    match config.oauth_login_provider.as_str() {
        "password" => Ok(()),
        "oidc" => oidc::check_config(config),
        other => Err(format!(
            "LOOM_OAUTH_LOGIN_PROVIDER={other:?} is not valid: expected password or oidc"
        )),
    }
}

/// The OAuth routes (empty with OAuth off).
pub fn routes(app: Arc<App>) -> Router {
    if app.oauth.is_none() {
        return Router::new();
    }
    // Discovery is public and names only the configured issuer, whatever
    // the request's Host; the routes that take credentials are guarded.
    let discovery = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get(metadata::protected_resource_root),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(metadata::protected_resource_mcp),
        );
    Router::new()
        .route("/oauth/register", post(register::register))
        .route("/oauth/authorize", get(authorize::start))
        .route("/oauth/authorize/login", post(authorize::login))
        .route(
            "/oauth/authorize/consent",
            get(authorize::consent_page).post(authorize::decide),
        )
        .route("/oauth/oidc/callback", get(oidc_signin::callback))
        .route("/oauth/token", post(token::token))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            served_host,
        ))
        .merge(discovery)
        .with_state(app)
}

/// The sign-in, registration and token routes answer only a `Host` the
/// server serves, as `/mcp` does ([`crate::transport::guard`]): the
/// issuer's, a loopback one or one of `LOOM_MCP_ALLOWED_HOSTS`. A server
/// bound beyond loopback with an `http://` loopback issuer (a container's
/// port mapped to the host's loopback) otherwise served its password page
/// in clear text to any address that reached it, and a rebound DNS name
/// could read it. `Origin` is not checked here: the sign-in page's own
/// forms carry `Origin: null` (the page sends no referrer), and its posts
/// are held to the browser that began the sign-in by their CSRF value.
async fn served_host(
    axum::extract::State(app): axum::extract::State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if app.guard.admits_host(request.headers()) {
        return next.run(request).await;
    }
    let body = serde_json::json!({
        "error": "invalid_request",
        "error_description": crate::transport::guard::REFUSAL,
    });
    (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
}

/// `n` random bytes as unpadded base64url.
pub fn random_token(n: usize) -> String {
    let bytes: Vec<u8> = (0..n).map(|_| rand::random::<u8>()).collect();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// SHA-256 as lowercase hex: how codes, refresh tokens and CSRF values are stored.
pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// The S256 code challenge of a verifier.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Byte comparison whose time does not depend on where the inputs differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Why a query string or form body is refused as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormFault {
    /// A parameter given twice (OAuth 2.1 §3.1).
    Repeated(String),
    /// A parameter whose name or value decodes to a NUL character: no
    /// OAuth value holds one, and PostgreSQL's text cannot store one, so
    /// it is the request's mistake rather than a failed lookup.
    Nul(String),
    /// A parameter whose name or value decodes to bytes that are not
    /// UTF-8: read as text it would change (each bad byte a U+FFFD), and a
    /// `state` must come back byte for byte or not at all.
    NotUtf8(String),
}

impl std::fmt::Display for FormFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormFault::Repeated(name) => write!(f, "parameter {name} is repeated"),
            FormFault::Nul(name) => write!(
                f,
                "parameter {} holds a NUL character",
                name.replace('\0', "%00")
            ),
            FormFault::NotUtf8(name) => write!(f, "parameter {name} is not UTF-8 text"),
        }
    }
}

/// Decodes `application/x-www-form-urlencoded` pairs (a query string or a
/// form body), refusing a repeated parameter, a NUL anywhere, or a name or
/// value that does not decode to UTF-8.
pub fn form_pairs(raw: &[u8]) -> Result<HashMap<String, String>, FormFault> {
    // The parser below reads bytes that are not UTF-8 as U+FFFD, so they
    // are looked for as sent.
    if let Some(pair) = raw.split(|&b| b == b'&').find(|p| !decodes_to_utf8(p)) {
        let name = pair.split(|&b| b == b'=').next().unwrap_or_default();
        return Err(FormFault::NotUtf8(
            String::from_utf8_lossy(name).into_owned(),
        ));
    }
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(raw) {
        if k.contains('\0') || v.contains('\0') {
            return Err(FormFault::Nul(k.into_owned()));
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(FormFault::Repeated(k.into_owned()));
        }
    }
    Ok(out)
}

/// Whether a form's `name=value` pair, as sent, decodes to UTF-8 (a `+`
/// for a space is ASCII either way).
fn decodes_to_utf8(pair: &[u8]) -> bool {
    percent_encoding::percent_decode(pair).decode_utf8().is_ok()
}

/// Adds the headers every OAuth answer carries: never cached.
pub fn no_store(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

/// An RFC 6749 §5.2 error: `{"error", "error_description"}`.
pub fn json_error(status: StatusCode, error: &str, description: &str) -> Response {
    no_store(
        (
            status,
            axum::Json(serde_json::json!({"error": error, "error_description": description})),
        )
            .into_response(),
    )
}

/// The name of the browser cookie binding a sign-in to its CSRF value:
/// `__Host-` prefixed (Secure, host-only, path `/`) behind https, and one
/// per sign-in request, so that two sign-ins in one browser (two clients
/// connecting at once) keep their own.
fn cookie_name(oauth: &OAuth, request_id: &str) -> String {
    let prefix = if oauth.secure_cookies { "__Host-" } else { "" };
    format!("{prefix}loom_oauth_{request_id}")
}

/// The `Set-Cookie` value carrying a sign-in's CSRF value.
pub fn csrf_cookie(oauth: &OAuth, request_id: &str, value: &str, max_age: Duration) -> String {
    let secure = if oauth.secure_cookies { "; Secure" } else { "" };
    format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        cookie_name(oauth, request_id),
        max_age.as_secs()
    )
}

/// The CSRF value of sign-in `request_id` from the request's cookies.
pub fn csrf_from_cookies(
    oauth: &OAuth,
    headers: &axum::http::HeaderMap,
    request_id: &str,
) -> Option<String> {
    let name = cookie_name(oauth, request_id);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn repeated_parameters_are_refused() {
        assert_eq!(form_pairs(b"a=1&b=2").unwrap().len(), 2);
        assert_eq!(
            form_pairs(b"a=1&a=2").unwrap_err(),
            FormFault::Repeated("a".into())
        );
        let nul = form_pairs(b"a=1&client_id=x%00y").unwrap_err();
        assert_eq!(nul, FormFault::Nul("client_id".into()));
        assert_eq!(nul.to_string(), "parameter client_id holds a NUL character");
        assert_eq!(
            form_pairs(b"a%00=1").unwrap_err().to_string(),
            "parameter a%00 holds a NUL character"
        );
    }

    #[test]
    fn a_value_that_is_no_text_is_refused_and_one_that_is_kept() {
        for (raw, name) in [
            (b"state=%FF%FE".as_slice(), "state"),
            (b"a=1&state=x%C3".as_slice(), "state"),
            (b"a=1&st%FFate=x".as_slice(), "st%FFate"),
            (b"a=1&b=\xff".as_slice(), "b"),
        ] {
            assert_eq!(
                form_pairs(raw).unwrap_err(),
                FormFault::NotUtf8(name.into()),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        // U+FFFD and other text sent as such, escaped or not, a stray `%`
        // kept as the parser keeps it
        let ok = form_pairs("a=%EF%BF%BD&b=\u{FFFD}&c=caf%C3%A9+x&d=100%".as_bytes()).unwrap();
        assert_eq!(ok["a"], "\u{FFFD}");
        assert_eq!(ok["b"], "\u{FFFD}");
        assert_eq!(ok["c"], "café x");
        assert_eq!(ok["d"], "100%");
    }

    #[test]
    fn the_issuer_is_written_as_clients_compare_it() {
        let with = |issuer: &str| {
            let config = Config {
                oauth_enabled: true,
                oauth_issuer: Some(issuer.to_owned()),
                ..Config::default()
            };
            check_config(&config)
        };
        assert_eq!(with("https://loom.example.com"), Ok(()));
        assert_eq!(with("http://127.0.0.1:8080"), Ok(()));
        for (written, canonical) in [
            ("HTTPS://loom.example.com", "https://loom.example.com"),
            ("https://Loom.Example.com", "https://loom.example.com"),
            ("https://loom.example.com:443", "https://loom.example.com"),
        ] {
            let refused = with(written).unwrap_err();
            assert!(
                refused.ends_with(&format!("write it as {canonical}")),
                "{refused}"
            );
        }
    }

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "[::1]", "localhost", "127.1.2.3"] {
            assert!(loopback_host(h), "{h}");
        }
        for h in ["example.com", "10.0.0.1", "localhost.example.com"] {
            assert!(!loopback_host(h), "{h}");
        }
    }
}
