//! Trips to an external OpenID Connect provider in progress: what Loom
//! must remember between sending the browser to the provider and the
//! provider sending it back (the request it signs in, the nonce's hash and
//! the PKCE verifier), keyed by the SHA-256 of the `state` it sent.

use loom_core::OpResult;

use super::{Store, db_error, now_ms};

/// One trip to the provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcLoginRow {
    /// SHA-256 of the `state` sent to the provider.
    pub state_hash: String,
    /// The authorization request (`oauth_requests.id`) it signs in.
    pub request_id: String,
    /// SHA-256 of the `nonce` sent; the id_token must carry the nonce.
    pub nonce_hash: String,
    /// The PKCE code verifier, sent with the code exchange.
    pub verifier: String,
    /// When it lapses (ms).
    pub expires_ms: i64,
}

impl Store {
    /// Stores a trip to the provider (and drops lapsed ones).
    pub async fn oidc_login_add(&self, row: &OidcLoginRow) -> OpResult<()> {
        sqlx::query("DELETE FROM oidc_logins WHERE expires_ms < $1")
            .bind(now_ms())
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO oidc_logins (state_hash, request_id, nonce_hash, verifier, expires_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&row.state_hash)
        .bind(&row.request_id)
        .bind(&row.nonce_hash)
        .bind(&row.verifier)
        .bind(row.expires_ms)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// Takes the unexpired trip whose state hashes to `state_hash`: read and
    /// deleted, so a state is good for one callback; `None` for an unknown,
    /// lapsed or already taken state (only one of two racing callers wins).
    pub async fn oidc_login_take(&self, state_hash: &str) -> OpResult<Option<OidcLoginRow>> {
        let row: Option<(String, String, String, String, i64)> = sqlx::query_as(
            "SELECT state_hash, request_id, nonce_hash, verifier, expires_ms FROM oidc_logins \
             WHERE state_hash = $1 AND expires_ms >= $2",
        )
        .bind(state_hash)
        .bind(now_ms())
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        let Some(r) = row else {
            return Ok(None);
        };
        let done = sqlx::query("DELETE FROM oidc_logins WHERE state_hash = $1")
            .bind(state_hash)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok((done.rows_affected() == 1).then_some(OidcLoginRow {
            state_hash: r.0,
            request_id: r.1,
            nonce_hash: r.2,
            verifier: r.3,
            expires_ms: r.4,
        }))
    }
}
