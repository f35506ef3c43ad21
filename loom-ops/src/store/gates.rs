//! What the call pipeline keeps in the store: the JWT signing key, the
//! first-start org, revocations, grants, idempotency keys and the call
//! ledger. Everything lives in the database so every replica shares it.

use std::sync::Arc;

use loom_core::{AgentEvent, BoxFuture, EventSink, LoomError, NamespaceFacts, OpResult, Role};

use super::{Store, db_error, now_ms};

/// The `settings` row holding the generated JWT signing key (hex).
pub const SIGNING_KEY_SETTING: &str = "jwt_signing_key";

/// What an idempotency key lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdemBegin {
    /// The key is new (or its old answer expired): this call runs and stores its answer.
    Owned,
    /// The stored answer to replay.
    Replay {
        /// The HTTP status.
        status: u16,
        /// The body, as JSON text.
        body: String,
    },
    /// The key was used with a different request.
    Mismatch,
    /// A call with this key is still running.
    InFlight,
}

/// A namespace as authorization sees it ([`Store::namespace_access`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceAccess {
    /// The namespace exists in the org.
    pub exists: bool,
    /// It refuses every other org.
    pub restricted: bool,
    /// The subject's `grants` row on it.
    pub granted: Option<Role>,
}

/// One grant row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRow {
    /// The subject.
    pub subject: String,
    /// The granted role.
    pub role: Role,
    /// Who granted it.
    pub granted_by: String,
    /// When (milliseconds since the Unix epoch).
    pub created_ms: i64,
}

fn parse_role(s: &str) -> OpResult<Role> {
    s.parse()
        .map_err(|e: String| LoomError::internal(format!("grants row: {e}")))
}

impl Store {
    /// The stored signing key; on a store without one, stores `generated`
    /// first. Replicas racing on an empty store all end up with the one row
    /// that won.
    pub async fn signing_key(&self, generated: &str) -> OpResult<String> {
        sqlx::query("INSERT INTO settings (name, value, created_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
            .bind(SIGNING_KEY_SETTING)
            .bind(generated)
            .bind(now_ms())
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        let (value,): (String,) = sqlx::query_as("SELECT value FROM settings WHERE name = $1")
            .bind(SIGNING_KEY_SETTING)
            .fetch_one(self.writer())
            .await
            .map_err(db_error)?;
        Ok(value)
    }

    /// Creates a namespace, and its org when the org is new: `Created`, or
    /// the kind and restriction of the namespace already there, which is
    /// left as it is. The caller checked the names and the kind.
    pub async fn create_namespace(&self, ns: &NewNamespace<'_>) -> OpResult<NamespaceCreated> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO orgs (org, created_ms) VALUES ($1, $2) ON CONFLICT (org) DO NOTHING",
        )
        .bind(ns.org)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let inserted = sqlx::query(
            "INSERT INTO namespaces (org, namespace, kind, restricted, description, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (org, namespace) DO NOTHING",
        )
        .bind(ns.org)
        .bind(ns.namespace)
        .bind(ns.kind)
        .bind(ns.restricted)
        .bind(ns.description)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?
        .rows_affected();
        let answer = if inserted == 1 {
            NamespaceCreated::Created
        } else {
            let (kind, restricted): (String, i64) = sqlx::query_as(
                "SELECT kind, CAST(CASE WHEN restricted THEN 1 ELSE 0 END AS BIGINT) \
                 FROM namespaces WHERE org = $1 AND namespace = $2",
            )
            .bind(ns.org)
            .bind(ns.namespace)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            NamespaceCreated::Existed {
                kind,
                restricted: restricted != 0,
            }
        };
        tx.commit().await.map_err(db_error)?;
        Ok(answer)
    }

