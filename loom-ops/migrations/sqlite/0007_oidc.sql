-- Sign-in delegated to an OpenID Connect provider: one row per trip to the
-- provider, between Loom's redirect and the provider's callback. Found by
-- the SHA-256 of the `state` sent; deleted when the callback takes it, so a
-- state works once. The nonce is kept hashed; the PKCE verifier must be
-- sent to the provider, so it is kept as is, for the minutes the row lives.
CREATE TABLE oidc_logins (
    state_hash   TEXT PRIMARY KEY,
    request_id   TEXT NOT NULL,              -- the oauth_requests row it signs in
    nonce_hash   TEXT NOT NULL,
    verifier     TEXT NOT NULL,
    expires_ms   BIGINT NOT NULL
);
