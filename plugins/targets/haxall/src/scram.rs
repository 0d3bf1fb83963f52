//! SCRAM-SHA-256 (RFC 5802 / RFC 7677) as the Haystack auth spec uses it
//! (https://project-haystack.org/doc/docHaystack/Auth):
//!
//! 1. `Authorization: HELLO username=<b64url(user)>` → 401
//!    `WWW-Authenticate: SCRAM handshakeToken=…, hash=SHA-256`
//! 2. `Authorization: SCRAM handshakeToken=…, data=<b64url(client-first)>` → 401
//!    `WWW-Authenticate: SCRAM handshakeToken=…, hash=SHA-256, data=<b64url(server-first)>`
//! 3. `Authorization: SCRAM handshakeToken=…, data=<b64url(client-final)>` → 200
//!    `Authentication-Info: authToken=…, data=<b64url(server-final)>`
//!
//! then `Authorization: BEARER authToken=…` on every request. Header `data`
//! is base64url without padding; inside the SCRAM messages the salt, proof
//! and signature are standard base64, as RFC 5802 has them.
//!
//! The exchange is written against a `send` closure (headers in; status and
//! headers out) so it runs the same over the host's http-client import and
//! over a plain socket in native tests. The nonce comes from the caller (the
//! `entropy` import in the component).

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

