//! Shared helpers of the device-shm tests (the device-tcp conformance suite re-instantiated):
//! a job of threads, one [`ShmDevice`] per rank over its own shared-memory segment (whose
//! heap is the rank's heap), and event helpers with a hang guard.
#![allow(dead_code)]

use device_shm::{Segment, ShmDevice};
use rdma_api::thread_kvs::ThreadKvs;
use rdma_api::{Bootstrap, Device, DeviceError, Event, RegionKey, Write};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Upper bound for anything a test waits for; only reached if the device hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// Zeroed memory addressed only through its raw pointer (so the device's pointer into it
/// stays valid while the test reads or fills it between device calls).
pub struct Mem {
    pub ptr: *mut u8,
    pub len: usize,
    /// The segment whose heap this is (None: allocated here).
    seg: Option<Arc<Segment>>,
}

unsafe impl Send for Mem {}

impl Mem {
    pub fn new(len: usize) -> Mem {
        let layout = Layout::from_size_align(len.max(1), 64).unwrap();
        // SAFETY: nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Mem {
            ptr,
            len,
            seg: None,
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
        if self.seg.is_some() {
            return;
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
    pub dev: ShmDevice,
    pub kvs: ThreadKvs,
    pub heap: Mem,
    pub pending: VecDeque<Event>,
}

impl Rank {
    pub fn rank(&self) -> usize {
        self.dev.rank()
    }

    /// Writes heap[src_off..+len] to `peer`'s heap at `dst_off`.
    pub fn put(
        &mut self,
        peer: usize,
        src_off: usize,
        dst_off: usize,
        len: usize,
        imm: Option<u32>,
        sid: Option<u64>,
    ) {
        self.dev
            .write(&Write {
                peer,
                local_key: RegionKey(0),
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

    /// The next event, always blocking in `wait` for an hour between polls (so only a
    /// futex wake-up lets the test go on).
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

    /// Collective: barrier of the bootstrap store (no device progress meanwhile, so only
    /// call it when no write is queued: after the Sent events of all writes with sid).
    pub fn barrier(&mut self) {
        self.kvs.barrier().unwrap();
    }
}

/// Runs `f` on `n` threads, one rank each, with a `heap_len`-byte zeroed heap; returns the
/// results by rank. A panic in any rank fails the test.
pub fn run_job<T, F>(n: usize, heap_len: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Rank) -> T + Send + Sync + 'static,
{
    let f = std::sync::Arc::new(f);
    static JOBS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let job = format!(
        "t{}-{}",
        std::process::id(),
        JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let handles: Vec<_> = ThreadKvs::job(n)
        .into_iter()
        .map(|mut kvs| {
            let f = f.clone();
            let job = job.clone();
            std::thread::spawn(move || {
                let seg = Arc::new(
                    Segment::create(&job, kvs.rank(), n, heap_len).expect("Segment::create"),
                );
                let (ptr, _) = seg.heap();
                let heap = Mem {
                    ptr,
                    len: heap_len,
                    seg: Some(seg.clone()),
                };
                let dev =
                    ShmDevice::new(&mut kvs, seg, &job, &vec![true; n]).expect("ShmDevice::new");
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
}
