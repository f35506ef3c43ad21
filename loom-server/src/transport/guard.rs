//! DNS-rebinding protection: every `/mcp` request's `Host`, and its `Origin`
//! when present, must name a loopback host (any port) or a configured one. A
//! foreign `Origin` is refused with 403 even with a valid token.

/// Whether a `host[:port]` (as `Host` carries it, or an Origin's authority) is allowed.
pub fn allowed_authority(authority: &str, allowed: &[String]) -> bool {
    let authority = authority.trim().to_ascii_lowercase();
    if authority.is_empty() {
        return false;
    }
    let host = host_of(&authority);
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
        || allowed.iter().any(|a| *a == authority || a == host)
}

/// The host of `host[:port]`, brackets kept for IPv6 (`[::1]:8080` → `[::1]`).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |i| &authority[..=i]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

/// Whether an `Origin` value is allowed: `http(s)://` + an allowed authority.
pub fn allowed_origin(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim();
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    allowed_authority(authority, allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_pass_with_any_port() {
        for h in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:8080",
            "[::1]:9",
            "LOCALHOST",
        ] {
            assert!(allowed_authority(h, &[]), "{h}");
        }
        for o in [
            "http://localhost:5173",
            "https://127.0.0.1",
            "http://[::1]:8080",
        ] {
            assert!(allowed_origin(o, &[]), "{o}");
        }
    }

    #[test]
    fn foreign_names_are_refused_unless_configured() {
        for h in [
            "evil.example.com",
            "evil.example.com:80",
            "127.0.0.1.evil.com",
            "localhost.evil.com",
            "",
        ] {
            assert!(!allowed_authority(h, &[]), "{h}");
        }
        for o in [
            "http://evil.example.com",
            "null",
            "file://",
            "http://localhost.evil.com",
        ] {
            assert!(!allowed_origin(o, &[]), "{o}");
        }
        let allowed = vec!["loom.example.com".to_owned()];
        assert!(allowed_authority("loom.example.com:443", &allowed));
        assert!(allowed_origin("https://loom.example.com", &allowed));
        assert!(!allowed_origin("https://evil.example.com", &allowed));
    }
}
