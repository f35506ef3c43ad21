//! Discovery documents. Every URL in them derives from `LOOM_OAUTH_ISSUER`,
//! never from the request, so `issuer` equals the prefix of its well-known
//! URL (RFC 8414 §3.3) and each `resource` equals the URL its metadata URL
//! was built from (RFC 9728 §3.3).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{OAuth, SCOPE, no_store};
use crate::app::App;

fn oauth(app: &App) -> &OAuth {
    app.oauth
        .as_deref()
        .expect("OAuth routes are served only with OAuth on")
}

/// `/.well-known/oauth-authorization-server` (RFC 8414).
pub async fn authorization_server(State(app): State<Arc<App>>) -> Response {
    let o = oauth(&app);
    let i = &o.issuer;
    no_store(
        axum::Json(json!({
            "issuer": i,
            "authorization_endpoint": format!("{i}/oauth/authorize"),
            "token_endpoint": format!("{i}/oauth/token"),
            "registration_endpoint": format!("{i}/oauth/register"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": [SCOPE],
            "authorization_response_iss_parameter_supported": true,
        }))
        .into_response(),
    )
}

fn protected_resource(o: &OAuth, resource: &str) -> Response {
    no_store(
        axum::Json(json!({
            "resource": resource,
            "authorization_servers": [o.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": [SCOPE],
            "resource_name": "Loom",
        }))
        .into_response(),
    )
}

/// `/.well-known/oauth-protected-resource`: the whole server (`resource` = the issuer).
pub async fn protected_resource_root(State(app): State<Arc<App>>) -> Response {
    let o = oauth(&app);
    protected_resource(o, &o.issuer)
}

/// `/.well-known/oauth-protected-resource/mcp`: the MCP endpoint
/// (`resource` = `<issuer>/mcp`, the resource id the 401 challenge names).
pub async fn protected_resource_mcp(State(app): State<Arc<App>>) -> Response {
    let o = oauth(&app);
    protected_resource(o, &o.resource_id)
}
