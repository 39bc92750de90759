//! Data movement: sizes, events, self writes, per-peer ordering, unpolled receivers and
//! blocking waits.

use super::{pattern, run_job, Mem, Transport};
use crate::{DeviceError, Event, RegionKey, Write};
use std::collections::HashSet;

const SIZES: [usize; 5] = [0, 1, 8 << 10, 4 << 20, 16 << 20];

/// Writes without sid are exercised up to this size (or the device's `max_inline`, if
/// smaller).
pub const INLINE_EXERCISED: usize = 64 << 10;

/// Every rank writes `size` bytes to every rank (itself included) at offset (1+src)*size;
/// checks Sent/Recv events and the data; one round per size.
pub fn all_to_all(t: &Transport, n: usize) {
    let max = *SIZES.iter().max().unwrap();
    run_job(t, n, (n + 1) * max, move |mut r| {
        let me = r.rank();
        let inline = r.dev.caps().max_inline.min(INLINE_EXERCISED);
        for (round, &size) in SIZES.iter().enumerate() {
            r.heap
                .set(0, &pattern(me as u64 + 100 * round as u64, size));
            let mut want_sent = HashSet::new();
            for q in 0..n {
                // Odd peers get inline writes (no sid) when allowed.
                let sid = if q % 2 == 1 && size <= inline {
                    None
                } else {
                    want_sent.insert(q as u64);
                    Some(q as u64)
                };
                r.put(q, 0, (1 + me) * size, size, Some(me as u32), sid);
            }
            let mut got_recv = HashSet::new();
            while !want_sent.is_empty() || got_recv.len() < n {
                match r.next_event() {
                    Event::Sent { sid } => assert!(want_sent.remove(&sid), "bad sid {sid}"),
                    Event::Recv { peer, imm, len } => {
                        assert_eq!(imm as usize, peer);
                        assert_eq!(len, size);
                        assert!(got_recv.insert(peer), "second Recv from {peer}");
                        let want = pattern(peer as u64 + 100 * round as u64, size);
                        assert!(
                            r.heap.get((1 + peer) * size, size) == want.as_slice(),
                            "rank {me}: data from {peer} wrong (size {size})"
                        );
                    }
                    e => panic!("unexpected {e:?}"),
                }
            }
            r.barrier(); // nobody overwrites a region another rank still checks
        }
        r.dev.finalize().unwrap();
    });
}

/// The length of write `i` of the ordering test: mostly small, every 50th large.
fn order_len(i: usize) -> usize {
    if i % 50 == 49 {
        INLINE_EXERCISED + (i * 997) % (192 << 10)
    } else {
        (i * 31) % 600
    }
}

/// 10000 writes of mixed sizes from rank 0 to rank 1, some without imm, some without sid:
/// Sent and Recv events come in issue order, and at the Recv of write `i` every write up to
/// `i` is in place.
pub fn ordering_of_10000_mixed_writes(t: &Transport) {
    const N: usize = 10_000;
    let offs: Vec<usize> = (0..N)
        .scan(0, |o, i| {
            let cur = *o;
            *o += order_len(i);
            Some(cur)
        })
        .collect();
    let total = offs[N - 1] + order_len(N - 1);
    let src_len = (256 << 10) + 128;
    run_job(t, 2, total.max(src_len), |mut r| {
        let src = pattern(42, src_len);
        if r.rank() == 0 {
            let inline = r.dev.caps().max_inline.min(INLINE_EXERCISED);
            r.heap.set(0, &src);
            let mut next_sent = 0u64;
            let check_sent = |e: Event, next_sent: &mut u64| match e {
                Event::Sent { sid } => {
                    assert!(
                        sid >= *next_sent,
                        "Sent out of order: {sid} after {next_sent}"
                    );
                    *next_sent = sid + 1;
                }
                e => panic!("unexpected {e:?}"),
            };
            let mut want_sent = 0;
            for (i, &dst) in offs.iter().enumerate() {
                let len = order_len(i);
                let imm = (i % 3 != 1 || i == N - 1).then_some(i as u32);
                let sid = if len <= inline && i % 2 == 0 {
                    None
                } else {
                    want_sent += 1;
                    Some(i as u64)
                };
                r.put(1, i % 97, dst, len, imm, sid);
                if i % 64 == 0 {
                    // Progress now and then, as a real sender would.
                    let mut ev = Vec::new();
                    r.dev.poll(&mut ev).unwrap();
                    r.pending.extend(ev);
                }
            }
            let mut sent = 0;
            while sent < want_sent {
                let e = r.next_event();
                check_sent(e, &mut next_sent);
                sent += 1;
            }
        } else {
            let mut checked = 0usize; // writes verified so far
            let mut last_imm: Option<u32> = None;
            while checked < N {
                match r.next_event() {
                    Event::Recv { peer, imm, len } => {
                        assert_eq!(peer, 0);
                        let i = imm as usize;
                        assert!(last_imm.is_none_or(|l| imm > l), "Recv out of order");
                        last_imm = Some(imm);
                        assert_eq!(len, order_len(i));
                        // Write i and every earlier one must be in place now.
                        for j in checked..=i {
                            let l = order_len(j);
                            assert!(
                                r.heap.get(offs[j], l) == &src[j % 97..j % 97 + l],
                                "write {j} not in place at Recv of {i}"
                            );
                        }
                        checked = i + 1;
                    }
                    e => panic!("unexpected {e:?}"),
                }
            }
        }
        r.dev.finalize().unwrap();
    });
}

