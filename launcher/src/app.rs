//! The launcher: `mpirun [options] prog [args...]` (also installed as `mpiexec`).
//!
//! It starts N ranks of `prog` on this host, each in the job's own process group and with
//! `PR_SET_PDEATHSIG(SIGKILL)`, gives each one end of a socketpair in `PMI_FD` (plus
//! `PMI_RANK`, `PMI_SIZE`, `MPI_LOCAL_RANK`, `MPI_LOCAL_SIZE`, and `MPI_JOBID`, which names
//! the ranks' shared-memory segments; leftovers are removed from /dev/shm when the job ends,
//! see `ShmCleanup`), serves PMI-1 on the other
//! ends, forwards the ranks' stdout/stderr line by line, and propagates failures, signals
//! and exit statuses. Everything runs in one thread blocked in `poll(2)`: the PMI server,
//! the output pipes and a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2).

use pmi::server::{Event, Interest, Server};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Delay between SIGTERM and SIGKILL when the job is stopped.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// A partial line longer than this is forwarded without waiting for its newline.
const MAX_PARTIAL_LINE: usize = 1 << 20;

const USAGE: &str = "\
Usage: {NAME} [options] [--] program [args...]

Starts N copies (ranks) of program on this host and serves them the PMI-1
process-manager interface (PMI_FD, PMI_RANK, PMI_SIZE). Everything after the
program name is passed to the program.

Options:
  -n N, -np N, -c N        number of ranks (default 1)
  -l, -prefix, --tag-output, -prepend-rank
                           prefix every output line with [rank]
  -x NAME[=VALUE]          set NAME in the ranks' environment (without VALUE:
                           pass mpirun's value, which is the default anyway)
  -genv NAME VALUE, -env NAME VALUE
                           set NAME=VALUE in the ranks' environment
  -wdir DIR                working directory of the ranks
  -h, --help               this help
  -V, --version            version

Exit status: the first non-zero exit status of a rank (128+S for a rank killed
by signal S, N for a rank that called PMI abort with code N), 0 if all ranks
exit 0; 128+S if mpirun itself is stopped by signal S (SIGINT, SIGTERM, SIGHUP).
When a rank fails, the others get SIGTERM, then SIGKILL 0.5 s later.
";

/// Parsed command line.
#[derive(Debug, Default, PartialEq)]
struct Opts {
    np: usize,
    tag: bool,
    env: Vec<(OsString, OsString)>,
    wdir: Option<OsString>,
    prog: OsString,
    args: Vec<OsString>,
}

#[derive(Debug, PartialEq)]
enum Parsed {
    Run(Opts),
    Help,
    Version,
}

fn parse_np(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("invalid number of ranks {v:?}")),
    }
}

/// Parses the options before the program name; the first argument that is not an option
/// (or the one after `--`) is the program, and every later argument belongs to it.
fn parse_args(argv: &[OsString]) -> Result<Parsed, String> {
    let mut o = Opts {
        np: 1,
        ..Opts::default()
    };
    let mut i = 0;
    let value = |i: usize, opt: &str| -> Result<OsString, String> {
        argv.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("option {opt} needs a value"))
    };
    while i < argv.len() {
        let a = argv[i].to_string_lossy();
        if !a.starts_with('-') || a == "-" {
            break;
        }
        if a == "--" {
            i += 1;
            break;
        }
        match &*a {
            "-h" | "--help" | "-help" => return Ok(Parsed::Help),
            "-V" | "--version" | "-version" => return Ok(Parsed::Version),
            "-n" | "-np" | "--n" | "--np" | "-c" => {
                o.np = parse_np(&value(i, &a)?.to_string_lossy())?;
                i += 2;
            }
            "-l" | "-prefix" | "--prefix-rank" | "--tag-output" | "-tag-output"
            | "-prepend-rank" | "--prepend-rank" => {
                o.tag = true;
                i += 1;
            }
            "-x" => {
                let v = value(i, &a)?;
                let s = v.to_string_lossy();
                if let Some((k, val)) = s.split_once('=') {
                    o.env.push((k.into(), val.into()));
                } else if let Some(val) = std::env::var_os(&v) {
                    o.env.push((v, val));
                }
                i += 2;
            }
            "-genv" | "-env" | "--env" => {
                let k = value(i, &a)?;
                let v = value(i + 1, &a)?;
                o.env.push((k, v));
                i += 3;
            }
            "-wdir" | "--wdir" | "-wd" => {
                o.wdir = Some(value(i, &a)?);
                i += 2;
            }
            _ => {
                // -n=4, --np=4, -n4, -np4
                let num = ["--np=", "-np=", "--n=", "-n=", "-np", "-n"]
                    .iter()
                    .find_map(|p| a.strip_prefix(p))
                    .filter(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()));
                match num {
                    Some(v) => {
                        o.np = parse_np(v)?;
                        i += 1;
                    }
                    None => return Err(format!("unknown option {a} (see --help)")),
                }
            }
        }
    }
    if i >= argv.len() {
        return Err("no program given (see --help)".into());
    }
    o.prog = argv[i].clone();
    o.args = argv[i + 1..].to_vec();
    Ok(Parsed::Run(o))
}

