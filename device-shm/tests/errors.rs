//! Untrusted keys/offsets and failed peers: errors, never crashes or hangs. Unlike TCP, a
//! shared-memory write is validated by the sender against the peer's heap mapping or
//! region table, so a bad remote range is an error of `write` itself and nothing moves.

mod util;

use rdma_api::{Bootstrap, Device, DeviceError, Event, RegionKey, Write};
use util::{pattern, run_job, Mem};

/// Rank 0 tries one write with a bad remote (key, offset, len): `write` fails with
/// InvalidAccess, no event is raised, nothing is written at rank 1, and both finalize.
fn bad_remote_write(key: RegionKey, offset: usize, len: usize) {
    run_job(2, 4096, move |mut r| {
        if r.rank() == 0 {
            let e = r.dev.write(&Write {
                peer: 1,
                local_key: RegionKey(0),
                local_offset: 0,
                remote_key: key,
                remote_offset: offset,
                len,
                imm: Some(1),
                sid: Some(1),
            });
            assert!(matches!(e, Err(DeviceError::InvalidAccess(_))), "{e:?}");
            let mut ev = Vec::new();
            assert_eq!(r.dev.poll(&mut ev).unwrap(), 0);
            r.barrier();
        } else {
            r.barrier();
            let mut ev = Vec::new();
            assert_eq!(r.dev.poll(&mut ev).unwrap(), 0);
            assert!(r.heap.get(0, 4096).iter().all(|&b| b == 0));
        }
        r.dev.finalize().unwrap();
    });
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
            r.barrier(); // (3) rank 0 tried the stale key
            assert!(
                extra.get(0, 4096) == pattern(3, 4096).as_slice(),
                "untouched"
            );
            let mut ev = Vec::new();
            assert_eq!(r.dev.poll(&mut ev).unwrap(), 0);
            r.dev.deregister(again).unwrap();
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
            let e = r.dev.write(&w);
            assert!(matches!(e, Err(DeviceError::InvalidAccess(_))), "{e:?}");
            r.barrier(); // (3)
        }
        r.dev.finalize().unwrap();
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

/// A region table entry read by the sender is checked: a key registered at the peer but
/// with an offset past its end is rejected, one inside it goes through (CMA).
#[test]
fn registered_region_bounds() {
    run_job(2, 4096, |mut r| {
        if r.rank() == 1 {
            let extra = Mem::new(100);
            // SAFETY: `extra` outlives the registration.
            let key = unsafe { r.dev.register(extra.ptr, extra.len) }.unwrap();
            r.kvs.put("k", &key.0.to_string()).unwrap();
            r.barrier();
            r.barrier();
            assert_eq!(
                r.next_event(),
                Event::Recv {
                    peer: 0,
                    imm: 2,
                    len: 100
                }
            );
            assert_eq!(extra.get(0, 100), pattern(5, 100).as_slice());
            r.dev.deregister(key).unwrap();
        } else {
            r.heap.set(0, &pattern(5, 100));
            r.barrier();
            let key = RegionKey(r.kvs.get("k").unwrap().parse().unwrap());
            let mut w = Write {
                peer: 1,
                local_key: RegionKey(0),
                local_offset: 0,
                remote_key: key,
                remote_offset: 1,
                len: 100,
                imm: Some(1),
                sid: None,
            };
            assert!(matches!(
                r.dev.write(&w),
                Err(DeviceError::InvalidAccess(_))
            ));
            w.remote_offset = usize::MAX;
            assert!(matches!(
                r.dev.write(&w),
                Err(DeviceError::InvalidAccess(_))
            ));
            w.remote_offset = 0;
            w.imm = Some(2);
            r.dev.write(&w).unwrap();
            r.barrier();
        }
        r.dev.finalize().unwrap();
    });
}
