//! The SUT account's password for targets and probe sets that log in
//! (Haystack SCRAM): read from a file (`--credentials-file PATH`) or the
//! environment (`SCALEBENCH_TARGET_PASSWORD`), never from a flag's value,
//! and never written to results or logs. The host hands it to the plugin's
//! `configure` / `setup` params as `password`, next to the `user` the params
//! name, only in the string passed to the plugin: results keep the params
//! as the user gave them.

use std::path::Path;

use crate::error::UsageError;

/// The environment variable that can hold the password.
pub const ENV: &str = "SCALEBENCH_TARGET_PASSWORD";

/// A password; its `Debug` never shows it.
#[derive(Clone, PartialEq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<hidden>)")
    }
}

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The password from `file` (first line, trailing newline dropped), else
/// from [`ENV`]; None when neither is given.
pub fn load(file: Option<&Path>) -> anyhow::Result<Option<Secret>> {
    if let Some(f) = file {
        let text = std::fs::read_to_string(f)
            .map_err(|e| UsageError(format!("cannot read the credentials file {}: {e}\nhint: put the SUT account's password on the file's first line", f.display())))?;
        let line = text.lines().next().unwrap_or("").to_string();
        if line.is_empty() {
            return Err(UsageError(format!(
                "the credentials file {} is empty\nhint: put the SUT account's password on its first line",
                f.display()
            ))
            .into());
        }
        return Ok(Some(Secret(line)));
    }
    Ok(std::env::var(ENV).ok().filter(|p| !p.is_empty()).map(Secret))
}

/// Refuse a password given in params on the command line.
pub fn refuse_in_params(flag: &str, params_json: &str) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_str(params_json).unwrap_or(serde_json::Value::Null);
    if v.get("password").is_some() {
        return Err(format!(
            "{flag}: a password does not go on the command line (it would be in the shell history, the process list and the result)\nhint: put it in a file and pass --credentials-file PATH, or set {ENV}"
        ));
    }
    Ok(())
}

/// `params_json` with `password` added when the params name a `user` and a
/// password was given; unchanged otherwise.
pub fn with_password(params_json: &str, password: Option<&Secret>) -> String {
    let Some(pw) = password else { return params_json.to_string() };
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str::<serde_json::Value>(params_json) else {
        return params_json.to_string();
    };
    if map.get("user").and_then(|u| u.as_str()).is_none_or(|u| u.is_empty()) {
        return params_json.to_string();
    }
    map.insert("password".into(), serde_json::Value::String(pw.0.clone()));
    serde_json::Value::Object(map).to_string()
}

/// `params_json` without `user` (and `password`): for calls made before
/// any stack runs, where a plugin must not try to log in.
pub fn without_login(params_json: &str) -> String {
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str::<serde_json::Value>(params_json) else {
        return params_json.to_string();
    };
    map.remove("user");
    map.remove("password");
    serde_json::Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_goes_only_where_a_user_is_named() {
        let s = Secret::new("hunter2");
        assert_eq!(with_password(r#"{"user":"su"}"#, Some(&s)), r#"{"password":"hunter2","user":"su"}"#);
        assert_eq!(with_password(r#"{"user":""}"#, Some(&s)), r#"{"user":""}"#);
        assert_eq!(with_password("{}", Some(&s)), "{}");
        assert_eq!(with_password(r#"{"user":"su"}"#, None), r#"{"user":"su"}"#);
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(refuse_in_params("--target-params", r#"{"user":"su","password":"x"}"#)
            .unwrap_err()
            .contains("--credentials-file"));
        assert!(refuse_in_params("--target-params", r#"{"user":"su"}"#).is_ok());
        assert_eq!(without_login(r#"{"user":"su","service":"api"}"#), r#"{"service":"api"}"#);
    }
}
