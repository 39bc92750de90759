//! # device-shm: the rdma-api remote-write device over shared memory (ranks on one host)
//!
//! [`ShmDevice`] implements [`rdma_api::Device`] between ranks of one host. Each rank's
//! [`Segment`] (a POSIX shared-memory object, `/dev/shm/mpirs-<job>-<rank>`, mode 0600) holds
//! a small control area and the rank's heap; every rank maps the segments of its local
//! peers, so a write into a peer's heap is a plain `memcpy` by the sender.
//!
//! ## Data path
//! * **Heap destination** (key 0): `memcpy` into our mapping of the peer's heap, bounds
//!   checked against the mapping's size (never against a value read from the peer).
//! * **Other destinations** (regions a peer registered on demand, e.g. a receive buffer):
//!   the owner publishes (key, base address, length) in the region table of its segment;
//!   the sender validates (key, offset, length) against it (seqlock-style: key read before
//!   and after). Then:
//!   - **pipelined copy** (writes with `sid` of at least `MPI_SHM_PIPE_MIN` bytes, default
//!     [`DEFAULT_PIPE_MIN`]): the sender copies chunks of `MPI_SHM_CHUNK` bytes (default
//!     [`DEFAULT_CHUNK`]) into its staging area in the receiver's segment (1 MiB per
//!     sender) and pushes one `F_CHUNK` entry per chunk (region key, destination offset,
//!     staging offset, length); the receiver, in `poll`, validates the entry against its
//!     own region table and staging area, copies the chunk out and publishes its chunks
//!     counter (head line, word 1), which frees the staging slot. Both cores copy at once
//!     (like MPICH's LMT copy buffers); the write stays queued (behind it, later
//!     notifications to that peer) until its last chunk is staged, then raises `Sent` and
//!     pushes its own notification. [`Device::busy`] says whether a chunk was staged or
//!     copied out since its last call, so that the progress engine does not back off
//!     while the copy moves (and does when it is stuck). The staging areas are
//!     not pre-faulted (it would cost MPI_Init ~0.4 ms per MiB): the first chunks through
//!     a staging area fault its pages in.
//!   - **cross-memory attach** (smaller writes, and writes without `sid`, which must be
//!     copied before `write` returns): `process_vm_writev` into the peer's address space
//!     (the pid is in the peer's segment header). The kernel checks the remote addresses,
//!     so a lying peer cannot make us write into our own memory.
//!   A sid-less write to a non-heap region is applied at once, possibly before an earlier
//!   pipelined write to the same peer is complete (mpi-core issues none).
//! * **Notification**: writes with `imm` push one 64-byte entry (imm, len, flags) into the
//!   single-producer/single-consumer ring of the (sender, receiver) pair, which lives in the
//!   receiver's segment. The entry's `seq` word (ring index + 1) is stored last with
//!   Release ordering after the data; the receiver loads it with Acquire. There is no shared
//!   tail index: the receiver polls the next entry itself (one cache line per message). The
//!   receiver publishes its head index (consumed entries) on its own line; the sender reads
//!   it only when its cached copy says the ring is full, and otherwise keeps notifications in
//!   a local queue (with pipelined writes in progress) that `poll`/`write` flush in order.
//! * **Inline notifications** ([`Device::notify`], up to [`rdma_api::NOTIFY_MAX`] = 48
//!   bytes): the bytes are stored in the entry itself (words `d`, before `seq`), so the
//!   receiver gets them with the entry's one cache line (mpi-core sends SHORTs of up to 36
//!   bytes this way: one line per message instead of slot + entry).
//! * **Events**: a copy completes at once, so [`Event::Sent`] is queued locally by `write`.
//!   Writes from one rank to another are applied (copied) before their notification and
//!   notifications are consumed in ring order: the rdma-api ordering guarantee holds.
//!
//! ## Blocking
//! [`Device::wait`] stores 1 in the sleep word of its own segment, issues a SeqCst fence,
//! re-checks its rings and then `FUTEX_WAIT`s on that word. A sender, after pushing an
//! entry, fences and reads the receiver's sleep word: only if it is set does it call
//! `FUTEX_WAKE` (no system call on the fast path; the word is read-shared while nobody
//! sleeps, so the check is a local cache hit).
//!
//! Why the sender keeps its fence (store `seq`; fence; load `sleep`): without it, x86-TSO
//! lets the load pass the store still in the store buffer, so the sender can read
//! sleep = 0 while the receiver (sleep = 1; fence; ring check) does not yet see the entry:
//! both miss each other and the receiver sleeps until its timeout (1–10 ms in mpi-core's
//! back-off) with a message pending — a lost wake-up, exactly when ranks oversubscribe the
//! cores. With both fences, one of the two loads must see the other side's store (Dekker):
//! either the receiver sees the entry and does not sleep, or the sender sees sleep = 1 and
//! wakes it (FUTEX_WAIT re-checks the word, so a wake between check and wait is not lost).
//! The fence's cost (it waits for the entry line's ownership, one line transfer) comes
//! after the entry store, so it delays only the sender's next action, not the message; in
//! a ping-pong the sender next waits for the answer anyway. Tests: `wait_is_woken_by_a_write`,
//! `sleeping_receiver_woken_by_inline`, `sleeping_receiver_gets_pipelined_write`.
//!
//! ## Lifetime and failures
//! [`ShmDevice::new`] is collective: after a barrier every rank opens its local peers'
//! segments, then a second barrier, then each rank unlinks its own name: from then on
//! nothing is left in /dev/shm whatever happens to the job (before that, mpirun removes
//! `mpirs-<MPI_JOBID>-*`). [`Device::finalize`] pushes a BYE entry to every local peer and
//! waits for theirs. A peer that drops its device without finalize marks its segment DEAD;
//! a peer process that dies is seen through its pidfd. Both are reported by `poll` as
//! [`DeviceError::PeerLost`] (checked every 16384 polls and after every `wait`).

