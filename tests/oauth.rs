//! OAuth 2.1 sign-in end to end: a real server on a loopback port, over a
//! real socket, on SQLite and (when `LOOM_TEST_DATABASE_URL` is set)
//! PostgreSQL. A reqwest client with a cookie jar plays the browser and
//! submits the real HTML forms; redirects are followed by hand so every
//! status and `Location` is checked.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use loom_core::Role;
use loom_ops::store::UserRow;
use loom_server::Config;
use loom_tests::{TestServer, servers};
use serde_json::Value;
use sha2::{Digest, Sha256};

const PASSWORD: &str = "correct horse battery";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REDIRECT: &str = "http://127.0.0.1:53682/callback";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// OAuth on, with the issuer the server will listen at.
fn oauth_on(c: &mut Config) {
    let port = free_port();
    c.port = port;
    c.oauth_enabled = true;
    c.oauth_issuer = Some(format!("http://127.0.0.1:{port}"));
}

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// A browser: a cookie jar, no automatic redirects.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn add_user(t: &TestServer, username: &str, role: Role) {
    let hash = loom_server::oauth::users::hash_password(PASSWORD).unwrap();
    let added =
        t.db.store
            .user_add(&UserRow {
                username: username.into(),
                org: "default".into(),
                role,
                namespaces: vec!["default".into()],
                password_hash: hash,
                disabled: false,
            })
            .await
            .unwrap();
    assert!(added);
}

async fn register(t: &TestServer, body: Value) -> loom_tests::Answer {
    t.send(
        t.client
            .post(format!("{}/oauth/register", t.url()))
            .json(&body),
    )
    .await
}

async fn register_client(t: &TestServer, name: &str, redirect: &str) -> String {
    let a = register(
        t,
        serde_json::json!({"client_name": name, "redirect_uris": [redirect], "token_endpoint_auth_method": "none"}),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.text);
    a.body["client_id"].as_str().unwrap().to_owned()
}

/// The value of the hidden input `name` on a page.
fn hidden(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + key.len();
    html[start..start + html[start..].find('"').unwrap()].to_owned()
}

fn query_of(location: &str) -> std::collections::HashMap<String, String> {
    let url = url::Url::parse(location).unwrap();
    url.query_pairs().into_owned().collect()
}

struct Page {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

async fn page(r: reqwest::RequestBuilder) -> Page {
    let r = r.send().await.unwrap();
    Page {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        text: r.text().await.unwrap(),
    }
}

fn authorize_url(t: &TestServer, params: &[(&str, &str)]) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        q.append_pair(k, v);
    }
    format!("{}/oauth/authorize?{}", t.url(), q.finish())
}

fn standard<'a>(client_id: &'a str, challenge: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", "st&ate=1 <x>"),
    ]
}

/// Signs in and consents through the real forms; the redirect back to the client.
async fn sign_in_flow(
    t: &TestServer,
    b: &reqwest::Client,
    params: &[(&str, &str)],
    username: &str,
) -> Page {
    let p = page(b.get(authorize_url(t, params))).await;
    assert_eq!(p.status, 200, "{}", p.text);
    let (request, csrf) = (hidden(&p.text, "request"), hidden(&p.text, "csrf"));
    let p = page(b.post(format!("{}/oauth/authorize/login", t.url())).form(&[
        ("request", request.as_str()),
        ("csrf", csrf.as_str()),
        ("username", username),
        ("password", PASSWORD),
    ]))
    .await;
    assert_eq!(p.status, 303, "{}", p.text);
    let p = page(b.get(format!("{}{}", t.url(), p.location()))).await;
    assert_eq!(p.status, 200, "{}", p.text);
    let csrf = hidden(&p.text, "csrf");
    page(
        b.post(format!("{}/oauth/authorize/consent", t.url()))
            .form(&[
                ("request", request.as_str()),
                ("csrf", csrf.as_str()),
                ("decision", "allow"),
            ]),
    )
    .await
}

async fn code_for(t: &TestServer, client_id: &str, username: &str) -> String {
    let ch = challenge(VERIFIER);
    let p = sign_in_flow(t, &browser(), &standard(client_id, &ch), username).await;
    assert_eq!(p.status, 303, "{}", p.text);
    query_of(p.location())["code"].clone()
}

/// A token request with this `Authorization` header (`None`: none).
async fn token_call_as(
    t: &TestServer,
    authorization: Option<&str>,
    form: &[(&str, &str)],
) -> loom_tests::Answer {
    let mut r = t.client.post(format!("{}/oauth/token", t.url()));
    if let Some(v) = authorization {
        r = r.header("authorization", v);
    }
    t.send(r.form(form)).await
}

async fn token_call(t: &TestServer, form: &[(&str, &str)]) -> loom_tests::Answer {
    t.send(t.client.post(format!("{}/oauth/token", t.url())).form(form))
        .await
}

async fn exchange(t: &TestServer, client_id: &str, code: &str) -> loom_tests::Answer {
    exchange_with(t, client_id, code, REDIRECT, Some(VERIFIER)).await
}

/// A code exchange sending this redirect URI and verifier (`None`: none).
async fn exchange_with(
    t: &TestServer,
    client_id: &str,
    code: &str,
    redirect_uri: &str,
    verifier: Option<&str>,
) -> loom_tests::Answer {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("client_id", client_id),
    ];
    form.extend(verifier.map(|v| ("code_verifier", v)));
    token_call(t, &form).await
}

async fn refresh(t: &TestServer, client_id: &str, token: &str) -> loom_tests::Answer {
    token_call(
        t,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client_id),
        ],
    )
    .await
}

async fn capabilities_status(t: &TestServer, token: &str) -> u16 {
    t.post("ops.capabilities", Some(token), serde_json::json!({}))
        .await
        .status
}

