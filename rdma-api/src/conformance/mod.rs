//! The device conformance suite: written once, run against every device (as UCX runs one
//! test suite over every transport).
//!
//! Each case is a plain function taking a [`Transport`] (how to open a device of one rank and
//! where that device legitimately reports what the trait leaves open); each device crate
//! instantiates the cases with one `#[test]` per case in its `tests/` files and keeps its
//! device-specific tests beside them.
//!
//! ## Why a feature of rdma-api and not a crate
//! The suite needs nothing but the trait and [`crate::thread_kvs`], which already live here,
//! so it sits next to the contract it checks (as mio's backends share one contract file). It
//! is behind the cargo feature `conformance`, off by default, so no test code reaches a
//! normal build; the device crates enable it in their `[dev-dependencies]` only:
//! `rdma-api = { workspace = true, features = ["conformance"] }`. A separate crate would add
//! a workspace member and a second copy of the dependency edge for the same effect.
//!
//! ## Layout
//! * this module: the job runner (one thread per rank over a
//!   [`ThreadKvs`](crate::thread_kvs::ThreadKvs) store), [`Mem`] heaps, [`Rank`] with event
//!   helpers and a hang guard, test [`pattern`]s;
//! * [`transfer`]: data movement, events, self writes, per-peer ordering;
//! * [`errors`]: untrusted keys/offsets and failed peers;
//! * [`finalize`]: orderly shutdown;
//! * [`perf`]: measurements (instantiated as `#[ignore]` tests).

use crate::thread_kvs::ThreadKvs;
use crate::{Bootstrap, Device, DeviceError, Event, RegionKey, Result, Write};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub mod errors;
pub mod finalize;
pub mod perf;
pub mod transfer;

/// Upper bound for anything a test waits for; only reached if the device hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// Where a device reports a write whose remote (key, offset, len) is not inside a region
/// registered at the peer. The trait allows both (see [`Device::deregister`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRemote {
    /// The receiver validates the range when the write arrives (device-tcp): the sender's
    /// `write` succeeds, the receiver's `poll` fails with [`DeviceError::Protocol`] naming
    /// the sender, and the sender then sees [`DeviceError::PeerLost`] (the connection is
    /// closed); later writes to that peer fail with `PeerLost` and `finalize` fails.
    AtReceiver,
    /// The sender validates against the peer's mapping or region table (device-shm): `write`
    /// fails with [`DeviceError::InvalidAccess`], no event is raised on either side, nothing
    /// moves, and both ranks go on and finalize cleanly.
    AtSender,
}

/// Opens the device of one rank: `(boot, job, heap_len)` → the device and its zeroed heap
/// of at least `heap_len` bytes (registered as the device's heap). `job` is unique per job
/// of [`run_job`] in this process (for devices that name shared resources). The heap must
/// stay valid until the device is dropped ([`Rank`] drops the device first).
pub type Open =
    fn(boot: &mut dyn Bootstrap, job: &str, heap_len: usize) -> Result<(Box<dyn Device>, Mem)>;

/// A device under test: how to open it and where it legitimately differs from others.
#[derive(Clone, Copy)]
pub struct Transport {
    /// Name in messages ("tcp", "shm").
    pub name: &'static str,
    /// Opens one rank's device.
    pub open: Open,
    /// Where a bad remote range is reported.
    pub bad_remote: BadRemote,
}

/// Zeroed memory addressed only through its raw pointer (so the device's pointer into it
/// stays valid while the test reads or fills it between device calls).
pub struct Mem {
    /// Start of the memory.
    pub ptr: *mut u8,
    /// Length in bytes.
    pub len: usize,
    /// Owner of memory not allocated by [`Mem::new`] (e.g. a shared-memory segment); `None`
    /// for memory allocated (and freed) here.
    owner: Option<Box<dyn Send>>,
}

// SAFETY: the memory is owned by this value (or by `owner`, which is Send) and only
// accessed through it or a device of the same rank.
unsafe impl Send for Mem {}

impl Mem {
    /// `len` zeroed bytes, 64-byte aligned.
    pub fn new(len: usize) -> Mem {
        let layout = Layout::from_size_align(len.max(1), 64).unwrap();
        // SAFETY: nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Mem {
            ptr,
            len,
            owner: None,
        }
    }

    /// `len` bytes at `ptr` kept alive by `owner` (dropped with this value).
    ///
    /// # Safety
    /// `ptr .. ptr + len` must be valid for reads and writes while `owner` lives.
    pub unsafe fn owned_by(ptr: *mut u8, len: usize, owner: Box<dyn Send>) -> Mem {
        Mem {
            ptr,
            len,
            owner: Some(owner),
        }
    }

    /// Reads `len` bytes at `off` (no device call may run meanwhile).
    pub fn get(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len);
        // SAFETY: in bounds; the device writes only during its own calls.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    /// Writes `data` at `off`.
    pub fn set(&mut self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: in bounds.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        if self.owner.is_some() {
            return; // the owner frees it
        }
        // SAFETY: allocated in new with this layout.
        unsafe {
            dealloc(
                self.ptr,
                Layout::from_size_align(self.len.max(1), 64).unwrap(),
            )
        }
    }
}

