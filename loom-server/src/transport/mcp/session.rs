//! MCP sessions: `initialize` assigns an id; the client's name becomes the
//! agent of later calls. A session a bearer holds is kept in the store
//! (`loom_ops::store::McpSessionRow`), so any replica, and the server after
//! a restart, answers a request naming one ([`find`]); each server keeps
//! what it read in a bounded in-process cache and asks the store again
//! after [`RECHECK`], so a `DELETE /mcp` another replica answered ends the
//! session here within that time. One opened with no token is kept only
//! in the memory of the server that opened it until a bearer acts in it
//! ([`claim`]): callers without a token add no rows. Sessions never
//! authenticate: every request carries its token.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use loom_core::Caller;
use loom_ops::store::{McpSessionRow, Store};

use super::protocol::Revision;

/// The agent of a client that sends no name.
pub const DEFAULT_AGENT: &str = "claude-desktop";

/// What Loom remembers of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The agent slug from `clientInfo.name`.
    pub agent: String,
    /// The negotiated revision.
    pub revision: Revision,
    /// The principal whose token opened it, if one did: a session is bound
    /// to it ([`Session::held_by`]).
    pub principal: Option<Principal>,
    /// Its implicit run, once a run-scoped call began it.
    pub run: Option<SessionRun>,
    /// When this server opened it or last read it live from the store.
    pub checked: Instant,
    /// Whether the store keeps it: one it no longer keeps (ended, pruned)
    /// is gone, where one it never kept lives in this server's memory.
    pub stored: bool,
    /// When this server last noted in the store that it is in use.
    pub seen: Instant,
}

/// How often a session in use is noted as such in the store, at most:
/// retention keeps a session by its last use, in days.
const SEEN_EVERY: Duration = Duration::from_secs(3_600);

/// How long a server answers for a session from its cache before asking
/// the store again whether it still lives (ended by `DELETE /mcp` on
/// another replica). A read by primary key every few seconds per session
/// in use.
pub const RECHECK: Duration = Duration::from_secs(5);

impl Session {
    /// The session `row` keeps, when it is live and of a revision served.
    fn from_row(row: &McpSessionRow) -> Option<Session> {
        if row.ended_ms.is_some() {
            return None;
        }
        let principal = match (&row.org, &row.subject) {
            (Some(org), Some(subject)) => Some(Principal {
                org: org.clone(),
                subject: subject.clone(),
            }),
            _ => None,
        };
        Some(Session {
            agent: row.agent.clone(),
            revision: Revision::parse(&row.revision)?,
            principal,
            run: None,
            checked: Instant::now(),
            stored: true,
            seen: Instant::now(),
        })
    }

    /// The row the store keeps of it, as session `id`.
    pub fn row(&self, id: &str) -> McpSessionRow {
        McpSessionRow {
            session_id: id.to_owned(),
            agent: self.agent.clone(),
            revision: self.revision.as_str().to_owned(),
            org: self.principal.as_ref().map(|p| p.org.clone()),
            subject: self.principal.as_ref().map(|p| p.subject.clone()),
            ended_ms: None,
        }
    }
}

/// The live session of `id`: from `sessions` while its entry is fresher
/// than [`RECHECK`], else as `store` keeps it (and cached again, with the
/// run this server knew of). A session the store never kept (opened with
/// no token and not yet held, or its write failed) is served from the
/// cache alone, as is any session while the store does not answer; one it
/// kept and no longer does (pruned) is gone.
pub async fn find(sessions: &Sessions, store: &Store, id: &str) -> Option<Session> {
    let cached = sessions.get(id);
    if let Some(s) = &cached
        && (s.checked.elapsed() < RECHECK || !s.stored)
    {
        return cached;
    }
    match store.mcp_session(id).await {
        Ok(Some(row)) => match Session::from_row(&row) {
            Some(mut s) => {
                if let Some(c) = cached {
                    s.run = c.run;
                    s.seen = c.seen;
                }
                if s.seen.elapsed() >= SEEN_EVERY {
                    s.seen = Instant::now();
                    if let Err(e) = store.mcp_session_seen(id).await {
                        tracing::warn!(
                            cause = e.internal_message().unwrap_or(e.message()),
                            "MCP session's use not noted"
                        );
                    }
                }
                sessions.put(id, s.clone());
                Some(s)
            }
            None => {
                sessions.close(id);
                None
            }
        },
        Ok(None) => {
            sessions.close(id);
            None
        }
        Err(e) => {
            tracing::warn!(
                cause = e.internal_message().unwrap_or(e.message()),
                "MCP session not read from the store; answering from this server's cache"
            );
            cached
        }
    }
}