/// Entry point of `mpirun` and `mpiexec`.
pub fn main() {
    let mut argv = std::env::args_os();
    let name = argv
        .next()
        .map(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "mpirun".into());
    let argv: Vec<OsString> = argv.collect();
    let code = match parse_args(&argv) {
        Ok(Parsed::Help) => {
            print!("{}", USAGE.replace("{NAME}", &name));
            0
        }
        Ok(Parsed::Version) => {
            println!(
                "{name} (launcher) {} — local process manager serving PMI-1",
                env!("CARGO_PKG_VERSION")
            );
            0
        }
        Ok(Parsed::Run(o)) => match run(&name, o) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("{name}: {e}");
                1
            }
        },
        Err(e) => {
            eprintln!("{name}: {e}");
            2
        }
    };
    std::process::exit(code)
}

// ---------------------------------------------------------------------------------------
// Small system-call helpers.

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Makes sure descriptors 0, 1 and 2 are open (on /dev/null if not), so that descriptors
/// we create later never take their numbers.
fn ensure_std_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only inspects the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            // SAFETY: open with a valid NUL-terminated path; the lowest free descriptor
            // (this one) is taken and intentionally kept open for the process lifetime.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

/// The signals mpirun handles through its signalfd.
fn handled_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a sigset_t we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [
            libc::SIGCHLD,
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the handled signals (mpirun is single-threaded) and returns a signalfd for them.
fn make_signalfd() -> io::Result<OwnedFd> {
    let set = handled_signals();
    // SAFETY: `set` is an initialised sigset_t; blocking signals in our only thread.
    cvt(unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) })?;
    // SAFETY: signalfd(-1, ...) creates a new descriptor, which we take ownership of.
    let fd = cvt(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads all pending signals from the signalfd.
fn read_signals(fd: RawFd) -> Vec<i32> {
    let mut sigs = Vec::new();
    loop {
        // SAFETY: signalfd_siginfo is plain old data; zeroed is a valid value.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let sz = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading at most `sz` bytes into `info`, which is `sz` bytes long.
        let n = unsafe { libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), sz) };
        if n as usize == sz {
            sigs.push(info.ssi_signo as i32);
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            return sigs;
        }
    }
}

fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair returns.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions; errors (ESRCH) are ignored.
    unsafe { libc::kill(pid, sig) };
}

/// Writes all of `data` to `fd`; false on a write error (e.g. EPIPE: the reader is gone).
fn write_all(fd: RawFd, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        // SAFETY: `data` is valid for `data.len()` bytes.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        data = &data[n as usize..];
    }
    true
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGSYS => "SIGSYS",
        _ => "signal",
    }
}

// ---------------------------------------------------------------------------------------
// Output forwarding.

/// One output pipe of one rank.
struct Stream {
    fd: OwnedFd,
    /// Bytes read but not yet forwarded (an incomplete line).
    buf: Vec<u8>,
    /// Forward to our stderr (else stdout).
    is_err: bool,
}

/// Where forwarded output goes; a sink whose reader has gone is discarded silently.
struct Sinks {
    tag: bool,
    /// Terminate a final incomplete line with a newline (tagged output or several ranks),
    /// so that it cannot run into another rank's line.
    terminate_partial: bool,
    broken: [bool; 2],
}

impl Sinks {
    fn write(&mut self, rank: usize, is_err: bool, data: &[u8]) {
        let idx = is_err as usize;
        if data.is_empty() || self.broken[idx] {
            return;
        }
        let fd = if is_err { 2 } else { 1 };
        let ok = if self.tag {
            let prefix = format!("[{rank}] ");
            let mut out = Vec::with_capacity(data.len() + 16);
            for line in data.split_inclusive(|&b| b == b'\n') {
                out.extend_from_slice(prefix.as_bytes());
                out.extend_from_slice(line);
            }
            write_all(fd, &out)
        } else {
            write_all(fd, data)
        };
        if !ok {
            self.broken[idx] = true;
        }
    }
}

