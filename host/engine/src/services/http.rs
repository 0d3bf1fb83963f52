//! [`StackServices`]' HTTP: a request goes only to `<base URL><path>` of a
//! service the run named (no redirects, no `Host` header), timed from
//! sending it to the last byte of the body.

use std::io::Read;
use std::time::{Duration, Instant};

use plugin_runtime::types::{HttpRequest, HttpResponse};

use super::{known, StackServices, Timing};

/// Largest HTTP response body the host reads for a plugin. A probe's read
/// can be large: a Haystack batch hisRead of 1,000 points over an hour of
/// 5-second history is ~82 MB of JSON (measured against the test server),
/// so the bound leaves room for three times that.
pub const MAX_HTTP_BODY_BYTES: u64 = 256 << 20;

impl StackServices {
    /// The URL a request goes to, or why it may not go anywhere.
    pub fn url_for(&self, service: &str, path: &str) -> Result<String, String> {
        let base = self.http_bases.get(service).ok_or_else(|| {
            format!("unknown HTTP service `{service}`; this run's HTTP services are: {}", known(self.http_bases.keys()))
        })?;
        if !path.starts_with('/') || path.starts_with("//") {
            return Err(format!(
                "HTTP path {path:?} must start with a single `/` (the host adds the service's address)"
            ));
        }
        if path.chars().any(|c| c.is_ascii_control() || c == ' ' || c == '\\') {
            return Err(format!(
                "HTTP path {path:?} has spaces, backslashes or control characters; percent-encode them"
            ));
        }
        Ok(format!("{base}{path}"))
    }

    /// Perform `request` against the stack's HTTP service it names, timed.
    /// Any status comes back as a response (judging it is the caller's job);
    /// `Err` is for requests that got no response.
    pub fn timed_http(&self, plugin: &str, request: &HttpRequest) -> (Result<HttpResponse, String>, Option<Duration>) {
        let url = match self.url_for(&request.service, &request.path) {
            Ok(u) => u,
            Err(e) => return (Err(e), None),
        };
        let method = request.method.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return (Err(format!("HTTP method {:?} is not a method", request.method)), None);
        }
        let mut req = self.agent.request(&method, &url);
        for (k, v) in &request.headers {
            if k.eq_ignore_ascii_case("host") {
                return (
                    Err("a plugin may not set the Host header: the host addresses the stack's services".into()),
                    None,
                );
            }
            req = req.set(k, v);
        }
        let what = format!("{method} {}", request.path.chars().take(80).collect::<String>());
        let t0 = Instant::now();
        let sent = if request.body.is_empty() && matches!(method.as_str(), "GET" | "HEAD" | "DELETE" | "OPTIONS") {
            req.call()
        } else {
            req.send_bytes(&request.body)
        };
        let result = match sent {
            Ok(resp) | Err(ureq::Error::Status(_, resp)) => read_response(resp),
            Err(e) => Err(match crate::tls::explain(&e, "http://") {
                Some(t) => format!("{method} {} on HTTP service `{}` over TLS: {t}", request.path, request.service),
                None => format!("{method} {} on HTTP service `{}`: {e}", request.path, request.service),
            }),
        };
        let d = t0.elapsed();
        self.record(
            plugin,
            Timing { kind: "http", service: request.service.clone(), what, duration: d, ok: result.is_ok() },
        );
        (result, Some(d))
    }
}

fn read_response(resp: ureq::Response) -> Result<HttpResponse, String> {
    let status = resp.status();
    let mut headers = Vec::new();
    for name in resp.headers_names() {
        for v in resp.all(&name) {
            headers.push((name.clone(), v.to_string()));
        }
    }
    let mut body = Vec::new();
    resp.into_reader()
        .take(MAX_HTTP_BODY_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("reading the HTTP response body (status {status}): {e}"))?;
    if body.len() as u64 > MAX_HTTP_BODY_BYTES {
        return Err(format!("HTTP response body is larger than {} MiB (status {status})", MAX_HTTP_BODY_BYTES >> 20));
    }
    Ok(HttpResponse { status, headers, body })
}
