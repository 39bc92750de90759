//! The blocking receive's fast path (`Mpi::recv` without a request when no receive is
//! posted: a matching unexpected SHORT is copied at once, otherwise the receive waits as the
//! engine's direct receive): wildcards, truncation, MPI_PROC_NULL, status fields, order
//! with unexpected messages and posted receives, and every message class (inline SHORT,
//! slot SHORT, rendezvous). Over both devices.

mod common;
use common::{pattern, run, settings, EAGER};
use mpi_core::{Comm, Datatype, ErrorClass, Mpi, Request, Status, ANY_SOURCE, ANY_TAG, PROC_NULL};
use std::time::Duration;

const B: Datatype = Datatype::Byte;
const W: Comm = Comm::WORLD;

/// Sizes of every class: inline (≤ 36), slot SHORT (≤ EAGER), rendezvous.
const SIZES: [usize; 6] = [0, 7, 36, 37, 600, EAGER * 3 + 5];

fn send(m: &mut Mpi, dest: i32, tag: i32, data: &[u8]) {
    unsafe { m.send(data.as_ptr(), data.len() as i32, B, dest, tag, W) }.unwrap();
}

/// Receives into a buffer of `cap` bytes; (status or error class, buffer).
fn recv(
    m: &mut Mpi,
    cap: usize,
    src: i32,
    tag: i32,
) -> (Result<mpi_core::Status, ErrorClass>, Vec<u8>) {
    let mut buf = vec![0u8; cap];
    let r = unsafe { m.recv(buf.as_mut_ptr(), cap as i32, B, src, tag, W) };
    (r.map_err(|e| e.class), buf)
}

/// The receiver waits first (direct receive, with and without wildcards): every class,
/// data and status fields.
#[test]
fn waiting_receive_every_class_and_wildcards() {
    run(2, settings(), |m| {
        for (i, &n) in SIZES.iter().enumerate() {
            for wild in 0..3 {
                let tag = (10 * i + wild) as i32;
                if m.rank() == 0 {
                    // Let the receiver block first.
                    std::thread::sleep(Duration::from_millis(2));
                    send(m, 1, tag, &pattern(n, tag as u8));
                } else {
                    let (src, t) = match wild {
                        0 => (0, tag),
                        1 => (ANY_SOURCE, tag),
                        _ => (ANY_SOURCE, ANY_TAG),
                    };
                    let (st, buf) = recv(m, n + 5, src, t);
                    let st = st.unwrap();
                    assert_eq!((st.source, st.tag, st.count, st.error), (0, tag, n, 0));
                    assert!(!st.cancelled);
                    assert_eq!(&buf[..n], pattern(n, tag as u8).as_slice());
                    assert!(buf[n..].iter().all(|&b| b == 0));
                }
            }
        }
    });
}

