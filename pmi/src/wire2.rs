//! The PMI-2 wire format (as spoken by MPICH's PMI-2 client, Hydra and Slurm's `mpi/pmi2`).
//!
//! After the PMI-1 handshake line `cmd=init pmi_version=2 pmi_subversion=0\n` (answered by
//! a PMI-1 `cmd=response_to_init …` line), every message in both directions is a **frame**:
//! a 6-byte ASCII decimal length field followed by that many bytes of body. The length is
//! padded with blanks; Slurm left-justifies it (`"42    "`), Hydra right-justifies it
//! (`"    42"`), so the reader trims both sides. Some writers count a trailing NUL in the
//! length; trailing NULs of a body are ignored.
//!
//! A body is a sequence of `key=value;` fields, the first being `cmd=<command>;`. Inside a
//! value a literal `;` is written `;;`. The first `=` of a field separates key and value
//! (values may contain `=`). Messages are [`wire::Message`]s, read **by key** only.
//!
//! Note: Slurm's server does not undo `;;` (its sources say "no escape of ';' supported"),
//! so values containing `;` only travel intact through MPICH/Hydra-style servers.

use crate::wire::{Message, WireError};

/// Size of the length field that precedes every PMI-2 body.
pub const LEN_FIELD: usize = 6;

/// Largest body a 6-digit length field can announce.
pub const MAX_BODY: usize = 999_999;

/// Longest key a PMI-2 server must accept (`PMI2_MAX_KEYLEN`).
pub const KEYLEN_MAX: usize = 64;

/// Longest value a PMI-2 server must accept (`PMI2_MAX_VALLEN`).
pub const VALLEN_MAX: usize = 1024;

/// How the length field is padded when writing a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Justify {
    /// `"42    "`: as Slurm (and MPICH's client) write it.
    Left,
    /// `"    42"`: as Hydra writes it.
    Right,
}

/// Encodes the body `cmd=…;k=v;…;` of `m`, escaping `;` in keys' values as `;;`.
pub fn encode_body(m: &Message) -> String {
    let mut s = String::with_capacity(64);
    for (k, v) in m.fields() {
        s.push_str(k);
        s.push('=');
        for c in v.chars() {
            if c == ';' {
                s.push_str(";;");
            } else {
                s.push(c);
            }
        }
        s.push(';');
    }
    s
}

/// Encodes `m` as a complete frame (length field + body). Errors if the body is longer
/// than [`MAX_BODY`].
pub fn encode(m: &Message, justify: Justify) -> Result<Vec<u8>, WireError> {
    let body = encode_body(m);
    frame(body.as_bytes(), justify)
}

/// Prefixes `body` with its 6-byte length field.
pub fn frame(body: &[u8], justify: Justify) -> Result<Vec<u8>, WireError> {
    if body.len() > MAX_BODY {
        return Err(WireError(format!(
            "PMI-2 body of {} bytes exceeds the 6-digit length field",
            body.len()
        )));
    }
    let len = match justify {
        Justify::Left => format!("{:<6}", body.len()),
        Justify::Right => format!("{:>6}", body.len()),
    };
    let mut out = Vec::with_capacity(LEN_FIELD + body.len());
    out.extend_from_slice(len.as_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// Parses a 6-byte length field, blanks (and NULs) trimmed on both sides.
pub fn parse_len(field: &[u8]) -> Result<usize, WireError> {
    let s = std::str::from_utf8(field)
        .map_err(|_| WireError(format!("PMI-2 length field {field:?} is not ASCII")))?;
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\0');
    t.parse()
        .map_err(|_| WireError(format!("PMI-2 length field {s:?} is not a number")))
}

/// Parses a body `cmd=x;k=v;…;` (trailing NULs and a missing final `;` are tolerated;
/// `;;` inside a value is a literal `;`). The body must start with a `cmd=` field, whose
/// key may also be `mcmd`.
pub fn parse_body(body: &[u8]) -> Result<Message, WireError> {
    let s = std::str::from_utf8(body).map_err(|_| WireError("PMI-2 body is not UTF-8".into()))?;
    let s = s.trim_end_matches('\0');
    let b = s.as_bytes();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // Tolerate stray separators and blanks between fields.
        if b[i] == b';' || b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let kstart = i;
        while i < b.len() && b[i] != b'=' && b[i] != b';' {
            i += 1;
        }
        let key = &s[kstart..i];
        if i >= b.len() || b[i] == b';' {
            return Err(WireError(format!(
                "PMI-2 field {key:?} has no '=' in {s:?}"
            )));
        }
        i += 1; // '='
        let mut val = Vec::new();
        loop {
            if i >= b.len() {
                break; // unterminated last value: tolerated
            }
            if b[i] == b';' {
                if i + 1 < b.len() && b[i + 1] == b';' {
                    val.push(b';');
                    i += 2;
                    continue;
                }
                i += 1;
                break;
            }
            val.push(b[i]);
            i += 1;
        }
        // `val` is made of whole UTF-8 sequences of `s` plus ';', hence valid UTF-8.
        let val =
            String::from_utf8(val).map_err(|_| WireError("PMI-2 value is not UTF-8".into()))?;
        fields.push((key.trim().to_string(), val));
    }
    match fields.first() {
        Some((k, _)) if k == "cmd" || k == "mcmd" => {}
        Some(_) => {
            return Err(WireError(format!(
                "PMI-2 body does not start with cmd=: {s:?}"
            )))
        }
        None => return Err(WireError("empty PMI-2 body".into())),
    }
    if fields.iter().any(|(k, _)| k.is_empty()) {
        return Err(WireError(format!("empty key in PMI-2 body {s:?}")));
    }
    let m = Message::from_fields(fields);
    Ok(m)
}

/// A boolean field: `TRUE`/`FALSE` (any case, as Slurm compares them), also `1`/`0`/`yes`/`no`.
pub fn get_bool(m: &Message, key: &str) -> Option<bool> {
    let v = m.get(key)?.trim();
    if v.eq_ignore_ascii_case("true") || v == "1" || v.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") || v == "0" || v.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

/// True if `key` can travel as a PMI-2 key: non-empty printable ASCII without blank, `=`
/// or `;`, at most [`KEYLEN_MAX`] bytes.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= KEYLEN_MAX
        && key
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'=' && b != b';')
}

/// True if `value` can travel as a PMI-2 value: printable ASCII or blank (a `;` is escaped
/// on the wire), at most [`VALLEN_MAX`] bytes.
pub fn is_valid_value(value: &str) -> bool {
    value.len() <= VALLEN_MAX && value.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
}
