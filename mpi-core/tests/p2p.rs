//! Point-to-point over thread-ranks on the TCP device: sizes, order, flow control,
//! wildcards, probe, truncation, argument errors, PROC_NULL, alloc_mem.

mod common;
use common::{pattern, run, settings, EAGER};
use mpi_core::{
    Comm, Datatype, ErrorClass, Mpi, Request, Status, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const B: Datatype = Datatype::Byte;
const W: Comm = Comm::WORLD;

fn sizes() -> Vec<usize> {
    vec![0, 1, EAGER - 1, EAGER, EAGER + 1, 4 << 20]
}

fn send(m: &mut Mpi, d: &[u8], dest: i32, tag: i32) {
    unsafe { m.send(d.as_ptr(), d.len() as i32, B, dest, tag, W) }.unwrap();
}

fn recv(m: &mut Mpi, buf: &mut [u8], src: i32, tag: i32) -> mpi_core::Result<Status> {
    unsafe { m.recv(buf.as_mut_ptr(), buf.len() as i32, B, src, tag, W) }
}

#[test]
fn every_size_class_both_directions() {
    run(2, settings(), |m| {
        let me = m.rank() as i32;
        for (i, &n) in sizes().iter().enumerate() {
            let tag = i as i32;
            let d = pattern(n, tag as u8 + me as u8);
            let mut buf = vec![0u8; n];
            if me == 0 {
                send(m, &d, 1, tag);
                let st = recv(m, &mut buf, 1, tag).unwrap();
                assert_eq!((st.source, st.tag, st.count), (1, tag, n));
                assert!(buf == pattern(n, tag as u8 + 1), "size {n}");
            } else {
                let st = recv(m, &mut buf, 0, tag).unwrap();
                assert_eq!((st.source, st.tag, st.count), (0, tag, n));
                assert!(buf == pattern(n, tag as u8), "size {n}");
                send(m, &d, 0, tag);
            }
        }
    });
}

#[test]
fn self_messages_world_and_self() {
    run(1, settings(), |m| {
        for comm in [Comm::WORLD, Comm::SELF] {
            for (i, &n) in sizes().iter().enumerate() {
                let d = pattern(n, i as u8);
                let mut buf = vec![0u8; n];
                let s = unsafe { m.isend(d.as_ptr(), n as i32, B, 0, 7, comm) }.unwrap();
                let r =
                    unsafe { m.irecv(buf.as_mut_ptr(), n as i32, B, ANY_SOURCE, 7, comm) }.unwrap();
                let mut st = [Status::default(); 2];
                m.waitall(&[s, r], &mut st).unwrap();
                assert_eq!((st[1].source, st[1].tag, st[1].count), (0, 7, n));
                assert!(buf == d);
            }
        }
    });
}

#[test]
fn burst_of_mixed_sizes_keeps_order() {
    run(2, settings(), |m| {
        let lens: Vec<usize> = (0..60)
            .map(|i| if i % 3 == 0 { 3 * EAGER + i } else { 4 + i })
            .collect();
        if m.rank() == 0 {
            let msgs: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &l)| {
                    let mut v = pattern(l, i as u8);
                    v[0] = i as u8;
                    v
                })
                .collect();
            let reqs: Vec<Request> = msgs
                .iter()
                .map(|v| unsafe { m.isend(v.as_ptr(), v.len() as i32, B, 1, 5, W) }.unwrap())
                .collect();
            let mut st = vec![Status::default(); reqs.len()];
            m.waitall(&reqs, &mut st).unwrap();
        } else {
            for (i, &l) in lens.iter().enumerate() {
                let mut buf = vec![0u8; 4 * EAGER + 100];
                let st = recv(m, &mut buf, 0, 5).unwrap();
                assert_eq!(st.count, l, "message {i}");
                assert_eq!(buf[0], i as u8);
                let mut want = pattern(l, i as u8);
                want[0] = i as u8;
                assert!(buf[..l] == want[..]);
            }
        }
    });
}

#[test]
fn flow_control_100k_unexpected_messages() {
    const N: usize = 100_000;
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    run(2, settings(), move |m| {
        if m.rank() == 0 {
            let data: Vec<u64> = (0..N as u64).collect();
            let reqs: Vec<Request> = data
                .iter()
                .map(|x| unsafe { m.isend(x as *const u64 as *const u8, 8, B, 1, 3, W) }.unwrap())
                .collect();
            f2.store(true, Ordering::SeqCst);
            let mut st = vec![Status::default(); N];
            m.waitall(&reqs, &mut st).unwrap();
        } else {
            while !f2.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            for i in 0..N as u64 {
                let mut x = 0u64;
                let st = unsafe { m.recv(&mut x as *mut u64 as *mut u8, 8, B, 0, 3, W) }.unwrap();
                assert_eq!(st.count, 8);
                assert_eq!(x, i);
            }
        }
    });
    assert!(flag.load(Ordering::SeqCst));
}

