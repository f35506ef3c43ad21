//! How a blacklist pattern matches content: ignoring case (Unicode's
//! simple case folding); a pattern with `*` (any run of characters) or `?`
//! (one character) is a glob over the whole content, any other pattern
//! matches as a substring.
//!
//! Why through `regex`: a write checks every pattern of its namespace
//! against content of up to 64 KiB, on SQLite inside the one writer's
//! statement. A backtracking glob takes time in proportion to the pattern
//! times the content (a `*` retried at every position): 200 patterns such
//! as `*aaaa…b` held a write of 64 KiB of `a` for 5 s, and every other
//! write of the store behind it. A pattern compiled once runs in time
//! linear in the content; the compiled patterns are kept ([`compiled`]).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;

/// The SQL function the direct writer's connection knows [`matches`] by
/// (`loom_blacklisted(pattern, content)`): a write planned off the writer
/// checks the patterns again where it lands, in its own statement.
pub const SQL_FUNCTION: &str = "loom_blacklisted";

/// How many compiled patterns are kept; past it the cache starts afresh
/// (a namespace holds at most [`super::MAX_PATTERNS`]).
const KEPT: usize = 4096;

/// Registers [`SQL_FUNCTION`] on a SQLite connection.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        SQL_FUNCTION,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let pattern = ctx.get_raw(0).as_str().map_err(rusqlite::Error::from)?;
            let content = ctx.get_raw(1).as_str().map_err(rusqlite::Error::from)?;
            Ok(matches(pattern, content))
        },
    )
}

/// Whether `content` matches `pattern`.
pub fn matches(pattern: &str, content: &str) -> bool {
    compiled(pattern).is_match(content)
}

/// A test of whether a pattern is `pattern` ignoring case, by the folding
/// patterns match with (Unicode's simple case folding: `Σ`, `σ` and `ς` are
/// one pattern, as each matches what the others do), so adding refuses a
/// pattern held already and removing finds it.
pub fn same_ignoring_case(pattern: &str) -> impl Fn(&str) -> bool {
    let exact = Regex::new(&format!("(?i)\\A{}\\z", regex::escape(pattern)))
        .expect("an escaped pattern compiles");
    move |other| exact.is_match(other)
}

/// `pattern` as a regular expression, compiled once and kept.
fn compiled(pattern: &str) -> Arc<Regex> {
    static KEPT_PATTERNS: LazyLock<Mutex<HashMap<String, Arc<Regex>>>> =
        LazyLock::new(Mutex::default);
    let mut kept = KEPT_PATTERNS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(regex) = kept.get(pattern) {
        return regex.clone();
    }
    if kept.len() >= KEPT {
        kept.clear();
    }
    let regex = Arc::new(Regex::new(&translate(pattern)).expect("a translated pattern compiles"));
    kept.insert(pattern.to_owned(), regex.clone());
    regex
}

/// The regular expression `pattern` means: every character but the
/// wildcards taken literally.
fn translate(pattern: &str) -> String {
    if !pattern.contains(['*', '?']) {
        return format!("(?i){}", regex::escape(pattern));
    }
    let mut out = String::from(r"(?is)\A");
    let mut literal = [0u8; 4];
    for ch in pattern.chars() {
        match ch {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            _ => out.push_str(&regex::escape(ch.encode_utf8(&mut literal))),
        }
    }
    out.push_str(r"\z");
    out
}

#[cfg(test)]
mod tests {
    use super::{matches, same_ignoring_case};

    /// Two patterns are one when each matches what the other does: by
    /// simple case folding, not by lowercasing (`ς` lowercases to itself
    /// and `Σ` to `σ`, yet all three match `ΣΣΣ`).
    #[test]
    fn patterns_are_one_ignoring_case_as_they_match() {
        for (a, b) in [("ς", "Σ"), ("σ", "ς"), ("Secret*", "sECRET*"), ("ſ", "S")] {
            assert!(same_ignoring_case(a)(b), "{a} {b}");
            assert!(same_ignoring_case(b)(a), "{b} {a}");
            assert!(matches(a, "ΣΣΣ SSS") == matches(b, "ΣΣΣ SSS"), "{a} {b}");
        }
        for (a, b) in [
            ("a*", "a?"),
            ("straße", "STRASSE"),
            ("ab", "a"),
            ("a.b", "axb"),
        ] {
            assert!(!same_ignoring_case(a)(b), "{a} {b}");
        }
    }

    #[test]
    fn substring_and_glob() {
        assert!(matches("Password", "my password is x"));
        assert!(!matches("password", "my pass word"));
        assert!(matches("*api?key*", "the API_KEY is 123"));
        assert!(!matches("api*key", "the api key"));
        assert!(matches("api*key", "API and key"));
        assert!(matches("*", "anything"));
        assert!(matches("a?c", "a\nc"), "? is any one character");
        assert!(
            matches("*[x]+(y)*", "a [X]+(Y) b"),
            "regex syntax is literal"
        );
        assert!(!matches("*[x]+(y)*", "a x(y) b"));
        assert!(matches("secret", "a ſECRET here"), "simple case folding");
    }

    /// A pattern that made a backtracking glob retry its `*` at every
    /// position of the content answers at once (the time is not asserted:
    /// a backtracking matcher would not finish this test in any sane time).
    #[test]
    fn a_hostile_glob_is_linear() {
        let content = "a".repeat(64 * 1024);
        let patterns: Vec<String> = (40..240).map(|k| format!("*{}b", "a".repeat(k))).collect();
        assert!(patterns.iter().all(|p| !matches(p, &content)));
        assert!(matches(&format!("*{}", "a".repeat(200)), &content));
    }
}
