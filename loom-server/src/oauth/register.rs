//! `POST /oauth/register`: dynamic client registration (RFC 7591) of public
//! clients only. A redirect URI must be absolute and fragment-free, and be
//! `https`, `http` to a loopback host, or an app scheme (`cursor://…`);
//! `javascript:`, `data:`, `file:` and other schemes a browser would run or
//! read locally are refused. Unknown metadata is ignored. Registrations are
//! limited server-wide to `LOOM_OAUTH_REGISTER_PER_MIN` a minute (the
//! endpoint is unauthenticated, and a per-address limit would need to trust
//! a proxy's forwarding header).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use loom_ops::store::{ClientRow, now_ms};
use serde_json::{Value, json};

use super::{json_error, loopback_host, no_store, random_token};
use crate::app::App;

/// The largest registration body accepted.
const MAX_BODY: usize = 64 * 1024;
/// The most redirect URIs one client may register.
const MAX_REDIRECT_URIS: usize = 10;
/// Schemes never accepted as a redirect: they run script, read local data
/// or leave the browser's control.
const DENIED_SCHEMES: &[&str] = &[
    "javascript",
    "data",
    "file",
    "vbscript",
    "about",
    "blob",
    "filesystem",
    "view-source",
    "ws",
    "wss",
    "ftp",
    "mailto",
    "chrome",
    "chrome-extension",
];

/// Why a redirect URI is refused, or `Ok` when it may be registered.
pub fn check_redirect_uri(raw: &str) -> Result<(), String> {
    if raw.contains('#') {
        return Err("must not contain a fragment".into());
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    let url = url::Url::parse(raw).map_err(|_| "must be an absolute URI".to_owned())?;
    let scheme = url.scheme();
    if DENIED_SCHEMES.contains(&scheme) {
        return Err(format!("the {scheme}: scheme is not allowed"));
    }
    match scheme {
        "https" | "http" => {
            // Written as the URL it parses to: a parser reads
            // `https:evil.com/cb` or `http:\\127.0.0.1\cb` as an absolute URL,
            // a browser resolves the first against the page it is on, and
            // the consent page would name a host the browser does not go to.
            let authority = raw
                .get(scheme.len()..scheme.len() + 3)
                .is_some_and(|s| s == "://");
            // `https:///cb` parses as the host `cb`: the host is read as
            // written, right after `//`.
            let written_host = raw
                .get(scheme.len() + 3..)
                .is_some_and(|rest| !rest.starts_with(['/', '?', ':', '@']) && !rest.is_empty());
            if !authority || raw.contains('\\') || !written_host {
                return Err(format!(
                    "must be written {scheme}://host/path, with no backslash"
                ));
            }
            let host = url.host_str().unwrap_or_default();
            if host.is_empty() {
                return Err("must name a host".into());
            }
            if url.port() == Some(0) {
                return Err("must not name port 0".into());
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err("must not carry credentials".into());
            }
            if scheme == "http" && !loopback_host(host) {
                return Err("http is allowed only to a loopback host (127.0.0.1, [::1], localhost); use https".into());
            }
            Ok(())
        }
        // An app's own scheme (RFC 8252 §7.1): the URL parser already
        // required a valid scheme name.
        _ => Ok(()),
    }
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_owned))
        .collect()
}

