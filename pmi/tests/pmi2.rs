//! PMI-2 client against a stub PMI-2 server (threads + socketpairs) that speaks Slurm's
//! framing (left-justified length, Slurm's field order) or Hydra's (right-justified length,
//! another field order); plus version negotiation against our PMI-1 server.

use pmi::server::Server;
use pmi::wire::{self, Message};
use pmi::wire2::{self, Justify};
use pmi::{Boot, Pmi2Client, PmiVersion, Selection};
use rdma_api::Bootstrap;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

const JOBID: &str = "42.0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    Slurm,
    Hydra,
}

#[derive(Default)]
struct Shared {
    committed: HashMap<String, String>,
    staged: Vec<(String, String)>,
    fence_in: usize,
    fence_gen: u64,
    /// Raw request bodies, per rank, as received.
    raw: Vec<(usize, String)>,
    aborts: Vec<(usize, bool, String)>,
    finalized: Vec<usize>,
    /// Server ends of every connection, to "kill the job" on abort.
    streams: Vec<UnixStream>,
    killed: bool,
}

struct Stub {
    flavor: Flavor,
    n: usize,
    state: State,
}

impl Stub {
    fn justify(&self) -> Justify {
        match self.flavor {
            Flavor::Slurm => Justify::Left,
            Flavor::Hydra => Justify::Right,
        }
    }

    fn reply(&self, s: &mut UnixStream, body: &str) {
        let frame = wire2::frame(body.as_bytes(), self.justify()).unwrap();
        let _ = s.write_all(&frame);
    }