mod segment;
mod sys;

pub use segment::{segment_name, Segment};

use rdma_api::NOTIFY_MAX;
use rdma_api::{Bootstrap, Caps, Device, DeviceError, Event, RegionKey, Result, Write};
use segment::{
    F_BYE, F_CHUNK, F_IMM, F_INLINE, F_MASK, F_SHIFT, NREG, RING, STAGE_LEN, ST_ALIVE, ST_DEAD,
    ST_DONE,
};
use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest write (bytes): every write is copied synchronously, so also the inline limit.
pub const MAX_WRITE: usize = isize::MAX as usize;
/// Polls between two checks of the peers' liveness (a pidfd `poll` system call per peer:
/// every 16384 polls, some 0.3 ms of spinning, keeps it off the polling loop's cost; a
/// `wait` always checks after sleeping).
const CHECK_EVERY: u32 = 16384;

/// A local peer: its mapped segment and our sender/receiver state for the pair.
struct Peer {
    seg: Segment,
    heap: *mut u8,
    heap_len: usize,
    pid: i32,
    /// pidfd of a peer in another process (None: same process, or pidfd unsupported).
    pidfd: Option<RawFd>,
    /// Entries we pushed into its ring for us (producer index, private).
    tail: u64,
    /// Last head index read from its segment.
    head_cache: u64,
    /// Operations waiting for ring or staging space, in issue order.
    queue: VecDeque<Op>,
    /// Chunks we staged in its staging area for us (private).
    chunk_tail: u64,
    /// Last chunks counter read from its segment.
    chunk_head_cache: u64,
    /// Entries of its ring in our segment we consumed.
    rx_head: u64,
    /// Chunks of its staging area in our segment we copied out.
    rx_chunks: u64,
    bye: bool,
    lost: bool,
}

/// An operation queued for a peer pair, in issue order.
enum Op {
    /// A notification waiting for ring space: (imm, meta, entry words).
    Note(u32, u64, [u64; 6]),
    /// A pipelined write in progress.
    Pipe(Pipe),
}

/// A pipelined write: `len` bytes from `src` to (`key`, `off`) at the peer, `done` of them
/// staged so far.
struct Pipe {
    src: *const u8,
    key: u32,
    off: u64,
    len: usize,
    done: usize,
    imm: Option<u32>,
    sid: Option<u64>,
}

/// Default chunk of a pipelined write (`MPI_SHM_CHUNK`), bytes. Measured (device ping-pong
/// between registered buffers, `tests/perf.rs`, quiet 2-core EPYC): 32 KiB and 64 KiB
/// chunks give 13 GB/s at 64 KiB, 28 GB/s at 4 MiB, 14–15 GB/s at 16 MiB; 128/256 KiB
/// chunks are slower below 1 MiB.
pub const DEFAULT_CHUNK: usize = 64 << 10;
/// Default smallest write to a non-heap region that is pipelined (`MPI_SHM_PIPE_MIN`);
/// smaller ones use one process_vm_writev. Measured: process_vm_writev reaches 9.5 GB/s
/// at 64 KiB, 12–13 GB/s at 1–2 MiB, 7.8 GB/s at 4 MiB and 6 GB/s at 16 MiB (it pins the
/// pages per call), below the pipeline at every size from 64 KiB; 32 KiB is mpi-core's
/// eager limit, so every rendezvous DATA write is pipelined.
pub const DEFAULT_PIPE_MIN: usize = 32 << 10;

/// The shared-memory device of one rank. Create it with [`ShmDevice::new`]; end it with
/// [`Device::finalize`] (dropping it without finalize marks it DEAD: peers get
/// [`DeviceError::PeerLost`]).
pub struct ShmDevice {
    rank: usize,
    size: usize,
    me: Arc<Segment>,
    /// Index = rank; `Some` for local peers other than this rank.
    peers: Vec<Option<Peer>>,
    /// Ranks of `peers` that are `Some`.
    local: Vec<usize>,
    /// Our registered regions other than the heap: key → (base, len).
    regions: HashMap<u32, (*mut u8, usize)>,
    heap: Option<(*mut u8, usize)>,
    next_key: u32,
    /// Events raised outside poll (Sent, self writes).
    events: VecDeque<Event>,
    /// Peers with a non-empty queue.
    overflowing: usize,
    /// Pipelined writes not yet fully staged (all peers).
    pipes: usize,
    /// Bytes per staged chunk (power of two dividing STAGE_LEN).
    chunk: usize,
    /// Smallest write to a non-heap region that is pipelined.
    pipe_min: usize,
    /// A chunk was staged or copied out since the last [`Device::busy`].
    active: bool,
    polls: u32,
    check_due: bool,
    finalized: bool,
}

