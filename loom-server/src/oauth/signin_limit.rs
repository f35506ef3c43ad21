//! The brute-force limit on password sign-in: failed attempts are counted
//! per username and per client address in a fixed window
//! (`LOOM_OAUTH_SIGNIN_WINDOW_SECS`, from the first failure). Once either
//! count reaches its limit (`LOOM_OAUTH_SIGNIN_FAILURES_PER_USER`,
//! `…_PER_IP`), every attempt for that username or from that address is
//! refused, before any password is checked, until the window ends; a
//! correct password does not get through meanwhile. A successful sign-in
//! clears its username's count, not its address's (one good account must
//! not buy an address more guesses at others). Counts live in this process.
//!
//! An attempt is counted as a failure when it is let through, before its
//! password is checked, and given back if the password was right: counted
//! only after the check (which takes a password hash's time), a burst of
//! guesses sent at once all passed the limit before the first was counted.

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

    /// Lets one attempt through and counts it as failed, or `Err(wait)`
    /// when `username` or `ip` has used up its failures: how long until the
    /// longer of the two windows ends. A right password then gives the
    /// count back ([`SigninLimit::succeeded`]).
    pub fn attempt(&self, username: &str, ip: Option<IpAddr>) -> Result<(), Duration> {
        let mut counts = self.lock();
        let now = Instant::now();
        let keys = [
            Some((Key::User(username.to_owned()), self.per_user)),
            ip.map(|ip| (Key::Ip(ip), self.per_ip)),
        ];
        let wait = keys
            .iter()
            .flatten()
            .filter_map(|(key, limit)| {
                let (start, n) = counts.get(key)?;
                let left = self.window.saturating_sub(now.duration_since(*start));
                (*n >= *limit && !left.is_zero()).then_some(left)
            })
            .max();
        if let Some(wait) = wait {
            return Err(wait);
        }
        if counts.len() > SWEEP_OVER {
            counts.retain(|_, (start, _)| now.duration_since(*start) < self.window);
        }
        for (key, _) in keys.into_iter().flatten() {
            let e = counts.entry(key).or_insert((now, 0));
            if now.duration_since(e.0) >= self.window {
                *e = (now, 0);
            }
            e.1 = e.1.saturating_add(1);
        }
        Ok(())
    }

    /// A right password: clears `username`'s count, and gives back the
    /// attempt counted against `ip`.
    pub fn succeeded(&self, username: &str, ip: Option<IpAddr>) {
        let mut counts = self.lock();
        counts.remove(&Key::User(username.to_owned()));
        if let Some(e) = ip.and_then(|ip| counts.get_mut(&Key::Ip(ip))) {
            e.1 = e.1.saturating_sub(1);
        }
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
            assert!(l.attempt("ana", ip).is_ok());
        }
        let wait = l.attempt("ana", ip).unwrap_err();
        assert!(wait > Duration::from_secs(800) && wait <= Duration::from_secs(900));
        assert!(l.attempt("ana", Some("10.0.0.2".parse().unwrap())).is_err());
        assert!(l.attempt("bo", ip).is_ok());
    }

    /// Attempts in flight count: as many as the limit get through to the
    /// password check before any of them is answered, and no more.
    #[test]
    fn attempts_at_once_are_counted_as_they_are_let_through() {
        let l = limit(5, 100);
        let through = (0..12).filter(|_| l.attempt("dave", None).is_ok()).count();
        assert_eq!(through, 5);
    }

    #[test]
    fn an_address_locks_across_usernames_and_success_keeps_its_count() {
        let l = limit(100, 2);
        let ip = Some("10.0.0.9".parse().unwrap());
        assert!(l.attempt("a", ip).is_ok());
        l.succeeded("a", ip);
        assert!(l.attempt("b", ip).is_ok());
        assert!(l.attempt("c", ip).is_ok());
        assert!(l.attempt("c", ip).is_err());
        assert!(l.attempt("c", Some("10.0.0.8".parse().unwrap())).is_ok());
    }

    #[test]
    fn success_clears_the_username() {
        let l = limit(2, 100);
        assert!(l.attempt("ana", None).is_ok());
        l.succeeded("ana", None);
        assert!(l.attempt("ana", None).is_ok());
        assert!(l.attempt("ana", None).is_ok());
        assert!(l.attempt("ana", None).is_err());
    }
}
