//! DNS-rebinding and cross-site protection: a request's `Host`, and its
//! `Origin` when present, must name a loopback host (any port), a host of
//! `LOOM_MCP_ALLOWED_HOSTS` or the OAuth issuer's.
//!
//! Every `/mcp` request is checked (a foreign `Origin` is refused with 403
//! even with a valid token). A `/v1` call is checked when it carries no
//! bearer the server checked, that is with authentication off: there a web
//! page the person visits could otherwise post to Loom (a `text/plain` POST
//! needs no preflight) or read it through a rebound DNS name. A call with a
//! bearer needs no check: no browser attaches one for a page, nor sends one
//! cross-site without a CORS preflight Loom never grants.

use axum::http::{HeaderMap, header};

use crate::Config;

/// The hosts a request may name, besides loopback ones.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    allowed: Vec<String>,
}

impl Guard {
    /// `LOOM_MCP_ALLOWED_HOSTS`, and the OAuth issuer's authority when
    /// OAuth is on (its sign-in pages call back to it).
    pub fn from_config(config: &Config) -> Guard {
        let mut allowed = config.mcp.allowed_hosts.clone();
        if let Some(issuer) = config
            .oauth_issuer
            .as_deref()
            .filter(|_| config.oauth_enabled)
        {
            let authority = issuer
                .split("://")
                .nth(1)
                .unwrap_or(issuer)
                .split('/')
                .next()
                .unwrap_or("");
            if !authority.is_empty() {
                allowed.push(authority.to_ascii_lowercase());
            }
        }
        Guard { allowed }
    }

    /// Whether the request's `Host` names a host this server serves.
    pub fn admits_host(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|h| allowed_authority(h, &self.allowed))
    }

    /// Whether the request's `Host`, and `Origin` when it has one, name
    /// hosts this server serves.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let host_ok = self.admits_host(headers);
        let origin_ok = match headers.get(header::ORIGIN) {
            None => true,
            Some(v) => v.to_str().is_ok_and(|o| allowed_origin(o, &self.allowed)),
        };
        host_ok && origin_ok
    }
}

/// What a refused request is told.
pub const REFUSAL: &str = "forbidden: the Host or Origin header names a host this server does not serve (DNS-rebinding protection)";

/// Whether a `host[:port]` (as `Host` carries it, or an Origin's authority) is allowed.
pub fn allowed_authority(authority: &str, allowed: &[String]) -> bool {
    let authority = authority.trim().to_ascii_lowercase();
    if authority.is_empty() {
        return false;
    }
    let host = host_of(&authority);
    // Any loopback address written out (a server bound to 127.0.0.2 is
    // called by that name); a name is never resolved, so a rebinding
    // attack's own name never passes.
    crate::oauth::loopback_host(host) || allowed.iter().any(|a| *a == authority || a == host)
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
            "127.0.0.2:8080",
            "127.255.0.1",
            "[0:0:0:0:0:0:0:1]:80",
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
            "128.0.0.1",
            "127.1",
            "[::2]",
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