#[test]
fn any_source_any_tag_from_three_senders() {
    run(4, settings(), |m| {
        let me = m.rank() as i32;
        const K: i32 = 20;
        if me == 0 {
            let mut next = [0i32; 4];
            for _ in 0..3 * K {
                let mut b = [0u8; 8];
                let st = recv(m, &mut b, ANY_SOURCE, ANY_TAG).unwrap();
                let (src, i) = (b[0] as i32, i32::from_le_bytes([b[4], b[5], b[6], b[7]]));
                assert_eq!(st.source, src);
                assert_eq!(st.tag, src * 100 + i);
                assert_eq!(st.count, 8);
                assert_eq!(i, next[src as usize], "non-overtaking from {src}");
                next[src as usize] += 1;
            }
            assert_eq!(next, [0, K, K, K]);
        } else {
            for i in 0..K {
                let mut b = [0u8; 8];
                b[0] = me as u8;
                b[4..].copy_from_slice(&i.to_le_bytes());
                send(m, &b, 0, me * 100 + i);
            }
        }
    });
}

#[test]
fn probe_then_receive_probed_size() {
    run(2, settings(), |m| {
        if m.rank() == 0 {
            for (t, n) in [(1, 100usize), (2, 5 * EAGER), (3, 0)] {
                send(m, &pattern(n, t as u8), 1, t);
            }
        } else {
            for want_tag in [2, 1, 3] {
                let st = m.probe(0, want_tag, W).unwrap();
                let mut buf = vec![0u8; st.count];
                let r = recv(m, &mut buf, st.source, st.tag).unwrap();
                assert_eq!(r.count, st.count);
                assert!(buf == pattern(st.count, want_tag as u8));
            }
            assert!(m.iprobe(ANY_SOURCE, ANY_TAG, W).unwrap().is_none());
            let st = m.iprobe(PROC_NULL, ANY_TAG, W).unwrap().unwrap();
            assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
        }
    });
}

#[test]
fn truncation_short_and_rendezvous() {
    run(2, settings(), |m| {
        if m.rank() == 0 {
            send(m, &pattern(100, 1), 1, 1);
            send(m, &pattern(10 * EAGER, 2), 1, 2);
            send(m, &pattern(10, 3), 1, 3);
        } else {
            let mut b = vec![0u8; 50];
            let e = recv(m, &mut b, 0, 1).unwrap_err();
            assert_eq!(e.class, ErrorClass::Truncate);
            assert!(b[..] == pattern(100, 1)[..50]);
            let mut big = vec![0u8; 3 * EAGER];
            let r = unsafe { m.irecv(big.as_mut_ptr(), big.len() as i32, B, 0, 2, W) }.unwrap();
            let mut st = [Status::default()];
            let e = m.waitall(&[r], &mut st).unwrap_err();
            assert_eq!(e.class, ErrorClass::InStatus);
            assert_eq!(st[0].error, ErrorClass::Truncate as i32);
            assert_eq!(st[0].count, 3 * EAGER);
            assert!(big[..] == pattern(10 * EAGER, 2)[..3 * EAGER]);
            // The connection still works afterwards.
            let mut c = vec![0u8; 10];
            recv(m, &mut c, 0, 3).unwrap();
            assert!(c == pattern(10, 3));
        }
    });
}

