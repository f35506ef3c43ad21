//! The sign-in and consent pages in a real headless browser: Debian's
//! chromium driven by playwright-core (`tests/browser/signin.mjs`, a
//! native-app client with a loopback redirect) against a real server on
//! SQLite and (when `LOOM_TEST_DATABASE_URL` is set) PostgreSQL.
//!
//! Needs `node`, chromium and `tests/browser/node_modules` (installed by
//! `tests/browser/setup.sh`); without them the test says why it skipped,
//! unless `LOOM_TEST_REQUIRE_BROWSER=1` (which `.ci/run` sets after a
//! successful install) makes that a failure.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use loom_core::Role;
use loom_ops::store::UserRow;
use loom_server::Config;
use loom_tests::servers;

const PASSWORD: &str = "correct horse battery";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn oauth_on(c: &mut Config) {
    let port = free_port();
    c.port = port;
    c.oauth_enabled = true;
    c.oauth_issuer = Some(format!("http://127.0.0.1:{port}"));
}

/// Why the browser test cannot run here, if it cannot.
fn missing() -> Option<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    let chromium =
        std::env::var("LOOM_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("node is not installed".into());
    }
    if !std::path::Path::new(&chromium).exists() {
        return Some(format!("{chromium} is not installed"));
    }
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        return Some("playwright-core is not installed (run tests/browser/setup.sh)".into());
    }
    None
}

#[tokio::test]
async fn the_sign_in_and_consent_pages_work_in_chromium() {
    if let Some(why) = missing() {
        assert!(
            std::env::var("LOOM_TEST_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "LOOM_TEST_REQUIRE_BROWSER=1 but {why}"
        );
        println!("SKIPPED the_sign_in_and_consent_pages_work_in_chromium: {why}");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("browser/signin.mjs");
    for t in servers(oauth_on).await {
        let n = t.name();
        let added =
            t.db.store
                .user_add(&UserRow {
                    username: "ana".into(),
                    org: "default".into(),
                    role: Role::Writer,
                    namespaces: vec!["default".into()],
                    password_hash: loom_server::oauth::users::hash_password(PASSWORD).unwrap(),
                    disabled: false,
                })
                .await
                .unwrap();
        assert!(added);
        let out = tokio::process::Command::new("node")
            .arg(&script)
            .args([t.url().as_str(), "ana", PASSWORD])
            .env("NO_PROXY", "127.0.0.1,localhost")
            .output()
            .await
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{n}: the browser client failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("{n}: not a JSON report ({e}):\n{stdout}"));
        assert_eq!(report["ok"], true, "{n}");
        let checked = report["checked"].as_array().unwrap();
        println!("{n}: {} checks passed in chromium", checked.len());
        assert!(checked.len() >= 15, "{n}: {checked:?}");
        let token = report["access_token"].as_str().unwrap();
        let payload = token.split('.').nth(1).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        assert_eq!(claims["sub"], "ana", "{n}");
        let call = t
            .post("ops.capabilities", Some(token), serde_json::json!({}))
            .await;
        assert_eq!(call.status, 200, "{n}: {}", call.text);
        t.server.shutdown().await;
    }
}
