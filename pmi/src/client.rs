//! The client side: a rank talking PMI-1 to its process manager over the stream in `PMI_FD`,
//! and [`Boot`], which chooses between PMI-1, PMI-2 ([`crate::Pmi2Client`]) and a
//! [`Singleton`] from the environment.

use crate::client2::{self, Pmi2Client, PmiVersion, Selection};
use crate::conn::{err, Conn};
use crate::wire::{self, Message};
use rdma_api::{Bootstrap, Result};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Limits announced by the server in its `cmd=maxes` reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Maxes {
    /// Longest KVS name.
    pub kvsname_max: usize,
    /// Longest key.
    pub keylen_max: usize,
    /// Longest value.
    pub vallen_max: usize,
}

impl Default for Maxes {
    fn default() -> Maxes {
        Maxes {
            kvsname_max: 256,
            keylen_max: 64,
            vallen_max: 1024,
        }
    }
}

/// A PMI-1 client: one rank's connection to the process manager (our `mpirun`, MPICH's
/// Hydra, or Slurm's `srun --mpi=pmi2`, which all serve PMI-1 on `PMI_FD`).
/// [`PmiClient::from_env`] always speaks PMI-1; [`Boot::from_env`] chooses the version.
///
/// Requests are synchronous: each call sends one line and reads the reply. The client is
/// connected and initialized (`init`, `get_maxes`, `get_my_kvsname`) by its constructors.
/// Call [`PmiClient::finalize`] before the process exits normally; dropping the client only
/// closes the connection (which a process manager may count as an abnormal end).
pub struct PmiClient {
    conn: Conn,
    rank: usize,
    size: usize,
    kvsname: String,
    maxes: Maxes,
    finalized: bool,
}

static FROM_ENV_TAKEN: AtomicBool = AtomicBool::new(false);

pub(crate) fn env_usize(name: &str) -> Result<usize> {
    let v = std::env::var(name).map_err(|_| err(format!("PMI_FD is set but {name} is not")))?;
    v.trim()
        .parse()
        .map_err(|_| err(format!("{name}={v:?} is not a number")))
}

/// The descriptor number in `PMI_FD`, `None` when unset.
pub(crate) fn env_fd_number() -> Result<Option<RawFd>> {
    let fd_str = match std::env::var("PMI_FD") {
        Ok(s) => s,
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(e) => return Err(err(format!("PMI_FD: {e}"))),
    };
    let fd: RawFd = fd_str
        .trim()
        .parse()
        .map_err(|_| err(format!("PMI_FD={fd_str:?} is not a file descriptor number")))?;
    if fd < 0 {
        return Err(err(format!("PMI_FD={fd} is negative")));
    }
    Ok(Some(fd))
}

/// Takes ownership of the inherited PMI descriptor `fd` (once per process) and marks it
/// close-on-exec.
pub(crate) fn take_env_fd(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: F_GETFD only inspects the descriptor table; an invalid fd gives EBADF.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(err(format!(
            "PMI_FD={fd} is not an open descriptor: {}",
            std::io::Error::last_os_error()
        )));
    }
    if FROM_ENV_TAKEN.swap(true, Ordering::SeqCst) {
        return Err(err(
            "PMI client created from the environment twice (PMI_FD is already owned)",
        ));
    }
    // SAFETY: the fd is open (checked above) and was handed to this process by its
    // process manager for PMI only; the FROM_ENV_TAKEN flag guarantees that only one
    // owner is ever created from it in this process.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: F_SETFD on a descriptor we own; ranks' own children must not inherit it.
    unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(owned)
}

impl PmiClient {
    /// Connects to the process manager described by the environment: `PMI_FD` (the
    /// inherited stream), `PMI_RANK`, `PMI_SIZE`. Returns `Ok(None)` when `PMI_FD` is not
    /// set (the program was started alone: a singleton).
    ///
    /// The descriptor is taken over (closed with the client) and marked close-on-exec, so
    /// this may succeed only once per process; a second call returns an error.
    pub fn from_env() -> Result<Option<PmiClient>> {
        let Some(fd) = env_fd_number()? else {
            return Ok(None);
        };
        let rank = env_usize("PMI_RANK")?;
        let size = env_usize("PMI_SIZE")?;
        let owned = take_env_fd(fd)?;
        PmiClient::connect(owned, rank, size).map(Some)
    }