#[test]
fn argument_errors() {
    run(2, settings(), |m| {
        let b = [0u8; 4];
        let p = b.as_ptr();
        let cls = |r: mpi_core::Result<Request>| r.unwrap_err().class;
        unsafe {
            assert_eq!(cls(m.isend(p, 1, B, 2, 0, W)), ErrorClass::Rank);
            assert_eq!(cls(m.isend(p, 1, B, -3, 0, W)), ErrorClass::Rank);
            assert_eq!(cls(m.isend(p, 1, B, ANY_SOURCE, 0, W)), ErrorClass::Rank);
            assert_eq!(cls(m.isend(p, 1, B, 1, 0, Comm::SELF)), ErrorClass::Rank);
            assert_eq!(cls(m.isend(p, 1, B, 0, -1, W)), ErrorClass::Tag);
            assert_eq!(cls(m.isend(p, 1, B, 0, TAG_UB + 1, W)), ErrorClass::Tag);
            assert_eq!(cls(m.isend(p, -1, B, 0, 0, W)), ErrorClass::Count);
            assert_eq!(cls(m.isend(p, 1, B, 0, 0, Comm(9))), ErrorClass::Comm);
            assert_eq!(
                cls(m.isend(std::ptr::null(), 1, B, 0, 0, W)),
                ErrorClass::Buffer
            );
            assert_eq!(
                cls(m.irecv(std::ptr::null_mut(), 1, B, 0, 0, W)),
                ErrorClass::Buffer
            );
            assert_eq!(cls(m.irecv(p as *mut u8, 1, B, 5, 0, W)), ErrorClass::Rank);
            assert_eq!(cls(m.irecv(p as *mut u8, 1, B, 0, -7, W)), ErrorClass::Tag);
            let e = m.isend(p, 1, B, 7, 0, W).unwrap_err();
            assert!(e.msg.contains('7') && e.msg.contains('2'), "{}", e.msg);
            let mut x = 0i32;
            let xp = &mut x as *mut i32 as *mut u8;
            assert_eq!(
                m.bcast(xp, 1, Datatype::Int, 2, W).unwrap_err().class,
                ErrorClass::Root
            );
            assert_eq!(
                m.bcast(xp, -1, Datatype::Int, 0, W).unwrap_err().class,
                ErrorClass::Count
            );
            assert_eq!(
                m.reduce(Some(p), xp, 1, B, mpi_core::Op::Sum, 0, W)
                    .unwrap_err()
                    .class,
                ErrorClass::Op
            );
            assert_eq!(
                m.allreduce(None, xp, 1, B, mpi_core::Op::Max, W)
                    .unwrap_err()
                    .class,
                ErrorClass::Op
            );
            assert_eq!(m.free_mem(xp).unwrap_err().class, ErrorClass::Arg);
        }
        assert_eq!(
            m.wait(Request(123_456)).unwrap_err().class,
            ErrorClass::Request
        );
        assert_eq!(m.comm_size(Comm(5)).unwrap_err().class, ErrorClass::Comm);
        assert_eq!(m.comm_rank(Comm::SELF).unwrap(), 0);
        assert_eq!(m.comm_size(W).unwrap(), 2);
        assert_eq!(m.probe(0, -5, W).unwrap_err().class, ErrorClass::Tag);
    });
}

#[test]
fn proc_null_completes_immediately() {
    run(1, settings(), |m| {
        let mut b = [9u8; 4];
        unsafe { m.send(b.as_ptr(), 4, B, PROC_NULL, 1, W) }.unwrap();
        let st = recv(m, &mut b, PROC_NULL, 1).unwrap();
        assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
        assert_eq!(b, [9; 4]);
    });
}

#[test]
fn alloc_mem_buffers_travel() {
    run(2, settings(), |m| {
        let n = 64 * 1024;
        let p = m.alloc_mem(n).unwrap();
        assert_eq!(p as usize % 64, 0);
        let buf = unsafe { std::slice::from_raw_parts_mut(p, n) };
        if m.rank() == 0 {
            buf.copy_from_slice(&pattern(n, 42));
            unsafe { m.send(p, n as i32, B, 1, 0, W) }.unwrap();
        } else {
            let st = unsafe { m.recv(p, n as i32, B, 0, 0, W) }.unwrap();
            assert_eq!(st.count, n);
            assert!(buf[..] == pattern(n, 42)[..]);
        }
        let big = m.alloc_mem(256 << 20).unwrap(); // beyond the heap: system allocator
        unsafe {
            *big = 1;
            m.free_mem(big).unwrap();
            m.free_mem(p).unwrap();
            assert_eq!(m.free_mem(p).unwrap_err().class, ErrorClass::Arg);
        }
    });
}

#[test]
fn test_polls_until_complete() {
    run(2, settings(), |m| {
        let mut b = vec![0u8; 2 * EAGER];
        if m.rank() == 1 {
            let r = unsafe { m.irecv(b.as_mut_ptr(), b.len() as i32, B, 0, 0, W) }.unwrap();
            let st = loop {
                if let Some(st) = m.test(r).unwrap() {
                    break st;
                }
            };
            assert_eq!(st.count, 2 * EAGER);
            assert!(b == pattern(2 * EAGER, 0));
        } else {
            send(m, &pattern(2 * EAGER, 0), 1, 0);
        }
    });
}

