//! The engine: one per rank. Point-to-point (MPI-4.1 ch. 3), collectives (ch. 6), memory
//! allocation (§9.2), error handlers (§9.3), start-up and shutdown (§11.2).
//!
//! Every buffer argument is a raw pointer plus a count and a datatype, as in the C
//! binding; the safe Rust API in [`crate::api`] wraps these.
//!
//! ## Design as built
//! * **Devices** ([`crate::select`], `MPI_DEVICE`): shared memory (device-shm) for ranks
//!   on the same host, TCP for the others; with shared memory the heap is this rank's
//!   shared-memory segment, which the local peers map.
//! * **Heap** ([`crate::heap`]): one mapping per rank, registered as the device's heap: `[credit words in][credit words out][CTRL rings: n × slots × slot_size]
//!   [staging: n × slots × slot_size][MPI_Alloc_mem arena]`, identical on every rank, so
//!   the remote offset of "my ring at rank d, slot k" is computed locally. The heap grows
//!   beyond `MPI_HEAP_SIZE` when the rings need it (keeping a 16 MiB arena).
//! * **Wire** ([`crate::protocol`]): one 48-byte little-endian header (SHORT, REQ, RSP)
//!   at the start of a 64-byte header area of a slot, payload after it. The 32-bit
//!   immediate carries the kind in its top 2 bits: CTRL|slot, DATA|receiver request id,
//!   CREDIT. Everything read from a slot is validated; a violation is MPI_ERR_INTERN.
//! * **Sending** ([`crate::progress`]): per destination, a CTRL message needs a credit
//!   (`sent - credit < slots`) and a free staging slot (its last write reported Sent);
//!   otherwise it waits (payload copied) in the destination's FIFO, which keeps order.
//!   Eager (SHORT) sends are complete once copied; rendezvous sends (REQ → RSP → DATA)
//!   complete when the DATA write reports Sent.
//! * **Credits**: the receiver writes its cumulative consumed-slot count for a sender
//!   into the sender's credit word (8-byte inline write, imm CREDIT) every
//!   `max(1, slots/4)` slots; no ring slot is needed, so credits flow even when both
//!   directions are full.
//! * **Progress**: polling inside MPI calls; blocking calls spin, then yield, then block
//!   in `Device::wait` (1 ms doubling to 10 ms) after 5 ms (oversubscribed) or 20 ms of
//!   idleness, see `Backoff`.
//! * **Collectives** ([`crate::collective`]) run on context id + 1 of the communicator.

use crate::{Datatype, Error, Op, Result};

/// A communicator handle. Only the two predefined communicators exist for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Comm(pub u32);

impl Comm {
    /// MPI_COMM_WORLD (context id 0; its collectives use context id 1).
    pub const WORLD: Comm = Comm(0);
    /// MPI_COMM_SELF (context id 2; its collectives use context id 3).
    pub const SELF: Comm = Comm(1);
}

/// Thread support levels (MPI-4.1 §11.6), MPICH's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i32)]
pub enum ThreadLevel {
    /// MPI_THREAD_SINGLE
    Single = 0,
    /// MPI_THREAD_FUNNELED
    Funneled = 1,
    /// MPI_THREAD_SERIALIZED
    Serialized = 2,
    /// MPI_THREAD_MULTIPLE
    Multiple = 3,
}

/// Error handler of a communicator (MPI-4.1 §9.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrHandler {
    /// MPI_ERRORS_ARE_FATAL (the default): the caller prints the error and aborts the job.
    Fatal,
    /// MPI_ERRORS_RETURN: the error code is returned to the caller.
    Return,
}

/// A nonblocking request handle (index into the engine's request table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request(pub u32);

/// The status of a completed receive (or probe). `count` is in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// MPI_SOURCE: rank of the sender in the communicator (MPI_PROC_NULL for a receive
    /// from MPI_PROC_NULL).
    pub source: i32,
    /// MPI_TAG (MPI_ANY_TAG for a receive from MPI_PROC_NULL).
    pub tag: i32,
    /// MPI_ERROR: error class of this request (set by wait-all when it fails).
    pub error: i32,
    /// Number of bytes received (or, for a probe, of the pending message).
    pub count: usize,
    /// Whether the request was cancelled.
    pub cancelled: bool,
}

impl Status {
    /// MPI_Get_count: number of whole elements of `dt`, or [`crate::UNDEFINED`] if `count`
    /// is not a multiple of the element size.
    pub fn get_count(&self, dt: Datatype) -> i32 {
        let sz = dt.size();
        if !self.count.is_multiple_of(sz) {
            crate::UNDEFINED
        } else {
            (self.count / sz) as i32
        }
    }
}

