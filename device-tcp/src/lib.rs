//! # device-tcp: the rdma-api remote-write device over TCP
//!
//! [`TcpDevice`] implements [`rdma_api::Device`] between any two hosts with one TCP stream
//! per pair of ranks. A write is a frame (a 28-byte little-endian header: remote key,
//! remote offset, length, flags, imm; see the `frame` module) followed by the payload,
//! which is sent straight from the source region with `sendmsg` (no copy) and received
//! straight into the destination region with `recvmsg` (no intermediate buffer) once the
//! receiver has validated the header against its region table.
//!
//! ## Start-up
//! [`TcpDevice::new`] registers the heap as region 0, so [`Device::heap_key`] is
//! `RegionKey(0)` for every peer. It binds a listening socket on an ephemeral port on all
//! interfaces, publishes `hostname,port,ip1;ip2;...` under the bootstrap key
//! `tcp-addr-<rank>`, calls [`Bootstrap::barrier`], then connects: every rank connects to
//! the lower ranks and accepts the higher ones. A peer with the same hostname is reached
//! through 127.0.0.1, others through their published IPv4 addresses in order.
//!
//! ## Settings
//! | environment variable | meaning |
//! |---|---|
//! | `MPI_TCP_IF_ADDR` | IPv4 address(es) to publish, `;`-separated, instead of those of all up, non-loopback interfaces |
//!
//! ## Progress and events
//! A write goes to the kernel at once if the peer's send queue is empty; what does not fit
//! waits in a per-peer FIFO and is pushed by [`Device::poll`], [`Device::wait`] and later
//! writes. [`Event::Sent`] is raised when the kernel has accepted the write's last byte,
//! [`Event::Recv`] when the write's last byte is in the receiver's region. Writes from one
//! rank to another are applied and notified in issue order (TCP is a stream).

mod frame;
mod regions;
mod setup;
mod sys;

use frame::{Header, F_BYE, F_IMM, HDR_LEN};
use rdma_api::{Bootstrap, Caps, Device, DeviceError, Event, RegionKey, Result, Write};
use regions::{Regions, HEAP_KEY};
use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Largest write without `sid` (bytes), copied by the device if it cannot go out at once.
pub const MAX_INLINE: usize = 64 * 1024;
/// Iovecs gathered into one `sendmsg` when flushing a send queue.
const SEND_BATCH: usize = 64;
/// Receive syscalls per peer per poll, so one busy peer cannot starve the others.
const RECV_BUDGET: usize = 16;
/// Owned inline buffers kept for reuse.
const SPARE_BUFFERS: usize = 64;
/// Size of the buffer that drains payloads aimed at a region deregistered mid-frame.
const SCRATCH_LEN: usize = 64 * 1024;

/// One queued (partly sent) frame.
struct Pending {
    /// The encoded header.
    hdr: [u8; HDR_LEN],
    /// Payload start: the caller's source region (`sid` given) or `owned`'s buffer.
    payload: *const u8,
    /// Payload length in bytes.
    len: usize,
    /// Bytes of header + payload already accepted by the kernel.
    done: usize,
    /// Owned copy of the payload for writes without `sid`; empty otherwise.
    owned: Vec<u8>,
    /// Sender notification to raise once the last byte is out.
    sid: Option<u64>,
}

/// Receive state of one stream: a partial header or a payload being received.
struct Rx {
    hdr: [u8; HDR_LEN],
    /// Header bytes received so far (0 while a payload is active).
    hdr_got: usize,
    /// A payload is being received into `dst`, inside region `key`.
    active: bool,
    /// The region the payload lands in. Deregistering exactly this key stops the frame;
    /// other regions may overlap it (several receive buffers in the same memory are
    /// legal), so deregistering one of those must not.
    key: u32,
    dst: *mut u8,
    len: usize,
    got: usize,
    imm: Option<u32>,
    /// The destination region (`key`) was deregistered mid-frame: the rest of the payload
    /// is drained into the device's scratch buffer, then the frame is a protocol error.
    discard: bool,
}

