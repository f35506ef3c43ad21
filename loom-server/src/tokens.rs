//! Loom's access tokens: HS256 JWTs signed with one key per deployment.
//!
//! The key is generated on the first start of a store without one and kept
//! in its `settings` table, so every replica on the same database and
//! `loom token mint` share it; `LOOM_JWT_SECRET` (at least 32 bytes)
//! overrides it. Verification allows only HS256 (`alg: none` and every
//! other algorithm fail), requires `exp`, `iss`, `aud` and `sub`, checks
//! issuer and audience against the configuration, allows
//! `LOOM_JWT_LEEWAY_SECS` (default 30 s) of clock skew, and requires the
//! Loom claims `org`, `role`, `jti` (32 lowercase hex digits, the form
//! `loom token revoke` takes) and `token_use = "access"` (so no other kind
//! of token can stand in for an access token). A header with a `kid` (this
//! server has one key and names none), a `typ` other than `JWT` or a
//! `crit` (Loom understands no extension) is refused; `jku`, `x5u`, `jwk` and `x5c` are never followed. Revoked `jti`s are
//! refused from the [`Revocations`] list.
//!
//! With OAuth on, the accepted audiences are `LOOM_JWT_AUDIENCE` and the
//! OAuth resources (`<LOOM_OAUTH_ISSUER>/mcp` and `<LOOM_OAUTH_ISSUER>`, see
//! [`crate::oauth::audiences`]); every other check is the same for all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use foldhash::{HashMap, HashSet};
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
    verified: Verified,
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
            verified: Verified::default(),
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
            exp: iat.saturating_add(spec.ttl_secs),
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
    /// claims (not revocation: see [`Revocations`]). A token that passed
    /// before passes again from [`Verified`] until it expires.
    pub fn verify(&self, token: &str) -> Result<Claims, InvalidToken> {
        self.verify_at(token, now_secs())
    }

    fn verify_at(&self, token: &str, now: u64) -> Result<Claims, InvalidToken> {
        if let Some(known) = self.verified.get(token, now) {
            return known;
        }
        let claims = self.check(token)?;
        let until = claims.exp.saturating_add(self.validation.leeway);
        self.verified.insert(token, &claims, until);
        Ok(claims)
    }

    fn check(&self, token: &str) -> Result<Claims, InvalidToken> {
        // One key and no key ids: a `kid` names a key this server does not
        // have. A `typ` other than JWT is another kind of token.
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| InvalidToken(format!("{:?}", e.kind())))?;
        // Extensions the token says must be understood (`crit`): Loom
        // understands none (RFC 7515 4.1.11), and the crate does not check
        // them. The header is read for both names themselves, whatever
        // their values: the crate reads `"kid": null` or `"crit": null` as
        // none, where each is a malformed one.
        match header_names(token, &["kid", "crit"]) {
            Some("kid") => return Err(InvalidToken("unknown kid".into())),
            Some(_) => {
                return Err(InvalidToken("crit names extensions not understood".into()));
            }
            None => {}
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
        if c.sub.is_empty() || c.org.is_empty() {
            return Err(InvalidToken("empty sub or org".into()));
        }
        // Only a jti `loom token revoke` takes can ever be revoked.
        if !is_jti(&c.jti) {
            return Err(InvalidToken("jti is not 32 lowercase hex digits".into()));
        }
        Ok(c)
    }
}

