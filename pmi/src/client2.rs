//! The PMI-2 client (`srun --mpi=pmi2`, Hydra), the version handshake, and the rule that
//! picks a PMI version from the environment.

use crate::client::{env_fd_number, env_usize, take_env_fd};
use crate::conn::{err, Conn};
use crate::wire::Message;
use crate::wire2::{self, Justify};
use rdma_api::{Bootstrap, Result};
use std::os::fd::OwnedFd;

/// A PMI wire protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmiVersion {
    /// PMI-1.1: newline-terminated `cmd=… key=value` lines.
    One,
    /// PMI-2.0: length-prefixed `cmd=…;key=value;` frames.
    Two,
}

impl PmiVersion {
    fn numbers(self) -> (i64, i64) {
        match self {
            PmiVersion::One => (1, 1),
            PmiVersion::Two => (2, 0),
        }
    }
}

/// Which PMI version to offer first, and whether to insist on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The version sent in the `init` line.
    pub version: PmiVersion,
    /// If true, a server that answers with another version is an error; if false the
    /// client continues in the version the server named.
    pub strict: bool,
}

impl Selection {
    /// The rule applied by [`crate::Boot::from_env`] (see the crate documentation), from
    /// `MPI_PMI`, `SLURM_MPI_TYPE` and `PMI2_SUN_PATH`.
    pub fn from_env() -> Result<Selection> {
        let var = |n: &str| std::env::var(n).ok();
        Selection::decide(
            var("MPI_PMI").as_deref(),
            var("SLURM_MPI_TYPE").as_deref(),
            std::env::var_os("PMI2_SUN_PATH").is_some(),
        )
    }

    /// The rule itself: `mpi_pmi` = `1` or `2` forces that version (strict); unset, empty
    /// or `auto` offers PMI-2 when Slurm's `mpi/pmi2` plugin started the rank
    /// (`slurm_mpi_type` starts with `pmi2`, or `PMI2_SUN_PATH` is set), else PMI-1, and
    /// accepts the other version if the server names it.
    pub fn decide(
        mpi_pmi: Option<&str>,
        slurm_mpi_type: Option<&str>,
        pmi2_sun_path: bool,
    ) -> Result<Selection> {
        match mpi_pmi.map(str::trim) {
            Some("1") => Ok(Selection {
                version: PmiVersion::One,
                strict: true,
            }),
            Some("2") => Ok(Selection {
                version: PmiVersion::Two,
                strict: true,
            }),
            None | Some("") | Some("auto") => {
                let slurm_pmi2 = slurm_mpi_type
                    .is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("pmi2"));
                Ok(Selection {
                    version: if slurm_pmi2 || pmi2_sun_path {
                        PmiVersion::Two
                    } else {
                        PmiVersion::One
                    },
                    strict: false,
                })
            }
            Some(other) => Err(err(format!("MPI_PMI={other:?}: expected 1, 2 or auto"))),
        }
    }
}

/// Sends the PMI-1 `init` line for `want` and reads `response_to_init`. Returns the
/// version the connection now speaks (see [`crate::Boot::connect`]).
pub(crate) fn handshake(conn: &mut Conn, want: PmiVersion, strict: bool) -> Result<PmiVersion> {
    let (v, sub) = want.numbers();
    let init = Message::new("init")
        .with("pmi_version", v)
        .with("pmi_subversion", sub);
    // One write: Slurm reads the init line with a single read(2) of at most 64 bytes.
    conn.write_all(init.to_line().as_bytes())?;
    let r = conn.read_line()?;
    if r.cmd() != Some("response_to_init") {
        return Err(err(format!(
            "unexpected PMI reply to init: {r} (wanted cmd=response_to_init)"
        )));
    }
    let server = r.get_int("pmi_version");
    if r.rc() == 0 && server.is_none_or(|s| s == v) {
        return Ok(want);
    }
    let named = match server {
        Some(1) => Some(PmiVersion::One),
        Some(2) => Some(PmiVersion::Two),
        _ => None,
    };
    match named {
        Some(other) if other != want && !strict => Ok(other),
        _ => Err(err(format!(
            "PMI-{v} init refused by the process manager: {r}{}",
            if strict {
                " (MPI_PMI forces the version; unset it to negotiate)"
            } else {
                ""
            }
        ))),
    }
}

/// A PMI-2 client: one rank's connection to a PMI-2 server (Slurm's `srun --mpi=pmi2`,
/// Hydra) over the stream in `PMI_FD`.
///
/// Requests are synchronous: each call sends one frame and reads the reply frame, whose
/// fields are read by key. The constructors perform the handshake (`init` with
/// `pmi_version=2`), `fullinit` (which gives rank, size and appnum) and `job-getid`.
/// [`Bootstrap`] maps to `kvs-put`, `kvs-fence` and `kvs-get` (with `srcid=-1`). Call
/// [`Pmi2Client::finalize`] before a normal exit.
///
/// Values are stored with `%` written `%25` and `;` written `%3B` (undone by `get`):
/// Slurm's server does not undo the protocol's `;;` escape and would cut a value at its
/// first `;` (the TCP device publishes `;`-separated address lists). Only ranks of this
/// library read these keys, so the encoding is invisible to callers.
pub struct Pmi2Client {
    conn: Conn,
    rank: usize,
    size: usize,
    appnum: i32,
    jobid: String,
    spawner_jobid: Option<String>,
    debugged: bool,
    finalized: bool,
}

