//! The PMI-1 line format ("simple PMI", as spoken by MPICH, Hydra and Slurm).
//!
//! A message is one line of space-separated `key=value` tokens terminated by `\n`, for
//! example `cmd=put kvsname=kvs_1 key=k value=v`. The command is the value of the `cmd`
//! key (or `mcmd` for the multi-line spawn command). Servers differ in the fields they add
//! and in their order (Hydra adds `msg=success`, omits `rc` on some replies and puts fields
//! in another order), so a [`Message`] is always read **by key**, never by position.
//!
//! Parsing is lenient: runs of blanks separate tokens, a token without `=` is kept as a key
//! with an empty value, and a value may itself contain `=` (only the first `=` of a token
//! separates key and value). Values can therefore not contain spaces or newlines; writers
//! check that with [`is_valid_key`] / [`is_valid_value`].

use std::fmt;

/// One PMI-1 message: an ordered list of `key=value` fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    fields: Vec<(String, String)>,
}

/// A line that is not a PMI-1 message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed PMI line: {}", self.0)
    }
}

impl std::error::Error for WireError {}

impl Message {
    /// A message whose first field is `cmd=<cmd>`.
    pub fn new(cmd: &str) -> Message {
        Message {
            fields: vec![("cmd".to_string(), cmd.to_string())],
        }
    }

    /// A message made of exactly these fields, in this order.
    pub fn from_fields(fields: Vec<(String, String)>) -> Message {
        Message { fields }
    }

    /// Appends the field `key=value` (builder style).
    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Message {
        self.push(key, value);
        self
    }

    /// Appends the field `key=value`.
    pub fn push(&mut self, key: &str, value: impl fmt::Display) {
        self.fields.push((key.to_string(), value.to_string()));
    }

    /// The command: the value of `cmd`, or of `mcmd` for multi-line commands.
    pub fn cmd(&self) -> Option<&str> {
        self.get("cmd").or_else(|| self.get("mcmd"))
    }

    /// The value of the first field named `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key` parsed as an integer (`None` if absent or not a number).
    pub fn get_int(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(|v| v.trim().parse().ok())
    }

    /// The return code `rc`. A reply without `rc` (Hydra omits it on some replies) counts
    /// as success, `Some(0)`; an `rc` that is not a number counts as failure, `Some(-1)`.
    pub fn rc(&self) -> i64 {
        match self.get("rc") {
            None => 0,
            Some(v) => v.trim().parse().unwrap_or(-1),
        }
    }

    /// All fields in wire order.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// The message as one line, `\n`-terminated.
    pub fn to_line(&self) -> String {
        let mut s = String::with_capacity(64);
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(k);
            s.push('=');
            s.push_str(v);
        }
        s.push('\n');
        s
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_line().trim_end_matches('\n'))
    }
}

/// Parses one line (with or without its trailing `\n` / `\r\n`). An empty or blank line is
/// an error; so is a line whose first token has an empty key (`=x`).
pub fn parse(line: &str) -> Result<Message, WireError> {
    let line = line.trim_end_matches(['\n', '\r']);
    let mut fields = Vec::new();
    for tok in line.split_ascii_whitespace() {
        let (k, v) = match tok.split_once('=') {
            Some((k, v)) => (k, v),
            None => (tok, ""),
        };
        if k.is_empty() {
            return Err(WireError(format!("empty key in {line:?}")));
        }
        fields.push((k.to_string(), v.to_string()));
    }
    if fields.is_empty() {
        return Err(WireError("empty line".into()));
    }
    Ok(Message { fields })
}

/// Parses raw bytes of one line (see [`parse`]); bytes that are not UTF-8 are an error.
pub fn parse_bytes(line: &[u8]) -> Result<Message, WireError> {
    let s = std::str::from_utf8(line).map_err(|_| WireError("line is not UTF-8".into()))?;
    parse(s)
}

/// Formats `cmd=<cmd> k1=v1 k2=v2 ...\n`.
pub fn format(cmd: &str, fields: &[(&str, &str)]) -> String {
    let mut m = Message::new(cmd);
    for (k, v) in fields {
        m.push(k, v);
    }
    m.to_line()
}

/// True if `key` can travel in a PMI-1 field: non-empty, printable ASCII, no blank and no `=`.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
}

/// True if `value` can travel in a PMI-1 field portably (Hydra truncates values at `=`):
/// printable ASCII without blank and without `=`. The empty value is allowed.
pub fn is_valid_value(value: &str) -> bool {
    value.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
}
