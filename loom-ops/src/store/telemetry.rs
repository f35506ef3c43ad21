//! SQLite's telemetry file: the append-only streams calls leave behind (the
//! call ledger `agent_events`, the exposure rows `memory_exposures` and
//! their counts `memory_exposure_counts`) in a database file of their own
//! beside the store's (`loom.db-telemetry` beside `loom.db`), attached to
//! the store's read-write connections as `telemetry` (the point readers,
//! `inline`, never read it). Statements name these tables without a
//! schema and SQLite finds them there; in memory and on PostgreSQL they
//! stay in the one database.
//!
//! Why: a commit that writes a page of a database file makes every reader
//! of that file drop its page cache and memory map at its next read, and
//! fault the pages of the map in again. Under `memory.get` load the
//! batches of ledger and exposure rows committed about twenty times a
//! second, so the readers of the memories paid that for rows they never
//! read. In a file of their own, those commits leave the memories' readers
//! their pages.
//!
//! Durability: the telemetry file commits with `synchronous = NORMAL`, so
//! a batch of telemetry costs no fsync of its own. A commit survives a
//! crash of the process, as before; a crash of the machine may lose the
//! last batches, which were never acknowledged to anyone (what a call
//! queued and its batch had not written yet was always lost to a
//! `kill -9`). The memories keep `synchronous = FULL`.
//!
//! A store made before the file existed holds these tables in its main
//! file: opening it moves them ([`Store::settle_telemetry`]), and the
//! main file keeps each table's definition, so a telemetry file deleted or
//! lost is made again, empty.

use std::path::{Path, PathBuf};

use sqlx::Executor;

use super::{Backend, Store};

/// The tables the telemetry file holds.
const TABLES: [&str; 3] = ["agent_events", "memory_exposures", "memory_exposure_counts"];

/// The schema name the file is attached under, for SQLite's C interface.
pub(super) const SCHEMA_C: &std::ffi::CStr = c"telemetry";
/// [`SCHEMA_C`], for SQL.
const SCHEMA: &str = match SCHEMA_C.to_str() {
    Ok(name) => name,
    Err(_) => panic!("the schema name is UTF-8"),
};

/// The telemetry file of the database file at `main`: its name with
/// `-telemetry` appended, as SQLite names its `-wal` and `-shm` files, so
/// `loom.db*` is the whole store.
pub(super) fn file_of(main: &Path) -> PathBuf {
    let mut name = main.as_os_str().to_owned();
    name.push("-telemetry");
    name.into()
}

/// The statement that attaches the telemetry file of `main`.
fn attach(main: &Path) -> String {
    let file = file_of(main);
    let quoted = file.to_string_lossy().replace('\'', "''");
    format!("ATTACH DATABASE '{quoted}' AS {SCHEMA}")
}

/// What a read-write connection runs after [`attach`]: the file's journal
/// and durability (the module doc).
const SETTINGS: &str =
    "PRAGMA telemetry.journal_mode = WAL; PRAGMA telemetry.synchronous = NORMAL;";

/// A writer's page cache for the file, as for the main file
/// (`open::SQLITE_WRITER_SETTINGS`): a batch of exposure counts lands on
/// rows all over their table.
const WRITER_SETTINGS: &str = "PRAGMA telemetry.cache_size = -32768;";

/// What a read-write connection of the store at `main` runs to attach its
/// telemetry file: [`attach`] and [`SETTINGS`], and for a writer's
/// connection [`WRITER_SETTINGS`] too.
pub(super) fn statements(main: &Path, writer: bool) -> String {
    let mut statements = format!("{}; {SETTINGS}", attach(main));
    if writer {
        statements.push(' ');
        statements.push_str(WRITER_SETTINGS);
    }
    statements
}

