//! `POST /oauth/token`: the authorization-code and refresh-token grants for
//! public clients (no client secret; PKCE S256 on every code).
//!
//! - The body must be `application/x-www-form-urlencoded`, and no parameter
//!   may repeat. The client names itself by `client_id` in it, or in
//!   `Authorization: Basic` with an empty secret.
//! - A code is single use and lives `LOOM_OAUTH_CODE_TTL_SECS` (60 s). The
//!   first exchange attempt burns it, whatever its outcome (a wrong verifier
//!   included); a second use answers `invalid_grant` and revokes every
//!   token issued from it (its refresh family and their access tokens).
//! - A refresh token names the client it was issued to, rotates on every
//!   use and lapses after `LOOM_OAUTH_REFRESH_TTL_SECS` unused. Presenting
//!   a rotated token again (a replay, or two refreshes racing) revokes the
//!   whole family. Each refresh re-reads the account: a disabled one gets
//!   `invalid_grant` (and its family is revoked), and role, org, namespaces
//!   and platform-admin status (`LOOM_PLATFORM_ADMINS`) are derived afresh.
//! - `resource`, when sent, must be the one the grant is bound to
//!   (`invalid_target`); `scope` may only repeat `loom` (`invalid_scope`).
//! - Answers carry `Cache-Control: no-store`; errors are RFC 6749 §5.2 JSON.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use loom_core::LoomError;
use loom_ops::store::{ClientRow, RefreshRow, UserRow, now_ms};
use serde_json::json;

use super::{SCOPE, json_error, no_store, random_token, s256, same, sha256_hex};
use crate::app::App;
use crate::tokens::MintSpec;

const MAX_BODY: usize = 16 * 1024;

fn invalid_request(d: &str) -> Response {
    json_error(StatusCode::BAD_REQUEST, "invalid_request", d)
}

fn invalid_grant(d: &str) -> Response {
    json_error(StatusCode::BAD_REQUEST, "invalid_grant", d)
}

fn server_error(e: &LoomError) -> Response {
    tracing::error!(
        cause = e.internal_message().unwrap_or(e.message()),
        "oauth token call failed"
    );
    json_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "the server could not complete the request",
    )
}

/// Whether `v` is a PKCE verifier: 43 to 128 unreserved characters (RFC 7636 §4.1).
fn valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// RFC 6749 §5.2's 401 `invalid_client`, with the challenge every 401
/// carries (RFC 9110 §15.5.2): the scheme a client may identify itself by
/// in `Authorization`.
fn invalid_client(description: &str) -> Response {
    let mut r = json_error(StatusCode::UNAUTHORIZED, "invalid_client", description);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Basic realm=\"loom\""),
    );
    r
}

/// The client a request names in `Authorization: Basic` (RFC 6749 §2.3.1:
/// the id and secret form-encoded, then base64), if it does. Loom's
/// clients are public (`token_endpoint_auth_method` `none`), so this only
/// identifies one, as `client_id` in the body does, for a library that
/// sends it there by default; a secret is refused, as none was issued.
/// Another scheme is not a client's credential and is ignored, as it was
/// before Basic was read (a client library may send its bearer along).
fn basic_client(headers: &HeaderMap) -> Result<Option<String>, Box<Response>> {
    let basic: Vec<&str> = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (scheme, rest) = v.trim().split_once(' ').unwrap_or((v.trim(), ""));
            scheme.eq_ignore_ascii_case("basic").then_some(rest)
        })
        .collect();
    let encoded = match basic.as_slice() {
        [] => return Ok(None),
        [one] => one.trim(),
        _ => {
            return Err(Box::new(invalid_request(
                "send one Authorization: Basic header",
            )));
        }
    };
    let malformed = || {
        Box::new(invalid_client(
            "the Authorization header is not Basic <client_id:> in base64",
        ))
    };
    let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
        .map_err(|_| malformed())?;
    let (id, secret) = decoded
        .iter()
        .position(|&b| b == b':')
        .map(|i| (&decoded[..i], &decoded[i + 1..]))
        .ok_or_else(malformed)?;
    if !secret.is_empty() {
        return Err(Box::new(invalid_client(
            "this client has no secret: public clients send their client_id alone",
        )));
    }
    // Form-encoded inside the base64 (RFC 6749 §2.3.1).
    let id = form_urlencoded::parse(&[b"x=".as_slice(), id].concat())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if id.is_empty() || id.contains(['\0', '\u{FFFD}']) {
        return Err(malformed());
    }
    Ok(Some(id))
}

/// The refusal of a `scope` other than `loom`, if any.
fn scope_refusal(form: &HashMap<String, String>) -> Option<Response> {
    match form.get("scope") {
        Some(s) if !s.split(' ').filter(|x| !x.is_empty()).all(|x| x == SCOPE) => Some(json_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "the only scope is loom",
        )),
        _ => None,
    }
}