impl Sinks {
    /// Forwards the final incomplete line of a stream.
    fn write_last(&mut self, rank: usize, is_err: bool, mut rest: Vec<u8>) {
        if !rest.is_empty() && self.terminate_partial {
            rest.push(b'\n');
        }
        self.write(rank, is_err, &rest);
    }
}

impl Stream {
    /// Reads what is available; forwards complete lines. Returns false at end of file
    /// (after forwarding the last, incomplete line).
    fn on_readable(&mut self, rank: usize, sinks: &mut Sinks) -> bool {
        let mut chunk = [0u8; 65536];
        // SAFETY: `chunk` is writable for its length; the descriptor is open.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
        if n < 0 {
            let e = io::Error::last_os_error().kind();
            if e == io::ErrorKind::Interrupted || e == io::ErrorKind::WouldBlock {
                return true;
            }
        }
        if n <= 0 {
            let rest = std::mem::take(&mut self.buf);
            sinks.write_last(rank, self.is_err, rest);
            return false;
        }
        let chunk = &chunk[..n as usize];
        match chunk.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                if self.buf.is_empty() {
                    sinks.write(rank, self.is_err, &chunk[..=last]);
                } else {
                    self.buf.extend_from_slice(&chunk[..=last]);
                    let full = std::mem::take(&mut self.buf);
                    sinks.write(rank, self.is_err, &full);
                }
                self.buf.extend_from_slice(&chunk[last + 1..]);
            }
            None => self.buf.extend_from_slice(chunk),
        }
        if self.buf.len() > MAX_PARTIAL_LINE {
            let full = std::mem::take(&mut self.buf);
            sinks.write(rank, self.is_err, &full);
        }
        true
    }
}

// ---------------------------------------------------------------------------------------
// The job.

struct Rank {
    pid: i32,
    /// Exit status once reaped (128+S for a signal).
    status: Option<i32>,
    streams: [Option<Stream>; 2],
}

struct Job {
    name: String,
    ranks: Vec<Rank>,
    server: Server,
    /// Process group of all ranks (the pid of rank 0).
    pgid: i32,
    running: usize,
    sinks: Sinks,
    /// Exit status of the first failure (rank exit, abort).
    failure: Option<i32>,
    /// Set when mpirun itself got SIGINT/SIGTERM/SIGHUP: 128+S.
    signalled: Option<i32>,
    /// While stopping: when to send SIGKILL.
    kill_deadline: Option<Instant>,
    stopping: bool,
}

impl Job {
    /// Sends `sig` to the job's process group and to every rank not yet reaped (in case it
    /// left the group).
    fn signal_all(&self, sig: i32) {
        if self.pgid > 0 {
            kill(-self.pgid, sig);
        }
        for r in &self.ranks {
            if r.status.is_none() && r.pid > 0 {
                kill(r.pid, sig);
            }
        }
    }

