//! The client side of delegating sign-in to an OpenID Connect provider
//! (`LOOM_OAUTH_LOGIN_PROVIDER=oidc`): discovery, the authorization URL,
//! the code exchange and id_token validation. The browser part of the flow
//! is in [`super::oidc_signin`].
//!
//! - Discovery (`<LOOM_OIDC_ISSUER>/.well-known/openid-configuration`) is
//!   fetched on the first sign-in, not at start, so Loom starts while the
//!   provider is down; it is kept for an hour. Its `issuer` must equal
//!   `LOOM_OIDC_ISSUER` byte for byte (OIDC Discovery §4.3) and every
//!   endpoint must be `https://` (`http://` only on a loopback host).
//! - The JWKS is kept too, and fetched again when an id_token names a key
//!   it does not hold (the provider rotated its keys), at most every 10 s.
//! - An id_token passes when it is signed by a key of that JWKS with an
//!   asymmetric algorithm (never `none` or an HMAC one, which a provider's
//!   public keys cannot check), its `iss` is the issuer, its `aud` holds
//!   Loom's client id (and `azp` names it when `aud` holds several), it has
//!   not expired, is not used before its `nbf` nor issued (`iat`) in the
//!   future (60 s of leeway each way), and its `nonce` is the one sent.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::loopback_host;
use crate::config::{Config, Secret};

/// How long a discovery document is kept.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// The least time between two JWKS fetches caused by an unknown key id.
const JWKS_REFETCH_GAP: Duration = Duration::from_secs(10);
/// The largest answer read from the provider.
const MAX_BODY: usize = 1024 * 1024;
/// The algorithms an id_token may be signed with: asymmetric only.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The id_token claim that names the Loom user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsernameClaim {
    /// `sub`: stable and unique at the provider (the default).
    Sub,
    /// `email`, lowercased; refused unless `email_verified` is true.
    Email,
}

/// Why a sign-in through the provider failed.
#[derive(Debug)]
pub enum OidcError {
    /// The provider could not be reached or answered nonsense (logged;
    /// the browser is told to try later).
    Unreachable(String),
    /// The provider refused the code exchange (`invalid_grant`, …).
    Refused(String),
    /// The id_token failed validation.
    InvalidToken(String),
}

impl std::fmt::Display for OidcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OidcError::Unreachable(m) => write!(f, "the sign-in provider is unavailable: {m}"),
            OidcError::Refused(m) => write!(f, "the sign-in provider refused the sign-in: {m}"),
            OidcError::InvalidToken(m) => {
                write!(f, "the sign-in provider's identity token is not valid: {m}")
            }
        }
    }
}

/// What discovery tells Loom.
#[derive(Clone, Debug)]
struct Endpoints {
    authorization: String,
    token: String,
    jwks: String,
    /// Send the client secret with HTTP Basic (else in the form body).
    basic_auth: bool,
}

#[derive(Default)]
struct Cache {
    endpoints: Option<(Endpoints, Instant)>,
    keys: Option<(Vec<Jwk>, Instant)>,
}

/// The configured provider.
pub struct Provider {
    /// `LOOM_OIDC_ISSUER`.
    pub issuer: String,
    client_id: String,
    client_secret: Option<Secret>,
    /// Which claim names the Loom user.
    pub username_claim: UsernameClaim,
    /// Loom's callback, `<LOOM_OAUTH_ISSUER>/oauth/oidc/callback`, the
    /// redirect URI to register at the provider.
    pub redirect_uri: String,
    http: reqwest::Client,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// Whether `url` may be used to talk to the provider: `https://`, or
/// `http://` to a loopback host.
fn acceptable_url(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| match u.scheme() {
        "https" => true,
        "http" => loopback_host(u.host_str().unwrap_or_default()),
        _ => false,
    })
}

/// Checks the `LOOM_OIDC_*` settings of a configuration that delegates sign-in.
pub fn check_config(config: &Config) -> Result<(), String> {
    let Some(issuer) = &config.oidc_issuer else {
        return Err(
            "LOOM_OAUTH_LOGIN_PROVIDER=oidc needs LOOM_OIDC_ISSUER, the provider's issuer URL"
                .into(),
        );
    };
    let parsed = url::Url::parse(issuer).ok();
    if !acceptable_url(issuer)
        || parsed.is_none_or(|u| u.query().is_some() || u.fragment().is_some())
    {
        return Err(format!(
            "LOOM_OIDC_ISSUER={issuer:?} is not valid: expected an https:// URL with no query or fragment \
             (http:// only on a loopback host)"
        ));
    }
    if config.oidc_client_id.is_none() {
        return Err("LOOM_OAUTH_LOGIN_PROVIDER=oidc needs LOOM_OIDC_CLIENT_ID, Loom's client id at the provider".into());
    }
    username_claim(&config.oidc_username_claim)?;
    Ok(())
}

