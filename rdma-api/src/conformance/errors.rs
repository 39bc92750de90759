//! Untrusted keys/offsets and failed peers: errors, never crashes or hangs. Where a bad
//! remote range is reported depends on the device ([`BadRemote`]); everything else is the
//! same for every device.

use super::{pattern, run_job, BadRemote, Mem, Transport};
use crate::{Bootstrap, DeviceError, Event, RegionKey, Write};

/// Rank 0 writes once with a bad remote (key, offset, len) to rank 1. Nothing is written at
/// rank 1, and the error is reported as `t.bad_remote` says: at the receiver as a protocol
/// error naming rank 0 (rank 0 then sees the connection lost, later writes fail, finalize
/// fails), or by `write` itself as InvalidAccess (no event anywhere, both finalize).
pub fn bad_remote_write(t: &Transport, key: RegionKey, offset: usize, len: usize) {
    let mode = t.bad_remote;
    let res = run_job(t, 2, 4096, move |mut r| {
        let w = Write {
            peer: 1,
            local_key: r.dev.heap_key(r.rank()),
            local_offset: 0,
            remote_key: key,
            remote_offset: offset,
            len,
            imm: Some(1),
            sid: Some(1),
        };
        match (r.rank(), mode) {
            (0, BadRemote::AtReceiver) => {
                r.dev.write(&w).unwrap();
                let e = r.next_error();
                assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
                // Writes to the lost peer fail; finalize reports it instead of hanging.
                let e = r.dev.write(&Write {
                    remote_key: r.dev.heap_key(1),
                    remote_offset: 0,
                    len: 1,
                    imm: None,
                    sid: Some(2),
                    ..w
                });
                assert!(matches!(e, Err(DeviceError::PeerLost { peer: 1, .. })));
                assert!(r.dev.finalize().is_err());
                String::new()
            }
            (_, BadRemote::AtReceiver) => {
                let e = r.next_error();
                assert!(matches!(e, DeviceError::Protocol { peer: 0, .. }), "{e}");
                // Nothing was written anywhere.
                assert!(r.heap.get(0, 4096).iter().all(|&b| b == 0));
                e.to_string()
            }
            (0, BadRemote::AtSender) => {
                let e = r.dev.write(&w);
                assert!(matches!(e, Err(DeviceError::InvalidAccess(_))), "{e:?}");
                r.assert_no_event();
                r.barrier();
                r.dev.finalize().unwrap();
                String::new()
            }
            (_, BadRemote::AtSender) => {
                r.barrier();
                r.assert_no_event();
                assert!(r.heap.get(0, 4096).iter().all(|&b| b == 0));
                r.dev.finalize().unwrap();
                String::new()
            }
        }
    });
    if mode == BadRemote::AtReceiver {
        eprintln!("receiver said: {}", res[1]);
    }
}

/// A write to a key no region has.
pub fn unregistered_remote_key(t: &Transport) {
    bad_remote_write(t, RegionKey(77), 0, 16);
}

/// A write that ends past the end of the peer's heap.
pub fn out_of_range_remote_offset(t: &Transport) {
    bad_remote_write(t, RegionKey(0), 4096 - 8, 16);
}

/// A write whose offset + length overflows.
pub fn overflowing_remote_offset(t: &Transport) {
    bad_remote_write(t, RegionKey(0), usize::MAX - 1, 16);
}

/// Even a zero-length write must name a registered region.
pub fn zero_length_write_to_unregistered_key(t: &Transport) {
    bad_remote_write(t, RegionKey(3), 0, 0);
}

/// A second region: register, publish the key, receive into it, deregister (a second
/// deregister fails; a new registration never gets the stale key); a write to the stale
/// key is then rejected as `t.bad_remote` says and changes nothing.
pub fn register_deregister_second_region(t: &Transport) {
    let mode = t.bad_remote;
    run_job(t, 2, 8192, move |mut r| {
        if r.rank() == 1 {
            let extra = Mem::new(4096);
            // SAFETY: `extra` lives until after the deregistrations below.
            let key = unsafe { r.register(&extra) };
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
            // SAFETY: as above.
            let again = unsafe { r.register(&extra) };
            assert_ne!(again, key);
            r.barrier(); // (2) deregistered
            match mode {
                BadRemote::AtReceiver => {
                    let e = r.next_error();
                    assert!(matches!(e, DeviceError::Protocol { peer: 0, .. }), "{e}");
                }
                BadRemote::AtSender => r.barrier(), // (3) rank 0 tried the stale key
            }
            assert!(
                extra.get(0, 4096) == pattern(3, 4096).as_slice(),
                "untouched"
            );
            if mode == BadRemote::AtSender {
                r.assert_no_event();
            }
            r.dev.deregister(again).unwrap();
        } else {
            r.heap.set(0, &pattern(3, 4096));
            r.heap.set(4096, &pattern(4, 4096));
            r.barrier(); // (1)
            let key: u32 = r.kvs.get("extra-key").unwrap().parse().unwrap();
            let mut w = Write {
                peer: 1,
                local_key: r.dev.heap_key(0),
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
            match mode {
                BadRemote::AtReceiver => {
                    r.dev.write(&w).unwrap();
                    let e = r.next_error();
                    assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
                }
                BadRemote::AtSender => {
                    let e = r.dev.write(&w);
                    assert!(matches!(e, Err(DeviceError::InvalidAccess(_))), "{e:?}");
                    r.barrier(); // (3)
                }
            }
        }
        if mode == BadRemote::AtSender {
            r.dev.finalize().unwrap();
        }
    });
}

/// A rank that drops its device without finalize: its peers get PeerLost from poll, still
/// work with each other, and finalize reports the loss.
pub fn dropped_peer_gives_peer_lost(t: &Transport) {
    run_job(t, 3, 4096, |mut r| {
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
pub fn peer_dropped_with_queued_writes(t: &Transport) {
    const LEN: usize = 16 << 20;
    run_job(t, 2, 2 * LEN, |mut r| {
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
pub fn peer_dropped_during_finalize(t: &Transport) {
    run_job(t, 2, 1 << 20, |mut r| {
        if r.rank() == 0 {
            r.put(1, 0, 0, 1 << 20, Some(0), Some(0));
            let e = r.dev.finalize().unwrap_err();
            assert!(matches!(e, DeviceError::PeerLost { peer: 1, .. }), "{e}");
        } else {
            drop(r.dev);
        }
    });
}