pub fn b64url(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

/// Decode base64url, tolerating padding and the standard alphabet (servers differ).
pub fn b64url_decode(s: &str) -> Result<Vec<u8>, String> {
    let t: String = s
        .trim()
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    URL_SAFE_NO_PAD.decode(t).map_err(|e| format!("bad base64 in auth header: {e}"))
}

fn hmac(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(msg);
    m.finalize().into_bytes().into()
}

/// `saslname` of RFC 5802: `=` and `,` escaped.
fn saslname(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// A nonce of printable characters without `,` from random bytes.
pub fn nonce_from(bytes: &[u8]) -> String {
    b64url(bytes)
}

/// The client side of one exchange.
pub struct Client {
    pub client_first_bare: String,
    pub nonce: String,
    pub password: String,
}

#[derive(Debug)]
pub struct ClientFinal {
    pub message: String,
    pub server_signature: [u8; 32],
}

impl Client {
    pub fn new(user: &str, password: &str, nonce: &str) -> Client {
        Client {
            client_first_bare: format!("n={},r={}", saslname(user), nonce),
            nonce: nonce.into(),
            password: password.into(),
        }
    }

    /// `n,,n=user,r=nonce` (no channel binding).
    pub fn first_message(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client-final message for the server-first message, and the server
    /// signature the server-final message must carry.
    pub fn final_message(&self, server_first: &str) -> Result<ClientFinal, String> {
        let mut r = None;
        let mut s = None;
        let mut i = None;
        for part in server_first.split(',') {
            match part.split_once('=') {
                Some(("r", v)) => r = Some(v),
                Some(("s", v)) => s = Some(v),
                Some(("i", v)) => i = Some(v),
                Some(("m", _)) => return Err("SCRAM: server requires an extension (m=) we do not support".into()),
                _ => {}
            }
        }
        let (r, s, i) = match (r, s, i) {
            (Some(r), Some(s), Some(i)) => (r, s, i),
            _ => return Err(format!("SCRAM: malformed server-first message {server_first:?}")),
        };
        if !r.starts_with(&self.nonce) || r.len() <= self.nonce.len() {
            return Err("SCRAM: server nonce does not extend ours".into());
        }
        let salt = STANDARD.decode(s).map_err(|e| format!("SCRAM: bad salt: {e}"))?;
        let iterations: u32 = i.parse().map_err(|_| format!("SCRAM: bad iteration count {i:?}"))?;
        if iterations == 0 || iterations > 10_000_000 {
            return Err(format!("SCRAM: refusing iteration count {iterations}"));
        }
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(self.password.as_bytes(), &salt, iterations, &mut salted);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let server_key = hmac(&salted, b"Server Key");
        let without_proof = format!("c=biws,r={r}");
        let auth_message = format!("{},{},{}", self.client_first_bare, server_first, without_proof);
        let client_sig = hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(client_sig.iter()).map(|(a, b)| a ^ b).collect();
        Ok(ClientFinal {
            message: format!("{without_proof},p={}", STANDARD.encode(proof)),
            server_signature: hmac(&server_key, auth_message.as_bytes()),
        })
    }
}

/// Check the server-final message (`v=…`) against the expected signature.
pub fn verify_server_final(server_final: &str, expected: &[u8; 32]) -> Result<(), String> {
    if let Some(e) = server_final.strip_prefix("e=") {
        return Err(format!("SCRAM: server says {e}"));
    }
    let v = server_final
        .split(',')
        .find_map(|p| p.strip_prefix("v="))
        .ok_or_else(|| format!("SCRAM: server-final has no signature: {server_final:?}"))?;
    let got = STANDARD.decode(v).map_err(|e| format!("SCRAM: bad server signature: {e}"))?;
    if got.as_slice() != expected.as_slice() {
        return Err("SCRAM: server signature does not match: not the server we share the password with".into());
    }
    Ok(())
}

/// Parameters of an auth header such as
/// `SCRAM handshakeToken=abc, hash=SHA-256, data=xyz`: (scheme, [(name, value)]).
pub fn parse_auth_header(h: &str) -> (String, Vec<(String, String)>) {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    let params = rest
        .split(',')
        .filter_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    (scheme.to_ascii_uppercase(), params)
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// One HTTP exchange for the login: the Authorization header value in,
/// (status, response headers) out.
pub type Send<'a> = dyn FnMut(&str) -> Result<(u16, Vec<(String, String)>), String> + 'a;

/// Log in with SCRAM-SHA-256 and return the bearer auth token. `send` makes a
/// GET of the server's `about` URI with the given Authorization header.
pub fn login(user: &str, password: &str, nonce: &str, send: &mut Send) -> Result<String, String> {
    // 1. HELLO
    let (status, headers) = send(&format!("HELLO username={}", b64url(user.as_bytes())))?;
    if status != 401 {
        return Err(format!("auth: HELLO answered {status}, expected 401 with a WWW-Authenticate challenge"));
    }
    let www = header(&headers, "WWW-Authenticate").ok_or("auth: HELLO answer has no WWW-Authenticate header")?;
    let (scheme, params) = parse_auth_header(www);
    if scheme != "SCRAM" {
        return Err(format!("auth: server offers {scheme:?}; this client speaks SCRAM only"));
    }
    if let Some(hash) = param(&params, "hash") {
        if !hash.eq_ignore_ascii_case("SHA-256") {
            return Err(format!("auth: server wants SCRAM with {hash}; this client speaks SHA-256 only"));
        }
    }
    let token = param(&params, "handshakeToken").ok_or("auth: challenge has no handshakeToken")?.to_string();

    // 2. client-first → server-first
    let client = Client::new(user, password, nonce);
    let (status, headers) =
        send(&format!("SCRAM handshakeToken={token}, data={}", b64url(client.first_message().as_bytes())))?;
    if status != 401 {
        return Err(format!("auth: client-first answered {status}, expected 401 with the server-first message"));
    }
    let www = header(&headers, "WWW-Authenticate").ok_or("auth: no WWW-Authenticate with the server-first message")?;
    let (_, params) = parse_auth_header(www);
    let token = param(&params, "handshakeToken").unwrap_or(&token).to_string();
    let data = param(&params, "data").ok_or("auth: server-first challenge has no data")?;
    let server_first = String::from_utf8(b64url_decode(data)?).map_err(|_| "auth: server-first is not UTF-8")?;

    // 3. client-final → auth token + server-final
    let fin = client.final_message(&server_first)?;
    let (status, headers) = send(&format!("SCRAM handshakeToken={token}, data={}", b64url(fin.message.as_bytes())))?;
    if status != 200 {
        return Err(format!("auth: client-final answered {status} (wrong user or password?)"));
    }
    let info = header(&headers, "Authentication-Info").ok_or("auth: no Authentication-Info in the final answer")?;
    let (_, mut params) = parse_auth_header(&format!("X {info}"));
    let auth_token = param(&params, "authToken").ok_or("auth: Authentication-Info has no authToken")?.to_string();
    if let Some(data) = param(&params, "data") {
        let server_final = String::from_utf8(b64url_decode(data)?).map_err(|_| "auth: server-final is not UTF-8")?;
        verify_server_final(&server_final, &fin.server_signature)?;
    }
    params.clear();
    Ok(auth_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil".
    #[test]
    fn rfc7677_vector() {
        let c = Client::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.first_message(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let f = c.final_message(server_first).unwrap();
        assert_eq!(
            f.message,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", &f.server_signature).unwrap();
        assert!(verify_server_final("v=AAAA", &f.server_signature).is_err());
    }

    #[test]
    fn refuses_bad_server_first() {
        let c = Client::new("user", "pencil", "abc");
        assert!(c.final_message("r=xyz,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(c.final_message("r=abcd,s=AAAA").unwrap_err().contains("malformed"));
        assert!(c.final_message("r=abcd,s=AAAA,i=0").is_err());
    }

    #[test]
    fn headers_and_base64() {
        let (s, p) = parse_auth_header("SCRAM handshakeToken=aabbcc, hash=SHA-256, data=cj1z");
        assert_eq!(s, "SCRAM");
        assert_eq!(param(&p, "handshakeToken"), Some("aabbcc"));
        assert_eq!(param(&p, "data"), Some("cj1z"));
        assert_eq!(b64url(b"user"), "dXNlcg");
        assert_eq!(b64url_decode("dXNlcg==").unwrap(), b"user");
        assert_eq!(b64url_decode("+/8").unwrap(), b64url_decode("-_8").unwrap());
        assert_eq!(saslname("a,b=c"), "a=2Cb=3Dc");
    }

    /// The whole exchange against a scripted server built from the RFC vector.
    #[test]
    fn login_flow() {
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let mut step = 0;
        let mut send = |auth: &str| -> Result<(u16, Vec<(String, String)>), String> {
            step += 1;
            let h = |k: &str, v: String| vec![(k.to_string(), v)];
            match step {
                1 => {
                    assert_eq!(auth, "HELLO username=dXNlcg");
                    Ok((401, h("WWW-Authenticate", "SCRAM handshakeToken=tok, hash=SHA-256".into())))
                }
                2 => {
                    assert_eq!(
                        auth,
                        format!("SCRAM handshakeToken=tok, data={}", b64url(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
                    );
                    Ok((
                        401,
                        h(
                            "WWW-Authenticate",
                            format!("SCRAM handshakeToken=tok, hash=SHA-256, data={}", b64url(server_first.as_bytes())),
                        ),
                    ))
                }
                _ => Ok((
                    200,
                    h(
                        "Authentication-Info",
                        format!("authToken=T0K, data={}", b64url(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")),
                    ),
                )),
            }
        };
        assert_eq!(login("user", "pencil", "rOprNGfwEbeRWgbNEkqO", &mut send).unwrap(), "T0K");
    }
}
