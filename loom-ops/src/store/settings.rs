//! The `settings` table: named values the store keeps for the server
//! itself (a telemetry table's definition, the full-text index's clean
//! size), read and replaced whole, shared by every replica.

use sqlx::AnyConnection;

/// The value kept under `name`, if any.
pub(super) async fn read(
    conn: &mut AnyConnection,
    name: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await
}

/// Keeps `value` under `name`, replacing what was there.
pub(super) async fn write(
    conn: &mut AnyConnection,
    name: &str,
    value: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO settings (name, value, created_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    )
    .bind(name)
    .bind(value)
    .bind(super::now_ms())
    .execute(conn)
    .await
    .map(drop)
}