    /// Initializes PMI-1 over an already-connected stream `fd` (e.g. one end of a
    /// socketpair whose other end a [`crate::server::Server`] serves), for the given rank
    /// and size. Sends `init`, `get_maxes` and `get_my_kvsname`.
    pub fn connect(fd: OwnedFd, rank: usize, size: usize) -> Result<PmiClient> {
        if rank >= size {
            return Err(err(format!("rank {rank} out of range for size {size}")));
        }
        let mut conn = Conn::new(fd);
        client2::handshake(&mut conn, PmiVersion::One, true)?;
        PmiClient::after_init(conn, rank, size)
    }

    /// Continues on a connection whose PMI-1 `init` was answered: `get_maxes`,
    /// `get_my_kvsname`.
    pub(crate) fn after_init(conn: Conn, rank: usize, size: usize) -> Result<PmiClient> {
        if rank >= size {
            return Err(err(format!("rank {rank} out of range for size {size}")));
        }
        let mut c = PmiClient {
            conn,
            rank,
            size,
            kvsname: String::new(),
            maxes: Maxes::default(),
            finalized: false,
        };
        let r = c.request(&Message::new("get_maxes"), "maxes")?;
        let d = Maxes::default();
        let num =
            |k: &str, dflt: usize| r.get_int(k).filter(|&v| v > 0).map_or(dflt, |v| v as usize);
        c.maxes = Maxes {
            kvsname_max: num("kvsname_max", d.kvsname_max),
            keylen_max: num("keylen_max", d.keylen_max),
            vallen_max: num("vallen_max", d.vallen_max),
        };
        let r = c.request(&Message::new("get_my_kvsname"), "my_kvsname")?;
        c.kvsname = r
            .get("kvsname")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| err(format!("no kvsname in reply: {r}")))?
            .to_string();
        Ok(c)
    }

    /// Name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Limits announced by the server.
    pub fn maxes(&self) -> Maxes {
        self.maxes
    }

    /// The application number (`cmd=get_appnum`; 0 for a single-program job).
    pub fn appnum(&mut self) -> Result<i32> {
        let r = self.request(&Message::new("get_appnum"), "appnum")?;
        r.get_int("appnum")
            .map(|v| v as i32)
            .ok_or_else(|| err(format!("no appnum in reply: {r}")))
    }

    /// The universe size (`cmd=get_universe_size`).
    pub fn universe_size(&mut self) -> Result<usize> {
        let r = self.request(&Message::new("get_universe_size"), "universe_size")?;
        r.get_int("size")
            .map(|v| v.max(0) as usize)
            .ok_or_else(|| err(format!("no size in reply: {r}")))
    }

    /// Asks the process manager to abort the whole job with exit status `code`
    /// (`cmd=abort exitcode=N`). `msg` is printed on this rank's stderr (PMI-1 servers do
    /// not agree on a message field). No reply is expected: the caller should exit with
    /// `code` right after this returns, as MPICH's `PMI_Abort` does.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        if !msg.is_empty() {
            eprintln!("rank {}: abort({code}): {msg}", self.rank);
        }
        self.send(&Message::new("abort").with("exitcode", code))
    }

    /// Orderly end (`cmd=finalize`, waits for `cmd=finalize_ack`). Idempotent.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.request(&Message::new("finalize"), "finalize_ack")?;
        self.finalized = true;
        Ok(())
    }

    fn send(&mut self, m: &Message) -> Result<()> {
        if self.finalized {
            return Err(err("PMI already finalized"));
        }
        self.conn.write_all(m.to_line().as_bytes())
    }

    /// Reads one reply line.
    fn recv(&mut self) -> Result<Message> {
        self.conn.read_line()
    }

    /// Sends `m` and reads the reply, which must be command `expect`.
    fn request(&mut self, m: &Message, expect: &str) -> Result<Message> {
        self.send(m)?;
        let r = self.recv()?;
        if r.cmd() != Some(expect) {
            return Err(err(format!(
                "unexpected PMI reply to {}: {r} (wanted cmd={expect})",
                m.cmd().unwrap_or("?")
            )));
        }
        Ok(r)
    }
}

