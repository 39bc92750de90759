//! One rank's POSIX shared-memory segment: the control area (header, sleep word, ring
//! indices, notification rings, region table) followed by the rank's heap.
//!
//! ## Layout (byte offsets; every rank computes every rank's layout from the job size `n`)
//! ```text
//! 0                 header line: magic, n, rank, pid, heap offset, heap length, state
//! 64                sleep line: the futex word the owner sleeps on (1 = sleeping)
//! 128               n head lines: head[s] = entries of ring s consumed by the owner,
//!                   then (word 1) chunks[s] = staging chunks of sender s copied out
//! RINGS  = 128+64n  n rings of RING entries × 64 B (one cache line each); ring s is
//!                   written by rank s only
//! TABLE             NREG region entries × 32 B: key, base address, length
//! STAGE  = round_up(.., 4096)  n staging areas of STAGE_LEN bytes; area s is written by
//!                   rank s only (pipelined copies, see lib.rs)
//! HEAP   = STAGE + n·STAGE_LEN  the heap (mpi-core's, see mpi-core/src/heap.rs)
//! ```
//! Every cross-rank word is an atomic; the only plain memory is the heap, whose bytes are
//! opaque to the device. Nothing read from a peer's segment is trusted: indices are checked
//! against the ring size, lengths and addresses against the layout and region table.

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Segment magic ("MPIRSHM1").
pub(crate) const MAGIC: u64 = 0x314D_4853_5249_504D;
/// Entries per notification ring (power of two).
pub(crate) const RING: usize = 256;
/// Region table entries (keys are placed at `key % NREG`).
pub(crate) const NREG: usize = 1024;
/// Bytes of the staging area of one sender in a receiver's segment (pipelined copies).
pub(crate) const STAGE_LEN: usize = 1 << 20;
/// Cache line.
const LINE: usize = 64;

/// `state` word values.
pub(crate) const ST_ALIVE: u32 = 1;
/// Finalized in order.
pub(crate) const ST_DONE: u32 = 2;
/// Dropped without finalize: peers report `PeerLost`.
pub(crate) const ST_DEAD: u32 = 3;

/// The first line of a segment.
#[repr(C, align(64))]
pub(crate) struct Header {
    pub magic: AtomicU64,
    pub n: AtomicU64,
    pub rank: AtomicU64,
    pub pid: AtomicU64,
    pub heap_off: AtomicU64,
    pub heap_len: AtomicU64,
    pub state: AtomicU32,
}

/// One notification, one cache line: `seq` (written last, Release) = ring index + 1
/// (mod 2^32) marks the entry valid; `meta` = len << 3 | flags; `d` holds the arguments
/// of [`F_CHUNK`] entries (d[0] destination offset, d[1] staging offset) or the inline
/// bytes of [`F_INLINE`] entries (native byte order, as copied). One line per entry: a
/// receiver polling entry i+1 never steals the line the sender is filling for entry i, and
/// an inline message costs the receiver one cache-line transfer.
#[repr(C, align(64))]
pub(crate) struct Entry {
    pub seq: AtomicU32,
    pub imm: AtomicU32,
    pub meta: AtomicU64,
    pub d: [AtomicU64; 6],
}

/// Bytes of one ring entry.
pub(crate) const ENTRY: usize = std::mem::size_of::<Entry>();
const _: () = assert!(ENTRY == 64);

/// Mask of the flag bits of `meta`.
pub(crate) const F_MASK: u64 = 7;
/// `meta` = len << F_SHIFT | flag.
pub(crate) const F_SHIFT: u32 = 3;
/// Entry flag: the write carries an immediate (raise `Recv`).
pub(crate) const F_IMM: u64 = 1;
/// Entry flag: the sender finalized (no more entries follow).
pub(crate) const F_BYE: u64 = 2;
/// Entry flag: a chunk of a pipelined write is in the sender's staging area: copy `len`
/// bytes from staging offset `d[1]` to offset `d[0]` of our region `imm` (the region key).
pub(crate) const F_CHUNK: u64 = 3;
/// Entry flag: an inline notification: `len` (≤ 48) bytes in `d` (raise `RecvInline`).
pub(crate) const F_INLINE: u64 = 4;

