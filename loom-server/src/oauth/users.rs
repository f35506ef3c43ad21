//! Password users: hashing with argon2id (the crate's defaults: 19 MiB,
//! two passes) and the checks a sign-in makes.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use loom_ops::store::{Store, UserRow};

/// What `loom user add --no-password` stores instead of a hash: not a PHC
/// string, so no password ever matches it; the account signs in only
/// through the OpenID Connect provider.
pub const NO_PASSWORD: &str = "!no-password";

/// The shortest password `loom user add` accepts.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// An argon2id PHC string for `password`, with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash the password: {e}"))
}

/// Whether `password` matches the stored PHC string.
pub fn verify_password(stored: &str, password: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// A hash no password matches, checked when the username is unknown so a
/// miss takes as long as a wrong password.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("no password matches this decoy").unwrap_or_default())
}

/// The active user `username` whose password is `password`, if any. Unknown
/// users, wrong passwords and disabled accounts all answer `None`, in about
/// the same time. The hash runs off the async threads.
pub async fn sign_in(store: &Store, username: &str, password: &str) -> Option<UserRow> {
    let user = store.user_get(username).await.ok().flatten();
    let stored = user
        .as_ref()
        .map_or_else(|| decoy_hash().to_owned(), |u| u.password_hash.clone());
    let password = password.to_owned();
    let ok = tokio::task::spawn_blocking(move || verify_password(&stored, &password))
        .await
        .unwrap_or(false);
    user.filter(|u| ok && !u.disabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "correct horsE"));
        assert!(!verify_password("not a hash", "correct horse"));
        for p in ["", "!no-password", NO_PASSWORD] {
            assert!(!verify_password(NO_PASSWORD, p));
        }
    }
}