/// Connection state of one peer.
struct Peer {
    /// The stream; `None` for this rank itself, after a failure, or after finalize.
    stream: Option<TcpStream>,
    /// `stream`'s descriptor, or -1.
    fd: RawFd,
    sendq: VecDeque<Pending>,
    rx: Rx,
    bye_recv: bool,
    /// The connection failed (reported once, then skipped).
    lost: bool,
}

impl Peer {
    fn new(stream: Option<TcpStream>) -> Peer {
        Peer {
            fd: stream.as_ref().map_or(-1, |s| s.as_raw_fd()),
            stream,
            sendq: VecDeque::new(),
            rx: Rx {
                hdr: [0; HDR_LEN],
                hdr_got: 0,
                active: false,
                key: 0,
                dst: std::ptr::null_mut(),
                len: 0,
                got: 0,
                imm: None,
                discard: false,
            },
            bye_recv: false,
            lost: false,
        }
    }

    /// Marks the connection failed and closes it; queued writes are dropped (their `Sent`
    /// never comes).
    fn fail(&mut self) {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.fd = -1;
        self.lost = true;
        self.sendq.clear();
        self.rx.active = false;
    }

    /// Closes the connection and returns [`DeviceError::PeerLost`].
    fn lose(&mut self, peer: usize, reason: String) -> DeviceError {
        self.fail();
        DeviceError::PeerLost { peer, reason }
    }

    fn lose_io(&mut self, peer: usize, what: &str, e: io::Error) -> DeviceError {
        self.lose(peer, format!("{what}: {e}"))
    }

    /// Closes the connection and returns [`DeviceError::Protocol`].
    fn violation(&mut self, peer: usize, reason: String) -> DeviceError {
        self.fail();
        DeviceError::Protocol { peer, reason }
    }

    /// Whether this peer still needs our attention (progress) before finalize can end.
    fn busy(&self) -> bool {
        !self.lost && self.stream.is_some() && (!self.sendq.is_empty() || !self.bye_recv)
    }

