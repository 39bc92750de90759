//! Untrusted frames and failed peers: errors, never crashes or hangs. The cases shared with
//! every device are `rdma_api::conformance::errors` (device-tcp reports a bad remote range
//! at the receiver); deregistering a region while a write into it arrives is TCP's own.

mod util;

use rdma_api::conformance::errors;
use rdma_api::{Bootstrap, DeviceError, RegionKey, Write};
use util::{run_job, Mem};

#[test]
fn unregistered_remote_key() {
    errors::unregistered_remote_key(&util::TCP);
}

#[test]
fn out_of_range_remote_offset() {
    errors::out_of_range_remote_offset(&util::TCP);
}

#[test]
fn overflowing_remote_offset() {
    errors::overflowing_remote_offset(&util::TCP);
}

#[test]
fn zero_length_write_to_unregistered_key() {
    errors::zero_length_write_to_unregistered_key(&util::TCP);
}

#[test]
fn register_deregister_second_region() {
    errors::register_deregister_second_region(&util::TCP);
}

#[test]
fn dropped_peer_gives_peer_lost() {
    errors::dropped_peer_gives_peer_lost(&util::TCP);
}

#[test]
fn peer_dropped_with_queued_writes() {
    errors::peer_dropped_with_queued_writes(&util::TCP);
}

#[test]
fn peer_dropped_during_finalize() {
    errors::peer_dropped_during_finalize(&util::TCP);
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
