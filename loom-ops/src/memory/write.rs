//! The logic of the memory writes; handlers in `mod.rs` call these.

use loom_core::{ErrorCode, LoomError, OpCx, OpResult};

use super::model::{MemoryKey, MemorySet, MemoryUpdate, MemoryWritten};
use super::store::{self as sql, Row};
use super::validate::{self, Expiry};
use crate::blacklist::store as blacklist;
use crate::scope::{require_namespace, require_namespace_in};
use crate::store::{Store, now_ms};

/// How often a write re-reads and retries after losing a race it did not
/// ask to detect (no `if_version`).
const RETRIES: usize = 8;
/// How often a `memory.set` tries the one-step write before the path
/// through the group ([`set`]): a race lost to a single other write is
/// won on the second try.
const ONE_STEP_TRIES: usize = 3;

/// `RESOURCE_NOT_FOUND` for a key.
pub fn not_found(cx: &OpCx, key: &str) -> LoomError {
    LoomError::new(
        ErrorCode::ResourceNotFound,
        format!("no memory {key:?} in namespace {:?}", cx.scope.namespace),
    )
    .with_detail("memory_key", key)
}

/// `LOCKED`, naming the agent whose row holds the lock: only an unlock
/// that names that agent releases it.
pub fn locked(key: &str, holder: &str) -> LoomError {
    LoomError::new(
        ErrorCode::Locked,
        format!(
            "{key} is locked by agent {holder}; memory.unlock it with agent {holder:?} first. \
             Nothing was written"
        ),
    )
    .with_detail("memory_key", key)
    .with_detail("locked_by", holder)
}

/// `PINNED_CONFLICT`: a pinned memory is neither deleted nor expired.
fn pinned(key: &str, refused: &str) -> LoomError {
    LoomError::new(
        ErrorCode::PinnedConflict,
        format!("{key} is pinned; memory.unpin it before {refused}. Nothing was written"),
    )
    .with_detail("memory_key", key)
}

fn too_busy(key: &str) -> LoomError {
    LoomError::new(
        ErrorCode::BackendTimeout,
        format!("{key} kept changing under concurrent writes; retry"),
    )
    .with_retry_after(std::time::Duration::from_secs(1))
}

/// The answer of a write.
pub fn written(row: &Row, changed: bool) -> MemoryWritten {
    MemoryWritten {
        memory_key: row.memory_key.clone(),
        namespace: row.namespace.clone(),
        agent: row.agent.clone(),
        version: row.version,
        changed,
        content_hash: row.content_hash.clone(),
    }
}

/// `memory.set`'s arguments, checked.
struct SetValues {
    key: String,
    content: String,
    kind: Option<String>,
    labels: Option<Vec<String>>,
    source: Option<String>,
    expiry: Expiry,
    hash: String,
}

/// What a `memory.set` does to the caller's row as it read it.
enum Plan {
    /// No row yet: insert this one, at version 1.
    Insert(Row),
    /// Write `new` (at `read_version + 1`) over the row at `read_version`.
    Save { read_version: i64, new: Row },
    /// The live row already holds it: change nothing.
    Unchanged(Row),
}

/// A one-step set's plan ([`set_in_one_step`]), made on the calling
/// thread's read of the key: the plan, the caller's row id (a save finds
/// the row by it) and the size for search of the row it writes.
struct Planned {
    plan: Plan,
    own_id: Option<i64>,
    tokens: Option<i64>,
}

/// A pinned memory takes no expiry (pinning removes one).
fn refuse_expiring_a_pin(cur: &Row, expiry: Expiry) -> OpResult<()> {
    if cur.pinned != 0 && matches!(expiry, Expiry::At(_)) {
        return Err(pinned(&cur.memory_key, "giving it an expiry"));
    }
    Ok(())
}

impl SetValues {
    fn check(input: MemorySet) -> OpResult<SetValues> {
        validate::key("memory_key", &input.memory_key)?;
        validate::content(&input.content)?;
        let (kind, labels, expiry) = validate::fields(
            input.kind.as_deref(),
            input.labels.as_deref(),
            input.source.as_deref(),
            input.expires_at.as_ref().map(Option::as_deref),
        )?;
        Ok(SetValues {
            hash: validate::content_hash(&input.content),
            key: input.memory_key,
            content: input.content,
            kind,
            labels,
            source: input.source,
            expiry,
        })
    }