/// The refusal of a `resource` other than the one the grant is bound to, if any.
fn resource_refusal(form: &HashMap<String, String>, bound: &str) -> Option<Response> {
    match form.get("resource") {
        Some(r) if r != bound => Some(json_error(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            "resource is not the one this grant is bound to",
        )),
        _ => None,
    }
}

/// `POST /oauth/token`.
pub async fn token(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type {
        return invalid_request("the body must be application/x-www-form-urlencoded");
    }
    // Over axum's buffering limit too: this refusal, not axum's plain text.
    let Some(body) = body.ok().filter(|b| b.len() <= MAX_BODY) else {
        return invalid_request("the body is too large");
    };
    let form = match super::form_pairs(&body) {
        Ok(f) => f,
        Err(fault) => return invalid_request(&fault.to_string()),
    };
    let basic = match basic_client(&headers) {
        Ok(b) => b,
        Err(refusal) => return *refusal,
    };
    let body_id = form
        .get("client_id")
        .map(String::as_str)
        .filter(|c| !c.is_empty());
    let client_id = match (basic.as_deref(), body_id) {
        (Some(a), Some(b)) if a != b => {
            return invalid_request("the client_id in the body is not the one in Authorization");
        }
        (Some(id), _) | (None, Some(id)) => id.to_owned(),
        (None, None) => {
            return invalid_request(
                "client_id is required (public clients identify themselves with it)",
            );
        }
    };
    let client_id = client_id.as_str();
    let client = match app.store.oauth_client(client_id).await {
        Ok(Some(client)) => client,
        Ok(None) => return invalid_client("unknown client_id"),
        Err(e) => return server_error(&e),
    };
    match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => exchange_code(&app, &client, &form).await,
        // A client registered for the code grant alone (RFC 7591 §2).
        Some("refresh_token") if !client.refresh => json_error(
            StatusCode::BAD_REQUEST,
            "unauthorized_client",
            "this client registered no refresh_token grant",
        ),
        Some("refresh_token") => refresh(&app, client_id, &form).await,
        Some(_) => json_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type must be authorization_code or refresh_token",
        ),
        None => invalid_request("grant_type is required"),
    }
}

/// Revokes a family and tells this replica's revocation list at once
/// (the others reload within `LOOM_REVOCATION_REFRESH_SECS`).
async fn revoke_family(app: &App, family_id: &str) {
    match app.store.oauth_family_revoke(family_id).await {
        Ok(n) => {
            tracing::warn!(
                revoked_access_tokens = n,
                "oauth grant revoked after reuse or a disabled account"
            );
            if let Err(e) = app.revocations.refresh(&app.store).await {
                tracing::error!(
                    cause = e.internal_message().unwrap_or(e.message()),
                    "revocation reload failed"
                );
            }
        }
        Err(e) => {
            tracing::error!(
                cause = e.internal_message().unwrap_or(e.message()),
                "oauth family revocation failed"
            );
        }
    }
}

async fn exchange_code(app: &App, client: &ClientRow, form: &HashMap<String, String>) -> Response {
    let client_id = client.client_id.as_str();
    let Some(code) = form.get("code").filter(|c| !c.is_empty()) else {
        return invalid_request("code is required");
    };
    // Checked when sent: the code is bound to its client and its PKCE
    // challenge, so a client that leaves it out gains nothing (A8).
    let redirect_uri = form.get("redirect_uri");
    let Some(verifier) = form.get("code_verifier") else {
        return invalid_request("code_verifier is required (PKCE)");
    };
    // A malformed request is refused before the code is claimed, so it
    // leaves the code usable, as a missing parameter does; a well-formed
    // verifier that does not match burns it below.
    if !valid_verifier(verifier) {
        return invalid_request("code_verifier must be 43 to 128 unreserved characters");
    }
    if let Some(r) = scope_refusal(form) {
        return r;
    }
    let hash = sha256_hex(code);
    let row = match app.store.oauth_code(&hash).await {
        Ok(Some(r)) => r,
        Ok(None) => return invalid_grant("the code is not valid"),
        Err(e) => return server_error(&e),
    };
    match app.store.oauth_code_claim(&hash).await {
        Ok(true) => {}
        Ok(false) => {
            revoke_family(app, &row.family_id).await;
            return invalid_grant(
                "the code was already used; the tokens issued from it are revoked",
            );
        }
        Err(e) => return server_error(&e),
    }
    if row.expires_ms < now_ms() {
        return invalid_grant("the code has expired");
    }
    if row.client_id != client_id {
        return invalid_grant("the code was issued to another client");
    }
    if redirect_uri.is_some_and(|r| *r != row.redirect_uri) {
        return invalid_grant("redirect_uri differs from the authorization request");
    }
    if !same(&s256(verifier), &row.code_challenge) {
        return invalid_grant("code_verifier does not match the code_challenge");
    }
    if let Some(r) = resource_refusal(form, &row.resource) {
        return r;
    }
    let user = match app.store.user_get(&row.username).await {
        Ok(Some(u)) if !u.disabled => u,
        Ok(_) => return invalid_grant("the account is disabled"),
        Err(e) => return server_error(&e),
    };
    issue(
        app,
        &user,
        client_id,
        &row.resource,
        &row.scope,
        &row.family_id,
        client.refresh,
    )
    .await
}