/// The first of `names` that `token`'s header (its first part, base64url
/// JSON) names, whatever its value.
fn header_names(token: &str, names: &[&'static str]) -> Option<&'static str> {
    use base64::Engine as _;
    let header = token.split('.').next()?;
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).ok()?;
    names.iter().copied().find(|n| header.contains_key(*n))
}

/// Whether `jti` has the form of every token id Loom issues: 32 lowercase
/// hex digits (a UUID's simple form). A token with another is refused, as
/// it could not be revoked: `loom token revoke` takes only this form.
pub fn is_jti(jti: &str) -> bool {
    jti.len() == 32 && jti.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Tokens that passed [`JwtKeys::verify`], with the second each stops being
/// valid (its `exp` plus the leeway).
///
/// Why: a client sends the same token with every call, and checking it
/// (two base64 decodes, two JSON parses and the HMAC) was ~5% of a
/// `memory.get`'s CPU. What a cached answer skips can never change for the
/// same string: it was signed by this server's one key (the key is the
/// process's), its header and claims are in the string, and `nbf`, once
/// past, stays past. Only time moves, so expiry is checked on every hit;
/// revocation is not cached (`Revocations` is asked on every call). Keyed by
/// the whole token, so another string, however close, is checked in full.
/// Bounded: when full it starts over, which costs one full check per token.
#[derive(Default)]
struct Verified {
    tokens: Mutex<HashMap<Box<str>, (Claims, u64)>>,
}

/// Tokens [`Verified`] holds at most (~1 KB each).
const VERIFIED_TOKENS: usize = 4096;

impl Verified {
    /// `None`: not checked before. An expired one is refused as a full
    /// check would refuse it, and forgotten.
    fn get(&self, token: &str, now: u64) -> Option<Result<Claims, InvalidToken>> {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let (claims, until) = tokens.get(token)?;
        if now > *until {
            tokens.remove(token);
            return Some(Err(InvalidToken("ExpiredSignature".into())));
        }
        Some(Ok(claims.clone()))
    }

    fn insert(&self, token: &str, claims: &Claims, until: u64) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if tokens.len() >= VERIFIED_TOKENS {
            tokens.clear();
        }
        tokens.insert(token.into(), (claims.clone(), until));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(secret: &[u8]) -> JwtKeys {
        JwtKeys::new(secret, &Config::default())
    }

    fn spec(ttl_secs: u64) -> MintSpec {
        MintSpec {
            org: "default".into(),
            subject: "ada".into(),
            role: Role::Writer,
            namespaces: vec![],
            ttl_secs,
            platform_admin: false,
            consumer: None,
        }
    }

    #[test]
    fn a_token_checked_before_answers_the_same_claims_until_it_expires() {
        let keys = keys(&[7; 32]);
        let (token, minted) = keys.mint(spec(60)).expect("mint");
        let now = now_secs();
        assert_eq!(keys.verify_at(&token, now).expect("first check"), minted);
        assert_eq!(keys.verified.tokens.lock().unwrap().len(), 1);
        assert_eq!(keys.verify_at(&token, now).expect("from the cache"), minted);
        // Past exp and the leeway the cached answer is a refusal, and the
        // token is forgotten.
        let after = minted.exp + keys.validation.leeway + 1;
        let refused = keys.verify_at(&token, after).expect_err("expired");
        assert_eq!(refused.0, "ExpiredSignature");
        assert!(keys.verified.tokens.lock().unwrap().is_empty());
    }

    #[test]
    fn only_the_same_string_is_answered_from_the_cache() {
        let keys = keys(&[7; 32]);
        let (token, _) = keys.mint(spec(60)).expect("mint");
        keys.verify(&token).expect("valid");
        // The same claims signed with another key, and the token with its
        // signature cut: both checked in full, both refused.
        let (forged, _) = self::keys(&[8; 32]).mint(spec(60)).expect("mint");
        assert!(keys.verify(&forged).is_err());
        let cut = &token[..token.len() - 2];
        assert!(keys.verify(cut).is_err());
        assert_eq!(keys.verified.tokens.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_full_cache_starts_over() {
        let keys = keys(&[7; 32]);
        for _ in 0..VERIFIED_TOKENS + 1 {
            let (token, _) = keys.mint(spec(60)).expect("mint");
            keys.verify(&token).expect("valid");
        }
        assert_eq!(keys.verified.tokens.lock().unwrap().len(), 1);
    }
}
