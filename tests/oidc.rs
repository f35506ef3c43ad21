//! Sign-in delegated to an OpenID Connect provider, end to end: a real
//! provider (`tests/python/oidc_provider.py`, oidc-provider-mock on a
//! loopback port) and a real Loom server, on SQLite and (when
//! `LOOM_TEST_DATABASE_URL` is set) PostgreSQL. A reqwest client with a
//! cookie jar plays the browser across both, following every redirect by
//! hand so each hop is checked. The provider can be told to re-sign its
//! id_tokens with one claim wrong, or with a key it does not publish, so
//! each validation Loom makes is seen to refuse.
//!
//! Needs the Python environment of `tests/python/setup.sh`; without it the
//! tests say why they skipped, unless `LOOM_TEST_REQUIRE_PYTHON` is set.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use loom_core::Role;
use loom_ops::store::UserRow;
use loom_server::Config;
use loom_server::config::Secret;
use loom_tests::{TestServer, servers};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::AsyncBufReadExt;

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REDIRECT: &str = "http://127.0.0.1:53682/callback";
const CLIENT_STATE: &str = "client state &<>";
const LOOM_CLIENT_ID: &str = "loom-at-the-provider";

fn python() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = std::env::var_os("LOOM_TEST_PYTHON_VENV")
        .map_or_else(|| root.join("target/python-venv"), std::path::PathBuf::from);
    let python = venv.join("bin/python");
    let ready = std::process::Command::new(&python)
        .args(["-c", "import oidc_provider_mock"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ready {
        return Some(python);
    }
    assert!(
        std::env::var_os("LOOM_TEST_REQUIRE_PYTHON").is_none(),
        "LOOM_TEST_REQUIRE_PYTHON is set but {} lacks oidc-provider-mock (run tests/python/setup.sh)",
        venv.display()
    );
    println!("SKIPPED: run tests/python/setup.sh to install the local OpenID provider");
    None
}

/// A running local provider; it stops when dropped (its stdin closes and
/// the process is killed).
struct Provider {
    url: String,
    _child: tokio::process::Child,
}

async fn provider(python: &std::path::Path, args: &[&str]) -> Provider {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/oidc_provider.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the provider starts");
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the provider says where it listens within 60 s")
        .unwrap()
        .expect("a line");
    let url = line
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("unexpected provider output {line:?}"))
        .to_owned();
    Provider { url, _child: child }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn delegating(provider_url: &str, claim: &str) -> impl Fn(&mut Config) {
    let provider_url = provider_url.to_owned();
    let claim = claim.to_owned();
    move |c: &mut Config| {
        let port = free_port();
        c.port = port;
        c.oauth_enabled = true;
        c.oauth_issuer = Some(format!("http://127.0.0.1:{port}"));
        c.oauth_login_provider = "oidc".into();
        c.oidc_issuer = Some(provider_url.clone());
        c.oidc_client_id = Some(LOOM_CLIENT_ID.into());
        c.oidc_client_secret = Some(Secret("provider-secret".into()));
        c.oidc_username_claim = claim.clone();
    }
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

struct Page {
    status: u16,
    location: String,
    text: String,
}

async fn page(r: reqwest::RequestBuilder) -> Page {
    let r = r.send().await.unwrap();
    Page {
        status: r.status().as_u16(),
        location: r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned(),
        text: r.text().await.unwrap(),
    }
}

fn query_of(location: &str) -> std::collections::HashMap<String, String> {
    url::Url::parse(location)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

fn hidden(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + key.len();
    html[start..start + html[start..].find('"').unwrap()].to_owned()
}

/// Adds `username` as an account with no password (it signs in only
/// through the provider).
async fn provision(t: &TestServer, username: &str) {
    let added =
        t.db.store
            .user_add(&UserRow {
                username: username.into(),
                org: "default".into(),
                role: Role::Writer,
                namespaces: vec!["default".into()],
                password_hash: loom_server::oauth::users::NO_PASSWORD.into(),
                disabled: false,
            })
            .await
            .unwrap();
    assert!(added);
}

async fn register_client(t: &TestServer) -> String {
    let a = t
        .send(
            t.client
                .post(format!("{}/oauth/register", t.url()))
                .json(&serde_json::json!({
                    "client_name": "OIDC test client",
                    "redirect_uris": [REDIRECT],
                    "token_endpoint_auth_method": "none"
                })),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text);
    a.body["client_id"].as_str().unwrap().to_owned()
}

fn authorize_url(t: &TestServer, client_id: &str) -> String {
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(VERIFIER.as_bytes()));
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", CLIENT_STATE),
    ] {
        q.append_pair(k, v);
    }
    format!("{}/oauth/authorize?{}", t.url(), q.finish())
}

/// Opens Loom's authorization URL and follows it to the provider; the
/// provider URL Loom sent the browser to (after `rewrite`) and the URL of
/// Loom's callback the provider sent it back to, once `sub` signed in there
/// (or the person denied, with `sub` = `None`).
async fn to_provider_and_back(
    t: &TestServer,
    b: &reqwest::Client,
    client_id: &str,
    sub: Option<&str>,
    rewrite: impl Fn(&mut Vec<(String, String)>),
) -> (url::Url, String) {
    let p = page(b.get(authorize_url(t, client_id))).await;
    assert_eq!(p.status, 303, "{}", p.text);
    let mut at_provider = url::Url::parse(&p.location).unwrap();
    let mut pairs: Vec<(String, String)> = at_provider.query_pairs().into_owned().collect();
    rewrite(&mut pairs);
    at_provider.query_pairs_mut().clear().extend_pairs(&pairs);
    let p = page(b.get(at_provider.as_str())).await;
    assert_eq!(p.status, 200, "the provider's sign-in page: {}", p.text);
    let form: Vec<(&str, &str)> = match sub {
        Some(sub) => vec![("sub", sub)],
        None => vec![("action", "deny")],
    };
    let p = page(b.post(at_provider.as_str()).form(&form)).await;
    assert_eq!(p.status, 302, "the provider's answer: {}", p.text);
    (at_provider, p.location)
}

fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

#[tokio::test]
async fn a_provider_sign_in_ends_with_a_loom_token() {
    let Some(python) = python() else { return };
    let idp = provider(&python, &[]).await;
    for t in servers(delegating(&idp.url, "sub")).await {
        let n = t.name();
        provision(&t, "alice").await;
        let client_id = register_client(&t).await;
        let b = browser();
        let (at_provider, back) =
            to_provider_and_back(&t, &b, &client_id, Some("alice"), |_| {}).await;

        // What Loom asked the provider for: the code flow with PKCE S256,
        // state and nonce, back to Loom's own callback.
        let asked: std::collections::HashMap<String, String> =
            at_provider.query_pairs().into_owned().collect();
        assert!(
            at_provider
                .as_str()
                .starts_with(&format!("{}/oauth2/authorize?", idp.url)),
            "{n}"
        );
        assert_eq!(asked["response_type"], "code", "{n}");
        assert_eq!(asked["client_id"], LOOM_CLIENT_ID, "{n}");
        assert_eq!(
            asked["redirect_uri"],
            format!("{}/oauth/oidc/callback", t.url()),
            "{n}"
        );
        assert_eq!(asked["scope"], "openid", "{n}");
        assert_eq!(asked["code_challenge_method"], "S256", "{n}");
        assert_eq!(asked["code_challenge"].len(), 43, "{n}");
        assert!(
            asked["state"].len() >= 43 && asked["nonce"].len() >= 43,
            "{n}"
        );
        assert_ne!(
            asked["state"], CLIENT_STATE,
            "{n}: the client's state never leaves Loom"
        );

        assert!(
            back.starts_with(&format!("{}/oauth/oidc/callback?", t.url())),
            "{n}: {back}"
        );
        let p = page(b.get(&back)).await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        assert!(p.location.starts_with("/oauth/authorize/consent?"), "{n}");
        let consent = page(b.get(format!("{}{}", t.url(), p.location))).await;
        assert_eq!(consent.status, 200, "{n}: {}", consent.text);
        assert!(
            consent.text.contains("Signed in as <strong>alice</strong>"),
            "{n}"
        );
        assert!(consent.text.contains("OIDC test client"), "{n}");
        let p = page(
            b.post(format!("{}/oauth/authorize/consent", t.url()))
                .form(&[
                    ("request", hidden(&consent.text, "request").as_str()),
                    ("csrf", hidden(&consent.text, "csrf").as_str()),
                    ("decision", "allow"),
                ]),
        )
        .await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        assert!(p.location.starts_with(REDIRECT), "{n}");
        let q = query_of(&p.location);
        assert_eq!(q["state"], CLIENT_STATE, "{n}");
        let a = t
            .send(t.client.post(format!("{}/oauth/token", t.url())).form(&[
                ("grant_type", "authorization_code"),
                ("code", q["code"].as_str()),
                ("redirect_uri", REDIRECT),
                ("client_id", client_id.as_str()),
                ("code_verifier", VERIFIER),
            ]))
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        let token = a.body["access_token"].as_str().unwrap();
        assert_eq!(claims(token)["sub"], "alice", "{n}");
        let call = t
            .post("ops.capabilities", Some(token), serde_json::json!({}))
            .await;
        assert_eq!(call.status, 200, "{n}: {}", call.text);

        // The provider's answer works once.
        let again = page(b.get(&back)).await;
        assert_eq!(again.status, 400, "{n}");
        assert!(again.text.contains("unknown state"), "{n}: {}", again.text);

        // Password sign-in is closed while sign-in is delegated.
        let p = page(
            b.post(format!("{}/oauth/authorize/login", t.url()))
                .form(&[("username", "alice"), ("password", "anything at all")]),
        )
        .await;
        assert_eq!(p.status, 403, "{n}");
        assert!(p.text.contains("password sign-in is off"), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_forged_or_stolen_state_is_refused() {
    let Some(python) = python() else { return };
    let idp = provider(&python, &[]).await;
    for t in servers(delegating(&idp.url, "sub")).await {
        let n = t.name();
        provision(&t, "alice").await;
        let client_id = register_client(&t).await;
        let b = browser();
        let (_, back) = to_provider_and_back(&t, &b, &client_id, Some("alice"), |_| {}).await;
        let mut forged = url::Url::parse(&back).unwrap();
        let pairs: Vec<(String, String)> = forged
            .query_pairs()
            .into_owned()
            .map(|(k, v)| {
                if k == "state" {
                    (k, format!("{v}x"))
                } else {
                    (k, v)
                }
            })
            .collect();
        forged.query_pairs_mut().clear().extend_pairs(&pairs);
        let p = page(b.get(forged.as_str())).await;
        assert_eq!(p.status, 400, "{n}: a forged state");
        assert!(p.text.contains("unknown state"), "{n}: {}", p.text);
        let p = page(b.get(format!("{}/oauth/oidc/callback?code=abc", t.url()))).await;
        assert_eq!(p.status, 400, "{n}: no state");

        // The real state in another browser (no cookie of this sign-in):
        // refused, and the state is spent for the first browser too.
        let p = page(browser().get(&back)).await;
        assert_eq!(p.status, 403, "{n}: {}", p.text);
        assert!(p.text.contains("CSRF"), "{n}: {}", p.text);
        let p = page(b.get(&back)).await;
        assert_eq!(p.status, 400, "{n}: {}", p.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_refusal_at_the_provider_reaches_the_client_as_access_denied() {
    let Some(python) = python() else { return };
    let idp = provider(&python, &[]).await;
    for t in servers(delegating(&idp.url, "sub")).await {
        let n = t.name();
        let client_id = register_client(&t).await;
        let b = browser();
        let (at_provider, back) = to_provider_and_back(&t, &b, &client_id, None, |_| {}).await;
        assert_eq!(query_of(&back)["error"], "access_denied", "{n}: {back}");
        // An error that names no state cannot be tied to a sign-in: a page.
        let p = page(b.get(&back)).await;
        assert_eq!(p.status, 400, "{n}: {}", p.text);
        // RFC 6749 §4.1.2.1 has the provider return the state with an
        // error; this mock leaves it out on a denial, so the test adds it.
        let mut back = url::Url::parse(&back).unwrap();
        back.query_pairs_mut()
            .append_pair("state", &query_of(at_provider.as_str())["state"]);
        let p = page(b.get(back.as_str())).await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        assert!(p.location.starts_with(REDIRECT), "{n}: {}", p.location);
        let q = query_of(&p.location);
        assert_eq!(q["error"], "access_denied", "{n}");
        assert_eq!(q["state"], CLIENT_STATE, "{n}");
        assert_eq!(q["iss"], t.url(), "{n}");
        assert!(!q.contains_key("code"), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_unknown_or_disabled_account_gets_no_consent_page() {
    let Some(python) = python() else { return };
    let idp = provider(&python, &[]).await;
    for t in servers(delegating(&idp.url, "sub")).await {
        let n = t.name();
        provision(&t, "carol").await;
        assert!(t.db.store.user_disable("carol").await.unwrap());
        let client_id = register_client(&t).await;
        for (sub, says) in [("mallory", "has no Loom account"), ("carol", "disabled")] {
            let b = browser();
            let (_, back) = to_provider_and_back(&t, &b, &client_id, Some(sub), |_| {}).await;
            let p = page(b.get(&back)).await;
            assert_eq!(p.status, 403, "{n} {sub}: {}", p.text);
            assert!(p.text.contains(says), "{n} {sub}: {}", p.text);
        }
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_replayed_nonce_is_refused() {
    let Some(python) = python() else { return };
    let idp = provider(&python, &[]).await;
    for t in servers(delegating(&idp.url, "sub")).await {
        let n = t.name();
        provision(&t, "alice").await;
        let client_id = register_client(&t).await;
        let b = browser();
        // The provider is asked with another nonce than Loom sent, as a
        // code minted for another sign-in would carry.
        let (_, back) = to_provider_and_back(&t, &b, &client_id, Some("alice"), |pairs| {
            for (k, v) in pairs.iter_mut() {
                if k == "nonce" {
                    *v = "a-nonce-from-another-sign-in".into();
                }
            }
        })
        .await;
        let p = page(b.get(&back)).await;
        assert_eq!(p.status, 403, "{n}: {}", p.text);
        assert!(p.text.contains("nonce"), "{n}: {}", p.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_id_token_with_a_wrong_claim_or_key_is_refused() {
    let Some(python) = python() else { return };
    let cases: [(&[&str], &str); 6] = [
        (&["--tamper", "aud=\"someone-else\""], "audience"),
        (&["--tamper", "iss=\"http://127.0.0.1:1\""], "issuer"),
        (&["--tamper", "exp=1000000000"], "expired"),
        // 2100-01-01: not valid yet, or issued in the future
        (&["--tamper", "nbf=4102444800"], "not valid yet"),
        (&["--tamper", "iat=4102444800"], "issued in the future"),
        (&["--foreign-key"], "signature"),
    ];
    for (args, says) in cases {
        let idp = provider(&python, args).await;
        for t in servers(delegating(&idp.url, "sub")).await {
            let n = t.name();
            provision(&t, "alice").await;
            let client_id = register_client(&t).await;
            let b = browser();
            let (_, back) = to_provider_and_back(&t, &b, &client_id, Some("alice"), |_| {}).await;
            let p = page(b.get(&back)).await;
            assert_eq!(p.status, 403, "{n} {args:?}: {}", p.text);
            assert!(p.text.contains(says), "{n} {args:?}: {}", p.text);
            assert!(!p.location.contains("consent"), "{n} {args:?}");
            t.server.shutdown().await;
        }
    }
}

#[tokio::test]
async fn the_email_claim_maps_only_when_verified() {
    let Some(python) = python() else { return };
    let idp = provider(&python, &[]).await;
    let http = reqwest::Client::new();
    for (sub, email, verified) in [
        ("sub-bob", "Bob@Example.com", true),
        ("sub-eve", "alice@example.com", false),
    ] {
        let r = http
            .put(format!("{}/users/{sub}", idp.url))
            .json(&serde_json::json!({"email": email, "email_verified": verified}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    }
    for t in servers(delegating(&idp.url, "email")).await {
        let n = t.name();
        provision(&t, "bob@example.com").await;
        provision(&t, "alice@example.com").await;
        let client_id = register_client(&t).await;

        let b = browser();
        let (at_provider, back) =
            to_provider_and_back(&t, &b, &client_id, Some("sub-bob"), |_| {}).await;
        assert!(
            query_of(at_provider.as_str())["scope"]
                .split(' ')
                .any(|s| s == "email"),
            "{n}"
        );
        let p = page(b.get(&back)).await;
        assert_eq!(p.status, 303, "{n}: {}", p.text);
        let consent = page(b.get(format!("{}{}", t.url(), p.location))).await;
        assert!(
            consent
                .text
                .contains("Signed in as <strong>bob@example.com</strong>"),
            "{n}: {}",
            consent.text
        );

        // An unverified email never names an account, even an existing one.
        let b = browser();
        let (_, back) = to_provider_and_back(&t, &b, &client_id, Some("sub-eve"), |_| {}).await;
        let p = page(b.get(&back)).await;
        assert_eq!(p.status, 403, "{n}: {}", p.text);
        assert!(p.text.contains("not verified"), "{n}: {}", p.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_unreachable_provider_is_a_clear_page_and_loom_still_starts() {
    // Nothing listens there: Loom starts (discovery waits for a sign-in)
    // and the sign-in says the provider is unavailable.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    for t in servers(delegating(&nowhere, "sub")).await {
        let n = t.name();
        let client_id = register_client(&t).await;
        let p = page(browser().get(authorize_url(&t, &client_id))).await;
        assert_eq!(p.status, 502, "{n}: {}", p.text);
        assert!(
            p.text.contains("the sign-in provider is unavailable"),
            "{n}: {}",
            p.text
        );
        assert!(p.location.is_empty(), "{n}");
        t.server.shutdown().await;
    }
}