    /// Pushes queued frames into the socket (gathering up to [`SEND_BATCH`] iovecs per
    /// `sendmsg`) until the queue is empty or the kernel buffer is full. Raises `Sent`
    /// into `events` for every completed write.
    fn flush(
        &mut self,
        peer: usize,
        events: &mut VecDeque<Event>,
        spare: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        while !self.sendq.is_empty() {
            let mut iovs = [sys::IOV_NULL; SEND_BATCH];
            let mut n_iov = 0;
            let mut want = 0usize;
            for p in self.sendq.iter() {
                if n_iov + 2 > SEND_BATCH {
                    break;
                }
                if p.done < HDR_LEN {
                    iovs[n_iov] = sys::iov(p.hdr[p.done..].as_ptr(), HDR_LEN - p.done);
                    n_iov += 1;
                }
                let sent = p.done.saturating_sub(HDR_LEN);
                if p.len > sent {
                    iovs[n_iov] = sys::iov(p.payload.wrapping_add(sent), p.len - sent);
                    n_iov += 1;
                }
                want += HDR_LEN + p.len - p.done;
            }
            // SAFETY: headers live in the queue, which is not modified during the call;
            // payloads are either owned copies in the queue or source ranges validated
            // against the region table at write() time, which the caller keeps valid until
            // Event::Sent (the `sid` contract of rdma_api::Write).
            let mut n = match unsafe { sys::send_vectored(self.fd, &iovs[..n_iov]) } {
                Ok(n) => n,
                Err(e) if is_retry(&e) => return Ok(()),
                Err(e) => return Err(self.lose_io(peer, "send", e)),
            };
            let full = n == want;
            while n > 0 {
                let p = self
                    .sendq
                    .front_mut()
                    .expect("bytes sent for an empty queue");
                let left = HDR_LEN + p.len - p.done;
                if n < left {
                    p.done += n;
                    break;
                }
                n -= left;
                let p = self.sendq.pop_front().expect("front exists");
                complete_send(p, events, spare);
            }
            if !full {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Receives from the stream: headers are validated against `regions`, payloads land
    /// directly in region memory; completed writes with imm raise `Recv` into `events`.
    /// At most [`RECV_BUDGET`] syscalls; stops at the first short read.
    fn receive(
        &mut self,
        peer: usize,
        regions: &Regions,
        scratch: &mut [u8],
        events: &mut Vec<Event>,
    ) -> Result<()> {
        if self.lost || self.bye_recv || self.stream.is_none() {
            return Ok(());
        }
        for _ in 0..RECV_BUDGET {
            let rx = &mut self.rx;
            let mut iovs = [sys::IOV_NULL; 2];
            let (n_iov, want) = if rx.active {
                let rem = rx.len - rx.got;
                let (dst, chunk) = if rx.discard {
                    (scratch.as_mut_ptr(), rem.min(scratch.len()))
                } else {
                    (rx.dst.wrapping_add(rx.got), rem)
                };
                iovs[0] = sys::iov(dst, chunk);
                if chunk == rem {
                    iovs[1] = sys::iov(rx.hdr.as_mut_ptr(), HDR_LEN);
                    (2, rem + HDR_LEN)
                } else {
                    (1, chunk)
                }
            } else {
                let rem = HDR_LEN - rx.hdr_got;
                iovs[0] = sys::iov(rx.hdr[rx.hdr_got..].as_mut_ptr(), rem);
                (1, rem)
            };
            // SAFETY: iovs[0] of an active payload is inside region `rx.key`, validated by
            // Regions::range when its header arrived and still registered (deregistering
            // that key switches the frame to `discard`); registered memory is valid for
            // writes by register's contract. Scratch and header iovecs point into our own
            // buffers.
            let n = match unsafe { sys::recv_vectored(self.fd, &mut iovs[..n_iov]) } {
                Ok(0) => return Err(self.lose(peer, "connection closed by peer before BYE".into())),
                Ok(n) => n,
                Err(e) if is_retry(&e) => return Ok(()),
                Err(e) => return Err(self.lose_io(peer, "recv", e)),
            };
            let mut rest = n;
            if rx.active {
                let take = rest.min(rx.len - rx.got);
                rx.got += take;
                rest -= take;
                if rx.got == rx.len {
                    rx.active = false;
                    if rx.discard {
                        return Err(self.violation(
                            peer,
                            "write into a region deregistered while the write was arriving".into(),
                        ));
                    }
                    if let Some(imm) = rx.imm {
                        events.push(Event::Recv {
                            peer,
                            imm,
                            len: rx.len,
                        });
                    }
                }
            }
            rx.hdr_got += rest;
            if rx.hdr_got == HDR_LEN {
                rx.hdr_got = 0;
                let h = Header::decode(&rx.hdr);
                if h.flags & !(F_IMM | F_BYE) != 0 {
                    return Err(self.violation(peer, format!("unknown frame flags {:#x}", h.flags)));
                }
                if h.flags & F_BYE != 0 {
                    if h != Header::bye() {
                        return Err(self.violation(peer, format!("malformed BYE frame {h:?}")));
                    }
                    self.bye_recv = true;
                    return Ok(());
                }
                let Some(dst) = regions.range(h.key, h.offset, h.len) else {
                    return Err(self.violation(
                        peer,
                        format!(
                            "write of {} bytes at offset {} of key#{} is outside every registered region",
                            h.len, h.offset, h.key
                        ),
                    ));
                };
                let imm = (h.flags & F_IMM != 0).then_some(h.imm);
                if h.len == 0 {
                    if let Some(imm) = imm {
                        events.push(Event::Recv { peer, imm, len: 0 });
                    }
                } else {
                    let rx = &mut self.rx;
                    rx.active = true;
                    rx.key = h.key;
                    rx.dst = dst;
                    // The range check guarantees len <= region length <= usize::MAX.
                    rx.len = h.len as usize;
                    rx.got = 0;
                    rx.imm = imm;
                    rx.discard = false;
                }
            }
            if n < want {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Finishes a fully sent frame: raises `Sent` and recycles an owned buffer.
#[inline]
fn complete_send(p: Pending, events: &mut VecDeque<Event>, spare: &mut Vec<Vec<u8>>) {
    if let Some(sid) = p.sid {
        events.push_back(Event::Sent { sid });
    }
    if p.owned.capacity() > 0 && spare.len() < SPARE_BUFFERS {
        spare.push(p.owned);
    }
}

/// Errors after which the operation is simply tried again later.
#[inline]
fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// The TCP device of one rank. Create it with [`TcpDevice::new`]; use it through
/// [`rdma_api::Device`]; end it with [`Device::finalize`] (dropping it without finalize
/// closes the connections abruptly, which peers see as [`DeviceError::PeerLost`]).
pub struct TcpDevice {
    rank: usize,
    size: usize,
    regions: Regions,
    /// Index = rank; the entry of this rank has no stream.
    peers: Vec<Peer>,
    /// Events not yet handed out by poll: `Sent` of writes completed outside poll, and the
    /// events of self writes.
    local: VecDeque<Event>,
    /// Recycled buffers for inline copies.
    spare: Vec<Vec<u8>>,
    /// Drain buffer for frames whose region was deregistered mid-frame (allocated then).
    scratch: Vec<u8>,
    /// Reused pollfd array of [`Device::wait`].
    pollfds: Vec<libc::pollfd>,
    /// Peer the next receive pass starts at (round robin, for fairness).
    next_rx: usize,
    finalized: bool,
}

// SAFETY: the raw pointers inside (region bases, queued payload sources, the active receive
// destination) point into memory the caller registered or handed to write() and promised
// to keep valid; the device has no thread affinity and is used through &mut only, so moving
// it to another thread is sound.
unsafe impl Send for TcpDevice {}

impl TcpDevice {
    /// Creates the device of this rank and connects it to every peer (collective over all
    /// ranks of `boot`). `heap_base .. heap_base + heap_len` (bytes) is registered as the
    /// first region: its key is `RegionKey(0)` on every rank, so [`Device::heap_key`]
    /// returns `RegionKey(0)` for every peer.
    ///
    /// Errors: [`DeviceError::Bootstrap`] if the store fails or a peer does not connect
    /// within 60 s; [`DeviceError::PeerLost`] if a peer cannot be reached;
    /// [`DeviceError::InvalidArgument`] for a malformed `MPI_TCP_IF_ADDR`;
    /// [`DeviceError::Io`] for socket errors.
    ///
    /// # Safety
    /// `heap_base .. heap_base + heap_len` must be valid for reads and writes for the whole
    /// lifetime of the device (peers write into it whenever the device makes progress), or
    /// until the heap is deregistered with [`Device::deregister`]`(RegionKey(0))`.
    pub unsafe fn new(
        boot: &mut dyn Bootstrap,
        heap_base: *mut u8,
        heap_len: usize,
    ) -> Result<TcpDevice> {
        let (rank, size) = (boot.rank(), boot.size());
        if rank >= size {
            return Err(DeviceError::InvalidArgument(format!(
                "rank {rank} not below size {size}"
            )));
        }
        if heap_base.is_null() && heap_len > 0 {
            return Err(DeviceError::InvalidArgument("null heap".into()));
        }
        let streams = setup::connect_all(boot)?;
        Ok(TcpDevice {
            rank,
            size,
            regions: Regions::new(heap_base, heap_len),
            peers: streams.into_iter().map(Peer::new).collect(),
            local: VecDeque::with_capacity(64),
            spare: Vec::new(),
            scratch: Vec::new(),
            pollfds: Vec::with_capacity(size),
            next_rx: 0,
            finalized: false,
        })
    }

    /// A write to this rank itself: validated copy, then the same events as a remote write.
    fn write_self(&mut self, w: &Write, src: *const u8) -> Result<()> {
        let dst = self
            .regions
            .range(w.remote_key.0, w.remote_offset as u64, w.len as u64)
            .ok_or_else(|| {
                DeviceError::InvalidAccess(format!(
                    "self write of {} bytes at offset {} of {} is outside every registered region",
                    w.len, w.remote_offset, w.remote_key
                ))
            })?;
        // SAFETY: both ranges were validated against the region table, whose regions are
        // valid for reads and writes by register's/new's contract; ptr::copy allows overlap.
        unsafe { std::ptr::copy(src, dst, w.len) };
        rdma_api::push_self_write_events(w, self.rank, &mut self.local);
        Ok(())
    }

    /// Queues a frame behind the peer's pending ones (copying the payload if `owned`).
    fn enqueue(
        &mut self,
        peer: usize,
        hdr: [u8; HDR_LEN],
        src: *const u8,
        len: usize,
        done: usize,
        sid: Option<u64>,
    ) {
        let mut p = Pending {
            hdr,
            payload: src,
            len,
            done,
            owned: Vec::new(),
            sid,
        };
        if sid.is_none() && len > 0 {
            let mut buf = self.spare.pop().unwrap_or_default();
            buf.clear();
            // SAFETY: src..src+len was validated against the region table in write().
            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(src, len) });
            p.payload = buf.as_ptr();
            p.owned = buf;
        }
        self.peers[peer].sendq.push_back(p);
    }

    /// Flushes every send queue, then receives from every peer (round robin).
    fn progress(&mut self, events: &mut Vec<Event>) -> Result<()> {
        for (i, p) in self.peers.iter_mut().enumerate() {
            if !p.sendq.is_empty() {
                p.flush(i, &mut self.local, &mut self.spare)?;
            }
        }
        events.extend(self.local.drain(..));
        let n = self.size;
        for k in 0..n {
            let i = (self.next_rx + k) % n;
            if let Err(e) = self.peers[i].receive(i, &self.regions, &mut self.scratch, events) {
                self.next_rx = (i + 1) % n;
                return Err(e);
            }
        }
        self.next_rx = (self.next_rx + 1) % n;
        Ok(())
    }
}

impl Device for TcpDevice {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    /// `max_inline` is [`MAX_INLINE`] (64 KiB); `max_write` is `isize::MAX` bytes.
    fn caps(&self) -> Caps {
        Caps {
            max_inline: MAX_INLINE,
            max_write: isize::MAX as usize,
            name: "tcp",
        }
    }

    unsafe fn register(&mut self, base: *mut u8, len: usize) -> Result<RegionKey> {
        self.regions.insert(base, len)
    }

    /// Errors: [`DeviceError::InvalidArgument`] if `key` is not registered. A write that is
    /// arriving into region `key` at this moment is not written further (its remaining
    /// bytes are drained and discarded) and is reported by a later poll as
    /// [`DeviceError::Protocol`]. Writes arriving into *other* regions are not affected,
    /// even when those overlap `key`'s memory: overlapping registrations are legal (e.g. a
    /// window of receives posted into one buffer, each registered on its own), and the
    /// memory stays valid through the other region's registration. Queued outgoing writes
    /// whose source lies in the region are not affected either: with `sid`, the caller
    /// keeps the source valid until `Sent` anyway.
    fn deregister(&mut self, key: RegionKey) -> Result<()> {
        if self.regions.remove(key.0).is_none() {
            return Err(DeviceError::InvalidArgument(format!(
                "{key} is not registered"
            )));
        }
        for p in &mut self.peers {
            // By key, not by address: the arriving frame was validated against region
            // `p.rx.key` only, so only that region's deregistration revokes it.
            if p.rx.active && p.rx.key == key.0 {
                p.rx.discard = true;
                if self.scratch.is_empty() {
                    self.scratch = vec![0; SCRATCH_LEN];
                }
            }
        }
        Ok(())
    }

    /// Always `RegionKey(0)`: every rank registers its heap first.
    fn heap_key(&self, _peer: usize) -> RegionKey {
        RegionKey(HEAP_KEY)
    }

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
        if w.sid.is_none() && w.len > MAX_INLINE {
            return Err(DeviceError::InvalidArgument(format!(
                "write of {} bytes without sid exceeds max_inline {MAX_INLINE}",
                w.len
            )));
        }
        let src = self
            .regions
            .range(w.local_key.0, w.local_offset as u64, w.len as u64)
            .ok_or_else(|| {
                DeviceError::InvalidArgument(format!(
                    "source of {} bytes at offset {} of {} is outside every registered region",
                    w.len, w.local_offset, w.local_key
                ))
            })? as *const u8;
        if w.peer == self.rank {
            return self.write_self(w, src);
        }
        let peer = &mut self.peers[w.peer];
        if peer.lost || peer.stream.is_none() {
            return Err(DeviceError::PeerLost {
                peer: w.peer,
                reason: "connection already failed".into(),
            });
        }
        let hdr = Header {
            key: w.remote_key.0,
            offset: w.remote_offset as u64,
            len: w.len as u64,
            flags: if w.imm.is_some() { F_IMM } else { 0 },
            imm: w.imm.unwrap_or(0),
        }
        .encode();
        if !peer.sendq.is_empty() {
            // Order: behind the queued frames; then push what the socket takes.
            self.enqueue(w.peer, hdr, src, w.len, 0, w.sid);
            let peer = &mut self.peers[w.peer];
            return peer.flush(w.peer, &mut self.local, &mut self.spare);
        }
        let iovs = [sys::iov(hdr.as_ptr(), HDR_LEN), sys::iov(src, w.len)];
        let n_iov = if w.len > 0 { 2 } else { 1 };
        // SAFETY: the header is on our stack; the source range was validated above.
        let sent = match unsafe { sys::send_vectored(peer.fd, &iovs[..n_iov]) } {
            Ok(n) => n,
            Err(e) if is_retry(&e) => 0,
            Err(e) => return Err(peer.lose_io(w.peer, "send", e)),
        };
        if sent == HDR_LEN + w.len {
            if let Some(sid) = w.sid {
                self.local.push_back(Event::Sent { sid });
            }
        } else {
            self.enqueue(w.peer, hdr, src, w.len, sent, w.sid);
        }
        Ok(())
    }

    /// Flushes send queues, hands out pending local events, then receives from every peer
    /// (at most a bounded number of syscalls each). Errors: [`DeviceError::PeerLost`] when a
    /// connection ends before the peer's BYE (reported once per peer; later writes to it
    /// fail), [`DeviceError::Protocol`] when a peer's frame is malformed or targets memory
    /// outside every registered region (the connection is then closed). Events appended
    /// before an error stay in `events`.
    fn poll(&mut self, events: &mut Vec<Event>) -> Result<usize> {
        let start = events.len();
        self.progress(events)?;
        Ok(events.len() - start)
    }

    /// Blocks in `poll(2)` on all peer sockets (readable, or writable for peers with queued
    /// writes) for at most `timeout` (rounded up to milliseconds). Returns at once if local
    /// events are pending.
    fn wait(&mut self, timeout: Duration) -> Result<()> {
        if !self.local.is_empty() {
            return Ok(());
        }
        self.pollfds.clear();
        for p in &self.peers {
            if p.fd < 0 {
                continue;
            }
            let mut ev = 0;
            if !p.bye_recv {
                ev |= libc::POLLIN;
            }
            if !p.sendq.is_empty() {
                ev |= libc::POLLOUT;
            }
            if ev != 0 {
                self.pollfds.push(libc::pollfd {
                    fd: p.fd,
                    events: ev,
                    revents: 0,
                });
            }
        }
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        match sys::poll(&mut self.pollfds, ms) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Completes all queued writes while still receiving, sends BYE to every peer, receives
    /// (discarding events) until every peer's BYE has arrived, then closes all connections.
    /// Returns the first error seen (e.g. [`DeviceError::PeerLost`] for a peer that died),
    /// after finishing with all other peers. Calling it again is a no-op.
    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let mut first_err: Option<DeviceError> = None;
        for i in 0..self.size {
            let p = &self.peers[i];
            if p.lost {
                first_err.get_or_insert(DeviceError::PeerLost {
                    peer: i,
                    reason: "connection failed before finalize".into(),
                });
            } else if p.stream.is_some() {
                self.enqueue(i, Header::bye().encode(), std::ptr::null(), 0, 0, None);
            }
        }
        let mut scratch = Vec::new();
        loop {
            scratch.clear();
            if let Err(e) = self.progress(&mut scratch) {
                first_err.get_or_insert(e);
                continue;
            }
            if !self.peers.iter().any(Peer::busy) {
                break;
            }
            if let Err(e) = self.wait(Duration::from_millis(100)) {
                first_err.get_or_insert(e);
                break;
            }
        }
        for p in &mut self.peers {
            p.stream = None;
            p.fd = -1;
            p.sendq.clear();
        }
        self.local.clear();
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