/// How the engine reached its bootstrap store: from the environment (PMI or singleton,
/// with abort/finalize) or given by the caller ([`Mpi::init_with`], tests).
pub(crate) enum BootHolder {
    Env(pmi::Boot),
    Custom(Box<dyn Bootstrap>),
}

impl BootHolder {
    fn as_dyn(&mut self) -> &mut dyn Bootstrap {
        match self {
            BootHolder::Env(b) => b,
            BootHolder::Custom(b) => b.as_mut(),
        }
    }
}

/// A device constructor: `make(bootstrap, heap base, heap length in bytes)` must create
/// the device of this rank with the heap registered as its heap region.
pub type DeviceFactory = dyn Fn(&mut dyn Bootstrap, *mut u8, usize) -> Result<Box<dyn Device>>;

/// One CTRL message waiting in a destination's FIFO for a credit / a free staging slot.
pub(crate) struct CtrlMsg {
    pub(crate) hdr: Header,
    pub(crate) payload: Vec<u8>,
}

/// The per-rank engine (progress engine, matching, protocols, collectives).
///
/// Design as built (see also `DESIGN.md`, [`crate::heap`], [`crate::protocol`]):
/// * the heap layout of [`crate::heap::HeapLayout`]; CTRL messages go from a staging slot
///   of our heap to the slot of the destination's ring for us, one credit per slot;
/// * eager (SHORT) up to `eager_limit` bytes, rendezvous REQ → RSP → DATA above;
/// * credits are returned by writing a cumulative counter into the sender's heap
///   (imm = CREDIT), every `max(1, slots/4)` consumed slots;
/// * progress is polling inside MPI calls with a spin → yield → `Device::wait` back-off.
pub struct Mpi {
    // Field order matters: the device is dropped before the heap it has registered.
    pub(crate) dev: Box<dyn Device>,
    pub(crate) boot: BootHolder,
    pub(crate) heap: Heap,
    pub(crate) lay: HeapLayout,
    pub(crate) settings: Settings,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) my_key: RegionKey,
    pub(crate) heap_keys: Vec<RegionKey>,
    pub(crate) reqs: Requests,
    pub(crate) q: Queues,
    // ---- send side, per destination ----
    /// CTRL messages written to each destination (cumulative).
    pub(crate) sent: Vec<u64>,
    /// CTRL slots each destination reported consumed (cumulative credit counter).
    pub(crate) credit: Vec<u64>,
    /// Staging slot busy (write not yet reported Sent), index dest·slots + slot.
    pub(crate) inflight: Vec<bool>,
    pub(crate) ctrl_inflight: usize,
    pub(crate) data_inflight: usize,
    pub(crate) fifo: Vec<VecDeque<CtrlMsg>>,
    pub(crate) queued: usize,
    // ---- receive side, per source ----
    pub(crate) consumed: Vec<u64>,
    pub(crate) reported: Vec<u64>,
    pub(crate) credit_batch: u64,
    // ---- misc ----
    pub(crate) events: Vec<Event>,
    pub(crate) pool: Vec<Vec<u8>>,
    pub(crate) errh: [ErrHandler; 2],
    pub(crate) backoff: Backoff,
    // ---- point-to-point fast paths ----
    /// The blocking receive in progress without a request (see [`Mpi::recv`]).
    pub(crate) direct: Option<Direct>,
    /// `Device::max_notify_data` of each destination, read once (bytes, ≤ NOTIFY_MAX).
    pub(crate) notify_max: Vec<u8>,
}

/// Back-off parameters of blocking calls (internal tuning knobs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    /// Spin (poll without yielding) this long after the last event.
    pub(crate) spin: Duration,
    /// Then poll + `yield_now` until this long after the last event.
    pub(crate) yield_until: Duration,
    /// First `Device::wait` timeout; doubles up to `wait_max`.
    pub(crate) wait_min: Duration,
    pub(crate) wait_max: Duration,
}

