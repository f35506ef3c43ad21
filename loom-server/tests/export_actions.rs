//! `loom export-actions`, run as the built binary.

use std::process::Command;

fn loom(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loom"))
        .args(args)
        .output()
        .expect("run loom")
}

#[test]
fn cedar_to_stdout_parses_with_cedar() {
    let out = loom(&["export-actions", "--format", "cedar", "-o", "-"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (schema, _) = cedar_policy::Schema::from_cedarschema_str(&text)
        .unwrap_or_else(|e| panic!("cedar refused the schema: {e:?}\n{text}"));
    assert!(
        schema
            .actions()
            .any(|a| a.to_string().contains("\"ops.capabilities\""))
    );
}

/// `policies` validate against the Cedar schema `text`.
fn assert_policies_validate(text: &str, policies: &str) {
    let (schema, _) = cedar_policy::Schema::from_cedarschema_str(text).unwrap();
    let policies: cedar_policy::PolicySet = policies.parse().unwrap();
    let result = cedar_policy::Validator::new(schema)
        .validate(&policies, cedar_policy::ValidationMode::default());
    assert!(
        result.validation_passed(),
        "{:?}",
        result.validation_errors().collect::<Vec<_>>()
    );
}

/// A policy can read a call's choices: the input's fixed-value arguments
/// (a Rust enum's `oneOf` of string consts) are in its Cedar record.
#[test]
fn policies_on_an_inputs_choices_validate() {
    let out = loom(&["export-actions", "--format", "cedar", "-o", "-"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_policies_validate(
        &text,
        r#"
        forbid(principal, action == Loom::Action::"memory.apply", resource)
          when { context.input.action == "delete" };
        forbid(principal, action == Loom::Action::"grants.set", resource)
          when { context.input.role == "admin" };
        permit(principal, action == Loom::Action::"run.complete", resource)
          when { context.input has status && context.input.status == "failed" };
        "#,
    );
    // The manifest names each op's record types as the Cedar schema does
    // (a model named as a Cedar entity is not its own name there).
    let out = loom(&["export-actions", "--format", "json", "-o", "-"]);
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for tool in manifest["tools"].as_array().unwrap() {
        for key in ["cedar_input_type", "cedar_output_type"] {
            let ty = tool["loom"][key].as_str().unwrap();
            assert!(text.contains(&format!("  type {ty} = ")), "{key} {ty}");
        }
    }
}

/// A run-scoped op accepts the run a call names (`run_id`, taken by the
/// pipeline, not the op's model): its Cedar record holds it, so a policy
/// on it validates, while MCP's listing keeps it hidden as it does
/// `agent`; an op whose model declares `run_id` keeps its own.
#[test]
fn a_policy_can_read_the_run_a_call_names() {
    let out = loom(&["export-actions", "--format", "cedar", "-o", "-"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let record = |ty: &str| {
        let start = text
            .find(&format!("  type {ty} = {{"))
            .unwrap_or_else(|| panic!("{ty} in {text}"));
        text[start..start + text[start..].find("};").unwrap()].to_owned()
    };
    assert!(
        record("MemorySet").contains(r#""run_id"?: String"#),
        "{}",
        record("MemorySet")
    );
    assert!(record("MemoryGet").contains(r#""run_id"?: String"#));
    assert_policies_validate(
        &text,
        r#"
        forbid(principal, action == Loom::Action::"memory.set", resource)
          when { context.input has run_id && context.input.run_id == "frozen" };
        "#,
    );

    let out = loom(&["export-actions", "--format", "json", "-o", "-"]);
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool = |op: &str| {
        manifest["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["loom"]["op"] == op)
            .unwrap_or_else(|| panic!("{op} exported"))
            .clone()
    };
    let set = tool("memory.set");
    assert_eq!(set["loom"]["run_scoped"], true);
    assert!(set["inputSchema"]["properties"].get("run_id").is_none());
    let begin = tool("run.begin");
    assert_eq!(begin["loom"]["run_scoped"], false);
    let own = &begin["inputSchema"]["properties"]["run_id"];
    assert!(
        !own["description"].as_str().unwrap().contains("belongs to"),
        "run.begin's run_id is its own: {own}"
    );
}

#[test]
fn json_to_a_file_lists_every_op() {
    let dir = std::env::temp_dir().join(format!("loom-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("loom-tools.json");
    let out = loom(&[
        "export-actions",
        "--format",
        "json",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout when writing a file"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let tools = manifest["tools"].as_array().unwrap();
    let caps = tools
        .iter()
        .find(|t| t["name"] == "loom_ops_capabilities")
        .expect("ops.capabilities exported");
    assert_eq!(caps["loom"]["http_path"], "/v1/ops.capabilities");
    assert_eq!(caps["loom"]["effect"], "read");
    for tool in tools {
        for key in ["name", "description", "inputSchema", "outputSchema", "loom"] {
            assert!(tool.get(key).is_some(), "{key} missing in {tool}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_bad_format_or_flag_is_a_usage_error_with_code_2() {
    for args in [
        &["export-actions", "--format", "yaml"][..],
        &["export-actions", "--format", "json", "--bogus"][..],
        &["export-actions"][..],
        &["no-such-command"][..],
    ] {
        let out = loom(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
}

#[test]
fn an_unwritable_output_fails_with_code_1() {
    let out = loom(&[
        "export-actions",
        "--format",
        "json",
        "-o",
        "/nonexistent-dir/x/y.json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write"));
}