/// A character that reorders the text after it (the bidirectional
/// embeddings, overrides, isolates and marks) or shows nothing (zero-width
/// space, word joiner, byte order mark): in a client's name on the
/// consent page it could turn around or hide the host that follows.
fn reorders_or_hides(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

fn bad_metadata(description: &str) -> Response {
    json_error(
        StatusCode::BAD_REQUEST,
        "invalid_client_metadata",
        description,
    )
}

/// `POST /oauth/register`.
pub async fn register(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Some(oauth) = app.oauth.as_deref() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Err(wait) = oauth.take_registration(app.config.oauth_register_per_min) {
        let mut r = json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "temporarily_unavailable",
            "too many client registrations; retry later",
        );
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs().max(1)),
        );
        return r;
    }
    // Over axum's buffering limit too: this refusal, not axum's plain text.
    let Some(body) = body.ok().filter(|b| b.len() <= MAX_BODY) else {
        return bad_metadata("the registration body is too large");
    };
    let Ok(meta) = serde_json::from_slice::<Value>(&body) else {
        return bad_metadata("the body must be a JSON object");
    };
    if !meta.is_object() {
        return bad_metadata("the body must be a JSON object");
    }
    let Some(redirect_uris) = meta.get("redirect_uris").and_then(string_list) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_redirect_uri",
            "redirect_uris must be a non-empty array of strings",
        );
    };
    if redirect_uris.is_empty() || redirect_uris.len() > MAX_REDIRECT_URIS {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_redirect_uri",
            &format!("register 1 to {MAX_REDIRECT_URIS} redirect URIs"),
        );
    }
    for uri in &redirect_uris {
        if let Err(why) = check_redirect_uri(uri) {
            return json_error(
                StatusCode::BAD_REQUEST,
                "invalid_redirect_uri",
                &format!("redirect URI {uri:?} {why}"),
            );
        }
    }
    // Only public clients are registered. A client asking for another
    // method (claude.ai's connectors ask for client_secret_post) is
    // registered as one all the same, as RFC 7591 §3.2.1 lets a server
    // replace what was asked: the answer says `none` and carries no
    // secret, and PKCE binds its codes. Refusing it left such a client
    // unable to connect at all.
    match meta.get("token_endpoint_auth_method") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(_) => return bad_metadata("token_endpoint_auth_method must be a string"),
    }
    let grant_types = match meta.get("grant_types") {
        None | Some(Value::Null) => {
            vec!["authorization_code".to_owned(), "refresh_token".to_owned()]
        }
        Some(v) => match string_list(v) {
            Some(g)
                if g.iter().any(|x| x == "authorization_code")
                    && g.iter()
                        .all(|x| x == "authorization_code" || x == "refresh_token") =>
            {
                g
            }
            _ => {
                return bad_metadata(
                    "grant_types must include authorization_code and may add only refresh_token",
                );
            }
        },
    };
    match meta.get("response_types") {
        None | Some(Value::Null) => {}
        Some(v) if string_list(v).is_some_and(|r| r == ["code"]) => {}
        Some(_) => return bad_metadata("response_types must be [\"code\"]"),
    }
    let client_name = match meta.get("client_name") {
        None | Some(Value::Null) => "an unnamed client".to_owned(),
        // The consent page shows the name: no control characters (a NUL
        // would also fail PostgreSQL's text), and none that turn or hide
        // the text around them, such as a right-to-left override.
        Some(Value::String(n))
            if !n.trim().is_empty()
                && n.chars().count() <= 200
                && !n.chars().any(|c| c.is_control() || reorders_or_hides(c)) =>
        {
            n.trim().to_owned()
        }
        Some(_) => {
            return bad_metadata(
                "client_name must be a string of 1 to 200 characters, none of them control, \
                 bidirectional formatting or zero-width characters",
            );
        }
    };
    let client = ClientRow {
        client_id: random_token(24),
        client_name,
        redirect_uris,
        refresh: grant_types.iter().any(|g| g == "refresh_token"),
        created_ms: now_ms(),
    };
    if let Err(e) = app.store.oauth_client_add(&client).await {
        tracing::error!(
            cause = e.internal_message().unwrap_or(e.message()),
            "client registration failed"
        );
        return json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the client could not be stored",
        );
    }
    no_store(
        (
            StatusCode::CREATED,
            axum::Json(json!({
                "client_id": client.client_id,
                "client_id_issued_at": client.created_ms / 1000,
                "client_name": client.client_name,
                "redirect_uris": client.redirect_uris,
                "grant_types": grant_types,
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            })),
        )
            .into_response(),
    )
}

/// Whether `sent` matches one of a client's registered redirect URIs:
/// byte-for-byte, except that the port of an `http` loopback IP literal
/// (127.0.0.1, [::1]) may differ (RFC 8252 §7.3). Compared as written, not
/// as a URL parser would normalise them: `http://127.1/cb`,
/// `HTTP://127.0.0.1/cb` and `http://127.0.0.1/x/../cb` are other strings
/// (OAuth 2.1 §2.3.1, simple string comparison).
pub fn redirect_matches(registered: &[String], sent: &str) -> bool {
    if registered.iter().any(|r| r == sent) {
        return true;
    }
    let Some(sent) = LoopbackUri::split(sent) else {
        return false;
    };
    registered
        .iter()
        .filter_map(|r| LoopbackUri::split(r))
        .any(|r| r.host == sent.host && r.rest == sent.rest)
}

