//! Untrusted frames and failed peers: errors, never crashes or hangs.

mod util;

use rdma_api::{Bootstrap, Device, DeviceError, Event, RegionKey, Write};
use util::{pattern, run_job, Mem};

/// Rank 0 sends one write with a bad remote (key, offset, len); rank 1 must report a
/// protocol error naming rank 0, and rank 0 then sees the connection lost.
fn bad_remote_write(key: RegionKey, offset: usize, len: usize) {
    let res = run_job(2, 4096, move |mut r| {
        if r.rank() == 0 {
            r.dev
                .write(&Write {
                    peer: 1,
                    local_key: RegionKey(0),
                    local_offset: 0,
                    remote_key: key,
                    remote_offset: offset,
                    len,
                    imm: Some(1),
                    sid: Some(1),
                })
                .unwrap();
            let e = r.next_error();
            assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
            // Writes to the lost peer fail; finalize reports it instead of hanging.
            let e = r.dev.write(&Write {
                peer: 1,
                local_key: RegionKey(0),
                local_offset: 0,
                remote_key: RegionKey(0),
                remote_offset: 0,
                len: 1,
                imm: None,
                sid: Some(2),
            });
            assert!(matches!(e, Err(DeviceError::PeerLost { peer: 1, .. })));
            assert!(r.dev.finalize().is_err());
            String::new()
        } else {
            let e = r.next_error();
            assert!(matches!(e, DeviceError::Protocol { peer: 0, .. }), "{e}");
            // Nothing was written anywhere.
            assert!(r.heap.get(0, 4096).iter().all(|&b| b == 0));
            e.to_string()
        }
    });
    eprintln!("receiver said: {}", res[1]);
}

#[test]
fn unregistered_remote_key() {
    bad_remote_write(RegionKey(77), 0, 16);
}

#[test]
fn out_of_range_remote_offset() {
    bad_remote_write(RegionKey(0), 4096 - 8, 16);
}

#[test]
fn overflowing_remote_offset() {
    bad_remote_write(RegionKey(0), usize::MAX - 1, 16);
}

#[test]
fn zero_length_write_to_unregistered_key() {
    bad_remote_write(RegionKey(3), 0, 0);
}

/// A second region: register, publish the key, receive into it, deregister; a write to the
/// stale key is then rejected at the receiver.
#[test]
fn register_deregister_second_region() {
    run_job(2, 8192, |mut r| {
        if r.rank() == 1 {
            let extra = Mem::new(4096);
            // SAFETY: `extra` lives until after deregister below.
            let key = unsafe { r.dev.register(extra.ptr, extra.len) }.unwrap();
            assert_ne!(key, r.dev.heap_key(1));
            r.kvs.put("extra-key", &key.0.to_string()).unwrap();
            r.barrier(); // (1) key published
            assert_eq!(
                r.next_event(),
                Event::Recv {
                    peer: 0,
                    imm: 11,
                    len: 4096
                }
            );
            assert_eq!(extra.get(0, 4096), pattern(3, 4096).as_slice());
            r.dev.deregister(key).unwrap();
            assert!(r.dev.deregister(key).is_err());
            // A new registration never gets the stale key.
            let again = unsafe { r.dev.register(extra.ptr, extra.len) }.unwrap();
            assert_ne!(again, key);
            r.barrier(); // (2) deregistered
            let e = r.next_error();
            assert!(matches!(e, DeviceError::Protocol { peer: 0, .. }), "{e}");
            assert!(
                extra.get(0, 4096) == pattern(3, 4096).as_slice(),
                "untouched"
            );
        } else {
            r.heap.set(0, &pattern(3, 4096));
            r.heap.set(4096, &pattern(4, 4096));
            r.barrier(); // (1)
            let key: u32 = r.kvs.get("extra-key").unwrap().parse().unwrap();
            let mut w = Write {
                peer: 1,
                local_key: RegionKey(0),
                local_offset: 0,
                remote_key: RegionKey(key),
                remote_offset: 0,
                len: 4096,
                imm: Some(11),
                sid: Some(1),
            };
            r.dev.write(&w).unwrap();
            assert_eq!(r.next_event(), Event::Sent { sid: 1 });
            r.barrier(); // (2)
            w.local_offset = 4096;
            w.sid = None;
            r.dev.write(&w).unwrap();
            let e = r.next_error();
            assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
        }
    });
}

