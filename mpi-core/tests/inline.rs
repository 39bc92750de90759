//! Inline SHORT messages (up to 36 bytes in the device's notification, device-shm) and
//! their order with slot SHORTs and rendezvous messages; over both devices (TCP has no
//! inline notifications: the same test exercises the generic path).

mod common;
use common::{pattern, run, settings, EAGER};
use mpi_core::{Comm, Datatype, Mpi, Request, Status, ANY_SOURCE, ANY_TAG};

const B: Datatype = Datatype::Byte;
const W: Comm = Comm::WORLD;
/// Largest inline payload: 48-byte notification minus the 12-byte inline header.
const INLINE: usize = 36;

/// Sizes 0..=40 (around the inline limit), ping-pong both ways, data and status checked.
#[test]
fn sizes_around_inline_limit() {
    run(2, settings(), |m| {
        let me = m.rank() as i32;
        for n in 0..=INLINE + 4 {
            let tag = n as i32;
            let mut buf = vec![0u8; 64];
            if me == 0 {
                let d = pattern(n, 1);
                unsafe { m.send(d.as_ptr(), n as i32, B, 1, tag, W) }.unwrap();
                let st = unsafe { m.recv(buf.as_mut_ptr(), 64, B, 1, tag, W) }.unwrap();
                assert_eq!((st.source, st.tag, st.count), (1, tag, n));
                assert_eq!(&buf[..n], pattern(n, 2).as_slice());
                assert!(buf[n..].iter().all(|&b| b == 0));
            } else {
                let st = unsafe { m.recv(buf.as_mut_ptr(), 64, B, 0, ANY_TAG, W) }.unwrap();
                assert_eq!((st.source, st.tag, st.count), (0, tag, n));
                assert_eq!(&buf[..n], pattern(n, 1).as_slice());
                let d = pattern(n, 2);
                unsafe { m.send(d.as_ptr(), n as i32, B, 0, tag, W) }.unwrap();
            }
        }
    });
}

/// 300 messages of mixed classes (inline, slot SHORT, rendezvous) on one tag, sent in a
/// burst (so slot credits run out and CTRL messages queue): received in order with
/// ANY_SOURCE, partly unexpected, partly posted; also a truncated inline message.
#[test]
fn mixed_classes_keep_order() {
    run(2, settings(), |m| {
        let len = |i: usize| match i % 4 {
            0 => i % (INLINE + 1),
            1 => INLINE + 1 + i % 50,
            2 => i % 8,
            _ => EAGER + 1 + i * 7,
        };
        const N: usize = 300;
        if m.rank() == 0 {
            let msgs: Vec<Vec<u8>> = (0..N).map(|i| pattern(len(i), i as u8)).collect();
            let reqs: Vec<Request> = msgs
                .iter()
                .map(|d| unsafe { m.isend(d.as_ptr(), d.len() as i32, B, 1, 3, W) }.unwrap())
                .collect();
            let mut st = vec![Status::default(); N];
            m.waitall(&reqs, &mut st).unwrap();
            let t = [9u8; 20];
            unsafe { m.send(t.as_ptr(), 20, B, 1, 4, W) }.unwrap();
        } else {
            // Let part of the burst arrive unexpected.
            std::thread::sleep(std::time::Duration::from_millis(20));
            for i in 0..N {
                let mut buf = vec![0u8; len(i) + 3];
                let st = unsafe { m.recv(buf.as_mut_ptr(), buf.len() as i32, B, ANY_SOURCE, 3, W) }
                    .unwrap();
                assert_eq!(st.count, len(i), "message {i}");
                assert_eq!(
                    &buf[..len(i)],
                    pattern(len(i), i as u8).as_slice(),
                    "message {i}"
                );
            }
            let mut small = [0u8; 10];
            let e = unsafe { m.recv(small.as_mut_ptr(), 10, B, 0, 4, W) }.unwrap_err();
            assert_eq!(e.class, mpi_core::ErrorClass::Truncate);
            assert_eq!(small, [9u8; 10]);
        }
    });
}

/// Self messages (WORLD and SELF) of inline sizes.
#[test]
fn self_inline() {
    run(1, settings(), |m: &mut Mpi| {
        for comm in [Comm::WORLD, Comm::SELF] {
            for n in [0, 1, INLINE, INLINE + 1] {
                let d = pattern(n, 5);
                let mut buf = vec![0u8; n];
                unsafe { m.send(d.as_ptr(), n as i32, B, 0, 1, comm) }.unwrap();
                let st = unsafe { m.recv(buf.as_mut_ptr(), n as i32, B, 0, 1, comm) }.unwrap();
                assert_eq!(st.count, n);
                assert_eq!(buf, d);
            }
        }
    });
}
