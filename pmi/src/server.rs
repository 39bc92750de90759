//! The server side of PMI-1, for a launcher: serves the N ranks of one job, each on its own
//! already-connected stream (one end of a socketpair; the rank has the other end in
//! `PMI_FD`).
//!
//! The server is a passive state machine made for one `poll(2)` loop, so a launcher can
//! multiplex it with its other descriptors in a single thread: ask [`Server::interests`]
//! which descriptors to poll for what, and hand each descriptor's `revents` to
//! [`Server::handle`], which reads every complete request, answers it, and reports what the
//! launcher must know as [`Event`]s. [`Server::run`] is that loop for callers that have
//! nothing else to wait for (tests, a server thread).
//!
//! Served commands: `init`, `get_maxes`, `get_my_kvsname`, `get_appnum`,
//! `get_universe_size`, `put`, `get`, `barrier_in` (all N ranks get `barrier_out` once all N
//! have entered), `finalize`, `abort` (reported as [`Event::Abort`]). `mcmd=spawn` is
//! refused. The KVS holds `PMI_process_mapping` = `(vector,(0,1,N))` (one node with N
//! ranks) from the start, as MPICH's library expects from Hydra.
//!
//! Descriptors are non-blocking and replies are buffered, so a client that does not read
//! cannot block the server. End of file or an error on a descriptor means that client is
//! gone ([`Event::Closed`]); a barrier it had not entered then never completes, and it is the
//! launcher's business to end the job (it sees the rank's process exit).

use crate::wire::{self, Message};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Longest request line accepted (bytes); a longer one closes the client.
pub const MAX_LINE: usize = 1 << 20;

/// Limits announced in `cmd=maxes` (the same as Hydra's).
pub const KVSNAME_MAX: usize = 256;
/// See [`KVSNAME_MAX`].
pub const KEYLEN_MAX: usize = 64;
/// See [`KVSNAME_MAX`].
pub const VALLEN_MAX: usize = 1024;

/// What the launcher must know about a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The rank asked to abort the job (`cmd=abort exitcode=N`).
    Abort {
        /// The rank.
        rank: usize,
        /// The requested exit status.
        code: i32,
        /// The message, if the client sent one (`message=` or `msg=`).
        message: Option<String>,
    },
    /// The rank finalized PMI (it was answered `finalize_ack`).
    Finalized {
        /// The rank.
        rank: usize,
    },
    /// The rank's connection ended (end of file or error): the client is gone.
    Closed {
        /// The rank.
        rank: usize,
        /// Whether it had sent `init`.
        initialized: bool,
        /// Whether it had finalized.
        finalized: bool,
    },
    /// The rank sent something the server does not understand (answered with `rc=-1`, or
    /// the connection was closed if the line was unreadable).
    ProtocolError {
        /// The rank.
        rank: usize,
        /// What was wrong.
        reason: String,
    },
}

/// One descriptor to poll: `fd` of `rank`, for `events` (`POLLIN` and maybe `POLLOUT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    /// The client's rank.
    pub rank: usize,
    /// The server's end of the client's stream.
    pub fd: RawFd,
    /// `libc::POLLIN`, plus `libc::POLLOUT` while replies are waiting to be written.
    pub events: i16,
}

#[derive(Default)]
struct Client {
    fd: Option<OwnedFd>,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    initialized: bool,
    finalized: bool,
    in_barrier: bool,
    /// Inside a multi-line `mcmd=spawn` request, skipping up to `endcmd`.
    skipping_mcmd: bool,
}

/// A PMI-1 server for one job of N ranks (see the module documentation).
pub struct Server {
    clients: Vec<Client>,
    kvs: HashMap<String, String>,
    kvsname: String,
    appnum: i32,
    in_barrier: usize,
}