/// A job of one rank: self writes copy (overlap allowed) and raise events; bad targets,
/// sources, peers and (if the device has a limit below `max_write`) oversized inline writes
/// are rejected by `write` and raise no event.
pub fn self_writes_single_rank(t: &Transport) {
    const HEAP: usize = 1 << 20;
    run_job(t, 1, HEAP, |mut r| {
        let data = pattern(7, 4096);
        r.heap.set(0, &data);
        r.put(0, 0, 1000, 4096, Some(5), Some(6)); // overlapping source and target
                                                   // wait must not block while local events are pending
        r.dev.wait(std::time::Duration::from_secs(3600)).unwrap();
        let mut ev = Vec::new();
        assert_eq!(r.dev.poll(&mut ev).unwrap(), 2);
        assert!(ev.contains(&Event::Sent { sid: 6 }));
        assert!(ev.contains(&Event::Recv {
            peer: 0,
            imm: 5,
            len: 4096
        }));
        assert_eq!(r.heap.get(1000, 4096), data.as_slice());

        // Zero bytes, no notification at all.
        r.put(0, 0, 0, 0, None, None);
        ev.clear();
        assert_eq!(r.dev.poll(&mut ev).unwrap(), 0);

        // Bad target (self writes are validated like remote ones), bad source, bad peer.
        let heap = r.dev.heap_key(0);
        let w = Write {
            peer: 0,
            local_key: heap,
            local_offset: 0,
            remote_key: heap,
            remote_offset: HEAP - 10,
            len: 11,
            imm: Some(1),
            sid: Some(1),
        };
        assert!(matches!(
            r.dev.write(&w),
            Err(DeviceError::InvalidAccess(_))
        ));
        let w2 = Write {
            remote_key: RegionKey(9),
            remote_offset: 0,
            ..w
        };
        assert!(matches!(
            r.dev.write(&w2),
            Err(DeviceError::InvalidAccess(_))
        ));
        let w3 = Write {
            local_offset: usize::MAX,
            remote_offset: 0,
            ..w
        };
        assert!(matches!(
            r.dev.write(&w3),
            Err(DeviceError::InvalidArgument(_))
        ));
        let w4 = Write {
            peer: 1,
            remote_offset: 0,
            ..w
        };
        assert!(matches!(
            r.dev.write(&w4),
            Err(DeviceError::InvalidArgument(_))
        ));
        let caps = r.dev.caps();
        if caps.max_inline < caps.max_write {
            assert!(caps.max_inline < HEAP, "test heap too small for {caps:?}");
            let w5 = Write {
                remote_offset: 0,
                len: caps.max_inline + 1,
                sid: None,
                ..w
            };
            assert!(matches!(
                r.dev.write(&w5),
                Err(DeviceError::InvalidArgument(_))
            ));
        }
        ev.clear();
        assert_eq!(
            r.dev.poll(&mut ev).unwrap(),
            0,
            "failed writes raise no events"
        );
        r.dev.finalize().unwrap();
    });
}

/// Self writes in a multi-rank job into a second registered region.
pub fn self_write_into_registered_region(t: &Transport) {
    run_job(t, 2, 4096, |mut r| {
        let extra = Mem::new(8192);
        // SAFETY: `extra` outlives its registration (deregistered below).
        let key = unsafe { r.register(&extra) };
        let me = r.rank();
        assert_ne!(key, r.dev.heap_key(me));
        let data = pattern(me as u64, 4096);
        r.heap.set(0, &data);
        r.dev
            .write(&Write {
                peer: me,
                local_key: r.dev.heap_key(me),
                local_offset: 0,
                remote_key: key,
                remote_offset: 4096,
                len: 4096,
                imm: Some(9),
                sid: None,
            })
            .unwrap();
        assert_eq!(
            r.next_event(),
            Event::Recv {
                peer: me,
                imm: 9,
                len: 4096
            }
        );
        assert_eq!(extra.get(4096, 4096), data.as_slice());
        r.dev.deregister(key).unwrap();
        r.dev.finalize().unwrap();
    });
}

/// Many small writes without sid while the receiver does not poll (device-shm: more
/// notifications than a ring holds, kept in the sender's overflow queue): all arrive, in
/// order, with their data.
pub fn unpolled_receiver_keeps_order(t: &Transport) {
    const N: usize = 5000;
    run_job(t, 2, N * 8, |mut r| {
        if r.rank() == 0 {
            for i in 0..N {
                r.heap.set(i * 8, &(i as u64).to_le_bytes());
                r.put(1, i * 8, i * 8, 8, Some(i as u32), None);
            }
            r.barrier();
        } else {
            r.barrier(); // all N writes issued before we consume anything
            for i in 0..N {
                let e = r.next_event();
                assert_eq!(
                    e,
                    Event::Recv {
                        peer: 0,
                        imm: i as u32,
                        len: 8
                    }
                );
                assert_eq!(r.heap.get(i * 8, 8), &(i as u64).to_le_bytes()[..]);
            }
        }
        r.dev.finalize().unwrap();
    });
}

/// A receiver blocked in wait with a very long timeout is woken by the sender's write, so
/// this test ends (200 round trips, both sides only ever blocking).
pub fn wait_is_woken_by_a_write(t: &Transport) {
    run_job(t, 2, 4096, |mut r| {
        if r.rank() == 0 {
            for i in 0..200u32 {
                let e = r.next_event_blocking();
                assert_eq!(
                    e,
                    Event::Recv {
                        peer: 1,
                        imm: i,
                        len: 4
                    }
                );
                r.put(1, 0, 0, 4, Some(i), None);
            }
        } else {
            for i in 0..200u32 {
                r.put(0, 0, 0, 4, Some(i), None);
                let e = r.next_event_blocking();
                assert_eq!(
                    e,
                    Event::Recv {
                        peer: 0,
                        imm: i,
                        len: 4
                    }
                );
            }
        }
        r.dev.finalize().unwrap();
    });
}