/// Whether `caller` may act in `session` (of id `id`, as [`find`] found
/// it): its holder may; in one no token opened, the first bearer to act
/// becomes its holder, kept in the store first (where another replica's
/// bearer may have been first) and only then in this server's memory, so
/// no request of another bearer is served meanwhile.
pub async fn claim(
    sessions: &Sessions,
    store: &Store,
    id: &str,
    session: &Session,
    caller: &Caller,
) -> bool {
    if let Some(p) = &session.principal {
        return p.is(caller);
    }
    let mut held = session.clone();
    held.principal = Some(Principal::of(caller));
    match store.mcp_session_keep(&held.row(id)).await {
        Ok(true) => {
            held.stored = true;
            sessions.hold(id, held)
        }
        Ok(false) => {
            sessions.close(id);
            false
        }
        // Held in this server's memory alone while the store does not answer.
        Err(e) => {
            tracing::warn!(
                cause = e.internal_message().unwrap_or(e.message()),
                "MCP session not kept in the store: only this server knows it"
            );
            sessions.hold(id, held)
        }
    }
}

/// A session's implicit run, as this process last found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRun {
    /// The org it is in: a session acting in several orgs (an org-wide
    /// token, a platform admin) has a run in each.
    pub org: String,
    /// The run id.
    pub id: String,
    /// When the store last showed it open.
    pub checked: Instant,
}

impl Session {
    /// Its implicit run's id, if it has one.
    pub fn run_id(&self) -> Option<&str> {
        self.run.as_ref().map(|r| r.id.as_str())
    }
}

/// Who opened a session: its token's org and subject. Subjects are named
/// per org, so the same subject in two orgs is two principals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The token's org (`*` for an org-wide token).
    pub org: String,
    /// The token's subject.
    pub subject: String,
}

impl Principal {
    /// The principal of `caller`'s token.
    pub fn of(caller: &Caller) -> Principal {
        Principal {
            org: caller.org.clone(),
            subject: caller.subject.clone(),
        }
    }

    fn is(&self, caller: &Caller) -> bool {
        self.org == caller.org && self.subject == caller.subject
    }
}

impl Session {
    /// Whether `caller` may act in this session: any caller in one no
    /// token opened, else only the principal that opened it.
    pub fn held_by(&self, caller: Option<&Caller>) -> bool {
        match &self.principal {
            None => true,
            Some(p) => caller.is_some_and(|c| p.is(c)),
        }
    }
}

/// A bounded map of live sessions; the oldest is forgotten first.
pub struct Sessions {
    capacity: usize,
    inner: Mutex<(HashMap<String, Session>, VecDeque<String>)>,
}

impl Sessions {
    /// A cache holding at most `capacity` sessions.
    pub fn new(capacity: usize) -> Self {
        Sessions {
            capacity: capacity.max(1),
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// A new session id: 32 random hex characters (visible ASCII).
    pub fn new_id() -> String {
        uuid::Uuid::new_v4().simple().to_string()
    }

    /// Opens a session under a new id ([`Sessions::new_id`]) and returns it.
    pub fn open(&self, session: Session) -> String {
        let id = Self::new_id();
        self.put(&id, session);
        id
    }

    /// The session of that id.
    pub fn get(&self, id: &str) -> Option<Session> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .get(id)
            .cloned()
    }

    /// Keeps session `id`, replacing what was kept of it.
    pub fn put(&self, id: &str, session: Session) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.place(&mut guard, id, session);
    }

