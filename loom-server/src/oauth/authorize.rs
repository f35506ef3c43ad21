//! `/oauth/authorize`: the browser part of the code flow.
//!
//! 1. `GET /oauth/authorize?…` checks the client and redirect URI (an
//!    unknown client or an unregistered redirect URI gets an error page,
//!    never a redirect), then the rest (`response_type=code`, an S256 PKCE
//!    challenge, `resource`, `scope`; a failure is redirected back with
//!    `error`, the byte-exact `state` and `iss`). It stores the request,
//!    binds it to the browser with a random CSRF value (a cookie and a
//!    hidden field, compared on every POST) and shows the sign-in page.
//! 2. `POST /oauth/authorize/login` checks the password and answers 303 to
//!    the consent page (a wrong password shows the sign-in page again).
//!    With sign-in delegated (`LOOM_OAUTH_LOGIN_PROVIDER=oidc`), step 1
//!    sends the browser to the provider instead and [`super::oidc_signin`]
//!    takes it back to step 3.
//! 3. `GET /oauth/authorize/consent` names the client and the host the
//!    authorization goes to; `POST` with `decision=allow` issues a
//!    single-use code and answers 303 to the redirect URI, `deny` answers
//!    `error=access_denied`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use loom_ops::store::{AuthRequestRow, ClientRow, CodeRow, now_ms};

use super::pages::{self, Asking};
use super::register::redirect_matches;
use super::{
    FormFault, OAuth, SCOPE, csrf_cookie, csrf_from_cookies, form_pairs, random_token, same,
    sha256_hex,
};
use crate::app::App;

/// The largest form body accepted.
const MAX_FORM: usize = 16 * 1024;

fn oauth(app: &App) -> &OAuth {
    app.oauth
        .as_deref()
        .expect("OAuth routes are served only with OAuth on")
}

pub(super) fn see_other(location: &str) -> Response {
    let mut r = super::no_store(StatusCode::SEE_OTHER.into_response());
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// `redirect_uri` with `pairs` added to its query, plus `state` (when the
/// client sent one) and `iss` (RFC 9207).
fn client_location(
    o: &OAuth,
    redirect_uri: &str,
    state: Option<&str>,
    pairs: &[(&str, &str)],
) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        query.append_pair(k, v);
    }
    if let Some(state) = state {
        query.append_pair("state", state);
    }
    query.append_pair("iss", &o.issuer);
    let sep = if redirect_uri.contains('?') { '&' } else { '?' };
    format!("{redirect_uri}{sep}{}", query.finish())
}

/// Sends the browser back to the client with `pairs`.
fn back_to_client(
    o: &OAuth,
    redirect_uri: &str,
    state: Option<&str>,
    pairs: &[(&str, &str)],
) -> Response {
    see_other(&client_location(o, redirect_uri, state, pairs))
}

pub(super) fn redirect_error(
    o: &OAuth,
    redirect_uri: &str,
    state: Option<&str>,
    error: &str,
    description: &str,
) -> Response {
    back_to_client(
        o,
        redirect_uri,
        state,
        &[("error", error), ("error_description", description)],
    )
}

/// The refusal of a malformed authorization request from a registered
/// client, before anyone signed in. Back to a native client's redirect
/// (a loopback address or an app's scheme: the person's own machine) it is
/// a redirect with the error (OAuth 2.1 §4.1.2.1). A web site's is not
/// redirected to: anyone may register a client, so a request made broken
/// on purpose would make Loom's URL a bounce to any site (RFC 9700
/// §4.11.2); the page shows the error and a link back instead.
fn refuse_request(
    o: &OAuth,
    redirect_uri: &str,
    state: Option<&str>,
    error: &str,
    description: &str,
) -> Response {
    let back = client_location(
        o,
        redirect_uri,
        state,
        &[("error", error), ("error_description", description)],
    );
    if url::Url::parse(redirect_uri).is_ok_and(|u| u.scheme() == "https") {
        pages::error_for_client(description, &redirect_host(redirect_uri), &back)
    } else {
        see_other(&back)
    }
}

/// The host (or, for an app scheme, `scheme:`) a redirect URI goes to.
fn redirect_host(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(u) => match u.host_str() {
            Some(h) if !h.is_empty() => match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_owned(),
            },
            _ => format!("the app {}:", u.scheme()),
        },
        Err(_) => uri.to_owned(),
    }
}