// SAFETY: raw pointers point into mappings owned by the device (peer segments, our Arc'd
// segment) or into memory the caller registered and promised to keep valid; the device has
// no thread affinity and is used through &mut only.
unsafe impl Send for ShmDevice {}

fn io_err(what: &str, e: std::io::Error) -> DeviceError {
    DeviceError::Io(std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

impl ShmDevice {
    /// Creates the device of this rank over its segment `me` (created by
    /// [`Segment::create`] with the same `job` and job size) and connects it to the ranks
    /// `q` with `local[q]` (collective over all ranks of `boot`: two barriers, even for a
    /// rank without local peers). The segment's heap is registered as `RegionKey(0)`;
    /// every peer's heap key is `RegionKey(0)`. After the second barrier the segment name
    /// is unlinked.
    ///
    /// Errors: [`DeviceError::Bootstrap`] if the store fails; [`DeviceError::Io`] if a
    /// local peer's segment cannot be opened or is malformed;
    /// [`DeviceError::InvalidArgument`] for inconsistent arguments.
    pub fn new(
        boot: &mut dyn Bootstrap,
        me: Arc<Segment>,
        job: &str,
        local: &[bool],
    ) -> Result<ShmDevice> {
        let (rank, size) = (boot.rank(), boot.size());
        if rank >= size || local.len() != size || me.layout().n != size {
            return Err(DeviceError::InvalidArgument(format!(
                "rank {rank}, size {size}, {} locality flags, segment for {} ranks",
                local.len(),
                me.layout().n
            )));
        }
        boot.barrier()?; // every segment exists
        let mut peers: Vec<Option<Peer>> = (0..size).map(|_| None).collect();
        let mut local_ranks = Vec::new();
        let my_pid = std::process::id() as i32;
        for q in (0..size).filter(|&q| q != rank && local[q]) {
            let seg = Segment::open(job, q, size)
                .map_err(|e| io_err(&format!("open segment of rank {q}"), e))?;
            let (heap, heap_len) = seg.heap();
            let pid = seg.pid();
            let pidfd = if pid != my_pid && pid > 0 {
                sys::pidfd_open(pid).ok()
            } else {
                None
            };
            peers[q] = Some(Peer {
                seg,
                heap,
                heap_len,
                pid,
                pidfd,
                tail: 0,
                head_cache: 0,
                queue: VecDeque::new(),
                chunk_tail: 0,
                chunk_head_cache: 0,
                rx_head: 0,
                rx_chunks: 0,
                bye: false,
                lost: false,
            });
            local_ranks.push(q);
        }
        boot.barrier()?; // every local peer has attached
        me.unlink();
        let heap = Some(me.heap());
        Ok(ShmDevice {
            rank,
            size,
            me,
            peers,
            local: local_ranks,
            regions: HashMap::new(),
            heap,
            next_key: 1,
            events: VecDeque::with_capacity(64),
            overflowing: 0,
            pipes: 0,
            chunk: env_size("MPI_SHM_CHUNK", DEFAULT_CHUNK)
                .clamp(4096, STAGE_LEN)
                .next_power_of_two()
                .min(STAGE_LEN),
            pipe_min: env_size("MPI_SHM_PIPE_MIN", DEFAULT_PIPE_MIN),
            active: false,
            polls: 0,
            check_due: false,
            finalized: false,
        })
    }

    /// Whether rank `q` is reached by this device (a local peer or this rank).
    pub fn reaches(&self, q: usize) -> bool {
        q == self.rank || self.peers.get(q).is_some_and(|p| p.is_some())
    }

    /// The address of `len` bytes at `offset` of our region `key` (overflow-checked).
    #[inline]
    fn local_range(&self, key: u32, offset: usize, len: usize) -> Option<*mut u8> {
        let (base, rlen) = if key == 0 {
            self.heap?
        } else {
            *self.regions.get(&key)?
        };
        if offset.checked_add(len)? > rlen {
            return None;
        }
        Some(base.wrapping_add(offset))
    }

    fn write_self(&mut self, w: &Write, src: *const u8) -> Result<()> {
        let dst = self
            .local_range(w.remote_key.0, w.remote_offset, w.len)
            .ok_or_else(|| {
                DeviceError::InvalidAccess(format!(
                    "self write of {} bytes at offset {} of {} is outside every registered region",
                    w.len, w.remote_offset, w.remote_key
                ))
            })?;
        // SAFETY: both ranges were validated against our region table (valid for reads and
        // writes by register's contract); ptr::copy allows overlap.
        unsafe { std::ptr::copy(src, dst, w.len) };
        rdma_api::push_self_write_events(w, self.rank, &mut self.events);
        Ok(())
    }

    /// Advances the queue of every peer that has one: pushes notifications, stages chunks.
    fn flush_overflow(&mut self) {
        for i in 0..self.local.len() {
            let q = self.local[i];
            if !self.peers[q].as_ref().expect("local peer").queue.is_empty() {
                self.pump(q);
            }
        }
    }

    /// Advances peer `q`'s queue as far as ring and staging space allow, in order: a
    /// notification is pushed; a pipelined write copies chunks into its staging area in our
    /// peer's segment (one F_CHUNK entry each), then raises Sent and queues its own
    /// notification. Wakes the peer if anything was pushed.
    fn pump(&mut self, q: usize) {
        let me = self.rank;
        let chunk = self.chunk;
        let nslots = (STAGE_LEN / chunk) as u64;
        let p = self.peers[q].as_mut().expect("local peer");
        let mut pushed = false;
        while let Some(op) = p.queue.pop_front() {
            match op {
                Op::Note(imm, meta, d) => {
                    if !push(p, me, imm, meta, &d) {
                        p.queue.push_front(op);
                        break;
                    }
                    pushed = true;
                }
                Op::Pipe(mut t) => {
                    while t.done < t.len {
                        if p.chunk_tail - p.chunk_head_cache >= nslots {
                            let h = p.seg.chunks(me).load(Ordering::Acquire);
                            if h <= p.chunk_tail {
                                p.chunk_head_cache = h;
                            }
                            if p.chunk_tail - p.chunk_head_cache >= nslots {
                                break;
                            }
                        }
                        if !ring_room(p, me) {
                            break;
                        }
                        let soff = (p.chunk_tail % nslots) as usize * chunk;
                        let n = chunk.min(t.len - t.done);
                        // SAFETY: the source range was validated by `write` (registered,
                        // kept valid until Sent by the caller's contract); the staging
                        // slot lies inside our peer's mapping, written only by us, and
                        // the peer has copied it out (chunks counter).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                t.src.add(t.done),
                                p.seg.stage(me).add(soff),
                                n,
                            )
                        };
                        let meta = ((n as u64) << F_SHIFT) | F_CHUNK;
                        let d = [t.off + t.done as u64, soff as u64, 0, 0, 0, 0];
                        let ok = push(p, me, t.key, meta, &d);
                        debug_assert!(ok);
                        p.chunk_tail += 1;
                        t.done += n;
                        pushed = true;
                        self.active = true;
                    }
                    if t.done < t.len {
                        p.queue.push_front(Op::Pipe(t));
                        break;
                    }
                    self.pipes -= 1;
                    if let Some(sid) = t.sid {
                        self.events.push_back(Event::Sent { sid });
                    }
                    if let Some(imm) = t.imm {
                        let meta = ((t.len as u64) << F_SHIFT) | F_IMM;
                        p.queue.push_front(Op::Note(imm, meta, [0; 6]));
                    }
                }
            }
        }
        if pushed {
            wake(p);
        }
        if p.queue.is_empty() {
            self.overflowing -= 1;
        }
    }

    /// Consumes the ring of every local peer, appending Recv events (or discarding them
    /// when `keep` is false). Returns the first protocol violation.
    fn receive(&mut self, events: &mut Vec<Event>, keep: bool) -> Result<()> {
        let mine = Regions {
            heap: self.heap,
            regions: &self.regions,
        };
        for &q in &self.local {
            let p = self.peers[q].as_mut().expect("local peer");
            if p.bye || p.lost {
                continue;
            }
            drain_ring(&self.me, &mine, q, p, events, keep, &mut self.active)?;
        }
        Ok(())
    }

    /// Checks that every local peer is still there (state word, pidfd).
    fn check_peers(&mut self, events: &mut Vec<Event>, keep: bool) -> Result<()> {
        self.check_due = false;
        for &q in &self.local {
            let p = self.peers[q].as_mut().expect("local peer");
            if p.bye || p.lost {
                continue;
            }
            let st = p.seg.header().state.load(Ordering::Acquire);
            let dead = if st == ST_DEAD {
                Some("the peer dropped its device without finalize")
            } else if st != ST_ALIVE && st != ST_DONE {
                Some("the peer's segment has an invalid state")
            } else if p.pidfd.is_some_and(sys::pidfd_exited) {
                Some("the peer process exited")
            } else {
                None
            };
            if let Some(reason) = dead {
                // What it wrote before dying is still delivered.
                let mine = Regions {
                    heap: self.heap,
                    regions: &self.regions,
                };
                drain_ring(&self.me, &mine, q, p, events, keep, &mut self.active)?;
                p.lost = true;
                self.pipes -= p.queue.iter().filter(|o| matches!(o, Op::Pipe(_))).count();
                if !p.queue.is_empty() {
                    self.overflowing -= 1;
                }
                p.queue.clear();
                return Err(DeviceError::PeerLost {
                    peer: q,
                    reason: format!("{reason} (pid {})", p.pid),
                });
            }
        }
        Ok(())
    }

    fn progress(&mut self, events: &mut Vec<Event>, keep: bool) -> Result<()> {
        if self.overflowing > 0 {
            self.flush_overflow();
        }
        if !self.events.is_empty() {
            if keep {
                events.extend(self.events.drain(..));
            } else {
                self.events.clear();
            }
        }
        self.receive(events, keep)?;
        self.polls = self.polls.wrapping_add(1);
        if self.check_due || self.polls.is_multiple_of(CHECK_EVERY) {
            self.check_peers(events, keep)?;
        }
        Ok(())
    }

    /// Whether any ring has an unconsumed entry.
    fn pending(&self) -> bool {
        self.local.iter().any(|&q| {
            let p = self.peers[q].as_ref().expect("local peer");
            !p.bye
                && !p.lost
                && self.me.entry(q, p.rx_head).seq.load(Ordering::Acquire)
                    == (p.rx_head as u32).wrapping_add(1)
        })
    }

    /// Sleeps until a local peer pushes an entry (futex) or `timeout` passes.
    fn sleep(&mut self, timeout: Duration) {
        let word = self.me.sleep();
        word.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if !self.pending() {
            sys::futex_wait(word, 1, timeout);
        }
        word.store(0, Ordering::Relaxed);
        self.check_due = true;
    }
}