    /// Stops the job: SIGTERM now, SIGKILL after [`KILL_GRACE`].
    fn stop(&mut self) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.signal_all(libc::SIGTERM);
        self.kill_deadline = Some(Instant::now() + KILL_GRACE);
    }

    fn kill_now(&mut self) {
        self.stopping = true;
        self.kill_deadline = None;
        self.signal_all(libc::SIGKILL);
    }

    fn fail(&mut self, code: i32, msg: String) {
        if self.stopping || self.failure.is_some() {
            return;
        }
        eprintln!("{}: {msg}", self.name);
        self.failure = Some(code);
        if self.running > 0 {
            self.stop();
        }
    }

    fn on_server_events(&mut self, events: &mut Vec<Event>) {
        for e in events.drain(..) {
            match e {
                Event::Abort {
                    rank,
                    code,
                    message,
                } => {
                    let status = if code != 0 && code & 0xff == 0 {
                        1
                    } else {
                        code & 0xff
                    };
                    let msg = match message {
                        Some(m) => format!("rank {rank} called abort with code {code}: {m}"),
                        None => format!("rank {rank} called abort with code {code}"),
                    };
                    self.fail(status, msg);
                    // An abort stops the job even with code 0.
                    self.stop();
                }
                Event::ProtocolError { rank, reason } => {
                    eprintln!("{}: warning: PMI from rank {rank}: {reason}", self.name);
                }
                Event::Finalized { .. } | Event::Closed { .. } => {}
            }
        }
    }

    /// Reaps every exited rank.
    fn reap(&mut self, events: &mut Vec<Event>) {
        loop {
            let mut st = 0;
            // SAFETY: `st` is a valid place for the status.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            let Some(rank) = self.ranks.iter().position(|r| r.pid == pid) else {
                continue;
            };
            let (code, sig) = if libc::WIFSIGNALED(st) {
                (128 + libc::WTERMSIG(st), Some(libc::WTERMSIG(st)))
            } else {
                (libc::WEXITSTATUS(st), None)
            };
            self.ranks[rank].status = Some(code);
            self.running -= 1;
            // Requests it sent before dying (an abort) come first.
            self.server.handle(rank, libc::POLLIN, events);
            self.on_server_events(events);
            if let Some(s) = sig {
                self.fail(
                    code,
                    format!(
                        "rank {rank} (pid {pid}) killed by signal {s} ({})",
                        signal_name(s)
                    ),
                );
            } else if code != 0 {
                self.fail(
                    code,
                    format!("rank {rank} (pid {pid}) exited with code {code}"),
                );
            } else if self.running > 0
                && self.server.is_initialized(rank)
                && !self.server.is_finalized(rank)
            {
                self.fail(
                    1,
                    format!(
                        "rank {rank} (pid {pid}) exited without finalizing PMI while other ranks run"
                    ),
                );
            }
        }
    }

    fn on_signals(&mut self, fd: RawFd, events: &mut Vec<Event>) {
        for sig in read_signals(fd) {
            match sig {
                libc::SIGCHLD => self.reap(events),
                libc::SIGUSR1 | libc::SIGUSR2 => self.signal_all(sig),
                _ => {
                    if self.signalled.is_none() {
                        self.signalled = Some(128 + sig);
                        eprintln!("{}: got {}, stopping the job", self.name, signal_name(sig));
                        self.stop();
                    } else {
                        self.kill_now();
                    }
                }
            }
        }
        // Signals are coalesced: reap anyway in case a SIGCHLD was merged.
        self.reap(events);
    }
}

/// What one pollfd entry belongs to.
#[derive(Clone, Copy)]
enum Src {
    Signals,
    Output(usize, usize),
    Pmi(usize),
}

fn spawn_rank(
    o: &Opts,
    rank: usize,
    child_end: &OwnedFd,
    pgid: i32,
    parent: i32,
    jobid: &str,
) -> io::Result<std::process::Child> {
    let n = o.np;
    let fd = child_end.as_raw_fd();
    let mut cmd = Command::new(&o.prog);
    cmd.args(&o.args)
        .env_remove("PMI_PORT")
        .env_remove("PMI_ID")
        .env_remove("PMI_SPAWNED")
        .envs(o.env.iter().map(|(k, v)| (k, v)))
        .env("PMI_FD", fd.to_string())
        .env("PMI_RANK", rank.to_string())
        .env("PMI_SIZE", n.to_string())
        .env("MPI_LOCAL_RANK", rank.to_string())
        .env("MPI_LOCAL_SIZE", n.to_string())
        .env("MPI_JOBID", jobid)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(pgid);
    // Rank 0 reads mpirun's stdin, unless it is a terminal: the ranks are not in the
    // terminal's foreground group, and reading would stop them (SIGTTIN).
    // SAFETY: isatty only inspects descriptor 0.
    if rank == 0 && unsafe { libc::isatty(0) } == 0 {
        cmd.stdin(Stdio::inherit());
    } else {
        cmd.stdin(Stdio::null());
    }
    if let Some(d) = &o.wdir {
        cmd.current_dir(d);
    }
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe calls (fcntl, prctl, getppid, sigprocmask, _exit) on values copied
    // into it; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(move || {
            // Let the child inherit its end of the PMI socketpair.
            if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            // Die with mpirun, even if it is SIGKILLed.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1); // mpirun died before prctl took effect
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    cmd.spawn()
}

