//! Tenant isolation: a property test over tokens (orgs × roles ×
//! namespaces), ops and targets. No call reads or writes a row outside what
//! its token may reach: a call outside it is refused with a 4xx and changes
//! nothing, a call inside it sees and changes only its own namespace.

use std::collections::BTreeMap;

use loom_core::Role;
use loom_tests::{TestServer, servers};
use proptest::prelude::*;
use serde_json::{Value, json};

const ORGS: [&str; 2] = ["acme", "globex"];
const NAMESPACES: [&str; 2] = ["alpha", "beta"];
const ROLES: [Role; 3] = [Role::Viewer, Role::Writer, Role::Admin];
const SCOPES: [&[&str]; 4] = [&[], &["alpha"], &["beta"], &["alpha", "beta"]];
const OPS: [&str; 6] = [
    "memory.get",
    "memory.list",
    "memory.history",
    "memory.search",
    "memory.set",
    "memory.update",
];

#[derive(Clone, Debug)]
struct Case {
    org: usize,
    role: usize,
    scope: usize,
    op: usize,
    target_org: usize,
    target_ns: usize,
    /// Name the target explicitly (else the token's defaults apply).
    explicit: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..2usize,
        0..3usize,
        0..4usize,
        0..OPS.len(),
        0..2usize,
        0..2usize,
        any::<bool>(),
    )
        .prop_map(
            |(org, role, scope, op, target_org, target_ns, explicit)| Case {
                org,
                role,
                scope,
                op,
                target_org,
                target_ns,
                explicit,
            },
        )
}

/// Versions per (org, namespace).
async fn versions(t: &TestServer) -> BTreeMap<(String, String), i64> {
    sqlx::query_as::<_, (String, String, i64)>(
        "SELECT org, namespace, COUNT(*) FROM memory_versions GROUP BY org, namespace",
    )
    .fetch_all(t.db.store.reader())
    .await
    .expect("versions")
    .into_iter()
    .map(|(o, n, c)| ((o, n), c))
    .collect()
}

/// Every string under a `content` key in an answer.
fn contents(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "content"
                    && let Some(s) = v.as_str()
                {
                    out.push(s.to_owned());
                }
                contents(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| contents(v, out)),
        _ => {}
    }
}

async fn check(t: &TestServer, c: &Case, n: usize) -> Result<(), String> {
    let org = ORGS[c.org];
    let role = ROLES[c.role];
    let scope = SCOPES[c.scope];
    let op = OPS[c.op];
    let token = t.token(org, &format!("sub-{}-{}", c.role, c.scope), role, scope);
    // Where the call lands: named explicitly, or the token's defaults.
    let (target_org, target_ns) = if c.explicit {
        (ORGS[c.target_org], NAMESPACES[c.target_ns])
    } else {
        (org, scope.first().copied().unwrap_or("default"))
    };
    let mut args = match op {
        "memory.list" => json!({}),
        "memory.search" => json!({"query": "seed"}),
        "memory.set" | "memory.update" => {
            json!({"memory_key": "m", "agent": "seed", "content": format!("{target_org}/{target_ns}:write {n}")})
        }
        _ => json!({"memory_key": "m", "agent": "seed"}),
    };
    if c.explicit {
        // Ops take no `org` argument; naming another org is refused before validation.
        if target_org != org {
            args["org"] = json!(target_org);
        }
        args["namespace"] = json!(target_ns);
    }
    let writes = matches!(op, "memory.set" | "memory.update");
    let needed = if writes { Role::Writer } else { Role::Viewer };
    let reachable = target_org == org
        && (NAMESPACES.contains(&target_ns) || target_ns == "default")
        && (scope.is_empty() || scope.contains(&target_ns))
        && role >= needed;
    let before = versions(t).await;
    let a = t.post(op, Some(&token), args.clone()).await;
    let after = versions(t).await;
    let what = format!(
        "{org} {role} {scope:?} {op} {args}: {} {}",
        a.status, a.text
    );
    if reachable {
        if a.status != 200 {
            return Err(format!("refused a reachable call: {what}"));
        }
    } else if !(400..500).contains(&a.status) {
        return Err(format!("answered an unreachable call: {what}"));
    }
    // reads and writes stay inside the target
    let mut seen = Vec::new();
    contents(&a.body, &mut seen);
    let prefix = format!("{target_org}/{target_ns}:");
    if let Some(s) = seen.iter().find(|s| !s.starts_with(&prefix)) {
        return Err(format!("served {s:?} from outside {prefix}: {what}"));
    }
    for (place, count) in &after {
        let was = before.get(place).copied().unwrap_or(0);
        let inside = place.0 == target_org && place.1 == target_ns;
        if *count != was && !(reachable && writes && inside) {
            return Err(format!("wrote into {place:?}: {what}"));
        }
    }
    Ok(())
}

#[test]
fn no_token_reaches_a_row_outside_its_orgs_and_namespaces() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let servers = rt.block_on(servers(|c| {
        loom_tests::generous(c);
    }));
    for t in servers {
        rt.block_on(async {
            for org in ORGS {
                sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ($1, 0)")
                    .bind(org)
                    .execute(t.db.store.writer())
                    .await
                    .expect("org");
                for ns in NAMESPACES.iter().chain(&["default"]) {
                    sqlx::query(
                        "INSERT INTO namespaces (org, namespace, created_ms) VALUES ($1, $2, 0)",
                    )
                    .bind(org)
                    .bind(ns)
                    .execute(t.db.store.writer())
                    .await
                    .expect("namespace");
                    let admin = t.token(org, "seed", Role::Admin, &[]);
                    let a = t
                        .post(
                            "memory.set",
                            Some(&admin),
                            json!({"namespace": ns, "memory_key": "m", "content": format!("{org}/{ns}:seed")}),
                        )
                        .await;
                    assert_eq!(a.status, 200, "{}", a.text);
                }
            }
        });
        let mut config = ProptestConfig::with_cases(192);
        config.failure_persistence = None;
        let mut runner = proptest::test_runner::TestRunner::new(config);
        let n = std::sync::atomic::AtomicUsize::new(0);
        let name = t.name();
        runner
            .run(&case(), |c| {
                let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                let r = rt.block_on(check(&t, &c, i));
                prop_assert!(r.is_ok(), "{name}: {}", r.unwrap_err());
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{name}: {} calls across 2 orgs × 3 roles × 4 scopes × 6 ops, none crossed a boundary",
            n.into_inner()
        );
        rt.block_on(t.server.shutdown());
    }
}
