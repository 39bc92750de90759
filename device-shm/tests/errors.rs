//! Untrusted keys/offsets and failed peers: errors, never crashes or hangs. The cases shared
//! with every device are `rdma_api::conformance::errors`; unlike TCP, a shared-memory write
//! is validated by the sender against the peer's heap mapping or region table, so a bad
//! remote range is an error of `write` itself and nothing moves. The bounds of a registered
//! (non-heap) region are checked here.

mod util;

use rdma_api::conformance::errors;
use rdma_api::{Bootstrap, DeviceError, Event, RegionKey, Write};
use util::{pattern, run_job, Mem};

#[test]
fn unregistered_remote_key() {
    errors::unregistered_remote_key(&util::SHM);
}

#[test]
fn out_of_range_remote_offset() {
    errors::out_of_range_remote_offset(&util::SHM);
}

#[test]
fn overflowing_remote_offset() {
    errors::overflowing_remote_offset(&util::SHM);
}

#[test]
fn zero_length_write_to_unregistered_key() {
    errors::zero_length_write_to_unregistered_key(&util::SHM);
}

#[test]
fn register_deregister_second_region() {
    errors::register_deregister_second_region(&util::SHM);
}

#[test]
fn dropped_peer_gives_peer_lost() {
    errors::dropped_peer_gives_peer_lost(&util::SHM);
}

#[test]
fn peer_dropped_with_queued_writes() {
    errors::peer_dropped_with_queued_writes(&util::SHM);
}

#[test]
fn peer_dropped_during_finalize() {
    errors::peer_dropped_during_finalize(&util::SHM);
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