fn run(name: &str, o: Opts) -> io::Result<i32> {
    ensure_std_fds();
    let sigfd = make_signalfd()?;
    let n = o.np;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let shm = ShmCleanup::new(parent);
    let mut server_ends = Vec::with_capacity(n);
    let mut ranks: Vec<Rank> = Vec::with_capacity(n);
    let mut pgid = 0;
    let mut spawn_error = None;
    for rank in 0..n {
        let (server_end, child_end) = socketpair()?;
        match spawn_rank(&o, rank, &child_end, pgid, parent, &shm.jobid) {
            Ok(mut child) => {
                let pid = child.id() as i32;
                if pgid == 0 {
                    pgid = pid;
                }
                let out = child.stdout.take().map(|s| Stream {
                    fd: OwnedFd::from(s),
                    buf: Vec::new(),
                    is_err: false,
                });
                let err = child.stderr.take().map(|s| Stream {
                    fd: OwnedFd::from(s),
                    buf: Vec::new(),
                    is_err: true,
                });
                ranks.push(Rank {
                    pid,
                    status: None,
                    streams: [out, err],
                });
                server_ends.push(server_end);
            }
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        }
        drop(child_end);
    }
    // Ranks that never started still need a slot in the server; give them a closed pair.
    while server_ends.len() < n {
        server_ends.push(socketpair()?.0);
    }
    let running = ranks.len();
    let mut job = Job {
        name: name.to_string(),
        ranks,
        // The ranks recognise their mpirun by this name (`kvs_<MPI_JOBID>`): then all of
        // them run on this host and share MPI_JOBID, and they skip the hostname exchange.
        server: Server::new(server_ends, format!("kvs_{}", shm.jobid))?,
        pgid,
        running,
        sinks: Sinks {
            tag: o.tag,
            terminate_partial: o.tag || n > 1,
            broken: [false; 2],
        },
        failure: None,
        signalled: None,
        kill_deadline: None,
        stopping: false,
    };
    if let Some(e) = spawn_error {
        eprintln!("{name}: cannot start {}: {e}", o.prog.to_string_lossy());
        job.failure = Some(match e.kind() {
            io::ErrorKind::NotFound => 127,
            io::ErrorKind::PermissionDenied => 126,
            _ => 1,
        });
        job.kill_now();
    }

    let mut pfds: Vec<libc::pollfd> = Vec::new();
    let mut srcs: Vec<Src> = Vec::new();
    let mut interests: Vec<Interest> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    while job.running > 0 {
        pfds.clear();
        srcs.clear();
        pfds.push(libc::pollfd {
            fd: sigfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        srcs.push(Src::Signals);
        for (r, rank) in job.ranks.iter().enumerate() {
            for (k, s) in rank.streams.iter().enumerate() {
                if let Some(s) = s {
                    pfds.push(libc::pollfd {
                        fd: s.fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    srcs.push(Src::Output(r, k));
                }
            }
        }
        interests.clear();
        job.server.interests(&mut interests);
        for i in &interests {
            pfds.push(libc::pollfd {
                fd: i.fd,
                events: i.events,
                revents: 0,
            });
            srcs.push(Src::Pmi(i.rank));
        }
        let timeout = match job.kill_deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                (left.as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32
            }
            None => -1,
        };
        // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structures.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                job.kill_now();
                return Err(e);
            }
        }
        if r > 0 {
            // PMI first, then output, then signals (exit statuses).
            for pass in 0..3 {
                for (p, src) in pfds.iter().zip(&srcs) {
                    if p.revents == 0 {
                        continue;
                    }
                    match (*src, pass) {
                        (Src::Pmi(rank), 0) => {
                            job.server.handle(rank, p.revents, &mut events);
                            job.on_server_events(&mut events);
                        }
                        (Src::Output(rank, k), 1) => {
                            let Job { ranks, sinks, .. } = &mut job;
                            if let Some(s) = &mut ranks[rank].streams[k] {
                                if !s.on_readable(rank, sinks) {
                                    ranks[rank].streams[k] = None;
                                }
                            }
                            if sinks.broken[k] {
                                // Our reader is gone (e.g. `mpirun ... | head`): close the
                                // ranks' pipes too, so that they get SIGPIPE/EPIPE as they
                                // would without mpirun.
                                for r in ranks.iter_mut() {
                                    r.streams[k] = None;
                                }
                            }
                        }
                        (Src::Signals, 2) => job.on_signals(sigfd.as_raw_fd(), &mut events),
                        _ => {}
                    }
                }
            }
        }
        if job.kill_deadline.is_some_and(|d| Instant::now() >= d) {
            job.kill_now();
        }
    }

    drain_outputs(&mut job);
    if job.stopping {
        // Leave nothing behind: descendants of the ranks still in the job's group.
        job.signal_all(libc::SIGKILL);
    }
    drop(shm);
    Ok(job.signalled.or(job.failure).unwrap_or(0))
}

/// The job id passed to the ranks as `MPI_JOBID` (`<mpirun pid>-<random>`); the ranks' shared
/// memory segments are named `/dev/shm/mpirs-<MPI_JOBID>-<rank>` (device-shm). The ranks
/// unlink them as soon as all local peers have attached; whatever is left when the job ends
/// (a rank killed during start-up) is removed on drop, however `run` ends.
struct ShmCleanup {
    jobid: String,
}

impl ShmCleanup {
    fn new(pid: i32) -> ShmCleanup {
        let mut r = [0u8; 4];
        // SAFETY: getrandom writes at most 4 bytes into `r`; failure leaves zeros and the
        // job id is still unique per running mpirun (its pid).
        unsafe { libc::getrandom(r.as_mut_ptr() as *mut libc::c_void, 4, 0) };
        ShmCleanup {
            jobid: format!("{pid}-{:08x}", u32::from_le_bytes(r)),
        }
    }
}

impl Drop for ShmCleanup {
    fn drop(&mut self) {
        let prefix = format!("mpirs-{}-", self.jobid);
        if let Ok(dir) = std::fs::read_dir("/dev/shm") {
            for e in dir.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.strip_prefix(&prefix).is_some_and(|rank| {
                    !rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit())
                }) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// After the last rank exited: forwards what is left in the pipes without waiting for
/// descendants that may hold them open, then the last incomplete lines.
fn drain_outputs(job: &mut Job) {
    let deadline = Instant::now() + Duration::from_millis(200);
    loop {
        let mut pfds = Vec::new();
        let mut who = Vec::new();
        for (r, rank) in job.ranks.iter().enumerate() {
            for (k, s) in rank.streams.iter().enumerate() {
                if let Some(s) = s {
                    pfds.push(libc::pollfd {
                        fd: s.fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    who.push((r, k));
                }
            }
        }
        if pfds.is_empty() || Instant::now() >= deadline {
            break;
        }
        // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structures.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
        if r <= 0 {
            break;
        }
        for (p, &(r, k)) in pfds.iter().zip(&who) {
            if p.revents != 0 {
                let Job { ranks, sinks, .. } = &mut *job;
                if let Some(s) = &mut ranks[r].streams[k] {
                    if !s.on_readable(r, sinks) {
                        ranks[r].streams[k] = None;
                    }
                }
            }
        }
    }
    for r in 0..job.ranks.len() {
        for k in 0..2 {
            if let Some(s) = job.ranks[r].streams[k].take() {
                job.sinks.write_last(r, s.is_err, s.buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Parsed, String> {
        parse_args(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    fn run_opts(args: &[&str]) -> Opts {
        match p(args) {
            Ok(Parsed::Run(o)) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn program_args_are_not_options() {
        let o = run_opts(&["-n", "4", "./prog", "-n", "2", "--help"]);
        assert_eq!(o.np, 4);
        assert_eq!(o.prog, "./prog");
        assert_eq!(
            o.args,
            vec![OsString::from("-n"), "2".into(), "--help".into()]
        );
    }

    #[test]
    fn option_spellings() {
        assert_eq!(run_opts(&["prog"]).np, 1);
        assert_eq!(run_opts(&["-np", "3", "prog"]).np, 3);
        assert_eq!(run_opts(&["-n=5", "prog"]).np, 5);
        assert_eq!(run_opts(&["-np6", "prog"]).np, 6);
        assert_eq!(run_opts(&["--np", "7", "prog"]).np, 7);
        assert!(run_opts(&["-l", "prog"]).tag);
        assert!(run_opts(&["--tag-output", "prog"]).tag);
        assert_eq!(run_opts(&["--", "-weird"]).prog, "-weird");
        let o = run_opts(&["-genv", "A", "1", "-x", "B=2", "prog"]);
        assert_eq!(
            o.env,
            vec![("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        assert_eq!(p(&["-h"]), Ok(Parsed::Help));
        assert_eq!(p(&["--version"]), Ok(Parsed::Version));
        assert!(p(&["-n", "0", "prog"]).is_err());
        assert!(p(&["-n"]).is_err());
        assert!(p(&["-n", "2"]).is_err());
        assert!(p(&["--bogus", "prog"]).is_err());
    }
}
