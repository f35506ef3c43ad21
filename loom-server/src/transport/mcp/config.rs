//! The MCP transport's settings: `LOOM_MCP_*`.

use std::collections::HashMap;
use std::time::Duration;

use loom_core::{Listing, Profile};

/// Which methods need a bearer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMode {
    /// Every method except notifications (the default).
    Required,
    /// `tools/call` only; every other method is open.
    DiscoveryOnly,
    /// Nothing; an invalid bearer is ignored (trusted networks only).
    Open,
}

/// `LOOM_MCP_*` settings.
#[derive(Clone, Debug)]
pub struct McpConfig {
    /// `LOOM_MCP_TOOLSET` (`core`): the listing when `?toolset=` names none or an unknown one.
    pub toolset: Listing,
    /// `LOOM_MCP_SCHEMA_PROFILE` (`standard`).
    pub profile: Profile,
    /// `LOOM_MCP_AUTH_MODE` (`required`).
    pub auth_mode: AuthMode,
    /// `LOOM_MCP_ALLOWED_HOSTS`: host names (or `host:port`) besides the
    /// loopback names that `Host` and `Origin` may carry (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// `LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S` (2; 0 never waits): a rate-limited
    /// call whose wait is at most this sleeps once and tries again.
    pub ratelimit_retry_max_wait: Duration,
    /// `LOOM_MCP_SESSION_CACHE` (10000): sessions remembered in process.
    pub session_cache: usize,
    /// `LOOM_MCP_SESSION_RUN_IDLE_SECONDS` (1800): a session's implicit run
    /// with no call for this long is closed by the sweep.
    pub session_run_idle: Duration,
}

