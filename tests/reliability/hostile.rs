//! A corpus of malformed and malicious requests over a real socket, and
//! slow or idle connections beside a normal caller.

use std::net::SocketAddr;
use std::time::Duration;

use loom_core::Role;
use loom_server::tokens::{ACCESS_TOKEN_USE, Claims};
use loom_tests::{TestServer, servers};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn b64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn claims(org: &str, sub: &str) -> Claims {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    Claims {
        sub: sub.into(),
        org: org.into(),
        role: Role::Admin,
        // a jti of the form Loom issues: 32 lowercase hex digits
        jti: hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(sub)[..16]),
        exp: now + 3600,
        iat: now,
        iss: "loom".into(),
        aud: "loom".into(),
        token_use: ACCESS_TOKEN_USE.into(),
        namespaces: Vec::new(),
        platform_admin: true,
        consumer: None,
    }
}

/// Resident memory of this process (the server runs in it), in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Sends raw bytes and reads the answer until the server closes (bounded).
/// Returns the status, or 0 when the server closed without answering.
async fn raw(addr: SocketAddr, bytes: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("the server accepts");
    // The server may answer and close before reading everything (413).
    let _ = s.write_all(bytes).await;
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut out)).await;
    assert!(
        read.is_ok(),
        "the server hung on {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
    );
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A request: method, path, extra header lines, body; `connection: close`
/// and a content-length matching the body unless a header line sets one.
fn request(method: &str, path: &str, headers: &[String], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    if !headers.iter().any(|h| {
        let h = h.to_ascii_lowercase();
        h.starts_with("content-length") || h.starts_with("transfer-encoding")
    }) {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

struct Corpus {
    cases: Vec<(String, Vec<u8>)>,
}

impl Corpus {
    fn add(&mut self, name: impl Into<String>, bytes: Vec<u8>) {
        self.cases.push((name.into(), bytes));
    }

    /// `POST /v1/<op>` with a bearer and a body.
    fn call(&mut self, name: impl Into<String>, op: &str, token: &str, body: &[u8]) {
        let auth = format!("authorization: Bearer {token}");
        self.add(name, request("POST", &format!("/v1/{op}"), &[auth], body));
    }
}

fn corpus(token: &str, viewer: &str, globex_secret: &str) -> Corpus {
    let mut c = Corpus { cases: Vec::new() };
    let valid = json!({"memory_key": "hostile", "content": "héllo \u{1F600}", "labels": ["a", "b"], "kind": "fact"}).to_string();

    // truncated JSON: every prefix of a valid body
    for end in 1..valid.len() {
        if valid.is_char_boundary(end) {
            c.call(
                format!("truncated at {end}"),
                "memory.set",
                token,
                &valid.as_bytes()[..end],
            );
        }
    }
    // deep nesting, as the body and inside an argument
    for depth in [64, 129, 1_000, 100_000] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        c.call(
            format!("nested arrays {depth}"),
            "memory.set",
            token,
            arrays.as_bytes(),
        );
        let objects = format!(
            "{{\"memory_key\": \"k\", \"content\": {}1{}}}",
            "{\"a\":".repeat(depth),
            "}".repeat(depth)
        );
        c.call(
            format!("nested content {depth}"),
            "memory.set",
            token,
            objects.as_bytes(),
        );
        c.call(
            format!("unclosed nesting {depth}"),
            "memory.set",
            token,
            "[".repeat(depth).as_bytes(),
        );
    }
    // huge strings
    let over = |field: &str, n: usize| {
        json!({"memory_key": "k", "content": "c", field: "x".repeat(n)}).to_string()
    };
    c.call(
        "content over 64 KiB",
        "memory.set",
        token,
        json!({"memory_key": "k", "content": "x".repeat(65 * 1024)})
            .to_string()
            .as_bytes(),
    );
    c.call(
        "key of 10 000 bytes",
        "memory.set",
        token,
        over("memory_key", 10_000).as_bytes(),
    );
    c.call(
        "body over the limit",
        "memory.set",
        token,
        over("content", 2 << 20).as_bytes(),
    );
    c.add(
        "declared length over the limit",
        request(
            "POST",
            "/v1/memory.set",
            &[
                format!("authorization: Bearer {token}"),
                "content-length: 999999999999".into(),
            ],
            b"{}",
        ),
    );
    c.call(
        "huge unknown key",
        "memory.set",
        token,
        format!("{{\"{}\": 1}}", "k".repeat(100_000)).as_bytes(),
    );
    // Near-miss matching costs the product of two lengths: neither a
    // megabyte of key nor thousands of keys may hold a serving thread.
    c.call(
        "unknown key of 900 KB",
        "memory.get",
        token,
        format!(
            "{{\"memory_key\": \"k\", \"{}\": 1}}",
            "memory_kee".repeat(90_000)
        )
        .as_bytes(),
    );
    let many: serde_json::Map<String, Value> = (0..20_000)
        .map(|i| (format!("memory_ky{i}"), json!(1)))
        .collect();
    c.call(
        "20 000 unknown keys",
        "memory.set",
        token,
        Value::Object(many).to_string().as_bytes(),
    );
    c.call(
        "huge number",
        "memory.update",
        token,
        format!(
            "{{\"memory_key\": \"k\", \"if_version\": 1{}}}",
            "0".repeat(5000)
        )
        .as_bytes(),
    );
    // wrong types for every field of memory.set and memory.update
    let wrong: [Value; 7] = [
        json!(null),
        json!(true),
        json!(1),
        json!(-1.5),
        json!([]),
        json!({}),
        json!(["x"]),
    ];
    for field in [
        "memory_key",
        "content",
        "kind",
        "labels",
        "source",
        "expires_at",
        "namespace",
        "agent",
    ] {
        for (i, w) in wrong.iter().enumerate() {
            // null leaves an optional field unset; a list is what labels take
            if (i == 0 && field != "memory_key" && field != "content")
                || (field == "labels" && (i == 4 || i == 6))
            {
                continue;
            }
            let mut args = json!({"memory_key": "k", "content": "c"});
            args[field] = w.clone();
            c.call(
                format!("memory.set {field}={w}"),
                "memory.set",
                token,
                args.to_string().as_bytes(),
            );
        }
    }
    for (i, w) in wrong.iter().enumerate() {
        if i != 2 {
            c.call(
                format!("if_version={w}"),
                "memory.update",
                token,
                json!({"memory_key": "k", "content": "c", "if_version": w})
                    .to_string()
                    .as_bytes(),
            );
        }
    }
    // not an object at all
    for body in [
        "[]",
        "1",
        "\"text\"",
        "null",
        "true",
        "[{\"memory_key\": \"k\"}]",
    ] {
        c.call(format!("body {body}"), "memory.set", token, body.as_bytes());
    }
    // unicode edge cases in keys and bodies
    for key in [
        "\u{0}",
        "k\u{0}k",
        "\u{202e}kcah",
        "\u{feff}k",
        "k\u{301}",
        "💥",
        "ｋｅｙ",
        "k\u{2028}",
        "k/\u{0}",
        "k k",
        "k\nk",
        "k\"k",
    ] {
        c.call(
            format!("key {key:?}"),
            "memory.set",
            token,
            json!({"memory_key": key, "content": "c"})
                .to_string()
                .as_bytes(),
        );
    }
    for (name, body) in [
        (
            "lone surrogate",
            br#"{"memory_key": "\ud800", "content": "c"}"#.to_vec(),
        ),
        (
            "invalid utf-8",
            b"{\"memory_key\": \"\xff\xfe\", \"content\": \"c\"}".to_vec(),
        ),
        (
            "overlong utf-8",
            b"{\"memory_key\": \"\xc0\xaf\", \"content\": \"c\"}".to_vec(),
        ),
        (
            "utf-16 body",
            "{\"memory_key\": \"k\"}"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect(),
        ),
        (
            "bom then json",
            b"\xef\xbb\xbf{\"memory_key\": \"k\", \"content\": \"c\"}".to_vec(),
        ),
        ("nul byte body", b"\0".to_vec()),
        (
            "blank content",
            br#"{"memory_key": "k", "content": "   "}"#.to_vec(),
        ),
        (
            "duplicate keys",
            br#"{"memory_key": "k", "memory_key": "\u0000", "content": "c"}"#.to_vec(),
        ),
    ] {
        c.call(name, "memory.set", token, &body);
    }
    // ids of every JSON type (and JSON-RPC envelopes) on /v1: not arguments of the op
    for id in [
        json!(null),
        json!(1),
        json!(-1),
        json!(1.5),
        json!(1e300),
        json!("x"),
        json!(""),
        json!([]),
        json!({}),
        json!(true),
        json!(u64::MAX),
    ] {
        c.call(
            format!("id {id}"),
            "memory.set",
            token,
            json!({"memory_key": "k", "content": "c", "id": id})
                .to_string()
                .as_bytes(),
        );
        c.call(
            format!("json-rpc envelope id {id}"),
            "memory.set",
            token,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "loom_memory_set"}}).to_string().as_bytes(),
        );
    }
    // methods with wrong params, unknown ops, other methods and paths
    c.call(
        "update with nothing to change",
        "memory.update",
        token,
        br#"{"memory_key": "k"}"#,
    );
    c.call("get without a key", "memory.get", token, b"{}");
    c.call(
        "history bad cursor",
        "memory.history",
        token,
        br#"{"memory_key": "k", "cursor": "'; DROP TABLE memories; --"}"#,
    );
    c.call(
        "history limit -1",
        "memory.history",
        token,
        br#"{"memory_key": "k", "limit": -1}"#,
    );
    c.call(
        "list limit huge",
        "memory.list",
        token,
        br#"{"limit": "all"}"#,
    );
    c.call("apply with nothing", "memory.apply", token, b"{}");
    c.call("unknown op", "memory.sett", token, b"{}");
    c.call("op with NUL", "memory.set%00", token, b"{}");
    c.call("op traversal", "..%2f..%2fetc%2fpasswd", token, b"{}");
    c.call(
        "a viewer writes",
        "memory.set",
        viewer,
        br#"{"memory_key": "k", "content": "c"}"#,
    );
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        c.add(
            format!("{method} an op"),
            request(
                method,
                "/v1/memory.set",
                &[format!("authorization: Bearer {token}")],
                b"",
            ),
        );
    }
    c.add(
        "very long path",
        request("POST", &format!("/v1/{}", "a".repeat(20_000)), &[], b"{}"),
    );
    c.add("no such endpoint", request("POST", "/admin", &[], b"{}"));
    // header abuse
    let auth = format!("authorization: Bearer {token}");
    let body = br#"{"memory_key": "k", "content": "c", "bogus": 1}"#;
    for (name, header) in [
        (
            "idempotency key with a space",
            "idempotency-key: a b".to_owned(),
        ),
        (
            "idempotency key of 300 bytes",
            format!("idempotency-key: {}", "k".repeat(300)),
        ),
        ("idempotency key on a read", "idempotency-key: k".to_owned()),
        ("request id with spaces", "x-request-id: a b c".to_owned()),
        (
            "request id huge",
            format!("x-request-id: {}", "r".repeat(4000)),
        ),
        (
            "content-type nonsense",
            "content-type: text/evil; charset=utf-7".to_owned(),
        ),
    ] {
        c.add(
            name,
            request(
                "POST",
                if name.ends_with("read") {
                    "/v1/memory.list"
                } else {
                    "/v1/memory.set"
                },
                &[auth.clone(), header],
                body,
            ),
        );
    }
    let mut bytes_header = format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{auth}\r\nidempotency-key: ").into_bytes();
    bytes_header.extend_from_slice(b"k\xff\xfe\r\ncontent-length: 2\r\n\r\n{}");
    c.add("idempotency key not ascii", bytes_header);
    c.add("header with a bare CR", format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\nx-a: 1\rx-injected: 1\r\ncontent-length: 2\r\n\r\n{{}}").into_bytes());
    c.add("folded header", format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\nx-a: 1\r\n x-injected: 1\r\ncontent-length: 2\r\n\r\n{{}}").into_bytes());
    c.add("space before colon", format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\nx-a : 1\r\ncontent-length: 2\r\n\r\n{{}}").into_bytes());
    c.add("two content lengths", format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\ncontent-length: 2\r\ncontent-length: 40\r\n\r\n{{}}").into_bytes());
    c.add("chunked and length", format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n").into_bytes());
    c.add("bad chunk size", format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n").into_bytes());
    c.add(
        "negative length",
        format!(
            "POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{auth}\r\ncontent-length: -2\r\n\r\n{{}}"
        )
        .into_bytes(),
    );
    c.add("http/0.9", b"GET /v1/memory.get\r\n\r\n".to_vec());
    c.add(
        "not http",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 hello tls\r\n\r\n".to_vec(),
    );
    c.add(
        "bad version",
        b"POST /v1/memory.set HTTP/9.9\r\nhost: x\r\n\r\n".to_vec(),
    );
    c.add("absolute uri elsewhere", format!("POST http://evil.example/v1/memory.list HTTP/1.1\r\nhost: evil.example\r\nconnection: close\r\n{auth}\r\ncontent-length: 11\r\n\r\n{{\"bogus\":1}}").into_bytes());
    let many: String = (0..200)
        .map(|i| format!("x-h{i}: {}\r\n", "v".repeat(500)))
        .collect();
    c.add(
        "oversized headers",
        format!("POST /v1/memory.set HTTP/1.1\r\nhost: x\r\n{many}\r\n").into_bytes(),
    );
    // tokens: in the query string, alg none, forged, malformed
    let cl = claims("default", "eve");
    let payload = b64url(serde_json::to_string(&cl).expect("claims").as_bytes());
    let none = format!("{}.{payload}.", b64url(br#"{"alg":"none","typ":"JWT"}"#));
    let none_upper = format!("{}.{payload}.", b64url(br#"{"alg":"NONE"}"#));
    let forged = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &cl,
        &jsonwebtoken::EncodingKey::from_secret(b"not-the-server-key-but-32-bytes-long!!"),
    )
    .expect("sign");
    let mut parts: Vec<&str> = token.split('.').collect();
    let swapped = format!("{}.{payload}.{}", parts[0], parts[2]);
    parts[2] = "AAAA";
    let stripped = parts.join(".");
    let rs256 = format!(
        "{}.{payload}.{}",
        b64url(br#"{"alg":"RS256","typ":"JWT"}"#),
        b64url(b"sig")
    );
    for (name, bearer) in [
        ("alg none", none),
        ("alg NONE", none_upper),
        ("forged signature", forged),
        ("payload swapped under a real signature", swapped),
        ("signature replaced", stripped),
        ("alg confusion RS256", rs256),
        ("empty bearer", String::new()),
        ("two dots", "..".into()),
        ("garbage", "not-a-jwt".into()),
        ("huge token", "a".repeat(16_000)),
        ("token with spaces", format!("{token} {token}")),
    ] {
        c.add(
            format!("token: {name}"),
            request(
                "POST",
                "/v1/memory.list",
                &[format!("authorization: Bearer {bearer}")],
                b"{}",
            ),
        );
    }
    c.add(
        "token: lowercase scheme twice",
        request(
            "POST",
            "/v1/memory.list",
            &[format!("authorization: bearer bearer {token}")],
            b"{}",
        ),
    );
    c.add(
        "token: basic scheme",
        request(
            "POST",
            "/v1/memory.list",
            &["authorization: Basic YTpi".into()],
            b"{}",
        ),
    );
    c.add(
        "token: two authorization headers",
        request(
            "POST",
            "/v1/memory.list",
            &["authorization: Bearer x".into(), auth.clone()],
            b"{}",
        ),
    );
    for q in ["token", "access_token", "bearer", "authorization"] {
        c.add(
            format!("token in ?{q}="),
            request("POST", &format!("/v1/memory.list?{q}={token}"), &[], b"{}"),
        );
    }
    c.add(
        "token in the body",
        request(
            "POST",
            "/v1/memory.list",
            &[],
            json!({"token": token, "access_token": token})
                .to_string()
                .as_bytes(),
        ),
    );
    // other orgs' namespaces and rows in arguments
    for (name, args) in [
        (
            "org globex",
            json!({"org": "globex", "namespace": "vault", "memory_key": "secret", "content": "pwned"}),
        ),
        (
            "org globex read",
            json!({"org": "globex", "namespace": "vault", "memory_key": "secret"}),
        ),
        (
            "org wildcard",
            json!({"org": "*", "memory_key": "secret", "content": "pwned"}),
        ),
        (
            "org with spaces",
            json!({"org": " globex ", "memory_key": "secret", "content": "pwned"}),
        ),
        (
            "namespace of globex",
            json!({"namespace": "vault", "memory_key": "secret", "content": "pwned"}),
        ),
        (
            "namespace traversal",
            json!({"namespace": "../globex/vault", "memory_key": "secret", "content": "pwned"}),
        ),
        (
            "namespace wildcard",
            json!({"namespace": "*", "memory_key": "secret", "content": "pwned"}),
        ),
        (
            "namespace sql",
            json!({"namespace": "x' OR '1'='1", "memory_key": "secret", "content": "pwned"}),
        ),
    ] {
        let op = if args.get("content").is_some() {
            "memory.set"
        } else {
            "memory.get"
        };
        c.call(
            format!("other org: {name}"),
            op,
            token,
            args.to_string().as_bytes(),
        );
    }
    c.call(
        "globex token, foreign org",
        "memory.set",
        globex_secret,
        json!({"org": "default", "memory_key": "control", "content": "pwned"})
            .to_string()
            .as_bytes(),
    );
    c
}

async fn read(t: &TestServer, token: &str, args: Value) -> (Value, Value) {
    let a = t.post("memory.get", Some(token), args).await;
    assert_eq!(a.status, 200, "{}: {}", t.name(), a.text);
    (a.body["content"].clone(), a.body["version"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corpus_of_hostile_requests_gets_4xx_and_changes_nothing() {
    for t in servers(|c| {
        c.body_read_timeout = Duration::from_secs(2);
        c.header_read_timeout = Duration::from_secs(2);
    })
    .await
    {
        let n = t.name();
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ('globex', 0)")
            .execute(t.db.store.writer())
            .await
            .expect("org");
        sqlx::query(
            "INSERT INTO namespaces (org, namespace, created_ms) VALUES ('globex', 'vault', 0)",
        )
        .execute(t.db.store.writer())
        .await
        .expect("namespace");
        let token = t.token("default", "mallory", Role::Writer, &["default"]);
        let viewer = t.token("default", "val", Role::Viewer, &["default"]);
        let globex = t.token("globex", "gina", Role::Writer, &["vault"]);
        let control = |tok: &str| (tok.to_owned(), json!({"memory_key": "control"}));
        let before_rss = rss_kib();
        for (tok, args) in [
            control(&token),
            (globex.clone(), json!({"memory_key": "secret"})),
        ] {
            let mut w = args.clone();
            w["content"] = json!("the control's content");
            assert_eq!(t.post("memory.set", Some(&tok), w).await.status, 200, "{n}");
        }
        let before = (
            read(&t, &token, json!({"memory_key": "control"})).await,
            read(&t, &globex, json!({"memory_key": "secret"})).await,
        );
        let versions_before = t.count("SELECT COUNT(*) FROM memory_versions").await;

        let corpus = corpus(&token, &viewer, &globex);
        assert!(
            corpus.cases.len() >= 200,
            "only {} cases",
            corpus.cases.len()
        );
        let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
        let mut bad = Vec::new();
        for (name, bytes) in &corpus.cases {
            let (status, text) = raw(t.server.addr, bytes).await;
            *by_status.entry(status).or_default() += 1;
            if !(400..500).contains(&status) {
                bad.push(format!("{name}: {status} {}", &text[..text.len().min(300)]));
            }
            assert!(
                !text.to_ascii_lowercase().contains("x-injected"),
                "{n} {name}: {text}"
            );
            // the server is still up after each
            assert_eq!(
                t.send(t.client.get(format!("{}/healthz", t.url())))
                    .await
                    .status,
                200,
                "{n}: down after {name}"
            );
        }
        assert!(bad.is_empty(), "{n}: not a 4xx: {bad:#?}");
        let after = (
            read(&t, &token, json!({"memory_key": "control"})).await,
            read(&t, &globex, json!({"memory_key": "secret"})).await,
        );
        assert_eq!(before, after, "{n}: the control rows changed");
        assert_eq!(
            t.count("SELECT COUNT(*) FROM memory_versions").await,
            versions_before,
            "{n}: a hostile request wrote"
        );
        let grown = rss_kib().saturating_sub(before_rss);
        assert!(
            grown < 256 * 1024,
            "{n}: resident memory grew by {grown} KiB"
        );
        eprintln!(
            "{n}: {} hostile requests, statuses {by_status:?}, 0 panics, RSS grew {grown} KiB",
            corpus.cases.len()
        );
        t.server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_do_not_stop_other_callers() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Writer, &[]);
        // 200 connections that never send a byte
        let mut idle = Vec::new();
        for _ in 0..200 {
            idle.push(TcpStream::connect(t.server.addr).await.expect("connect"));
        }
        // 8 clients sending a request one byte a second
        let mut slow = Vec::new();
        for _ in 0..8 {
            let addr = t.server.addr;
            let bytes = request(
                "POST",
                "/v1/memory.list",
                &[format!("authorization: Bearer {token}")],
                b"{}",
            );
            slow.push(tokio::spawn(async move {
                let mut s = TcpStream::connect(addr).await.expect("connect");
                for b in bytes {
                    if s.write_all(&[b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }));
        }
        // meanwhile another caller is served, call after call
        for i in 0..20 {
            let a = t
                .post(
                    "memory.set",
                    Some(&token),
                    json!({"memory_key": format!("busy-{i}"), "content": "served"}),
                )
                .await;
            assert_eq!(a.status, 200, "{n}: {}", a.text);
            let a = t
                .post(
                    "memory.get",
                    Some(&token),
                    json!({"memory_key": format!("busy-{i}")}),
                )
                .await;
            assert_eq!(a.body["content"], "served", "{n}: {}", a.text);
        }
        for s in slow {
            s.abort();
        }
        drop(idle);
        t.server.shutdown().await;
    }
}

/// A NUL anywhere in a call's arguments (PostgreSQL's text cannot hold one)
/// is the caller's mistake on both backends: `INVALID_ARGUMENTS` naming the
/// field, over `/v1` and MCP alike, with nothing written, and every call
/// still gets its ledger row (a NUL in a named namespace or agent would
/// have failed the ledger's batch on PostgreSQL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_any_argument_is_invalid_arguments_and_writes_nothing() {
    for t in servers(loom_tests::generous).await {
        let n = t.name();
        let token = t.token("default", "nul", Role::Writer, &["default"]);
        let mcp = loom_tests::McpClient::new(&t, Some(&token), "");
        let cases = [
            ("namespace", json!({"namespace": "\u{0}"})),
            ("namespace", json!({"namespace": "team\u{0}"})),
            ("org", json!({"org": "default\u{0}"})),
            ("agent", json!({"agent": "\u{0}"})),
            ("content", json!({"content": "a\u{0}b"})),
            ("labels.1", json!({"labels": ["ok", "\u{0}"]})),
        ];
        for (field, extra) in &cases {
            let mut args = json!({"memory_key": "k", "content": "c"});
            for (k, v) in extra.as_object().expect("an object") {
                args[k] = v.clone();
            }
            let a = t.post("memory.set", Some(&token), args.clone()).await;
            assert_eq!(
                (a.status, a.code()),
                (422, "INVALID_ARGUMENTS"),
                "{n} {field}: {}",
                a.text
            );
            assert!(a.text.contains(field), "{n} {field}: {}", a.text);
            let r = mcp.call("loom_memory_set", args).await;
            assert_eq!(
                r["structuredContent"]["code"], "INVALID_ARGUMENTS",
                "{n} {field}: {r}"
            );
        }
        let r = mcp
            .call("loom_search", json!({"query": "deploy\u{0}window"}))
            .await;
        assert_eq!(
            r["structuredContent"]["code"], "INVALID_ARGUMENTS",
            "{n}: {r}"
        );
        assert_eq!(t.count("SELECT COUNT(*) FROM memories").await, 0, "{n}");
        t.flush_ledger().await;
        assert_eq!(
            t.count("SELECT COUNT(*) FROM agent_events WHERE subject = 'nul'")
                .await,
            i64::try_from(cases.len() * 2 + 1).expect("small"),
            "{n}: every call is ledgered"
        );
        t.server.shutdown().await;
    }
}