async fn refresh(app: &App, client_id: &str, form: &HashMap<String, String>) -> Response {
    let Some(token) = form.get("refresh_token").filter(|t| !t.is_empty()) else {
        return invalid_request("refresh_token is required");
    };
    if let Some(r) = scope_refusal(form) {
        return r;
    }
    let hash = sha256_hex(token);
    let row = match app.store.oauth_refresh(&hash).await {
        Ok(Some(r)) => r,
        Ok(None) => return invalid_grant("the refresh token is not valid"),
        Err(e) => return server_error(&e),
    };
    if row.revoked {
        return invalid_grant("the refresh token was revoked");
    }
    // A rotated token seen again is a replay, whichever client sends it
    // (a thief need not send the client it was issued to): checked first.
    if row.rotated {
        revoke_family(app, &row.family_id).await;
        return invalid_grant("the refresh token was already used; the grant is revoked");
    }
    if row.client_id != client_id {
        return invalid_grant("the refresh token was issued to another client");
    }
    if row.expires_ms < now_ms() {
        return invalid_grant("the refresh token has expired");
    }
    if let Some(r) = resource_refusal(form, &row.resource) {
        return r;
    }
    let user = match app.store.user_get(&row.username).await {
        Ok(Some(u)) if !u.disabled => u,
        Ok(_) => {
            revoke_family(app, &row.family_id).await;
            return invalid_grant("the account is disabled");
        }
        Err(e) => return server_error(&e),
    };
    match app.store.oauth_refresh_rotate(&hash).await {
        Ok(true) => {}
        Ok(false) => {
            revoke_family(app, &row.family_id).await;
            return invalid_grant("the refresh token was already used; the grant is revoked");
        }
        Err(e) => return server_error(&e),
    }
    issue(
        app,
        &user,
        client_id,
        &row.resource,
        &row.scope,
        &row.family_id,
        true,
    )
    .await
}

/// Mints an access token for `user` (audience `resource`) and a refresh
/// token in `family`, handed out when the client registered the refresh
/// grant (`refresh`); roles and namespaces come from the account as it is
/// now.
async fn issue(
    app: &App,
    user: &UserRow,
    client_id: &str,
    resource: &str,
    scope: &str,
    family: &str,
    refresh: bool,
) -> Response {
    let ttl = app.config.oauth_access_ttl.as_secs();
    let spec = MintSpec {
        org: user.org.clone(),
        subject: user.username.clone(),
        role: user.role,
        namespaces: user.namespaces.clone(),
        ttl_secs: ttl,
        // Never in the token: the subject's place in LOOM_PLATFORM_ADMINS is
        // read at every call (pipeline::auth), so a subject taken off the
        // list loses it at once, not when its access token expires.
        platform_admin: false,
        consumer: Some(format!("oauth:{client_id}")),
    };
    let (access, claims) = match app.keys.mint_for_audience(spec, resource) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(cause = %e, "cannot mint an access token");
            return json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "the token could not be issued",
            );
        }
    };
    // The refresh row is kept whether or not its token is handed out: it
    // is what finds the family's access tokens when the grant is revoked
    // (a code used twice, a disabled account).
    let refresh_token = random_token(32);
    let now = now_ms();
    let row = RefreshRow {
        token_hash: sha256_hex(&refresh_token),
        family_id: family.to_owned(),
        client_id: client_id.to_owned(),
        username: user.username.clone(),
        resource: resource.to_owned(),
        scope: scope.to_owned(),
        access_jti: claims.jti.clone(),
        access_exp_ms: (claims.exp as i64).saturating_mul(1000),
        rotated: false,
        revoked: false,
        expires_ms: now + app.config.oauth_refresh_ttl.as_millis() as i64,
    };
    if let Err(e) = app.store.oauth_refresh_add(&row).await {
        return server_error(&e);
    }
    let mut answer = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ttl,
        "scope": scope,
    });
    if refresh {
        answer["refresh_token"] = refresh_token.into();
    }
    no_store(axum::Json(answer).into_response())
}