    /// Serves one client connection (local rank `lrank`) until it finalizes or goes away.
    fn serve(&self, mut s: UnixStream, lrank: usize) {
        // PMI-1 init line.
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        let init = wire::parse_bytes(&line).unwrap();
        assert_eq!(init.cmd(), Some("init"));
        // Like Slurm once a step is in PMI-2: any other version is refused but the
        // connection continues in PMI-2.
        let rc = if init.get_int("pmi_version") == Some(2) {
            0
        } else {
            -1
        };
        let resp = match self.flavor {
            Flavor::Slurm => {
                format!("cmd=response_to_init rc={rc} pmi_version=2 pmi_subversion=0\n")
            }
            Flavor::Hydra => {
                format!("cmd=response_to_init pmi_version=2 pmi_subversion=0 rc={rc}\n")
            }
        };
        s.write_all(resp.as_bytes()).unwrap();
        let mut rank = usize::MAX;
        loop {
            let mut len = [0u8; 6];
            if s.read_exact(&mut len).is_err() {
                return;
            }
            let n = wire2::parse_len(&len).unwrap();
            let mut body = vec![0u8; n];
            if s.read_exact(&mut body).is_err() {
                return;
            }
            let raw = String::from_utf8(body.clone()).unwrap();
            let m = match self.flavor {
                Flavor::Slurm => slurm_parse(&raw),
                Flavor::Hydra => wire2::parse_body(&body).unwrap(),
            };
            let (lock, cv) = &*self.state;
            lock.lock().unwrap().raw.push((lrank, raw));
            match m.cmd().unwrap() {
                "fullinit" => {
                    assert_eq!(m.get("threaded"), Some("FALSE"));
                    assert_eq!(m.get("pmijobid"), Some(JOBID));
                    rank = m.get_int("pmirank").unwrap() as usize;
                    let n = self.n;
                    let body = match self.flavor {
                        Flavor::Slurm => format!(
                            "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;\
                             rank={rank};size={n};appnum=-1;debugged=FALSE;pmiverbose=FALSE;"
                        ),
                        Flavor::Hydra => format!(
                            "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank={rank};\
                             size={n};appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;"
                        ),
                    };
                    self.reply(&mut s, &body);
                }
                "job-getid" => self.reply(
                    &mut s,
                    &format!("cmd=job-getid-response;rc=0;jobid={JOBID};"),
                ),
                "kvs-put" => {
                    let k = m.get("key").unwrap().to_string();
                    let v = m.get("value").unwrap().to_string();
                    lock.lock().unwrap().staged.push((k, v));
                    self.reply(&mut s, "cmd=kvs-put-response;rc=0;");
                }
                "kvs-fence" => {
                    let mut st = lock.lock().unwrap();
                    let gen = st.fence_gen;
                    st.fence_in += 1;
                    cv.notify_all();
                    if st.fence_in == self.n {
                        st.fence_in = 0;
                        st.fence_gen += 1;
                        let staged = std::mem::take(&mut st.staged);
                        st.committed.extend(staged);
                        cv.notify_all();
                    } else {
                        while st.fence_gen == gen && !st.killed {
                            st = cv.wait(st).unwrap();
                        }
                        if st.fence_gen == gen {
                            return; // killed while waiting
                        }
                    }
                    drop(st);
                    self.reply(&mut s, "cmd=kvs-fence-response;rc=0;");
                }
                "kvs-get" => {
                    assert_eq!(m.get("jobid"), Some(JOBID));
                    assert_eq!(m.get_int("srcid"), Some(-1));
                    let v = lock
                        .lock()
                        .unwrap()
                        .committed
                        .get(m.get("key").unwrap())
                        .cloned();
                    let body = match (v, self.flavor) {
                        (Some(v), Flavor::Slurm) => {
                            format!("cmd=kvs-get-response;rc=0;found=TRUE;value={};", esc(&v))
                        }
                        (Some(v), Flavor::Hydra) => {
                            format!("cmd=kvs-get-response;found=TRUE;value={};rc=0;", esc(&v))
                        }
                        (None, _) => "cmd=kvs-get-response;rc=0;found=FALSE;".to_string(),
                    };
                    self.reply(&mut s, &body);
                }
                "info-getjobattr" => {
                    let body = if m.get("key") == Some("PMI_process_mapping") {
                        format!(
                            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,{}));",
                            self.n
                        )
                    } else {
                        "cmd=info-getjobattr-response;rc=0;found=FALSE;".to_string()
                    };
                    self.reply(&mut s, &body);
                }
                "abort" => {
                    let world = wire2::get_bool(&m, "isworld").unwrap();
                    let msg = m.get("msg").unwrap_or("").to_string();
                    let mut st = lock.lock().unwrap();
                    // Deterministic test: kill only once the other ranks wait in the fence.
                    while st.fence_in < self.n - 1 {
                        st = cv.wait(st).unwrap();
                    }
                    st.aborts.push((rank, world, msg));
                    if world {
                        // Kill the step: every connection goes away.
                        st.killed = true;
                        for t in &st.streams {
                            let _ = t.shutdown(Shutdown::Both);
                        }
                        cv.notify_all();
                    }
                    return;
                }
                "finalize" => {
                    self.reply(&mut s, "cmd=finalize-response;rc=0;");
                    lock.lock().unwrap().finalized.push(rank);
                    let _ = s.shutdown(Shutdown::Both);
                    return;
                }
                other => panic!("stub: unexpected command {other}"),
            }
        }
    }
}

/// Parses a request as Slurm's server does: every `;` ends a value (no `;;` escape).
fn slurm_parse(body: &str) -> Message {
    let mut fields = Vec::new();
    for f in body.split(';') {
        if let Some((k, v)) = f.split_once('=') {
            fields.push((k.to_string(), v.to_string()));
        }
    }
    Message::from_fields(fields)
}

fn esc(v: &str) -> String {
    v.replace(';', ";;")
}

type State = Arc<(Mutex<Shared>, Condvar)>;

/// Starts a stub server for `n` clients; returns the client ends and the server threads.
fn start(flavor: Flavor, n: usize) -> (Vec<OwnedFd>, State, Vec<thread::JoinHandle<()>>) {
    let state = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
    let stub = Arc::new(Stub {
        flavor,
        n,
        state: state.clone(),
    });
    let mut cfds = Vec::new();
    let mut servers = Vec::new();
    for lrank in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        state.0.lock().unwrap().streams.push(a.try_clone().unwrap());
        cfds.push(OwnedFd::from(b));
        let stub = stub.clone();
        servers.push(thread::spawn(move || stub.serve(a, lrank)));
    }
    (cfds, state, servers)
}

fn auto_pmi2() -> Selection {
    Selection::decide(None, Some("pmi2"), false).unwrap()
}

