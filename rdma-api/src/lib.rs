//! # rdma-api: the generic one-sided remote-write primitive
//!
//! This crate is the contract between mpi-core (protocols, matching) and the devices
//! (`device-tcp`, later `device-shm` and `device-verbs`). It has no MPI knowledge: a device
//! moves opaque bytes from a local registered region to a (peer, remote region key, offset)
//! and reports two kinds of completion events. It follows the primitive of the MPI-MPC work:
//!
//! | MPI-MPC                                   | here                                          |
//! |-------------------------------------------|-----------------------------------------------|
//! | `RDMA_SEND(nsrc, ndst, plad, prad, len, ctrl, sid, rid, ns, nr)` | [`Device::write`] with a [`Write`] |
//! | `RDMA_SENT_NOTIFY(ctrl, sid)`             | [`Event::Sent`] (sender: source reusable)     |
//! | `RDMA_RECV_NOTIFY(nsrc, ctrl, rid)`       | [`Event::Recv`] (receiver: data in place)     |
//! | `RDMA_NET_LOOKUP(blocking)`               | [`Device::poll`] (non-blocking) and [`Device::wait`] (blocking) |
//!
//! ## How each transport maps onto the trait
//!
//! * **InfiniBand verbs / RoCE** (`device-verbs`): a region is an `ibv_mr` registered on the
//!   protection domain, its [`RegionKey`] is the `rkey` (the peer's keys travel through the
//!   bootstrap store at start-up). [`Device::write`] posts an `IBV_WR_RDMA_WRITE_WITH_IMM`
//!   (or `IBV_WR_RDMA_WRITE` when `imm` is `None`) on the RC queue pair of the peer; `sid`
//!   becomes the work request's `wr_id` with `IBV_SEND_SIGNALED`, and the send-queue
//!   completion is [`Event::Sent`]. The 32-bit `imm` is the immediate data; the receive
//!   completion on the receive CQ (`IBV_WC_RECV_RDMA_WITH_IMM`, `qp_num` → peer, `byte_len`)
//!   is [`Event::Recv`]. `poll` is `ibv_poll_cq` on both CQs, `wait` is
//!   `ibv_req_notify_cq` + the completion channel's fd. Writes without `sid` up to
//!   [`Caps::max_inline`] map onto `IBV_SEND_INLINE`.
//! * **TCP** (`device-tcp`): one stream per peer pair; a write is a frame header
//!   (key, offset, length, imm) followed by the payload; the receiver validates the
//!   target range against its region table and `recv`s the payload straight into the region
//!   (no intermediate buffer). [`Event::Sent`] is raised once the last byte is in the
//!   kernel's socket buffer. Streams are ordered, so writes from one peer are applied in
//!   the order they were issued.
//! * **Shared memory** (`device-shm`): each region in the heap is mapped by every rank of
//!   the host; a write is a `memcpy` by the sender followed by a notification flag in a
//!   queue in shared memory written after the data.
//!
//! ## Ordering guarantee every device must give
//! Writes issued by one rank to one peer are *applied and notified in issue order*
//! (like an RC queue pair): when the receiver sees the [`Event::Recv`] of write *n*, the
//! bytes of every earlier write from that sender to it are in place. Events of one kind
//! from one peer are delivered in issue order. mpi-core's non-overtaking rule relies on this.
//!
//! ## Self writes
//! A rank may write to itself (`peer == rank()`); devices implement it as a local copy
//! followed by the same events, so mpi-core has no special case for self messages.

use std::fmt;
use std::time::Duration;

/// The key of a registered memory region. Local keys come from [`Device::register`];
/// the key of a peer's heap from [`Device::heap_key`]; other remote keys arrive inside
/// protocol messages (e.g. an RSP) and are therefore untrusted: the device validates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionKey(pub u32);

/// One remote write: `len` bytes from (`local_key`, `local_offset`) in this rank's memory to
/// (`remote_key`, `remote_offset`) in the memory of `peer`. Offsets and lengths are in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// Destination rank (0 .. [`Device::size`]); may be this rank.
    pub peer: usize,
    /// Local region holding the source bytes.
    pub local_key: RegionKey,
    /// Byte offset of the source inside the local region.
    pub local_offset: usize,
    /// Region key at the peer (its heap key or a key it sent us).
    pub remote_key: RegionKey,
    /// Byte offset of the destination inside the remote region.
    pub remote_offset: usize,
    /// Number of bytes; 0 is allowed (a pure notification).
    pub len: usize,
    /// Receiver notification (the "rid" of RDMA_SEND, carried as the 32-bit control word
    /// like verbs' immediate data): if `Some`, the peer gets [`Event::Recv`] with this word
    /// once all `len` bytes are in place. If `None`, the peer is not notified.
    pub imm: Option<u32>,
    /// Sender notification (the "sid"): if `Some`, this rank gets [`Event::Sent`] with this
    /// id once the source bytes may be reused. If `None`, `len` must be at most
    /// [`Caps::max_inline`] and the device copies the source before `write` returns.
    pub sid: Option<u64>,
}

