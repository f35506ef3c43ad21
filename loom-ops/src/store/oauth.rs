//! What OAuth sign-in keeps in the store: password users, registered
//! clients, authorization requests in progress, authorization codes and
//! rotating refresh tokens. Codes and refresh tokens arrive here already
//! hashed; the store never sees them in the clear.

use loom_core::{LoomError, OpResult, Role};

use super::{Store, db_error, now_ms};

/// A user who signs in with a password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRow {
    /// The login name, also the token subject.
    pub username: String,
    /// The org the user's tokens act in.
    pub org: String,
    /// The user's role.
    pub role: Role,
    /// The namespaces the user's tokens name (empty: every namespace of the org).
    pub namespaces: Vec<String>,
    /// The argon2 PHC string.
    pub password_hash: String,
    /// A disabled user cannot sign in or refresh.
    pub disabled: bool,
}

/// A registered public client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRow {
    /// The client id.
    pub client_id: String,
    /// Its name as registered (shown, escaped, on the consent page).
    pub client_name: String,
    /// Its redirect URIs as registered.
    pub redirect_uris: Vec<String>,
    /// Whether it registered the refresh_token grant (its `grant_types`).
    pub refresh: bool,
    /// When it registered (ms).
    pub created_ms: i64,
}

/// An authorization request between the authorize GET and the consent POST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthRequestRow {
    /// Its id (random).
    pub id: String,
    /// The client.
    pub client_id: String,
    /// The redirect URI the request named (matched against the registration).
    pub redirect_uri: String,
    /// The client's `state`, echoed byte for byte.
    pub state: Option<String>,
    /// The S256 challenge.
    pub code_challenge: String,
    /// The resource the token will be bound to.
    pub resource: String,
    /// The granted scope.
    pub scope: String,
    /// SHA-256 of the browser's CSRF value.
    pub csrf_hash: String,
    /// Who signed in, once someone has.
    pub username: Option<String>,
    /// When it lapses (ms).
    pub expires_ms: i64,
}

/// An authorization code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeRow {
    /// SHA-256 of the code.
    pub code_hash: String,
    /// The client it was issued to.
    pub client_id: String,
    /// Who approved it.
    pub username: String,
    /// The redirect URI it was sent to.
    pub redirect_uri: String,
    /// The S256 challenge.
    pub code_challenge: String,
    /// The resource.
    pub resource: String,
    /// The scope.
    pub scope: String,
    /// The refresh-token family its tokens start.
    pub family_id: String,
    /// Whether it was already exchanged (or burnt).
    pub used: bool,
    /// When it lapses (ms).
    pub expires_ms: i64,
}

/// A refresh token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefreshRow {
    /// SHA-256 of the token.
    pub token_hash: String,
    /// Its family (every rotation of one grant).
    pub family_id: String,
    /// The client it was issued to.
    pub client_id: String,
    /// The user.
    pub username: String,
    /// The resource.
    pub resource: String,
    /// The scope.
    pub scope: String,
    /// The access token issued beside it.
    pub access_jti: String,
    /// When that access token expires (ms).
    pub access_exp_ms: i64,
    /// Already exchanged for a newer one.
    pub rotated: bool,
    /// Revoked (its family was).
    pub revoked: bool,
    /// When it lapses unused (ms).
    pub expires_ms: i64,
}

fn parse_role(s: &str) -> OpResult<Role> {
    s.parse()
        .map_err(|e: String| LoomError::internal(format!("users row: {e}")))
}

fn json_list(s: &str) -> OpResult<Vec<String>> {
    serde_json::from_str(s).map_err(|e| LoomError::internal(format!("stored list: {e}")))
}

type UserTuple = (String, String, String, String, String, i64);
type RequestTuple = (
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
);
type CodeTuple = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
);
type RefreshTuple = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    i64,
);

const REFRESH_COLUMNS: &str = "token_hash, family_id, client_id, username, resource, scope, \
     access_jti, access_exp_ms, rotated, revoked, expires_ms";

fn refresh_row(r: RefreshTuple) -> RefreshRow {
    RefreshRow {
        token_hash: r.0,
        family_id: r.1,
        client_id: r.2,
        username: r.3,
        resource: r.4,
        scope: r.5,
        access_jti: r.6,
        access_exp_ms: r.7,
        rotated: r.8 != 0,
        revoked: r.9 != 0,
        expires_ms: r.10,
    }
}

impl Store {
    /// Whether `org` exists.
    pub async fn org_exists(&self, org: &str) -> OpResult<bool> {
        let row: Option<(String,)> = sqlx::query_as("SELECT org FROM orgs WHERE org = $1")
            .bind(org)
            .fetch_optional(self.reader())
            .await
            .map_err(db_error)?;
        Ok(row.is_some())
    }

