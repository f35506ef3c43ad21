//! Step 2: identity defaults. Explicit arguments win; otherwise the org
//! comes from the token, the namespace from the caller's default workspace
//! (the first namespace the token names, else `default`) and the agent from
//! the transport's client-derived agent, else the token subject.
//!
//! Org rule: a token acts in its own org; an org-wide (`*`) token or a
//! platform admin may act in any org. Anything else is ORG_MISMATCH.
//! (A restricted namespace refusing other orgs is checked in
//! [`authorize`](super::authorize), where the namespace is looked up.)

use loom_core::{Caller, ErrorCode, LoomError, Scope};
use serde_json::Value;

/// The org, namespace and agent a call with no token acts as.
pub const DEFAULT_ORG: &str = "default";
/// The default workspace.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The subject of calls served without authentication.
pub const ANONYMOUS: &str = "anonymous";
/// The longest org, namespace or agent a call may name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

fn explicit<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// An org, namespace or agent the arguments name, checked before anything
/// looks it up: these names key rows in every table and reach the database
/// before the op's own argument check runs, so a control character (a NUL,
/// which PostgreSQL's text refuses outright) or an unbounded length is
/// refused here, as the caller's mistake, rather than failing a statement.
///
/// Another type than a string (or null, which names nothing) is refused
/// too: `org` is declared by no op's schema, and an `agent` by few, so
/// nothing after this step would tell the caller that `"org": 1` was not
/// read.
pub(crate) fn named<'a>(args: &'a Value, field: &str) -> Result<Option<&'a str>, LoomError> {
    let sent = args.get(field).filter(|v| !v.is_null());
    if let Some(v) = sent.filter(|v| !v.is_string()) {
        let kind = loom_core::type_name(v);
        return Err(refused(
            field,
            format!("{field} must be a string, got {kind}"),
        ));
    }
    // Before the trim: a control character that is also white space (a
    // tab, U+0085) at either end would otherwise be trimmed away unseen.
    if let Some(raw) = sent.and_then(Value::as_str)
        && raw.chars().any(char::is_control)
    {
        return Err(refused(
            field,
            format!("{field} {raw:?} holds a control character"),
        ));
    }
    let Some(name) = explicit(args, field) else {
        return Ok(None);
    };
    let fault = if name.len() > MAX_NAME_BYTES {
        Some(format!(
            "{field} is {} bytes; at most {MAX_NAME_BYTES}",
            name.len()
        ))
    } else {
        None
    };
    match fault {
        None => Ok(Some(name)),
        Some(message) => Err(refused(field, message)),
    }
}

fn refused(field: &str, message: String) -> LoomError {
    let errors = vec![format!("{field}: {message}")];
    LoomError::new(ErrorCode::InvalidArguments, message)
        .with_detail("field", field)
        .with_detail("errors", errors)
}

/// Takes out of the arguments an org, namespace or agent that names
/// nothing (blank), so the op reads it as left out, as identity did: an
/// `"agent": ""` must not narrow a read to the caller's own rows while
/// acting as if no agent were named.
pub(crate) fn drop_blank_names(args: &mut Value) {
    if let Some(map) = args.as_object_mut() {
        for field in ["org", "namespace", "agent"] {
            if map
                .get(field)
                .and_then(Value::as_str)
                .is_some_and(|s| s.trim().is_empty())
            {
                map.remove(field);
            }
        }
    }
}

/// Whether the arguments name a namespace (an empty one names none).
pub fn names_namespace(args: &Value) -> bool {
    explicit(args, "namespace").is_some()
}

/// Whether `caller` may act in `org`.
pub fn may_act_in_org(caller: &Caller, org: &str) -> bool {
    caller.org == org || caller.org == "*" || caller.platform_admin
}

/// The caller's home org: its token's, or the default org for an
/// org-wide token (and without a token).
pub fn home_org(caller: Option<&Caller>) -> &str {
    caller
        .map(|c| c.org.as_str())
        .filter(|o| *o != "*")
        .unwrap_or(DEFAULT_ORG)
}

/// The org a call acts in: the one its arguments name, else the caller's
/// home org; refused when the caller may not act there.
pub fn call_org<'a>(caller: Option<&'a Caller>, args: &'a Value) -> Result<&'a str, LoomError> {
    let org = named(args, "org")?.unwrap_or(home_org(caller));
    if let Some(c) = caller
        && !may_act_in_org(c, org)
    {
        return Err(LoomError::new(
            ErrorCode::OrgMismatch,
            format!("this token may not act in org '{org}'"),
        )
        .with_detail("org", org)
        .with_detail("token_org", c.org.clone()));
    }
    Ok(org)
}