    /// The write that sets these values over `cur`, the caller's row.
    fn plan(&self, cx: &OpCx, cur: Option<Row>, now: i64) -> OpResult<Plan> {
        let Some(cur) = cur else {
            return Ok(Plan::Insert(self.fresh(cx, now)));
        };
        if !cur.live(now) {
            // A deleted or expired memory is gone: what is set now is a new
            // one, its fields as given or their defaults (nothing of the
            // old row comes back), its version continuing the key's history.
            let mut new = self.fresh(cx, now);
            new.version = cur.version + 1;
            return Ok(Plan::Save {
                read_version: cur.version,
                new,
            });
        }
        // The guards were read before the row: a lock may have landed
        // between the two (PostgreSQL reads each at its own moment).
        if cur.locked != 0 {
            return Err(locked(&self.key, &cur.agent));
        }
        refuse_expiring_a_pin(&cur, self.expiry)?;
        let mut new = cur.clone();
        new.content = self.content.clone();
        new.content_hash = self.hash.clone();
        if let Some(k) = &self.kind {
            new.kind = k.clone();
        }
        if let Some(l) = &self.labels {
            new.labels = validate::labels_json(l);
        }
        if let Some(s) = &self.source {
            new.source = s.clone();
        }
        new.expires_ms = self.expiry.over(cur.expires_ms, now);
        if same(&cur, &new) {
            return Ok(Plan::Unchanged(cur));
        }
        new.updated_ms = now;
        new.version = cur.version + 1;
        Ok(Plan::Save {
            read_version: cur.version,
            new,
        })
    }

    /// The one-step plan over `view`, read on `conn` (SQLite, the calling
    /// thread): refused as the path under the writer refuses (a blacklist
    /// pattern, then a lock), and with the size for search of the row it
    /// writes counted in the same read.
    fn plan_on_view(
        &self,
        conn: &rusqlite::Connection,
        cx: &OpCx,
        view: sql::SetView,
    ) -> OpResult<Planned> {
        blacklist::refuse_matching(view.patterns, &self.content)?;
        if let Some(holder) = &view.locked_by {
            return Err(locked(&self.key, holder));
        }
        let (own, own_id) = view.own.unzip();
        let plan = self.plan(cx, own, now_ms())?;
        let tokens = match &plan {
            Plan::Insert(row) | Plan::Save { new: row, .. } => sql::fts_tokens(conn, row),
            Plan::Unchanged(_) => None,
        };
        Ok(Planned {
            plan,
            own_id,
            tokens,
        })
    }

    /// A new memory of these values: the fields not given take their
    /// defaults.
    fn fresh(&self, cx: &OpCx, now: i64) -> Row {
        Row {
            org: cx.scope.org.clone(),
            namespace: cx.scope.namespace.clone(),
            agent: cx.scope.agent.clone(),
            memory_key: self.key.clone(),
            content: self.content.clone(),
            kind: self
                .kind
                .clone()
                .unwrap_or_else(|| validate::DEFAULT_KIND.to_owned()),
            labels: validate::labels_json(self.labels.as_deref().unwrap_or_default()),
            source: self.source.clone().unwrap_or_default(),
            content_hash: self.hash.clone(),
            version: 1,
            pinned: 0,
            locked: 0,
            deleted: 0,
            expires_ms: self.expiry.over(None, now),
            recall_count: 0,
            last_recall_ms: None,
            created_ms: now,
            updated_ms: now,
        }
    }
}

/// `memory.set`.
pub async fn set(store: &Store, cx: &OpCx, input: MemorySet) -> OpResult<MemoryWritten> {
    let values = SetValues::check(input)?;
    // SQLite: read on the calling thread, write in one step. `None` when
    // that write lost a race with a write not yet committed when it read;
    // by its answer that write has committed (the writer runs writes in
    // order and answers after the commit), so a read now sees it and the
    // next try plans on it. Only after ONE_STEP_TRIES lost races does the
    // set take the path below, which reads again under the group's lock:
    // that lock stops every other write while the set runs its statements
    // one by one: the writer waited 17-20 ms on it for each such set under
    // the benchmark's load (bench/RESULTS.md).
    if store.writes_in_one_step(cx) {
        for _ in 0..ONE_STEP_TRIES {
            let Some(planned) = sql::set_view_inline(store, cx, &values.key, |conn, view| {
                values.plan_on_view(conn, cx, view)
            }) else {
                break;
            };
            if let Some(done) = set_in_one_step(store, cx, planned?).await? {
                return Ok(done);
            }
        }
    }
    let key = values.key.as_str();
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    sql::hold_blacklist(tx.conn(), store, cx, false).await?;
    let (holder, patterns) = sql::set_guards(tx.conn(), cx, key).await?;
    blacklist::refuse_matching(patterns, &values.content)?;
    if let Some(holder) = holder {
        return Err(locked(key, &holder));
    }
    for _ in 0..RETRIES {
        // Taken for each try: a version written after a lost race is
        // stamped after the one it lost to.
        let now = now_ms();
        let cur = sql::own(tx.conn(), cx, &cx.scope.agent, key).await?;
        match values.plan(cx, cur, now)? {
            Plan::Unchanged(cur) => {
                tx.rollback().await?;
                store.audit_outcome(cx, "noop").await?;
                return Ok(written(&cur, false));
            }
            Plan::Insert(row) => {
                if sql::insert(tx.conn(), cx, &row).await? {
                    tx.commit(cx).await?;
                    return Ok(written(&row, true));
                }
            }
            Plan::Save { read_version, new } => {
                if sql::save(tx.conn(), cx, read_version, &new, "set").await? {
                    tx.commit(cx).await?;
                    return Ok(written(&new, true));
                }
            }
        }
    }
    Err(too_busy(key))
}

