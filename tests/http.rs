//! `POST /v1/<op>` end to end: a real server on an ephemeral port, over a
//! real socket, on SQLite and (when `LOOM_TEST_DATABASE_URL` is set)
//! PostgreSQL. Every gate of the pipeline, with its refusal.

use loom_core::Role;
use loom_server::tokens::{ACCESS_TOKEN_USE, Claims, MintSpec};
use loom_tests::{TestServer, servers};
use serde_json::{Value, json};

const CHALLENGE: &str = "Bearer realm=\"loom\"";
const CHALLENGE_INVALID: &str = "Bearer realm=\"loom\", error=\"invalid_token\"";

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

async fn signing_secret(t: &TestServer) -> Vec<u8> {
    let (hex_key,): (String,) = sqlx::query_as("SELECT value FROM settings WHERE name = $1")
        .bind(loom_ops::store::SIGNING_KEY_SETTING)
        .fetch_one(t.db.store.reader())
        .await
        .unwrap();
    hex::decode(hex_key).unwrap()
}

fn claims(org: &str, sub: &str, exp_offset: i64) -> Claims {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Claims {
        sub: sub.into(),
        org: org.into(),
        role: Role::Admin,
        // a jti of the form Loom issues: 32 lowercase hex digits
        jti: hex::encode(
            &<sha2::Sha256 as sha2::Digest>::digest(format!("{sub}/{exp_offset}"))[..16],
        ),
        exp: now.saturating_add_signed(exp_offset),
        iat: now,
        iss: "loom".into(),
        aud: "loom".into(),
        token_use: ACCESS_TOKEN_USE.into(),
        namespaces: Vec::new(),
        platform_admin: false,
        consumer: None,
    }
}

fn sign(secret: &[u8], claims: &impl serde::Serialize) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap()
}

fn assert_envelope(a: &loom_tests::Answer, status: u16, code: &str, name: &str) {
    assert_eq!(a.status, status, "{name}: {}", a.text);
    assert_eq!(a.code(), code, "{name}: {}", a.text);
    let e = &a.body["error"];
    assert_eq!(e["status"], status, "{name}");
    assert!(
        e["message"].is_string() && e["category"].is_string() && e["retryable"].is_boolean(),
        "{name}: {e}"
    );
    // A valid token refused for what its caller may do says so in its
    // challenge (RFC 6750 §3.1); no other refusal but the 401s and the 400
    // of credentials sent amiss carries one.
    let challenge = a.header("www-authenticate");
    match code {
        "AUTH_INSUFFICIENT" | "NAMESPACE_NOT_ACCESSIBLE" | "ORG_MISMATCH" => assert_eq!(
            challenge,
            Some("Bearer realm=\"loom\", error=\"insufficient_scope\""),
            "{name}"
        ),
        "UNAUTHENTICATED" | "BAD_REQUEST" => {}
        _ => assert_eq!(challenge, None, "{name} {code}"),
    }
}

