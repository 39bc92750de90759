//! device-shm under the conformance suite (`rdma_api::conformance`): how a rank's device is
//! opened (over its own shared-memory segment, whose heap is the rank's heap), and where it
//! reports what legitimately differs between devices.
#![allow(dead_code, unused_imports)]

use device_shm::{Segment, ShmDevice};
pub use rdma_api::conformance::{pattern, Mem, Rank};
use rdma_api::conformance::{BadRemote, Transport};
use rdma_api::{Bootstrap, Device};
use std::sync::Arc;

fn open(
    boot: &mut dyn Bootstrap,
    job: &str,
    heap_len: usize,
) -> rdma_api::Result<(Box<dyn Device>, Mem)> {
    let n = boot.size();
    let seg = Arc::new(Segment::create(job, boot.rank(), n, heap_len)?);
    let (ptr, _) = seg.heap();
    // SAFETY: the segment's heap (at least heap_len bytes) lives as long as the segment.
    let heap = unsafe { Mem::owned_by(ptr, heap_len, Box::new(seg.clone())) };
    let dev = ShmDevice::new(boot, seg, job, &vec![true; n])?;
    Ok((Box::new(dev), heap))
}

/// The shared-memory device: the sender validates a write's remote range against the
/// peer's mapping (a bad one fails `write` with InvalidAccess; nothing moves).
pub const SHM: Transport = Transport {
    name: "shm",
    open,
    bad_remote: BadRemote::AtSender,
};

/// Runs `f` on `n` threads, one shm rank each, over a zeroed `heap_len`-byte heap; returns
/// the results by rank.
pub fn run_job<T: Send, F: Fn(Rank) -> T + Sync>(n: usize, heap_len: usize, f: F) -> Vec<T> {
    rdma_api::conformance::run_job(&SHM, n, heap_len, f)
}