/// Our regions, as the receiver of F_CHUNK entries sees them.
struct Regions<'a> {
    heap: Option<(*mut u8, usize)>,
    regions: &'a HashMap<u32, (*mut u8, usize)>,
}

impl Regions<'_> {
    /// The address of `len` bytes at `off` of our region `key`, if inside it.
    fn range(&self, key: u32, off: u64, len: usize) -> Option<*mut u8> {
        let (base, rlen) = if key == 0 {
            self.heap?
        } else {
            *self.regions.get(&key)?
        };
        let end = off.checked_add(len as u64)?;
        (end <= rlen as u64).then(|| base.wrapping_add(off as usize))
    }
}

/// Reads an environment variable as a byte count (default if unset or malformed).
fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Whether our ring at peer `p` has room for one entry (refreshing the cached head).
#[inline]
fn ring_room(p: &mut Peer, me: usize) -> bool {
    if p.tail - p.head_cache >= RING as u64 {
        let h = p.seg.head(me).load(Ordering::Acquire);
        // A head beyond our tail would be a buggy peer: treat the ring as full.
        if h <= p.tail {
            p.head_cache = h;
        }
        if p.tail - p.head_cache >= RING as u64 {
            return false;
        }
    }
    true
}

/// Pushes one entry into our ring at peer `p` if there is space.
#[inline]
fn push(p: &mut Peer, me: usize, imm: u32, meta: u64, d: &[u64; 6]) -> bool {
    if !ring_room(p, me) {
        return false;
    }
    let e = p.seg.entry(me, p.tail);
    e.imm.store(imm, Ordering::Relaxed);
    e.meta.store(meta, Ordering::Relaxed);
    // All six words, used or not: they share the entry's line, and fixed stores beat a
    // loop over the used ones.
    for (w, &x) in e.d.iter().zip(d.iter()) {
        w.store(x, Ordering::Relaxed);
    }
    e.seq
        .store((p.tail as u32).wrapping_add(1), Ordering::Release);
    p.tail += 1;
    true
}