    /// Adds a user; false when the username is taken.
    pub async fn user_add(&self, user: &UserRow) -> OpResult<bool> {
        let now = now_ms();
        let namespaces = serde_json::to_string(&user.namespaces)
            .map_err(|e| LoomError::internal(e.to_string()))?;
        let done = sqlx::query(
            "INSERT INTO users (username, org, role, namespaces, password_hash, disabled, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (username) DO NOTHING",
        )
        .bind(&user.username)
        .bind(&user.org)
        .bind(user.role.as_str())
        .bind(namespaces)
        .bind(&user.password_hash)
        .bind(i64::from(user.disabled))
        .bind(now)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// A user by name.
    pub async fn user_get(&self, username: &str) -> OpResult<Option<UserRow>> {
        let row: Option<UserTuple> = sqlx::query_as(
            "SELECT username, org, role, namespaces, password_hash, disabled FROM users WHERE username = $1",
        )
        .bind(username)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        row.map(
            |(username, org, role, namespaces, password_hash, disabled)| {
                Ok(UserRow {
                    username,
                    org,
                    role: parse_role(&role)?,
                    namespaces: json_list(&namespaces)?,
                    password_hash,
                    disabled: disabled != 0,
                })
            },
        )
        .transpose()
    }

    /// Disables a user: no more sign-ins or refreshes, every refresh token
    /// revoked and every access token issued beside one that has not expired
    /// added to the revocation list. False when there is no such user.
    pub async fn user_disable(&self, username: &str) -> OpResult<bool> {
        let now = now_ms();
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let done =
            sqlx::query("UPDATE users SET disabled = 1, updated_ms = $2 WHERE username = $1")
                .bind(username)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
        if done.rows_affected() == 0 {
            tx.rollback().await.map_err(db_error)?;
            return Ok(false);
        }
        revoke_issued(&mut tx, Issued::ToUser, username, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    /// Stores a registered client.
    pub async fn oauth_client_add(&self, client: &ClientRow) -> OpResult<()> {
        let uris = serde_json::to_string(&client.redirect_uris)
            .map_err(|e| LoomError::internal(e.to_string()))?;
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, refresh, created_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&client.client_id)
        .bind(&client.client_name)
        .bind(uris)
        .bind(i64::from(client.refresh))
        .bind(client.created_ms)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// A registered client by id.
    pub async fn oauth_client(&self, client_id: &str) -> OpResult<Option<ClientRow>> {
        let row: Option<(String, String, String, i64, i64)> = sqlx::query_as(
            "SELECT client_id, client_name, redirect_uris, refresh, created_ms FROM oauth_clients \
             WHERE client_id = $1",
        )
        .bind(client_id)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        row.map(|(client_id, client_name, uris, refresh, created_ms)| {
            Ok(ClientRow {
                client_id,
                client_name,
                redirect_uris: json_list(&uris)?,
                refresh: refresh != 0,
                created_ms,
            })
        })
        .transpose()
    }

    /// Stores an authorization request (and drops lapsed ones).
    pub async fn oauth_request_add(&self, r: &AuthRequestRow) -> OpResult<()> {
        sqlx::query("DELETE FROM oauth_requests WHERE expires_ms < $1")
            .bind(now_ms())
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO oauth_requests (id, client_id, redirect_uri, state, code_challenge, resource, scope, \
             csrf_hash, username, expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&r.id)
        .bind(&r.client_id)
        .bind(&r.redirect_uri)
        .bind(r.state.as_deref())
        .bind(&r.code_challenge)
        .bind(&r.resource)
        .bind(&r.scope)
        .bind(&r.csrf_hash)
        .bind(r.username.as_deref())
        .bind(r.expires_ms)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// An authorization request that has not lapsed.
    pub async fn oauth_request(&self, id: &str) -> OpResult<Option<AuthRequestRow>> {
        let row: Option<RequestTuple> = sqlx::query_as(
            "SELECT id, client_id, redirect_uri, state, code_challenge, resource, scope, csrf_hash, username, \
             expires_ms FROM oauth_requests WHERE id = $1 AND expires_ms >= $2",
        )
        .bind(id)
        .bind(now_ms())
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        Ok(row.map(|r| AuthRequestRow {
            id: r.0,
            client_id: r.1,
            redirect_uri: r.2,
            state: r.3,
            code_challenge: r.4,
            resource: r.5,
            scope: r.6,
            csrf_hash: r.7,
            username: r.8,
            expires_ms: r.9,
        }))
    }

    /// Records who signed in for a request.
    pub async fn oauth_request_signed_in(&self, id: &str, username: &str) -> OpResult<()> {
        sqlx::query("UPDATE oauth_requests SET username = $2 WHERE id = $1")
            .bind(id)
            .bind(username)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Deletes a request; true for the one caller that deleted it.
    pub async fn oauth_request_take(&self, id: &str) -> OpResult<bool> {
        let done = sqlx::query("DELETE FROM oauth_requests WHERE id = $1")
            .bind(id)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores an authorization code.
    pub async fn oauth_code_add(&self, c: &CodeRow) -> OpResult<()> {
        sqlx::query(
            "INSERT INTO oauth_codes (code_hash, client_id, username, redirect_uri, code_challenge, resource, \
             scope, family_id, used, expires_ms, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&c.code_hash)
        .bind(&c.client_id)
        .bind(&c.username)
        .bind(&c.redirect_uri)
        .bind(&c.code_challenge)
        .bind(&c.resource)
        .bind(&c.scope)
        .bind(&c.family_id)
        .bind(i64::from(c.used))
        .bind(c.expires_ms)
        .bind(now_ms())
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// A code by hash (used or not).
    pub async fn oauth_code(&self, code_hash: &str) -> OpResult<Option<CodeRow>> {
        let row: Option<CodeTuple> = sqlx::query_as(
            "SELECT code_hash, client_id, username, redirect_uri, code_challenge, resource, scope, family_id, \
             used, expires_ms FROM oauth_codes WHERE code_hash = $1",
        )
        .bind(code_hash)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        Ok(row.map(|r| CodeRow {
            code_hash: r.0,
            client_id: r.1,
            username: r.2,
            redirect_uri: r.3,
            code_challenge: r.4,
            resource: r.5,
            scope: r.6,
            family_id: r.7,
            used: r.8 != 0,
            expires_ms: r.9,
        }))
    }

    /// Marks a code used; true for the one caller that did.
    pub async fn oauth_code_claim(&self, code_hash: &str) -> OpResult<bool> {
        let done = sqlx::query("UPDATE oauth_codes SET used = 1 WHERE code_hash = $1 AND used = 0")
            .bind(code_hash)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores a refresh token.
    pub async fn oauth_refresh_add(&self, r: &RefreshRow) -> OpResult<()> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO oauth_refresh_tokens ({REFRESH_COLUMNS}, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        )))
        .bind(&r.token_hash)
        .bind(&r.family_id)
        .bind(&r.client_id)
        .bind(&r.username)
        .bind(&r.resource)
        .bind(&r.scope)
        .bind(&r.access_jti)
        .bind(r.access_exp_ms)
        .bind(i64::from(r.rotated))
        .bind(i64::from(r.revoked))
        .bind(r.expires_ms)
        .bind(now_ms())
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// A refresh token by hash.
    pub async fn oauth_refresh(&self, token_hash: &str) -> OpResult<Option<RefreshRow>> {
        let row: Option<RefreshTuple> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {REFRESH_COLUMNS} FROM oauth_refresh_tokens WHERE token_hash = $1"
        )))
        .bind(token_hash)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        Ok(row.map(refresh_row))
    }

    /// Marks a live refresh token rotated; true for the one caller that did.
    pub async fn oauth_refresh_rotate(&self, token_hash: &str) -> OpResult<bool> {
        let done = sqlx::query(
            "UPDATE oauth_refresh_tokens SET rotated = 1 WHERE token_hash = $1 AND rotated = 0 AND revoked = 0",
        )
        .bind(token_hash)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    /// Revokes a whole family: every refresh token in it, and every access
    /// token issued beside one that has not expired yet. Returns how many
    /// access tokens were added to the revocation list.
    pub async fn oauth_family_revoke(&self, family_id: &str) -> OpResult<usize> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let n = revoke_issued(&mut tx, Issued::InFamily, family_id, now_ms()).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(n)
    }
}

/// Which refresh tokens [`revoke_issued`] revokes: a user's or a family's.
#[derive(Clone, Copy)]
enum Issued {
    /// `oauth_refresh_tokens.username`.
    ToUser,
    /// `oauth_refresh_tokens.family_id`.
    InFamily,
}

/// Revokes, in `tx`, every refresh token `issued` selects by `value`, and
/// puts every access token issued beside one that has not expired by
/// `now` on the revocation list. Returns how many access tokens it listed.
async fn revoke_issued(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    issued: Issued,
    value: &str,
    now: i64,
) -> OpResult<usize> {
    let (live_jtis, revoke) = match issued {
        Issued::ToUser => (
            "SELECT access_jti FROM oauth_refresh_tokens WHERE username = $1 AND access_exp_ms > $2",
            "UPDATE oauth_refresh_tokens SET revoked = 1 WHERE username = $1",
        ),
        Issued::InFamily => (
            "SELECT access_jti FROM oauth_refresh_tokens WHERE family_id = $1 AND access_exp_ms > $2",
            "UPDATE oauth_refresh_tokens SET revoked = 1 WHERE family_id = $1",
        ),
    };
    let jtis: Vec<(String,)> = sqlx::query_as(live_jtis)
        .bind(value)
        .bind(now)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
    for (jti,) in &jtis {
        sqlx::query(
            "INSERT INTO revoked_tokens (jti, revoked_ms) VALUES ($1, $2) ON CONFLICT (jti) DO NOTHING",
        )
        .bind(jti.as_str())
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    sqlx::query(revoke)
        .bind(value)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    Ok(jtis.len())
}
