//! `notifications/cancelled`: the requests in flight, by who sent them and
//! their id, so that a client's cancellation stops the call it names.
//!
//! A request is known by its sender's scope and its JSON-RPC id. The scope
//! is the session when the request carries one (its id is a random secret,
//! and a client never reuses a request id within a session), else the
//! caller's org and subject. A cancellation can arrive before the request
//! it names is registered (they are two POSTs, possibly on two
//! connections); within a session it is then kept, boundedly, and the
//! request is cancelled as it arrives. Without a session ids are reused
//! freely (every stateless client counts from 0), so an early cancellation
//! there is dropped: it might otherwise cancel another client's request.
//!
//! What cancelling does is the pipeline's ([`crate::pipeline`]): a call
//! not yet begun is not made, one running is stopped as its latency budget
//! would stop it; a write the store has already made stays made.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use foldhash::{HashMap, HashSet};

use super::endpoint::Connection;
use super::jsonrpc::Id;
use crate::pipeline::Cancel;

/// Early cancellations kept at most, across sessions; the oldest go first.
const EARLY_CAPACITY: usize = 1024;

/// A request's sender and id, as one 64-bit hash under a per-process
/// random seed: every MCP request is registered, and hashing what it
/// already holds allocates nothing. Two requests in flight whose hashes
/// collide (one in 2^64 a pair, and no sender can aim at another's without
/// the seed) would share a cancellation.
type Key = u64;

#[derive(Default)]
struct Inner {
    /// Requests in flight, each with its registration's serial (two
    /// requests of one id at once are a client's bug; the later one is
    /// cancellable and the earlier one's end does not unregister it).
    running: HashMap<Key, (u64, Arc<Cancel>)>,
    serial: u64,
    /// Cancellations of requests not (yet) in flight, within sessions.
    early: HashSet<Key>,
    early_order: VecDeque<Key>,
}

/// The requests in flight on this server.
#[derive(Default)]
pub struct InFlight {
    inner: Arc<Mutex<Inner>>,
    seed: foldhash::quality::RandomState,
}

/// A request's registration: its cancellation, set when the client cancels
/// the request; dropped when the request is answered.
pub struct Registration {
    inner: Arc<Mutex<Inner>>,
    key: Key,
    serial: u64,
    cancel: Arc<Cancel>,
}

