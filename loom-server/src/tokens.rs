//! Loom's access tokens: HS256 JWTs signed with one key per deployment.
//!
//! The key is generated on the first start of a store without one and kept
//! in its `settings` table, so every replica on the same database and
//! `loom token mint` share it; `LOOM_JWT_SECRET` (at least 32 bytes)
//! overrides it. Verification allows only HS256 (`alg: none` and every
//! other algorithm fail), requires `exp`, `iss`, `aud` and `sub`, checks
//! issuer and audience against the configuration, allows
//! `LOOM_JWT_LEEWAY_SECS` (default 30 s) of clock skew, and requires the
//! Loom claims `org`, `role`, `jti` and `token_use = "access"` (so no other
//! kind of token can stand in for an access token). A header with a `kid`
//! (this server has one key and names none) or a `typ` other than `JWT` is
//! refused; `jku`, `x5u`, `jwk` and `x5c` are never followed. Revoked `jti`s are
//! refused from the [`Revocations`] list.
//!
//! With OAuth on, the accepted audiences are `LOOM_JWT_AUDIENCE` and the
//! OAuth resources (`<LOOM_OAUTH_ISSUER>/mcp` and `<LOOM_OAUTH_ISSUER>`, see
//! [`crate::oauth::audiences`]); every other check is the same for all.

use std::collections::HashSet;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use loom_core::Role;
use loom_ops::store::Store;
use serde::{Deserialize, Serialize};

use crate::config::Config;

/// The `token_use` claim of an access token.
pub const ACCESS_TOKEN_USE: &str = "access";

/// What a Loom access token carries.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// The subject.
    pub sub: String,
    /// The org it acts in (`*`: org-wide, any org).
    pub org: String,
    /// viewer, writer or admin.
    pub role: Role,
    /// The token id (revocation key).
    pub jti: String,
    /// Expiry (seconds since the Unix epoch).
    pub exp: u64,
    /// Issued at.
    pub iat: u64,
    /// The issuer (`LOOM_JWT_ISSUER`).
    pub iss: String,
    /// The audience (`LOOM_JWT_AUDIENCE`).
    pub aud: String,
    /// Always `access`.
    pub token_use: String,
    /// The namespaces it names; the first is its default workspace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Minted for a platform admin.
    #[serde(default)]
    pub platform_admin: bool,
    /// The client it was minted for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
}

/// Why a token was refused (logged, never sent).
#[derive(Debug)]
pub struct InvalidToken(pub String);