impl Bootstrap for PmiClient {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_kv(key, value, &self.maxes)?;
        let m = Message::new("put")
            .with("kvsname", &self.kvsname)
            .with("key", key)
            .with("value", value);
        let r = self.request(&m, "put_result")?;
        if r.rc() != 0 {
            return Err(err(format!("put {key} failed: {r}")));
        }
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        let r = self.request(&Message::new("barrier_in"), "barrier_out")?;
        if r.rc() != 0 {
            return Err(err(format!("barrier failed: {r}")));
        }
        Ok(())
    }
    fn get(&mut self, key: &str) -> Result<String> {
        if !wire::is_valid_key(key) {
            return Err(err(format!("invalid PMI key {key:?}")));
        }
        let m = Message::new("get")
            .with("kvsname", &self.kvsname)
            .with("key", key);
        let r = self.request(&m, "get_result")?;
        if r.rc() != 0 {
            return Err(err(format!("key {key} not found ({r})")));
        }
        r.get("value")
            .map(str::to_string)
            .ok_or_else(|| err(format!("no value in reply: {r}")))
    }
}

fn check_kv(key: &str, value: &str, maxes: &Maxes) -> Result<()> {
    if !wire::is_valid_key(key) || key.len() > maxes.keylen_max {
        return Err(err(format!(
            "invalid PMI key {key:?} (printable ASCII without blank or '=', at most {} bytes)",
            maxes.keylen_max
        )));
    }
    if !wire::is_valid_value(value) || value.len() > maxes.vallen_max {
        return Err(err(format!(
            "invalid PMI value for {key} (printable ASCII without blank or '=', at most {} bytes)",
            maxes.vallen_max
        )));
    }
    Ok(())
}

/// The store of a program started without a process manager: rank 0 of 1, a local map.
#[derive(Debug, Default)]
pub struct Singleton {
    kv: HashMap<String, String>,
}

impl Singleton {
    /// An empty store.
    pub fn new() -> Singleton {
        Singleton::default()
    }
}

impl Bootstrap for Singleton {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_kv(key, value, &Maxes::default())?;
        self.kv.insert(key.to_string(), value.to_string());
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }
    fn get(&mut self, key: &str) -> Result<String> {
        self.kv
            .get(key)
            .cloned()
            .ok_or_else(|| err(format!("key {key} not found")))
    }
}

/// The bootstrap store of a rank, chosen from the environment by [`Boot::from_env`]:
/// PMI-1 or PMI-2 when started by a process manager (`PMI_FD` set), else a [`Singleton`].
/// Implements [`Bootstrap`] by delegation; use this rather than a `Box<dyn Bootstrap>` to
/// keep access to [`Boot::finalize`] and [`Boot::abort`].
///
/// See the crate documentation for the rule that picks the PMI version.
pub enum Boot {
    /// Started by a process manager speaking PMI-1.
    Pmi(PmiClient),
    /// Started by a process manager speaking PMI-2 (e.g. `srun --mpi=pmi2`).
    Pmi2(Pmi2Client),
    /// Started alone.
    Singleton(Singleton),
}

impl Boot {
    /// Connects as the environment says: a [`Singleton`] when `PMI_FD` is unset; else
    /// `PMI_RANK` and `PMI_SIZE` must be set, the version is chosen by
    /// [`Selection::from_env`] (`MPI_PMI`, `SLURM_MPI_TYPE`, `PMI2_SUN_PATH`) and
    /// negotiated by [`Boot::connect`]; `PMI_JOBID` is passed to PMI-2's
    /// `fullinit` when set.
    pub fn from_env() -> Result<Boot> {
        let Some(fd) = env_fd_number()? else {
            return Ok(Boot::Singleton(Singleton::new()));
        };
        let sel = Selection::from_env()?;
        let rank = env_usize("PMI_RANK")?;
        let size = env_usize("PMI_SIZE")?;
        let jobid = std::env::var("PMI_JOBID").ok();
        let owned = take_env_fd(fd)?;
        Boot::connect(owned, sel, rank, size, jobid.as_deref())
    }