/// Wakes peer `p` if it sleeps (Dekker with [`ShmDevice::sleep`]: both sides fence).
#[inline]
fn wake(p: &Peer) {
    fence(Ordering::SeqCst);
    let w = p.seg.sleep();
    if w.load(Ordering::Relaxed) != 0 {
        sys::futex_wake(w, 1);
    }
}

/// Consumes ring `q` of our segment (written by peer `q`).
#[inline]
fn drain_ring(
    me: &Segment,
    mine: &Regions<'_>,
    q: usize,
    p: &mut Peer,
    events: &mut Vec<Event>,
    keep: bool,
    active: &mut bool,
) -> Result<()> {
    let start = p.rx_head;
    let mut h = start;
    let mut res = Ok(());
    loop {
        let e = me.entry(q, h);
        if e.seq.load(Ordering::Acquire) != (h as u32).wrapping_add(1) {
            break;
        }
        let imm = e.imm.load(Ordering::Relaxed);
        let meta = e.meta.load(Ordering::Relaxed);
        h += 1;
        let len = (meta >> F_SHIFT) as usize;
        match meta & F_MASK {
            F_IMM => {
                if keep {
                    events.push(Event::Recv { peer: q, imm, len });
                }
            }
            F_BYE if meta == F_BYE => {
                p.bye = true;
                break;
            }
            F_INLINE if len <= NOTIFY_MAX => {
                if keep {
                    // All six words (one line, fixed-size copy); the bytes past `len` are
                    // the sender's zero padding.
                    let mut data = [0u8; NOTIFY_MAX];
                    for (c, w) in data.chunks_exact_mut(8).zip(e.d.iter()) {
                        // The words hold the sender's bytes in native order (both sides
                        // run on this host).
                        c.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
                    }
                    events.push(Event::RecvInline {
                        peer: q,
                        imm,
                        len,
                        data,
                    });
                }
            }
            F_CHUNK => {
                let dst_off = e.d[0].load(Ordering::Relaxed);
                let soff = e.d[1].load(Ordering::Relaxed);
                let dst = mine.range(imm, dst_off, len);
                let Some(dst) = dst.filter(|_| soff.saturating_add(len as u64) <= STAGE_LEN as u64)
                else {
                    p.lost = true;
                    res = Err(DeviceError::Protocol {
                        peer: q,
                        reason: format!(
                            "chunk of {len} bytes at staging offset {soff} for {} offset \
                             {dst_off}: outside the staging area or the region",
                            RegionKey(imm)
                        ),
                    });
                    break;
                };
                if keep {
                    // SAFETY: the source lies in sender q's staging area of our segment
                    // (checked), which q does not reuse before we publish the chunks
                    // counter below; the destination lies in one of our registered
                    // regions (checked), which the caller keeps valid while registered.
                    unsafe {
                        std::ptr::copy_nonoverlapping(me.stage(q).add(soff as usize), dst, len)
                    };
                }
                p.rx_chunks += 1;
                me.chunks(q).store(p.rx_chunks, Ordering::Release);
                *active = true;
            }
            _ => {
                p.lost = true;
                res = Err(DeviceError::Protocol {
                    peer: q,
                    reason: format!("malformed notification (meta {meta:#x})"),
                });
                break;
            }
        }
    }
    if h != start {
        p.rx_head = h;
        me.head(q).store(h, Ordering::Release);
    }
    res
}