/// 0-byte ping-pong latency between two thread-ranks over TCP loopback (prints it).
#[test]
#[ignore]
fn pingpong_latency() {
    let s = mpi_core::settings::Settings::default();
    run(2, s, |m| {
        let me = m.rank() as i32;
        let mut b = [0u8; 1];
        for (iters, report) in [(1000, false), (20000, true)] {
            m.barrier(W).unwrap();
            let t = std::time::Instant::now();
            for _ in 0..iters {
                unsafe {
                    if me == 0 {
                        m.send(b.as_ptr(), 0, B, 1, 0, W).unwrap();
                        m.recv(b.as_mut_ptr(), 0, B, 1, 0, W).unwrap();
                    } else {
                        m.recv(b.as_mut_ptr(), 0, B, 0, 0, W).unwrap();
                        m.send(b.as_ptr(), 0, B, 0, 0, W).unwrap();
                    }
                }
            }
            if report && me == 0 {
                let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64 / 2.0;
                println!("0-byte ping-pong half round trip: {us:.2} us ({iters} iterations)");
            }
        }
    });
}

#[test]
fn many_self_messages_exceed_the_ring() {
    run(1, settings(), |m| {
        let data: Vec<u32> = (0..500).collect();
        let reqs: Vec<Request> = data
            .iter()
            .map(|x| unsafe { m.isend(x as *const u32 as *const u8, 4, B, 0, 1, W) }.unwrap())
            .collect();
        for i in 0..500u32 {
            let mut x = 0u32;
            unsafe { m.recv(&mut x as *mut u32 as *mut u8, 4, B, 0, 1, W) }.unwrap();
            assert_eq!(x, i);
        }
        let mut st = vec![Status::default(); reqs.len()];
        m.waitall(&reqs, &mut st).unwrap();
    });
}

/// Ping-pong time per message size with the eager protocol vs the rendezvous, to choose
/// the eager limit (prints a table).
#[test]
#[ignore]
fn eager_vs_rendezvous_crossover() {
    for (name, eager) in [("eager", 1 << 20), ("rendezvous", 0)] {
        let s = mpi_core::settings::Settings {
            eager_limit: eager,
            ..Default::default()
        };
        run(2, s, move |m| {
            let me = m.rank() as i32;
            for len in [1024usize, 4096, 8192, 16384, 32768, 65536, 262144] {
                let mut b = vec![0u8; len];
                let iters = 300;
                m.barrier(W).unwrap();
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    unsafe {
                        if me == 0 {
                            m.send(b.as_ptr(), len as i32, B, 1, 0, W).unwrap();
                            m.recv(b.as_mut_ptr(), len as i32, B, 1, 0, W).unwrap();
                        } else {
                            m.recv(b.as_mut_ptr(), len as i32, B, 0, 0, W).unwrap();
                            m.send(b.as_ptr(), len as i32, B, 0, 0, W).unwrap();
                        }
                    }
                }
                if me == 0 {
                    let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64 / 2.0;
                    println!("{name:>10} {len:>7} B: {us:8.1} us");
                }
            }
        });
    }
}

/// One CTRL slot per sender and eager limit 0 (every non-empty message is a rendezvous):
/// both ranks exchange a burst at the same time, unexpected on both sides.
#[test]
fn single_slot_ring_and_zero_eager_limit() {
    let s = mpi_core::settings::Settings {
        eager_limit: 0,
        ctrl_slots: 1,
        heap_size: 1 << 20,
        print: false,
        device: Default::default(),
        ..Default::default()
    };
    run(3, s, |m| {
        let me = m.rank();
        let n = m.size();
        const K: usize = 300;
        let out: Vec<Vec<u8>> = (0..K)
            .map(|i| pattern(i % 50, (me * 7 + i) as u8))
            .collect();
        let mut reqs = Vec::new();
        for d in 0..n {
            for v in &out {
                reqs.push(
                    unsafe { m.isend(v.as_ptr(), v.len() as i32, B, d as i32, 9, W) }.unwrap(),
                );
            }
        }
        for src in 0..n {
            for i in 0..K {
                let mut b = vec![0u8; 64];
                let st = recv(m, &mut b, src as i32, 9).unwrap();
                assert_eq!(st.count, i % 50);
                assert!(b[..st.count] == pattern(i % 50, (src * 7 + i) as u8)[..]);
            }
        }
        let mut st = vec![Status::default(); reqs.len()];
        m.waitall(&reqs, &mut st).unwrap();
    });
}
