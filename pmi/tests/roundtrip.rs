use pmi::server::{Event, Server};
use pmi::{PmiClient, Singleton};
use rdma_api::Bootstrap;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::thread;

fn pairs(n: usize) -> (Vec<OwnedFd>, Vec<OwnedFd>) {
    let mut s = Vec::new();
    let mut c = Vec::new();
    for _ in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        s.push(OwnedFd::from(a));
        c.push(OwnedFd::from(b));
    }
    (s, c)
}

#[test]
fn put_barrier_get_four_clients() {
    let n = 4;
    let (sfds, cfds) = pairs(n);
    let mut server = Server::new(sfds, "kvs_test").unwrap();
    let srv = thread::spawn(move || {
        let mut events = Vec::new();
        server.run(|e| events.push(e)).unwrap();
        events
    });
    let clients: Vec<_> = cfds
        .into_iter()
        .enumerate()
        .map(|(rank, fd)| {
            thread::spawn(move || {
                let mut c = PmiClient::connect(fd, rank, n).unwrap();
                assert_eq!(c.kvsname(), "kvs_test");
                assert_eq!(c.appnum().unwrap(), 0);
                assert_eq!(c.universe_size().unwrap(), n);
                assert_eq!(c.maxes().vallen_max, 1024);
                for round in 0..3 {
                    c.put(&format!("k{round}_{rank}"), &format!("v{round}-{rank}"))
                        .unwrap();
                    c.barrier().unwrap();
                    for r in 0..n {
                        assert_eq!(
                            c.get(&format!("k{round}_{r}")).unwrap(),
                            format!("v{round}-{r}")
                        );
                    }
                }
                assert_eq!(c.get("PMI_process_mapping").unwrap(), "(vector,(0,1,4))");
                assert!(c.get("missing").is_err());
                assert!(c.put("bad key", "v").is_err());
                assert!(c.put("k", "bad value").is_err());
                c.finalize().unwrap();
                c.finalize().unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let events = srv.join().unwrap();
    for r in 0..n {
        assert!(events.contains(&Event::Finalized { rank: r }));
        assert!(events.contains(&Event::Closed {
            rank: r,
            initialized: true,
            finalized: true
        }));
    }
}

#[test]
fn abort_and_dead_client_are_reported() {
    let n = 3;
    let (sfds, mut cfds) = pairs(n);
    let mut server = Server::new(sfds, "kvs_abort").unwrap();
    let srv = thread::spawn(move || {
        let mut events = Vec::new();
        server.run(|e| events.push(e)).unwrap();
        events
    });
    // rank 2 dies without a word, rank 1 aborts, rank 0 finalizes.
    drop(cfds.pop());
    let mut c1 = PmiClient::connect(cfds.pop().unwrap(), 1, n).unwrap();
    c1.abort(5, "").unwrap();
    drop(c1);
    let mut c0 = PmiClient::connect(cfds.pop().unwrap(), 0, n).unwrap();
    c0.put("a", "b").unwrap();
    c0.finalize().unwrap();
    drop(c0);
    let events = srv.join().unwrap();
    assert!(events.contains(&Event::Closed {
        rank: 2,
        initialized: false,
        finalized: false
    }));
    assert!(events.contains(&Event::Abort {
        rank: 1,
        code: 5,
        message: None
    }));
    assert!(events.contains(&Event::Closed {
        rank: 1,
        initialized: true,
        finalized: false
    }));
    assert!(events.contains(&Event::Finalized { rank: 0 }));
}

#[test]
fn raw_protocol_quirks() {
    use std::io::{BufRead, BufReader, Write};
    let (sfds, mut cfds) = pairs(1);
    let mut server = Server::new(sfds, "kvs_raw").unwrap();
    let srv = thread::spawn(move || {
        let mut events = Vec::new();
        server.run(|e| events.push(e)).unwrap();
        events
    });
    let mut s = UnixStream::from(cfds.pop().unwrap());
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut ask = |line: &str| {
        s.write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        r.read_line(&mut reply).unwrap();
        pmi::wire::parse(&reply).unwrap()
    };
    // Fields in another order, extra fields.
    let m = ask("pmi_subversion=1 cmd=init pmi_version=1 extra=1\n");
    assert_eq!((m.cmd(), m.rc()), (Some("response_to_init"), 0));
    let m = ask("key=x value=y cmd=put kvsname=kvs_raw\n");
    assert_eq!((m.cmd(), m.rc()), (Some("put_result"), 0));
    let m = ask("cmd=get key=x kvsname=kvs_raw\n");
    assert_eq!(m.get("value"), Some("y"));
    let m = ask("cmd=frobnicate\n");
    assert_eq!((m.cmd(), m.rc()), (Some("frobnicate_result"), -1));
    let m = ask("mcmd=spawn\nnprocs=1\nexecname=x\nendcmd\n");
    assert_eq!((m.cmd(), m.rc()), (Some("spawn_result"), -1));
    // A single-rank barrier completes at once.
    let m = ask("cmd=barrier_in\n");
    assert_eq!(m.cmd(), Some("barrier_out"));
    drop(s);
    drop(r);
    let events = srv.join().unwrap();
    assert!(matches!(events[0], Event::ProtocolError { rank: 0, .. }));
}

#[test]
fn singleton_store() {
    let mut s = Singleton::new();
    assert_eq!((s.rank(), s.size()), (0, 1));
    s.put("a", "1").unwrap();
    s.barrier().unwrap();
    assert_eq!(s.get("a").unwrap(), "1");
    assert!(s.get("b").is_err());
}