impl Pmi2Client {
    /// Connects with PMI-2 (no fallback) to the process manager in the environment:
    /// `PMI_FD`, `PMI_RANK` (sent as `pmirank`), `PMI_JOBID` (sent as `pmijobid`, if set).
    /// `Ok(None)` when `PMI_FD` is unset. Like [`crate::PmiClient::from_env`], succeeds at
    /// most once per process.
    pub fn from_env() -> Result<Option<Pmi2Client>> {
        let Some(fd) = env_fd_number()? else {
            return Ok(None);
        };
        let rank = env_usize("PMI_RANK")?;
        let jobid = std::env::var("PMI_JOBID").ok();
        let owned = take_env_fd(fd)?;
        Pmi2Client::connect(owned, rank, jobid.as_deref()).map(Some)
    }

    /// Initializes PMI-2 over an already-connected stream (strictly: a server that does
    /// not agree to PMI-2 is an error). `pmirank` is the rank the launcher gave this process
    /// (`PMI_RANK`), `jobid` its `PMI_JOBID`.
    pub fn connect(fd: OwnedFd, pmirank: usize, jobid: Option<&str>) -> Result<Pmi2Client> {
        let mut conn = Conn::new(fd);
        handshake(&mut conn, PmiVersion::Two, true)?;
        Pmi2Client::after_init(conn, pmirank, jobid)
    }

    /// Continues on a connection whose `init pmi_version=2` was accepted.
    pub(crate) fn after_init(
        conn: Conn,
        pmirank: usize,
        jobid: Option<&str>,
    ) -> Result<Pmi2Client> {
        let mut c = Pmi2Client {
            conn,
            rank: 0,
            size: 1,
            appnum: 0,
            jobid: jobid.unwrap_or("").to_string(),
            spawner_jobid: None,
            debugged: false,
            finalized: false,
        };
        // Slurm insists on all three fields (it reads pmijobid with atoi).
        let r = c.request(
            Message::new("fullinit")
                .with("pmijobid", jobid.unwrap_or("0"))
                .with("pmirank", pmirank)
                .with("threaded", "FALSE"),
            "fullinit-response",
        )?;
        let num = |k: &str| {
            r.get_int(k)
                .ok_or_else(|| err(format!("no {k} in PMI-2 fullinit-response: {r}")))
        };
        let (rank, size) = (num("rank")?, num("size")?);
        if size <= 0 || rank < 0 || rank >= size {
            return Err(err(format!(
                "PMI-2 fullinit-response with bad rank/size: {r}"
            )));
        }
        c.rank = rank as usize;
        c.size = size as usize;
        c.appnum = r.get_int("appnum").unwrap_or(0) as i32;
        c.spawner_jobid = r
            .get("spawner-jobid")
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        c.debugged = wire2::get_bool(&r, "debugged").unwrap_or(false);
        // The job id names the key space in kvs-get; the server's word wins over PMI_JOBID.
        let r = c.request(Message::new("job-getid"), "job-getid-response")?;
        if let Some(id) = r.get("jobid").filter(|s| !s.is_empty()) {
            c.jobid = id.to_string();
        }
        Ok(c)
    }

    /// The job id (`job-getid`; Slurm: `<jobid>.<stepid>`).
    pub fn jobid(&self) -> &str {
        &self.jobid
    }

    /// The application number from `fullinit-response` (Slurm always says -1).
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// The job that spawned this one, if any (`spawner-jobid`).
    pub fn spawner_jobid(&self) -> Option<&str> {
        self.spawner_jobid.as_deref()
    }

    /// Whether the server reported the job as debugged.
    pub fn debugged(&self) -> bool {
        self.debugged
    }

    /// A job attribute (`info-getjobattr`, e.g. `PMI_process_mapping`); `None` if the
    /// server does not know it.
    pub fn job_attr(&mut self, key: &str) -> Result<Option<String>> {
        if !wire2::is_valid_key(key) {
            return Err(err(format!("invalid PMI-2 key {key:?}")));
        }
        let r = self.request(
            Message::new("info-getjobattr").with("key", key),
            "info-getjobattr-response",
        )?;
        if wire2::get_bool(&r, "found") == Some(true) {
            Ok(Some(r.get("value").unwrap_or("").to_string()))
        } else {
            Ok(None)
        }
    }