fn asking<'a>(client: &'a ClientRow, redirect_uri: &'a str, host: &'a str) -> Asking<'a> {
    Asking {
        client_name: &client.client_name,
        client_id: &client.client_id,
        redirect_host: host,
        redirect_uri,
    }
}

pub(super) fn server_error(e: &loom_core::LoomError) -> Response {
    tracing::error!(
        cause = e.internal_message().unwrap_or(e.message()),
        "oauth store call failed"
    );
    pages::error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the server could not complete the sign-in; try again",
    )
}

/// Whether `s` is a well-formed S256 challenge: 43 base64url characters.
fn valid_challenge(s: &str) -> bool {
    s.len() == 43
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `GET /oauth/authorize`.
pub async fn start(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    let o = oauth(&app);
    let params = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    // Until client and redirect URI are trusted, every failure is a page;
    // a NUL or bytes that are no text could be in either (or in the state,
    // which could then not come back as sent), so it is one before anything
    // is looked up.
    if let Err(fault @ (FormFault::Nul(_) | FormFault::NotUtf8(_))) = &params {
        return pages::error(StatusCode::BAD_REQUEST, &format!("the request's {fault}"));
    }
    let all: Vec<(String, String)> =
        form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let single = |name: &str| {
        let mut it = all.iter().filter(|(k, _)| k == name);
        match (it.next(), it.next()) {
            (Some((_, v)), None) => Some(v.clone()),
            _ => None,
        }
    };
    let Some(client_id) = single("client_id") else {
        return pages::error(
            StatusCode::BAD_REQUEST,
            "the request names no client (client_id), or names it twice",
        );
    };
    let client = match app.store.oauth_client(&client_id).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return pages::error(
                StatusCode::BAD_REQUEST,
                "this application is not registered with Loom (unknown client_id)",
            );
        }
        Err(e) => return server_error(&e),
    };
    // Optional where the client registered only one (OAuth 2.1 §4.1.1).
    let sole = match client.redirect_uris.as_slice() {
        [only] if !all.iter().any(|(k, _)| k == "redirect_uri") => Some(only.clone()),
        _ => None,
    };
    let Some(redirect_uri) = single("redirect_uri").or(sole) else {
        return pages::error(
            StatusCode::BAD_REQUEST,
            "the request names no redirect_uri, or names it twice",
        );
    };
    if !redirect_matches(&client.redirect_uris, &redirect_uri) {
        return pages::error(
            StatusCode::BAD_REQUEST,
            "the redirect_uri is not one this application registered",
        );
    }
    let state = single("state");
    let params = match params {
        Ok(p) => p,
        Err(fault) => {
            return refuse_request(
                o,
                &redirect_uri,
                state.as_deref(),
                "invalid_request",
                &fault.to_string(),
            );
        }
    };
    let err = |error: &str, description: &str| {
        refuse_request(o, &redirect_uri, state.as_deref(), error, description)
    };
    match params.get("response_type").map(String::as_str) {
        Some("code") => {}
        None => return err("invalid_request", "response_type is required (code)"),
        Some(_) => return err("unsupported_response_type", "response_type must be code"),
    }
    let Some(challenge) = params.get("code_challenge") else {
        return err(
            "invalid_request",
            "PKCE is required: send code_challenge with code_challenge_method=S256",
        );
    };
    if params.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return err("invalid_request", "code_challenge_method must be S256");
    }
    if !valid_challenge(challenge) {
        return err(
            "invalid_request",
            "code_challenge must be 43 base64url characters (S256)",
        );
    }
    let resource = match params.get("resource") {
        None => o.resource_id.clone(),
        Some(r) if o.resources().contains(&r.as_str()) => r.clone(),
        Some(_) => return err("invalid_target", "resource is not served by this server"),
    };
    if let Some(scope) = params.get("scope")
        && !scope
            .split(' ')
            .filter(|s| !s.is_empty())
            .all(|s| s == SCOPE)
    {
        return err("invalid_scope", "the only scope is loom");
    }
    let csrf = random_token(32);
    let request = AuthRequestRow {
        id: random_token(24),
        client_id: client.client_id.clone(),
        redirect_uri: redirect_uri.clone(),
        state,
        code_challenge: challenge.clone(),
        resource,
        scope: SCOPE.to_owned(),
        csrf_hash: sha256_hex(&csrf),
        username: None,
        expires_ms: now_ms() + app.config.oauth_signin_ttl.as_millis() as i64,
    };
    if let Err(e) = app.store.oauth_request_add(&request).await {
        return server_error(&e);
    }
    let mut r = match &o.oidc {
        // Delegated: the provider signs the person in, then the callback
        // shows the consent page.
        Some(provider) => super::oidc_signin::send_to_provider(&app, provider, &request).await,
        None => {
            let host = redirect_host(&redirect_uri);
            pages::sign_in(
                &asking(&client, &redirect_uri, &host),
                &request.id,
                &csrf,
                None,
            )
        }
    };
    let cookie = csrf_cookie(o, &request.id, &csrf, app.config.oauth_signin_ttl);
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// A request the browser proved it started: the cookie and the form (or
/// query) carry the same CSRF value, whose hash the request stored.
pub(super) async fn bound_request(
    app: &App,
    headers: &HeaderMap,
    request_id: Option<&String>,
    csrf: Option<&String>,
) -> Result<(AuthRequestRow, ClientRow, String), Response> {
    let o = oauth(app);
    let expired = || {
        pages::error(
            StatusCode::BAD_REQUEST,
            "this sign-in has expired or was already used",
        )
    };
    let Some(request_id) = request_id else {
        return Err(expired());
    };
    let request = match app.store.oauth_request(request_id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(expired()),
        Err(e) => return Err(server_error(&e)),
    };
    let cookie = csrf_from_cookies(o, headers, request_id).unwrap_or_default();
    let sent = csrf.map(String::as_str).unwrap_or_default();
    if sent.is_empty() || !same(&cookie, sent) || !same(&sha256_hex(sent), &request.csrf_hash) {
        return Err(pages::error(
            StatusCode::FORBIDDEN,
            "this form did not come from the sign-in page this browser opened (CSRF check failed)",
        ));
    }
    let client = match app.store.oauth_client(&request.client_id).await {
        Ok(Some(c)) => c,
        Ok(None) => return Err(expired()),
        Err(e) => return Err(server_error(&e)),
    };
    Ok((request, client, sent.to_owned()))
}