impl Backoff {
    /// Back-off for a job of `size` ranks (`MPI_LOCAL_SIZE` of them on this host when our
    /// `mpirun` says so).
    ///
    /// * More ranks here than cores (oversubscribed): no spinning at all, `sched_yield`
    ///   after every idle poll until 5 ms of idleness: the scheduler hands the core
    ///   straight to a rank that has work (what Open MPI does), where a futex sleep costs
    ///   a wake-up on every message and spinning (even 64 polls) burns the time slice of
    ///   the rank being waited for. 8 ranks on 2 cores, 8 B allreduce: 158 µs (spin 5 µs,
    ///   sleep after 20 µs) → ~16 µs.
    /// * Otherwise: spin 100 µs (a ping-pong whose replies come within 100 µs never
    ///   gives its core away), then yield until 20 ms rather than sleep: with one CPU hog
    ///   next to a 2-rank ping-pong, 0 B latency 0.3-2.5 µs instead of 0.7-35 µs, 4 KiB
    ///   ~4.6 instead of 25-44 µs (spin 50 µs, sleep after 200 µs).
    ///
    /// Either way an idle rank ends up blocked in `Device::wait` (no 100 % CPU forever).
    pub(crate) fn for_job(size: usize) -> Backoff {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let local = std::env::var("MPI_LOCAL_SIZE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&l| l >= 1 && l <= size)
            .unwrap_or(size);
        Backoff::with(local > cores)
    }

    fn with(oversubscribed: bool) -> Backoff {
        let (spin, yield_until) = if oversubscribed {
            (0, 5_000)
        } else {
            (100, 20_000)
        };
        let us = |name: &str, d: u64| {
            Duration::from_micros(
                std::env::var(name)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(d),
            )
        };
        Backoff {
            spin: us("MPICORE_SPIN_US", spin),
            yield_until: us("MPICORE_YIELD_US", yield_until),
            wait_min: us("MPICORE_WAIT_MIN_US", 1000),
            wait_max: Duration::from_millis(10),
        }
    }
}

impl Default for Backoff {
    /// The not-oversubscribed back-off; the internal variables `MPICORE_SPIN_US`,
    /// `MPICORE_YIELD_US`, `MPICORE_WAIT_MIN_US` (microseconds) override it for
    /// measurements.
    fn default() -> Self {
        Backoff::with(false)
    }
}

// SAFETY: the raw pointers held by the engine point into its own heap (owned, moved with
// it) or into user buffers that the MPI contract keeps valid until their requests complete;
// the device is `Send`. The engine is used through `&mut self` only.
unsafe impl Send for Mpi {}

/// Settings from the environment.
fn settings_from_env() -> Settings {
    crate::settings::Settings::from_env()
}

/// Context id of a communicator's point-to-point traffic; collectives use ctx + 1.
pub(crate) const CTX_WORLD: u32 = 0;
pub(crate) const CTX_SELF: u32 = 2;

impl Mpi {
    /// MPI_Init / MPI_Init_thread: bootstraps through PMI (or as a singleton when started
    /// without a launcher), creates the heap and the device, connects to all ranks.
    /// Returns the engine and the provided thread level: the engine is driven through
    /// `&mut self`, so it provides at most MPI_THREAD_SERIALIZED (min(required, that)).
    ///
    /// Errors: MPI_ERR_OTHER when the bootstrap or the device fails, MPI_ERR_NO_MEM when
    /// the heap cannot be mapped.
    pub fn init(required: ThreadLevel) -> Result<(Mpi, ThreadLevel)> {
        let boot = pmi::Boot::from_env()?;
        let settings = settings_from_env();
        let mpi = Mpi::build(BootHolder::Env(boot), settings, None, None)?;
        Ok((mpi, required.min(ThreadLevel::Serialized)))
    }

    /// Creates an engine from a given bootstrap store and settings, over the device(s)
    /// `settings.device` selects (e.g. ranks as threads of one process with
    /// `rdma_api::thread_kvs::ThreadKvs::job`). Collective over the ranks of `boot`. Errors
    /// as [`Mpi::init`].
    pub fn init_with(boot: Box<dyn Bootstrap>, settings: Settings) -> Result<Mpi> {
        Mpi::build(BootHolder::Custom(boot), settings, None, None)
    }

    /// As [`Mpi::init_with`], with this rank's hostname replaced by `host` for the device
    /// selection (tests simulate ranks on several hosts with it).
    #[doc(hidden)]
    pub fn init_with_host(boot: Box<dyn Bootstrap>, settings: Settings, host: &str) -> Result<Mpi> {
        Mpi::build(BootHolder::Custom(boot), settings, None, Some(host))
    }

    /// Like [`Mpi::init_with`] with a caller-chosen device constructor `make(boot, heap
    /// base, heap length)`, which must register the heap as the device's heap region.
    pub fn init_with_device(
        boot: Box<dyn Bootstrap>,
        settings: Settings,
        make: &DeviceFactory,
    ) -> Result<Mpi> {
        Mpi::build(BootHolder::Custom(boot), settings, Some(make), None)
    }

