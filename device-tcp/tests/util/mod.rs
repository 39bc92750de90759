//! device-tcp under the conformance suite (`rdma_api::conformance`): how a rank's device is
//! opened, and where it reports what legitimately differs between devices.
#![allow(dead_code, unused_imports)]

use device_tcp::TcpDevice;
pub use rdma_api::conformance::{pattern, Mem, Rank};
use rdma_api::conformance::{BadRemote, Transport};
use rdma_api::{Bootstrap, Device};

fn open(
    boot: &mut dyn Bootstrap,
    _job: &str,
    heap_len: usize,
) -> rdma_api::Result<(Box<dyn Device>, Mem)> {
    let heap = Mem::new(heap_len);
    // SAFETY: the heap outlives the device (Rank drops its device first).
    let dev = unsafe { TcpDevice::new(boot, heap.ptr, heap.len) }?;
    Ok((Box::new(dev), heap))
}

/// The TCP device: the receiver validates a write's remote range (a bad one is a protocol
/// error there, and the sender then loses the connection).
pub const TCP: Transport = Transport {
    name: "tcp",
    open,
    bad_remote: BadRemote::AtReceiver,
};

/// Runs `f` on `n` threads, one TCP rank each, over a zeroed `heap_len`-byte heap; returns
/// the results by rank.
pub fn run_job<T: Send, F: Fn(Rank) -> T + Sync>(n: usize, heap_len: usize, f: F) -> Vec<T> {
    rdma_api::conformance::run_job(&TCP, n, heap_len, f)
}