fn read_form(
    body: Result<Bytes, BytesRejection>,
) -> Result<std::collections::HashMap<String, String>, Box<Response>> {
    // Over axum's buffering limit too (the extractor's refusal): this page,
    // not axum's plain text.
    let Some(body) = body.ok().filter(|b| b.len() <= MAX_FORM) else {
        return Err(Box::new(pages::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the form is too large",
        )));
    };
    form_pairs(&body).map_err(|fault| {
        Box::new(pages::error(
            StatusCode::BAD_REQUEST,
            &format!("the form's {fault}"),
        ))
    })
}

/// The client's address: the connection's peer, or with
/// `LOOM_OAUTH_TRUST_FORWARDED_FOR` the last `X-Forwarded-For` entry (the
/// one the proxy in front appended; earlier ones are the client's to forge).
fn client_ip(app: &App, headers: &HeaderMap, extensions: &Extensions) -> Option<IpAddr> {
    if app.config.trust_forwarded_for
        && let Some(ip) = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .next_back()
            .and_then(|s| s.trim().parse::<IpAddr>().ok())
    {
        return Some(ip);
    }
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip())
}

/// `POST /oauth/authorize/login`: checks the password, then 303 to consent.
/// Refused with 429 while the username or the client's address is over
/// its failed sign-ins ([`super::signin_limit`]); refused with 403 when
/// sign-in is delegated to an OpenID Connect provider.
pub async fn login(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    extensions: Extensions,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let o = oauth(&app);
    if o.oidc.is_some() {
        return pages::error(
            StatusCode::FORBIDDEN,
            "password sign-in is off: this server signs people in through its OpenID Connect provider",
        );
    }
    let form = match read_form(body) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    let (request, client, csrf) =
        match bound_request(&app, &headers, form.get("request"), form.get("csrf")).await {
            Ok(x) => x,
            Err(r) => return r,
        };
    let username = form.get("username").map(|s| s.trim()).unwrap_or_default();
    let password = form.get("password").map(String::as_str).unwrap_or_default();
    let ip = client_ip(&app, &headers, &extensions);
    if let Err(wait) = o.signin_limit.attempt(username, ip) {
        tracing::warn!(username, ip = ?ip, "oauth sign-in refused: too many failures");
        let minutes = wait.as_secs().div_ceil(60).max(1);
        let mut r = pages::error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "Too many failed sign-ins for this account or from this address. Try again in {minutes} minute{}.",
                if minutes == 1 { "" } else { "s" }
            ),
        );
        if let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let user = if username.is_empty() || password.is_empty() {
        None
    } else {
        super::users::sign_in(&app.store, username, password).await
    };
    let Some(user) = user else {
        // Counted as it was let through.
        tracing::info!("oauth sign-in refused");
        let host = redirect_host(&request.redirect_uri);
        let mut r = pages::sign_in(
            &asking(&client, &request.redirect_uri, &host),
            &request.id,
            &csrf,
            Some("Wrong username or password, or the account is disabled."),
        );
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        return r;
    };
    o.signin_limit.succeeded(username, ip);
    if let Err(e) = app
        .store
        .oauth_request_signed_in(&request.id, &user.username)
        .await
    {
        return server_error(&e);
    }
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("request", &request.id);
    see_other(&format!("/oauth/authorize/consent?{}", query.finish()))
}