    /// Asks the process manager to abort the whole job (`cmd=abort;isworld=TRUE;msg=…;`).
    /// PMI-2 has no exit-code field: `code` is only printed with `msg` on stderr, and the
    /// caller should exit with it right after this returns (Slurm kills the step with
    /// SIGKILL). No reply is expected.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        if !msg.is_empty() {
            eprintln!("rank {}: abort({code}): {msg}", self.rank);
        }
        let text: String = if msg.is_empty() {
            format!("abort({code})")
        } else {
            msg.chars()
                .map(|c| if c.is_ascii_graphic() { c } else { ' ' })
                .take(wire2::VALLEN_MAX)
                .collect()
        };
        self.send(
            Message::new("abort")
                .with("isworld", "TRUE")
                .with("msg", text),
        )
    }

    /// Orderly end (`cmd=finalize;`, waits for `finalize-response`). Idempotent.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        let r = self.request(Message::new("finalize"), "finalize-response")?;
        self.finalized = true;
        check_rc(&r, "finalize")
    }

    fn send(&mut self, m: Message) -> Result<()> {
        if self.finalized {
            return Err(err("PMI already finalized"));
        }
        // Left-justified length, as MPICH's client and Slurm write it; servers trim it.
        let frame = wire2::encode(&m, Justify::Left).map_err(|e| err(e.to_string()))?;
        self.conn.write_all(&frame)
    }

    /// Sends `m` and reads the reply, which must be command `expect`.
    fn request(&mut self, m: Message, expect: &str) -> Result<Message> {
        let cmd = m.cmd().unwrap_or("?").to_string();
        self.send(m)?;
        let r = self.conn.read_frame()?;
        if r.cmd() != Some(expect) {
            return Err(err(format!(
                "unexpected PMI-2 reply to {cmd}: {r} (wanted cmd={expect})"
            )));
        }
        Ok(r)
    }
}

fn check_rc(r: &Message, what: &str) -> Result<()> {
    if r.rc() != 0 {
        return Err(err(format!(
            "PMI-2 {what} failed: {}",
            r.get("errmsg")
                .map_or_else(|| r.to_string(), str::to_string)
        )));
    }
    Ok(())
}

impl Bootstrap for Pmi2Client {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        if !wire2::is_valid_key(key) {
            return Err(err(format!(
                "invalid PMI-2 key {key:?} (printable ASCII without blank, '=' or ';', at most {} bytes)",
                wire2::KEYLEN_MAX
            )));
        }
        if !wire2::is_valid_value(value) {
            return Err(err(format!(
                "invalid PMI-2 value for {key} (printable ASCII, at most {} bytes)",
                wire2::VALLEN_MAX
            )));
        }
        let stored = kvs_encode(value);
        if stored.len() > wire2::VALLEN_MAX {
            return Err(err(format!(
                "PMI-2 value for {key} is {} bytes once ';' and '%' are encoded (at most {})",
                stored.len(),
                wire2::VALLEN_MAX
            )));
        }
        let r = self.request(
            Message::new("kvs-put")
                .with("key", key)
                .with("value", stored),
            "kvs-put-response",
        )?;
        check_rc(&r, &format!("kvs-put {key}"))
    }
    fn barrier(&mut self) -> Result<()> {
        let r = self.request(Message::new("kvs-fence"), "kvs-fence-response")?;
        check_rc(&r, "kvs-fence")
    }
    fn get(&mut self, key: &str) -> Result<String> {
        if !wire2::is_valid_key(key) {
            return Err(err(format!("invalid PMI-2 key {key:?}")));
        }
        let jobid = self.jobid.clone();
        let r = self.request(
            Message::new("kvs-get")
                .with("jobid", jobid)
                .with("srcid", -1)
                .with("key", key),
            "kvs-get-response",
        )?;
        check_rc(&r, &format!("kvs-get {key}"))?;
        if wire2::get_bool(&r, "found") != Some(true) {
            return Err(err(format!("key {key} not found")));
        }
        r.get("value")
            .map(kvs_decode)
            .ok_or_else(|| err(format!("no value in PMI-2 kvs-get-response: {r}")))
    }
}

/// `%` → `%25`, `;` → `%3B` (see [`Pmi2Client`]).
pub(crate) fn kvs_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '%' => out.push_str("%25"),
            ';' => out.push_str("%3B"),
            c => out.push(c),
        }
    }
    out
}

/// Inverse of [`kvs_encode`]; any other `%` sequence is kept as is.
pub(crate) fn kvs_decode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(r) = tail.strip_prefix("%25") {
            out.push('%');
            rest = r;
        } else if let Some(r) = tail
            .strip_prefix("%3B")
            .or_else(|| tail.strip_prefix("%3b"))
        {
            out.push(';');
            rest = r;
        } else {
            out.push('%');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{kvs_decode, kvs_encode};

    #[test]
    fn kvs_encoding_round_trips() {
        for v in [
            "",
            "a",
            ";",
            "%",
            "%3B",
            "%25",
            "a;b%c;;",
            "h,1,10.0.0.1;10.0.0.2",
            "%%;;",
        ] {
            let e = kvs_encode(v);
            assert!(!e.contains(';'), "{e}");
            assert_eq!(kvs_decode(&e), v);
        }
        assert_eq!(kvs_encode("a;b%"), "a%3Bb%25");
    }
}