/// One region table entry (seqlock-like: `key` is read before and after the fields).
#[repr(C)]
pub(crate) struct RegEntry {
    pub key: AtomicU32,
    _pad: u32,
    pub base: AtomicU64,
    pub len: AtomicU64,
    _pad2: u64,
}

/// Offsets of the control structures for a job of `n` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub n: usize,
    pub sleep: usize,
    pub heads: usize,
    pub rings: usize,
    pub table: usize,
    pub stage: usize,
    pub heap: usize,
}

impl Layout {
    pub fn new(n: usize) -> io::Result<Layout> {
        let ovf = || io::Error::new(io::ErrorKind::InvalidInput, "segment layout overflows");
        let heads = 2 * LINE;
        let rings = n
            .checked_mul(LINE)
            .and_then(|x| x.checked_add(heads))
            .ok_or_else(ovf)?;
        let table = n
            .checked_mul(RING * ENTRY)
            .and_then(|x| x.checked_add(rings))
            .ok_or_else(ovf)?;
        let stage = (table + NREG * 32).div_ceil(4096) * 4096;
        let heap = n
            .checked_mul(STAGE_LEN)
            .and_then(|x| x.checked_add(stage))
            .ok_or_else(ovf)?;
        Ok(Layout {
            n,
            sleep: LINE,
            heads,
            rings,
            table,
            stage,
            heap,
        })
    }
}

/// A mapped segment (our own, created; or a peer's, opened). Unmapped on drop; the name is
/// unlinked by [`Segment::unlink`] (the owner does it once every peer has attached).
pub struct Segment {
    base: *mut u8,
    len: usize,
    lay: Layout,
    name: CString,
    owner: bool,
}

// SAFETY: the mapping is plain shared memory; all cross-thread/process access goes through
// atomics or the device's documented protocol; the pointer is valid until drop.
unsafe impl Send for Segment {}
// SAFETY: as above; `&Segment` only hands out atomics and raw pointers.
unsafe impl Sync for Segment {}

/// The segment name of `rank` in job `job`: `/mpirs-<job>-<rank>` (what mpirun removes
/// from /dev/shm after a job: `mpirs-<MPI_JOBID>-*`).
pub fn segment_name(job: &str, rank: usize) -> String {
    format!("/mpirs-{job}-{rank}")
}