/// A rank that drops its device without finalize: its peers get PeerLost from poll.
#[test]
fn dropped_peer_gives_peer_lost() {
    run_job(3, 4096, |mut r| {
        r.barrier();
        if r.rank() == 2 {
            drop(r.dev);
            r.kvs.barrier().unwrap();
            return;
        }
        let e = r.next_error();
        assert!(matches!(e, DeviceError::PeerLost { peer: 2, .. }), "{e}");
        r.kvs.barrier().unwrap();
        // The others still work with each other and can finalize (reporting the loss).
        let other = 1 - r.rank();
        r.heap.set(0, &[r.rank() as u8 + 1; 100]);
        r.put(other, 0, 1000, 100, Some(1), None);
        // Inline write (no sid): the only event is the peer's write arriving.
        let e = r.next_event();
        assert!(
            matches!(e, Event::Recv { peer, .. } if peer == other),
            "{e:?}"
        );
        assert_eq!(r.heap.get(1000, 100), &[other as u8 + 1; 100][..]);
        let e = r.dev.finalize().unwrap_err();
        assert!(matches!(e, DeviceError::PeerLost { peer: 2, .. }), "{e}");
    });
}

/// A peer that goes away while large writes to it are still queued (it never reads them):
/// the sender gets PeerLost, not a hang.
#[test]
fn peer_dropped_with_queued_writes() {
    const LEN: usize = 16 << 20;
    run_job(2, 2 * LEN, |mut r| {
        if r.rank() == 0 {
            for i in 0..2 {
                r.put(1, 0, i * LEN, LEN, Some(i as u32), Some(i as u64));
            }
            r.barrier(); // rank 1 drops its device after this
            let e = r.next_error();
            assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
        } else {
            r.barrier();
            drop(r.dev);
        }
    });
}

/// A peer that goes away while the other rank is in finalize: finalize returns PeerLost.
#[test]
fn peer_dropped_during_finalize() {
    run_job(2, 1 << 20, |mut r| {
        if r.rank() == 0 {
            r.put(1, 0, 0, 1 << 20, Some(0), Some(0));
            let e = r.dev.finalize().unwrap_err();
            assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
        } else {
            drop(r.dev);
        }
    });
}

/// Deregistering a region while a write into it is arriving: the device stops writing into
/// it at once (the rest is drained) and reports a protocol error; no byte lands afterwards.
///
/// Deterministic: a receive pass ends at the first short read, so one poll takes at most
/// one socket receive buffer (`tcp_rmem` max, a few MiB by default), far below `LEN`. The
/// first poll that moves any byte therefore leaves the write unfinished.
#[test]
fn deregister_while_write_arrives() {
    const LEN: usize = 64 << 20;
    run_job(2, LEN, |mut r| {
        if r.rank() == 0 {
            r.heap.set(0, &vec![0xAA; LEN]);
            r.barrier(); // (1) key published
            let key: u32 = r.kvs.get("extra-key").unwrap().parse().unwrap();
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
            let e = r.next_error();
            assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
        } else {
            let mut extra = Mem::new(LEN);
            // SAFETY: `extra` outlives the registration and the device.
            let key = unsafe { r.dev.register(extra.ptr, extra.len) }.unwrap();
            r.kvs.put("extra-key", &key.0.to_string()).unwrap();
            r.barrier(); // (1)
            let mut buf = Vec::new();
            while extra.get(0, 1)[0] == 0 {
                r.dev.wait(std::time::Duration::from_millis(50)).unwrap();
                r.dev.poll(&mut buf).unwrap();
            }
            assert!(
                buf.is_empty(),
                "the write arrived whole in one poll: {buf:?}"
            );
            assert_eq!(extra.get(LEN - 1, 1)[0], 0, "mid-frame");
            r.dev.deregister(key).unwrap();
            // Mark the memory: nothing may change it from now on.
            extra.set(0, &vec![0x55; LEN]);
            let e = r.next_error();
            assert!(matches!(e, DeviceError::Protocol { peer: 0, .. }), "{e}");
            assert!(
                extra.get(0, LEN).iter().all(|&b| b == 0x55),
                "written after deregister"
            );
        }
    });
}