impl Device for ShmDevice {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    /// Every write is copied before `write` returns: `max_inline` = `max_write` =
    /// [`MAX_WRITE`].
    fn caps(&self) -> Caps {
        Caps {
            max_inline: MAX_WRITE,
            max_write: MAX_WRITE,
            name: "shm",
        }
    }

    /// Also publishes the region in our segment's region table (for peers' CMA writes).
    /// Errors: [`DeviceError::InvalidArgument`] for a null or wrapping range, or when all
    /// table entries are in use.
    unsafe fn register(&mut self, base: *mut u8, len: usize) -> Result<RegionKey> {
        if (base.is_null() && len > 0) || (base as usize).checked_add(len).is_none() {
            return Err(DeviceError::InvalidArgument(
                "register: null or wrapping range".into(),
            ));
        }
        for _ in 0..NREG {
            let k = self.next_key;
            self.next_key = self.next_key.wrapping_add(1).max(1);
            let e = self.me.reg(k);
            if e.key.load(Ordering::Relaxed) == 0 && !self.regions.contains_key(&k) {
                e.base.store(base as u64, Ordering::Relaxed);
                e.len.store(len as u64, Ordering::Relaxed);
                e.key.store(k, Ordering::Release);
                self.regions.insert(k, (base, len));
                return Ok(RegionKey(k));
            }
        }
        Err(DeviceError::InvalidArgument(format!(
            "register: all {NREG} region table entries in use"
        )))
    }

    /// Later writes by peers to the key fail at the sender with
    /// [`DeviceError::InvalidAccess`]. Errors: [`DeviceError::InvalidArgument`] if `key`
    /// is not registered.
    fn deregister(&mut self, key: RegionKey) -> Result<()> {
        if key.0 == 0 {
            if self.heap.take().is_none() {
                return Err(DeviceError::InvalidArgument(format!(
                    "{key} is not registered"
                )));
            }
            return Ok(());
        }
        if self.regions.remove(&key.0).is_none() {
            return Err(DeviceError::InvalidArgument(format!(
                "{key} is not registered"
            )));
        }
        self.me.reg(key.0).key.store(0, Ordering::Release);
        Ok(())
    }

    fn heap_key(&self, _peer: usize) -> RegionKey {
        RegionKey(0)
    }

