//! The control API's token: every call but `GET /v1/health` carries
//! `Authorization: Bearer TOKEN`, and a worker answers anything else with
//! 401. A worker started by hand makes its own and prints its URL with it
//! (`http://host:port/?token=…`), which is what the coordinator's
//! `--workers` takes; workers the coordinator starts (Docker Swarm) get one
//! made for the run in [`ENV`], and Kubernetes workers read it from the
//! Secret `deploy k8s` writes. The token never appears in a message: a
//! worker is named by its URL without it.

/// Where a worker (and the coordinator, for URLs without one) reads the token.
pub const ENV: &str = "SCALEBENCH_WORKER_TOKEN";

/// A new token: 32 hex digits from the kernel's random source.
pub fn generate() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A token as given (a file's text or the environment's), checked: at
/// least 16 characters of letters, digits, `-` and `_`.
pub fn check(token: &str) -> Result<String, String> {
    let t = token.trim();
    if t.len() < 16 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(format!(
            "a worker token is at least 16 letters, digits, `-` or `_` (this one has {} characters{}); make one with `head -c 16 /dev/urandom | xxd -p`",
            t.len(),
            if t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') { "" } else { ", some of them not allowed" }
        ));
    }
    Ok(t.to_string())
}

/// A worker URL as given to `--workers`: the URL without its `?token=…`,
/// and the token, if it had one.
pub fn split(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else { return (url.trim_end_matches('/').to_string(), None) };
    let token = query.split('&').find_map(|kv| kv.strip_prefix("token=")).map(str::to_string);
    (base.trim_end_matches('/').to_string(), token)
}

/// `text` with every `token=…` value replaced by `…` (a command line
/// kept in a result names the workers, not their tokens).
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("token=") {
        out.push_str(&rest[..i + "token=".len()]);
        out.push('…');
        rest = &rest[i + "token=".len()..];
        rest = &rest[rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(rest.len())..];
    }
    out.push_str(rest);
    out
}

/// The URL a worker prints: where it listens, with its token.
pub fn url_with(base: &str, token: &str) -> String {
    format!("{}/?token={token}", base.trim_end_matches('/'))
}

/// Whether an `Authorization` header carries `token`, compared in time
/// that does not depend on where they differ.
pub fn authorizes(header: Option<&str>, token: &str) -> bool {
    let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")) else { return false };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_a_token_splits_into_the_url_and_the_token() {
        assert_eq!(split("http://10.0.0.5:27100/?token=abc"), ("http://10.0.0.5:27100".into(), Some("abc".into())));
        assert_eq!(split("http://10.0.0.5:27100"), ("http://10.0.0.5:27100".into(), None));
        assert_eq!(split("http://h:1/?a=b&token=t1"), ("http://h:1".into(), Some("t1".into())));
        let (url, token) = split(&url_with("http://h:1", "0123456789abcdef"));
        assert_eq!((url.as_str(), token.as_deref()), ("http://h:1", Some("0123456789abcdef")));
    }

    #[test]
    fn a_command_line_keeps_the_workers_and_loses_their_tokens() {
        assert_eq!(
            redact("http://a:1/?token=0123456789abcdef,http://b:2/?token=fedcba9876543210"),
            "http://a:1/?token=…,http://b:2/?token=…"
        );
        assert_eq!(redact("--steps"), "--steps");
    }

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        let t = "0123456789abcdef0123456789abcdef";
        assert!(authorizes(Some(&format!("Bearer {t}")), t));
        assert!(!authorizes(None, t));
        assert!(!authorizes(Some(t), t), "without Bearer");
        assert!(!authorizes(Some("Bearer 0123456789abcdef0123456789abcdee"), t));
        assert!(!authorizes(Some("Bearer 0123456789abcdef"), t), "a prefix");
        assert!(!authorizes(Some(&format!("Bearer {t}0")), t), "longer");
    }

    #[test]
    fn generated_tokens_are_new_each_time_and_pass_the_check() {
        let (a, b) = (generate().unwrap(), generate().unwrap());
        assert_ne!(a, b);
        assert_eq!(check(&a), Ok(a.clone()));
        assert!(check("short").unwrap_err().contains("at least 16"));
        assert!(check("0123456789abcdef!").is_err());
    }
}
