-- Whether a registered OAuth client may use refresh tokens: registered
-- with grant_types naming refresh_token (or none, which means both
-- grants). A client registered for authorization_code alone gets no
-- refresh token and is refused the refresh grant (RFC 7591 §2). Clients
-- registered before this kept no grant types and keep refreshing.
ALTER TABLE oauth_clients ADD COLUMN refresh BIGINT NOT NULL DEFAULT 1;