/// Whether `entry` (lower case) is a host name, an IPv4 address or a
/// bracketed IPv6 one, with an optional port: what a `Host` header holds.
fn is_host_entry(entry: &str) -> bool {
    let port_ok = |port: &str| port.parse::<u16>().is_ok();
    if let Some(v6) = entry.strip_prefix('[') {
        let Some((addr, rest)) = v6.split_once(']') else {
            return false;
        };
        let rest_ok = rest.is_empty() || rest.strip_prefix(':').is_some_and(port_ok);
        return rest_ok && addr.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let (host, port) = match entry.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (entry, None),
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
        && port.is_none_or(port_ok)
}

impl McpConfig {
    /// How often the idle sweep runs: at least every `min(60 s, idle / 2)`,
    /// so a short idle setting takes effect quickly.
    pub fn sweep_interval(&self) -> Duration {
        (self.session_run_idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }

    /// How long a session's run, found open, is used without asking the
    /// store again: `min(60 s, idle / 4)`. Another replica may close it (its
    /// idle sweep, a `DELETE /mcp` sent there), and only the sweeping
    /// process's cache is told; past this, a call asks, and begins a new run
    /// when that one has ended. A quarter of the idle time: a run still in
    /// use is found open long before the sweep could close it.
    pub fn run_recheck(&self) -> Duration {
        (self.session_run_idle / 4).min(Duration::from_secs(60))
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            toolset: Listing::core(),
            profile: Profile::Standard,
            auth_mode: AuthMode::Required,
            allowed_hosts: Vec::new(),
            ratelimit_retry_max_wait: Duration::from_secs(2),
            session_cache: 10_000,
            session_run_idle: Duration::from_secs(1800),
        }
    }
}

impl McpConfig {
    /// Reads the `LOOM_MCP_*` variables; a bad value names its variable.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<McpConfig, String> {
        let mut c = McpConfig::default();
        let get = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(v) = get("LOOM_MCP_TOOLSET") {
            c.toolset = Listing::parse(v).ok_or_else(|| {
                format!(
                    "LOOM_MCP_TOOLSET={v:?} is not valid: expected core, coding, tracker, tasks, atomic \
                     (or a union such as coding+tracker), readonly, assistant or all"
                )
            })?;
        }
        if let Some(v) = get("LOOM_MCP_SCHEMA_PROFILE") {
            c.profile = Profile::parse(v).ok_or_else(|| {
                format!(
                    "LOOM_MCP_SCHEMA_PROFILE={v:?} is not valid: expected standard, full or compact"
                )
            })?;
        }
        if let Some(v) = get("LOOM_MCP_AUTH_MODE") {
            c.auth_mode = match v.to_ascii_lowercase().as_str() {
                "required" => AuthMode::Required,
                "discovery_only" => AuthMode::DiscoveryOnly,
                "open" => AuthMode::Open,
                _ => {
                    return Err(format!(
                        "LOOM_MCP_AUTH_MODE={v:?} is not valid: expected required, discovery_only or open"
                    ));
                }
            };
        }
        if let Some(v) = get("LOOM_MCP_ALLOWED_HOSTS") {
            c.allowed_hosts = v
                .split(',')
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect();
            // A URL (`https://loom.example.com/`) would never equal a Host
            // header: every request would be refused 403 with no word why.
            if let Some(bad) = c.allowed_hosts.iter().find(|h| !is_host_entry(h)) {
                return Err(format!(
                    "LOOM_MCP_ALLOWED_HOSTS={v:?} is not valid: {bad:?} is not a host name or \
                     host:port (no scheme, path or user)"
                ));
            }
        }
        if let Some(v) = get("LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S") {
            let secs: u64 = v.parse().map_err(|_| {
                format!("LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S={v:?} is not valid: expected whole seconds (0 never waits)")
            })?;
            if secs > 30 {
                return Err(format!(
                    "LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S={v:?} is not valid: at most 30 seconds"
                ));
            }
            c.ratelimit_retry_max_wait = Duration::from_secs(secs);
        }
        if let Some(v) = get("LOOM_MCP_SESSION_CACHE") {
            c.session_cache = v.parse().ok().filter(|n: &usize| *n > 0).ok_or_else(|| {
                format!("LOOM_MCP_SESSION_CACHE={v:?} is not valid: expected a positive number")
            })?;
        }
        if let Some(v) = get("LOOM_MCP_SESSION_RUN_IDLE_SECONDS") {
            let secs: u64 = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("LOOM_MCP_SESSION_RUN_IDLE_SECONDS={v:?} is not valid: expected a positive number of seconds")
            })?;
            c.session_run_idle = Duration::from_secs(secs);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_and_values() {
        let c = McpConfig::from_vars(&HashMap::new()).unwrap();
        assert_eq!(
            (c.toolset, c.profile, c.auth_mode),
            (Listing::core(), Profile::Standard, AuthMode::Required)
        );
        let c = McpConfig::from_vars(&vars(&[
            ("LOOM_MCP_TOOLSET", "coding+tracker"),
            ("LOOM_MCP_SCHEMA_PROFILE", "compact"),
            ("LOOM_MCP_AUTH_MODE", "discovery_only"),
            ("LOOM_MCP_ALLOWED_HOSTS", "Loom.Example.com, x:9000"),
            ("LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S", "0"),
        ]))
        .unwrap();
        assert_eq!(c.toolset.name(), "coding+tracker");
        assert_eq!(c.allowed_hosts, ["loom.example.com", "x:9000"]);
        let hosts = McpConfig::from_vars(&vars(&[(
            "LOOM_MCP_ALLOWED_HOSTS",
            "[::1]:8080, [fd00::1], 10.0.0.5:80",
        )]))
        .unwrap()
        .allowed_hosts;
        assert_eq!(hosts.len(), 3);
        for bad in [
            "https://loom.example.com/",
            "x/path",
            "user@x",
            "x:port",
            "[::1",
            "x y",
        ] {
            let e = McpConfig::from_vars(&vars(&[("LOOM_MCP_ALLOWED_HOSTS", bad)])).unwrap_err();
            assert!(e.contains("LOOM_MCP_ALLOWED_HOSTS"), "{bad}: {e}");
        }
        assert_eq!(c.ratelimit_retry_max_wait, Duration::ZERO);
    }

    #[test]
    fn the_sweep_runs_at_least_every_min_60_idle_half() {
        let with = |idle: &str| {
            McpConfig::from_vars(&vars(&[("LOOM_MCP_SESSION_RUN_IDLE_SECONDS", idle)]))
                .unwrap()
                .sweep_interval()
        };
        assert_eq!(with("1800"), Duration::from_secs(60));
        assert_eq!(with("30"), Duration::from_secs(15));
        assert_eq!(with("1"), Duration::from_millis(500));
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (k, v) in [
            ("LOOM_MCP_TOOLSET", "cor"),
            ("LOOM_MCP_SCHEMA_PROFILE", "tiny"),
            ("LOOM_MCP_AUTH_MODE", "sometimes"),
            ("LOOM_MCP_RATELIMIT_RETRY_MAX_WAIT_S", "-1"),
            ("LOOM_MCP_SESSION_CACHE", "0"),
            ("LOOM_MCP_SESSION_RUN_IDLE_SECONDS", "0"),
        ] {
            let e = McpConfig::from_vars(&vars(&[(k, v)])).unwrap_err();
            assert!(e.contains(k), "{e}");
        }
    }
}