    fn build(
        mut boot: BootHolder,
        settings: Settings,
        make: Option<&DeviceFactory>,
        host: Option<&str>,
    ) -> Result<Mpi> {
        let b = boot.as_dyn();
        let (rank, size) = (b.rank(), b.size());
        let lay = HeapLayout::new(
            size,
            settings.ctrl_slots,
            settings.eager_limit,
            settings.heap_size,
        )?
        .with_malloc_arena(if settings.heap_malloc {
            settings.heap_malloc_size
        } else {
            0
        })?;
        let (heap, dev) = match make {
            Some(make) => {
                let heap = Heap::new(lay)?;
                let dev = make(boot.as_dyn(), heap.base(), heap.len())?;
                (heap, dev)
            }
            None => {
                let local_job = match &boot {
                    BootHolder::Env(b) if host.is_none() => crate::select::mpirun_local_job(b),
                    _ => None,
                };
                crate::select::build(boot.as_dyn(), &settings, lay, host, local_job.as_deref())?
            }
        };
        if dev.rank() != rank || dev.size() != size {
            return Err(Error::new(
                ErrorClass::Intern,
                "device and bootstrap disagree on rank/size",
            ));
        }
        if dev.caps().max_inline < 8 {
            return Err(Error::new(
                ErrorClass::Intern,
                "device cannot write 8 bytes inline (credits)",
            ));
        }
        let my_key = dev.heap_key(rank);
        let heap_keys = (0..size).map(|p| dev.heap_key(p)).collect();
        let slots = lay.slots;
        if settings.print && rank == 0 {
            settings.print();
            println!(
                "  (effective heap {} bytes, device {}, {} ranks)",
                lay.total,
                dev.caps().name,
                size
            );
            if let Some((b, l)) = heap.malloc_arena() {
                println!("  (malloc arena {:p}..{:p})", b, b.wrapping_add(l));
            }
        }
        let notify_max = (0..size)
            .map(|p| dev.max_notify_data(p).min(rdma_api::NOTIFY_MAX) as u8)
            .collect();
        Ok(Mpi {
            dev,
            boot,
            heap,
            lay,
            rank,
            size,
            my_key,
            heap_keys,
            reqs: Requests::default(),
            q: Queues::default(),
            sent: vec![0; size],
            credit: vec![0; size],
            inflight: vec![false; size * slots],
            ctrl_inflight: 0,
            data_inflight: 0,
            fifo: (0..size).map(|_| VecDeque::new()).collect(),
            queued: 0,
            consumed: vec![0; size],
            reported: vec![0; size],
            credit_batch: (slots as u64 / 4).max(1),
            events: Vec::with_capacity(256),
            // A few unexpected-message buffers up front, so the small-message path does not
            // allocate even when a message arrives before its receive is posted.
            pool: (0..4)
                .map(|_| Vec::with_capacity(lay.payload_max()))
                .collect(),
            errh: [ErrHandler::Fatal; 2],
            backoff: Backoff::for_job(size),
            direct: None,
            notify_max,
            settings,
        })
    }

    /// Rank of this process in MPI_COMM_WORLD.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Size of MPI_COMM_WORLD.
    pub fn size(&self) -> usize {
        self.size
    }
    /// The effective settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// (p2p context id, size, my rank) of `comm`. Errors: MPI_ERR_COMM.
    #[inline]
    pub(crate) fn comm_info(&self, comm: Comm) -> Result<(u32, usize, i32)> {
        match comm {
            Comm::WORLD => Ok((CTX_WORLD, self.size, self.rank as i32)),
            Comm::SELF => Ok((CTX_SELF, 1, 0)),
            _ => Err(Error::new(
                ErrorClass::Comm,
                format!("invalid communicator (handle {})", comm.0),
            )),
        }
    }

    /// World rank of rank `r` (valid) of the communicator with context `ctx`.
    #[inline]
    pub(crate) fn world_rank(&self, ctx: u32, r: i32) -> usize {
        if ctx & !1 == CTX_SELF {
            self.rank
        } else {
            r as usize
        }
    }

    /// MPI_Comm_rank. Errors: MPI_ERR_COMM for an unknown communicator.
    pub fn comm_rank(&self, comm: Comm) -> Result<i32> {
        Ok(self.comm_info(comm)?.2)
    }
    /// MPI_Comm_size. Errors: MPI_ERR_COMM.
    pub fn comm_size(&self, comm: Comm) -> Result<i32> {
        Ok(self.comm_info(comm)?.1 as i32)
    }

    fn check_count(count: i32) -> Result<()> {
        if count < 0 {
            return Err(Error::new(
                ErrorClass::Count,
                format!("invalid count {count} (must be non-negative)"),
            ));
        }
        Ok(())
    }