impl Registration {
    /// The cancellation the request's call watches.
    pub fn cancel(&self) -> &Arc<Cancel> {
        &self.cancel
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = lock(&self.inner);
        if inner
            .running
            .get(&self.key)
            .is_some_and(|(serial, _)| *serial == self.serial)
        {
            inner.running.remove(&self.key);
        }
    }
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl InFlight {
    /// The key of request `id` from this connection's sender, and whether
    /// the sender is a session.
    fn key(&self, conn: &Connection, id: &Id) -> (Key, bool) {
        let mut h = self.seed.build_hasher();
        let in_session = match (&conn.session_id, &conn.caller) {
            (Some(session), _) => {
                0u8.hash(&mut h);
                session.hash(&mut h);
                true
            }
            (None, Some(caller)) => {
                1u8.hash(&mut h);
                caller.org.hash(&mut h);
                caller.subject.hash(&mut h);
                false
            }
            (None, None) => {
                2u8.hash(&mut h);
                false
            }
        };
        // A string id and a number id of the same digits are two ids.
        match id {
            Id::Str(s) => (0u8, s.as_str()).hash(&mut h),
            Id::Num(n) => (1u8, n).hash(&mut h),
        }
        (h.finish(), in_session)
    }

    /// Registers a request about to run; its cancellation is set already
    /// when the client's cancellation came first.
    pub fn begin(&self, conn: &Connection, id: &Id) -> Registration {
        let (key, _) = self.key(conn, id);
        let cancel = Arc::new(Cancel::default());
        let mut inner = lock(&self.inner);
        if !inner.early.is_empty() && inner.early.remove(&key) {
            cancel.cancel();
        }
        inner.serial += 1;
        let serial = inner.serial;
        inner.running.insert(key, (serial, cancel.clone()));
        drop(inner);
        Registration {
            inner: self.inner.clone(),
            key,
            serial,
            cancel,
        }
    }

    /// Cancels the request `id` from this connection's sender: the one in
    /// flight, or, within a session, the one to come.
    pub fn cancel(&self, conn: &Connection, id: &Id) {
        let (key, in_session) = self.key(conn, id);
        let mut inner = lock(&self.inner);
        if let Some((_, cancel)) = inner.running.get(&key) {
            cancel.cancel();
            return;
        }
        if !in_session || inner.early.contains(&key) {
            return;
        }
        // The order may name cancellations used since: bounding it bounds both.
        while inner.early_order.len() >= EARLY_CAPACITY {
            if let Some(old) = inner.early_order.pop_front() {
                inner.early.remove(&old);
            }
        }
        inner.early.insert(key);
        inner.early_order.push_back(key);
    }

    /// Requests in flight (for tests).
    #[cfg(test)]
    fn running(&self) -> usize {
        lock(&self.inner).running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::mcp::protocol;
    use loom_core::{Listing, Profile};

    fn conn(session: Option<&str>) -> Connection {
        Connection {
            listing: Listing::Readonly,
            profile: Profile::Standard,
            revision: protocol::ASSUMED,
            session_id: session.map(str::to_owned),
            session: None,
            caller: None,
            authenticated: true,
            request_id: "r".into(),
            code_scope: None,
            cancel: None,
            rate_wait_left_ms: Arc::default(),
        }
    }

    fn num(n: u64) -> Id {
        Id::Num(n.into())
    }

    #[test]
    fn a_cancellation_reaches_the_request_of_its_sender_and_id_only() {
        let flight = InFlight::default();
        let a = conn(Some("a"));
        let b = conn(Some("b"));
        let one = flight.begin(&a, &num(1));
        let other_session = flight.begin(&b, &num(1));
        let string_id = flight.begin(&a, &Id::Str("1".into()));
        flight.cancel(&a, &num(1));
        assert!(one.cancel().is_cancelled());
        assert!(!other_session.cancel().is_cancelled());
        assert!(!string_id.cancel().is_cancelled());
        drop((one, other_session, string_id));
        assert_eq!(flight.running(), 0);
    }

    #[test]
    fn an_early_cancellation_is_kept_within_a_session_only() {
        let flight = InFlight::default();
        flight.cancel(&conn(Some("a")), &num(7));
        flight.cancel(&conn(None), &num(7));
        assert!(
            flight
                .begin(&conn(Some("a")), &num(7))
                .cancel()
                .is_cancelled()
        );
        // Used once: the id is not cancelled for ever.
        assert!(
            !flight
                .begin(&conn(Some("a")), &num(7))
                .cancel()
                .is_cancelled()
        );
        assert!(!flight.begin(&conn(None), &num(7)).cancel().is_cancelled());
    }

    #[test]
    fn early_cancellations_are_bounded() {
        let flight = InFlight::default();
        let a = conn(Some("a"));
        for n in 0..(EARLY_CAPACITY as u64 + 10) {
            flight.cancel(&a, &num(n));
        }
        assert_eq!(lock(&flight.inner).early.len(), EARLY_CAPACITY);
        // The oldest were forgotten, the newest kept.
        assert!(!flight.begin(&a, &num(0)).cancel().is_cancelled());
        assert!(
            flight
                .begin(&a, &num(EARLY_CAPACITY as u64 + 9))
                .cancel()
                .is_cancelled()
        );
    }

    #[test]
    fn the_end_of_a_replaced_registration_leaves_the_newer_one() {
        let flight = InFlight::default();
        let a = conn(Some("a"));
        let first = flight.begin(&a, &num(1));
        let second = flight.begin(&a, &num(1));
        drop(first);
        flight.cancel(&a, &num(1));
        assert!(second.cancel().is_cancelled());
    }
}