/// `memory.set` on SQLite, planned on what the calling thread read
/// (committed rows, [`SetValues::plan_on_view`]) and written in one step:
/// one round trip to the writer instead of five
/// ([`Store::write_in_one_step`]). `None`, with nothing written, when the
/// write lost a race with one not yet committed or a row of the key was
/// locked meanwhile. The namespace is checked before what planning found.
async fn set_in_one_step(
    store: &Store,
    cx: &OpCx,
    planned: OpResult<Planned>,
) -> OpResult<Option<MemoryWritten>> {
    require_namespace_in(store, cx).await?;
    let Planned {
        plan,
        own_id,
        tokens,
    } = planned?;
    let done = match plan {
        Plan::Unchanged(cur) => {
            store.audit_outcome(cx, "noop").await?;
            Some(written(&cur, false))
        }
        Plan::Insert(row) => sql::insert_in_one_step(store, cx, &row, tokens)
            .await?
            .then(|| written(&row, true)),
        Plan::Save { read_version, new } => {
            // A save is planned only over the caller's row, read with its id.
            let Some(id) = own_id else {
                return Ok(None);
            };
            sql::save_in_one_step(store, cx, (id, read_version), &new, "set", tokens)
                .await?
                .then(|| written(&new, true))
        }
    };
    Ok(done)
}

fn same(a: &Row, b: &Row) -> bool {
    a.content == b.content
        && a.kind == b.kind
        && a.labels == b.labels
        && a.source == b.source
        && a.expires_ms == b.expires_ms
        && a.deleted == b.deleted
        && a.pinned == b.pinned
        && a.locked == b.locked
}

/// `memory.update`.
pub async fn update(store: &Store, cx: &OpCx, input: MemoryUpdate) -> OpResult<MemoryWritten> {
    let key = input.memory_key.as_str();
    validate::key("memory_key", key)?;
    if input.content.is_none()
        && input.kind.is_none()
        && input.labels.is_none()
        && input.source.is_none()
        && input.expires_at.is_none()
    {
        return Err(validate::invalid(
            "content",
            "nothing to change: name content, kind, labels, source or expires_at",
        ));
    }
    if let Some(c) = &input.content {
        validate::content(c)?;
    }
    let (kind, labels, expiry) = validate::fields(
        input.kind.as_deref(),
        input.labels.as_deref(),
        input.source.as_deref(),
        input.expires_at.as_ref().map(Option::as_deref),
    )?;

    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    if let Some(c) = &input.content {
        sql::hold_blacklist(tx.conn(), store, cx, false).await?;
        blacklist::check(tx.conn(), cx, c).await?;
    }
    for _ in 0..RETRIES {
        let now = now_ms();
        let Some(cur) =
            sql::resolve_for_change(tx.conn(), cx, input.agent.is_some(), key, now).await?
        else {
            return Err(not_found(cx, key));
        };
        if let Some(expected) = input.if_version
            && expected != cur.version
        {
            return Err(sql::version_conflict(key, expected, cur.version));
        }
        // Any agent's lock on the key holds it, as for memory.set.
        if cur.locked != 0 {
            return Err(locked(key, &cur.agent));
        }
        if let Some(holder) = sql::lock_holder(tx.conn(), cx, key).await? {
            return Err(locked(key, &holder));
        }
        refuse_expiring_a_pin(&cur, expiry)?;
        let mut new = cur.clone();
        if let Some(c) = &input.content {
            new.content = c.clone();
            new.content_hash = validate::content_hash(c);
        }
        if let Some(k) = &kind {
            new.kind = k.clone();
        }
        if let Some(l) = &labels {
            new.labels = validate::labels_json(l);
        }
        if let Some(s) = &input.source {
            new.source = s.clone();
        }
        new.expires_ms = expiry.over(cur.expires_ms, now);
        if same(&cur, &new) {
            tx.rollback().await?;
            // Audited as what it was, as a set that changes nothing is.
            store.audit_outcome(cx, "noop").await?;
            return Ok(written(&cur, false));
        }
        new.updated_ms = now;
        if sql::save(tx.conn(), cx, cur.version, &new, "update").await? {
            tx.commit(cx).await?;
            new.version = cur.version + 1;
            return Ok(written(&new, true));
        }
        if let Some(expected) = input.if_version {
            return Err(sql::conflict(tx.conn(), &cur, expected).await?);
        }
    }
    Err(too_busy(key))
}