/// An `http` URI whose host is a loopback IP literal, as written: the host
/// (brackets kept), and what follows the authority.
struct LoopbackUri<'a> {
    host: &'a str,
    rest: &'a str,
}

impl<'a> LoopbackUri<'a> {
    fn split(uri: &'a str) -> Option<LoopbackUri<'a>> {
        let after = uri.strip_prefix("http://")?;
        if uri.contains('#') {
            return None;
        }
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(end);
        // The host, and a port after the last colon outside an IPv6
        // literal's brackets, written as a port is: 1 to 65535, without a
        // leading zero (not `:`, `:01234` nor `:99999`).
        let host = match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => {
                let port = &authority[i + 1..];
                let canonical = port
                    .parse::<u16>()
                    .is_ok_and(|p| p != 0 && p.to_string() == port);
                if !canonical {
                    return None;
                }
                &authority[..i]
            }
            _ => authority,
        };
        let literal = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        // std's parser takes only the dotted-quad and IPv6 forms, none of
        // the shorthand (127.1, 0x7f.1) a URL parser would rewrite.
        let ip: std::net::IpAddr = literal.parse().ok()?;
        let bracketed = host.starts_with('[');
        (ip.is_loopback() && bracketed == ip.is_ipv6()).then_some(LoopbackUri { host, rest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uri_rules() {
        for ok in [
            "https://app.example.com/cb",
            "http://127.0.0.1:33418/callback",
            "http://[::1]/cb",
            "http://localhost:8000/cb",
            "HTTPS://app.example.com/cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
            "com.example.app:/oauth2redirect",
        ] {
            assert!(check_redirect_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "data:text/html,hi",
            "file:///etc/passwd",
            "vbscript:msgbox",
            "http://example.com/cb",
            "https://app.example.com/cb#frag",
            "https://app.example.com/cb#",
            "/relative/cb",
            "https://user:pw@app.example.com/cb",
            "",
            // absolute only to a lenient parser
            "http:/127.0.0.1/cb",
            "https:evil.example/cb",
            "http:\\\\127.0.0.1\\cb",
            "http://127.0.0.1\\@evil.example/cb",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_loopback_ip_port_may_vary() {
        let reg = vec![
            "http://127.0.0.1/cb".to_owned(),
            "http://localhost:9000/cb".to_owned(),
            "https://app.example.com/cb".to_owned(),
        ];
        assert!(redirect_matches(&reg, "http://127.0.0.1:51234/cb"));
        assert!(redirect_matches(&reg, "https://app.example.com/cb"));
        assert!(!redirect_matches(&reg, "http://127.0.0.1:51234/cb2"));
        assert!(!redirect_matches(&reg, "http://localhost:9001/cb"));
        assert!(!redirect_matches(&reg, "https://app.example.com/cb/"));
        assert!(!redirect_matches(&reg, "https://app.example.com:444/cb"));
        assert!(!redirect_matches(&reg, "https://app.example.com/CB"));
        // Written otherwise, though a URL parser would read them as the same.
        for other in [
            "http://127.1:4444/cb",
            "http://0x7f.1/cb",
            "http://2130706433/cb",
            "HTTP://127.0.0.1:4444/cb",
            "http://127.0.0.1:4444/x/../cb",
            "http://127.0.0.1:4444/%63b",
            "http://127.0.0.1:+4444/cb",
            "http://127.0.0.1:4444/cb#",
            "http://127.0.0.1:99999/cb",
            "http://127.0.0.1:01234/cb",
            "http://127.0.0.1:/cb",
            "http://127.0.0.1:0/cb",
        ] {
            assert!(!redirect_matches(&reg, other), "{other}");
        }
        let v6 = vec!["http://[::1]/cb".to_owned()];
        assert!(redirect_matches(&v6, "http://[::1]:8080/cb"));
        assert!(!redirect_matches(&v6, "http://[0:0:0:0:0:0:0:1]:8080/cb"));
        assert!(!redirect_matches(&v6, "http://[::1]:8080/cb?x=1"));
    }
}
