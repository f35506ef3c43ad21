//! How a blacklist pattern matches content: case-insensitively; a pattern
//! with `*` (any run of characters) or `?` (one character) is a glob over
//! the whole content, any other pattern matches as a substring.

/// The SQL function the direct writer's connection knows [`matches`] by
/// (`loom_blacklisted(pattern, content)`): a write planned off the writer
/// checks the patterns again where it lands, in its own statement.
pub const SQL_FUNCTION: &str = "loom_blacklisted";

/// Registers [`SQL_FUNCTION`] on a SQLite connection.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        SQL_FUNCTION,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let pattern: String = ctx.get(0)?;
            let content: String = ctx.get(1)?;
            Ok(matches(&pattern, &content))
        },
    )
}

/// Whether `content` matches `pattern`.
pub fn matches(pattern: &str, content: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let c: Vec<char> = content.to_lowercase().chars().collect();
    if !p.iter().any(|&ch| ch == '*' || ch == '?') {
        return content.to_lowercase().contains(&pattern.to_lowercase());
    }
    glob(&p, &c)
}

fn glob(p: &[char], c: &[char]) -> bool {
    let (mut pi, mut ci) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ci < c.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == c[ci]) {
            pi += 1;
            ci += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ci));
            pi += 1;
        } else if let Some((sp, sc)) = star {
            pi = sp + 1;
            ci = sc + 1;
            star = Some((sp, sc + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&ch| ch == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn substring_and_glob() {
        assert!(matches("Password", "my password is x"));
        assert!(!matches("password", "my pass word"));
        assert!(matches("*api?key*", "the API_KEY is 123"));
        assert!(!matches("api*key", "the api key"));
        assert!(matches("api*key", "API and key"));
        assert!(matches("*", "anything"));
    }
}