#[tokio::test]
async fn discovery_documents_come_from_the_configured_issuer() {
    for t in servers(oauth_on).await {
        let n = t.name();
        let issuer = t.url();
        // A forged Host changes nothing.
        let a = t
            .send(
                t.client
                    .get(format!("{issuer}/.well-known/oauth-authorization-server"))
                    .header("host", "evil.example"),
            )
            .await;
        assert_eq!(a.status, 200, "{n}");
        assert!(
            a.header("x-request-id").is_some_and(|id| !id.is_empty()),
            "OAuth's routes answer with a request id too: {n}"
        );
        let m = &a.body;
        assert_eq!(m["issuer"], issuer.as_str(), "{n}");
        assert_eq!(
            m["authorization_endpoint"],
            format!("{issuer}/oauth/authorize")
        );
        assert_eq!(m["token_endpoint"], format!("{issuer}/oauth/token"));
        assert_eq!(
            m["registration_endpoint"],
            format!("{issuer}/oauth/register")
        );
        assert_eq!(m["response_types_supported"], serde_json::json!(["code"]));
        assert_eq!(
            m["grant_types_supported"],
            serde_json::json!(["authorization_code", "refresh_token"])
        );
        assert_eq!(
            m["code_challenge_methods_supported"],
            serde_json::json!(["S256"])
        );
        assert_eq!(
            m["token_endpoint_auth_methods_supported"],
            serde_json::json!(["none"])
        );
        assert!(m["scopes_supported"].is_array());
        assert_eq!(m["authorization_response_iss_parameter_supported"], true);
        for (path, resource) in [
            (
                "/.well-known/oauth-protected-resource/mcp",
                format!("{issuer}/mcp"),
            ),
            ("/.well-known/oauth-protected-resource", issuer.clone()),
        ] {
            let a = t
                .send(
                    t.client
                        .get(format!("{issuer}{path}"))
                        .header("host", "evil.example"),
                )
                .await;
            assert_eq!(a.status, 200, "{n} {path}");
            assert_eq!(a.body["resource"], resource.as_str(), "{n} {path}");
            assert_eq!(
                a.body["authorization_servers"],
                serde_json::json!([issuer]),
                "{n}"
            );
            assert_eq!(
                a.body["bearer_methods_supported"],
                serde_json::json!(["header"])
            );
        }
        // A 401 names the metadata of the resource refused (its `resource`
        // is the URL asked, RFC 9728 §3.3): the server's on /v1, the MCP
        // endpoint's on /mcp.
        let root = format!("{issuer}/.well-known/oauth-protected-resource");
        let prm = format!("{issuer}/.well-known/oauth-protected-resource/mcp");
        let mcp_call = |bearer: Option<&str>| {
            let mut r = t
                .client
                .post(format!("{}/mcp", t.url()))
                .header("accept", "application/json, text/event-stream")
                .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
            if let Some(b) = bearer {
                r = r.bearer_auth(b);
            }
            t.send(r)
        };
        for (a, metadata) in [
            (
                t.post("ops.capabilities", None, serde_json::json!({}))
                    .await,
                &root,
            ),
            (mcp_call(None).await, &prm),
        ] {
            assert_eq!(a.status, 401, "{n}");
            assert_eq!(
                a.header("www-authenticate"),
                Some(
                    format!(
                        "Bearer realm=\"loom\", resource_metadata=\"{metadata}\", scope=\"loom\""
                    )
                    .as_str()
                ),
                "{n}"
            );
        }
        for (a, metadata) in [
            (
                t.post(
                    "ops.capabilities",
                    Some("not-a-token"),
                    serde_json::json!({}),
                )
                .await,
                &root,
            ),
            (mcp_call(Some("not-a-token")).await, &prm),
        ] {
            assert_eq!(
                a.header("www-authenticate"),
                Some(
                    format!(
                        "Bearer realm=\"loom\", error=\"invalid_token\", resource_metadata=\"{metadata}\", scope=\"loom\""
                    )
                    .as_str()
                ),
                "{n}"
            );
        }
        // A valid token refused for what its caller may do is a 403 that
        // says so (`insufficient_scope`, RFC 6750 §3.1) and names the same
        // metadata and scope.
        t.create_namespace("acme", "team").await;
        let viewer = t.token("acme", "ana", Role::Viewer, &["team"]);
        for (op, body, code) in [
            (
                "grants.set",
                serde_json::json!({"subject": "bo", "role": "writer"}),
                "AUTH_INSUFFICIENT",
            ),
            (
                "grants.list",
                serde_json::json!({"org": "globex"}),
                "ORG_MISMATCH",
            ),
        ] {
            let a = t.post(op, Some(&viewer), body).await;
            assert_eq!((a.status, a.code()), (403, code), "{n}: {}", a.text);
            assert_eq!(
                a.header("www-authenticate"),
                Some(
                    format!(
                        "Bearer realm=\"loom\", error=\"insufficient_scope\", resource_metadata=\"{root}\", scope=\"loom\""
                    )
                    .as_str()
                ),
                "{n}"
            );
        }
        let served = t.send(t.client.get(&root)).await;
        assert_eq!(served.body["resource"], issuer.as_str(), "{n}");
        assert_eq!(t.send(t.client.get(&prm)).await.status, 200, "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn with_oauth_off_nothing_is_served_and_the_challenge_is_plain() {
    for t in servers(|_| {}).await {
        let n = t.name();
        for path in [
            "/.well-known/oauth-authorization-server",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
            "/oauth/authorize",
        ] {
            let a = t.send(t.client.get(format!("{}{path}", t.url()))).await;
            assert_eq!(a.status, 404, "{n} {path}");
        }
        let a = t
            .post("ops.capabilities", None, serde_json::json!({}))
            .await;
        assert_eq!(
            a.header("www-authenticate"),
            Some("Bearer realm=\"loom\""),
            "{n}"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_non_loopback_http_issuer_refuses_to_start() {
    loom_tests::link();
    let config = Config {
        port: 0,
        oauth_enabled: true,
        oauth_issuer: Some("http://loom.example.com".into()),
        ..Config::default()
    };
    let e = loom_server::spawn(config).await.unwrap_err();
    assert!(e.contains("LOOM_OAUTH_ISSUER"), "{e}");
}

/// Credentials go only to a host the server serves: a request naming
/// another (a server bound beyond loopback reached by its address, a
/// rebound DNS name) is refused before any page or token is served.
#[tokio::test]
async fn sign_in_and_token_routes_answer_only_hosts_the_server_serves() {
    for t in servers(oauth_on).await {
        let n = t.name();
        let base = t.url();
        let client_id = register_client(&t, "guarded", REDIRECT).await;
        let challenge = challenge(&"v".repeat(43));
        let authorize = authorize_url(&t, &standard(&client_id, &challenge));
        for (what, request) in [
            (
                "register",
                t.client
                    .post(format!("{base}/oauth/register"))
                    .json(&serde_json::json!({"redirect_uris": [REDIRECT]})),
            ),
            ("authorize", t.client.get(&authorize)),
            (
                "token",
                t.client.post(format!("{base}/oauth/token")).form(&[
                    ("grant_type", "authorization_code"),
                    ("code", "x"),
                    ("client_id", client_id.as_str()),
                ]),
            ),
        ] {
            let a = t.send(request.header("host", "192.0.2.2:8080")).await;
            assert_eq!(a.status, 403, "{n} {what}: {}", a.text);
            assert_eq!(a.body["error"], "invalid_request", "{n} {what}");
        }
        // the same page on the server's own host is served
        let a = t.send(t.client.get(&authorize)).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn registration_rules() {
    for t in servers(oauth_on).await {
        let n = t.name();
        let a = register(
            &t,
            serde_json::json!({
                "client_name": "Claude",
                "redirect_uris": ["http://127.0.0.1:33418/callback", "cursor://anysphere.cursor-retrieval/oauth/cb", "https://app.example.com/cb"],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "software_statement_unknown": {"ignored": true}
            }),
        )
        .await;
        assert_eq!(a.status, 201, "{n}: {}", a.text);
        assert!(
            a.body["client_id"].as_str().is_some_and(|c| c.len() >= 16),
            "{n}"
        );
        assert!(a.body["client_id_issued_at"].is_u64(), "{n}");
        assert_eq!(a.body["token_endpoint_auth_method"], "none", "{n}");
        assert!(a.body.get("client_secret").is_none(), "{n}");
        assert_eq!(a.body["client_name"], "Claude");
        assert_eq!(a.header("cache-control"), Some("no-store"));
        for (uri, why) in [
            ("javascript:alert(1)", "javascript"),
            ("data:text/html,x", "data"),
            ("file:///etc/passwd", "file"),
            ("vbscript:x", "vbscript"),
            ("http://app.example.com/cb", "http off loopback"),
            ("https://app.example.com/cb#x", "fragment"),
            ("/cb", "relative"),
            ("https:///cb", "no host as written"),
            ("https://app.example.com:0/cb", "port 0"),
            ("http://127.0.0.1:0/cb", "loopback port 0"),
        ] {
            let a = register(&t, serde_json::json!({"redirect_uris": [uri]})).await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (400, Some("invalid_redirect_uri")),
                "{n} {why}: {}",
                a.text
            );
        }
        let a = register(&t, serde_json::json!({"client_name": "x"})).await;
        assert_eq!(a.body["error"], "invalid_redirect_uri", "{n}");
        // A client asking for a secret is registered as a public one,
        // and told so (RFC 7591 §3.2.1: the server may replace what was asked).
        for method in ["client_secret_post", "client_secret_basic"] {
            let a = register(
                &t,
                serde_json::json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": method}),
            )
            .await;
            assert_eq!(a.status, 201, "{n} {method}: {}", a.text);
            assert_eq!(a.body["token_endpoint_auth_method"], "none", "{n}");
            assert!(a.body.get("client_secret").is_none(), "{n}: {}", a.text);
        }
        let a = register(
            &t,
            serde_json::json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": 1}),
        )
        .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_client_metadata")),
            "{n}"
        );
        let a = register(
            &t,
            serde_json::json!({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}),
        )
        .await;
        assert_eq!(a.body["error"], "invalid_client_metadata", "{n}");
        // A name that would turn around or hide the host the consent page
        // names after it.
        for name in ["Cursor \u{202E}", "A\u{2067}B", "Ap\u{200B}p"] {
            let a = register(
                &t,
                serde_json::json!({"client_name": name, "redirect_uris": [REDIRECT]}),
            )
            .await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (400, Some("invalid_client_metadata")),
                "{n} {name:?}: {}",
                a.text
            );
        }
        // An emoji joined by a zero-width joiner is a name.
        let a = register(
            &t,
            serde_json::json!({"client_name": "\u{1F469}\u{200D}\u{1F4BB} Agent", "redirect_uris": [REDIRECT]}),
        )
        .await;
        assert_eq!(a.status, 201, "{n}: {}", a.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn registration_is_rate_limited() {
    for t in servers(|c| {
        oauth_on(c);
        c.oauth_register_per_min = 2;
    })
    .await
    {
        let n = t.name();
        let body = serde_json::json!({"redirect_uris": [REDIRECT]});
        assert_eq!(register(&t, body.clone()).await.status, 201, "{n}");
        assert_eq!(register(&t, body.clone()).await.status, 201, "{n}");
        let a = register(&t, body).await;
        assert_eq!(a.status, 429, "{n}");
        assert!(a.header("retry-after").is_some(), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn the_code_flow_issues_a_token_that_calls_the_api() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let client_id = register_client(&t, "<b>Evil & Co</b>", REDIRECT).await;
        let b = browser();
        let ch = challenge(VERIFIER);
        let params = standard(&client_id, &ch);
        // The sign-in page: escaped, unframeable, names the redirect host.
        let p = page(b.get(authorize_url(&t, &params))).await;
        assert_eq!(p.status, 200, "{n}");
        assert_eq!(p.headers["x-frame-options"], "DENY");
        assert!(
            p.headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        assert_eq!(p.headers["cache-control"], "no-store");
        assert!(
            p.text.contains("&lt;b&gt;Evil &amp; Co&lt;/b&gt;") && !p.text.contains("<b>Evil"),
            "{n}"
        );
        assert!(p.text.contains("127.0.0.1:53682"), "{n}");
        let (request, csrf) = (hidden(&p.text, "request"), hidden(&p.text, "csrf"));
        // A wrong password shows the page again.
        let login = |password: &'static str, csrf: String| {
            b.post(format!("{}/oauth/authorize/login", t.url())).form(&[
                ("request", request.clone()),
                ("csrf", csrf),
                ("username", "ana".into()),
                ("password", password.into()),
            ])
        };
        let p = page(login("wrong password", csrf.clone())).await;
        assert_eq!(p.status, 401, "{n}");
        assert!(p.text.contains("Wrong username or password"), "{n}");
        // A forged CSRF value is refused.
        let p = page(login(PASSWORD, "forged".into())).await;
        assert_eq!(p.status, 403, "{n}");
        // The same form without the browser's cookie is refused.
        let p = page(
            t.client
                .post(format!("{}/oauth/authorize/login", t.url()))
                .form(&[
                    ("request", request.as_str()),
                    ("csrf", csrf.as_str()),
                    ("username", "ana"),
                    ("password", PASSWORD),
                ]),
        )
        .await;
        assert_eq!(p.status, 403, "{n}");
        // The right password: 303 to consent.
        let p = page(login(PASSWORD, csrf.clone())).await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        let p = page(b.get(format!("{}{}", t.url(), p.location()))).await;
        assert_eq!(p.status, 200, "{n}");
        assert!(p.text.contains("Signed in as <strong>ana</strong>"), "{n}");
        assert!(
            p.text.contains("&lt;b&gt;Evil &amp; Co&lt;/b&gt;")
                && p.text.contains("127.0.0.1:53682"),
            "{n}"
        );
        assert_eq!(p.headers["x-frame-options"], "DENY");
        let p = page(
            b.post(format!("{}/oauth/authorize/consent", t.url()))
                .form(&[
                    ("request", request.as_str()),
                    ("csrf", hidden(&p.text, "csrf").as_str()),
                    ("decision", "allow"),
                ]),
        )
        .await;
        assert_eq!(p.status, 303, "{n}");
        assert!(p.location().starts_with(REDIRECT), "{n}");
        let q = query_of(p.location());
        assert_eq!(q["state"], "st&ate=1 <x>", "{n}: state byte-exact");
        assert_eq!(q["iss"], t.url(), "{n}");
        let code = q["code"].clone();
        // Exchange.
        let a = exchange(&t, &client_id, &code).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(a.header("cache-control"), Some("no-store"));
        assert_eq!(a.body["token_type"], "Bearer");
        assert!(a.body["expires_in"].as_u64().is_some_and(|s| s > 0));
        let access = a.body["access_token"].as_str().unwrap().to_owned();
        assert!(a.body["refresh_token"].is_string());
        let c = claims(&access);
        assert_eq!(c["aud"], format!("{}/mcp", t.url()), "{n}");
        assert_eq!(
            (c["sub"].as_str(), c["org"].as_str(), c["role"].as_str()),
            (Some("ana"), Some("default"), Some("writer"))
        );
        assert_eq!(c["token_use"], "access");
        assert_eq!(capabilities_status(&t, &access).await, 200, "{n}");
        // The code is single use: a second exchange fails and revokes what it issued.
        let a = exchange(&t, &client_id, &code).await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_grant")),
            "{n}"
        );
        assert_eq!(
            capabilities_status(&t, &access).await,
            401,
            "{n}: tokens from a reused code are revoked"
        );
        // A token for another audience (a plain Loom token) still works beside it.
        let plain = t.token("default", "ana", Role::Viewer, &[]);
        assert_eq!(capabilities_status(&t, &plain).await, 200, "{n}");
        t.server.shutdown().await;
    }
}

/// Two clients signing in at once in one browser each keep their own
/// sign-in: the second does not spoil the first's CSRF check.
#[tokio::test]
async fn two_sign_ins_in_one_browser_keep_their_own() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Viewer).await;
        let first = register_client(&t, "First", "http://127.0.0.1/callback").await;
        let second = register_client(&t, "Second", "http://127.0.0.1/callback").await;
        let ch = challenge(VERIFIER);
        let b = browser();
        let a = page(b.get(authorize_url(&t, &standard(&first, &ch)))).await;
        let started = page(b.get(authorize_url(&t, &standard(&second, &ch)))).await;
        assert_eq!((a.status, started.status), (200, 200), "{n}");
        let p = page(b.post(format!("{}/oauth/authorize/login", t.url())).form(&[
            ("request", hidden(&a.text, "request").as_str()),
            ("csrf", hidden(&a.text, "csrf").as_str()),
            ("username", "ana"),
            ("password", PASSWORD),
        ]))
        .await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        // The second, started later, completes too.
        let done = sign_in_flow(&t, &b, &standard(&second, &ch), "ana").await;
        assert_eq!(done.status, 303, "{n}: {}", done.text);
        assert!(query_of(done.location()).contains_key("code"), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn deny_and_authorize_refusals() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Viewer).await;
        let client_id = register_client(&t, "App", "http://127.0.0.1/callback").await;
        let a = register(
            &t,
            serde_json::json!({"client_name": "Two", "redirect_uris": [REDIRECT, "http://[::1]/cb"]}),
        )
        .await;
        let two = a.body["client_id"].as_str().unwrap().to_owned();
        let ch = challenge(VERIFIER);
        let b = browser();
        // Unknown client, unregistered redirect, none named by a client that
        // registered two: an error page, never a redirect.
        for params in [
            vec![
                ("response_type", "code"),
                ("client_id", "nope"),
                ("redirect_uri", REDIRECT),
                ("code_challenge", ch.as_str()),
                ("code_challenge_method", "S256"),
            ],
            vec![
                ("response_type", "code"),
                ("client_id", client_id.as_str()),
                ("redirect_uri", "http://127.0.0.1:53682/other"),
                ("code_challenge", ch.as_str()),
                ("code_challenge_method", "S256"),
            ],
            vec![
                ("response_type", "code"),
                ("client_id", client_id.as_str()),
                ("redirect_uri", "https://evil.example/callback"),
                ("code_challenge", ch.as_str()),
                ("code_challenge_method", "S256"),
            ],
            vec![
                ("response_type", "code"),
                ("client_id", two.as_str()),
                ("code_challenge", ch.as_str()),
                ("code_challenge_method", "S256"),
            ],
        ] {
            let p = page(b.get(authorize_url(&t, &params))).await;
            assert_eq!(p.status, 400, "{n} {params:?}");
            assert!(p.headers.get("location").is_none(), "{n}");
            assert_eq!(p.headers["x-frame-options"], "DENY");
        }
        // The registered loopback IP URI matches on any port (REDIRECT is port 53682).
        let ok = standard(&client_id, &ch);
        let p = page(b.get(authorize_url(&t, &ok))).await;
        assert_eq!(p.status, 200, "{n}: {}", p.text);
        // Everything else is redirected back with error, state and iss.
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (vec![("code_challenge_method", "plain")], "invalid_request"),
            (vec![("code_challenge_method", "")], "invalid_request"),
            (vec![("code_challenge", "")], "invalid_request"),
            (
                vec![("response_type", "token")],
                "unsupported_response_type",
            ),
            // missing, as any required parameter (RFC 6749 §4.1.2.1)
            (vec![("response_type", "")], "invalid_request"),
            (
                vec![("resource", "https://other.example/mcp")],
                "invalid_target",
            ),
            (vec![("scope", "admin")], "invalid_scope"),
        ];
        for (changes, error) in cases {
            let mut params: Vec<(&str, &str)> = ok
                .iter()
                .copied()
                .filter(|(k, _)| !changes.iter().any(|(c, _)| c == k))
                .collect();
            params.extend(changes.iter().copied().filter(|(_, v)| !v.is_empty()));
            let p = page(b.get(authorize_url(&t, &params))).await;
            assert_eq!(p.status, 303, "{n} {changes:?}: {}", p.text);
            let q = query_of(p.location());
            assert_eq!(q["error"], error, "{n} {changes:?}");
            assert_eq!(q["state"], "st&ate=1 <x>", "{n}");
            assert_eq!(q["iss"], t.url(), "{n}");
        }
        // A web site's redirect is not bounced to before anyone signed in
        // (anyone may register one): a page with the error and a link.
        let web = register_client(&t, "Web", "https://phish.example/cb").await;
        let mut params = standard(&web, &ch);
        params.retain(|(k, _)| *k != "redirect_uri" && *k != "code_challenge_method");
        params.extend([
            ("redirect_uri", "https://phish.example/cb"),
            ("code_challenge_method", "plain"),
        ]);
        let p = page(b.get(authorize_url(&t, &params))).await;
        assert_eq!(p.status, 400, "{n}: {}", p.text);
        assert!(p.headers.get("location").is_none(), "{n}");
        assert!(
            p.text
                .contains("href=\"https://phish.example/cb?error=invalid_request&amp;"),
            "{n}: {}",
            p.text
        );
        // A repeated parameter.
        let mut params = ok.clone();
        params.push(("code_challenge_method", "S256"));
        let p = page(b.get(authorize_url(&t, &params))).await;
        assert_eq!(query_of(p.location())["error"], "invalid_request", "{n}");
        // The resource the metadata names is accepted and bound.
        let mut params = ok.clone();
        let resource = format!("{}/mcp", t.url());
        params.push(("resource", resource.as_str()));
        params.push(("scope", "loom"));
        let p = page(b.get(authorize_url(&t, &params))).await;
        assert_eq!(p.status, 200, "{n}");
        // Deny.
        let (request, csrf) = (hidden(&p.text, "request"), hidden(&p.text, "csrf"));
        let p = page(b.post(format!("{}/oauth/authorize/login", t.url())).form(&[
            ("request", request.as_str()),
            ("csrf", csrf.as_str()),
            ("username", "ana"),
            ("password", PASSWORD),
        ]))
        .await;
        assert_eq!(p.status, 303, "{n}");
        // Consent cannot be posted before... by another browser.
        let p2 = page(
            t.client
                .post(format!("{}/oauth/authorize/consent", t.url()))
                .form(&[
                    ("request", request.as_str()),
                    ("csrf", csrf.as_str()),
                    ("decision", "allow"),
                ]),
        )
        .await;
        assert_eq!(p2.status, 403, "{n}");
        // A form that chooses neither is refused and leaves the choice open.
        for decision in ["maybe", ""] {
            let p = page(
                b.post(format!("{}/oauth/authorize/consent", t.url()))
                    .form(&[
                        ("request", request.as_str()),
                        ("csrf", csrf.as_str()),
                        ("decision", decision),
                    ]),
            )
            .await;
            assert_eq!(p.status, 400, "{n} {decision:?}");
        }
        let p = page(
            b.post(format!("{}/oauth/authorize/consent", t.url()))
                .form(&[
                    ("request", request.as_str()),
                    ("csrf", csrf.as_str()),
                    ("decision", "deny"),
                ]),
        )
        .await;
        assert_eq!(p.status, 303, "{n}");
        let q = query_of(p.location());
        assert_eq!(
            (q["error"].as_str(), q["state"].as_str()),
            ("access_denied", "st&ate=1 <x>"),
            "{n}"
        );
        assert!(!q.contains_key("code"), "{n}");
        // The request is spent.
        let p = page(
            b.post(format!("{}/oauth/authorize/consent", t.url()))
                .form(&[
                    ("request", request.as_str()),
                    ("csrf", csrf.as_str()),
                    ("decision", "allow"),
                ]),
        )
        .await;
        assert_eq!(p.status, 400, "{n}");
        t.server.shutdown().await;
    }
}

/// OAuth 2.1 §4.1.1 and RFC 6749 §2.3.1, §5.2 where a client leans on
/// them: the one registered redirect URI left out, a state that is no
/// text, and a client that names itself in `Authorization: Basic`.
#[tokio::test]
async fn a_client_may_lean_on_what_the_rfcs_allow() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Viewer).await;
        let client_id = register_client(&t, "App", REDIRECT).await;
        let ch = challenge(VERIFIER);
        let b = browser();
        // The one redirect URI a client registered may go unnamed: the
        // sign-in goes on, and the code comes back to it.
        let mut params = standard(&client_id, &ch);
        params.retain(|(k, _)| *k != "redirect_uri");
        let p = sign_in_flow(&t, &b, &params, "ana").await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        assert!(p.location().starts_with(REDIRECT), "{n}: {}", p.location());
        let code = query_of(p.location())["code"].clone();
        // A public client naming itself in Basic, with no secret and no
        // client_id in the body, exchanges it.
        let basic = |id: &str, secret: &str| {
            let pair = format!("{id}:{secret}");
            format!(
                "Basic {}",
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pair)
            )
        };
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("code_verifier", VERIFIER),
        ];
        let a = token_call_as(&t, Some(&basic(&client_id, "")), &form).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert!(a.body["access_token"].is_string(), "{n}");
        // A bearer sent along is no client credential: ignored, the body's
        // client_id naming the client (the refresh token is what fails).
        let bearer = format!("Bearer {}", a.body["access_token"].as_str().unwrap());
        let a = token_call_as(
            &t,
            Some(&bearer),
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "x"),
                ("client_id", client_id.as_str()),
            ],
        )
        .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_grant")),
            "{n}: {}",
            a.text
        );
        // A secret (none was issued) or an unknown client: 401 invalid_client
        // with a challenge, as every 401 carries.
        for (authorization, body_id) in [
            (Some(basic(&client_id, "s3cret")), None),
            (Some(basic("nope", "")), None),
            (None, Some("nope")),
        ] {
            let mut form = vec![("grant_type", "refresh_token"), ("refresh_token", "x")];
            form.extend(body_id.map(|id| ("client_id", id)));
            let a = token_call_as(&t, authorization.as_deref(), &form).await;
            assert_eq!(
                (
                    a.status,
                    a.body["error"].as_str(),
                    a.header("www-authenticate")
                ),
                (401, Some("invalid_client"), Some("Basic realm=\"loom\"")),
                "{n} {authorization:?} {body_id:?}: {}",
                a.text
            );
        }
        // Two names for the client that differ: a malformed request.
        let a = token_call_as(
            &t,
            Some(&basic(&client_id, "")),
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "x"),
                ("client_id", "other"),
            ],
        )
        .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_request")),
            "{n}: {}",
            a.text
        );
        // A state that does not decode to UTF-8 could not come back as
        // sent: a page, before anything, never a redirect.
        let query = format!(
            "response_type=code&client_id={client_id}&redirect_uri={}&code_challenge={ch}\
             &code_challenge_method=S256&state=%FF%FE",
            url::form_urlencoded::byte_serialize(REDIRECT.as_bytes()).collect::<String>()
        );
        let p = page(b.get(format!("{}/oauth/authorize?{query}", t.url()))).await;
        assert_eq!(p.status, 400, "{n}: {}", p.text);
        assert!(p.headers.get("location").is_none(), "{n}");
        // U+FFFD sent as such is text like any other.
        let p = page(b.get(format!(
            "{}/oauth/authorize?{}",
            t.url(),
            query.replace("%FF%FE", "%EF%BF%BD")
        )))
        .await;
        assert_eq!(p.status, 200, "{n}: {}", p.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn token_endpoint_refusals() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Viewer).await;
        let client_id = register_client(&t, "App", REDIRECT).await;
        // A body past what the server buffers (2 MB) is each endpoint's own
        // refusal, in its protocol's shape, not a plain-text 413.
        let huge = "a=".to_owned() + &"x".repeat(3 << 20);
        for (path, content_type, status, error) in [
            (
                "/oauth/token",
                "application/x-www-form-urlencoded",
                400,
                "invalid_request",
            ),
            (
                "/oauth/register",
                "application/json",
                400,
                "invalid_client_metadata",
            ),
        ] {
            let a = t
                .send(
                    t.client
                        .post(format!("{}{path}", t.url()))
                        .header("content-type", content_type)
                        .body(huge.clone()),
                )
                .await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (status, Some(error)),
                "{n} {path}: {}",
                a.text
            );
        }
        let a = t
            .send(
                t.client
                    .post(format!("{}/oauth/authorize/login", t.url()))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(huge),
            )
            .await;
        assert_eq!(a.status, 413, "{n}");
        assert!(a.text.contains("the form is too large"), "{n}: {}", a.text);
        let other = register_client(&t, "Other", REDIRECT).await;
        // Not a form.
        let a = t
            .send(
                t.client
                    .post(format!("{}/oauth/token", t.url()))
                    .json(&serde_json::json!({"grant_type": "authorization_code"})),
            )
            .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_request")),
            "{n}"
        );
        assert_eq!(a.header("cache-control"), Some("no-store"));
        // Repeated parameters.
        let a = t.send(t.client.post(format!("{}/oauth/token", t.url())).header("content-type", "application/x-www-form-urlencoded").body(format!("grant_type=refresh_token&client_id={client_id}&client_id={client_id}&refresh_token=x"))).await;
        assert_eq!(a.body["error"], "invalid_request", "{n}");
        // Unknown client.
        let a = token_call(
            &t,
            &[
                ("grant_type", "authorization_code"),
                ("client_id", "nope"),
                ("code", "x"),
            ],
        )
        .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (401, Some("invalid_client")),
            "{n}"
        );
        let a = token_call(
            &t,
            &[
                ("grant_type", "password"),
                ("client_id", client_id.as_str()),
            ],
        )
        .await;
        assert_eq!(a.body["error"], "unsupported_grant_type", "{n}");
        // Each failed exchange burns its code.
        let code = code_for(&t, &client_id, "ana").await;
        let a = exchange_with(&t, &client_id, &code, REDIRECT, Some(&"A".repeat(43))).await;
        assert_eq!(a.body["error"], "invalid_grant", "{n}: wrong verifier");
        assert_eq!(
            exchange(&t, &client_id, &code).await.body["error"],
            "invalid_grant",
            "{n}: burnt"
        );
        let code = code_for(&t, &client_id, "ana").await;
        assert_eq!(
            exchange(&t, &other, &code).await.body["error"],
            "invalid_grant",
            "{n}: other client"
        );
        let code = code_for(&t, &client_id, "ana").await;
        let a = exchange_with(
            &t,
            &client_id,
            &code,
            "http://127.0.0.1:53682/elsewhere",
            Some(VERIFIER),
        )
        .await;
        assert_eq!(a.body["error"], "invalid_grant", "{n}: redirect_uri");
        // Left out, redirect_uri is not checked: the code is bound to its
        // client and its PKCE challenge.
        let code = code_for(&t, &client_id, "ana").await;
        let a = token_call(
            &t,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("client_id", &client_id),
                ("code_verifier", VERIFIER),
            ],
        )
        .await;
        assert_eq!(a.status, 200, "{n}: no redirect_uri: {}", a.text);
        let code = code_for(&t, &client_id, "ana").await;
        let a = exchange_with(&t, &client_id, &code, REDIRECT, None).await;
        assert_eq!(a.body["error"], "invalid_request", "{n}: no verifier");
        // A malformed verifier is the request's fault, not a failed
        // exchange: the code stays usable.
        let a = exchange_with(&t, &client_id, &code, REDIRECT, Some("short")).await;
        assert_eq!(
            a.body["error"], "invalid_request",
            "{n}: malformed verifier"
        );
        assert_eq!(
            exchange(&t, &client_id, &code).await.status,
            200,
            "{n}: not burnt"
        );
        let code = code_for(&t, &client_id, "ana").await;
        let a = token_call(
            &t,
            &[
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("redirect_uri", REDIRECT),
                ("client_id", client_id.as_str()),
                ("code_verifier", VERIFIER),
                ("resource", "https://other.example/mcp"),
            ],
        )
        .await;
        assert_eq!(a.body["error"], "invalid_target", "{n}");
        let a = exchange(&t, &client_id, "never-issued").await;
        assert_eq!(a.body["error"], "invalid_grant", "{n}");
        // A matching resource is fine.
        let code = code_for(&t, &client_id, "ana").await;
        let resource = format!("{}/mcp", t.url());
        let a = token_call(
            &t,
            &[
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("redirect_uri", REDIRECT),
                ("client_id", client_id.as_str()),
                ("code_verifier", VERIFIER),
                ("resource", resource.as_str()),
            ],
        )
        .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        // A refresh names its client and a known resource.
        let rt = a.body["refresh_token"].as_str().unwrap().to_owned();
        assert_eq!(
            refresh(&t, &other, &rt).await.body["error"],
            "invalid_grant",
            "{n}"
        );
        let a = token_call(
            &t,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", rt.as_str()),
                ("client_id", client_id.as_str()),
                ("resource", "https://other.example"),
            ],
        )
        .await;
        assert_eq!(a.body["error"], "invalid_target", "{n}");
        let a = token_call(
            &t,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", rt.as_str()),
                ("client_id", client_id.as_str()),
                ("scope", "loom admin"),
            ],
        )
        .await;
        assert_eq!(a.body["error"], "invalid_scope", "{n}");
        // Still usable once by its own client after those refusals.
        assert_eq!(refresh(&t, &client_id, &rt).await.status, 200, "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_expired_code_is_refused() {
    for t in servers(|c| {
        oauth_on(c);
        c.oauth_code_ttl = std::time::Duration::from_secs(1);
    })
    .await
    {
        let n = t.name();
        add_user(&t, "ana", Role::Viewer).await;
        let client_id = register_client(&t, "App", REDIRECT).await;
        let code = code_for(&t, &client_id, "ana").await;
        tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
        assert_eq!(
            exchange(&t, &client_id, &code).await.body["error"],
            "invalid_grant",
            "{n}"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn refresh_rotates_and_reuse_revokes_the_family() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let client_id = register_client(&t, "App", REDIRECT).await;
        let code = code_for(&t, &client_id, "ana").await;
        let first = exchange(&t, &client_id, &code).await;
        let rt1 = first.body["refresh_token"].as_str().unwrap().to_owned();
        let at1 = first.body["access_token"].as_str().unwrap().to_owned();
        // Roles are derived afresh on each refresh.
        sqlx::query("UPDATE users SET role = 'viewer' WHERE username = 'ana'")
            .execute(t.db.store.writer())
            .await
            .unwrap();
        let second = refresh(&t, &client_id, &rt1).await;
        assert_eq!(second.status, 200, "{n}: {}", second.text);
        assert_eq!(second.header("cache-control"), Some("no-store"));
        let rt2 = second.body["refresh_token"].as_str().unwrap().to_owned();
        let at2 = second.body["access_token"].as_str().unwrap().to_owned();
        assert_ne!(rt1, rt2, "{n}: rotated");
        assert_eq!(claims(&at2)["role"], "viewer", "{n}");
        assert_eq!(capabilities_status(&t, &at2).await, 200, "{n}");
        // Replaying the rotated token revokes the family.
        let a = refresh(&t, &client_id, &rt1).await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_grant")),
            "{n}"
        );
        assert_eq!(
            refresh(&t, &client_id, &rt2).await.body["error"],
            "invalid_grant",
            "{n}: family revoked"
        );
        assert_eq!(capabilities_status(&t, &at2).await, 401, "{n}");
        assert_eq!(capabilities_status(&t, &at1).await, 401, "{n}");
        // Nothing stored in the clear.
        let clear = t
            .count(&format!(
                "SELECT COUNT(*) FROM oauth_refresh_tokens WHERE token_hash IN ('{rt1}', '{rt2}')"
            ))
            .await;
        assert_eq!(clear, 0, "{n}");
        // A rotated token replayed under another client's id is a replay
        // too: the family it belongs to is revoked.
        let other = register_client(&t, "Other", REDIRECT).await;
        let code = code_for(&t, &client_id, "ana").await;
        let rt1 = exchange(&t, &client_id, &code).await.body["refresh_token"]
            .as_str()
            .unwrap()
            .to_owned();
        let rt2 = refresh(&t, &client_id, &rt1).await.body["refresh_token"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            refresh(&t, &other, &rt1).await.body["error"],
            "invalid_grant",
            "{n}"
        );
        assert_eq!(
            refresh(&t, &client_id, &rt2).await.body["error"],
            "invalid_grant",
            "{n}: family revoked"
        );
        t.server.shutdown().await;
    }
}