    /// Connects over an already-connected stream: sends the PMI-1 `init` line for
    /// `sel.version`; if the server answers with the other version and `sel.strict` is
    /// false, continues in the version the server named (both Slurm and our `mpirun` treat
    /// the connection as initialized in that version). Then PMI-1 (`get_maxes`,
    /// `get_my_kvsname`) or PMI-2 (`fullinit`, `job-getid`) initialization.
    /// `rank`/`size` come from the environment; PMI-2 takes them from `fullinit-response`
    /// instead. `jobid` is PMI-2's `pmijobid` (Slurm: `PMI_JOBID`).
    pub fn connect(
        fd: OwnedFd,
        sel: Selection,
        rank: usize,
        size: usize,
        jobid: Option<&str>,
    ) -> Result<Boot> {
        if rank >= size {
            return Err(err(format!("rank {rank} out of range for size {size}")));
        }
        let mut conn = Conn::new(fd);
        Ok(
            match client2::handshake(&mut conn, sel.version, sel.strict)? {
                PmiVersion::One => Boot::Pmi(PmiClient::after_init(conn, rank, size)?),
                PmiVersion::Two => Boot::Pmi2(Pmi2Client::after_init(conn, rank, jobid)?),
            },
        )
    }

    /// The PMI version in use (`None` for a singleton).
    pub fn version(&self) -> Option<PmiVersion> {
        match self {
            Boot::Pmi(_) => Some(PmiVersion::One),
            Boot::Pmi2(_) => Some(PmiVersion::Two),
            Boot::Singleton(_) => None,
        }
    }

    /// The PMI-1 key-value space name (`get_my_kvsname`); `None` for PMI-2 and a
    /// singleton.
    pub fn kvsname(&self) -> Option<&str> {
        match self {
            Boot::Pmi(c) => Some(c.kvsname()),
            Boot::Pmi2(_) | Boot::Singleton(_) => None,
        }
    }

    /// True when started without a process manager.
    pub fn is_singleton(&self) -> bool {
        matches!(self, Boot::Singleton(_))
    }

    /// [`PmiClient::finalize`] / [`Pmi2Client::finalize`]; nothing for a singleton.
    pub fn finalize(&mut self) -> Result<()> {
        match self {
            Boot::Pmi(c) => c.finalize(),
            Boot::Pmi2(c) => c.finalize(),
            Boot::Singleton(_) => Ok(()),
        }
    }

    /// [`PmiClient::abort`] / [`Pmi2Client::abort`]; a singleton only prints `msg`. The
    /// caller exits with `code` afterwards.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        match self {
            Boot::Pmi(c) => c.abort(code, msg),
            Boot::Pmi2(c) => c.abort(code, msg),
            Boot::Singleton(_) => {
                if !msg.is_empty() {
                    eprintln!("abort({code}): {msg}");
                }
                Ok(())
            }
        }
    }

    fn inner(&self) -> &dyn Bootstrap {
        match self {
            Boot::Pmi(c) => c,
            Boot::Pmi2(c) => c,
            Boot::Singleton(s) => s,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Bootstrap {
        match self {
            Boot::Pmi(c) => c,
            Boot::Pmi2(c) => c,
            Boot::Singleton(s) => s,
        }
    }
}

impl Bootstrap for Boot {
    fn rank(&self) -> usize {
        self.inner().rank()
    }
    fn size(&self) -> usize {
        self.inner().size()
    }
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.inner_mut().put(key, value)
    }
    fn barrier(&mut self) -> Result<()> {
        self.inner_mut().barrier()
    }
    fn get(&mut self, key: &str) -> Result<String> {
        self.inner_mut().get(key)
    }
}

/// Shorthand for [`Boot::from_env`].
pub fn bootstrap_from_env() -> Result<Boot> {
    Boot::from_env()
}
