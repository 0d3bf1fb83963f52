//! How scalebench reaches a NATS cluster as production runs it: TLS for
//! `tls://` URLs (the process's configuration, [`crate::tls`]) and the
//! account it logs in with — a `.creds` file (user JWT and NKey seed), an
//! NKey seed file, a user and password, or a token. Passwords and tokens
//! come from files or the environment, never from a flag's value.
//!
//! One [`NatsAccess`] per process, set by the command from its flags
//! ([`install`]); every NATS connection (the carrier, `study nats`,
//! `bench nats`) starts from [`options`].

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::credentials::Secret;

/// The environment variable holding `--nats-user`'s password.
pub const PASSWORD_ENV: &str = "SCALEBENCH_NATS_PASSWORD";
/// The environment variable holding a NATS token.
pub const TOKEN_ENV: &str = "SCALEBENCH_NATS_TOKEN";

/// The account scalebench logs in to NATS with.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum NatsAccount {
    /// No credentials.
    #[default]
    Anonymous,
    /// A credentials file: user JWT and NKey seed.
    Creds(PathBuf),
    /// An NKey user seed (`SU…`), read from a file.
    NKey(Secret),
    UserPassword(String, Secret),
    Token(Secret),
}

impl NatsAccount {
    /// In the user's words, for results and errors (never the secret).
    pub fn describe(&self) -> String {
        match self {
            NatsAccount::Anonymous => "no credentials".into(),
            NatsAccount::Creds(p) => format!("the credentials file {}", p.display()),
            NatsAccount::NKey(_) => "an NKey".into(),
            NatsAccount::UserPassword(u, _) => format!("user {u} and its password"),
            NatsAccount::Token(_) => "a token".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{problem}\nhint: {hint}")]
    Usage { problem: String, hint: String },
}

/// The account from the flags: at most one of `creds`, `nkey_file`, `user`
/// (its password from [`PASSWORD_ENV`]); else a token from `token_file` or
/// [`TOKEN_ENV`]; else anonymous.
pub fn account_from(
    creds: Option<&PathBuf>,
    nkey_file: Option<&PathBuf>,
    user: Option<&str>,
    token_file: Option<&PathBuf>,
) -> Result<NatsAccount, AccessError> {
    let given = [creds.is_some(), nkey_file.is_some(), user.is_some(), token_file.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(AccessError::Usage {
            problem: "more than one NATS login was given (--nats-creds, --nats-nkey, --nats-user, --nats-token-file)"
                .into(),
            hint: "give the one your NATS account uses".into(),
        });
    }
    let read = |flag: &str, p: &PathBuf, what: &str| -> Result<String, AccessError> {
        let text = std::fs::read_to_string(p).map_err(|e| AccessError::Usage {
            problem: format!("{flag} {}: cannot be read: {e}", p.display()),
            hint: format!("give a file holding {what}"),
        })?;
        let line = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
        if line.is_empty() {
            return Err(AccessError::Usage {
                problem: format!("{flag} {}: the file is empty", p.display()),
                hint: format!("give a file holding {what}"),
            });
        }
        Ok(line.to_string())
    };
    if let Some(p) = creds {
        if let Err(e) = std::fs::metadata(p) {
            return Err(AccessError::Usage {
                problem: format!("--nats-creds {}: cannot be read: {e}", p.display()),
                hint: "give the .creds file your NATS operator issued (user JWT and NKey seed)".into(),
            });
        }
        return Ok(NatsAccount::Creds(p.clone()));
    }
    if let Some(p) = nkey_file {
        let seed = read("--nats-nkey", p, "an NKey user seed (a line starting SU)")?;
        if !seed.starts_with("SU") {
            return Err(AccessError::Usage {
                problem: format!("--nats-nkey {}: the file holds no NKey user seed (a line starting SU)", p.display()),
                hint: "give the user's seed file (`nk -gen user` writes one), not its public key (U…)".into(),
            });
        }
        return Ok(NatsAccount::NKey(Secret::new(seed)));
    }
    if let Some(u) = user {
        let pw = std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty()).ok_or_else(|| AccessError::Usage {
            problem: format!("--nats-user {u}: no password was given"),
            hint: format!("set {PASSWORD_ENV} to the account's password (a password never goes in a flag's value)"),
        })?;
        return Ok(NatsAccount::UserPassword(u.to_string(), Secret::new(pw)));
    }
    if let Some(p) = token_file {
        return Ok(NatsAccount::Token(Secret::new(read("--nats-token-file", p, "the NATS token on its first line")?)));
    }
    Ok(match std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()) {
        Some(t) => NatsAccount::Token(Secret::new(t)),
        None => NatsAccount::Anonymous,
    })
}

static ACCOUNT: OnceLock<NatsAccount> = OnceLock::new();

/// Make `account` the process's NATS login (the first call wins).
pub fn install(account: NatsAccount) {
    let _ = ACCOUNT.set(account);
}

/// The process's NATS login.
pub fn account() -> &'static NatsAccount {
    ACCOUNT.get_or_init(NatsAccount::default)
}

/// Whether any of the comma-separated URLs asks for TLS.
pub fn urls_want_tls(urls: &str) -> bool {
    urls.split(',').any(|u| u.trim().starts_with("tls://"))
}

/// Connect options with the process's login, and TLS when `urls` ask for it
/// (then required: no fallback to plain).
#[cfg(feature = "nats")]
pub async fn options(urls: &str) -> Result<async_nats::ConnectOptions, String> {
    let mut o = match account() {
        NatsAccount::Anonymous => async_nats::ConnectOptions::new(),
        NatsAccount::Creds(p) => async_nats::ConnectOptions::with_credentials_file(p.clone())
            .await
            .map_err(|e| format!("the credentials file {} cannot be used: {e}", p.display()))?,
        NatsAccount::NKey(seed) => async_nats::ConnectOptions::with_nkey(seed.expose().to_string()),
        NatsAccount::UserPassword(u, p) => {
            async_nats::ConnectOptions::with_user_and_password(u.clone(), p.expose().to_string())
        }
        NatsAccount::Token(t) => async_nats::ConnectOptions::with_token(t.expose().to_string()),
    };
    if urls_want_tls(urls) {
        let c = crate::tls::client().map_err(|e| e.to_string())?;
        o = o.require_tls(true).tls_client_config((*c.config).clone());
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_logins_are_refused_and_a_public_key_is_not_a_seed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("k");
        std::fs::write(&f, "UABC\n").unwrap();
        let e = account_from(Some(&f), Some(&f), None, None).unwrap_err().to_string();
        assert!(e.contains("more than one NATS login"), "{e}");
        let e = account_from(None, Some(&f), None, None).unwrap_err().to_string();
        assert!(e.contains("no NKey user seed"), "{e}");
        std::fs::write(&f, "# seed\nSUAXYZ\n").unwrap();
        assert!(
            matches!(account_from(None, Some(&f), None, None).unwrap(), NatsAccount::NKey(s) if s.expose() == "SUAXYZ")
        );
    }
}