/// A client registered for the code grant alone gets no refresh token and
/// is refused the refresh grant; its code used twice still revokes the
/// access token issued from it.
#[tokio::test]
async fn a_client_without_the_refresh_grant_gets_no_refresh_token() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let a = register(
            &t,
            serde_json::json!({"redirect_uris": [REDIRECT], "grant_types": ["authorization_code"]}),
        )
        .await;
        assert_eq!(a.status, 201, "{n}: {}", a.text);
        assert_eq!(
            a.body["grant_types"],
            serde_json::json!(["authorization_code"]),
            "{n}"
        );
        let client_id = a.body["client_id"].as_str().unwrap().to_owned();
        let code = code_for(&t, &client_id, "ana").await;
        let first = exchange(&t, &client_id, &code).await;
        assert_eq!(first.status, 200, "{n}: {}", first.text);
        assert!(
            first.body.get("refresh_token").is_none(),
            "{n}: {}",
            first.text
        );
        let access = first.body["access_token"].as_str().unwrap().to_owned();
        assert_eq!(capabilities_status(&t, &access).await, 200, "{n}");
        let r = refresh(&t, &client_id, "anything").await;
        assert_eq!(
            (r.status, r.body["error"].as_str()),
            (400, Some("unauthorized_client")),
            "{n}: {}",
            r.text
        );
        // The code again: refused, and what it issued is revoked.
        assert_eq!(
            exchange(&t, &client_id, &code).await.body["error"],
            "invalid_grant",
            "{n}"
        );
        assert_eq!(capabilities_status(&t, &access).await, 401, "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_disabled_account_keeps_nothing() {
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        add_user(&t, "bo", Role::Writer).await;
        let client_id = register_client(&t, "App", REDIRECT).await;
        let code = code_for(&t, &client_id, "ana").await;
        let a = exchange(&t, &client_id, &code).await;
        let (at, rt) = (
            a.body["access_token"].as_str().unwrap().to_owned(),
            a.body["refresh_token"].as_str().unwrap().to_owned(),
        );
        // A code approved before the account was disabled is refused after.
        let code_bo = code_for(&t, &client_id, "bo").await;
        assert!(t.db.store.user_disable("ana").await.unwrap());
        assert!(t.db.store.user_disable("bo").await.unwrap());
        t.server.app.revocations.refresh(&t.db.store).await.unwrap();
        assert_eq!(capabilities_status(&t, &at).await, 401, "{n}");
        assert_eq!(
            refresh(&t, &client_id, &rt).await.body["error"],
            "invalid_grant",
            "{n}"
        );
        assert_eq!(
            exchange(&t, &client_id, &code_bo).await.body["error"],
            "invalid_grant",
            "{n}"
        );
        // And cannot sign in.
        let b = browser();
        let ch = challenge(VERIFIER);
        let p = page(b.get(authorize_url(&t, &standard(&client_id, &ch)))).await;
        let p = page(b.post(format!("{}/oauth/authorize/login", t.url())).form(&[
            ("request", hidden(&p.text, "request").as_str()),
            ("csrf", hidden(&p.text, "csrf").as_str()),
            ("username", "ana"),
            ("password", PASSWORD),
        ]))
        .await;
        assert_eq!(p.status, 401, "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_subject_removed_from_platform_admins_loses_it_at_once() {
    for t in servers(|c| {
        oauth_on(c);
        c.platform_admins = vec!["ana".into()];
    })
    .await
    {
        let n = t.name();
        add_user(&t, "ana", Role::Admin).await;
        let client_id = register_client(&t, "App", REDIRECT).await;
        let code = code_for(&t, &client_id, "ana").await;
        let a = exchange(&t, &client_id, &code).await;
        let at = a.body["access_token"].as_str().unwrap().to_owned();
        let rt = a.body["refresh_token"].as_str().unwrap().to_owned();
        // The token does not carry the power: the list does, at each call.
        assert_eq!(claims(&at)["platform_admin"], false, "{n}");
        let other_org =
            serde_json::json!({"org": "other", "namespace": "default", "memory_key": "k"});
        let r = t.post("memory.get", Some(&at), other_org.clone()).await;
        assert_ne!(r.code(), "ORG_MISMATCH", "{n}: {}", r.text);
        // Restart on the same database without ana in LOOM_PLATFORM_ADMINS:
        // the access token issued before acts in its own org only.
        let mut config = t.server.app.config.clone();
        config.platform_admins.clear();
        t.server.shutdown().await;
        let server = loom_server::spawn(config).await.expect("restart");
        let again = TestServer {
            server,
            db: t.db,
            client: t.client,
        };
        again.wait_ready().await;
        let r = again.post("memory.get", Some(&at), other_org).await;
        assert_eq!(r.status, 403, "{n}: {}", r.text);
        assert_eq!(r.code(), "ORG_MISMATCH", "{n}");
        let a = refresh(&again, &client_id, &rt).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(
            claims(a.body["access_token"].as_str().unwrap())["platform_admin"],
            false,
            "{n}"
        );
        again.server.shutdown().await;
    }
}

/// One password sign-in attempt on a fresh sign-in page, optionally with an
/// `X-Forwarded-For` header; the answer.
async fn attempt(
    t: &TestServer,
    client_id: &str,
    username: &str,
    password: &str,
    forwarded_for: Option<&str>,
) -> Page {
    let b = browser();
    let ch = challenge(VERIFIER);
    let p = page(b.get(authorize_url(t, &standard(client_id, &ch)))).await;
    assert_eq!(p.status, 200, "{}", p.text);
    let mut post = b.post(format!("{}/oauth/authorize/login", t.url())).form(&[
        ("request", hidden(&p.text, "request").as_str()),
        ("csrf", hidden(&p.text, "csrf").as_str()),
        ("username", username),
        ("password", password),
    ]);
    if let Some(ip) = forwarded_for {
        post = post.header("x-forwarded-for", ip);
    }
    page(post).await
}

fn locked(p: &Page) -> bool {
    p.status == 429
        && p.text.contains("Too many failed sign-ins")
        && p.headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|s| (1..=900).contains(&s))
}

