//! What an operator should know about the database the store runs on,
//! checked once at start: settings that leave Loom correct but slowing
//! down over time.

use super::{Backend, Store, db_error};

impl Store {
    /// Warnings about the database's setup, one sentence each; empty when
    /// there is nothing to say. A check that cannot run says nothing.
    pub async fn setup_warnings(&self) -> Vec<String> {
        match self.backend() {
            Backend::Sqlite => Vec::new(),
            Backend::Postgres => self.postgres_warnings().await.unwrap_or_default(),
        }
    }

    async fn postgres_warnings(&self) -> Result<Vec<String>, loom_core::LoomError> {
        // Autovacuum needs both: without it nothing reclaims the row
        // versions every update leaves (a recall count raised by each
        // memory.get, each memory.set), and the scans by recency search
        // makes walk them (see migration 0014).
        let (autovacuum, track_counts): (String, String) =
            sqlx::query_as("SELECT current_setting('autovacuum'), current_setting('track_counts')")
                .fetch_one(self.reader())
                .await
                .map_err(db_error)?;
        let mut warnings = Vec::new();
        if autovacuum != "on" || track_counts != "on" {
            warnings.push(format!(
                "PostgreSQL's autovacuum is off (autovacuum = {autovacuum}, track_counts = \
                 {track_counts}): the old row versions that updates leave behind are never \
                 reclaimed, so reads and searches of memories slow down as they pile up; turn \
                 it on, or run VACUUM ANALYZE on the database regularly"
            ));
        }
        Ok(warnings)
    }
}