    /// The namespaces of `org` (every org's when `None`), by org and name:
    /// org, namespace, kind, restricted.
    pub async fn namespaces(
        &self,
        org: Option<&str>,
    ) -> OpResult<Vec<(String, String, String, bool)>> {
        let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT org, namespace, kind, CAST(CASE WHEN restricted THEN 1 ELSE 0 END AS BIGINT) \
             FROM namespaces WHERE $1 = '' OR org = $1 ORDER BY org, namespace",
        )
        .bind(org.unwrap_or(""))
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(org, namespace, kind, restricted)| (org, namespace, kind, restricted != 0))
            .collect())
    }

    /// On a store with no org, creates org `default` with namespace
    /// `default`; returns whether it did.
    pub async fn ensure_default_org(&self) -> OpResult<bool> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let (orgs,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM orgs")
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        if orgs > 0 {
            tx.rollback().await.map_err(db_error)?;
            return Ok(false);
        }
        let now = now_ms();
        sqlx::query(
            "INSERT INTO orgs (org, created_ms) VALUES ($1, $2) ON CONFLICT (org) DO NOTHING",
        )
        .bind("default")
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO namespaces (org, namespace, created_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (org, namespace) DO NOTHING",
        )
        .bind("default")
        .bind("default")
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    /// What authorizing a call in `org/namespace` needs to know of it and
    /// of `subject`'s grant there. Every call's pipeline asks this, so an
    /// answer is kept a short while (`access_cache`, which says what that
    /// costs); [`Store::namespace_access_now`] always reads.
    pub async fn namespace_access(
        &self,
        org: &str,
        namespace: &str,
        subject: &str,
    ) -> OpResult<NamespaceAccess> {
        let now = std::time::Instant::now();
        if let Some(kept) = self.access.get(org, namespace, subject, now) {
            return Ok(kept);
        }
        let read = self.access.begin_read(now);
        let access = self.namespace_access_now(org, namespace, subject).await?;
        self.access.keep(org, namespace, subject, &access, read);
        Ok(access)
    }

    /// [`Store::namespace_access`] read from the database, in one
    /// statement (one round trip, not one per fact).
    pub async fn namespace_access_now(
        &self,
        org: &str,
        namespace: &str,
        subject: &str,
    ) -> OpResult<NamespaceAccess> {
        const ACCESS: &str = "SELECT (SELECT CAST(CASE WHEN restricted THEN 1 ELSE 0 END AS BIGINT) \
                FROM namespaces WHERE org = $1 AND namespace = $2), \
            (SELECT role FROM grants WHERE org = $1 AND namespace = $2 AND subject = $3)";
        // Two primary-key lookups: a point read (`read_inline`).
        let inline = self.read_inline(|conn| {
            super::first_row(conn, ACCESS, &[&org, &namespace, &subject], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .ok_or(rusqlite::Error::QueryReturnedNoRows)
        });
        let (restricted, role): (Option<i64>, Option<String>) = match inline {
            Some(found) => found?,
            None => sqlx::query_as(ACCESS)
                .bind(org)
                .bind(namespace)
                .bind(subject)
                .fetch_one(&mut *self.read().await?)
                .await
                .map_err(db_error)?,
        };
        Ok(NamespaceAccess {
            exists: restricted.is_some(),
            restricted: restricted.is_some_and(|r| r != 0),
            granted: role.as_deref().map(parse_role).transpose()?,
        })
    }

    /// The namespace's kind (personal, memory, collection, code, tracker),
    /// or `None` when it does not exist: read only to word a refusal, off
    /// the path of calls that pass.
    pub async fn namespace_kind(&self, org: &str, namespace: &str) -> OpResult<Option<String>> {
        let kind: Option<(String,)> =
            sqlx::query_as("SELECT kind FROM namespaces WHERE org = $1 AND namespace = $2")
                .bind(org)
                .bind(namespace)
                .fetch_optional(self.reader())
                .await
                .map_err(db_error)?;
        Ok(kind.map(|(k,)| k))
    }

    /// Forgets what [`Store::namespace_access`] kept: for a write that
    /// changed namespaces or grants, once it has committed.
    pub fn forget_namespace_access(&self) {
        self.access.forget_all();
    }

    /// The memory-kind (memory, personal) namespaces of `org` in name
    /// order, each with what the access rule ([`loom_core::access`]) reads
    /// of it for `subject`: one statement, a range of the namespaces'
    /// primary key and a grant lookup each (on SQLite, on the calling
    /// thread: [`Store::read_inline`]).
    pub async fn memory_namespaces(
        &self,
        org: &str,
        subject: &str,
    ) -> OpResult<Vec<(String, NamespaceFacts)>> {
        const MEMORY_KIND: &str = "SELECT n.namespace, \
                CAST(CASE WHEN n.restricted THEN 1 ELSE 0 END AS BIGINT), g.role \
            FROM namespaces n LEFT JOIN grants g \
              ON g.org = n.org AND g.namespace = n.namespace AND g.subject = $2 \
            WHERE n.org = $1 AND n.kind IN ('memory', 'personal') ORDER BY n.namespace";
        let inline = self.read_inline(|conn| {
            super::all_rows(conn, MEMORY_KIND, &[&org, &subject], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
        });
        let rows: Vec<(String, i64, Option<String>)> = match inline {
            Some(found) => found?,
            None => sqlx::query_as(MEMORY_KIND)
                .bind(org)
                .bind(subject)
                .fetch_all(&mut *self.read().await?)
                .await
                .map_err(db_error)?,
        };
        rows.into_iter()
            .map(|(namespace, restricted, role)| {
                let facts = NamespaceFacts {
                    restricted: restricted != 0,
                    granted: role.as_deref().map(parse_role).transpose()?,
                };
                Ok((namespace, facts))
            })
            .collect()
    }

    /// The namespaces of `org` where `subject` holds a grant, by name.
    pub async fn granted_namespaces(&self, org: &str, subject: &str) -> OpResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT namespace FROM grants WHERE org = $1 AND subject = $2 ORDER BY namespace",
        )
        .bind(org)
        .bind(subject)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }

    /// Every revoked token id.
    pub async fn revoked_jtis(&self) -> OpResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT jti FROM revoked_tokens")
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
        Ok(rows.into_iter().map(|(j,)| j).collect())
    }

    /// Adds `jti` to the revocation list; false when it was already there.
    pub async fn revoke_token(&self, jti: &str) -> OpResult<bool> {
        let done = sqlx::query("INSERT INTO revoked_tokens (jti, revoked_ms) VALUES ($1, $2) ON CONFLICT (jti) DO NOTHING")
            .bind(jti)
            .bind(now_ms())
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Every grant on `org/namespace`, by subject.
    pub async fn grants(&self, org: &str, namespace: &str) -> OpResult<Vec<GrantRow>> {
        let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT subject, role, granted_by, created_ms FROM grants \
             WHERE org = $1 AND namespace = $2 ORDER BY subject",
        )
        .bind(org)
        .bind(namespace)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        rows.into_iter()
            .map(|(subject, role, granted_by, created_ms)| {
                Ok(GrantRow {
                    subject,
                    role: parse_role(&role)?,
                    granted_by,
                    created_ms,
                })
            })
            .collect()
    }

    /// Looks up (or claims) an idempotency key. A row older than `ttl_ms`,
    /// or an in-flight row older than `stale_ms` (its call died), is taken over.
    pub async fn idempotency_begin(
        &self,
        principal: (&str, &str),
        key: &str,
        op: &str,
        request_hash: &str,
        ttl_ms: i64,
        stale_ms: i64,
    ) -> OpResult<IdemBegin> {
        // One write transaction (on SQLite, a place in a group commit), so
        // the claim costs no commit of its own.
        let mut tx = self.begin_write().await?;
        let found = claim(
            tx.conn(),
            principal,
            key,
            (op, request_hash),
            ttl_ms,
            stale_ms,
        )
        .await?;
        tx.commit_unaudited().await?;
        match found {
            Some(found) => Ok(found),
            // Deleted between two statements (a failed call released it): claim it again.
            None => {
                Box::pin(self.idempotency_begin(principal, key, op, request_hash, ttl_ms, stale_ms))
                    .await
            }
        }
    }

    /// Stores the answer of the call that owns the key.
    pub async fn idempotency_finish(
        &self,
        principal: (&str, &str),
        key: &str,
        status: u16,
        body: &str,
    ) -> OpResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', status = $1, body = $2 \
             WHERE org = $3 AND subject = $4 AND idem_key = $5",
        )
        .bind(i64::from(status))
        .bind(body)
        .bind(principal.0)
        .bind(principal.1)
        .bind(key)
        .execute(tx.conn())
        .await
        .map_err(db_error)?;
        tx.commit_unaudited().await
    }

    /// Forgets a key whose call failed, so a retry with it runs again.
    pub async fn idempotency_release(&self, principal: (&str, &str), key: &str) -> OpResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE org = $1 AND subject = $2 AND idem_key = $3",
        )
        .bind(principal.0)
        .bind(principal.1)
        .bind(key)
        .execute(tx.conn())
        .await
        .map_err(db_error)?;
        tx.commit_unaudited().await
    }

    /// Writes a batch of ledger rows in one transaction.
    pub async fn insert_agent_events(&self, events: &Arc<[AgentEvent]>) -> OpResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let batch = events.clone();
        if let Some(done) = self
            .write_direct(move |conn| insert_agent_events_direct(conn, &batch))
            .await
        {
            return done.map(drop);
        }
        let mut tx = self.begin_write().await?;
        super::execute_chunked(tx.conn(), events, 14, insert_agent_events_sql, |q, e| {
            q.bind(&e.org)
                .bind(&e.namespace)
                .bind(&e.subject)
                .bind(&e.agent)
                .bind(e.consumer.as_deref())
                .bind(&e.op)
                .bind(e.transport.as_str())
                .bind(e.run_id.as_deref())
                .bind(e.session_id.as_deref())
                .bind(&e.request_id)
                .bind(&e.outcome)
                .bind(i64::from(e.status))
                .bind(i64::try_from(e.latency_ms).unwrap_or(i64::MAX))
                .bind(e.at_ms)
        })
        .await?;
        tx.commit_unaudited().await
    }
}