#[tokio::test]
async fn failed_sign_ins_lock_the_username_then_the_address() {
    // Per username: the fourth try is refused even with the right password;
    // other usernames from the same address still sign in.
    for t in servers(|c| {
        oauth_on(c);
        c.signin_failures_per_user = 3;
    })
    .await
    {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        add_user(&t, "bo", Role::Writer).await;
        let client_id = register_client(&t, "Limits", REDIRECT).await;
        for i in 0..3 {
            let p = attempt(&t, &client_id, "ana", "wrong password", None).await;
            assert_eq!(p.status, 401, "{n}: failure {i}");
        }
        let p = attempt(&t, &client_id, "ana", PASSWORD, None).await;
        assert!(locked(&p), "{n}: {} {}", p.status, p.text);
        let p = attempt(&t, &client_id, "bo", PASSWORD, None).await;
        assert_eq!(p.status, 303, "{n}: another username is not locked");
        t.server.shutdown().await;
    }
    // Per address: failures spread over usernames lock the address, and a
    // forged X-Forwarded-For does not get around it unless trusted.
    for t in servers(|c| {
        oauth_on(c);
        c.signin_failures_per_ip = 3;
    })
    .await
    {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let client_id = register_client(&t, "Limits", REDIRECT).await;
        for user in ["x1", "x2", "x3"] {
            let p = attempt(&t, &client_id, user, "wrong password", None).await;
            assert_eq!(p.status, 401, "{n}: {user}");
        }
        let p = attempt(&t, &client_id, "ana", PASSWORD, None).await;
        assert!(locked(&p), "{n}: {} {}", p.status, p.text);
        let p = attempt(&t, &client_id, "ana", PASSWORD, Some("203.0.113.7")).await;
        assert!(
            locked(&p),
            "{n}: an untrusted X-Forwarded-For changes nothing"
        );
        t.server.shutdown().await;
    }
    // Behind a trusted proxy: the last X-Forwarded-For entry is the client.
    for t in servers(|c| {
        oauth_on(c);
        c.signin_failures_per_ip = 2;
        c.trust_forwarded_for = true;
    })
    .await
    {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let client_id = register_client(&t, "Limits", REDIRECT).await;
        for user in ["x1", "x2"] {
            let p = attempt(
                &t,
                &client_id,
                user,
                "wrong",
                Some("198.51.100.1, 203.0.113.1"),
            )
            .await;
            assert_eq!(p.status, 401, "{n}: {user}");
        }
        let p = attempt(&t, &client_id, "ana", PASSWORD, Some("203.0.113.1")).await;
        assert!(locked(&p), "{n}: {} {}", p.status, p.text);
        // A client-forged first entry does not move the lock.
        let p = attempt(
            &t,
            &client_id,
            "ana",
            PASSWORD,
            Some("198.51.100.9, 203.0.113.1"),
        )
        .await;
        assert!(locked(&p), "{n}");
        let p = attempt(&t, &client_id, "ana", PASSWORD, Some("203.0.113.2")).await;
        assert_eq!(
            p.status, 303,
            "{n}: another client behind the proxy signs in"
        );
        t.server.shutdown().await;
    }
}

