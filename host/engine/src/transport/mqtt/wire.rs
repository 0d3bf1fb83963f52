//! The few MQTT 3.1.1 and 5 packets a publisher needs, encoded and decoded
//! by hand: CONNECT/CONNACK, PUBLISH (QoS 0/1), PUBACK, PINGREQ/PINGRESP,
//! DISCONNECT. MQTT 5 adds an empty property list to CONNECT and PUBLISH,
//! and a reason code to CONNACK and PUBACK: a PUBACK at or above 0x80 is a
//! refusal of that one message (0x87 not authorized, 0x97 quota exceeded).
//! Writing PUBLISH packets straight into one buffer lets a connection send a
//! whole batch with one syscall, where a general client library writes and
//! flushes once per message (measured: ~10 us of CPU per message; see
//! `scalebench bench generator`).

/// Append MQTT's variable-length "remaining length".
pub fn put_remaining_length(buf: &mut Vec<u8>, mut len: usize) {
    loop {
        let mut byte = (len % 128) as u8;
        len /= 128;
        if len > 0 {
            byte |= 0x80;
        }
        buf.push(byte);
        if len == 0 {
            break;
        }
    }
}

fn put_str(buf: &mut Vec<u8>, s: &[u8]) {
    buf.extend_from_slice(&(s.len() as u16).to_be_bytes());
    buf.extend_from_slice(s);
}

/// MQTT's protocol levels: 4 is 3.1.1, 5 is 5.0.
pub const V311: u8 = 4;
pub const V5: u8 = 5;

#[allow(clippy::too_many_arguments)]
pub fn connect(
    buf: &mut Vec<u8>,
    version: u8,
    client_id: &str,
    keep_alive_s: u16,
    clean_session: bool,
    user: Option<&str>,
    password: Option<&str>,
) {
    let mut body = Vec::with_capacity(64);
    put_str(&mut body, b"MQTT");
    body.push(version);
    let mut flags = 0u8;
    if clean_session {
        flags |= 0x02;
    }
    if user.is_some() {
        flags |= 0x80;
    }
    if password.is_some() {
        flags |= 0x40;
    }
    body.push(flags);
    body.extend_from_slice(&keep_alive_s.to_be_bytes());
    if version >= V5 {
        body.push(0); // no properties
    }
    put_str(&mut body, client_id.as_bytes());
    if let Some(u) = user {
        put_str(&mut body, u.as_bytes());
    }
    if let Some(p) = password {
        put_str(&mut body, p.as_bytes());
    }
    buf.push(0x10);
    put_remaining_length(buf, body.len());
    buf.extend_from_slice(&body);
}

/// A PUBLISH; `pkid` is ignored for QoS 0.
/// A PUBLISH; `v5` adds MQTT 5's (empty) property list.
pub fn publish(buf: &mut Vec<u8>, topic: &[u8], payload: &[u8], qos: u8, retain: bool, pkid: u16, v5: bool) {
    let mut first = 0x30 | (qos.min(1) << 1);
    if retain {
        first |= 0x01;
    }
    buf.push(first);
    let len = 2 + topic.len() + if qos > 0 { 2 } else { 0 } + usize::from(v5) + payload.len();
    put_remaining_length(buf, len);
    put_str(buf, topic);
    if qos > 0 {
        buf.extend_from_slice(&pkid.to_be_bytes());
    }
    if v5 {
        buf.push(0); // no properties
    }
    buf.extend_from_slice(payload);
}

/// An MQTT 5 reason code in words (CONNACK and PUBACK share them).
pub fn reason_name(code: u8) -> &'static str {
    match code {
        0x00 => "success",
        0x10 => "no matching subscribers",
        0x80 => "unspecified error",
        0x83 => "implementation specific error",
        0x84 => "unsupported protocol version",
        0x85 => "client identifier not valid",
        0x86 => "bad user name or password",
        0x87 => "not authorized",
        0x88 => "server unavailable",
        0x89 => "server busy",
        0x8A => "banned",
        0x8C => "bad authentication method",
        0x90 => "topic name invalid",
        0x91 => "packet identifier in use",
        0x95 => "packet too large",
        0x97 => "quota exceeded",
        0x99 => "payload format invalid",
        0x9A => "retain not supported",
        0x9B => "QoS not supported",
        0x9F => "connection rate exceeded",
        _ => "unknown reason",
    }
}

