//! Overlapping registered regions: deregistering region K affects only writes into K.
//!
//! MPI codes post many receives into the same buffer (osu_bw's window of 64 `MPI_Irecv`),
//! and mpi-core registers each rendezvous receive buffer on its own, so several keys cover
//! the same memory. A write arriving into one of them must survive the deregistration of
//! another; a write arriving into the deregistered key itself is still stopped.

mod util;

use rdma_api::{Bootstrap, DeviceError, Event, RegionKey, Write};
use util::{pattern, run_job, Mem};

/// Size of the mid-frame writes: far above one socket receive buffer, so the first poll that
/// moves any byte leaves the write unfinished (see `deregister_while_write_arrives` in
/// errors.rs).
const LEN: usize = 64 << 20;

/// Test bytes whose first byte is nonzero (the receiver watches it to see the write begin).
fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut d = pattern(seed, len);
    d[0] = 0xAA;
    d
}

/// Which region of the receiver the write targets and which one is deregistered mid-frame.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    /// Two registrations of the same buffer; write into the second, deregister the first.
    SameBufferOther,
    /// A region inside the heap; write into the heap (key 0), deregister the inner region.
    InsideHeapOther,
    /// Two registrations of the same buffer; write into the second, deregister the second:
    /// still stopped (the first registration does not keep the write alive).
    SameBufferTarget,
}

/// Rank 0 writes `LEN` bytes to rank 1; rank 1 deregisters a region as soon as the first
/// bytes are in place (mid-frame), then expects the outcome of `case`.
fn mid_frame(case: Case) {
    run_job(2, LEN, move |mut r| {
        let sent = data(7, LEN);
        if r.rank() == 0 {
            r.heap.set(0, &sent);
            r.barrier(); // (1) target key published
            let key: u32 = r.kvs.get("target-key").unwrap().parse().unwrap();
            r.dev
                .write(&Write {
                    peer: 1,
                    local_key: RegionKey(0),
                    local_offset: 0,
                    remote_key: RegionKey(key),
                    remote_offset: 0,
                    len: LEN,
                    imm: Some(1),
                    sid: Some(1),
                })
                .unwrap();
            if case == Case::SameBufferTarget {
                let e = r.next_error();
                assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
            } else {
                assert_eq!(r.next_event(), Event::Sent { sid: 1 });
                r.dev.finalize().unwrap();
            }
        } else {
            let mut extra = Mem::new(LEN);
            let (first, target, mem): (RegionKey, RegionKey, *const u8) = match case {
                Case::SameBufferOther | Case::SameBufferTarget => {
                    // SAFETY: `extra` outlives both registrations and the device.
                    let a = unsafe { r.dev.register(extra.ptr, LEN) }.unwrap();
                    // SAFETY: as above.
                    let b = unsafe { r.dev.register(extra.ptr, LEN) }.unwrap();
                    assert_ne!(a, b);
                    (a, b, extra.ptr)
                }
                Case::InsideHeapOther => {
                    // The frame starts at heap offset 0, inside the inner region.
                    // SAFETY: the heap outlives the device.
                    let inner = unsafe { r.dev.register(r.heap.ptr, LEN / 2) }.unwrap();
                    (inner, r.dev.heap_key(1), r.heap.ptr)
                }
            };
            r.kvs.put("target-key", &target.0.to_string()).unwrap();
            r.barrier(); // (1)
            let mut buf = Vec::new();
            // SAFETY (reads of `mem`): in bounds, and the device writes only during its calls.
            let byte = |i: usize| unsafe { *mem.add(i) };
            while byte(0) == 0 {
                r.dev.wait(std::time::Duration::from_millis(50)).unwrap();
                r.dev.poll(&mut buf).unwrap();
            }
            assert!(
                buf.is_empty(),
                "the write arrived whole in one poll: {buf:?}"
            );
            assert_eq!(byte(LEN - 1), 0, "mid-frame");
            match case {
                Case::SameBufferOther | Case::InsideHeapOther => {
                    r.dev.deregister(first).unwrap();
                    assert_eq!(
                        r.next_event(),
                        Event::Recv {
                            peer: 0,
                            imm: 1,
                            len: LEN
                        }
                    );
                    // SAFETY: LEN bytes at `mem`; no device call runs meanwhile.
                    let got = unsafe { std::slice::from_raw_parts(mem, LEN) };
                    assert!(got == sent.as_slice(), "data landed whole");
                    if case == Case::SameBufferOther {
                        r.dev.deregister(target).unwrap();
                    }
                    r.dev.finalize().unwrap();
                }
                Case::SameBufferTarget => {
                    r.dev.deregister(target).unwrap();
                    extra.set(0, &vec![0x55; LEN]);
                    let e = r.next_error();
                    assert!(matches!(e, DeviceError::Protocol { peer: 0, .. }), "{e}");
                    assert!(
                        extra.get(0, LEN).iter().all(|&b| b == 0x55),
                        "written after deregister"
                    );
                    // The other registration is still there.
                    r.dev.deregister(first).unwrap();
                }
            }
        }
    });
}

