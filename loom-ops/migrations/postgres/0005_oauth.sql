-- OAuth 2.1 sign-in: password users, registered clients, authorization
-- requests in progress, authorization codes and rotating refresh tokens.
-- Times are BIGINT milliseconds since the Unix epoch; flags are BIGINT 0/1.
-- Codes and refresh tokens are stored as SHA-256 hashes, never in the clear.

-- People who sign in through /oauth/authorize (`loom user add`).
CREATE TABLE users (
    username       TEXT PRIMARY KEY,
    org            TEXT NOT NULL,
    role           TEXT NOT NULL,               -- viewer, writer, admin
    namespaces     TEXT NOT NULL,               -- JSON array of names
    password_hash  TEXT NOT NULL,               -- argon2id PHC string
    disabled       BIGINT NOT NULL DEFAULT 0,
    created_ms     BIGINT NOT NULL,
    updated_ms     BIGINT NOT NULL
);

-- Dynamically registered public clients.
CREATE TABLE oauth_clients (
    client_id      TEXT PRIMARY KEY,
    client_name    TEXT NOT NULL,
    redirect_uris  TEXT NOT NULL,               -- JSON array, as registered
    created_ms     BIGINT NOT NULL
);

-- An authorization request between the first GET /oauth/authorize and the
-- consent decision; bound to the browser by its CSRF value.
CREATE TABLE oauth_requests (
    id              TEXT PRIMARY KEY,
    client_id       TEXT NOT NULL,
    redirect_uri    TEXT NOT NULL,
    state           TEXT,
    code_challenge  TEXT NOT NULL,
    resource        TEXT NOT NULL,
    scope           TEXT NOT NULL,
    csrf_hash       TEXT NOT NULL,
    username        TEXT,
    expires_ms      BIGINT NOT NULL
);

-- Authorization codes (single use).
CREATE TABLE oauth_codes (
    code_hash       TEXT PRIMARY KEY,
    client_id       TEXT NOT NULL,
    username        TEXT NOT NULL,
    redirect_uri    TEXT NOT NULL,
    code_challenge  TEXT NOT NULL,
    resource        TEXT NOT NULL,
    scope           TEXT NOT NULL,
    family_id       TEXT NOT NULL,
    used            BIGINT NOT NULL DEFAULT 0,
    expires_ms      BIGINT NOT NULL,
    created_ms      BIGINT NOT NULL
);

-- Refresh tokens: one row per issued token; a rotation marks the old row
-- rotated and adds one to the same family. `access_jti` is the access token
-- issued beside it, revoked with the family.
CREATE TABLE oauth_refresh_tokens (
    token_hash   TEXT PRIMARY KEY,
    family_id    TEXT NOT NULL,
    client_id    TEXT NOT NULL,
    username     TEXT NOT NULL,
    resource     TEXT NOT NULL,
    scope        TEXT NOT NULL,
    access_jti   TEXT NOT NULL,
    access_exp_ms BIGINT NOT NULL,
    rotated      BIGINT NOT NULL DEFAULT 0,
    revoked      BIGINT NOT NULL DEFAULT 0,
    expires_ms   BIGINT NOT NULL,
    created_ms   BIGINT NOT NULL
);
CREATE INDEX oauth_refresh_by_family ON oauth_refresh_tokens (family_id);
CREATE INDEX oauth_refresh_by_user ON oauth_refresh_tokens (username);