/// A completion event returned by [`Device::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// RDMA_SENT_NOTIFY: the write issued with this `sid` has left the source buffer.
    Sent {
        /// The `sid` given in [`Write::sid`].
        sid: u64,
    },
    /// RDMA_RECV_NOTIFY: a write from `peer` carrying `imm` has landed in our memory.
    Recv {
        /// The writing rank.
        peer: usize,
        /// The control word given in [`Write::imm`].
        imm: u32,
        /// Number of bytes the write carried.
        len: usize,
    },
    /// A notification with inline bytes from [`Device::notify`] (no memory was written).
    RecvInline {
        /// The notifying rank.
        peer: usize,
        /// The control word given to [`Device::notify`].
        imm: u32,
        /// Number of valid bytes in `data` (at most [`NOTIFY_MAX`]).
        len: usize,
        /// The bytes given to [`Device::notify`], zero-padded.
        data: [u8; NOTIFY_MAX],
    },
}

/// Upper bound of [`Device::max_notify_data`]: the inline bytes an [`Event::RecvInline`]
/// holds (device-shm: one 64-byte notification ring entry minus its 16-byte head).
pub const NOTIFY_MAX: usize = 48;

/// What a device can do; the protocol layer chooses by these (as UCX's transports advertise
/// their capabilities).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Largest write (bytes) that may be issued without `sid` (copied by the device).
    pub max_inline: usize,
    /// Largest single write in bytes.
    pub max_write: usize,
    /// Human-readable device name ("tcp", "shm", "verbs").
    pub name: &'static str,
}

/// Errors a device reports. mpi-core turns them into MPI error classes (usually
/// MPI_ERR_OTHER) and, under the default error handler, aborts the job.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The connection to `peer` ended before an orderly [`Device::finalize`]: the peer
    /// process died or the network failed.
    #[error("connection to rank {peer} lost: {reason}")]
    PeerLost {
        /// The rank that is gone.
        peer: usize,
        /// What the device observed.
        reason: String,
    },
    /// A key, offset or length (local, or received from the wire) does not lie inside a
    /// registered region.
    #[error("invalid memory access: {0}")]
    InvalidAccess(String),
    /// A peer sent bytes that do not follow the device's wire format.
    #[error("protocol violation from rank {peer}: {reason}")]
    Protocol {
        /// The rank that sent the bytes.
        peer: usize,
        /// What was wrong.
        reason: String,
    },
    /// Bad argument from the caller (peer out of range, inline write too large, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The bootstrap store failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// Any other operating-system error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, DeviceError>;

/// The remote-write device. One instance per rank; not shared between threads (`&mut self`).
///
/// Lifecycle: a device is created by its crate's constructor from a [`Bootstrap`] store and
/// the rank's heap (which it registers first, so that [`Device::heap_key`] works for every
/// peer as soon as the constructor returns); it is used through `write`/`poll`/`wait`; it ends
/// with [`Device::finalize`], an orderly, collective shutdown.
pub trait Device: Send {
    /// This rank (0-based).
    fn rank(&self) -> usize;
    /// Number of ranks in the job.
    fn size(&self) -> usize;
    /// Capabilities of the device.
    fn caps(&self) -> Caps;

    /// Registers `len` bytes at `base` and returns the region's key.
    ///
    /// # Safety
    /// `base .. base+len` must be valid for reads and writes until [`Device::deregister`]
    /// is called with the returned key; peers may write into it at any time until then.
    unsafe fn register(&mut self, base: *mut u8, len: usize) -> Result<RegionKey>;

    /// Forgets a region registered by [`Device::register`]. Later writes that target it are
    /// rejected with [`DeviceError::InvalidAccess`] (at the receiver, a protocol error).
    fn deregister(&mut self, key: RegionKey) -> Result<()>;

    /// The key of `peer`'s heap (the region given to the constructor), valid from start-up.
    fn heap_key(&self, peer: usize) -> RegionKey;

    /// The key under which `peer` must address our region `key` (what to send it, e.g. in
    /// an RSP). The identity for a device with one key space; a device that routes peers to
    /// different transports (shared memory on the host, a network otherwise) answers with
    /// the key of the transport that reaches `peer`.
    fn key_for_peer(&self, key: RegionKey, _peer: usize) -> RegionKey {
        key
    }

    /// Starts a remote write (RDMA_SEND). Returns once the write is queued; completion is
    /// reported by events. Errors: [`DeviceError::InvalidArgument`] for a bad peer, a local
    /// range outside its region, or an inline write larger than [`Caps::max_inline`];
    /// [`DeviceError::PeerLost`] if the peer is gone.
    fn write(&mut self, w: &Write) -> Result<()>;

    /// Makes progress without blocking and appends the completion events to `events`
    /// (RDMA_NET_LOOKUP, non-blocking). Returns the number of events appended.
    fn poll(&mut self, events: &mut Vec<Event>) -> Result<usize>;