fn map(fd: i32, len: usize) -> io::Result<*mut u8> {
    // SAFETY: mapping a fresh range of a descriptor we own; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

impl Segment {
    /// Creates this rank's segment (`O_CREAT|O_EXCL`, mode 0600) for a job of `n` ranks with
    /// a heap of `heap_len` bytes, maps it and writes the header (state ALIVE).
    pub fn create(job: &str, rank: usize, n: usize, heap_len: usize) -> io::Result<Segment> {
        let lay = Layout::new(n)?;
        let len = lay
            .heap
            .checked_add(heap_len.div_ceil(4096) * 4096)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "heap too large"))?;
        let name = CString::new(segment_name(job, rank))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in job id"))?;
        // SAFETY: valid C string; the descriptor is closed below.
        let fd = unsafe {
            libc::shm_open(
                name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let unlink = || {
            // SAFETY: valid C string.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        };
        // SAFETY: fd is ours.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = io::Error::last_os_error();
            crate::sys::close(fd);
            unlink();
            return Err(e);
        }
        let base = map(fd, len);
        crate::sys::close(fd);
        let base = match base {
            Ok(b) => b,
            Err(e) => {
                unlink();
                return Err(e);
            }
        };
        let seg = Segment {
            base,
            len,
            lay,
            name,
            owner: true,
        };
        let h = seg.header();
        h.n.store(n as u64, Ordering::Relaxed);
        h.rank.store(rank as u64, Ordering::Relaxed);
        h.pid.store(std::process::id() as u64, Ordering::Relaxed);
        h.heap_off.store(lay.heap as u64, Ordering::Relaxed);
        h.heap_len.store((len - lay.heap) as u64, Ordering::Relaxed);
        h.state.store(ST_ALIVE, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// Opens and maps the segment of `rank` of job `job` (a job of `n` ranks) and checks its
    /// header; the mapping length is the file's size, never a value read from the peer.
    pub fn open(job: &str, rank: usize, n: usize) -> io::Result<Segment> {
        let lay = Layout::new(n)?;
        let name = CString::new(segment_name(job, rank))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in job id"))?;
        // SAFETY: valid C string.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: zeroed stat is a valid out-parameter; fd is ours.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            let e = io::Error::last_os_error();
            crate::sys::close(fd);
            return Err(e);
        }
        let len = st.st_size as usize;
        if len < lay.heap {
            crate::sys::close(fd);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment of rank {rank} too small ({len} bytes)"),
            ));
        }
        let base = map(fd, len);
        crate::sys::close(fd);
        let seg = Segment {
            base: base?,
            len,
            lay,
            name,
            owner: false,
        };
        let h = seg.header();
        if h.magic.load(Ordering::Acquire) != MAGIC
            || h.n.load(Ordering::Relaxed) != n as u64
            || h.rank.load(Ordering::Relaxed) != rank as u64
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment of rank {rank} has a bad header"),
            ));
        }
        Ok(seg)
    }

    /// Removes the name from /dev/shm (the mapping stays valid). Idempotent.
    pub fn unlink(&self) {
        // SAFETY: valid C string; ENOENT is fine.
        unsafe { libc::shm_unlink(self.name.as_ptr()) };
    }

    /// The heap: (base, length in bytes).
    pub fn heap(&self) -> (*mut u8, usize) {
        (
            self.base.wrapping_add(self.lay.heap),
            self.len - self.lay.heap,
        )
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.lay
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: offset 0 of a mapping of at least `lay.heap` bytes, page aligned; all
        // fields are atomics, valid for any bit pattern.
        unsafe { &*(self.base as *const Header) }
    }

    /// The futex word the owner sleeps on.
    pub(crate) fn sleep(&self) -> &AtomicU32 {
        // SAFETY: inside the control area, 64-byte aligned, an atomic.
        unsafe { &*(self.base.add(self.lay.sleep) as *const AtomicU32) }
    }

    /// head[s]: entries of ring `s` consumed by the owner. `s < n` (checked).
    pub(crate) fn head(&self, s: usize) -> &AtomicU64 {
        assert!(s < self.lay.n);
        // SAFETY: inside the head lines (s < n), aligned, an atomic.
        unsafe { &*(self.base.add(self.lay.heads + s * LINE) as *const AtomicU64) }
    }

    /// chunks[s]: staging chunks of sender `s` copied out by the owner. `s < n` (checked).
    pub(crate) fn chunks(&self, s: usize) -> &AtomicU64 {
        assert!(s < self.lay.n);
        // SAFETY: word 1 of head line `s` (s < n), aligned, an atomic.
        unsafe { &*(self.base.add(self.lay.heads + s * LINE + 8) as *const AtomicU64) }
    }

    /// The staging area of sender `s` (STAGE_LEN bytes, written by `s`). `s < n` (checked).
    pub(crate) fn stage(&self, s: usize) -> *mut u8 {
        assert!(s < self.lay.n);
        self.base.wrapping_add(self.lay.stage + s * STAGE_LEN)
    }

    /// Entry `i % RING` of ring `s` (written by rank `s`). `s < n` (checked).
    #[inline]
    pub(crate) fn entry(&self, s: usize, i: u64) -> &Entry {
        assert!(s < self.lay.n);
        let off = self.lay.rings + (s * RING + (i as usize & (RING - 1))) * ENTRY;
        // SAFETY: inside ring `s` (index masked), 64-byte aligned, all atomics.
        unsafe { &*(self.base.add(off) as *const Entry) }
    }

    /// Region table entry `i % NREG`.
    pub(crate) fn reg(&self, i: u32) -> &RegEntry {
        let off = self.lay.table + (i as usize % NREG) * 32;
        // SAFETY: inside the table, aligned, atomics only.
        unsafe { &*(self.base.add(off) as *const RegEntry) }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.header().pid.load(Ordering::Relaxed) as i32
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            self.unlink();
        }
        // SAFETY: mapped in create/open with this length; no reference into it outlives the
        // segment (the device and heap hold the Arc that owns it).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