/// A one-field change of one memory: delete, pin, unpin, lock, unlock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Soft delete (pinned → PINNED_CONFLICT).
    Delete,
    /// Pin.
    Pin,
    /// Unpin.
    Unpin,
    /// Lock.
    Lock,
    /// Unlock.
    Unlock,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Delete => "delete",
            Change::Pin => "pin",
            Change::Unpin => "unpin",
            Change::Lock => "lock",
            Change::Unlock => "unlock",
        }
    }

    /// The row after the change; an error when the row refuses it.
    fn apply(self, cur: &Row) -> OpResult<Row> {
        let mut new = cur.clone();
        if cur.locked != 0 && !matches!(self, Change::Unlock | Change::Lock) {
            return Err(locked(&cur.memory_key, &cur.agent));
        }
        match self {
            Change::Delete if cur.pinned != 0 => {
                return Err(pinned(&cur.memory_key, "deleting"));
            }
            Change::Delete => new.deleted = 1,
            Change::Pin => {
                // A pinned memory does not expire.
                new.pinned = 1;
                new.expires_ms = None;
            }
            Change::Unpin => new.pinned = 0,
            Change::Lock => {
                // A locked memory changes in no way until unlocked: not
                // by its expiry either.
                new.locked = 1;
                new.expires_ms = None;
            }
            Change::Unlock => new.locked = 0,
        }
        Ok(new)
    }
}

/// `memory.delete`, `memory.pin`, `memory.unpin`, `memory.lock`, `memory.unlock`.
pub async fn change(
    store: &Store,
    cx: &OpCx,
    input: MemoryKey,
    change: Change,
) -> OpResult<MemoryWritten> {
    let key = input.memory_key.as_str();
    validate::key("memory_key", key)?;
    let mut tx = store.begin_write().await?;
    require_namespace(tx.conn(), cx).await?;
    if change == Change::Lock {
        // Two agents locking the key at once must not both hold it.
        sql::hold_key(tx.conn(), store, cx, key).await?;
    }
    for _ in 0..RETRIES {
        let now = now_ms();
        let Some(cur) =
            sql::resolve_for_change(tx.conn(), cx, input.agent.is_some(), key, now).await?
        else {
            return Err(not_found(cx, key));
        };
        if let Some(expected) = input.if_version
            && expected != cur.version
        {
            return Err(sql::version_conflict(key, expected, cur.version));
        }
        let mut new = change.apply(&cur)?;
        if let Some(holder) = sql::lock_holder(tx.conn(), cx, key).await? {
            // The row the call means: the agent it names, else its own.
            let meant = input.agent.is_some() || cur.agent == cx.scope.agent;
            let refused = match change {
                // One lock holds the key: another agent's lock, or a lock
                // the call reached only by falling back to another
                // agent's row, is not the caller's to take or release.
                Change::Lock => holder != cur.agent || !meant,
                Change::Unlock => !(meant && cur.locked != 0),
                // Any agent's lock holds the key for every other change,
                // as for memory.set.
                Change::Delete | Change::Pin | Change::Unpin => true,
            };
            if refused {
                return Err(locked(key, &holder));
            }
        }
        if same(&cur, &new) {
            tx.rollback().await?;
            store.audit_outcome(cx, "noop").await?;
            return Ok(written(&cur, false));
        }
        new.updated_ms = now;
        if sql::save(tx.conn(), cx, cur.version, &new, change.name()).await? {
            tx.commit(cx).await?;
            new.version = cur.version + 1;
            return Ok(written(&new, true));
        }
        if let Some(expected) = input.if_version {
            return Err(sql::conflict(tx.conn(), &cur, expected).await?);
        }
    }
    Err(too_busy(key))
}