#[test]
fn deregister_overlapping_region_while_write_arrives() {
    mid_frame(Case::SameBufferOther);
}

#[test]
fn deregister_region_inside_heap_while_heap_write_arrives() {
    mid_frame(Case::InsideHeapOther);
}

#[test]
fn deregister_target_with_overlapping_region_still_stops_write() {
    mid_frame(Case::SameBufferTarget);
}

/// The osu_bw pattern at device level: the receiver registers one region per write, all
/// over the same buffer, and deregisters each as soon as its write is notified, while the
/// later writes are arriving. Write `i` goes to offset `i * CHUNK` of region `i` so that
/// every write's data can be checked at the end.
#[test]
fn window_of_writes_into_one_buffer() {
    const N: usize = 64;
    const CHUNK: usize = 256 << 10;
    const TOTAL: usize = N * CHUNK;
    run_job(2, TOTAL, |mut r| {
        if r.rank() == 0 {
            for i in 0..N {
                r.heap.set(i * CHUNK, &pattern(100 + i as u64, CHUNK));
            }
            r.barrier(); // (1) keys published
            let keys: Vec<u32> = r
                .kvs
                .get("window-keys")
                .unwrap()
                .split(',')
                .map(|k| k.parse().unwrap())
                .collect();
            for (i, &k) in keys.iter().enumerate() {
                r.dev
                    .write(&Write {
                        peer: 1,
                        local_key: RegionKey(0),
                        local_offset: i * CHUNK,
                        remote_key: RegionKey(k),
                        remote_offset: i * CHUNK,
                        len: CHUNK,
                        imm: Some(i as u32),
                        sid: Some(i as u64),
                    })
                    .unwrap();
            }
            for i in 0..N {
                assert_eq!(r.next_event(), Event::Sent { sid: i as u64 });
            }
            r.dev.finalize().unwrap();
        } else {
            let buf = Mem::new(TOTAL);
            let keys: Vec<RegionKey> = (0..N)
                // SAFETY: `buf` outlives every registration and the device.
                .map(|_| unsafe { r.dev.register(buf.ptr, TOTAL) }.unwrap())
                .collect();
            let list: Vec<String> = keys.iter().map(|k| k.0.to_string()).collect();
            r.kvs.put("window-keys", &list.join(",")).unwrap();
            r.barrier(); // (1)
            for (i, &k) in keys.iter().enumerate() {
                assert_eq!(
                    r.next_event(),
                    Event::Recv {
                        peer: 0,
                        imm: i as u32,
                        len: CHUNK
                    }
                );
                r.dev.deregister(k).unwrap();
            }
            for i in 0..N {
                assert!(
                    buf.get(i * CHUNK, CHUNK) == pattern(100 + i as u64, CHUNK).as_slice(),
                    "write {i}"
                );
            }
            r.dev.finalize().unwrap();
        }
    });
}
