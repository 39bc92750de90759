//! Inline notifications (`Device::notify`): the bytes travel in the 64-byte ring entry;
//! and `Device::write_bytes` (unregistered source copied straight into the peer's heap).
//! Sizes 0..=48 and past it, integrity, order with ordinary writes, ring overflow, self
//! notifications, and a sleeping receiver woken by one.

mod util;

use rdma_api::{DeviceError, Event, NOTIFY_MAX};
use util::{pattern, run_job};

fn check_inline(e: Event, peer: usize, imm: u32, want: &[u8]) {
    match e {
        Event::RecvInline {
            peer: p,
            imm: i,
            len,
            data,
        } => {
            assert_eq!((p, i, len), (peer, imm, want.len()));
            assert_eq!(&data[..len], want, "imm {imm}");
            assert!(data[len..].iter().all(|&b| b == 0), "padding not zero");
        }
        e => panic!("expected RecvInline {imm}, got {e:?}"),
    }
}

/// Every size 0..=48, each followed by a heap write with imm (the order alternates
/// between the two kinds), three rounds; the receiver checks the order and all bytes.
#[test]
fn sizes_and_order_with_writes() {
    run_job(2, 1 << 16, |mut r| {
        assert_eq!(r.dev.max_notify_data(1 - r.rank()), NOTIFY_MAX);
        let mut k = 0u32;
        for round in 0..3u64 {
            for len in 0..=NOTIFY_MAX {
                let d = pattern(round * 100 + len as u64, len);
                let w = pattern(round * 1000 + len as u64, 100);
                if r.rank() == 0 {
                    r.dev.notify(1, k, &d).unwrap();
                    r.heap.set(0, &w);
                    r.put(1, 0, 4096 + 128 * len, 100, Some(k + 1), None);
                } else {
                    check_inline(r.next_event(), 0, k, &d);
                    assert_eq!(
                        r.next_event(),
                        Event::Recv {
                            peer: 0,
                            imm: k + 1,
                            len: 100
                        }
                    );
                    assert_eq!(r.heap.get(4096 + 128 * len, 100), w.as_slice());
                }
                k += 2;
            }
            r.barrier();
        }
        r.dev.finalize().unwrap();
    });
}

/// 49 bytes are refused; notifying oneself raises the event locally.
#[test]
fn too_long_and_self() {
    run_job(1, 4096, |mut r| {
        let e = r.dev.notify(0, 1, &[0u8; NOTIFY_MAX + 1]).unwrap_err();
        assert!(matches!(e, DeviceError::InvalidArgument(_)), "{e}");
        r.dev.notify(0, 5, b"hello").unwrap();
        check_inline(r.next_event(), 0, 5, b"hello");
        r.dev.finalize().unwrap();
    });
}

/// 3000 notifications (more than a ring holds) sent before the receiver polls: the queued
/// ones keep their bytes and the order.
#[test]
fn ring_overflow_keeps_bytes_and_order() {
    run_job(2, 4096, |mut r| {
        const N: u32 = 3000;
        if r.rank() == 0 {
            for i in 0..N {
                let d = pattern(i as u64, i as usize % (NOTIFY_MAX + 1));
                r.dev.notify(1, i, &d).unwrap();
            }
            r.barrier();
        } else {
            r.barrier();
            for i in 0..N {
                let d = pattern(i as u64, i as usize % (NOTIFY_MAX + 1));
                check_inline(r.next_event(), 0, i, &d);
            }
        }
        r.dev.finalize().unwrap();
    });
}

/// A receiver blocked in wait with a one-hour timeout is woken by each inline
/// notification (futex wake), 300 times in a ping-pong.
#[test]
fn sleeping_receiver_woken_by_inline() {
    run_job(2, 4096, |mut r| {
        let other = 1 - r.rank();
        for i in 0..300u32 {
            let d = pattern(i as u64, (i % 49) as usize);
            if r.rank() == 0 {
                check_inline(r.next_event_blocking(), 1, i, &d);
                r.dev.notify(1, i, &d).unwrap();
            } else {
                if i % 50 == 0 {
                    // Give the receiver time to fall asleep.
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r.dev.notify(other, i, &d).unwrap();
                check_inline(r.next_event_blocking(), 0, i, &d);
            }
        }
        r.dev.finalize().unwrap();
    });
}

/// `write_bytes` (unregistered, gathered source) into the peer's heap: sizes 0..64 KiB in
/// two parts, in order with inline notifications; bounds and key errors; a self write.
#[test]
fn write_bytes_gather_order_and_errors() {
    use rdma_api::RegionKey;
    const HEAP: usize = 1 << 20;
    run_job(2, HEAP, |mut r| {
        assert!(r.dev.can_write_bytes(1 - r.rank()));
        let sizes = [0usize, 1, 63, 64, 65, 4096, 8192 + 7, 65536];
        for (i, &n) in sizes.iter().enumerate() {
            let a = pattern(i as u64, n.min(64));
            let b = pattern(100 + i as u64, n - n.min(64));
            let off = 4096 + 64 * i;
            let k = 2 * i as u32;
            if r.rank() == 0 {
                r.dev
                    .write_bytes(1, [&a, &b], RegionKey(0), off, Some(k))
                    .unwrap();
                r.dev.notify(1, k + 1, &a[..a.len().min(48)]).unwrap();
            } else {
                assert_eq!(
                    r.next_event(),
                    Event::Recv {
                        peer: 0,
                        imm: k,
                        len: n
                    }
                );
                assert_eq!(r.heap.get(off, a.len()), a.as_slice());
                assert_eq!(r.heap.get(off + a.len(), b.len()), b.as_slice());
                check_inline(r.next_event(), 0, k + 1, &a[..a.len().min(48)]);
            }
            r.barrier();
        }
        if r.rank() == 0 {
            let e = r
                .dev
                .write_bytes(1, [&[1u8; 8], &[]], RegionKey(0), HEAP - 4, Some(1))
                .unwrap_err();
            assert!(matches!(e, DeviceError::InvalidAccess(_)), "{e}");
            let e = r
                .dev
                .write_bytes(1, [&[1u8; 8], &[]], RegionKey(5), 0, Some(1))
                .unwrap_err();
            assert!(matches!(e, DeviceError::InvalidArgument(_)), "{e}");
            r.dev
                .write_bytes(0, [b"sel", b"f!"], RegionKey(0), 100, Some(77))
                .unwrap();
            assert_eq!(
                r.next_event(),
                Event::Recv {
                    peer: 0,
                    imm: 77,
                    len: 5
                }
            );
            assert_eq!(r.heap.get(100, 5), b"self!");
        }
        r.barrier();
        r.dev.finalize().unwrap();
    });
}