/// The rate-limit key of a caller's own calls outside any op (MCP's
/// session opening and ending): its token's org and subject.
pub fn rate_key(caller: Option<&Caller>) -> loom_core::RateKey {
    loom_core::RateKey {
        org: caller.map_or(DEFAULT_ORG, |c| c.org.as_str()).to_owned(),
        subject: caller.map_or(ANONYMOUS, |c| c.subject.as_str()).to_owned(),
    }
}

/// The scope of a call (its role is filled by authorization).
pub fn resolve(
    caller: Option<&Caller>,
    args: &Value,
    default_agent: Option<&str>,
) -> Result<Scope, LoomError> {
    let org = call_org(caller, args)?;
    let namespace = named(args, "namespace")?
        .or_else(|| {
            caller.and_then(|c| c.namespaces.iter().map(String::as_str).find(|n| *n != "*"))
        })
        .unwrap_or(DEFAULT_NAMESPACE);
    let subject = caller.map_or(ANONYMOUS, |c| c.subject.as_str());
    let agent = named(args, "agent")?.or(default_agent).unwrap_or(subject);
    Ok(Scope {
        org: org.to_owned(),
        namespace: namespace.to_owned(),
        agent: agent.to_owned(),
        role: None,
        namespace_found: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller(org: &str, namespaces: &[&str]) -> Caller {
        Caller {
            subject: "ana".into(),
            org: org.into(),
            namespaces: namespaces.iter().map(|s| (*s).to_owned()).collect(),
            ..Caller::default()
        }
    }

    #[test]
    fn defaults_come_from_the_token_and_explicit_arguments_win() {
        let c = caller("acme", &["team", "other"]);
        let s = resolve(Some(&c), &json!({}), None).unwrap();
        assert_eq!(
            (s.org.as_str(), s.namespace.as_str(), s.agent.as_str()),
            ("acme", "team", "ana")
        );
        let s = resolve(
            Some(&c),
            &json!({"namespace": "other", "agent": "bot"}),
            Some("cursor"),
        )
        .unwrap();
        assert_eq!((s.namespace.as_str(), s.agent.as_str()), ("other", "bot"));
        let s = resolve(Some(&c), &json!({}), Some("cursor")).unwrap();
        assert_eq!(s.agent, "cursor");
        let s = resolve(Some(&caller("acme", &[])), &json!({}), None).unwrap();
        assert_eq!(s.namespace, "default");
    }

    #[test]
    fn org_rules() {
        let err = resolve(Some(&caller("acme", &[])), &json!({"org": "globex"}), None).unwrap_err();
        assert_eq!(err.code(), ErrorCode::OrgMismatch);
        assert!(resolve(Some(&caller("*", &[])), &json!({"org": "globex"}), None).is_ok());
        let admin = Caller {
            platform_admin: true,
            ..caller("acme", &[])
        };
        assert!(resolve(Some(&admin), &json!({"org": "globex"}), None).is_ok());
        assert_eq!(
            resolve(Some(&caller("*", &[])), &json!({}), None)
                .unwrap()
                .org,
            "default"
        );
    }

    #[test]
    fn a_named_org_namespace_or_agent_is_a_bounded_name_without_control_characters() {
        let c = caller("acme", &["team"]);
        for (field, bad) in [
            ("namespace", "\u{0}".to_owned()),
            ("namespace", "team\u{0}".to_owned()),
            ("agent", "bot\nbot".to_owned()),
            ("org", "acme\u{7f}".to_owned()),
            // a control character that is white space too, at either end
            ("namespace", "team\u{85}".to_owned()),
            ("agent", "\tbot".to_owned()),
            ("namespace", "n".repeat(MAX_NAME_BYTES + 1)),
        ] {
            let err = resolve(Some(&c), &json!({ field: bad }), None).unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArguments, "{field} {bad:?}");
            assert_eq!(err.detail().get("field"), Some(&json!(field)), "{bad:?}");
        }
        for (field, bad) in [
            ("org", json!(1)),
            ("org", json!({"\u{0}": [1]})),
            ("org", json!(true)),
            ("agent", json!([])),
            ("namespace", json!({})),
        ] {
            let err = resolve(Some(&c), &json!({ field: bad }), None).unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArguments, "{field} {bad}");
            assert!(
                err.message().contains("must be a string"),
                "{}",
                err.message()
            );
        }
        let s = resolve(Some(&c), &json!({"org": null, "agent": null}), None).unwrap();
        assert_eq!(
            (s.org.as_str(), s.agent.as_str()),
            ("acme", "ana"),
            "null names nothing"
        );
        let fine = "n".repeat(MAX_NAME_BYTES);
        let s = resolve(
            Some(&c),
            &json!({"namespace": fine, "agent": "café 🧵"}),
            None,
        )
        .unwrap();
        assert_eq!(
            (s.namespace.len(), s.agent.as_str()),
            (MAX_NAME_BYTES, "café 🧵")
        );
    }
}