    fn check_buf(buf: *const u8, count: i32) -> Result<()> {
        if buf.is_null() && count > 0 {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("null buffer with count {count}"),
            ));
        }
        Ok(())
    }

    fn check_tag(tag: i32, any_ok: bool) -> Result<()> {
        if (any_ok && tag == crate::ANY_TAG) || (0..=crate::TAG_UB).contains(&tag) {
            return Ok(());
        }
        Err(Error::new(
            ErrorClass::Tag,
            format!("invalid tag {tag} (valid tags are 0..={})", crate::TAG_UB),
        ))
    }

    fn check_rank(r: i32, n: usize, any_ok: bool) -> Result<()> {
        if r == crate::PROC_NULL
            || (any_ok && r == crate::ANY_SOURCE)
            || (r >= 0 && (r as usize) < n)
        {
            return Ok(());
        }
        Err(Error::new(
            ErrorClass::Rank,
            format!("invalid rank {r} in a communicator of size {n}"),
        ))
    }

    /// MPI_Isend (standard mode, MPI-4.1 §3.7.2). Messages up to the eager limit are
    /// copied out at once (the request is complete on return); larger ones use the
    /// rendezvous and complete when the DATA has left the buffer. Errors: MPI_ERR_COMM,
    /// MPI_ERR_COUNT (negative count), MPI_ERR_RANK (dest not in 0..size and not
    /// MPI_PROC_NULL), MPI_ERR_TAG (tag < 0 or > TAG_UB), MPI_ERR_BUFFER (null buffer with
    /// count > 0).
    ///
    /// # Safety
    /// `buf` must be valid for reads of `count * dt.size()` bytes until the request completes.
    pub unsafe fn isend(
        &mut self,
        buf: *const u8,
        count: i32,
        dt: Datatype,
        dest: i32,
        tag: i32,
        comm: Comm,
    ) -> Result<Request> {
        let (ctx, n, me) = self.comm_info(comm)?;
        Self::check_count(count)?;
        Self::check_rank(dest, n, false)?;
        Self::check_tag(tag, false)?;
        Self::check_buf(buf, count)?;
        if dest == crate::PROC_NULL {
            return self.done_request(proc_null_status()).map(Request);
        }
        let len = count as usize * dt.size();
        let wd = self.world_rank(ctx, dest);
        // SAFETY: forwarded caller contract.
        unsafe { self.isend_raw(buf, len, wd, ctx, me, tag) }.map(Request)
    }

    /// MPI_Irecv (MPI-4.1 §3.7.2). `source` may be MPI_ANY_SOURCE or MPI_PROC_NULL, `tag`
    /// may be MPI_ANY_TAG. Errors as [`Mpi::isend`]; truncation is reported at completion
    /// (MPI_ERR_TRUNCATE, status count = bytes written).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `count * dt.size()` bytes until the request
    /// completes.
    pub unsafe fn irecv(
        &mut self,
        buf: *mut u8,
        count: i32,
        dt: Datatype,
        source: i32,
        tag: i32,
        comm: Comm,
    ) -> Result<Request> {
        let (ctx, n, _) = self.comm_info(comm)?;
        Self::check_count(count)?;
        Self::check_rank(source, n, true)?;
        Self::check_tag(tag, true)?;
        Self::check_buf(buf, count)?;
        if source == crate::PROC_NULL {
            return self.done_request(proc_null_status()).map(Request);
        }
        let len = count as usize * dt.size();
        let env = Envelope {
            ctx,
            src: source,
            tag,
        };
        // SAFETY: forwarded caller contract.
        unsafe { self.irecv_raw(buf, len, env) }.map(Request)
    }

    /// MPI_Send: [`Mpi::isend`] + [`Mpi::wait`].
    ///
    /// # Safety
    /// As [`Mpi::isend`], for the duration of the call.
    pub unsafe fn send(
        &mut self,
        buf: *const u8,
        count: i32,
        dt: Datatype,
        dest: i32,
        tag: i32,
        comm: Comm,
    ) -> Result<()> {
        let (ctx, n, me) = self.comm_info(comm)?;
        Self::check_count(count)?;
        Self::check_rank(dest, n, false)?;
        Self::check_tag(tag, false)?;
        Self::check_buf(buf, count)?;
        if dest == crate::PROC_NULL {
            return Ok(());
        }
        let len = count as usize * dt.size();
        let wd = self.world_rank(ctx, dest);
        // SAFETY: forwarded caller contract; the wait below ends the buffer's use. An
        // eager send is complete at once and needs no request.
        match unsafe { self.start_send(buf, len, wd, ctx, me, tag) }? {
            None => Ok(()),
            Some(id) => self.wait(Request(id)).map(|_| ()),
        }
    }

    /// MPI_Recv: [`Mpi::irecv`] + [`Mpi::wait`]. Errors also MPI_ERR_TRUNCATE.
    ///
    /// Fast path (no request, no posted-queue entry) when no receive is posted: a matching
    /// unexpected SHORT is copied out at once; otherwise the receive waits as the engine's
    /// [`Direct`] receive, which an arriving SHORT fills straight from the device's event
    /// (an inline SHORT: from the ring entry's copy) and a REQ turns into a rendezvous
    /// request. With receives posted it is [`Mpi::irecv`] + [`Mpi::wait`].
    ///
    /// # Safety
    /// As [`Mpi::irecv`], for the duration of the call.
    pub unsafe fn recv(
        &mut self,
        buf: *mut u8,
        count: i32,
        dt: Datatype,
        source: i32,
        tag: i32,
        comm: Comm,
    ) -> Result<Status> {
        let (ctx, n, _) = self.comm_info(comm)?;
        Self::check_count(count)?;
        Self::check_rank(source, n, true)?;
        Self::check_tag(tag, true)?;
        Self::check_buf(buf, count)?;
        if source == crate::PROC_NULL {
            return Ok(proc_null_status());
        }
        let len = count as usize * dt.size();
        let env = Envelope {
            ctx,
            src: source,
            tag,
        };
        if !self.q.posted.is_empty() || self.direct.is_some() {
            // SAFETY: forwarded caller contract; the wait below ends the buffer's use.
            let id = unsafe { self.irecv_raw(buf, len, env) }?;
            return self.wait(Request(id));
        }
        if !self.q.unexpected.is_empty() {
            if let Some(u) = self.q.take_unexpected(&env) {
                return match u.body {
                    Body::Short(v) => {
                        // SAFETY: caller contract (buf valid for len bytes).
                        let r = unsafe { copy_short(buf, len, &u.env, &v) };
                        self.recycle(v);
                        r
                    }
                    Body::Req {
                        peer,
                        sreq,
                        len: total,
                    } => {
                        let id = self.reqs.alloc(State::Posted, buf, len)?;
                        self.start_rndv_recv(id, u.env, peer, sreq, total)?;
                        self.wait(Request(id))
                    }
                };
            }
        }
        self.direct = Some(Direct {
            env,
            buf,
            len,
            outcome: DirectOutcome::Waiting,
        });
        let r = self.block_until(|m| {
            !matches!(
                m.direct,
                Some(Direct {
                    outcome: DirectOutcome::Waiting,
                    ..
                })
            )
        });
        let d = self.direct.take().expect("direct receive in progress");
        r?;
        match d.outcome {
            DirectOutcome::Done(res) => res,
            DirectOutcome::Rndv(id) => self.wait(Request(id)),
            DirectOutcome::Waiting => unreachable!("block_until returned"),
        }
    }

    fn check_request(&self, req: Request) -> Result<()> {
        if self.reqs.get(req.0).is_none() {
            return Err(Error::new(
                ErrorClass::Request,
                format!("invalid request handle {}", req.0),
            ));
        }
        Ok(())
    }

    /// Frees a completed request and returns its outcome.
    fn finish(&mut self, id: u32) -> Result<Status> {
        let r = self.reqs.get_mut(id).expect("live request");
        let st = r.status;
        let err = r.error.take();
        self.reqs.release(id);
        match err {
            Some(e) => Err(e),
            None => Ok(st),
        }
    }

    #[inline]
    pub(crate) fn is_done(&self, id: u32) -> bool {
        self.reqs.get(id).is_none_or(|r| r.state == State::Done)
    }

    /// MPI_Wait (MPI-4.1 §3.7.3): completes `req` and frees it. On error (e.g.
    /// MPI_ERR_TRUNCATE) the request is freed too and the status is lost. Errors:
    /// MPI_ERR_REQUEST for an unknown request; MPI_ERR_OTHER when a peer is lost;
    /// MPI_ERR_INTERN on a protocol violation.
    pub fn wait(&mut self, req: Request) -> Result<Status> {
        self.check_request(req)?;
        let id = req.0;
        if !self.is_done(id) {
            self.block_until(|m| m.is_done(id))?;
        }
        self.finish(id)
    }

    /// MPI_Test: `Some(status)` (request freed) if complete, else `None` after one progress
    /// step. Errors as [`Mpi::wait`].
    pub fn test(&mut self, req: Request) -> Result<Option<Status>> {
        self.check_request(req)?;
        if !self.is_done(req.0) {
            self.progress()?;
            if !self.is_done(req.0) {
                return Ok(None);
            }
        }
        self.finish(req.0).map(Some)
    }

    /// MPI_Waitall: completes all; `statuses[i]` gets each status (with `error` set). If any
    /// request failed, returns MPI_ERR_IN_STATUS (`statuses[i].error` says which). Errors:
    /// MPI_ERR_REQUEST (unknown request, nothing is completed), MPI_ERR_ARG (fewer
    /// statuses than requests).
    pub fn waitall(&mut self, reqs: &[Request], statuses: &mut [Status]) -> Result<()> {
        if statuses.len() < reqs.len() {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("{} statuses for {} requests", statuses.len(), reqs.len()),
            ));
        }
        for &r in reqs {
            self.check_request(r)?;
        }
        let mut k = 0;
        self.block_until(|m| {
            while k < reqs.len() && m.is_done(reqs[k].0) {
                k += 1;
            }
            k == reqs.len()
        })?;
        let mut failed = false;
        for (i, &r) in reqs.iter().enumerate() {
            if self.reqs.get(r.0).is_none() {
                // The same handle listed twice: already completed above.
                continue;
            }
            let st = self.reqs.get(r.0).expect("live").status;
            match self.finish(r.0) {
                Ok(mut st) => {
                    st.error = 0;
                    statuses[i] = st;
                }
                Err(e) => {
                    failed = true;
                    // Keep source/tag/count (e.g. of a truncated receive) with the class.
                    statuses[i] = st;
                    statuses[i].error = e.class as i32;
                }
            }
        }
        if failed {
            return Err(Error::new(
                ErrorClass::InStatus,
                "one or more requests failed (see the statuses)",
            ));
        }
        Ok(())
    }

    fn probe_pattern(&self, source: i32, tag: i32, comm: Comm) -> Result<Option<Envelope>> {
        let (ctx, n, _) = self.comm_info(comm)?;
        Self::check_rank(source, n, true)?;
        Self::check_tag(tag, true)?;
        if source == crate::PROC_NULL {
            return Ok(None);
        }
        Ok(Some(Envelope {
            ctx,
            src: source,
            tag,
        }))
    }

    fn peek(&self, env: &Envelope) -> Option<Status> {
        self.q.peek_unexpected(env).map(|u| Status {
            source: u.env.src,
            tag: u.env.tag,
            error: 0,
            count: u.len(),
            cancelled: false,
        })
    }

    /// MPI_Iprobe (MPI-4.1 §3.8.1): `Some(status)` (count = full message size in bytes) if a
    /// matching message is pending. Errors: MPI_ERR_COMM, MPI_ERR_RANK, MPI_ERR_TAG.
    pub fn iprobe(&mut self, source: i32, tag: i32, comm: Comm) -> Result<Option<Status>> {
        let Some(env) = self.probe_pattern(source, tag, comm)? else {
            return Ok(Some(proc_null_status()));
        };
        if let Some(s) = self.peek(&env) {
            return Ok(Some(s));
        }
        self.progress()?;
        Ok(self.peek(&env))
    }

    /// MPI_Probe: blocks until a matching message is pending. Errors as [`Mpi::iprobe`].
    pub fn probe(&mut self, source: i32, tag: i32, comm: Comm) -> Result<Status> {
        let Some(env) = self.probe_pattern(source, tag, comm)? else {
            return Ok(proc_null_status());
        };
        self.block_until(|m| m.peek(&env).is_some())?;
        Ok(self.peek(&env).expect("probed message"))
    }

    /// MPI_Alloc_mem (MPI-4.1 §9.2): `size` bytes (64-byte aligned) from the heap (falls
    /// back to the system allocator when the heap is exhausted). Errors: MPI_ERR_NO_MEM.
    pub fn alloc_mem(&mut self, size: usize) -> Result<*mut u8> {
        self.heap.alloc(size)
    }

    /// The heap's malloc arena (base, length) when `MPI_HEAP_MALLOC=1` (see
    /// [`crate::heap`]): the C layer's interposed allocator serves large blocks from it.
    /// Its mapping outlives the engine (until the process exits).
    pub fn malloc_arena(&self) -> Option<(*mut u8, usize)> {
        self.heap.malloc_arena()
    }

    /// MPI_Free_mem. Errors: MPI_ERR_ARG for a pointer not from [`Mpi::alloc_mem`].
    ///
    /// # Safety
    /// No pending operation may use the memory.
    pub unsafe fn free_mem(&mut self, ptr: *mut u8) -> Result<()> {
        // SAFETY: forwarded caller contract (the block is no longer in use).
        unsafe { self.heap.free(ptr) }
    }

    fn errh_index(&self, comm: Comm) -> Result<usize> {
        self.comm_info(comm)?;
        Ok(comm.0 as usize)
    }

    /// MPI_Comm_set_errhandler. Errors: MPI_ERR_COMM.
    pub fn set_errhandler(&mut self, comm: Comm, h: ErrHandler) -> Result<()> {
        let i = self.errh_index(comm)?;
        self.errh[i] = h;
        Ok(())
    }

    /// MPI_Comm_get_errhandler. Errors: MPI_ERR_COMM.
    pub fn errhandler(&self, comm: Comm) -> Result<ErrHandler> {
        Ok(self.errh[self.errh_index(comm)?])
    }

    /// MPI_Abort (MPI-4.1 §11.4): tells the launcher (PMI abort) and exits the process with
    /// `code` (as given, like MPICH); the launcher stops the other ranks. Without a launcher
    /// the message is printed and the process exits.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        match &mut self.boot {
            BootHolder::Env(b) => {
                let _ = b.abort(code, msg);
            }
            BootHolder::Custom(_) => {
                if !msg.is_empty() {
                    eprintln!("rank {}: abort({code}): {msg}", self.rank);
                }
            }
        }
        std::process::exit(code)
    }

    /// MPI_Finalize (MPI-4.1 §11.2.2): completes queued CTRL messages and outstanding DATA
    /// writes, synchronizes all ranks (barrier), shuts the device down collectively,
    /// finalizes PMI and unmaps the heap. Errors: MPI_ERR_OTHER (device, PMI).
    pub fn finalize(mut self) -> Result<()> {
        self.block_until(|m| m.queued == 0 && m.ctrl_inflight == 0 && m.data_inflight == 0)?;
        self.barrier(Comm::WORLD)?;
        self.block_until(|m| m.queued == 0 && m.ctrl_inflight == 0)?;
        self.dev.finalize()?;
        if let BootHolder::Env(b) = &mut self.boot {
            b.finalize()?;
        }
        Ok(())
        // Dropping `self` drops the device, then unmaps the heap.
    }

    /// Makes progress once (poll the device, handle its events, push queued CTRL
    /// messages). Returns the number of device events handled. Errors: MPI_ERR_OTHER (lost
    /// peer), MPI_ERR_INTERN (protocol violation).
    pub fn progress(&mut self) -> Result<usize> {
        self.progress_once()
    }

    /// Blocks, making progress with back-off (spin, then yield, then `Device::wait` with a
    /// timeout growing from 1 to 10 ms), until `done(self)`.
    pub(crate) fn block_until(&mut self, mut done: impl FnMut(&Mpi) -> bool) -> Result<()> {
        let b = self.backoff;
        let mut idle_since: Option<Instant> = None;
        let mut wait = b.wait_min;
        let mut idle_polls = 0u32;
        // The first 64 idle polls spin without reading the clock: a message that arrives
        // soon (ping-pong) is handled without any clock read on the path. No spinning at
        // all when the back-off says so (oversubscribed: yield at once).
        let spin_first = !b.spin.is_zero();
        let mut spinning = spin_first;
        loop {
            if done(self) {
                return Ok(());
            }
            if self.progress_once()? > 0 || self.dev.busy() {
                idle_since = None;
                wait = b.wait_min;
                idle_polls = 0;
                spinning = spin_first;
                continue;
            }
            // Read the clock only every 64th idle poll while spinning: a shared-memory poll
            // costs a few ns, a clock read ~20 ns, and it delays seeing the next message.
            idle_polls = idle_polls.wrapping_add(1);
            // No `pause` (spin_loop) between these polls either: on this EPYC one costs
            // ~25 ns, which would add ~12 ns on average to noticing a message.
            if spinning && !idle_polls.is_multiple_of(64) {
                continue;
            }
            let now = Instant::now();
            let idle = now - *idle_since.get_or_insert(now);
            spinning = idle < b.spin;
            if spinning {
                std::hint::spin_loop();
            } else if idle < b.yield_until {
                std::thread::yield_now();
            } else {
                self.dev.wait(wait)?;
                wait = (wait * 2).min(b.wait_max);
            }
        }
    }

    /// A request that is already complete with status `st`.
    pub(crate) fn done_request(&mut self, st: Status) -> Result<u32> {
        let id = self.reqs.alloc(State::Done, std::ptr::null_mut(), 0)?;
        self.reqs.get_mut(id).expect("just allocated").status = st;
        Ok(id)
    }
}

/// Status of a receive from MPI_PROC_NULL (MPI-4.1 §3.10): source PROC_NULL, tag ANY_TAG,
/// count 0.
pub(crate) fn proc_null_status() -> Status {
    Status {
        source: crate::PROC_NULL,
        tag: crate::ANY_TAG,
        error: 0,
        count: 0,
        cancelled: false,
    }
}

use crate::heap::{Heap, HeapLayout};
use crate::matching::{Body, Direct, DirectOutcome, Envelope, Queues};
use crate::progress::copy_short;
use crate::protocol::Header;
use crate::request::{Requests, State};
use crate::settings::Settings;
use crate::ErrorClass;
use rdma_api::{Bootstrap, Device, Event, RegionKey};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[allow(dead_code)]
fn _unused(_: Error, _: Op) {}