pub const PINGREQ: [u8; 2] = [0xC0, 0x00];
pub const DISCONNECT: [u8; 2] = [0xE0, 0x00];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    ConnAck {
        return_code: u8,
    },
    PubAck {
        pkid: u16,
        /// MQTT 5's reason code (0 under 3.1.1, which has none).
        reason: u8,
    },
    PingResp,
    /// Any other packet type (first byte).
    Other(u8),
}

/// Decode one packet from the front of `buf`: Some((packet, bytes used)),
/// None when more bytes are needed, Err on a malformed length.
pub fn decode(buf: &[u8]) -> Result<Option<(Incoming, usize)>, String> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let mut len = 0usize;
    let mut mult = 1usize;
    let mut i = 1;
    loop {
        if i >= buf.len() {
            return Ok(None);
        }
        let b = buf[i];
        len += (b & 0x7F) as usize * mult;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        mult *= 128;
        if i > 4 {
            return Err("malformed remaining length from the broker".into());
        }
    }
    let total = i + len;
    if buf.len() < total {
        return Ok(None);
    }
    let body = &buf[i..total];
    let packet = match buf[0] >> 4 {
        2 if body.len() >= 2 => Incoming::ConnAck { return_code: body[1] },
        4 if body.len() >= 2 => {
            Incoming::PubAck { pkid: u16::from_be_bytes([body[0], body[1]]), reason: body.get(2).copied().unwrap_or(0) }
        }
        13 => Incoming::PingResp,
        _ => Incoming::Other(buf[0]),
    };
    Ok(Some((packet, total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_length_matches_the_spec_examples() {
        for (n, want) in [
            (0usize, vec![0x00]),
            (127, vec![0x7F]),
            (128, vec![0x80, 0x01]),
            (16_383, vec![0xFF, 0x7F]),
            (16_384, vec![0x80, 0x80, 0x01]),
        ] {
            let mut b = Vec::new();
            put_remaining_length(&mut b, n);
            assert_eq!(b, want, "{n}");
        }
    }

    #[test]
    fn publish_encodes_qos1_retained() {
        let mut b = Vec::new();
        publish(&mut b, b"a/b", b"xy", 1, true, 0x0102, false);
        assert_eq!(b, vec![0x33, 9, 0, 3, b'a', b'/', b'b', 1, 2, b'x', b'y']);
    }

    #[test]
    fn mqtt5_publish_carries_an_empty_property_list_and_a_puback_its_reason() {
        let mut b = Vec::new();
        publish(&mut b, b"a/b", b"xy", 1, true, 0x0102, true);
        assert_eq!(b, vec![0x33, 10, 0, 3, b'a', b'/', b'b', 1, 2, 0, b'x', b'y']);
        // PUBACK 5.0: id 7, reason 0x87, no properties.
        let refused = [0x40, 0x04, 0x00, 0x07, 0x87, 0x00];
        assert_eq!(decode(&refused).unwrap(), Some((Incoming::PubAck { pkid: 7, reason: 0x87 }, 6)));
        assert_eq!(reason_name(0x87), "not authorized");
        let mut c = Vec::new();
        connect(&mut c, V5, "g", 30, true, None, None);
        assert_eq!(c[8], 5);
        assert_eq!(c[12], 0, "an empty CONNECT property list after the keep-alive");
    }

    #[test]
    fn decodes_acks_across_partial_reads() {
        let bytes = [0x40, 0x02, 0x00, 0x07, 0xD0, 0x00, 0x20, 0x02, 0x00, 0x00];
        assert_eq!(decode(&bytes[..1]).unwrap(), None);
        assert_eq!(decode(&bytes[..3]).unwrap(), None);
        assert_eq!(decode(&bytes).unwrap(), Some((Incoming::PubAck { pkid: 7, reason: 0 }, 4)));
        assert_eq!(decode(&bytes[4..]).unwrap(), Some((Incoming::PingResp, 2)));
        assert_eq!(decode(&bytes[6..]).unwrap(), Some((Incoming::ConnAck { return_code: 0 }, 4)));
    }

    #[test]
    fn connect_has_the_protocol_name_and_client_id() {
        let mut b = Vec::new();
        connect(&mut b, V311, "gen-1", 30, true, None, None);
        assert_eq!(b[0], 0x10);
        assert_eq!(&b[2..8], &[0, 4, b'M', b'Q', b'T', b'T']);
        assert_eq!(b[8], 4);
        assert_eq!(b[9], 0x02);
        assert!(b.ends_with(b"gen-1"));
    }
}