    #[inline]
    fn write(&mut self, w: &Write) -> Result<()> {
        if w.peer >= self.size {
            return Err(DeviceError::InvalidArgument(format!(
                "peer {} out of range (size {})",
                w.peer, self.size
            )));
        }
        if self.finalized {
            return Err(DeviceError::InvalidArgument("device is finalized".into()));
        }
        let src = self
            .local_range(w.local_key.0, w.local_offset, w.len)
            .ok_or_else(|| {
                DeviceError::InvalidArgument(format!(
                    "source of {} bytes at offset {} of {} is outside every registered region",
                    w.len, w.local_offset, w.local_key
                ))
            })? as *const u8;
        if w.peer == self.rank {
            return self.write_self(w, src);
        }
        let me = self.rank;
        let Some(p) = self.peers[w.peer].as_mut() else {
            return Err(DeviceError::InvalidArgument(format!(
                "rank {} is not on this host",
                w.peer
            )));
        };
        if p.lost {
            return Err(DeviceError::PeerLost {
                peer: w.peer,
                reason: "the peer is gone".into(),
            });
        }
        let bad = |what: &str| {
            DeviceError::InvalidAccess(format!(
                "write of {} bytes at offset {} of {} at rank {}: {what}",
                w.len, w.remote_offset, w.remote_key, w.peer
            ))
        };
        if w.remote_key.0 == 0 {
            match w.remote_offset.checked_add(w.len) {
                Some(end) if end <= p.heap_len => {}
                _ => return Err(bad("outside the peer's heap")),
            }
            // SAFETY: the destination lies inside our mapping of the peer's heap (checked
            // against the mapping's length); the source was validated against our region
            // table. The ranges do not overlap (different mappings of different objects).
            unsafe { std::ptr::copy(src, p.heap.add(w.remote_offset), w.len) };
        } else if w.len > 0 || w.imm.is_some() {
            // Seqlock read of the peer's region table entry.
            let e = p.seg.reg(w.remote_key.0);
            let k1 = e.key.load(Ordering::Acquire);
            let base = e.base.load(Ordering::Relaxed);
            let rlen = e.len.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            let k2 = e.key.load(Ordering::Relaxed);
            if k1 != w.remote_key.0 || k2 != k1 {
                return Err(bad("not a registered region"));
            }
            match (w.remote_offset as u64).checked_add(w.len as u64) {
                Some(end) if end <= rlen && base.checked_add(end).is_some() => {}
                _ => return Err(bad("outside the region")),
            }
            if w.sid.is_some() && w.len >= self.pipe_min.max(1) {
                if p.queue.is_empty() {
                    self.overflowing += 1;
                }
                p.queue.push_back(Op::Pipe(Pipe {
                    src,
                    key: w.remote_key.0,
                    off: w.remote_offset as u64,
                    len: w.len,
                    done: 0,
                    imm: w.imm,
                    sid: w.sid,
                }));
                self.pipes += 1;
                self.pump(w.peer);
                return Ok(());
            }
            if w.len > 0 {
                // SAFETY: the source range was validated above; the remote range is
                // checked by the kernel.
                unsafe { sys::cma_write(p.pid, src, base + w.remote_offset as u64, w.len) }
                    .map_err(|e| match e.raw_os_error() {
                        Some(libc::ESRCH) => DeviceError::PeerLost {
                            peer: w.peer,
                            reason: "process_vm_writev: the process is gone".into(),
                        },
                        _ => bad(&format!("process_vm_writev: {e}")),
                    })?;
            }
        }
        if let Some(imm) = w.imm {
            let meta = ((w.len as u64) << F_SHIFT) | F_IMM;
            if !p.queue.is_empty() || !push(p, me, imm, meta, &[0; 6]) {
                if p.queue.is_empty() {
                    self.overflowing += 1;
                }
                p.queue.push_back(Op::Note(imm, meta, [0; 6]));
            } else {
                wake(p);
            }
        }
        if let Some(sid) = w.sid {
            self.events.push_back(Event::Sent { sid });
        }
        Ok(())
    }

    /// True for every rank this device reaches.
    fn can_write_bytes(&self, peer: usize) -> bool {
        self.reaches(peer)
    }

    /// Heap destinations (key 0) only: the parts are copied straight into our mapping of
    /// the peer's heap (or our own heap for a self write), then the notification follows
    /// as for [`Device::write`]. Other keys: [`DeviceError::InvalidArgument`].
    #[inline]
    fn write_bytes(
        &mut self,
        peer: usize,
        parts: [&[u8]; 2],
        remote_key: RegionKey,
        remote_offset: usize,
        imm: Option<u32>,
    ) -> Result<()> {
        let len = parts[0].len() + parts[1].len();
        if peer >= self.size || self.finalized || remote_key.0 != 0 {
            return Err(DeviceError::InvalidArgument(format!(
                "write_bytes of {len} bytes to {remote_key} at rank {peer}: bad peer or key \
                 (heap only), or finalized"
            )));
        }
        let bad = || {
            DeviceError::InvalidAccess(format!(
                "write of {len} bytes at offset {remote_offset} of {remote_key} at rank {peer}: \
                 outside the heap"
            ))
        };
        if peer == self.rank {
            let dst = self.local_range(0, remote_offset, len).ok_or_else(bad)?;
            // SAFETY: `dst .. dst+len` lies in our heap (checked); the parts are the
            // caller's slices; copy allows overlap.
            unsafe {
                std::ptr::copy(parts[0].as_ptr(), dst, parts[0].len());
                std::ptr::copy(parts[1].as_ptr(), dst.add(parts[0].len()), parts[1].len());
            }
            if let Some(imm) = imm {
                self.events.push_back(Event::Recv { peer, imm, len });
            }
            return Ok(());
        }
        let me = self.rank;
        let Some(p) = self.peers[peer].as_mut() else {
            return Err(DeviceError::InvalidArgument(format!(
                "rank {peer} is not on this host"
            )));
        };
        if p.lost {
            return Err(DeviceError::PeerLost {
                peer,
                reason: "the peer is gone".into(),
            });
        }
        match remote_offset.checked_add(len) {
            Some(end) if end <= p.heap_len => {}
            _ => return Err(bad()),
        }
        // SAFETY: the destination lies inside our mapping of the peer's heap (checked
        // against the mapping's length); the parts are the caller's slices, in our memory,
        // not in that mapping's destination range.
        unsafe {
            let dst = p.heap.add(remote_offset);
            std::ptr::copy_nonoverlapping(parts[0].as_ptr(), dst, parts[0].len());
            std::ptr::copy_nonoverlapping(
                parts[1].as_ptr(),
                dst.add(parts[0].len()),
                parts[1].len(),
            );
        }
        if let Some(imm) = imm {
            let meta = ((len as u64) << F_SHIFT) | F_IMM;
            if !p.queue.is_empty() || !push(p, me, imm, meta, &[0; 6]) {
                if p.queue.is_empty() {
                    self.overflowing += 1;
                }
                p.queue.push_back(Op::Note(imm, meta, [0; 6]));
            } else {
                wake(p);
            }
        }
        Ok(())
    }