/// Deterministic test bytes: `len` bytes of pattern `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// One rank of a test job. Field order = drop order: the device goes before its heap.
pub struct Rank {
    /// The device under test.
    pub dev: Box<dyn Device>,
    /// This rank's handle to the job's bootstrap store.
    pub kvs: ThreadKvs,
    /// The device's heap (`RegionKey` [`Device::heap_key`]).
    pub heap: Mem,
    /// Events polled but not yet consumed by [`Rank::next_event`].
    pub pending: VecDeque<Event>,
}

impl Rank {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.dev.rank()
    }

    /// Writes heap[src_off..+len] to `peer`'s heap at `dst_off`; panics on error.
    pub fn put(
        &mut self,
        peer: usize,
        src_off: usize,
        dst_off: usize,
        len: usize,
        imm: Option<u32>,
        sid: Option<u64>,
    ) {
        let local_key = self.dev.heap_key(self.rank());
        self.dev
            .write(&Write {
                peer,
                local_key,
                local_offset: src_off,
                remote_key: self.dev.heap_key(peer),
                remote_offset: dst_off,
                len,
                imm,
                sid,
            })
            .unwrap_or_else(|e| panic!("rank {}: write: {e}", self.rank()));
    }

    /// The next event (polling, then blocking in wait); panics on error or hang.
    pub fn next_event(&mut self) -> Event {
        let deadline = Instant::now() + HANG_GUARD;
        let mut buf = Vec::new();
        loop {
            if let Some(e) = self.pending.pop_front() {
                return e;
            }
            self.dev
                .poll(&mut buf)
                .unwrap_or_else(|e| panic!("rank {}: poll: {e}", self.rank()));
            self.pending.extend(buf.drain(..));
            if self.pending.is_empty() {
                assert!(Instant::now() < deadline, "rank {}: hang", self.rank());
                self.dev.wait(Duration::from_millis(50)).unwrap();
            }
        }
    }

    /// The next event, always blocking in `wait` for an hour between polls (so only the
    /// device's wake-up lets the test go on).
    pub fn next_event_blocking(&mut self) -> Event {
        let mut buf = Vec::new();
        loop {
            if let Some(e) = self.pending.pop_front() {
                return e;
            }
            self.dev.poll(&mut buf).unwrap();
            self.pending.extend(buf.drain(..));
            if self.pending.is_empty() {
                self.dev.wait(Duration::from_secs(3600)).unwrap();
            }
        }
    }

    /// Busy-polls (no wait) for the next event: the latency-critical mode.
    pub fn spin_event(&mut self, buf: &mut Vec<Event>) -> Event {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return e;
            }
            self.dev.poll(buf).unwrap();
            self.pending.extend(buf.drain(..));
        }
    }

    /// Busy-polls for the next [`Event::Recv`], skipping other events.
    pub fn spin_recv(&mut self, buf: &mut Vec<Event>) {
        while !matches!(self.spin_event(buf), Event::Recv { .. }) {}
    }

    /// Polls until the device reports an error (events are discarded); panics on hang.
    pub fn next_error(&mut self) -> DeviceError {
        let deadline = Instant::now() + HANG_GUARD;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if let Err(e) = self.dev.poll(&mut buf) {
                return e;
            }
            assert!(Instant::now() < deadline, "rank {}: hang", self.rank());
            let _ = self.dev.wait(Duration::from_millis(50));
        }
    }

    /// Asserts that one poll raises no event.
    pub fn assert_no_event(&mut self) {
        let mut ev = Vec::new();
        assert_eq!(self.dev.poll(&mut ev).unwrap(), 0, "unexpected {ev:?}");
    }

    /// Collective: barrier of the bootstrap store (no device progress meanwhile, so only
    /// call it when no write is queued: after the Sent events of all writes with sid).
    pub fn barrier(&mut self) {
        self.kvs.barrier().unwrap();
    }

    /// Registers `mem` at this rank's device.
    ///
    /// # Safety
    /// `mem` must outlive the registration (deregister it, or drop the device first).
    pub unsafe fn register(&mut self, mem: &Mem) -> RegionKey {
        // SAFETY: forwarded to the caller.
        unsafe { self.dev.register(mem.ptr, mem.len) }.unwrap()
    }
}

/// Runs `f` on `n` threads, one rank each, each with a device of `t` over a zeroed heap of
/// `heap_len` bytes; returns the results by rank. A panic in any rank fails the test.
pub fn run_job<T, F>(t: &Transport, n: usize, heap_len: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(Rank) -> T + Sync,
{
    static JOBS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let job = format!(
        "t{}-{}",
        std::process::id(),
        JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let (f, job) = (&f, &job);
    std::thread::scope(|s| {
        let handles: Vec<_> = ThreadKvs::job(n)
            .into_iter()
            .map(|mut kvs| {
                s.spawn(move || {
                    let (dev, heap) = (t.open)(&mut kvs, job, heap_len)
                        .unwrap_or_else(|e| panic!("{}: open rank {}: {e}", t.name, kvs.rank()));
                    assert!(heap.len >= heap_len);
                    f(Rank {
                        dev,
                        kvs,
                        heap,
                        pending: VecDeque::new(),
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank panicked"))
            .collect()
    })
}