/// Truncation, waiting and unexpected, every class: MPI_ERR_TRUNCATE, the buffer holds
/// the message's first bytes, and the next message is received normally.
#[test]
fn truncation_waiting_and_unexpected() {
    run(2, settings(), |m| {
        for &n in &SIZES[1..] {
            let cap = n / 2;
            for unexpected in [false, true] {
                if m.rank() == 0 {
                    if !unexpected {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    send(m, 1, 1, &pattern(n, 3));
                    send(m, 1, 2, &[42u8; 3]);
                    // Lock step: the receiver acknowledges.
                    recv(m, 0, 1, 99).0.unwrap();
                } else {
                    if unexpected {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let (r, buf) = recv(m, cap, 0, 1);
                    assert_eq!(r.unwrap_err(), ErrorClass::Truncate, "{n} bytes");
                    assert_eq!(&buf[..], &pattern(n, 3)[..cap]);
                    let (st, buf) = recv(m, 8, 0, 2);
                    assert_eq!(st.unwrap().count, 3);
                    assert_eq!(&buf[..3], &[42u8; 3]);
                    send(m, 0, 99, &[]);
                }
            }
        }
    });
}

/// MPI_PROC_NULL: at once, status (PROC_NULL, ANY_TAG, 0), buffer untouched.
#[test]
fn proc_null() {
    run(1, settings(), |m| {
        let (st, buf) = recv(m, 4, PROC_NULL, 5);
        let st = st.unwrap();
        assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
        assert_eq!(buf, [0u8; 4]);
    });
}

/// Messages that do not match the waiting receive are queued as unexpected and received
/// later in their order; a message matching the waiting receive arriving after
/// non-matching ones completes it.
#[test]
fn non_matching_arrivals_while_waiting() {
    run(2, settings(), |m| {
        if m.rank() == 0 {
            std::thread::sleep(Duration::from_millis(2));
            // Not matched yet (nonblocking: the rendezvous one completes only when
            // received).
            let msgs: Vec<Vec<u8>> = (0..SIZES.len())
                .map(|i| pattern(SIZES[i], i as u8))
                .collect();
            let reqs: Vec<Request> = msgs
                .iter()
                .map(|d| unsafe { m.isend(d.as_ptr(), d.len() as i32, B, 1, 7, W) }.unwrap())
                .collect();
            send(m, 1, 8, &pattern(5, 99)); // the waited-for one
            let mut st = vec![Status::default(); reqs.len()];
            m.waitall(&reqs, &mut st).unwrap();
        } else {
            let (st, buf) = recv(m, 8, 0, 8);
            assert_eq!(st.unwrap().count, 5);
            assert_eq!(&buf[..5], pattern(5, 99).as_slice());
            for (i, &n) in SIZES.iter().enumerate() {
                let (st, buf) = recv(m, n, ANY_SOURCE, ANY_TAG);
                let st = st.unwrap();
                assert_eq!((st.tag, st.count), (7, n), "message {i}");
                assert_eq!(&buf[..n], pattern(n, i as u8).as_slice());
            }
        }
    });
}

/// With a receive posted (Irecv), a blocking receive for the same messages takes the
/// second one: the posted receive matches first (non-overtaking across the two kinds).
#[test]
fn posted_receive_matches_before_blocking_one() {
    run(2, settings(), |m| {
        for &n in &SIZES {
            if m.rank() == 0 {
                std::thread::sleep(Duration::from_millis(2));
                send(m, 1, 4, &pattern(n, 1));
                send(m, 1, 4, &pattern(n, 2));
            } else {
                let mut first = vec![0u8; n];
                let r = unsafe { m.irecv(first.as_mut_ptr(), n as i32, B, 0, ANY_TAG, W) }.unwrap();
                let (st, buf) = recv(m, n, ANY_SOURCE, 4);
                assert_eq!(st.unwrap().count, n);
                assert_eq!(buf, pattern(n, 2));
                let st = m.wait(r).unwrap();
                assert_eq!((st.tag, st.count), (4, n));
                assert_eq!(first, pattern(n, 1));
            }
        }
    });
}

/// Unexpected messages of every class, received by blocking receives in order (the
/// unexpected SHORT path without a request, the REQ path through a request), mixed with
/// ones that arrive while the receive waits.
#[test]
fn unexpected_then_waiting_in_order() {
    run(2, settings(), |m| {
        const N: usize = 60;
        let len = |i: usize| SIZES[i % SIZES.len()];
        if m.rank() == 0 {
            for i in 0..N {
                if i == N / 2 {
                    // The second half arrives while the receiver waits.
                    recv(m, 0, 1, 98).0.unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                }
                send(m, 1, 6, &pattern(len(i), i as u8));
            }
        } else {
            std::thread::sleep(Duration::from_millis(10));
            for i in 0..N {
                if i == N / 2 {
                    send(m, 0, 98, &[]);
                }
                let (st, buf) = recv(m, len(i), 0, ANY_TAG);
                let st = st.unwrap();
                assert_eq!((st.source, st.tag, st.count), (0, 6, len(i)), "message {i}");
                assert_eq!(buf, pattern(len(i), i as u8), "message {i}");
            }
        }
    });
}

/// Self messages (MPI_COMM_WORLD to oneself and MPI_COMM_SELF): sent before the receive,
/// every class up to the eager limit (a blocking self send of a rendezvous message would
/// wait for its own receive).
#[test]
fn self_messages() {
    run(1, settings(), |m| {
        for comm in [W, Comm::SELF] {
            for &n in &SIZES[..5] {
                let d = pattern(n, n as u8);
                unsafe { m.send(d.as_ptr(), n as i32, B, 0, 3, comm) }.unwrap();
                let mut buf = vec![0u8; n];
                let st = unsafe { m.recv(buf.as_mut_ptr(), n as i32, B, 0, 3, comm) }.unwrap();
                assert_eq!((st.source, st.tag, st.count), (0, 3, n));
                assert_eq!(buf, d);
            }
        }
    });
}