/// Opens the telemetry file of `main` once, made when missing: a file
/// that cannot be opened is named at once, where a failed attach would
/// show only as sqlx's pool timing out on its connections.
pub(super) fn check_opens(main: &Path) -> Result<(), String> {
    // The store's own file is opened after this one: a missing directory
    // is named as the store's, not as its side file's.
    if let Some(dir) = main.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(format!(
            "cannot open the store {}: the directory {} does not exist",
            main.display(),
            dir.display()
        ));
    }
    // A store's file that is no SQLite database (a text file, a directory,
    // a truncated copy) is named before its side file is made beside it.
    if main.exists() {
        rusqlite::Connection::open_with_flags(main, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|conn| conn.query_row("PRAGMA schema_version", [], |_| Ok(())))
            .map_err(|e| format!("cannot open the store {}: {e}", main.display()))?;
    }
    let file = file_of(main);
    rusqlite::Connection::open_with_flags(
        &file,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_CREATE,
    )
    .and_then(|conn| conn.query_row("PRAGMA schema_version", [], |_| Ok(())))
    .map_err(|e| format!("cannot open the telemetry file {}: {e}", file.display()))
}

/// What each connection of one of sqlx's pools runs to attach the
/// telemetry file. Cheap to clone.
#[derive(Clone, Debug)]
pub(super) struct Attach {
    statements: std::sync::Arc<str>,
    file: std::sync::Arc<str>,
}

impl Attach {
    /// The attach of `main`'s telemetry file ([`statements`]).
    pub(super) fn new(main: &Path, writer: bool) -> Attach {
        Attach {
            statements: statements(main, writer).into(),
            file: file_of(main).display().to_string().into(),
        }
    }

    /// Attaches the file to `conn`; a failure names the file (the store's
    /// own file opened fine).
    pub(super) async fn run(&self, conn: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
        conn.execute(sqlx::AssertSqlSafe(self.statements.clone()))
            .await
            .map_err(|e| {
                sqlx::Error::Configuration(format!("the telemetry file {}: {e}", self.file).into())
            })?;
        Ok(())
    }
}

impl Store {
    /// Puts the telemetry tables where they belong (SQLite files only;
    /// nothing to do elsewhere): a table a store made before the telemetry
    /// file holds in its main file is moved into it, and a table missing
    /// from both files (the telemetry file was deleted or lost) is made
    /// again, empty, from the definition the main file keeps of it.
    ///
    /// A move copies the table in one transaction and drops it from the
    /// main file in a second: SQLite commits the files of one transaction
    /// one after the other, so a crash between them must leave the rows in
    /// the main file. A table still in the main file is copied again from
    /// the start, the copy that crash left replaced.
    pub(super) async fn settle_telemetry(&self) -> Result<(), String> {
        // The inline readers exist exactly when the store is a SQLite file.
        if self.backend != Backend::Sqlite || self.inline.is_none() {
            return Ok(());
        }
        let failed = |e: sqlx::Error| format!("cannot settle the telemetry tables: {e}");
        let mut conn = self.writer.acquire().await.map_err(failed)?;
        for table in TABLES {
            let in_main = schema_of(&mut conn, "main", table).await.map_err(failed)?;
            if !in_main.is_empty() {
                let made = definition(&in_main)?;
                // A new store's migrations make the tables in the main
                // file, empty, and they move at once: only a move of rows
                // (a store made before the telemetry file) is news.
                let held: (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT EXISTS (SELECT 1 FROM main.{table})"
                )))
                .fetch_one(&mut *conn)
                .await
                .map_err(failed)?;
                move_table(&mut conn, table, &made).await.map_err(failed)?;
                if held.0 != 0 {
                    tracing::info!(table, "moved into the telemetry file");
                } else {
                    tracing::debug!(table, "made in the telemetry file");
                }
                continue;
            }
            let in_telemetry = schema_of(&mut conn, SCHEMA, table).await.map_err(failed)?;
            let saved = super::settings::read(&mut conn, &setting(table))
                .await
                .map_err(failed)?;
            if in_telemetry.is_empty() {
                let made = saved.ok_or_else(|| {
                    format!("the telemetry file holds no {table}, and the store keeps no definition of it")
                })?;
                conn.execute(sqlx::AssertSqlSafe(made))
                    .await
                    .map_err(failed)?;
                tracing::warn!(
                    table,
                    "the telemetry file held no such table: made it again, empty"
                );
            } else {
                // Kept up to date, should a migration change the table.
                let made = definition(&in_telemetry)?;
                if saved.as_deref() != Some(made.as_str()) {
                    save(&mut conn, table, &made).await.map_err(failed)?;
                }
            }
        }
        Ok(())
    }
}