fn username_claim(raw: &str) -> Result<UsernameClaim, String> {
    match raw {
        "sub" => Ok(UsernameClaim::Sub),
        "email" => Ok(UsernameClaim::Email),
        other => Err(format!(
            "LOOM_OIDC_USERNAME_CLAIM={other:?} is not valid: expected sub or email"
        )),
    }
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
}

/// How far an id_token's times may be off the server's clock: the
/// provider's clock and Loom's may differ a little.
const ID_TOKEN_LEEWAY_SECS: u64 = 60;

#[derive(Deserialize)]
struct IdClaims {
    sub: String,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(default)]
    aud: serde_json::Value,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<serde_json::Value>,
    /// When it was issued (seconds since the epoch); `nbf` and `exp` are
    /// checked by the decoder.
    #[serde(default)]
    iat: Option<i64>,
}

/// Who the provider says signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The provider's subject.
    pub subject: String,
    /// The Loom username it maps to (per [`UsernameClaim`]).
    pub username: String,
}

impl Provider {
    /// From a configuration that passed [`check_config`].
    pub fn from_config(config: &Config, loom_issuer: &str) -> Result<Provider, String> {
        check_config(config)?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("loom/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client for the OIDC provider: {e}"))?;
        Ok(Provider {
            issuer: config.oidc_issuer.clone().unwrap_or_default(),
            client_id: config.oidc_client_id.clone().unwrap_or_default(),
            client_secret: config.oidc_client_secret.clone(),
            username_claim: username_claim(&config.oidc_username_claim)?,
            redirect_uri: format!("{loom_issuer}/oauth/oidc/callback"),
            http,
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The body of a GET or POST answer, at most [`MAX_BODY`] bytes.
    async fn read(mut r: reqwest::Response) -> Result<(u16, Vec<u8>), OidcError> {
        let status = r.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = r
            .chunk()
            .await
            .map_err(|e| OidcError::Unreachable(e.to_string()))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(OidcError::Unreachable("an answer over 1 MiB".into()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    }

    async fn get_json(&self, url: &str) -> Result<serde_json::Value, OidcError> {
        let r = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| OidcError::Unreachable(format!("GET {url}: {e}")))?;
        let (status, body) = Self::read(r).await?;
        if status != 200 {
            return Err(OidcError::Unreachable(format!("GET {url}: HTTP {status}")));
        }
        serde_json::from_slice(&body)
            .map_err(|e| OidcError::Unreachable(format!("GET {url}: not JSON: {e}")))
    }

    async fn endpoints(&self) -> Result<Endpoints, OidcError> {
        let mut cache = self.cache.lock().await;
        if let Some((e, at)) = &cache.endpoints
            && at.elapsed() < DISCOVERY_TTL
        {
            return Ok(e.clone());
        }
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let doc: Discovery = serde_json::from_value(self.get_json(&url).await?)
            .map_err(|e| OidcError::Unreachable(format!("discovery document: {e}")))?;
        if doc.issuer != self.issuer {
            return Err(OidcError::Unreachable(format!(
                "discovery names issuer {:?}, not {:?}",
                doc.issuer, self.issuer
            )));
        }
        for u in [
            &doc.authorization_endpoint,
            &doc.token_endpoint,
            &doc.jwks_uri,
        ] {
            if !acceptable_url(u) {
                return Err(OidcError::Unreachable(format!(
                    "discovery names the endpoint {u:?}, which is not https://"
                )));
            }
        }
        let methods = doc
            .token_endpoint_auth_methods_supported
            .unwrap_or_default();
        let basic_auth = methods.is_empty()
            || methods.iter().any(|m| m == "client_secret_basic")
            || !methods.iter().any(|m| m == "client_secret_post");
        let e = Endpoints {
            authorization: doc.authorization_endpoint,
            token: doc.token_endpoint,
            jwks: doc.jwks_uri,
            basic_auth,
        };
        cache.endpoints = Some((e.clone(), Instant::now()));
        Ok(e)
    }

    /// The provider's keys; fetched again when `refresh` and the last fetch
    /// is older than [`JWKS_REFETCH_GAP`].
    async fn keys(&self, jwks_uri: &str, refresh: bool) -> Result<Vec<Jwk>, OidcError> {
        let mut cache = self.cache.lock().await;
        if let Some((keys, at)) = &cache.keys
            && (!refresh || at.elapsed() < JWKS_REFETCH_GAP)
        {
            return Ok(keys.clone());
        }
        let doc = self.get_json(jwks_uri).await?;
        // Parsed one by one: a key of a kind this build does not know (an
        // encryption key, say) must not hide the signing keys beside it.
        let keys: Vec<Jwk> = doc
            .get("keys")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| OidcError::Unreachable("the JWKS has no keys array".into()))?
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .filter(|k| !matches!(k.common.public_key_use, Some(PublicKeyUse::Encryption)))
            .collect();
        cache.keys = Some((keys.clone(), Instant::now()));
        Ok(keys)
    }

    /// The provider's authorization URL for one sign-in: code flow, PKCE
    /// S256, `state` and `nonce`.
    pub async fn authorization_url(
        &self,
        state: &str,
        nonce: &str,
        challenge: &str,
    ) -> Result<String, OidcError> {
        let e = self.endpoints().await?;
        let scope = match self.username_claim {
            UsernameClaim::Sub => "openid",
            UsernameClaim::Email => "openid email",
        };
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("response_type", "code")
            .append_pair("client_id", &self.client_id)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("scope", scope)
            .append_pair("state", state)
            .append_pair("nonce", nonce)
            .append_pair("code_challenge", challenge)
            .append_pair("code_challenge_method", "S256");
        let sep = if e.authorization.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok(format!("{}{sep}{}", e.authorization, q.finish()))
    }

    /// Exchanges `code` and validates the id_token it brings; `nonce_hash`
    /// is the SHA-256 (hex) of the nonce sent.
    pub async fn sign_in(
        &self,
        code: &str,
        verifier: &str,
        nonce_hash: &str,
    ) -> Result<Identity, OidcError> {
        let e = self.endpoints().await?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("code_verifier", verifier),
        ];
        let mut request = self
            .http
            .post(&e.token)
            .header("accept", "application/json");
        match &self.client_secret {
            Some(secret) if e.basic_auth => {
                // RFC 6749 §2.3.1: both parts form-encoded before Basic.
                let enc =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                let basic = STANDARD.encode(format!("{}:{}", enc(&self.client_id), enc(&secret.0)));
                request = request.header("authorization", format!("Basic {basic}"));
            }
            Some(secret) => {
                form.push(("client_id", &self.client_id));
                form.push(("client_secret", &secret.0));
            }
            None => form.push(("client_id", &self.client_id)),
        }
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&form)
            .finish();
        let r = request
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|err| OidcError::Unreachable(format!("POST {}: {err}", e.token)))?;
        let (status, body) = Self::read(r).await?;
        if status != 200 {
            return Err(match serde_json::from_slice::<ErrorAnswer>(&body) {
                Ok(a) if (400..500).contains(&status) => OidcError::Refused(a.error),
                _ => OidcError::Unreachable(format!("POST {}: HTTP {status}", e.token)),
            });
        }
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|err| OidcError::Unreachable(format!("token answer: {err}")))?;
        let id_token = answer
            .id_token
            .ok_or_else(|| OidcError::InvalidToken("the token answer has no id_token".into()))?;
        self.validate(&e, &id_token, nonce_hash).await
    }

    async fn validate(
        &self,
        e: &Endpoints,
        id_token: &str,
        nonce_hash: &str,
    ) -> Result<Identity, OidcError> {
        let bad = |m: String| OidcError::InvalidToken(m);
        let header = jsonwebtoken::decode_header(id_token)
            .map_err(|err| bad(format!("unreadable header: {err}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(bad(format!(
                "signed with {:?}; only asymmetric algorithms are accepted",
                header.alg
            )));
        }
        let pick = |keys: &[Jwk]| -> Option<Jwk> {
            match &header.kid {
                Some(kid) => keys
                    .iter()
                    .find(|k| k.common.key_id.as_deref() == Some(kid.as_str()))
                    .cloned(),
                // Without a key id, only an unambiguous JWKS will do.
                None if keys.len() == 1 => keys.first().cloned(),
                None => None,
            }
        };
        let key = match pick(&self.keys(&e.jwks, false).await?) {
            Some(k) => k,
            None => pick(&self.keys(&e.jwks, true).await?)
                .ok_or_else(|| bad("signed by a key the provider does not publish".into()))?,
        };
        let decoding = DecodingKey::from_jwk(&key)
            .map_err(|err| bad(format!("the provider's key cannot be used: {err}")))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.client_id]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = ID_TOKEN_LEEWAY_SECS;
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<IdClaims>(id_token, &decoding, &validation)
            .map_err(|err| {
                use jsonwebtoken::errors::ErrorKind;
                bad(match err.kind() {
                    ErrorKind::InvalidAudience => "its audience is not Loom's client id".into(),
                    ErrorKind::InvalidIssuer => "its issuer is not the configured provider".into(),
                    ErrorKind::ExpiredSignature => "it has expired".into(),
                    ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".into(),
                    ErrorKind::InvalidSignature => "its signature does not verify".into(),
                    _ => err.to_string(),
                })
            })?
            .claims;
        let now = i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap_or(i64::MAX);
        if claims
            .iat
            .is_some_and(|iat| iat > now.saturating_add(ID_TOKEN_LEEWAY_SECS.cast_signed()))
        {
            return Err(bad("it was issued in the future (iat)".into()));
        }
        if let serde_json::Value::Array(auds) = &claims.aud
            && auds.len() > 1
            && claims.azp.as_deref() != Some(self.client_id.as_str())
        {
            return Err(bad(
                "it has several audiences and its azp is not Loom's client id".into(),
            ));
        }
        let nonce_ok = claims
            .nonce
            .as_deref()
            .is_some_and(|n| super::same(&super::sha256_hex(n), nonce_hash));
        if !nonce_ok {
            return Err(bad("its nonce is not the one this sign-in sent".into()));
        }
        if claims.sub.is_empty() {
            return Err(bad("its subject is empty".into()));
        }
        let username = match self.username_claim {
            UsernameClaim::Sub => claims.sub.clone(),
            UsernameClaim::Email => {
                let verified = matches!(claims.email_verified, Some(serde_json::Value::Bool(true)))
                    || matches!(&claims.email_verified, Some(serde_json::Value::String(s)) if s == "true");
                match claims.email {
                    Some(email) if verified && !email.is_empty() => email.to_lowercase(),
                    Some(_) => {
                        return Err(bad(
                            "its email is not verified (LOOM_OIDC_USERNAME_CLAIM=email)".into(),
                        ));
                    }
                    None => {
                        return Err(bad(
                            "it carries no email (LOOM_OIDC_USERNAME_CLAIM=email)".into()
                        ));
                    }
                }
            }
        };
        Ok(Identity {
            subject: claims.sub,
            username,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<(), String> {
        let mut vars: std::collections::HashMap<String, String> = [
            ("LOOM_OAUTH_ENABLED", "true"),
            ("LOOM_OAUTH_ISSUER", "https://loom.example.com"),
            ("LOOM_OAUTH_LOGIN_PROVIDER", "oidc"),
            ("LOOM_OIDC_ISSUER", "https://id.example.com"),
            ("LOOM_OIDC_CLIENT_ID", "loom"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (k, v) in pairs {
            vars.insert((*k).to_owned(), (*v).to_owned());
        }
        Config::from_vars(&vars)?.check()
    }

    #[test]
    fn delegation_needs_a_trustworthy_issuer_and_a_client_id() {
        assert!(config(&[]).is_ok());
        assert!(config(&[("LOOM_OIDC_ISSUER", "http://127.0.0.1:9400")]).is_ok());
        assert!(config(&[("LOOM_OIDC_ISSUER", "https://id.example.com/realms/x")]).is_ok());
        for bad in [
            "http://id.example.com",
            "id.example.com",
            "https://id.example.com/?x=1",
        ] {
            let e = config(&[("LOOM_OIDC_ISSUER", bad)]).unwrap_err();
            assert!(e.contains("LOOM_OIDC_ISSUER"), "{bad}: {e}");
        }
        assert!(
            config(&[("LOOM_OIDC_ISSUER", "")])
                .unwrap_err()
                .contains("LOOM_OIDC_ISSUER")
        );
        assert!(
            config(&[("LOOM_OIDC_CLIENT_ID", "")])
                .unwrap_err()
                .contains("LOOM_OIDC_CLIENT_ID")
        );
        assert!(
            config(&[("LOOM_OIDC_USERNAME_CLAIM", "preferred_username")])
                .unwrap_err()
                .contains("LOOM_OIDC_USERNAME_CLAIM")
        );
    }

    #[test]
    fn the_client_secret_never_prints() {
        let s = Secret("hunter2-very-secret".into());
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
