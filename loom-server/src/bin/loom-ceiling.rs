//! `loom-ceiling`: the benchmark's ceiling (see `bench/run.sh`). A minimal
//! axum server that does what every Loom MCP call must do and nothing more:
//! read the body, parse the JSON-RPC `tools/call` request, check the bearer
//! (HS256, with Loom's own [`JwtKeys::verify`]) and answer a fixed tool
//! result. No storage, no gates: the most any Loom call can reach on the
//! machine it runs on. Not part of a deployment.
//!
//! Reads `LOOM_JWT_SECRET` (required), `LOOM_PORT` (default 8090),
//! `LOOM_JWT_ISSUER` and `LOOM_JWT_AUDIENCE` like `loom serve`.

use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use loom_server::Config;
use loom_server::tokens::JwtKeys;
use serde_json::{Value, json};

fn rpc_error(status: StatusCode, id: Value, code: i64, message: &str) -> Response {
    (
        status,
        axum::Json(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        ),
    )
        .into_response()
}

async fn post_mcp(State(keys): State<Arc<JwtKeys>>, headers: HeaderMap, body: Bytes) -> Response {
    // Loom's own reading of a body (a key given twice refused).
    let Ok(request) = loom_server::transport::json::from_slice(&body) else {
        return rpc_error(StatusCode::OK, Value::Null, -32700, "parse error");
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str);
    let tool = request
        .get("params")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0")
        || method != Some("tools/call")
        || tool.is_none()
    {
        return rpc_error(StatusCode::OK, id, -32600, "invalid request");
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if token.is_none_or(|t| keys.verify(t).is_err()) {
        return rpc_error(
            StatusCode::UNAUTHORIZED,
            Value::Null,
            -32600,
            "unauthorized",
        );
    }
    let structured = json!({"memory_key": "bench", "content": "a fixed answer", "version": 1});
    let text = structured.to_string();
    axum::Json(json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "content": [{"type": "text", "text": text}],
            "isError": false,
            "structuredContent": structured,
        },
    }))
    .into_response()
}

fn main() -> ExitCode {
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("loom-ceiling: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(secret) = config.jwt_secret.clone() else {
        eprintln!("loom-ceiling: set LOOM_JWT_SECRET (at least 32 bytes)");
        return ExitCode::from(2);
    };
    let port = std::env::var("LOOM_PORT")
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(8090);
    let keys = Arc::new(JwtKeys::new(&secret, &config));
    let router = Router::new()
        .route("/mcp", post(post_mcp))
        .route("/readyz", axum::routing::get(|| async { "ready" }))
        .with_state(keys);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loom-ceiling: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("loom-ceiling: cannot listen on 127.0.0.1:{port}: {e}");
                return ExitCode::FAILURE;
            }
        };
        match axum::serve(listener, router).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("loom-ceiling: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