fn put_fence_get(flavor: Flavor) {
    let n = 4;
    let (cfds, state, servers) = start(flavor, n);
    let clients: Vec<_> = cfds
        .into_iter()
        .enumerate()
        .map(|(rank, fd)| {
            thread::spawn(move || {
                let mut b = Boot::connect(fd, auto_pmi2(), rank, n, Some(JOBID)).unwrap();
                assert_eq!(b.version(), Some(PmiVersion::Two));
                assert_eq!((b.rank(), b.size()), (rank, n));
                let Boot::Pmi2(c) = &mut b else {
                    panic!("not PMI-2")
                };
                assert_eq!(c.jobid(), JOBID);
                let want_appnum = if flavor == Flavor::Slurm { -1 } else { 0 };
                assert_eq!(c.appnum(), want_appnum);
                assert_eq!(
                    c.job_attr("PMI_process_mapping").unwrap().as_deref(),
                    Some("(vector,(0,1,4))")
                );
                assert_eq!(c.job_attr("nothing").unwrap(), None);
                for round in 0..3 {
                    b.put(&format!("k{round}_{rank}"), &format!("v{round}-{rank}=x"))
                        .unwrap();
                    b.barrier().unwrap();
                    for r in 0..n {
                        assert_eq!(
                            b.get(&format!("k{round}_{r}")).unwrap(),
                            format!("v{round}-{r}=x")
                        );
                    }
                }
                assert!(b.get("missing").is_err());
                assert!(b.put("bad key", "v").is_err());
                assert!(b.put("bad;key", "v").is_err());
                assert!(b.put("k", "bad\nvalue").is_err());
                assert!(b.put("k", &"x".repeat(1025)).is_err());
                b.finalize().unwrap();
                b.finalize().unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    for s in servers {
        s.join().unwrap();
    }
    let st = state.0.lock().unwrap();
    let mut fin = st.finalized.clone();
    fin.sort();
    assert_eq!(fin, vec![0, 1, 2, 3]);
    // The requests themselves: fullinit first, with key=value; fields.
    for r in 0..n {
        let first = st.raw.iter().find(|(l, _)| *l == r).unwrap();
        assert!(first.1.starts_with("cmd=fullinit;"), "{}", first.1);
        assert!(first.1.contains(&format!("pmirank={r};")), "{}", first.1);
        assert!(first.1.contains("threaded=FALSE;"), "{}", first.1);
    }
    assert!(st
        .raw
        .iter()
        .any(|(_, b)| b == "cmd=kvs-get;jobid=42.0;srcid=-1;key=k0_1;"));
}

#[test]
fn put_fence_get_slurm_framing() {
    put_fence_get(Flavor::Slurm);
}

#[test]
fn put_fence_get_hydra_framing() {
    put_fence_get(Flavor::Hydra);
}

fn abort(flavor: Flavor) {
    let n = 4;
    let (cfds, state, servers) = start(flavor, n);
    let clients: Vec<_> = cfds
        .into_iter()
        .enumerate()
        .map(|(rank, fd)| {
            thread::spawn(move || {
                let mut c = Pmi2Client::connect(fd, rank, Some(JOBID)).unwrap();
                c.put(&format!("k{rank}"), "v").unwrap();
                c.barrier().unwrap();
                if rank == n - 1 {
                    c.abort(7, "giving up; sorry\n").unwrap();
                    true
                } else {
                    // The job is killed while the others wait in the fence.
                    let e = c.barrier().unwrap_err();
                    assert!(e.to_string().contains("closed"), "{e}");
                    false
                }
            })
        })
        .collect();
    let aborted: Vec<bool> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(aborted, vec![false, false, false, true]);
    for s in servers {
        s.join().unwrap();
    }
    let st = state.0.lock().unwrap();
    // Slurm does not undo ';;' (it ignores the message anyway).
    let msg = match flavor {
        Flavor::Slurm => "giving up",
        Flavor::Hydra => "giving up; sorry ",
    };
    assert_eq!(st.aborts, vec![(3, true, msg.to_string())]);
    assert!(st.finalized.is_empty());
    assert!(st
        .raw
        .iter()
        .any(|(_, b)| b == "cmd=abort;isworld=TRUE;msg=giving up;; sorry ;"));
}

#[test]
fn abort_slurm_framing() {
    abort(Flavor::Slurm);
}

#[test]
fn abort_hydra_framing() {
    abort(Flavor::Hydra);
}

fn finalize(flavor: Flavor) {
    let n = 4;
    let (cfds, state, servers) = start(flavor, n);
    let clients: Vec<_> = cfds
        .into_iter()
        .enumerate()
        .map(|(rank, fd)| {
            thread::spawn(move || {
                let mut c = Pmi2Client::connect(fd, rank, Some(JOBID)).unwrap();
                assert_eq!(c.rank(), rank);
                c.barrier().unwrap();
                c.finalize().unwrap();
                c.finalize().unwrap(); // idempotent, nothing sent
                let e = c.put("k", "v").unwrap_err();
                assert!(e.to_string().contains("finalized"), "{e}");
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    for s in servers {
        s.join().unwrap();
    }
    let st = state.0.lock().unwrap();
    let mut fin = st.finalized.clone();
    fin.sort();
    assert_eq!(fin, vec![0, 1, 2, 3]);
    assert_eq!(
        st.raw.iter().filter(|(_, b)| b == "cmd=finalize;").count(),
        4
    );
}

#[test]
fn finalize_slurm_framing() {
    finalize(Flavor::Slurm);
}

#[test]
fn finalize_hydra_framing() {
    finalize(Flavor::Hydra);
}

fn escaped_semicolons(flavor: Flavor) {
    let n = 4;
    // Values with ';' (and '%') survive both servers, including Slurm's, which does not
    // undo the ';;' escape: the client stores them encoded.
    let values = [
        "a;b",
        ";",
        ";;",
        "end;",
        ";start",
        "",
        "x=y;z=w;",
        "%3B%;",
        "h,1,10.0.0.1;10.0.0.2",
    ];
    let (cfds, state, servers) = start(flavor, n);
    let clients: Vec<_> = cfds
        .into_iter()
        .enumerate()
        .map(|(rank, fd)| {
            thread::spawn(move || {
                let mut c = Pmi2Client::connect(fd, rank, Some(JOBID)).unwrap();
                for (i, v) in values.iter().enumerate() {
                    c.put(&format!("s{i}_{rank}"), &format!("{v}{rank}{v}"))
                        .unwrap();
                }
                c.barrier().unwrap();
                for r in 0..n {
                    for (i, v) in values.iter().enumerate() {
                        assert_eq!(c.get(&format!("s{i}_{r}")).unwrap(), format!("{v}{r}{v}"));
                    }
                }
                c.finalize().unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    for s in servers {
        s.join().unwrap();
    }
    let st = state.0.lock().unwrap();
    assert!(st
        .raw
        .iter()
        .any(|(_, b)| b == "cmd=kvs-put;key=s0_2;value=a%3Bb2a%3Bb;"));
}

#[test]
fn escaped_semicolons_slurm_framing() {
    escaped_semicolons(Flavor::Slurm);
}

#[test]
fn escaped_semicolons_hydra_framing() {
    escaped_semicolons(Flavor::Hydra);
}

#[test]
fn pmi1_offer_switches_to_pmi2_when_server_fixed_it() {
    // Slurm answers a PMI-1 init with rc=-1 pmi_version=2 once the step speaks PMI-2.
    let (mut cfds, _state, servers) = start(Flavor::Slurm, 1);
    let sel = Selection::decide(None, None, false).unwrap();
    assert_eq!(sel.version, PmiVersion::One);
    let mut b = Boot::connect(cfds.remove(0), sel, 0, 1, Some(JOBID)).unwrap();
    assert_eq!(b.version(), Some(PmiVersion::Two));
    b.put("k", "v").unwrap();
    b.barrier().unwrap();
    assert_eq!(b.get("k").unwrap(), "v");
    b.finalize().unwrap();
    servers.into_iter().for_each(|s| s.join().unwrap());

    // ... but not when MPI_PMI=1 forces PMI-1.
    let (mut cfds, _state, _servers) = start(Flavor::Slurm, 1);
    let forced = Selection::decide(Some("1"), Some("pmi2"), true).unwrap();
    let e = Boot::connect(cfds.remove(0), forced, 0, 1, Some(JOBID))
        .err()
        .unwrap();
    assert!(e.to_string().contains("refused"), "{e}");
}

#[test]
fn pmi2_offer_falls_back_to_our_pmi1_server() {
    let n = 2;
    let mut sfds = Vec::new();
    let mut cfds = Vec::new();
    for _ in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        sfds.push(OwnedFd::from(a));
        cfds.push(OwnedFd::from(b));
    }
    let mut server = Server::new(sfds, "kvs_fb").unwrap();
    let srv = thread::spawn(move || server.run(|_| {}).unwrap());
    let clients: Vec<_> = cfds
        .into_iter()
        .enumerate()
        .map(|(rank, fd)| {
            thread::spawn(move || {
                let mut b = Boot::connect(fd, auto_pmi2(), rank, n, Some("1.0")).unwrap();
                assert_eq!(b.version(), Some(PmiVersion::One));
                b.put(&format!("k{rank}"), &format!("v{rank}")).unwrap();
                b.barrier().unwrap();
                assert_eq!(
                    b.get(&format!("k{}", 1 - rank)).unwrap(),
                    format!("v{}", 1 - rank)
                );
                b.finalize().unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    srv.join().unwrap();
}

#[test]
fn forced_pmi2_against_pmi1_server_is_an_error() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut server = Server::new(vec![OwnedFd::from(a)], "kvs_x").unwrap();
    let srv = thread::spawn(move || server.run(|_| {}));
    let e = Pmi2Client::connect(OwnedFd::from(b), 0, None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("PMI-2 init refused"), "{e}");
    drop(e);
    let _ = srv.join();
}

#[test]
fn selection_rule() {
    let d = |a, b, c| Selection::decide(a, b, c).unwrap();
    let v = |s: Selection| (s.version, s.strict);
    use PmiVersion::{One, Two};
    assert_eq!(v(d(None, None, false)), (One, false));
    assert_eq!(v(d(Some(""), None, false)), (One, false));
    assert_eq!(v(d(Some("auto"), Some("none"), false)), (One, false));
    assert_eq!(v(d(None, Some("pmi2"), false)), (Two, false));
    assert_eq!(v(d(None, Some("PMI2"), false)), (Two, false));
    assert_eq!(v(d(None, Some("pmix"), false)), (One, false));
    assert_eq!(v(d(None, None, true)), (Two, false));
    assert_eq!(v(d(Some("1"), Some("pmi2"), true)), (One, true));
    assert_eq!(v(d(Some("2"), None, false)), (Two, true));
    assert!(Selection::decide(Some("3"), None, false).is_err());
}

#[test]
fn frame_codec() {
    let m = Message::new("kvs-put")
        .with("key", "k")
        .with("value", "a;b=c");
    assert_eq!(wire2::encode_body(&m), "cmd=kvs-put;key=k;value=a;;b=c;");
    let f = wire2::encode(&m, Justify::Left).unwrap();
    assert_eq!(&f[..6], b"31    ");
    let f = wire2::encode(&m, Justify::Right).unwrap();
    assert_eq!(&f[..6], b"    31");
    assert_eq!(wire2::parse_body(&f[6..]).unwrap(), m);
    for field in [
        &b"32    "[..],
        b"    32",
        b"  32  ",
        b"000032",
        b"32\0\0\0\0",
    ] {
        assert_eq!(wire2::parse_len(field).unwrap(), 32);
    }
    assert!(wire2::parse_len(b"  x   ").is_err());
    // Trailing NUL (counted in the length by some writers), missing final ';', order.
    let p = wire2::parse_body(b"cmd=kvs-get-response;value=v;;;found=TRUE;rc=0\0").unwrap();
    assert_eq!(p.cmd(), Some("kvs-get-response"));
    assert_eq!(p.get("value"), Some("v;"));
    assert_eq!(wire2::get_bool(&p, "found"), Some(true));
    assert_eq!(p.rc(), 0);
    let p = wire2::parse_body(b"cmd=x;empty=;k=v;").unwrap();
    assert_eq!(p.get("empty"), Some(""));
    assert_eq!(p.get("k"), Some("v"));
    assert!(wire2::parse_body(b"key=v;cmd=x;").is_err());
    assert!(wire2::parse_body(b"cmd=x;novalue;").is_err());
    assert!(wire2::parse_body(b"").is_err());
}
