//! The `loom` binary: `token mint` prints one JWT that a server on the same
//! store accepts, `token revoke` refuses it, `serve` starts on a fresh store
//! and stops cleanly on SIGTERM, and bad configuration stops it at start.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use loom_ops::store::testing;
use loom_server::Config;

fn loom() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loom"));
    for (k, _) in std::env::vars() {
        if k.starts_with("LOOM_") {
            c.env_remove(k);
        }
    }
    c
}

// Multi-threaded: the CLI runs as a blocking child process while this
// process's store keeps committing on another worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minted_token_is_accepted_and_a_revoked_one_refused() {
    loom_ops::link();
    let (url, dir) = testing::sqlite_url();
    let out = loom()
        .args([
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "ana",
            "--role",
            "viewer",
            "--namespace",
            "default",
        ])
        .env("LOOM_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.lines().count(),
        1,
        "mint prints one line: {stdout:?}"
    );
    // there was no store: the one made now is said, on standard error
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no store was at") && stderr.contains("loom.db"),
        "{stderr}"
    );
    let token = stdout.trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "{token}");

    let config = Config {
        port: 0,
        database_url: url.clone(),
        ..Config::default()
    };
    let server = loom_server::spawn(config).await.unwrap();
    let client = reqwest::Client::new();
    let call = |token: String| {
        let client = client.clone();
        let url = format!("{}/v1/ops.capabilities", server.url());
        async move {
            client
                .post(url)
                .bearer_auth(token)
                .json(&serde_json::json!({}))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    server
        .app
        .revocations
        .refresh(&server.app.store)
        .await
        .unwrap();
    assert_eq!(
        call(token.clone()).await,
        200,
        "the server shares the key mint used"
    );

    let jti = server.app.keys.verify(&token).unwrap().jti;
    let out = loom()
        .args(["token", "revoke", &jti])
        .env("LOOM_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the server's store: nothing to say
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server
        .app
        .revocations
        .refresh(&server.app.store)
        .await
        .unwrap();
    assert_eq!(call(token).await, 401);
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn mint_refuses_an_unknown_role() {
    let out = loom()
        .args([
            "token",
            "mint",
            "--org",
            "a",
            "--subject",
            "b",
            "--role",
            "owner",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown role"));
}

#[test]
fn mint_refuses_a_lifetime_past_ten_years() {
    for ttl in ["18446744073709551615", "315360001"] {
        let out = loom()
            .args([
                "token",
                "mint",
                "--org",
                "a",
                "--subject",
                "b",
                "--role",
                "viewer",
                "--ttl",
                ttl,
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{ttl}: {stderr}");
        assert!(stderr.contains("--ttl"), "{ttl}: {stderr}");
    }
}

/// A command whose answer cannot be written fails as any failure does
/// (exit code 1, a message), not with a panic.
#[test]
fn an_answer_that_cannot_be_written_fails_the_command() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not a system with /dev/full
    };
    let (url, dir) = testing::sqlite_url();
    let out = loom()
        .args(["namespace", "list"])
        .env("LOOM_DATABASE_URL", &url)
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_configuration_stops_the_start_naming_the_variable() {
    let out = loom()
        .arg("serve")
        .env("LOOM_PORT", "eighty")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LOOM_PORT"));

    let out = loom()
        .arg("serve")
        .env("LOOM_AUTH_REQUIRED", "false")
        .env("LOOM_BIND_HOST", "0.0.0.0")
        .env("LOOM_DATABASE_URL", "sqlite://never-created.db")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LOOM_ALLOW_INSECURE"));

    // A host that does not resolve is refused before any store is made.
    let (url, dir) = testing::sqlite_url();
    let out = loom()
        .arg("serve")
        .env("LOOM_BIND_HOST", "not-a-host.invalid")
        .env("LOOM_DATABASE_URL", &url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("LOOM_BIND_HOST"), "{stderr}");
    assert!(!dir.join("loom.db").exists(), "no store was made");
    let _ = std::fs::remove_dir_all(dir);

    // A SQLite URL that names no file (an unset variable in its path) is
    // refused, not served from memory and lost at the next start; and no
    // token is minted for a store in memory, which no server could check.
    for url in ["sqlite://", "sqlite:", "sqlite://?mode=rwc"] {
        let out = loom()
            .arg("serve")
            .env("LOOM_DATABASE_URL", url)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{url}: {stderr}");
        assert!(stderr.contains("names no file"), "{url}: {stderr}");
    }
    let out = loom()
        .args([
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "a",
            "--role",
            "admin",
        ])
        .env("LOOM_DATABASE_URL", "sqlite::memory:")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "no token printed");
    assert!(stderr.contains("store in memory"), "{stderr}");

    // A store in a directory that does not exist is named, not its side file.
    let out = loom()
        .arg("migrate")
        .env("LOOM_DATABASE_URL", "sqlite:///nonexistent-loom-dir/x.db")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot open the store /nonexistent-loom-dir/x.db: the directory /nonexistent-loom-dir does not exist"),
        "{stderr}"
    );
}

#[test]
fn blank_names_are_refused_before_anything_is_written() {
    for args in [
        &["token", "revoke", " "][..],
        // not a jti: a line break, a whole token, a mistyped one
        &["token", "revoke", "a\nb"],
        &["token", "revoke", "eyJhbGciOiJIUzI1NiJ9.e30.sig"],
        &["token", "revoke", "0123456789abcdef0123456789abcdeg"],
        &[
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "a",
            "--role",
            "viewer",
            "--namespace",
            "",
        ],
        &[
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "evil\nINFO forged log line",
            "--role",
            "admin",
        ],
        &[
            "token",
            "mint",
            "--org",
            "de\u{7}fault",
            "--subject",
            "a",
            "--role",
            "admin",
        ],
        // a call's names are trimmed: one with a space at an end could be
        // made and never named
        &[
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            " alice ",
            "--role",
            "writer",
        ],
        &["namespace", "add", "default", " spaced "],
    ] {
        let out = loom()
            .args(args)
            .env("LOOM_DATABASE_URL", "sqlite:///nonexistent-loom-dir/x.db")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("not"), "{args:?}: {stderr}");
        assert!(!stderr.contains("cannot open"), "checked first: {stderr}");
        // a whole token given for its jti is a secret: not written back
        assert!(!stderr.contains("e30"), "{args:?}: {stderr}");
    }
}

/// A `loom serve` child on a fresh SQLite store, any free port, standard
/// output and error piped.
struct Served {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`, from the first line it printed.
    base: String,
    /// The lines it printed after the first.
    banner: Vec<String>,
    /// Everything it writes to standard error, once it has exited.
    logs: std::thread::JoinHandle<String>,
    /// Its standard output after the banner, kept open while the test runs
    /// (`None`: closed from the start).
    _stdout: Option<std::io::Lines<BufReader<std::process::ChildStdout>>>,
    url: String,
    dir: std::path::PathBuf,
}

/// How a test takes the server's standard output.
enum Output {
    /// Read: the port comes from the banner's first line.
    Read,
    /// Closed before the server writes a line (a supervisor's pipe may
    /// be), on a port picked here.
    Closed,
}

fn serve(log_format: &str, output: Output) -> Served {
    let (url, dir) = testing::sqlite_url();
    let port = match output {
        Output::Read => 0,
        // Free now; the server binds it a moment later.
        Output::Closed => std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port(),
    };
    let mut child = loom()
        .arg("serve")
        .env("LOOM_DATABASE_URL", &url)
        .env("LOOM_PORT", port.to_string())
        .env("LOOM_LOG_FORMAT", log_format)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let stdout = child.stdout.take().unwrap();
    let (base, banner, stdout) = match output {
        Output::Closed => {
            drop(stdout);
            (format!("http://127.0.0.1:{port}"), Vec::new(), None)
        }
        Output::Read => {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().unwrap().unwrap();
            let base = first
                .split_whitespace()
                .find(|w| w.starts_with("http://"))
                .unwrap()
                .split("/v1")
                .next()
                .unwrap()
                .to_owned();
            let banner = lines.by_ref().take(4).map(Result::unwrap).collect();
            (base, banner, Some(lines))
        }
    };
    Served {
        child,
        base,
        banner,
        logs,
        _stdout: stdout,
        url,
        dir,
    }
}

impl Served {
    /// SIGTERM, then what it logged; asserts it exited cleanly.
    fn stop(mut self) -> String {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = self.child.wait().unwrap();
        let logs = self.logs.join().unwrap();
        assert!(status.success(), "{status:?}: {logs}");
        let _ = std::fs::remove_dir_all(&self.dir);
        logs
    }
}

impl Served {
    /// Polls /readyz (a child process gives no other signal) until it
    /// answers; stops the server and fails with what it logged if it never
    /// does.
    async fn wait_ready(self, client: &reqwest::Client) -> Served {
        for _ in 0..3000 {
            if client
                .get(format!("{}/readyz", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                return self;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let logs = self.stop();
        panic!("never ready: {logs}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn serve_starts_on_a_fresh_store_and_stops_on_sigterm() {
    let served = serve("json", Output::Read);
    let (base, rest, url) = (served.base.clone(), &served.banner, served.url.clone());
    assert!(
        rest.iter()
            .any(|l| l.contains(&format!("serving MCP at {base}/mcp"))),
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|l| l.contains("created org 'default'")),
        "{rest:?}"
    );
    // The banner names the file the store is in.
    let file = loom_ops::store::sqlite_path(&url).unwrap();
    assert!(
        rest.iter()
            .any(|l| l.contains(&format!("loom: store sqlite {file}"))),
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|l| l.contains("loom token mint")),
        "{rest:?}"
    );

    let client = reqwest::Client::new();
    let served = served.wait_ready(&client).await;
    let r = client
        .post(format!("{base}/v1/ops.capabilities"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let out = loom()
        .args([
            "token",
            "mint",
            "--org",
            "default",
            "--subject",
            "ana",
            "--role",
            "viewer",
        ])
        .env("LOOM_DATABASE_URL", &url)
        .output()
        .unwrap();
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let r = client
        .post(format!("{base}/v1/ops.capabilities"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .post(format!("{base}/v1/ops.capabilities?token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client
        .post(format!("{base}/v1/memory.get"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"memory_key": "none"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let logs = served.stop();
    assert!(!logs.contains(&token), "a token was logged");
    let answered: Vec<&str> = logs.lines().filter(|l| l.contains("answered")).collect();
    assert_eq!(
        answered.len(),
        4 + answered.iter().filter(|l| l.contains("/readyz")).count(),
        "{logs}"
    );
    assert!(answered.iter().all(|l| l.contains("request_id")), "{logs}");
    // The call's own lines, logged on its task, carry the request's id too.
    let refused: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("call refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{logs}");
    assert!(refused[0].contains("request_id"), "{logs}");
}

/// Text logs to a pipe (a service manager, a container runtime, a file) are
/// plain: colour escape codes are for a terminal.
#[cfg(unix)]
#[tokio::test]
async fn text_logs_to_a_pipe_carry_no_colour_codes() {
    // Nobody reads its output: it serves all the same, its banner dropped
    // (a panic on the closed pipe took the server down).
    let served = serve("text", Output::Closed);
    let client = reqwest::Client::new();
    let served = served.wait_ready(&client).await;
    let r = client
        .post(format!("{}/v1/ops.capabilities", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let logs = served.stop();
    assert!(
        logs.lines()
            .any(|l| l.contains("answered") && l.contains("status=401")),
        "{logs}"
    );
    assert!(!logs.contains('\u{1b}'), "{logs}");
}

fn user_cmd(url: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = loom()
        .args(args)
        .env("LOOM_DATABASE_URL", url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

// Multi-threaded: the CLI runs as a blocking child process while this
// process's store keeps committing on another worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_add_stores_a_hash_and_user_disable_disables() {
    loom_ops::link();
    let (url, dir) = testing::sqlite_url();
    let add = [
        "user",
        "add",
        "ana",
        "--org",
        "default",
        "--role",
        "writer",
        "--namespace",
        "default",
    ];
    let out = user_cmd(&url, &add, "s3cret password\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Taken, too short, unknown org, bad role.
    let out = user_cmd(&url, &add, "s3cret password\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = user_cmd(
        &url,
        &["user", "add", "bo", "--org", "default", "--role", "viewer"],
        "short\n",
    );
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("at least 8"));
    let out = user_cmd(
        &url,
        &["user", "add", "bo", "--org", "nope", "--role", "viewer"],
        "long enough pw\n",
    );
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no org"));
    // A blank namespace is no name; one the org lacks is added, with a note.
    let out = user_cmd(
        &url,
        &[
            "user",
            "add",
            "cy",
            "--org",
            "default",
            "--role",
            "viewer",
            "--namespace",
            " ",
        ],
        "long enough pw\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("is not a name"),
        "{stderr}"
    );
    let out = user_cmd(
        &url,
        &[
            "user",
            "add",
            "cy",
            "--org",
            "default",
            "--role",
            "viewer",
            "--namespace",
            "later",
        ],
        "long enough pw\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("has no namespace later yet"), "{stderr}");
    let out = user_cmd(
        &url,
        &["user", "add", "bo", "--org", "default", "--role", "boss"],
        "long enough pw\n",
    );
    assert_eq!(out.status.code(), Some(2));

    let store = loom_ops::store::Store::open(loom_ops::store::StoreOptions::new(url.clone()))
        .await
        .unwrap();
    let user = store.user_get("ana").await.unwrap().unwrap();
    assert!(user.password_hash.starts_with("$argon2id$") && !user.password_hash.contains("s3cret"));
    assert!(loom_server::oauth::users::verify_password(
        &user.password_hash,
        "s3cret password"
    ));
    assert_eq!(
        (
            user.org.as_str(),
            user.role.as_str(),
            user.namespaces.as_slice()
        ),
        ("default", "writer", &["default".to_owned()][..])
    );
    assert!(!user.disabled);

    let out = user_cmd(&url, &["user", "disable", "ana"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(store.user_get("ana").await.unwrap().unwrap().disabled);
    let out = user_cmd(&url, &["user", "disable", "nobody"], "");
    assert!(!out.status.success());
    store.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// The commands that act on a server's store say so on standard error
/// when no store was where they looked and they made one: run from
/// another folder than the server's, what they write or list is not the
/// server's. On an existing store they say nothing of it.
#[test]
fn store_commands_name_a_store_they_made() {
    for args in [
        &["namespace", "list"][..],
        &["namespace", "add", "acme", "proj"],
        &["user", "disable", "nobody"],
    ] {
        let (url, dir) = testing::sqlite_url();
        let first = user_cmd(&url, args, "");
        let stderr = String::from_utf8_lossy(&first.stderr).into_owned();
        assert!(
            stderr.contains("no store was at") && stderr.contains("loom.db"),
            "{args:?}: {stderr}"
        );
        let again = user_cmd(&url, args, "");
        assert!(
            !String::from_utf8_lossy(&again.stderr).contains("no store was at"),
            "{args:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// An operator creates an org's namespace, mints a token for it, and a
/// server on the same store takes the token's writes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_add_creates_what_a_token_acts_in() {
    loom_ops::link();
    let (url, dir) = testing::sqlite_url();
    let run = |args: &[&str]| user_cmd(&url, args, "");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();

    // Minted before the namespace exists: the token, and a note saying so.
    let mint = [
        "token",
        "mint",
        "--org",
        "acme",
        "--subject",
        "ana",
        "--role",
        "writer",
        "--namespace",
        "proj",
    ];
    let early = run(&mint);
    assert!(early.status.success(), "{}", text(&early.stderr));
    assert_eq!(text(&early.stdout).lines().count(), 1);
    assert!(
        text(&early.stderr).contains("loom namespace add acme proj"),
        "{}",
        text(&early.stderr)
    );

    let add = [
        "namespace",
        "add",
        "acme",
        "proj",
        "--kind",
        "collection",
        "--description",
        "the project",
    ];
    let out = run(&add);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("created namespace proj in org acme"));
    // Again: left as it is; asked as another kind: refused, still left.
    let again = run(&add);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("exists already"));
    let other = run(&["namespace", "add", "acme", "proj", "--kind", "memory"]);
    assert_eq!(other.status.code(), Some(1));
    assert!(
        text(&other.stderr).contains("exists already as collection, not restricted"),
        "{}",
        text(&other.stderr)
    );
    // asked restricted: the refusal names what it is, restriction included
    let restricted = run(&[
        "namespace",
        "add",
        "acme",
        "proj",
        "--kind",
        "collection",
        "--restricted",
    ]);
    assert_eq!(restricted.status.code(), Some(1));
    assert!(
        text(&restricted.stderr).contains("not restricted"),
        "{}",
        text(&restricted.stderr)
    );
    for bad in [
        &["namespace", "add", "acme", "x", "--kind", "folder"][..],
        &["namespace", "add", "acme", "*"],
        &["namespace", "add", " ", "x"],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {}", text(&out.stdout));
    }
    let list = run(&["namespace", "list", "--org", "acme"]);
    assert_eq!(text(&list.stdout), "acme\tproj\tcollection\n");
    let all = text(&run(&["namespace", "list"]).stdout);
    assert!(all.contains("default\tdefault\tmemory\n"), "{all}");

    let late = run(&mint);
    assert!(late.status.success());
    assert_eq!(text(&late.stderr), "", "no note once it exists");
    let token = text(&late.stdout).trim().to_owned();
    let server = loom_server::spawn(Config {
        port: 0,
        database_url: url.clone(),
        ..Config::default()
    })
    .await
    .unwrap();
    server
        .app
        .revocations
        .refresh(&server.app.store)
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let call = |op: &str, body: serde_json::Value| {
        client
            .post(format!("{}/v1/{op}", server.url()))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let set = call(
        "memory.set",
        serde_json::json!({"memory_key": "k", "content": "c"}),
    )
    .await
    .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());
    let got: serde_json::Value = call("namespace.get", serde_json::json!({}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&got["namespace"], &got["kind"], &got["description"]),
        (
            &serde_json::json!("proj"),
            &serde_json::json!("collection"),
            &serde_json::json!("the project")
        ),
        "{got}"
    );
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// SIGTERM while the store is still opening (here a database that accepts
/// the connection and never answers) stops the start there, exit code 0,
/// rather than once the open has timed out and failed.
#[cfg(unix)]
#[test]
fn a_signal_while_starting_stops_the_start() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let child = loom()
        .arg("serve")
        .env("LOOM_PORT", "0")
        .env(
            "LOOM_DATABASE_URL",
            format!("postgres://loom@127.0.0.1:{port}/loom"),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server is opening its store once it connects: its stop signals
    // are listened for before that.
    let (_held, _) = silent.accept().unwrap();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopped before serving"), "{stderr}");
}

/// A PostgreSQL that is not listening is named with the cause, not as a
/// pool that timed out; the URL's password is not repeated.
#[test]
fn an_unreachable_postgres_is_named_with_its_cause() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let out = loom()
        .arg("migrate")
        .env(
            "LOOM_DATABASE_URL",
            format!("postgres://loom:hunter2@127.0.0.1:{port}/loom"),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("at 127.0.0.1:{port}")) && stderr.contains("refused"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}
