//! The browser part of sign-in delegated to an OpenID Connect provider.
//!
//! 1. `GET /oauth/authorize` (checked as for a password sign-in) stores the
//!    request, binds it to the browser with the CSRF cookie, and answers
//!    303 to the provider with a fresh `state`, `nonce` and PKCE S256
//!    challenge ([`send_to_provider`]).
//! 2. The provider sends the browser back to `GET /oauth/oidc/callback`
//!    ([`callback`]): the `state` is taken (it works once), the browser must
//!    carry the cookie of the request it names, the code is exchanged with
//!    the verifier, and the id_token validated ([`super::oidc`]). Its
//!    subject (or verified email, per `LOOM_OIDC_USERNAME_CLAIM`) must name
//!    an active Loom user: accounts are provisioned by an operator
//!    (`loom user add NAME --no-password …`), never created by a sign-in.
//! 3. Then the consent page, as after a password sign-in.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use loom_ops::store::{AuthRequestRow, OidcLoginRow};

use super::authorize::{bound_request, redirect_error, see_other, server_error};
use super::oidc::{OidcError, Provider};
use super::{OAuth, csrf_from_cookies, form_pairs, pages, random_token, s256, sha256_hex};
use crate::app::App;

/// Starts a trip to the provider for `request`: a 303 to its
/// authorization endpoint, or an error page when it cannot be reached.
pub async fn send_to_provider(
    app: &App,
    provider: &Provider,
    request: &AuthRequestRow,
) -> Response {
    let state = random_token(32);
    let nonce = random_token(32);
    let verifier = random_token(48);
    let url = match provider
        .authorization_url(&state, &nonce, &s256(&verifier))
        .await
    {
        Ok(u) => u,
        Err(e) => return provider_failed(&e),
    };
    let row = OidcLoginRow {
        state_hash: sha256_hex(&state),
        request_id: request.id.clone(),
        nonce_hash: sha256_hex(&nonce),
        verifier,
        expires_ms: request.expires_ms,
    };
    if let Err(e) = app.store.oidc_login_add(&row).await {
        return server_error(&e);
    }
    see_other(&url)
}

/// The page for a failed trip: which validation failed is said (it helps
/// the person and the operator, and tells an attacker nothing new); how the
/// provider could not be reached is only logged.
fn provider_failed(e: &OidcError) -> Response {
    match e {
        OidcError::Unreachable(_) => {
            tracing::error!(error = %e, "oidc provider unavailable");
            pages::error(
                StatusCode::BAD_GATEWAY,
                "the sign-in provider is unavailable; try again later",
            )
        }
        OidcError::Refused(_) | OidcError::InvalidToken(_) => {
            tracing::warn!(error = %e, "oidc sign-in refused");
            pages::error(StatusCode::FORBIDDEN, &e.to_string())
        }
    }
}

/// What Loom tells the client when the provider answered with an error:
/// the user's own refusal stays `access_denied`, anything else is the
/// provider's trouble.
fn client_error(provider_error: &str) -> &'static str {
    match provider_error {
        "access_denied"
        | "login_required"
        | "consent_required"
        | "interaction_required"
        | "account_selection_required" => "access_denied",
        "temporarily_unavailable" => "temporarily_unavailable",
        _ => "server_error",
    }
}

/// `GET /oauth/oidc/callback?code=…&state=…` (or `error=…&state=…`).
pub async fn callback(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let o: &OAuth = app
        .oauth
        .as_deref()
        .expect("OAuth routes are served only with OAuth on");
    let Some(provider) = o.oidc.as_ref() else {
        return pages::error(
            StatusCode::NOT_FOUND,
            "this server does not delegate sign-in",
        );
    };
    let params = match form_pairs(query.as_deref().unwrap_or("").as_bytes()) {
        Ok(p) => p,
        Err(fault) => {
            return pages::error(
                StatusCode::BAD_REQUEST,
                &format!("the provider's answer: {fault}"),
            );
        }
    };
    let Some(state) = params.get("state").filter(|s| !s.is_empty()) else {
        return pages::error(
            StatusCode::BAD_REQUEST,
            "the provider's answer carries no state",
        );
    };
    let login = match app.store.oidc_login_take(&sha256_hex(state)).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            tracing::warn!("oidc callback with an unknown or used state");
            return pages::error(
                StatusCode::BAD_REQUEST,
                "this sign-in did not start here, has expired, or was already used (unknown state)",
            );
        }
        Err(e) => return server_error(&e),
    };
    // The state alone is not enough: the browser coming back must be the
    // one that started (its cookie), or a stranger's code could sign this
    // browser in as the stranger.
    let cookie = csrf_from_cookies(o, &headers, &login.request_id);
    let (request, _client, _csrf) =
        match bound_request(&app, &headers, Some(&login.request_id), cookie.as_ref()).await {
            Ok(x) => x,
            Err(r) => return r,
        };
    if let Some(error) = params.get("error") {
        tracing::info!(provider_error = %error, "oidc provider refused the sign-in");
        if let Err(e) = app.store.oauth_request_take(&request.id).await {
            return server_error(&e);
        }
        return redirect_error(
            o,
            &request.redirect_uri,
            request.state.as_deref(),
            client_error(error),
            &format!("the sign-in provider answered {error}"),
        );
    }
    let Some(code) = params.get("code").filter(|c| !c.is_empty()) else {
        return pages::error(
            StatusCode::BAD_REQUEST,
            "the provider's answer carries no code",
        );
    };
    let identity = match provider
        .sign_in(code, &login.verifier, &login.nonce_hash)
        .await
    {
        Ok(i) => i,
        Err(e) => return provider_failed(&e),
    };
    let user = match app.store.user_get(&identity.username).await {
        Ok(u) => u,
        Err(e) => return server_error(&e),
    };
    match user {
        Some(u) if !u.disabled => {}
        Some(_) => {
            tracing::info!(username = %identity.username, "oidc sign-in of a disabled account");
            return pages::error(StatusCode::FORBIDDEN, "this account is disabled");
        }
        None => {
            tracing::info!(username = %identity.username, subject = %identity.subject, "oidc sign-in of an unknown account");
            return pages::error(
                StatusCode::FORBIDDEN,
                &format!(
                    "{} has no Loom account; ask an operator to add one (loom user add {} --no-password …)",
                    identity.username, identity.username
                ),
            );
        }
    }
    if let Err(e) = app
        .store
        .oauth_request_signed_in(&request.id, &identity.username)
        .await
    {
        return server_error(&e);
    }
    tracing::info!(username = %identity.username, "oidc sign-in");
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("request", &request.id);
    see_other(&format!("/oauth/authorize/consent?{}", query.finish()))
}