fn signed_in(request: &AuthRequestRow) -> Result<&str, Box<Response>> {
    request
        .username
        .as_deref()
        .ok_or_else(|| Box::new(pages::error(StatusCode::FORBIDDEN, "sign in first")))
}

/// `GET /oauth/authorize/consent?request=…`.
pub async fn consent_page(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let params = match form_pairs(query.as_deref().unwrap_or("").as_bytes()) {
        Ok(p) => p,
        Err(fault) => {
            return pages::error(StatusCode::BAD_REQUEST, &format!("the request's {fault}"));
        }
    };
    let o = oauth(&app);
    // The CSRF value comes from the cookie here: a GET carries no form.
    let cookie = params
        .get("request")
        .and_then(|id| csrf_from_cookies(o, &headers, id));
    let (request, client, csrf) =
        match bound_request(&app, &headers, params.get("request"), cookie.as_ref()).await {
            Ok(x) => x,
            Err(r) => return r,
        };
    let username = match signed_in(&request) {
        Ok(u) => u.to_owned(),
        Err(r) => return *r,
    };
    let host = redirect_host(&request.redirect_uri);
    pages::consent(
        &asking(&client, &request.redirect_uri, &host),
        &username,
        &request.id,
        &csrf,
    )
}

/// `POST /oauth/authorize/consent`: allow (a code) or deny, then 303 to the client.
pub async fn decide(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let o = oauth(&app);
    let form = match read_form(body) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    let (request, client, _csrf) =
        match bound_request(&app, &headers, form.get("request"), form.get("csrf")).await {
            Ok(x) => x,
            Err(r) => return r,
        };
    let username = match signed_in(&request) {
        Ok(u) => u.to_owned(),
        Err(r) => return *r,
    };
    // A form that makes no choice is refused before the request is taken,
    // so the person can still choose.
    let allow = match form.get("decision").map(String::as_str) {
        Some("allow") => true,
        Some("deny") => false,
        _ => return pages::error(StatusCode::BAD_REQUEST, "choose Allow or Deny"),
    };
    // One decision per request, even if the form is posted twice.
    match app.store.oauth_request_take(&request.id).await {
        Ok(true) => {}
        Ok(false) => {
            return pages::error(
                StatusCode::BAD_REQUEST,
                "this sign-in has expired or was already used",
            );
        }
        Err(e) => return server_error(&e),
    }
    let state = request.state.as_deref();
    if !allow {
        return redirect_error(
            o,
            &request.redirect_uri,
            state,
            "access_denied",
            "the user denied access",
        );
    }
    // The account may have been disabled since it signed in.
    match app.store.user_get(&username).await {
        Ok(Some(u)) if !u.disabled => {}
        Ok(_) => {
            return redirect_error(
                o,
                &request.redirect_uri,
                state,
                "access_denied",
                "the account is disabled",
            );
        }
        Err(e) => return server_error(&e),
    }
    let code = random_token(32);
    let row = CodeRow {
        code_hash: sha256_hex(&code),
        client_id: client.client_id.clone(),
        username,
        redirect_uri: request.redirect_uri.clone(),
        code_challenge: request.code_challenge.clone(),
        resource: request.resource.clone(),
        scope: request.scope.clone(),
        family_id: random_token(16),
        used: false,
        expires_ms: now_ms() + app.config.oauth_code_ttl.as_millis() as i64,
    };
    if let Err(e) = app.store.oauth_code_add(&row).await {
        return server_error(&e);
    }
    back_to_client(o, &request.redirect_uri, state, &[("code", &code)])
}
