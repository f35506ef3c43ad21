//! The brute-force limit on password sign-in: failed attempts are counted
//! per username and per client address in a fixed window
//! (`LOOM_OAUTH_SIGNIN_WINDOW_SECS`, from the first failure). Once either
//! count reaches its limit (`LOOM_OAUTH_SIGNIN_FAILURES_PER_USER`,
//! `…_PER_IP`), every attempt for that username or from that address is
//! refused, before any password is checked, until the window ends; a
//! correct password does not get through meanwhile. A successful sign-in
//! clears its username's count, not its address's (one good account must
//! not buy an address more guesses at others). Counts live in this process.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::Config;

/// Past this many tracked keys, lapsed windows are swept on the next failure.
const SWEEP_OVER: usize = 10_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    User(String),
    Ip(IpAddr),
}

/// Failed sign-ins per username and per address.
#[derive(Debug)]
pub struct SigninLimit {
    per_user: u32,
    per_ip: u32,
    window: Duration,
    counts: Mutex<HashMap<Key, (Instant, u32)>>,
}

impl SigninLimit {
    /// The limits of `config`.
    pub fn new(config: &Config) -> SigninLimit {
        SigninLimit {
            per_user: config.signin_failures_per_user,
            per_ip: config.signin_failures_per_ip,
            window: config.signin_window,
            counts: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (Instant, u32)>> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Err(wait)` when `username` or `ip` has used up its failures: how
    /// long until the longer of the two windows ends.
    pub fn check(&self, username: &str, ip: Option<IpAddr>) -> Result<(), Duration> {
        let counts = self.lock();
        let now = Instant::now();
        let mut wait = Duration::ZERO;
        let mut blocked = |key: Key, limit: u32| {
            if let Some((start, n)) = counts.get(&key) {
                let left = self.window.saturating_sub(now.duration_since(*start));
                if *n >= limit && !left.is_zero() {
                    wait = wait.max(left);
                }
            }
        };
        blocked(Key::User(username.to_owned()), self.per_user);
        if let Some(ip) = ip {
            blocked(Key::Ip(ip), self.per_ip);
        }
        if wait.is_zero() { Ok(()) } else { Err(wait) }
    }

    /// Counts one failed sign-in.
    pub fn failed(&self, username: &str, ip: Option<IpAddr>) {
        let mut counts = self.lock();
        let now = Instant::now();
        if counts.len() > SWEEP_OVER {
            counts.retain(|_, (start, _)| now.duration_since(*start) < self.window);
        }
        let mut bump = |key: Key| {
            let e = counts.entry(key).or_insert((now, 0));
            if now.duration_since(e.0) >= self.window {
                *e = (now, 0);
            }
            e.1 = e.1.saturating_add(1);
        };
        bump(Key::User(username.to_owned()));
        if let Some(ip) = ip {
            bump(Key::Ip(ip));
        }
    }

    /// Clears `username`'s count after a successful sign-in.
    pub fn succeeded(&self, username: &str) {
        self.lock().remove(&Key::User(username.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_user: u32, per_ip: u32) -> SigninLimit {
        let config = Config {
            signin_failures_per_user: per_user,
            signin_failures_per_ip: per_ip,
            ..Config::default()
        };
        SigninLimit::new(&config)
    }

    #[test]
    fn a_username_locks_after_its_failures_and_others_do_not() {
        let l = limit(3, 100);
        let ip = Some("10.0.0.1".parse().unwrap());
        for _ in 0..3 {
            assert!(l.check("ana", ip).is_ok());
            l.failed("ana", ip);
        }
        let wait = l.check("ana", ip).unwrap_err();
        assert!(wait > Duration::from_secs(800) && wait <= Duration::from_secs(900));
        assert!(l.check("ana", Some("10.0.0.2".parse().unwrap())).is_err());
        assert!(l.check("bo", ip).is_ok());
    }

    #[test]
    fn an_address_locks_across_usernames_and_success_keeps_its_count() {
        let l = limit(100, 2);
        let ip = Some("10.0.0.9".parse().unwrap());
        l.failed("a", ip);
        l.succeeded("a");
        l.failed("b", ip);
        assert!(l.check("c", ip).is_err());
        assert!(l.check("c", Some("10.0.0.8".parse().unwrap())).is_ok());
    }

    #[test]
    fn success_clears_the_username() {
        let l = limit(2, 100);
        l.failed("ana", None);
        l.succeeded("ana");
        l.failed("ana", None);
        assert!(l.check("ana", None).is_ok());
        l.failed("ana", None);
        assert!(l.check("ana", None).is_err());
    }
}