/// An `agent_events` row's columns, as both writes of the ledger bind them.
const AGENT_EVENT_COLUMNS: &str = "org, namespace, subject, agent, consumer, op, transport, \
     run_id, session_id, request_id, outcome, status, latency_ms, at_ms";

/// The ledger's insert of the `VALUES` rows `values`, on either path.
fn insert_agent_events_sql(values: &str) -> String {
    format!("INSERT INTO agent_events ({AGENT_EVENT_COLUMNS}) VALUES {values}")
}

/// [`Store::insert_agent_events`] on SQLite's direct writer: a statement
/// per chunk of rows (`store::multirow` says why).
fn insert_agent_events_direct(
    conn: &rusqlite::Connection,
    events: &[AgentEvent],
) -> rusqlite::Result<usize> {
    use rusqlite::types::ValueRef;
    super::execute_chunked_direct(conn, events, insert_agent_events_sql, |e| {
        [
            ValueRef::from(e.org.as_str()),
            ValueRef::from(e.namespace.as_str()),
            ValueRef::from(e.subject.as_str()),
            ValueRef::from(e.agent.as_str()),
            ValueRef::from(e.consumer.as_deref()),
            ValueRef::from(e.op.as_str()),
            ValueRef::from(e.transport.as_str()),
            ValueRef::from(e.run_id.as_deref()),
            ValueRef::from(e.session_id.as_deref()),
            ValueRef::from(e.request_id.as_str()),
            ValueRef::from(e.outcome.as_str()),
            ValueRef::Integer(i64::from(e.status)),
            ValueRef::Integer(i64::try_from(e.latency_ms).unwrap_or(i64::MAX)),
            ValueRef::Integer(e.at_ms),
        ]
    })
}