/// A table's statements in one schema's `sqlite_master`: (type, name, sql),
/// the table's first.
async fn schema_of(
    conn: &mut sqlx::AnyConnection,
    schema: &str,
    table: &str,
) -> Result<Vec<(String, String, String)>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT type, name, sql FROM {schema}.sqlite_master \
         WHERE tbl_name = $1 AND sql IS NOT NULL ORDER BY type = 'index', name"
    )))
    .bind(table)
    .fetch_all(conn)
    .await
}

/// The statements that make a table and its indexes, as `schema_of` read
/// them, in the telemetry file.
fn definition(schema: &[(String, String, String)]) -> Result<String, String> {
    let made = schema
        .iter()
        .map(|(kind, name, sql)| in_telemetry(kind, name, sql))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(made.join(";\n"))
}

/// The `settings` row that keeps `table`'s definition.
fn setting(table: &str) -> String {
    format!("telemetry_schema.{table}")
}

async fn save(conn: &mut sqlx::AnyConnection, table: &str, made: &str) -> Result<(), sqlx::Error> {
    super::settings::write(conn, &setting(table), made).await
}

/// Copies `table` into the telemetry file (made there by `made`), then
/// drops it from the main file, keeping its definition there.
async fn move_table(
    conn: &mut sqlx::AnyConnection,
    table: &str,
    made: &str,
) -> Result<(), sqlx::Error> {
    let copy = format!(
        "DROP TABLE IF EXISTS {SCHEMA}.{table}; {made}; \
         INSERT INTO {SCHEMA}.{table} SELECT * FROM main.{table}"
    );
    in_transaction(conn, async |conn: &mut sqlx::AnyConnection| {
        conn.execute(sqlx::AssertSqlSafe(copy.clone()))
            .await
            .map(drop)
    })
    .await?;
    in_transaction(conn, async |conn: &mut sqlx::AnyConnection| {
        conn.execute(sqlx::AssertSqlSafe(format!("DROP TABLE main.{table}")))
            .await?;
        save(conn, table, made).await
    })
    .await
}

/// Runs `work` in a write transaction of its own, rolled back if it fails.
async fn in_transaction(
    conn: &mut sqlx::AnyConnection,
    work: impl AsyncFnOnce(&mut sqlx::AnyConnection) -> Result<(), sqlx::Error>,
) -> Result<(), sqlx::Error> {
    conn.execute("BEGIN IMMEDIATE").await?;
    match work(&mut *conn).await {
        Ok(()) => conn.execute("COMMIT").await.map(drop),
        Err(e) => {
            let _ = conn.execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// `sql`, the statement that made the table or index `name` (as either
/// file's `sqlite_master` keeps it, without a schema), made to create it in
/// the telemetry file.
fn in_telemetry(kind: &str, name: &str, sql: &str) -> Result<String, String> {
    // SQLite keeps a schema statement as written, its first words made
    // `CREATE TABLE` / `CREATE INDEX` / `CREATE UNIQUE INDEX`.
    let head = sql
        .find(name)
        .filter(|at| sql[..*at].trim_end().ends_with(&kind.to_uppercase()))
        .ok_or_else(|| format!("cannot move {kind} {name}: unexpected definition {sql:?}"))?;
    Ok(format!("{}{SCHEMA}.{}", &sql[..head], &sql[head..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_telemetry_file_sits_beside_the_store_and_is_quoted() {
        assert_eq!(
            file_of(Path::new("/data/loom.db")),
            Path::new("/data/loom.db-telemetry")
        );
        assert_eq!(
            attach(Path::new("/it's/loom.db")),
            "ATTACH DATABASE '/it''s/loom.db-telemetry' AS telemetry"
        );
    }

    #[test]
    fn schema_statements_are_moved_into_the_telemetry_schema() {
        assert_eq!(
            in_telemetry(
                "table",
                "agent_events",
                "CREATE TABLE agent_events (id INTEGER)"
            ),
            Ok("CREATE TABLE telemetry.agent_events (id INTEGER)".to_owned())
        );
        assert_eq!(
            in_telemetry(
                "index",
                "agent_events_by_run",
                "CREATE INDEX agent_events_by_run ON agent_events (org, run_id)"
            ),
            Ok(
                "CREATE INDEX telemetry.agent_events_by_run ON agent_events (org, run_id)"
                    .to_owned()
            )
        );
        assert!(in_telemetry("table", "t", "CREATE VIEW t AS SELECT 1").is_err());
    }
}