/// The Python interpreter of the test environment `tests/python/setup.sh`
/// builds (creating it when missing), or why it cannot be had.
fn python_env() -> Result<std::path::PathBuf, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        return Err("python3 is not installed".into());
    }
    let venv = std::env::var_os("LOOM_TEST_PYTHON_VENV")
        .map_or_else(|| root.join("target/python-venv"), std::path::PathBuf::from);
    let python = venv.join("bin/python");
    let ready = || {
        std::process::Command::new(&python)
            .args(["-c", "import authlib, requests"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ready() {
        let status = std::process::Command::new(root.join("tests/python/setup.sh"))
            .env("LOOM_TEST_PYTHON_VENV", &venv)
            .status()
            .map_err(|e| format!("tests/python/setup.sh did not run: {e}"))?;
        assert!(status.success(), "tests/python/setup.sh failed");
    }
    assert!(ready(), "the Python environment lacks authlib after setup");
    Ok(python)
}

#[tokio::test]
async fn an_independent_authlib_client_completes_the_flow() {
    let python = match python_env() {
        Ok(p) => p,
        Err(why) => {
            println!("SKIPPED an_independent_authlib_client_completes_the_flow: {why}");
            return;
        }
    };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/oauth_client.py");
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let out = tokio::process::Command::new(&python)
            .arg(&script)
            .args([t.url().as_str(), "ana", PASSWORD])
            .env("AUTHLIB_INSECURE_TRANSPORT", "1")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .output()
            .await
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("{n}:\n{stdout}");
        assert!(
            out.status.success() && stdout.contains("ALL OK"),
            "{n}: the authlib client failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn the_mcp_sdk_oauth_provider_signs_in_to_mcp() {
    let python = match python_env() {
        Ok(p) => p,
        Err(why) => {
            println!("SKIPPED the_mcp_sdk_oauth_provider_signs_in_to_mcp: {why}");
            return;
        }
    };
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/mcp_oauth_client.py");
    for t in servers(oauth_on).await {
        let n = t.name();
        add_user(&t, "ana", Role::Writer).await;
        let out = tokio::process::Command::new(&python)
            .arg(&script)
            .args([t.url().as_str(), "ana", PASSWORD])
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .output()
            .await
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("{n}: {stdout}");
        assert!(
            out.status.success(),
            "{n}: the MCP SDK's OAuth client failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("{n}: not a JSON report ({e}):\n{stdout}"));
        assert_eq!(report["ok"], true, "{n}: {report}");
        assert_eq!(report["resource"], format!("{}/mcp", t.url()), "{n}");
        assert_eq!(report["has_refresh"], true, "{n}");
        t.server.shutdown().await;
    }
}

/// A NUL in any OAuth parameter or registration field is the request's
/// mistake (400 with a reason), never a failed lookup answered 500:
/// PostgreSQL's text cannot hold one.
#[tokio::test]
async fn a_nul_in_any_oauth_parameter_is_a_400() {
    for t in servers(oauth_on).await {
        let n = t.name();
        let a = register(
            &t,
            serde_json::json!({"client_name": "x\u{0}", "redirect_uris": [REDIRECT]}),
        )
        .await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_client_metadata")),
            "{n}: {}",
            a.text
        );
        let client_id = register_client(&t, "Claude", REDIRECT).await;
        let ch = challenge(VERIFIER);
        for (name, value) in [("client_id", "x\u{0}"), ("state", "s\u{0}")] {
            let mut params = standard(&client_id, &ch);
            params.retain(|(k, _)| *k != name);
            params.push((name, value));
            let p = page(browser().get(authorize_url(&t, &params))).await;
            assert_eq!(p.status, 400, "{n} {name}: {}", p.text);
            assert!(
                p.text
                    .contains(&format!("parameter {name} holds a NUL character")),
                "{n} {name}: {}",
                p.text
            );
        }
        let p = page(
            browser()
                .post(format!("{}/oauth/authorize/login", t.url()))
                .form(&[("request", "r\u{0}"), ("csrf", "c"), ("username", "u")]),
        )
        .await;
        assert_eq!(p.status, 400, "{n}: {}", p.text);
        for form in [
            [("client_id", "x\u{0}"), ("grant_type", "refresh_token")],
            [("client_id", client_id.as_str()), ("code", "\u{0}")],
        ] {
            let a = token_call(&t, &form).await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (400, Some("invalid_request")),
                "{n}: {}",
                a.text
            );
        }
        t.server.shutdown().await;
    }
}