#[tokio::test]
async fn health_readiness_and_request_ids() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let a = t.send(t.client.get(format!("{}/healthz", t.url()))).await;
        assert_eq!(a.status, 200, "{n}");
        assert!(
            a.header("x-request-id").is_some_and(|id| !id.is_empty()),
            "{n}"
        );
        let a = t.send(t.client.get(format!("{}/readyz", t.url()))).await;
        assert_eq!(
            (a.status, a.body["status"].as_str()),
            (200, Some("ready")),
            "{n}"
        );
        // a sane incoming id is kept, an insane one replaced
        let a = t
            .send(
                t.request("ops.capabilities", None)
                    .header("x-request-id", "abc-123"),
            )
            .await;
        assert_eq!(a.header("x-request-id"), Some("abc-123"), "{n}");
        let a = t
            .send(
                t.request("ops.capabilities", None)
                    .header("x-request-id", "bad id with spaces"),
            )
            .await;
        assert!(
            a.header("x-request-id")
                .is_some_and(|id| id != "bad id with spaces"),
            "{n}"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_valid_token_calls_an_op_and_gets_its_full_output() {
    for t in servers(|_| {}).await {
        let token = t.token("default", "ana", Role::Viewer, &[]);
        let a = t.post("ops.capabilities", Some(&token), json!({})).await;
        assert_eq!(a.status, 200, "{}: {}", t.name(), a.text);
        let ops: Vec<&str> = a.body["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["op"].as_str().unwrap())
            .collect();
        assert!(
            ops.contains(&"grants.set") && ops.contains(&"ops.capabilities"),
            "{ops:?}"
        );
        let reported = |op: &str, field: &str| {
            a.body["ops"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["op"] == op)
                .map(|o| o[field].clone())
        };
        // each op names the MCP tool that runs it: search.query's is loom_search
        assert_eq!(reported("search.query", "tool"), Some(json!("loom_search")));
        // the listings that carry each op, the derived ones included: a
        // change on no curated roster is on `all`, not `readonly`
        assert_eq!(reported("grants.set", "toolsets"), Some(json!(["all"])));
        assert_eq!(
            reported("run.list", "toolsets"),
            Some(json!(["readonly", "all"]))
        );
        // and the arguments a call names, as the listing names them
        let set = a.body["ops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["op"] == "memory.set")
            .unwrap();
        assert_eq!(set["required"], json!(["memory_key", "content"]), "{set}");
        assert!(
            set["optional"]
                .as_array()
                .unwrap()
                .contains(&json!("expires_at")),
            "{set}"
        );
        assert_eq!(
            reported("memory.get", "tool"),
            Some(json!("loom_memory_get"))
        );
        // an empty body is an empty argument object
        let a = t.send(t.request("ops.capabilities", Some(&token))).await;
        assert_eq!(a.status, 200, "{}: {}", t.name(), a.text);
        // the fields the server fills are accepted by name on every op,
        // declared by it or not
        let a = t
            .post(
                "ops.capabilities",
                Some(&token),
                json!({"consumer": "cli", "user_id": "u1", "session_id": "s1", "org": "default"}),
            )
            .await;
        assert_eq!(a.status, 200, "{}: {}", t.name(), a.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn missing_and_invalid_tokens_are_401_with_the_right_challenge() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let secret = signing_secret(&t).await;

        let a = t.post("ops.capabilities", None, json!({})).await;
        assert_envelope(&a, 401, "UNAUTHENTICATED", n);
        assert_eq!(a.header("www-authenticate"), Some(CHALLENGE), "{n}");

        // ?token= is ignored: the request is unauthenticated
        let good = t.token("default", "ana", Role::Viewer, &[]);
        let a = t
            .send(
                t.client
                    .post(format!("{}/v1/ops.capabilities?token={good}", t.url()))
                    .json(&json!({})),
            )
            .await;
        assert_envelope(&a, 401, "UNAUTHENTICATED", n);
        assert_eq!(a.header("www-authenticate"), Some(CHALLENGE), "{n}");
        assert!(
            !a.text.contains(&good),
            "{n}: the token leaked into the answer"
        );

        // another scheme counts as no bearer
        let a = t
            .send(
                t.request("ops.capabilities", None)
                    .header("authorization", "Basic YWxhZGRpbjpvcGVu"),
            )
            .await;
        assert_eq!(
            (a.status, a.header("www-authenticate")),
            (401, Some(CHALLENGE)),
            "{n}"
        );

        // two Authorization headers are a malformed request whatever they
        // hold, the valid one first or second (RFC 6750 §3.1)
        for pair in [[&good, "not.a.jwt"], ["not.a.jwt", &good], [&good, &good]] {
            let mut request = t.request("ops.capabilities", None);
            for token in pair {
                request = request.header("authorization", format!("Bearer {token}"));
            }
            let a = t.send(request).await;
            assert_envelope(&a, 400, "BAD_REQUEST", n);
            assert_eq!(
                a.header("www-authenticate"),
                Some("Bearer realm=\"loom\", error=\"invalid_request\""),
                "{n}"
            );
        }

        let mut bad: Vec<(&str, String)> = Vec::new();
        bad.push(("garbage", "not.a.jwt".into()));
        // alg none, unsigned
        let header = b64url(br#"{"alg":"none","typ":"JWT"}"#);
        let payload = b64url(
            serde_json::to_string(&claims("default", "eve", 3600))
                .unwrap()
                .as_bytes(),
        );
        bad.push(("alg none", format!("{header}.{payload}.")));
        // forged: signed with another key
        bad.push((
            "forged",
            sign(
                b"another-secret-that-is-32-bytes-long!!",
                &claims("default", "eve", 3600),
            ),
        ));
        // expired (beyond the leeway)
        bad.push(("expired", sign(&secret, &claims("default", "eve", -3600))));
        // wrong issuer / audience
        bad.push((
            "issuer",
            sign(
                &secret,
                &Claims {
                    iss: "someone-else".into(),
                    ..claims("default", "eve", 3600)
                },
            ),
        ));
        bad.push((
            "audience",
            sign(
                &secret,
                &Claims {
                    aud: "other".into(),
                    ..claims("default", "eve", 3600)
                },
            ),
        ));
        // not an access token
        bad.push((
            "token_use",
            sign(
                &secret,
                &Claims {
                    token_use: "refresh".into(),
                    ..claims("default", "eve", 3600)
                },
            ),
        ));
        // a key id this server does not have; another token type
        let mut with_kid = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        with_kid.kid = Some("other-key".into());
        let key = jsonwebtoken::EncodingKey::from_secret(&secret);
        bad.push((
            "kid",
            jsonwebtoken::encode(&with_kid, &claims("default", "eve", 3600), &key).unwrap(),
        ));
        let mut at_jwt = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        at_jwt.typ = Some("refresh+jwt".into());
        bad.push((
            "typ",
            jsonwebtoken::encode(&at_jwt, &claims("default", "eve", 3600), &key).unwrap(),
        ));
        // extensions this server must understand and does not
        let mut crit = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        crit.crit = Some(vec!["exp".into()]);
        bad.push((
            "crit",
            jsonwebtoken::encode(&crit, &claims("default", "eve", 3600), &key).unwrap(),
        ));
        // ... also a null one, which the JWT crate reads as none
        let signed = jsonwebtoken::encode(&crit, &claims("default", "eve", 3600), &key).unwrap();
        let payload = signed.split('.').nth(1).unwrap();
        // (and a null kid, likewise)
        for (why, header) in [
            (
                "null crit",
                br#"{"alg":"HS256","typ":"JWT","crit":null}"#.as_slice(),
            ),
            (
                "null kid",
                br#"{"alg":"HS256","typ":"JWT","kid":null}"#.as_slice(),
            ),
        ] {
            let header = b64url(header);
            let signing_input = format!("{header}.{payload}");
            let mac = jsonwebtoken::crypto::sign(
                signing_input.as_bytes(),
                &key,
                jsonwebtoken::Algorithm::HS256,
            )
            .unwrap();
            bad.push((why, format!("{header}.{payload}.{mac}")));
        }
        // missing jti; a jti `loom token revoke` could not name
        let mut no_jti = serde_json::to_value(claims("default", "eve", 3600)).unwrap();
        no_jti.as_object_mut().unwrap().remove("jti");
        bad.push(("no jti", sign(&secret, &no_jti)));
        for (why, jti) in [
            ("short jti", "xyz"),
            ("upper-case jti", "0123456789ABCDEF0123456789ABCDEF"),
        ] {
            let odd = Claims {
                jti: jti.into(),
                ..claims("default", "eve", 3600)
            };
            bad.push((why, sign(&secret, &odd)));
        }
        // the control: the same claims, properly signed, pass
        let control = sign(&secret, &claims("default", "eve", 3600));
        assert_eq!(
            t.post("ops.capabilities", Some(&control), json!({}))
                .await
                .status,
            200,
            "{n}"
        );

        for (why, token) in &bad {
            let a = t.post("ops.capabilities", Some(token), json!({})).await;
            assert_envelope(&a, 401, "UNAUTHENTICATED", &format!("{n} {why}"));
            assert_eq!(
                a.header("www-authenticate"),
                Some(CHALLENGE_INVALID),
                "{n} {why}"
            );
        }
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_revoked_token_is_refused_once_the_list_reloads() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let spec = MintSpec {
            org: "default".into(),
            subject: "ana".into(),
            role: Role::Viewer,
            namespaces: vec![],
            ttl_secs: 600,
            platform_admin: false,
            consumer: None,
        };
        let (token, claims) = t.server.app.keys.mint(spec).unwrap();
        assert_eq!(
            t.post("ops.capabilities", Some(&token), json!({}))
                .await
                .status,
            200,
            "{n}"
        );
        assert!(t.db.store.revoke_token(&claims.jti).await.unwrap());
        t.server
            .app
            .revocations
            .refresh(&t.server.app.store)
            .await
            .unwrap();
        let a = t.post("ops.capabilities", Some(&token), json!({})).await;
        assert_envelope(&a, 401, "UNAUTHENTICATED", n);
        assert_eq!(a.header("www-authenticate"), Some(CHALLENGE_INVALID), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn before_the_revocation_list_loads_a_token_is_503_with_retry_after() {
    for t in servers(|c| c.load_revocations = false).await {
        let n = t.name();
        let a = t.send(t.client.get(format!("{}/readyz", t.url()))).await;
        assert_envelope(&a, 503, "NOT_READY", n);
        let token = t.token("default", "ana", Role::Viewer, &[]);
        let a = t.post("ops.capabilities", Some(&token), json!({})).await;
        assert_envelope(&a, 503, "NOT_READY", n);
        assert_eq!(a.header("retry-after"), Some("1"), "{n}");
        assert!(a.header("www-authenticate").is_none(), "{n}");
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn unknown_ops_wrong_methods_big_and_malformed_bodies() {
    for t in servers(|c| c.max_body_bytes = 1024).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Viewer, &[]);

        let a = t.post("ops.capabilitie", Some(&token), json!({})).await;
        assert_envelope(&a, 404, "UNKNOWN_OP", n);
        assert_eq!(
            a.body["error"]["suggestions"][0], "ops.capabilities",
            "{n}: {}",
            a.text
        );

        // a name that is not UTF-8 names no op: the envelope, not the
        // router's plain text
        let a = t
            .send(
                t.client
                    .post(format!("{}/v1/%ff%fe", t.url()))
                    .bearer_auth(&token)
                    .json(&json!({})),
            )
            .await;
        assert_envelope(&a, 404, "UNKNOWN_OP", n);

        let a = t
            .send(
                t.client
                    .get(format!("{}/v1/ops.capabilities", t.url()))
                    .bearer_auth(&token),
            )
            .await;
        assert_envelope(&a, 405, "METHOD_NOT_ALLOWED", n);
        assert_eq!(a.header("allow"), Some("POST"), "{n}");

        let big = json!({ "pad": "x".repeat(2048) });
        let a = t.post("ops.capabilities", Some(&token), big).await;
        assert_envelope(&a, 413, "PAYLOAD_TOO_LARGE", n);

        // a key given twice is refused, and nothing is written: which one
        // Loom read would be a guess (a gateway before it may read the other)
        let writer = t.token("default", "wes", Role::Writer, &[]);
        let a = t
            .send(
                t.request("memory.set", Some(&writer))
                    .header("content-type", "application/json")
                    .body(r#"{"memory_key": "first", "memory_key": "second", "content": "x"}"#),
            )
            .await;
        assert_envelope(&a, 400, "BAD_REQUEST", n);
        assert!(a.text.contains("given twice"), "{n}: {}", a.text);
        assert_eq!(
            t.count("SELECT COUNT(*) FROM memories WHERE memory_key IN ('first', 'second')")
                .await,
            0,
            "{n}"
        );

        // a compressed body is not decoded: 415, not "not valid JSON";
        // identity is no coding
        for (coding, status) in [("gzip", 415), ("br, identity", 415), ("identity", 200)] {
            let a = t
                .send(
                    t.request("ops.capabilities", Some(&token))
                        .header("content-encoding", coding)
                        .body("{}"),
                )
                .await;
            assert_eq!(a.status, status, "{n} {coding}: {}", a.text);
            if status == 415 {
                assert_envelope(&a, 415, "UNSUPPORTED_MEDIA_TYPE", n);
            }
        }

        let a = t
            .send(
                t.request("ops.capabilities", Some(&token))
                    .header("content-type", "application/json")
                    .body("{\n  \"a\": 1,\n  oops\n}"),
            )
            .await;
        assert_envelope(&a, 400, "BAD_REQUEST", n);
        assert_eq!(
            (
                a.body["error"]["line"].as_u64(),
                a.body["error"]["column"].as_u64()
            ),
            (Some(3), Some(3)),
            "{n}: {}",
            a.text
        );
        assert!(
            a.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("line 3, column 3"),
            "{n}: {}",
            a.text
        );

        // a body that is JSON but not one object is the framing's fault
        // (400), not an argument's (422); nothing is written
        for body in ["[1]", "null", "\"x\"", "5", "true"] {
            let a = t
                .send(
                    t.request("memory.set", Some(&writer))
                        .header("content-type", "application/json")
                        .body(body),
                )
                .await;
            assert_envelope(&a, 400, "BAD_REQUEST", n);
            assert!(a.text.contains("one JSON object"), "{n} {body}: {}", a.text);
        }
        assert_eq!(t.count("SELECT COUNT(*) FROM memories").await, 0, "{n}");

        // arguments the op does not take: 422 with the op's arguments
        let a = t
            .post("ops.capabilities", Some(&token), json!({"verbose": true}))
            .await;
        assert_envelope(&a, 422, "INVALID_ARGUMENTS", n);
        // an op's own check answers in the same shape as the schema's
        let writer = t.token("default", "wes", Role::Writer, &[]);
        for args in [
            json!({"memory_key": "a b", "content": "x"}),
            json!({"memory_key": "ok", "content": "x", "expires_at": "tomorrow"}),
        ] {
            let a = t.post("memory.set", Some(&writer), args.clone()).await;
            assert_envelope(&a, 422, "INVALID_ARGUMENTS", n);
            let e = &a.body["error"];
            for part in [
                "op", "errors", "required", "optional", "unknown", "example", "field",
            ] {
                assert!(e.get(part).is_some(), "{n} {args}: {part} in {e}");
            }
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("memory.set: invalid arguments.\n"),
                "{n}: {e}"
            );
        }

        // unknown paths are 404 envelopes too
        let a = t.send(t.client.get(format!("{}/nowhere", t.url()))).await;
        assert_eq!(a.status, 404, "{n}");
        t.server.shutdown().await;
    }
}

/// Creates namespace `vault` in org `acme`.
async fn vault(t: &TestServer) {
    t.create_namespace("acme", "vault").await;
}

/// Authorization keeps what it read of a namespace and a caller's grant
/// (`LOOM_ACCESS_CACHE_MS`); a grant changed through the server applies to
/// the very next call all the same, both ways.
#[tokio::test]
async fn a_changed_grant_applies_to_the_next_call_though_access_is_kept() {
    for t in servers(|_| {}).await {
        let n = t.name();
        vault(&t).await;
        let root = t.token("acme", "root", Role::Admin, &[]);
        let ana = t.token("acme", "ana", Role::Viewer, &["team"]);
        let list = json!({"namespace": "vault"});
        // Read (and kept): vault exists, ana holds no grant there.
        for _ in 0..2 {
            let a = t.post("grants.list", Some(&ana), list.clone()).await;
            assert_envelope(&a, 403, "NAMESPACE_NOT_ACCESSIBLE", n);
        }
        let grant = |role: &str| json!({"namespace": "vault", "subject": "ana", "role": role});
        let a = t.post("grants.set", Some(&root), grant("viewer")).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        let a = t.post("grants.list", Some(&ana), list.clone()).await;
        assert_eq!(
            a.status, 200,
            "{n}: the new grant applies at once: {}",
            a.text
        );
        let a = t.post("grants.set", Some(&root), grant("none")).await;
        assert_eq!(a.body["previous_role"], "viewer", "{n}: {}", a.text);
        let a = t.post("grants.list", Some(&ana), list.clone()).await;
        assert_envelope(&a, 403, "NAMESPACE_NOT_ACCESSIBLE", n);
        t.server.shutdown().await;
    }
}

/// With `LOOM_ACCESS_CACHE_MS=0` nothing is kept: a grant written straight
/// into the database (by another replica, say) applies to the next call.
#[tokio::test]
async fn without_the_access_cache_a_grant_written_elsewhere_applies_at_once() {
    for t in servers(|c| c.access_cache = std::time::Duration::ZERO).await {
        let n = t.name();
        vault(&t).await;
        let ana = t.token("acme", "ana", Role::Viewer, &["team"]);
        let list = json!({"namespace": "vault"});
        let a = t.post("grants.list", Some(&ana), list.clone()).await;
        assert_envelope(&a, 403, "NAMESPACE_NOT_ACCESSIBLE", n);
        sqlx::query(
            "INSERT INTO grants (org, namespace, subject, role, granted_by, created_ms) \
             VALUES ('acme', 'vault', 'ana', 'viewer', 'elsewhere', 1)",
        )
        .execute(t.db.store.writer())
        .await
        .expect("grant");
        let a = t.post("grants.list", Some(&ana), list).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn roles_namespaces_and_grants() {
    for t in servers(|_| {}).await {
        let n = t.name();
        t.create_namespace("acme", "team").await;
        let admin = t.token("acme", "boss", Role::Admin, &["team"]);
        let viewer = t.token("acme", "ana", Role::Viewer, &["team"]);

        // a viewer may list grants but not set them
        let a = t.post("grants.list", Some(&viewer), json!({})).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(
            (a.body["org"].as_str(), a.body["namespace"].as_str()),
            (Some("acme"), Some("team")),
            "{n}"
        );
        let a = t
            .post(
                "grants.set",
                Some(&viewer),
                json!({"subject": "bo", "role": "writer"}),
            )
            .await;
        assert_envelope(&a, 403, "AUTH_INSUFFICIENT", n);
        assert_eq!(a.body["error"]["required_role"], "admin", "{n}");

        // a namespace the org does not have is missing, whatever the token
        // names (which namespaces an org has is no secret in it)
        let a = t
            .post("grants.list", Some(&viewer), json!({"namespace": "secret"}))
            .await;
        assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);

        // `secret` does not exist yet: the team admin cannot grant there either
        let a = t
            .post(
                "grants.set",
                Some(&admin),
                json!({"namespace": "secret", "subject": "ana", "role": "viewer"}),
            )
            .await;
        assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        assert_eq!(t.count("SELECT COUNT(*) FROM grants").await, 0, "{n}");

        // an org-scoped admin token (no namespace claim) covers every
        // namespace of its org, once it exists: no grant is planted ahead
        let org_admin = t.token("acme", "root", Role::Admin, &[]);
        let grant = json!({"namespace": "secret", "subject": "ana", "role": "viewer"});
        let a = t.post("grants.set", Some(&org_admin), grant.clone()).await;
        assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        assert_eq!(t.count("SELECT COUNT(*) FROM grants").await, 0, "{n}");
        // …and has no grants to list either.
        let a = t
            .post(
                "grants.list",
                Some(&org_admin),
                json!({"namespace": "secret"}),
            )
            .await;
        assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        let a = t
            .post(
                "grants.set",
                Some(&org_admin),
                json!({"namespace": "team", "subject": "a\u{1}b", "role": "viewer"}),
            )
            .await;
        assert_envelope(&a, 422, "INVALID_ARGUMENTS", n);
        assert_eq!(a.body["error"]["field"], "subject", "{n}");
        t.create_namespace("acme", "secret").await;
        let a = t.post("grants.set", Some(&org_admin), grant).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(a.body["role"], "viewer", "{n}");
        assert_eq!(a.body["previous_role"], Value::Null, "{n}");

        // now ana reads `secret` through the grant, but still may not administer it
        let a = t
            .post("grants.list", Some(&viewer), json!({"namespace": "secret"}))
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(a.body["grants"][0]["subject"], "ana", "{n}");
        assert_eq!(a.body["grants"][0]["granted_by"], "root", "{n}");
        let a = t
            .post(
                "grants.set",
                Some(&viewer),
                json!({"namespace": "secret", "subject": "ana", "role": "admin"}),
            )
            .await;
        assert_envelope(&a, 403, "AUTH_INSUFFICIENT", n);

        // removing the grant closes the namespace again
        let a = t
            .post(
                "grants.set",
                Some(&org_admin),
                json!({"namespace": "secret", "subject": "ana", "role": "none"}),
            )
            .await;
        assert_eq!(
            (a.status, &a.body["role"]),
            (200, &Value::Null),
            "{n}: {}",
            a.text
        );
        let a = t
            .post("grants.list", Some(&viewer), json!({"namespace": "secret"}))
            .await;
        assert_envelope(&a, 403, "NAMESPACE_NOT_ACCESSIBLE", n);

        // a state-changing op given a near-miss key is refused before anything is written
        let a = t
            .post(
                "grants.set",
                Some(&admin),
                json!({"subjet": "bo", "role": "writer"}),
            )
            .await;
        assert_envelope(&a, 422, "UNKNOWN_ARGUMENT", n);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_token_from_one_org_is_refused_in_another() {
    for t in servers(|c| c.platform_admins = vec!["operator".into()]).await {
        let n = t.name();
        t.create_namespace("globex", "default").await;
        let acme = t.token("acme", "ana", Role::Admin, &[]);
        let a = t
            .post("grants.list", Some(&acme), json!({"org": "globex"}))
            .await;
        assert_envelope(&a, 403, "ORG_MISMATCH", n);
        assert_eq!(a.body["error"]["org"], "globex", "{n}");

        // an org-wide token and a platform admin may act in any org
        let wide = t.token("*", "svc", Role::Viewer, &[]);
        let a = t
            .post("grants.list", Some(&wide), json!({"org": "globex"}))
            .await;
        assert_eq!(
            (a.status, a.body["org"].as_str()),
            (200, Some("globex")),
            "{n}: {}",
            a.text
        );
        let operator = t.token("acme", "operator", Role::Viewer, &[]);
        let a = t
            .post("grants.list", Some(&operator), json!({"org": "globex"}))
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);

        // …but a restricted namespace refuses every other org, platform admins included
        sqlx::query("INSERT INTO namespaces (org, namespace, restricted, created_ms) VALUES ('globex', 'vault', TRUE, 0)")
            .execute(t.db.store.writer())
            .await
            .unwrap();
        for (who, token) in [("wide", &wide), ("operator", &operator)] {
            let a = t
                .post(
                    "grants.list",
                    Some(token),
                    json!({"org": "globex", "namespace": "vault"}),
                )
                .await;
            assert_envelope(&a, 403, "ORG_MISMATCH", &format!("{n} {who}"));
            assert_eq!(a.body["error"]["restricted"], true, "{n}");
        }
        // its own org's tokens are let in
        let own = t.token("globex", "gina", Role::Viewer, &[]);
        assert_eq!(
            t.post("grants.list", Some(&own), json!({"namespace": "vault"}))
                .await
                .status,
            200,
            "{n}"
        );
        t.server.shutdown().await;
    }
}

/// With authentication off nothing but a request's headers tells a web
/// page's post from a client's: `/v1` refuses a foreign `Host` or `Origin`
/// as `/mcp` does (a `text/plain` POST from any page needs no preflight).
/// With a bearer the check is not needed and not made.
#[tokio::test]
async fn without_authentication_v1_refuses_foreign_pages() {
    for auth in [false, true] {
        for t in servers(|c| c.auth_required = auth).await {
            let n = format!("{} auth={auth}", t.name());
            let token = auth.then(|| t.token("default", "root", Role::Admin, &[]));
            let set = |key: &str| {
                t.request("memory.set", token.as_deref())
                    .header("content-type", "text/plain")
                    .body(json!({"memory_key": key, "content": "planted"}).to_string())
            };
            let foreign_origin = t
                .send(set("from_page").header("origin", "http://evil.example.com"))
                .await;
            let foreign_host = t
                .send(set("rebound").header("host", "evil.example.com"))
                .await;
            let local_page = t
                .send(set("local").header("origin", "http://localhost:5173"))
                .await;
            assert_eq!(local_page.status, 200, "{n}: {}", local_page.text);
            if auth {
                assert_eq!(foreign_origin.status, 200, "{n}: {}", foreign_origin.text);
                assert_eq!(foreign_host.status, 200, "{n}: {}", foreign_host.text);
            } else {
                assert_envelope(&foreign_origin, 403, "FOREIGN_ORIGIN", &n);
                assert_envelope(&foreign_host, 403, "FOREIGN_ORIGIN", &n);
                assert_eq!(
                    t.count(
                        "SELECT COUNT(*) FROM memories WHERE memory_key IN ('from_page', 'rebound')"
                    )
                    .await,
                    0,
                    "{n}"
                );
            }
            t.server.shutdown().await;
        }
    }
}

/// A search's fan-out and the namespace listings show no more than the
/// caller could read by naming each namespace: no restricted namespace of
/// another org, and what a grant or a `*` in the token gives.
#[tokio::test]
async fn search_and_listings_show_only_what_the_caller_may_read() {
    for t in servers(|c| c.platform_admins = vec!["operator".into()]).await {
        let n = t.name();
        for ns in ["default", "team", "far"] {
            t.create_namespace("globex", ns).await;
        }
        sqlx::query("INSERT INTO namespaces (org, namespace, restricted, created_ms) VALUES ('globex', 'vault', TRUE, 0)")
            .execute(t.db.store.writer())
            .await
            .unwrap();
        let own = t.token("globex", "gina", Role::Admin, &[]);
        for ns in ["default", "team", "far", "vault"] {
            let a = t
                .post(
                    "memory.set",
                    Some(&own),
                    json!({"namespace": ns, "memory_key": format!("k_{ns}"), "content": "banana bread"}),
                )
                .await;
            assert_eq!(a.status, 200, "{n}: {}", a.text);
        }
        let found = |a: &loom_tests::Answer| -> Vec<String> {
            let mut ns: Vec<String> = a.body["memory"]
                .as_array()
                .unwrap_or_else(|| panic!("{n}: {}", a.text))
                .iter()
                .map(|h| h["namespace"].as_str().unwrap().to_owned())
                .collect();
            ns.sort();
            ns
        };
        let listed = |a: &loom_tests::Answer| -> Vec<String> {
            a.body["namespaces"]
                .as_array()
                .unwrap_or_else(|| panic!("{n}: {}", a.text))
                .iter()
                .map(|h| h["namespace"].as_str().unwrap().to_owned())
                .collect()
        };
        let search = json!({"org": "globex", "query": "banana"});
        let list = json!({"org": "globex"});

        // another org's org-wide token and a platform admin: never the vault
        let wide = t.token("*", "svc", Role::Admin, &[]);
        let operator = t.token("acme", "operator", Role::Viewer, &[]);
        for (who, token) in [("wide", &wide), ("operator", &operator)] {
            let a = t.post("search.query", Some(token), search.clone()).await;
            assert_eq!(found(&a), ["default", "far", "team"], "{n} {who}");
            // the answer names what it read: the call's namespace first
            assert_eq!(
                a.body["namespaces"],
                json!(["default", "far", "team"]),
                "{n} {who}"
            );
            let a = t.post("namespace.list", Some(token), list.clone()).await;
            assert_eq!(listed(&a), ["default", "far", "team"], "{n} {who}");
        }
        // the org's own token reads them all
        let a = t.post("search.query", Some(&own), search.clone()).await;
        assert_eq!(found(&a), ["default", "far", "team", "vault"], "{n}");
        let a = t.post("namespace.list", Some(&own), list.clone()).await;
        assert_eq!(listed(&a), ["default", "far", "team", "vault"], "{n}");
        // and works in them all: a token naming none covers them as `*` does
        let a = t
            .post("namespace.list_mine", Some(&own), list.clone())
            .await;
        assert_eq!(listed(&a), ["default", "far", "team", "vault"], "{n}");

        // a token naming `*` covers every namespace, as it does for a read
        let star = t.token("globex", "sol", Role::Viewer, &["*"]);
        let a = t.post("search.query", Some(&star), search.clone()).await;
        assert_eq!(found(&a), ["default", "far", "team", "vault"], "{n}");
        let a = t
            .post("namespace.list_mine", Some(&star), list.clone())
            .await;
        assert_eq!(listed(&a), ["default", "far", "team", "vault"], "{n}");

        // a token naming one namespace, and a grant on another
        let gus = t.token("globex", "gus", Role::Viewer, &["default"]);
        let a = t.post("search.query", Some(&gus), search.clone()).await;
        assert_eq!(found(&a), ["default"], "{n}");
        let a = t
            .post(
                "grants.set",
                Some(&own),
                json!({"namespace": "team", "subject": "gus", "role": "viewer"}),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        let a = t.post("search.query", Some(&gus), search.clone()).await;
        assert_eq!(found(&a), ["default", "team"], "{n}");
        let a = t
            .post("namespace.list_mine", Some(&gus), list.clone())
            .await;
        assert_eq!(listed(&a), ["default", "team"], "{n}");

        // a namespace the org does not have is said to be missing
        let a = t
            .post(
                "memory.get",
                Some(&gus),
                json!({"namespace": "ghost", "memory_key": "k"}),
            )
            .await;
        assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        assert_eq!(a.body["error"]["namespace"], "ghost", "{n}");
        // one it has and the token does not reach is still refused as such
        let a = t
            .post(
                "memory.get",
                Some(&gus),
                json!({"namespace": "far", "memory_key": "k_far"}),
            )
            .await;
        assert_envelope(&a, 403, "NAMESPACE_NOT_ACCESSIBLE", n);
        t.server.shutdown().await;
    }
}

/// The pipeline's authorization looks the namespace up, and ops trust what
/// it found; a namespace that does not exist must still be refused, with
/// authentication on (the pipeline looked) and off (the op looks).
#[tokio::test]
async fn a_namespace_that_does_not_exist_is_refused_and_nothing_is_written() {
    for auth in [true, false] {
        for t in servers(|c| c.auth_required = auth).await {
            let n = format!("{} auth={auth}", t.name());
            let token = auth.then(|| t.token("default", "root", Role::Admin, &[]));
            let token = token.as_deref();
            let set = json!({"namespace": "nowhere", "memory_key": "k", "content": "x"});
            let get = json!({"namespace": "nowhere", "memory_key": "k"});
            let a = t.post("memory.set", token, set.clone()).await;
            assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", &n);
            assert_eq!(a.body["error"]["namespace"], "nowhere", "{n}");
            let a = t.post("memory.get", token, get.clone()).await;
            assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", &n);
            assert_eq!(
                t.count("SELECT COUNT(*) FROM memories WHERE namespace = 'nowhere'")
                    .await,
                0,
                "{n}"
            );
            // once it exists, the same calls go through
            sqlx::query("INSERT INTO namespaces (org, namespace, created_ms) VALUES ('default', 'nowhere', 0)")
                .execute(t.db.store.writer())
                .await
                .unwrap();
            assert_eq!(t.post("memory.set", token, set).await.status, 200, "{n}");
            let a = t.post("memory.get", token, get.clone()).await;
            assert_eq!(
                (a.status, a.body["content"].as_str()),
                (200, Some("x")),
                "{n}: {}",
                a.text
            );
            t.server.shutdown().await;
        }
    }
}

#[tokio::test]
async fn idempotency_keys_replay_only_to_their_principal() {
    for t in servers(|_| {}).await {
        let n = t.name();
        t.create_namespace("acme", "default").await;
        let boss = t.token("acme", "boss", Role::Admin, &[]);
        let other = t.token("acme", "other-admin", Role::Admin, &[]);
        let set = |who: &str| json!({"subject": who, "role": "writer"});
        // the runs of the op (a replay is audited as `replayed`)
        let ok_rows =
            "SELECT COUNT(*) FROM audit_log WHERE op = 'grants.set' AND outcome IN ('ok', 'noop')";

        let first = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-1")
                    .json(&set("bo")),
            )
            .await;
        assert_eq!(first.status, 200, "{n}: {}", first.text);
        assert!(first.header("idempotent-replayed").is_none(), "{n}");
        assert_eq!(t.count(ok_rows).await, 1, "{n}");
        // two keys on one request name no one request
        let two = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-1")
                    .header("idempotency-key", "k-2")
                    .json(&set("bo")),
            )
            .await;
        assert_envelope(&two, 400, "BAD_REQUEST", n);
        assert_eq!(t.count(ok_rows).await, 1, "{n}");

        // same key, same principal, same body (keys in another order): the stored answer, not a second run
        let again = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-1")
                    .json(&json!({"role": "writer", "subject": "bo"})),
            )
            .await;
        assert_eq!(
            (again.status, &again.text),
            (first.status, &first.text),
            "{n}"
        );
        assert_eq!(again.header("idempotent-replayed"), Some("true"), "{n}");
        assert_eq!(t.count(ok_rows).await, 1, "{n}: the op ran again");
        // a blacklist's add, which a retry would otherwise run again (its
        // sweep included), takes a key too
        let token = t.token("default", "ana", Role::Writer, &[]);
        let add = || {
            t.request("blacklist.add", Some(&token))
                .header("idempotency-key", "k-add")
                .json(&json!({"pattern": "hunter2", "sweep": true}))
        };
        let added = t.send(add()).await;
        assert_eq!(
            (added.status, &added.body["added"]),
            (200, &json!(true)),
            "{n}: {}",
            added.text
        );
        let replayed = t.send(add()).await;
        assert_eq!((replayed.status, &replayed.text), (200, &added.text), "{n}");
        assert_eq!(replayed.header("idempotent-replayed"), Some("true"), "{n}");
        // a whole number sent as a float is the integer the op takes: the
        // same request, replayed
        let kept = json!({"memory_key": "kept", "content": "c"});
        assert_eq!(
            t.post("memory.set", Some(&token), kept).await.status,
            200,
            "{n}"
        );
        let history = |limit: Value| {
            t.request("memory.history", Some(&token))
                .header("idempotency-key", "k-limit")
                .json(&json!({"memory_key": "kept", "limit": limit}))
        };
        let first_history = t.send(history(json!(20))).await;
        let float_history = t.send(history(json!(20.0))).await;
        assert_eq!(
            (float_history.status, &float_history.text),
            (first_history.status, &first_history.text),
            "{n}"
        );
        assert_eq!(
            float_history.header("idempotent-replayed"),
            Some("true"),
            "{n}"
        );

        // same key, different body: 422
        let a = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-1")
                    .json(&set("cy")),
            )
            .await;
        assert_envelope(&a, 422, "IDEMPOTENCY_KEY_MISMATCH", n);
        assert_eq!(
            t.count("SELECT COUNT(*) FROM grants WHERE subject = 'cy'")
                .await,
            0,
            "{n}"
        );

        // another principal's key of the same name is its own: the op runs
        let a = t
            .send(
                t.request("grants.set", Some(&other))
                    .header("idempotency-key", "k-1")
                    .json(&set("bo")),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert!(a.header("idempotent-replayed").is_none(), "{n}");
        assert_eq!(a.body["previous_role"], "writer", "{n}: it ran");
        assert_eq!(t.count(ok_rows).await, 2, "{n}");
        // and, the grant being as asked already, changed nothing
        let noop = "SELECT COUNT(*) FROM audit_log WHERE op = 'grants.set' AND outcome = 'noop'";
        assert_eq!(t.count(noop).await, 1, "{n}");
        // as does removing a grant nobody holds
        let a = t
            .post(
                "grants.set",
                Some(&boss),
                json!({"subject": "nobody", "role": "none"}),
            )
            .await;
        assert_eq!(
            (a.status, &a.body["role"], &a.body["previous_role"]),
            (200, &Value::Null, &Value::Null),
            "{n}: {}",
            a.text
        );
        assert_eq!(t.count(noop).await, 2, "{n}");

        // checked only after authorization: a viewer with the stored key gets 403, not the answer
        let viewer = t.token("acme", "boss", Role::Viewer, &[]);
        let a = t
            .send(
                t.request("grants.set", Some(&viewer))
                    .header("idempotency-key", "k-1")
                    .json(&set("bo")),
            )
            .await;
        assert_envelope(&a, 403, "AUTH_INSUFFICIENT", n);

        // a refused call stores nothing: its key runs normally afterwards
        let a = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-2")
                    .json(&json!({"subject": "", "role": "viewer"})),
            )
            .await;
        assert_envelope(&a, 422, "INVALID_ARGUMENTS", n);
        let a = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-2")
                    .json(&set("dee")),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn audited_ops_write_audit_rows_and_others_do_not() {
    for t in servers(|_| {}).await {
        let n = t.name();
        t.create_namespace("acme", "team").await;
        let admin = t.token("acme", "boss", Role::Admin, &["team"]);
        let viewer = t.token("acme", "ana", Role::Viewer, &["team"]);
        let rows = "SELECT COUNT(*) FROM audit_log";

        assert_eq!(
            t.post("grants.list", Some(&admin), json!({})).await.status,
            200,
            "{n}"
        );
        assert_eq!(
            t.post("ops.capabilities", Some(&admin), json!({}))
                .await
                .status,
            200,
            "{n}"
        );
        assert_eq!(
            t.count(rows).await,
            0,
            "{n}: a non-audited op wrote an audit row"
        );

        let a = t
            .post(
                "grants.set",
                Some(&admin),
                json!({"subject": "bo", "role": "writer", "agent": "deploy-bot"}),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(t.count(rows).await, 1, "{n}");
        // a refusal of an audited op is audited too
        let a = t
            .post(
                "grants.set",
                Some(&viewer),
                json!({"subject": "bo", "role": "admin"}),
            )
            .await;
        assert_envelope(&a, 403, "AUTH_INSUFFICIENT", n);
        assert_eq!(t.count(rows).await, 2, "{n}");
        // ... but not one in a namespace the org does not have: no log
        // holds it (audit.list there is 404), so none is written.
        // (refused by the op for a token of the whole org, before it by
        // authorization for one of `team` only)
        let org_admin = t.token("acme", "boss", Role::Admin, &[]);
        for (token, namespace) in [(&org_admin, "made-up-1"), (&admin, "made-up-2")] {
            let a = t
                .post(
                    "memory.set",
                    Some(token),
                    json!({"namespace": namespace, "memory_key": "k", "content": "c"}),
                )
                .await;
            assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        }
        assert_eq!(t.count(rows).await, 2, "{n}");

        let a = t.post("audit.list", Some(&admin), json!({})).await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        let listed = a.body["rows"].as_array().unwrap();
        assert_eq!(listed.len(), 2, "{n}: {}", a.text);
        assert_eq!(
            (listed[0]["subject"].as_str(), listed[0]["outcome"].as_str()),
            (Some("ana"), Some("AUTH_INSUFFICIENT")),
            "{n}"
        );
        assert_eq!(
            (listed[1]["subject"].as_str(), listed[1]["outcome"].as_str()),
            (Some("boss"), Some("ok")),
            "{n}"
        );
        assert_eq!(
            (listed[1]["agent"].as_str(), listed[1]["op"].as_str()),
            (Some("deploy-bot"), Some("grants.set")),
            "{n}"
        );
        assert_eq!(
            listed[1]["args_digest"].as_str().map(str::len),
            Some(64),
            "{n}"
        );
        // audit.list is admin only
        let a = t.post("audit.list", Some(&viewer), json!({})).await;
        assert_envelope(&a, 403, "AUTH_INSUFFICIENT", n);
        // and has no log of a namespace that does not exist
        let org_admin = t.token("acme", "root", Role::Admin, &[]);
        let a = t
            .post(
                "audit.list",
                Some(&org_admin),
                json!({"namespace": "ghost"}),
            )
            .await;
        assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn rate_limits_are_per_caller_and_class_with_retry_after() {
    for t in servers(|c| c.rate_read_per_min = 2).await {
        let n = t.name();
        let ana = t.token("default", "ana", Role::Admin, &[]);
        let bo = t.token("default", "bo", Role::Viewer, &[]);
        for _ in 0..2 {
            assert_eq!(
                t.post("ops.capabilities", Some(&ana), json!({}))
                    .await
                    .status,
                200,
                "{n}"
            );
        }
        let a = t.post("ops.capabilities", Some(&ana), json!({})).await;
        assert_envelope(&a, 429, "RATE_LIMITED", n);
        let wait: u64 = a.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=30).contains(&wait), "{n}: {wait}");
        assert_eq!(a.body["error"]["retry_after_s"], wait, "{n}");
        // another caller, and another class, have their own buckets
        assert_eq!(
            t.post("ops.capabilities", Some(&bo), json!({}))
                .await
                .status,
            200,
            "{n}"
        );
        let a = t
            .post(
                "grants.set",
                Some(&ana),
                json!({"subject": "cy", "role": "viewer"}),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn every_call_lands_in_the_ledger() {
    for t in servers(|_| {}).await {
        let n = t.name();
        t.create_namespace("acme", "team").await;
        let token = t.token("acme", "ana", Role::Viewer, &["team"]);
        assert_eq!(
            t.post("ops.capabilities", Some(&token), json!({}))
                .await
                .status,
            200,
            "{n}"
        );
        assert_eq!(
            t.post(
                "grants.set",
                Some(&token),
                json!({"subject": "x", "role": "viewer"})
            )
            .await
            .status,
            403,
            "{n}"
        );
        assert_eq!(
            t.post("grants.list", Some(&token), json!({"org": "other"}))
                .await
                .status,
            403,
            "{n}"
        );
        t.flush_ledger().await;
        assert_eq!(
            t.count("SELECT COUNT(*) FROM agent_events WHERE org = 'acme' AND subject = 'ana'")
                .await,
            3,
            "{n}"
        );
        assert_eq!(
            t.count("SELECT COUNT(*) FROM agent_events WHERE op = 'grants.set' AND outcome = 'AUTH_INSUFFICIENT' AND status = 403 AND namespace = 'team' AND transport = 'http'").await,
            1,
            "{n}"
        );
        // rows queued at shutdown are written, not lost
        assert_eq!(
            t.post("grants.list", Some(&token), json!({})).await.status,
            200,
            "{n}"
        );
        let db = t.db;
        t.server.shutdown().await;
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM agent_events")
            .fetch_one(db.store.reader())
            .await
            .unwrap();
        assert_eq!(rows, 4, "{n}");
    }
}

#[tokio::test]
async fn without_auth_calls_run_as_anonymous_admin() {
    for t in servers(|c| c.auth_required = false).await {
        let n = t.name();
        let a = t
            .post(
                "grants.set",
                None,
                json!({"subject": "bo", "role": "viewer"}),
            )
            .await;
        assert_eq!(a.status, 200, "{n}: {}", a.text);
        assert_eq!(
            (a.body["org"].as_str(), a.body["namespace"].as_str()),
            (Some("default"), Some("default")),
            "{n}"
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_key_whose_first_call_still_runs_is_409_in_flight() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let boss = t.token("acme", "boss", Role::Admin, &[]);
        let body = json!({"subject": "bo", "role": "writer"});
        // another replica claimed the key for this very request and is still running it
        let hash = loom_server::pipeline::idempotency::request_hash(
            "grants.set",
            "default",
            "boss",
            &body,
        );
        let claimed =
            t.db.store
                .idempotency_begin(
                    ("acme", "boss"),
                    "k-busy",
                    "grants.set",
                    &hash,
                    86_400_000,
                    300_000,
                )
                .await
                .unwrap();
        assert_eq!(claimed, loom_ops::store::IdemBegin::Owned, "{n}");
        let a = t
            .send(
                t.request("grants.set", Some(&boss))
                    .header("idempotency-key", "k-busy")
                    .json(&body),
            )
            .await;
        assert_envelope(&a, 409, "IDEMPOTENCY_KEY_IN_FLIGHT", n);
        assert_eq!(a.header("retry-after"), Some("1"), "{n}");
        assert_eq!(
            t.count("SELECT COUNT(*) FROM grants").await,
            0,
            "{n}: the op ran"
        );
        t.server.shutdown().await;
    }
}

mod slow_clients {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn read_all(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        // bounded: the server closes or answers long before this
        let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn a_body_that_never_arrives_is_408_and_a_header_that_never_ends_is_dropped() {
        for t in servers(|c| {
            c.body_read_timeout = Duration::from_millis(200);
            c.header_read_timeout = Duration::from_millis(200);
        })
        .await
        {
            let n = t.name();
            let token = t.token("default", "ana", Role::Viewer, &[]);
            let mut s = TcpStream::connect(t.server.addr).await.unwrap();
            let head = format!(
                "POST /v1/ops.capabilities HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
                 content-type: application/json\r\ncontent-length: 10\r\nconnection: close\r\n\r\n{{"
            );
            s.write_all(head.as_bytes()).await.unwrap();
            let answer = read_all(&mut s).await;
            assert!(answer.starts_with("HTTP/1.1 408"), "{n}: {answer}");
            assert!(answer.contains("REQUEST_TIMEOUT"), "{n}: {answer}");

            let mut s = TcpStream::connect(t.server.addr).await.unwrap();
            s.write_all(b"POST /v1/ops.capabilities HTTP/1.1\r\nhost: x\r\n")
                .await
                .unwrap();
            let answer = read_all(&mut s).await;
            assert!(!answer.contains("200 OK"), "{n}: {answer}");
            t.server.shutdown().await;
        }
    }

    /// One answer on a connection that stays open: its head, and as many
    /// bytes of body as its content-length says.
    async fn read_one(stream: &mut TcpStream) -> String {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let read = async {
            loop {
                let text = String::from_utf8_lossy(&buf).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + length {
                        return;
                    }
                }
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        };
        // bounded: the server answers long before this
        let _ = tokio::time::timeout(Duration::from_secs(20), read).await;
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// A request refused whole before its body was needed (its bearer, its
    /// op, its path, its coding) has its body read all the same: the
    /// connection stays usable, and the client's next request on it is
    /// answered. A body larger than the server reads in one go is left
    /// mostly unread otherwise, and the connection was closed under the
    /// next request.
    #[tokio::test]
    async fn an_early_refusal_reads_the_body_and_keeps_the_connection() {
        for t in servers(|_| {}).await {
            let n = t.name();
            let token = t.token("default", "ana", Role::Viewer, &[]);
            let body = format!("{{\"pad\": \"{}\"}}", "x".repeat(600 * 1024));
            for (path, headers, status) in [
                ("/v1/ops.capabilities", String::new(), "401"),
                (
                    "/v1/ops.capabilities",
                    "authorization: Bearer nonsense\r\n".to_owned(),
                    "401",
                ),
                (
                    "/v1/no.such_op",
                    format!("authorization: Bearer {token}\r\n"),
                    "404",
                ),
                ("/nowhere", String::new(), "404"),
                (
                    "/mcp",
                    format!(
                        "authorization: Bearer {token}\r\ncontent-encoding: gzip\r\n\
                         accept: application/json, text/event-stream\r\n"
                    ),
                    "415",
                ),
            ] {
                let mut s = TcpStream::connect(t.server.addr).await.unwrap();
                let req = format!(
                    "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                     {headers}content-length: {}\r\n\r\n{body}",
                    body.len()
                );
                s.write_all(req.as_bytes()).await.unwrap();
                let first = read_one(&mut s).await;
                assert!(
                    first.starts_with(&format!("HTTP/1.1 {status}")),
                    "{n} {path}: {first}"
                );
                let next = s
                    .write_all(
                        b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                let answer = read_all(&mut s).await;
                assert!(
                    next.is_ok() && answer.starts_with("HTTP/1.1 200"),
                    "{n} {path}: the next request on the connection got {next:?} {answer:?}"
                );
            }
            t.server.shutdown().await;
        }
    }

    #[tokio::test]
    async fn a_chunked_body_over_the_limit_is_413() {
        for t in servers(|c| c.max_body_bytes = 1024).await {
            let n = t.name();
            let token = t.token("default", "ana", Role::Viewer, &[]);
            let mut s = TcpStream::connect(t.server.addr).await.unwrap();
            let chunk = format!("{{\"pad\": \"{}\"}}", "x".repeat(3000));
            let req = format!(
                "POST /v1/ops.capabilities HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
                 transfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
                chunk.len()
            );
            s.write_all(req.as_bytes()).await.unwrap();
            let answer = read_all(&mut s).await;
            assert!(answer.starts_with("HTTP/1.1 413"), "{n}: {answer}");
            assert!(answer.contains("PAYLOAD_TOO_LARGE"), "{n}: {answer}");
            t.server.shutdown().await;
        }
    }
}

/// Recall and exposure counts are summed off the request path for a fold
/// (five seconds) before they are written; shutdown writes what is held,
/// so none answered before it is lost.
#[tokio::test]
async fn shutdown_writes_the_recall_and_exposure_counts_still_held() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Writer, &[]);
        let token = Some(token.as_str());
        let set = json!({"memory_key": "held", "content": "summed before written"});
        assert_eq!(t.post("memory.set", token, set).await.status, 200, "{n}");
        for i in 1..=3 {
            let got = t
                .post("memory.get", token, json!({"memory_key": "held"}))
                .await;
            assert_eq!(got.body["recall_count"], i, "{n}: {}", got.text);
        }
        let db = t.db;
        t.server.shutdown().await;
        let (recalls, exposures): (i64, i64) = sqlx::query_as(
            "SELECT m.recall_count, (SELECT CAST(SUM(c.n) AS BIGINT) FROM memory_exposure_counts c \
               WHERE c.memory_key = m.memory_key AND c.agent = m.agent) \
             FROM memories m WHERE m.memory_key = 'held'",
        )
        .fetch_one(db.store.reader())
        .await
        .unwrap();
        assert_eq!((recalls, exposures), (3, 3), "{n}");
    }
}

/// A blank org, namespace or agent names nothing, for the identity
/// defaults and for the op alike: `"agent": ""` reads every agent's rows,
/// as leaving it out does, not the caller's own alone.
#[tokio::test]
async fn a_blank_name_names_nothing() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "ana", Role::Writer, &[]);
        for agent in ["ana", "bot"] {
            let a = t
                .post(
                    "memory.set",
                    Some(&token),
                    json!({"memory_key": "k", "content": agent, "agent": agent}),
                )
                .await;
            assert_eq!(a.status, 200, "{n}: {}", a.text);
        }
        for args in [
            json!({}),
            json!({"agent": ""}),
            json!({"agent": "  ", "namespace": ""}),
        ] {
            let a = t.post("memory.list", Some(&token), args.clone()).await;
            assert_eq!(a.status, 200, "{n}: {}", a.text);
            assert_eq!(
                a.body["memories"].as_array().map(Vec::len),
                Some(2),
                "{n}: {args} {}",
                a.text
            );
        }
        let a = t
            .post("memory.list", Some(&token), json!({"agent": "bot"}))
            .await;
        assert_eq!(a.body["memories"].as_array().map(Vec::len), Some(1), "{n}");
        t.server.shutdown().await;
    }
}

/// A key binds the namespace and agent its call resolved to, not only its
/// body: one subject's two tokens for two namespaces sending the same body
/// with the same key get no replay of the other namespace's answer.
#[tokio::test]
async fn a_key_replays_only_in_the_namespace_it_was_used_in() {
    for t in servers(|_| {}).await {
        let n = t.name();
        t.create_namespace("default", "other").await;
        let here = t.token("default", "carol", Role::Writer, &["default"]);
        let there = t.token("default", "carol", Role::Writer, &["other"]);
        let body = json!({"memory_key": "goal", "content": "ship it"});
        let keyed = |token: &str| {
            t.request("memory.set", Some(token))
                .header("idempotency-key", "k-ns")
                .json(&body)
        };
        let first = t.send(keyed(&here)).await;
        assert_eq!(first.status, 200, "{n}: {}", first.text);
        assert_eq!(first.body["namespace"], "default", "{n}");
        let other = t.send(keyed(&there)).await;
        assert_envelope(&other, 422, "IDEMPOTENCY_KEY_MISMATCH", n);
        let again = t.send(keyed(&here)).await;
        assert_eq!(
            (again.status, again.header("idempotent-replayed")),
            (200, Some("true")),
            "{n}"
        );
        t.server.shutdown().await;
    }
}

/// A call refused for the run it names fails as any call does: its key is
/// released, and the retry runs again rather than waiting out a claim.
#[tokio::test]
async fn a_key_is_released_when_the_named_run_is_refused() {
    for t in servers(|_| {}).await {
        let n = t.name();
        let token = t.token("default", "dan", Role::Writer, &[]);
        for _ in 0..2 {
            let a = t
                .send(
                    t.request("memory.set", Some(&token))
                        .header("idempotency-key", "k-run")
                        .json(&json!({"memory_key": "k", "content": "x", "run_id": "no-such-run"})),
                )
                .await;
            assert_envelope(&a, 404, "RESOURCE_NOT_FOUND", n);
        }
        t.server.shutdown().await;
    }
}
