//! Component glue: WIT types in, pure modules, WIT types out.

/// World `probe-set-sized-plugin`: probe-set plus probe-answer (how many
/// readings or records an answer holds, so a report shows a read found data).
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "probe-set-sized-plugin",
    });
}

use bindings::exports::scalebench::plugin::probe_answer::Guest as AnswerGuest;
use bindings::exports::scalebench::plugin::probe_set::{Guest, Probe, ProbeRequest, ProbeResponse};
use bindings::scalebench::plugin::types::{HttpRequest, HttpResponse, LogLevel, PluginInfo, PluginKind, TagInfo};
use bindings::scalebench::plugin::{entropy, http_client, logging};

use crate::params::{self, Params};
use crate::probes::{self, Point};
use crate::{scram, zinc};

fn login(p: &Params) -> Result<Option<String>, String> {
    if p.user.is_empty() {
        return Ok(None);
    }
    let nonce = scram::nonce_from(&entropy::random_bytes(18));
    let about = format!("{}/about", p.api_path);
    let mut send = |auth: &str| -> Result<(u16, Vec<(String, String)>), String> {
        let r = http_client::send(&HttpRequest {
            method: "GET".into(),
            service: p.service.clone(),
            path: about.clone(),
            headers: vec![("Authorization".into(), auth.into())],
            body: Vec::new(),
        })?;
        Ok((r.status, r.headers))
    };
    Ok(Some(format!("BEARER authToken={}", scram::login(&p.user, &p.password, &nonce, &mut send)?)))
}

/// The last hour by the server's clock (about's serverTime), as a Zinc range.
fn last_hour(p: &Params, auth: &Option<String>) -> Option<String> {
    let mut headers = vec![("Accept".to_string(), "application/json".to_string())];
    if let Some(a) = auth {
        headers.push(("Authorization".into(), a.clone()));
    }
    let r = http_client::send(&HttpRequest {
        method: "GET".into(),
        service: p.service.clone(),
        path: format!("{}/about", p.api_path),
        headers,
        body: Vec::new(),
    })
    .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    let t = v["rows"][0]["serverTime"]["val"].as_str()?;
    let now = zinc::parse_datetime(t)?;
    let utc = zinc::Tz::utc();
    let mut s = String::new();
    zinc::write_datetime(&mut s, now - 3_600_000, &utc);
    s.push(',');
    zinc::write_datetime(&mut s, now, &utc);
    Some(s)
}

/// Point records with history on the server (`read point and his`), as many
/// as the largest hisRead probe reads.
fn server_points(p: &Params, auth: &Option<String>) -> Result<Vec<Point>, String> {
    let mut headers = vec![
        ("Accept".to_string(), "application/json".to_string()),
        ("Content-Type".to_string(), "text/zinc; charset=utf-8".to_string()),
    ];
    if let Some(a) = auth {
        headers.push(("Authorization".into(), a.clone()));
    }
    let r = http_client::send(&HttpRequest {
        method: "POST".into(),
        service: p.service.clone(),
        path: format!("{}/read", p.api_path),
        headers,
        body: probes::find_points(p.his_read_points.max(1)).into_bytes(),
    })?;
    if r.status != 200 {
        return Err(format!("read: HTTP {}", r.status));
    }
    probes::parse_points(&r.body)
}

struct Haystack;

impl Guest for Haystack {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "haystack".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::ProbeSet,
            summary: "a Haystack server's reads: read point/equip, hisRead of one equip today and of 1,000 points for an hour, about".into(),
            params_schema: params::SCHEMA.into(),
            default_params: params::DEFAULT_JSON.into(),
        }
    }

    fn setup(params_json: String, points: Vec<TagInfo>) -> Result<Vec<Probe>, String> {
        let p = Params::from_json(&params_json)?;
        let auth = login(&p)?;
        let _ = points; // the run's points are found on the server, as a user finds them
        let points = match server_points(&p, &auth) {
            Ok(v) => v,
            Err(e) => {
                logging::log(LogLevel::Warn, &format!("cannot list the server's points: {e}"));
                Vec::new()
            }
        };
        let (list, notes) = probes::setup(&p, &points, last_hour(&p, &auth));
        for n in notes {
            logging::log(LogLevel::Warn, &n);
        }
        Ok(list
            .into_iter()
            .map(|x| {
                let mut headers = vec![("Accept".to_string(), x.accept.to_string())];
                if let Some(a) = &auth {
                    headers.push(("Authorization".into(), a.clone()));
                }
                if x.method == "POST" {
                    headers.push(("Content-Type".into(), "text/zinc; charset=utf-8".into()));
                }
                Probe {
                    name: x.name,
                    description: x.description,
                    request: ProbeRequest::Http(HttpRequest {
                        method: x.method,
                        service: p.service.clone(),
                        path: x.path,
                        headers,
                        body: x.body.into_bytes(),
                    }),
                }
            })
            .collect())
    }

    fn check(name: String, response: ProbeResponse) -> Result<(), String> {
        match response {
            ProbeResponse::Http(h) => probes::check(&name, h.status, &h.body),
            ProbeResponse::Sql(_) => Err(format!("{name}: expected an HTTP response, got SQL rows")),
        }
    }
}

impl AnswerGuest for Haystack {
    fn size(name: String, response: HttpResponse) -> Option<u64> {
        probes::size(&name, &response.body)
    }
}

bindings::export!(Haystack with_types_in bindings);