    /// [`NOTIFY_MAX`] (48 bytes) for every rank this device reaches.
    fn max_notify_data(&self, peer: usize) -> usize {
        if self.reaches(peer) {
            NOTIFY_MAX
        } else {
            0
        }
    }

    /// The bytes travel in the ring entry itself (one cache line with the entry's sequence
    /// word): the receiver's poll reads them with the entry.
    #[inline]
    fn notify(&mut self, peer: usize, imm: u32, data: &[u8]) -> Result<()> {
        let len = data.len();
        if len > NOTIFY_MAX || peer >= self.size || self.finalized {
            return Err(DeviceError::InvalidArgument(format!(
                "notify of {len} bytes to rank {peer} (size {}, at most {NOTIFY_MAX} bytes)",
                self.size
            )));
        }
        if peer == self.rank {
            let mut d = [0u8; NOTIFY_MAX];
            d[..len].copy_from_slice(data);
            self.events.push_back(Event::RecvInline {
                peer,
                imm,
                len,
                data: d,
            });
            return Ok(());
        }
        let me = self.rank;
        let Some(p) = self.peers[peer].as_mut() else {
            return Err(DeviceError::InvalidArgument(format!(
                "rank {peer} is not on this host"
            )));
        };
        if p.lost {
            return Err(DeviceError::PeerLost {
                peer,
                reason: "the peer is gone".into(),
            });
        }
        let mut d = [0u64; 6];
        // SAFETY: `len` ≤ 48 bytes into a 48-byte array; `data` is valid for `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), d.as_mut_ptr() as *mut u8, len) };
        let meta = ((len as u64) << F_SHIFT) | F_INLINE;
        if !p.queue.is_empty() || !push(p, me, imm, meta, &d) {
            if p.queue.is_empty() {
                self.overflowing += 1;
            }
            p.queue.push_back(Op::Note(imm, meta, d));
        } else {
            wake(p);
        }
        Ok(())
    }

    /// True if a chunk was staged (by us as sender) or copied out (as receiver) since the
    /// last call: the progress engine keeps polling without back-off while a pipelined
    /// copy moves, but backs off as usual when it is stuck (e.g. the peer is descheduled:
    /// then `wait` sleeps up to 50 µs at a time until the peer frees staging space).
    #[inline]
    fn busy(&mut self) -> bool {
        std::mem::take(&mut self.active)
    }

    /// Flushes overflowing notifications, hands out local events, consumes every local
    /// peer's ring. Errors: [`DeviceError::Protocol`] for a malformed notification,
    /// [`DeviceError::PeerLost`] for a peer that dropped its device or whose process
    /// exited (each reported once).
    #[inline]
    fn poll(&mut self, events: &mut Vec<Event>) -> Result<usize> {
        let start = events.len();
        self.progress(events, true)?;
        Ok(events.len() - start)
    }

    /// Returns at once if events are pending; otherwise sleeps on the futex of our segment
    /// until a peer pushes a notification, or `timeout`.
    fn wait(&mut self, timeout: Duration) -> Result<()> {
        if !self.events.is_empty() || self.pending() {
            return Ok(());
        }
        if self.overflowing > 0 {
            // Waiting for a peer to make room: nothing to sleep on; retry soon.
            std::thread::sleep(timeout.min(Duration::from_micros(50)));
            return Ok(());
        }
        self.sleep(timeout);
        Ok(())
    }

    /// Pushes BYE to every local peer (after any queued notifications), then consumes
    /// (discarding) until every local peer's BYE arrived or the peer is lost. Returns the
    /// first error seen after finishing with all peers. Idempotent.
    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let mut first_err: Option<DeviceError> = None;
        for &q in &self.local {
            let p = self.peers[q].as_mut().expect("local peer");
            if p.lost {
                first_err.get_or_insert(DeviceError::PeerLost {
                    peer: q,
                    reason: "lost before finalize".into(),
                });
                continue;
            }
            if p.queue.is_empty() {
                self.overflowing += 1;
            }
            p.queue.push_back(Op::Note(0, F_BYE, [0; 6]));
        }
        let mut scratch = Vec::new();
        loop {
            scratch.clear();
            if let Err(e) = self.progress(&mut scratch, false) {
                first_err.get_or_insert(e);
                continue;
            }
            let busy = self.local.iter().any(|&q| {
                let p = self.peers[q].as_ref().expect("local peer");
                !p.lost && (!p.bye || !p.queue.is_empty())
            });
            if !busy {
                break;
            }
            if self.overflowing > 0 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                self.sleep(Duration::from_millis(10));
            }
        }
        self.me.header().state.store(ST_DONE, Ordering::Release);
        self.events.clear();
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for ShmDevice {
    fn drop(&mut self) {
        if !self.finalized {
            self.me.header().state.store(ST_DEAD, Ordering::Release);
            for p in self.peers.iter().flatten() {
                wake(p);
            }
        }
        for p in self.peers.iter().flatten() {
            if let Some(fd) = p.pidfd {
                sys::close(fd);
            }
        }
    }
}
