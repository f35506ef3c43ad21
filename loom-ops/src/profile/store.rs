//! The profile in SQL.

use loom_core::{OpCx, OpResult};
use sqlx::AnyConnection;

use super::model::Profile;
use crate::store::{Store, db_error, first_row, rfc3339};

#[derive(sqlx::FromRow)]
struct Row {
    persona: String,
    preferences: String,
    goals: String,
    version: i64,
    updated_ms: i64,
}

const LOAD: &str = "SELECT persona, preferences, goals, version, updated_ms FROM profile \
                    WHERE org = $1 AND namespace = $2";

/// The namespace's profile (empty, version 0, when never set).
pub async fn load(conn: &mut AnyConnection, cx: &OpCx) -> OpResult<Profile> {
    let row: Option<Row> = sqlx::query_as(LOAD)
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    Ok(profile(cx, row))
}

/// [`load`] as a read of its own: a primary-key lookup, so on SQLite a
/// point read on the calling thread ([`Store::read_inline`]).
pub async fn read(store: &Store, cx: &OpCx) -> OpResult<Profile> {
    let inline = store.read_inline(|conn| {
        first_row(conn, LOAD, &[&cx.scope.org, &cx.scope.namespace], |r| {
            Ok(Row {
                persona: r.get(0)?,
                preferences: r.get(1)?,
                goals: r.get(2)?,
                version: r.get(3)?,
                updated_ms: r.get(4)?,
            })
        })
    });
    match inline {
        Some(row) => Ok(profile(cx, row?)),
        None => load(&mut *store.read().await?, cx).await,
    }
}

fn profile(cx: &OpCx, row: Option<Row>) -> Profile {
    match row {
        None => Profile {
            namespace: cx.scope.namespace.clone(),
            ..Profile::default()
        },
        Some(r) => Profile {
            namespace: cx.scope.namespace.clone(),
            persona: r.persona,
            preferences: r.preferences,
            goals: r.goals,
            version: r.version,
            updated_at: Some(rfc3339(r.updated_ms)),
        },
    }
}

/// Writes `p` as version `p.version` over version `p.version - 1`; false
/// when another write got there first.
pub async fn save(conn: &mut AnyConnection, cx: &OpCx, p: &Profile, now: i64) -> OpResult<bool> {
    let sql = if p.version == 1 {
        "INSERT INTO profile (org, namespace, persona, preferences, goals, version, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (org, namespace) DO NOTHING"
    } else {
        "UPDATE profile SET persona = $3, preferences = $4, goals = $5, version = $6, updated_ms = $7 \
         WHERE org = $1 AND namespace = $2 AND version = $6 - 1"
    };
    let done = sqlx::query(sql)
        .bind(&cx.scope.org)
        .bind(&cx.scope.namespace)
        .bind(&p.persona)
        .bind(&p.preferences)
        .bind(&p.goals)
        .bind(p.version)
        .bind(now)
        .execute(conn)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}