    /// Blocks until an event may be available, until `timeout` has passed, or spuriously
    /// (RDMA_NET_LOOKUP, blocking). Callers then [`Device::poll`]. Used by the progress
    /// engine's back-off so that idle ranks leave the CPU to others.
    fn wait(&mut self, timeout: Duration) -> Result<()>;

    /// Largest `data` that [`Device::notify`] carries to `peer` (at most [`NOTIFY_MAX`]);
    /// 0 when the device has no inline notifications to that peer (the default). Devices
    /// whose notifications are a queue entry in the receiver's memory (device-shm) offer
    /// them so that a tiny message costs the receiver one cache line; a verbs device could
    /// map them onto a SEND with inline data.
    fn max_notify_data(&self, _peer: usize) -> usize {
        0
    }

    /// Sends a notification that carries `data` (at most [`Device::max_notify_data`]
    /// bytes) inline, without writing any memory: `peer` gets [`Event::RecvInline`] with
    /// `imm` and the bytes. Ordered like a write with `imm` (issue order with every other
    /// write and notification to `peer`). `data` is copied before `notify` returns; no
    /// [`Event::Sent`] is raised. Errors: [`DeviceError::InvalidArgument`] for a bad peer or
    /// `data` too long (always, by default: the device has no inline notifications);
    /// [`DeviceError::PeerLost`].
    fn notify(&mut self, peer: usize, imm: u32, data: &[u8]) -> Result<()> {
        let _ = imm;
        Err(DeviceError::InvalidArgument(format!(
            "notify with {} bytes to rank {peer}: this device has no inline notifications",
            data.len()
        )))
    }

    /// Whether [`Device::write_bytes`] is available towards `peer` (default: false).
    fn can_write_bytes(&self, _peer: usize) -> bool {
        false
    }

    /// A write whose source is ordinary (unregistered) memory, gathered from `parts`
    /// (their concatenation lands at (`remote_key`, `remote_offset`) at `peer`), copied
    /// before the call returns (no [`Event::Sent`]); with `imm`, the peer gets
    /// [`Event::Recv`] (len = total bytes) as for [`Device::write`], in the same order as
    /// every other write and notification to `peer`. For devices whose write is a CPU copy
    /// (device-shm: straight into the peer's heap mapping), this saves staging the bytes in
    /// a registered buffer first (like verbs' inline sends, which also take unregistered
    /// memory). Errors as [`Device::write`]; by default [`DeviceError::InvalidArgument`]
    /// (unsupported: see [`Device::can_write_bytes`]).
    fn write_bytes(
        &mut self,
        peer: usize,
        parts: [&[u8]; 2],
        remote_key: RegionKey,
        remote_offset: usize,
        imm: Option<u32>,
    ) -> Result<()> {
        let _ = (parts, remote_key, remote_offset, imm);
        Err(DeviceError::InvalidArgument(format!(
            "write_bytes to rank {peer}: not supported by this device"
        )))
    }

    /// Whether the device is in the middle of work that needs further [`Device::poll`] calls
    /// but raises no event yet (e.g. device-shm's pipelined copies: chunks still to stage,
    /// or a chunk copied out since the last call). The progress engine does not back off
    /// (yield, block in [`Device::wait`]) while this is true. Default: false.
    fn busy(&mut self) -> bool {
        false
    }

    /// Orderly shutdown, collective over all ranks: completes every queued write, tells each
    /// peer that this rank is done, and waits until every peer said the same. After this a
    /// closed connection is not an error. Events that arrive meanwhile are discarded.
    fn finalize(&mut self) -> Result<()>;
}

/// The bootstrap key-value store that devices (and mpi-core) use to exchange addresses at
/// start-up: the PMI-1 `put` / `barrier` / `get` of the launcher. Keys up to 64 bytes and
/// values up to 1024 bytes of printable ASCII without spaces or `=` are portable.
pub trait Bootstrap: Send {
    /// This rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Publishes `key = value` (visible to others after the next [`Bootstrap::barrier`]).
    fn put(&mut self, key: &str, value: &str) -> Result<()>;
    /// Collective: waits until every rank has called it; makes earlier puts visible.
    fn barrier(&mut self) -> Result<()>;
    /// Reads a value published by any rank before the last barrier.
    fn get(&mut self, key: &str) -> Result<String>;
}

/// The events of a completed self write (`w.peer == rank`), as the trait's "Self writes"
/// rule asks: `Sent` (if `w.sid`) then `Recv` from `rank` (if `w.imm`), appended to the
/// device's queue of local events. Devices call it after copying the bytes.
pub fn push_self_write_events(w: &Write, rank: usize, events: &mut impl Extend<Event>) {
    if let Some(sid) = w.sid {
        events.extend([Event::Sent { sid }]);
    }
    if let Some(imm) = w.imm {
        events.extend([Event::Recv {
            peer: rank,
            imm,
            len: w.len,
        }]);
    }
}

pub mod thread_kvs;

/// The device conformance suite (feature `conformance`; enabled by the device crates' tests).
#[cfg(feature = "conformance")]
pub mod conformance;

impl fmt::Display for RegionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key#{}", self.0)
    }
}