    /// Puts `session` under `id` in the locked map, the oldest forgotten
    /// past the capacity.
    fn place(
        &self,
        (map, order): &mut (HashMap<String, Session>, VecDeque<String>),
        id: &str,
        session: Session,
    ) {
        if map.insert(id.to_owned(), session).is_some() {
            return;
        }
        order.push_back(id.to_owned());
        while map.len() > self.capacity {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
    }

    /// Makes `held` (session `id` with its holder) the session kept here,
    /// unless this server holds it for another principal already (two
    /// bearers racing on this server); whether `held`'s holder holds it.
    fn hold(&self, id: &str, held: Session) -> bool {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.0.get_mut(id) {
            Some(kept) => match &kept.principal {
                Some(p) => Some(p) == held.principal.as_ref(),
                None => {
                    kept.principal = held.principal;
                    kept.stored |= held.stored;
                    true
                }
            },
            None => {
                self.place(&mut guard, id, held);
                true
            }
        }
    }

    /// Remembers the session's implicit run in `org`, found open just now.
    pub fn set_run(&self, id: &str, org: &str, run_id: &str) {
        if let Some(s) = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .get_mut(id)
        {
            s.run = Some(SessionRun {
                org: org.to_owned(),
                id: run_id.to_owned(),
                checked: Instant::now(),
            });
        }
    }

    /// Forgets runs that were closed, so their sessions' next calls begin new ones.
    pub fn forget_runs(&self, closed: &[String]) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for s in guard.0.values_mut() {
            if s.run.as_ref().is_some_and(|r| closed.contains(&r.id)) {
                s.run = None;
            }
        }
    }

    /// Ends a session; `false` when it was not known.
    pub fn close(&self, id: &str) -> bool {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        let known = map.remove(id).is_some();
        if known {
            order.retain(|x| x != id);
        }
        known
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `clientInfo.name` as an agent slug: lowercase ASCII letters and digits,
/// runs of anything else as one `-` (`Cursor` → `cursor`,
/// `Claude Code` → `claude-code`); absent or empty → `claude-desktop`.
pub fn agent_slug(client_name: Option<&str>) -> String {
    let mut slug = String::new();
    for c in client_name.unwrap_or("").chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= 64 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-').to_owned();
    if slug.is_empty() {
        DEFAULT_AGENT.to_owned()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(agent: &str) -> Session {
        Session {
            agent: agent.into(),
            revision: Revision::V2025_11_25,
            principal: None,
            run: None,
            checked: Instant::now(),
            stored: false,
            seen: Instant::now(),
        }
    }

    #[test]
    fn slugs() {
        assert_eq!(agent_slug(Some("Cursor")), "cursor");
        assert_eq!(agent_slug(Some("Claude Code")), "claude-code");
        assert_eq!(
            agent_slug(Some("  VS Code (insiders) ")),
            "vs-code-insiders"
        );
        assert_eq!(agent_slug(Some("日本")), "claude-desktop");
        assert_eq!(agent_slug(None), "claude-desktop");
        assert!(agent_slug(Some(&"x".repeat(500))).len() <= 64);
    }

    #[test]
    fn ids_are_visible_ascii_and_sessions_close() {
        let s = Sessions::new(4);
        let id = s.open(session("cursor"));
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert_eq!(s.get(&id).unwrap().agent, "cursor");
        assert!(s.close(&id));
        assert!(s.get(&id).is_none());
        assert!(!s.close(&id));
    }

    #[test]
    fn closed_runs_are_forgotten() {
        let s = Sessions::new(4);
        let a = s.open(session("a"));
        let b = s.open(session("b"));
        s.set_run(&a, "default", "run-a");
        s.set_run(&b, "default", "run-b");
        s.forget_runs(&["run-a".to_owned()]);
        assert_eq!(s.get(&a).unwrap().run_id(), None);
        assert_eq!(s.get(&b).unwrap().run_id(), Some("run-b"));
    }

    #[test]
    fn the_cache_is_bounded_oldest_first() {
        let s = Sessions::new(2);
        let a = s.open(session("a"));
        let b = s.open(session("b"));
        let c = s.open(session("c"));
        assert_eq!(s.len(), 2);
        assert!(s.get(&a).is_none());
        assert!(s.get(&b).is_some() && s.get(&c).is_some());
    }
}