/// The signing and checking keys.
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    issuer: String,
    audience: String,
    audiences: Vec<String>,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(..)")
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl JwtKeys {
    /// Keys from a secret and the configuration's issuer, audience and leeway.
    pub fn new(secret: &[u8], config: &Config) -> JwtKeys {
        let mut audiences = vec![config.jwt_audience.clone()];
        audiences.extend(crate::oauth::audiences(config));
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[config.jwt_issuer.as_str()]);
        validation.set_audience(&audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = config.jwt_leeway_secs;
        JwtKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            audiences,
        }
    }

    /// The keys a deployment uses: `LOOM_JWT_SECRET`, else the store's key
    /// (created on first use).
    pub async fn load(store: &Store, config: &Config) -> Result<JwtKeys, String> {
        if let Some(secret) = &config.jwt_secret {
            return Ok(JwtKeys::new(secret, config));
        }
        let generated = hex::encode(rand::random::<[u8; 32]>());
        let stored = store.signing_key(&generated).await.map_err(|e| {
            format!(
                "cannot read the signing key: {}",
                e.internal_message().unwrap_or(e.message())
            )
        })?;
        let secret = hex::decode(stored.trim())
            .map_err(|_| "the stored signing key is not hex".to_owned())?;
        if secret.len() < 32 {
            return Err("the stored signing key is shorter than 32 bytes".into());
        }
        Ok(JwtKeys::new(&secret, config))
    }

    /// Mints an access token (audience `LOOM_JWT_AUDIENCE`).
    pub fn mint(&self, spec: MintSpec) -> Result<(String, Claims), String> {
        let audience = self.audience.clone();
        self.mint_for_audience(spec, &audience)
    }

    /// Mints an access token for one of the audiences this server accepts
    /// (OAuth mints for the resource the client asked for); any other is refused.
    pub fn mint_for_audience(
        &self,
        spec: MintSpec,
        audience: &str,
    ) -> Result<(String, Claims), String> {
        if !self.audiences.iter().any(|a| a == audience) {
            return Err(format!(
                "{audience:?} is not an audience this server accepts"
            ));
        }
        let iat = now_secs();
        let claims = Claims {
            sub: spec.subject,
            org: spec.org,
            role: spec.role,
            jti: uuid::Uuid::new_v4().simple().to_string(),
            exp: iat + spec.ttl_secs,
            iat,
            iss: self.issuer.clone(),
            aud: audience.to_owned(),
            token_use: ACCESS_TOKEN_USE.into(),
            namespaces: spec.namespaces,
            platform_admin: spec.platform_admin,
            consumer: spec.consumer,
        };
        let token = encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| e.to_string())?;
        Ok((token, claims))
    }

    /// Checks a token's signature, algorithm, times, issuer, audience and
    /// claims (not revocation: see [`Revocations`]).
    pub fn verify(&self, token: &str) -> Result<Claims, InvalidToken> {
        // One key and no key ids: a `kid` names a key this server does not
        // have. A `typ` other than JWT is another kind of token.
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| InvalidToken(format!("{:?}", e.kind())))?;
        if header.kid.is_some() {
            return Err(InvalidToken("unknown kid".into()));
        }
        if header
            .typ
            .as_deref()
            .is_some_and(|t| !t.eq_ignore_ascii_case("JWT"))
        {
            return Err(InvalidToken("typ is not JWT".into()));
        }
        let data = decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| InvalidToken(format!("{:?}", e.kind())))?;
        let c = data.claims;
        if c.token_use != ACCESS_TOKEN_USE {
            return Err(InvalidToken(format!(
                "token_use {:?} is not an access token",
                c.token_use
            )));
        }
        if c.sub.is_empty() || c.org.is_empty() || c.jti.is_empty() {
            return Err(InvalidToken("empty sub, org or jti".into()));
        }
        Ok(c)
    }
}

/// What `loom token mint` asks for.
#[derive(Clone, Debug)]
pub struct MintSpec {
    /// The org (`*`: org-wide).
    pub org: String,
    /// The subject.
    pub subject: String,
    /// The role.
    pub role: Role,
    /// The namespaces it names (empty: every namespace of its org).
    pub namespaces: Vec<String>,
    /// Lifetime in seconds.
    pub ttl_secs: u64,
    /// A platform admin token.
    pub platform_admin: bool,
    /// The consumer claim.
    pub consumer: Option<String>,
}

/// The revocation list every replica keeps in memory and reloads every
/// `LOOM_REVOCATION_REFRESH_SECS` (default 10 s), so a token revoked on one
/// replica is refused by all within that interval. Until the first load a
/// token cannot be checked and the call answers 503 with `Retry-After`.
/// A failed reload keeps the last list (and logs the failure).
#[derive(Debug, Default)]
pub struct Revocations {
    loaded: AtomicBool,
    jtis: RwLock<HashSet<String>>,
    // Held across a reload's read and its swap, so a slower reload that read
    // an older snapshot can never overwrite a newer one.
    reloading: tokio::sync::Mutex<()>,
}

impl Revocations {
    /// Whether the list has loaded at least once.
    pub fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Whether `jti` is revoked (`None`: the list has not loaded yet).
    pub fn is_revoked(&self, jti: &str) -> Option<bool> {
        if !self.loaded() {
            return None;
        }
        Some(
            self.jtis
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(jti),
        )
    }

    /// Reloads the list from the store.
    pub async fn refresh(&self, store: &Store) -> Result<usize, loom_core::LoomError> {
        let _one_at_a_time = self.reloading.lock().await;
        let jtis: HashSet<String> = store.revoked_jtis().await?.into_iter().collect();
        let n = jtis.len();
        *self
            .jtis
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = jtis;
        self.loaded.store(true, Ordering::Release);
        Ok(n)
    }
}