impl Server {
    /// Serves `fds.len()` ranks; `fds[r]` is the server's end of rank `r`'s stream. The
    /// descriptors are made non-blocking. `kvsname` names the job's key-value space.
    pub fn new(fds: Vec<OwnedFd>, kvsname: impl Into<String>) -> io::Result<Server> {
        let n = fds.len();
        let mut clients = Vec::with_capacity(n);
        for fd in fds {
            set_nonblocking(fd.as_raw_fd())?;
            clients.push(Client {
                fd: Some(fd),
                ..Client::default()
            });
        }
        let mut kvs = HashMap::new();
        kvs.insert(
            "PMI_process_mapping".to_string(),
            format!("(vector,(0,1,{n}))"),
        );
        Ok(Server {
            clients,
            kvs,
            kvsname: kvsname.into(),
            appnum: 0,
            in_barrier: 0,
        })
    }

    /// Number of ranks served.
    pub fn size(&self) -> usize {
        self.clients.len()
    }

    /// The job's KVS name.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Number of clients whose connection is still open.
    pub fn open_clients(&self) -> usize {
        self.clients.iter().filter(|c| c.fd.is_some()).count()
    }

    /// Whether `rank` has finalized.
    pub fn is_finalized(&self, rank: usize) -> bool {
        self.clients.get(rank).is_some_and(|c| c.finalized)
    }

    /// Whether `rank` has sent `init`.
    pub fn is_initialized(&self, rank: usize) -> bool {
        self.clients.get(rank).is_some_and(|c| c.initialized)
    }

    /// Adds or replaces an entry of the KVS (e.g. job information for the ranks).
    pub fn kvs_insert(&mut self, key: &str, value: &str) {
        self.kvs.insert(key.to_string(), value.to_string());
    }

    /// Appends the descriptors to poll to `out` (open clients only).
    pub fn interests(&self, out: &mut Vec<Interest>) {
        for (rank, c) in self.clients.iter().enumerate() {
            if let Some(fd) = &c.fd {
                let mut events = libc::POLLIN;
                if !c.outbuf.is_empty() {
                    events |= libc::POLLOUT;
                }
                out.push(Interest {
                    rank,
                    fd: fd.as_raw_fd(),
                    events,
                });
            }
        }
    }

    /// Closes `rank`'s connection (reported as [`Event::Closed`] if it was open).
    pub fn close(&mut self, rank: usize, events: &mut Vec<Event>) {
        let c = &mut self.clients[rank];
        if c.fd.take().is_some() {
            c.outbuf.clear();
            c.inbuf.clear();
            events.push(Event::Closed {
                rank,
                initialized: c.initialized,
                finalized: c.finalized,
            });
        }
    }

