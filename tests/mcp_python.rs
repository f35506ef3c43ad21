//! An independent client: the official Python MCP SDK (`tests/python`)
//! initializes, lists and calls `loom_memory_set` then `loom_memory_get`
//! against the real server. Its virtualenv comes from
//! `tests/python/setup.sh` (`.ci/run` runs it and sets
//! `LOOM_TEST_REQUIRE_PYTHON=1`, so CI never skips this).

use std::path::PathBuf;

use loom_core::Role;
use loom_tests::servers;

fn venv_python() -> Option<PathBuf> {
    let venv = std::env::var_os("LOOM_TEST_PYTHON_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/python-venv"));
    let python = venv.join("bin/python");
    python.exists().then_some(python)
}

#[tokio::test]
async fn the_python_sdk_sets_and_gets_a_memory() {
    let Some(python) = venv_python() else {
        assert!(
            std::env::var("LOOM_TEST_REQUIRE_PYTHON").is_err(),
            "LOOM_TEST_REQUIRE_PYTHON is set but tests/python/setup.sh has not run"
        );
        eprintln!("skipped: run tests/python/setup.sh to install the Python MCP SDK");
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/mcp_sdk_client.py");
    for t in servers(|_| {}).await {
        let token = t.token("default", "sdk", Role::Writer, &[]);
        let url = format!("{}/mcp", t.url());
        let out = tokio::process::Command::new(&python)
            .arg(&script)
            .arg(&url)
            .arg(&token)
            .output()
            .await
            .expect("run python");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: the SDK client failed\nstdout: {stdout}\nstderr: {}",
            t.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        let seen: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
        assert_eq!(seen["content"], "written by the Python SDK");
        assert_eq!(seen["version"], 1);
        let stored = t
            .count("SELECT COUNT(*) FROM memories WHERE memory_key = 'sdk_check'")
            .await;
        assert_eq!(stored, 1, "{}", t.name());
        t.server.shutdown().await;
    }
}