impl EventSink for Store {
    fn write_events<'a>(
        &'a self,
        events: &'a Arc<[AgentEvent]>,
    ) -> BoxFuture<'a, Result<(), LoomError>> {
        Box::pin(self.insert_agent_events(events))
    }
}

/// [`Store::idempotency_begin`]'s statements; `None` when the key's row
/// vanished between them (its call failed and released it).
async fn claim(
    conn: &mut sqlx::AnyConnection,
    principal: (&str, &str),
    key: &str,
    (op, request_hash): (&str, &str),
    ttl_ms: i64,
    stale_ms: i64,
) -> OpResult<Option<IdemBegin>> {
    let (org, subject) = principal;
    let now = now_ms();
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (org, subject, idem_key, op, request_hash, state, created_ms) \
         VALUES ($1, $2, $3, $4, $5, 'in_flight', $6) ON CONFLICT (org, subject, idem_key) DO NOTHING",
    )
    .bind(org)
    .bind(subject)
    .bind(key)
    .bind(op)
    .bind(request_hash)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    if inserted.rows_affected() == 1 {
        return Ok(Some(IdemBegin::Owned));
    }
    let row: Option<(String, String, String, i64, String, i64)> = sqlx::query_as(
        "SELECT op, request_hash, state, status, body, created_ms FROM idempotency_keys \
         WHERE org = $1 AND subject = $2 AND idem_key = $3",
    )
    .bind(org)
    .bind(subject)
    .bind(key)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    let Some((old_op, old_hash, state, status, body, created_ms)) = row else {
        return Ok(None);
    };
    let expired =
        now - created_ms > ttl_ms || (state == "in_flight" && now - created_ms > stale_ms);
    if expired {
        let taken = sqlx::query(
            "UPDATE idempotency_keys SET op = $1, request_hash = $2, state = 'in_flight', status = 0, \
             body = '', created_ms = $3 WHERE org = $4 AND subject = $5 AND idem_key = $6 AND created_ms = $7",
        )
        .bind(op)
        .bind(request_hash)
        .bind(now)
        .bind(org)
        .bind(subject)
        .bind(key)
        .bind(created_ms)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
        return Ok(Some(if taken.rows_affected() == 1 {
            IdemBegin::Owned
        } else {
            IdemBegin::InFlight
        }));
    }
    Ok(Some(if old_op != op || old_hash != request_hash {
        IdemBegin::Mismatch
    } else if state == "in_flight" {
        IdemBegin::InFlight
    } else {
        IdemBegin::Replay {
            status: u16::try_from(status).unwrap_or(500),
            body,
        }
    }))
}

/// A namespace to create ([`Store::create_namespace`]).
#[derive(Clone, Copy, Debug)]
pub struct NewNamespace<'a> {
    /// Its org (created with it when new).
    pub org: &'a str,
    /// Its name.
    pub namespace: &'a str,
    /// personal, memory, collection, code or tracker.
    pub kind: &'a str,
    /// Whether it refuses every other org, platform admins included.
    pub restricted: bool,
    /// What it holds, in words.
    pub description: &'a str,
}

/// What [`Store::create_namespace`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceCreated {
    /// It is new.
    Created,
    /// It was there already, with this kind and restriction.
    Existed {
        /// Its kind.
        kind: String,
        /// Whether it is restricted.
        restricted: bool,
    },
}