    /// Handles readiness `revents` (from `poll`) of `rank`'s descriptor: reads and answers
    /// every complete request, writes pending replies, and appends events to `events`.
    /// Never blocks.
    pub fn handle(&mut self, rank: usize, revents: i16, events: &mut Vec<Event>) {
        if rank >= self.clients.len() || self.clients[rank].fd.is_none() {
            return;
        }
        if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            let mut eof = false;
            let mut chunk = [0u8; 4096];
            loop {
                let fd = match &self.clients[rank].fd {
                    Some(fd) => fd.as_raw_fd(),
                    None => return,
                };
                // SAFETY: `chunk` is a valid writable buffer of the given length and `fd` is
                // an open descriptor owned by this server.
                let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
                if n > 0 {
                    self.clients[rank]
                        .inbuf
                        .extend_from_slice(&chunk[..n as usize]);
                    if !self.process_lines(rank, events) {
                        return;
                    }
                    continue;
                }
                if n == 0 {
                    eof = true;
                    break;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => {
                        eof = true;
                        break;
                    }
                }
            }
            if eof {
                self.close(rank, events);
            }
        }
        self.flush_all(events);
    }

    /// Serves until every client has closed its connection, calling `on_event` for each
    /// event. Blocks in `poll(2)`.
    pub fn run(&mut self, mut on_event: impl FnMut(Event)) -> io::Result<()> {
        let mut interests = Vec::new();
        let mut pfds: Vec<libc::pollfd> = Vec::new();
        let mut events = Vec::new();
        loop {
            interests.clear();
            self.interests(&mut interests);
            if interests.is_empty() {
                return Ok(());
            }
            pfds.clear();
            pfds.extend(interests.iter().map(|i| libc::pollfd {
                fd: i.fd,
                events: i.events,
                revents: 0,
            }));
            // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structures.
            let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for (i, p) in interests.iter().zip(&pfds) {
                if p.revents != 0 {
                    self.handle(i.rank, p.revents, &mut events);
                }
            }
            for e in events.drain(..) {
                on_event(e);
            }
        }
    }

    /// Processes every complete line in `rank`'s input. Returns false if the client was
    /// closed.
    fn process_lines(&mut self, rank: usize, events: &mut Vec<Event>) -> bool {
        loop {
            let c = &mut self.clients[rank];
            let Some(pos) = c.inbuf.iter().position(|&b| b == b'\n') else {
                if c.inbuf.len() > MAX_LINE {
                    events.push(Event::ProtocolError {
                        rank,
                        reason: format!("request line longer than {MAX_LINE} bytes"),
                    });
                    self.close(rank, events);
                    return false;
                }
                return true;
            };
            let line: Vec<u8> = c.inbuf.drain(..=pos).collect();
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            if c.skipping_mcmd {
                if line.trim_ascii() == b"endcmd" {
                    c.skipping_mcmd = false;
                    self.reply(
                        rank,
                        Message::new("spawn_result")
                            .with("rc", -1)
                            .with("msg", "spawn_not_supported"),
                    );
                }
                continue;
            }
            match wire::parse_bytes(&line) {
                Ok(m) => self.dispatch(rank, m, events),
                Err(e) => {
                    events.push(Event::ProtocolError {
                        rank,
                        reason: e.to_string(),
                    });
                    self.reply(
                        rank,
                        Message::new("error")
                            .with("rc", -1)
                            .with("msg", "malformed_request"),
                    );
                }
            }
            if self.clients[rank].fd.is_none() {
                return false;
            }
        }
    }

    fn dispatch(&mut self, rank: usize, m: Message, events: &mut Vec<Event>) {
        if m.get("mcmd").is_some() {
            // Multi-line spawn request: skip to `endcmd` (it may be on this very line).
            if m.fields().iter().any(|(k, _)| k == "endcmd") {
                self.reply(
                    rank,
                    Message::new("spawn_result")
                        .with("rc", -1)
                        .with("msg", "spawn_not_supported"),
                );
            } else {
                self.clients[rank].skipping_mcmd = true;
            }
            return;
        }
        let n = self.clients.len();
        let cmd = m.cmd().unwrap_or("").to_string();
        match cmd.as_str() {
            "init" => {
                self.clients[rank].initialized = true;
                let version = m.get_int("pmi_version").unwrap_or(1);
                let mut r = Message::new("response_to_init")
                    .with("pmi_version", 1)
                    .with("pmi_subversion", 1);
                if version == 1 {
                    r.push("rc", 0);
                } else {
                    r.push("rc", -1);
                    r.push("msg", "only_PMI-1_is_served");
                }
                self.reply(rank, r);
            }
            "get_maxes" => self.reply(
                rank,
                Message::new("maxes")
                    .with("rc", 0)
                    .with("kvsname_max", KVSNAME_MAX)
                    .with("keylen_max", KEYLEN_MAX)
                    .with("vallen_max", VALLEN_MAX),
            ),
            "get_my_kvsname" => {
                let r = Message::new("my_kvsname")
                    .with("rc", 0)
                    .with("kvsname", &self.kvsname);
                self.reply(rank, r)
            }
            "get_appnum" => {
                let r = Message::new("appnum")
                    .with("rc", 0)
                    .with("appnum", self.appnum);
                self.reply(rank, r)
            }
            "get_universe_size" => self.reply(
                rank,
                Message::new("universe_size").with("rc", 0).with("size", n),
            ),
            "put" => {
                let r = match m.get("key") {
                    Some(k) if !k.is_empty() => {
                        let v = m.get("value").unwrap_or("");
                        self.kvs.insert(k.to_string(), v.to_string());
                        Message::new("put_result")
                            .with("rc", 0)
                            .with("msg", "success")
                    }
                    _ => Message::new("put_result")
                        .with("rc", -1)
                        .with("msg", "missing_key"),
                };
                self.reply(rank, r);
            }
            "get" => {
                let key = m.get("key").unwrap_or("");
                let r = match self.kvs.get(key) {
                    Some(v) => Message::new("get_result")
                        .with("rc", 0)
                        .with("msg", "success")
                        .with("value", v),
                    None => Message::new("get_result")
                        .with("rc", -1)
                        .with("msg", format!("key_{key}_not_found")),
                };
                self.reply(rank, r);
            }
            "barrier_in" => {
                if !self.clients[rank].in_barrier {
                    self.clients[rank].in_barrier = true;
                    self.in_barrier += 1;
                }
                if self.in_barrier == n {
                    self.in_barrier = 0;
                    for r in 0..n {
                        self.clients[r].in_barrier = false;
                        self.reply(r, Message::new("barrier_out").with("rc", 0));
                    }
                }
            }
            "finalize" => {
                self.clients[rank].finalized = true;
                self.reply(rank, Message::new("finalize_ack").with("rc", 0));
                events.push(Event::Finalized { rank });
            }
            "abort" => {
                let code = m.get_int("exitcode").unwrap_or(1) as i32;
                let message = m
                    .get("message")
                    .or_else(|| m.get("msg"))
                    .map(str::to_string);
                events.push(Event::Abort {
                    rank,
                    code,
                    message,
                });
            }
            _ => {
                events.push(Event::ProtocolError {
                    rank,
                    reason: format!("unsupported command {m}"),
                });
                let name = if cmd.is_empty() {
                    "error".to_string()
                } else {
                    format!("{cmd}_result")
                };
                self.reply(
                    rank,
                    Message::new(&name)
                        .with("rc", -1)
                        .with("msg", "unsupported_command"),
                );
            }
        }
    }

    fn reply(&mut self, rank: usize, m: Message) {
        let c = &mut self.clients[rank];
        if c.fd.is_some() {
            c.outbuf.extend_from_slice(m.to_line().as_bytes());
        }
    }

    fn flush_all(&mut self, events: &mut Vec<Event>) {
        for rank in 0..self.clients.len() {
            if !self.clients[rank].outbuf.is_empty() && !self.flush(rank) {
                self.close(rank, events);
            }
        }
    }

    /// Writes as much pending output as the socket takes. False if the client is gone.
    fn flush(&mut self, rank: usize) -> bool {
        let c = &mut self.clients[rank];
        let Some(fd) = &c.fd else { return true };
        let fd = fd.as_raw_fd();
        while !c.outbuf.is_empty() {
            // SAFETY: the buffer is valid for `len` bytes; `fd` is an open descriptor owned
            // by this server. MSG_NOSIGNAL: a vanished peer gives EPIPE, not SIGPIPE.
            let mut n = unsafe {
                libc::send(
                    fd,
                    c.outbuf.as_ptr().cast(),
                    c.outbuf.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOTSOCK) {
                // SAFETY: as above; not a socket (e.g. a pipe), so plain write.
                n = unsafe { libc::write(fd, c.outbuf.as_ptr().cast(), c.outbuf.len()) };
            }
            if n >= 0 {
                c.outbuf.drain(..n as usize);
                continue;
            }
            match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return true,
                _ => return false,
            }
        }
        true
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on an open descriptor only change its status flags.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
