//! The progress engine and the point-to-point protocols (SHORT, REQ, RSP, DATA, CREDIT):
//! what happens between [`Mpi::isend`]/[`Mpi::irecv`] and the device.
//!
//! Hot path (small message, credit available, receive posted): the send encodes the header
//! and copies the payload into a staging slot and issues one device write; the receive
//! side decodes the header, takes the first matching posted receive and copies the payload
//! out. Neither allocates (request slab and event vector are reused) nor locks.

use crate::engine::{CtrlMsg, Mpi, Status};
use crate::matching::{Body, DirectOutcome, Envelope, Posted, Unexpected};
use crate::protocol::*;
use crate::request::State;
use crate::{Error, ErrorClass, Result};
use rdma_api::{Event, RegionKey, Write};

/// Top bit of a sid: a CTRL write (then bits 32..62 = destination, low 32 bits = slot);
/// otherwise the sid is the request id of a rendezvous DATA write.
const SID_CTRL: u64 = 1 << 63;
/// Most unexpected-message buffers kept for reuse.
const POOL_MAX: usize = 1024;

fn proto(peer: usize, what: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorClass::Intern,
        format!("protocol violation from rank {peer}: {what}"),
    )
}

/// Copies a SHORT payload `data` (envelope `env`) into a receive buffer of `cap` bytes:
/// its status, or MPI_ERR_TRUNCATE when it does not fit (the first `cap` bytes are
/// copied, as MPI-4.1 §3.2.4 allows).
///
/// # Safety
/// `buf` valid for writes of `cap` bytes, not overlapping `data`.
#[inline]
pub(crate) unsafe fn copy_short(
    buf: *mut u8,
    cap: usize,
    env: &Envelope,
    data: &[u8],
) -> Result<Status> {
    let n = data.len().min(cap);
    if n > 0 {
        // SAFETY: caller contract; n ≤ cap and n ≤ data.len().
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, n) };
    }
    if data.len() > cap {
        return Err(truncated(data.len(), cap));
    }
    Ok(Status {
        source: env.src,
        tag: env.tag,
        error: 0,
        count: n,
        cancelled: false,
    })
}

#[cold]
fn truncated(len: usize, cap: usize) -> Error {
    Error::new(
        ErrorClass::Truncate,
        format!("message of {len} bytes truncated to the {cap}-byte receive buffer"),
    )
}

impl Mpi {
    /// One progress step: poll, handle events, push queued CTRL messages. Returns the
    /// number of events handled.
    pub(crate) fn progress_once(&mut self) -> Result<usize> {
        let mut evs = std::mem::take(&mut self.events);
        evs.clear();
        let mut res = self.dev.poll(&mut evs).map_err(Error::from);
        let n = evs.len();
        if res.is_ok() {
            for &ev in evs.iter() {
                if let Err(e) = self.handle_event(ev) {
                    res = Err(e);
                    break;
                }
            }
        }
        evs.clear();
        self.events = evs;
        res?;
        if self.queued > 0 {
            self.push_queued()?;
        }
        Ok(n)
    }

    fn handle_event(&mut self, ev: Event) -> Result<()> {
        match ev {
            Event::Sent { sid } if sid & SID_CTRL != 0 => {
                let dest = ((sid >> 32) & 0x7fff_ffff) as usize;
                let slot = (sid & 0xffff_ffff) as usize;
                let i = dest * self.lay.slots + slot;
                if dest >= self.size || slot >= self.lay.slots || !self.inflight[i] {
                    return Err(Error::new(
                        ErrorClass::Intern,
                        format!("device reported an unknown CTRL completion {sid:#x}"),
                    ));
                }
                self.inflight[i] = false;
                self.ctrl_inflight -= 1;
                Ok(())
            }
            Event::Sent { sid } => {
                let id = sid as u32;
                let Some(r) = self
                    .reqs
                    .get_mut(id)
                    .filter(|r| r.state == State::DataInFlight)
                else {
                    return Err(Error::new(
                        ErrorClass::Intern,
                        format!("device reported a DATA completion for unknown request {sid}"),
                    ));
                };
                r.state = State::Done;
                let reg = r.reg.take();
                self.data_inflight -= 1;
                if let Some(k) = reg {
                    self.dev.deregister(k)?;
                }
                Ok(())
            }
            Event::RecvInline {
                peer,
                imm,
                len,
                data,
            } => {
                if peer >= self.size || imm != IMM_INLINE_SHORT || len < INLINE_HDR {
                    return Err(proto(
                        peer,
                        format_args!("inline notification {imm:#x} of {len} bytes"),
                    ));
                }
                let w =
                    |i: usize| u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
                let (ctx, src, tag) = (w(0), w(4) as i32, w(8) as i32);
                self.check_source(peer, ctx, src)?;
                self.check_wire_tag(peer, tag)?;
                let env = Envelope { ctx, src, tag };
                self.short_arrived(&env, &data[INLINE_HDR..len]);
                Ok(())
            }
            Event::Recv { peer, imm, len } => {
                if peer >= self.size {
                    return Err(proto(peer, "event from a rank outside the job"));
                }
                let arg = imm & IMM_ARG_MASK;
                match imm & IMM_KIND_MASK {
                    IMM_CTRL => self.on_ctrl(peer, arg as usize, len),
                    IMM_DATA => self.on_data(peer, arg, len),
                    IMM_CREDIT => self.on_credit(peer),
                    _ => Err(proto(
                        peer,
                        format_args!("immediate word {imm:#x} of no known kind"),
                    )),
                }
            }
        }
    }

    fn on_credit(&mut self, peer: usize) -> Result<()> {
        let v = self.heap.read_u64(self.lay.credit_in + 8 * peer);
        if v > self.sent[peer] {
            return Err(proto(
                peer,
                format_args!(
                    "credit {v} exceeds the {} CTRL messages sent",
                    self.sent[peer]
                ),
            ));
        }
        if v > self.credit[peer] {
            self.credit[peer] = v;
        }
        Ok(())
    }

    fn on_data(&mut self, peer: usize, rreq: u32, len: usize) -> Result<()> {
        let Some(r) = self.reqs.get_mut(rreq) else {
            return Err(proto(peer, format_args!("DATA for unknown request {rreq}")));
        };
        match r.state {
            State::WaitData { peer: p, len: l } if p == peer && l == len => {}
            s => {
                return Err(proto(
                    peer,
                    format_args!("DATA of {len} bytes for request {rreq} in state {s:?}"),
                ))
            }
        }
        r.state = State::Done;
        if let Some(k) = r.reg.take() {
            self.dev.deregister(k)?;
        }
        Ok(())
    }

    fn on_ctrl(&mut self, peer: usize, slot: usize, len: usize) -> Result<()> {
        let s = self.lay.slots;
        let expect = (self.consumed[peer] % s as u64) as usize;
        if slot != expect {
            return Err(proto(
                peer,
                format_args!("CTRL slot {slot}, expected {expect}"),
            ));
        }
        if len < HDR_RESERVED || len > self.lay.slot_size {
            return Err(proto(peer, format_args!("CTRL write of {len} bytes")));
        }
        let off = self.lay.ring_slot(peer, slot);
        let mut hb = [0u8; HDR_LEN];
        // SAFETY: `off .. off + slot_size` is inside the heap (layout); the slot is ours
        // until we return its credit.
        unsafe { std::ptr::copy_nonoverlapping(self.heap.at(off), hb.as_mut_ptr(), HDR_LEN) };
        let h = Header::decode(&hb).map_err(|e| proto(peer, e))?;
        self.check_source(peer, h.ctx, h.src)?;
        match h.kind {
            KIND_SHORT => {
                let plen = h.len as usize;
                if h.len > self.lay.payload_max() as u64 || len != HDR_RESERVED + plen {
                    return Err(proto(
                        peer,
                        format_args!("SHORT of {} bytes in a write of {len}", h.len),
                    ));
                }
                self.check_wire_tag(peer, h.tag)?;
                let env = Envelope {
                    ctx: h.ctx,
                    src: h.src,
                    tag: h.tag,
                };
                // SAFETY: the payload lies inside the slot (checked above).
                let data =
                    unsafe { std::slice::from_raw_parts(self.heap.at(off + HDR_RESERVED), plen) };
                self.short_arrived(&env, data);
            }
            KIND_REQ => {
                self.check_wire_tag(peer, h.tag)?;
                if h.sreq > IMM_ARG_MASK {
                    return Err(proto(peer, format_args!("REQ with request id {}", h.sreq)));
                }
                let env = Envelope {
                    ctx: h.ctx,
                    src: h.src,
                    tag: h.tag,
                };
                if let Some(p) = self.q.take_posted(&env) {
                    self.start_rndv_recv(p.req, env, peer, h.sreq, h.len)?;
                } else if let Some((buf, cap)) = self.direct_match(&env) {
                    // The blocking receive waiting without a request continues as one.
                    let id = self.reqs.alloc(State::Posted, buf, cap)?;
                    if let Some(d) = self.direct.as_mut() {
                        d.outcome = DirectOutcome::Rndv(id);
                    }
                    self.start_rndv_recv(id, env, peer, h.sreq, h.len)?;
                } else {
                    self.q.unexpected.push_back(Unexpected {
                        env,
                        body: Body::Req {
                            peer,
                            sreq: h.sreq,
                            len: h.len,
                        },
                    });
                }
            }
            KIND_RSP => self.on_rsp(peer, &h)?,
            _ => unreachable!("decode accepts known kinds only"),
        }
        self.consumed[peer] += 1;
        if self.consumed[peer] - self.reported[peer] >= self.credit_batch {
            self.send_credit(peer)?;
        }
        Ok(())
    }

    /// A SHORT (from a CTRL slot or inline) arrived: complete the first matching posted
    /// receive, or queue it as unexpected (payload copied).
    #[inline]
    fn short_arrived(&mut self, env: &Envelope, data: &[u8]) {
        if let Some(p) = self.q.take_posted(env) {
            self.deliver(p.req, env, data);
        } else if let Some((buf, cap)) = self.direct_match(env) {
            // SAFETY: the direct receive's buffer is valid for `cap` bytes while it waits
            // (Mpi::recv's caller contract).
            let r = unsafe { copy_short(buf, cap, env, data) };
            if let Some(d) = self.direct.as_mut() {
                d.outcome = DirectOutcome::Done(r);
            }
        } else {
            let mut v = self.pool.pop().unwrap_or_default();
            v.clear();
            v.extend_from_slice(data);
            self.q.unexpected.push_back(Unexpected {
                env: *env,
                body: Body::Short(v),
            });
        }
    }

    /// (buffer, capacity) of the waiting direct receive if it matches `env` (see
    /// [`crate::matching::Direct`]: it exists only while the posted queue is empty).
    #[inline]
    fn direct_match(&self, env: &Envelope) -> Option<(*mut u8, usize)> {
        match &self.direct {
            Some(d) if matches!(d.outcome, DirectOutcome::Waiting) && d.env.matches(env) => {
                Some((d.buf, d.len))
            }
            _ => None,
        }
    }

    /// Context and source of a message from `peer`: world contexts carry the sender's
    /// world rank, SELF contexts come only from ourselves with source 0.
    #[inline]
    fn check_source(&self, peer: usize, ctx: u32, src: i32) -> Result<()> {
        let src_ok = match ctx {
            0 | 1 => src as i64 == peer as i64,
            2 | 3 => peer == self.rank && src == 0,
            _ => return Err(proto(peer, format_args!("unknown context id {ctx}"))),
        };
        if !src_ok {
            return Err(proto(peer, format_args!("source {src} in context {ctx}")));
        }
        Ok(())
    }

    fn check_wire_tag(&self, peer: usize, tag: i32) -> Result<()> {
        if (0..=crate::TAG_UB).contains(&tag) {
            Ok(())
        } else {
            Err(proto(peer, format_args!("tag {tag}")))
        }
    }

    /// RSP from `peer`: write the DATA of the send request `h.sreq`.
    fn on_rsp(&mut self, peer: usize, h: &Header) -> Result<()> {
        let Some(r) = self.reqs.get(h.sreq) else {
            return Err(proto(
                peer,
                format_args!("RSP for unknown request {}", h.sreq),
            ));
        };
        if r.state != (State::WaitRsp { peer }) || h.len > r.len as u64 || h.rreq > IMM_ARG_MASK {
            return Err(proto(
                peer,
                format_args!(
                    "RSP (len {}, rreq {}) for request {} in state {:?}",
                    h.len, h.rreq, h.sreq, r.state
                ),
            ));
        }
        let (buf, n) = (r.buf, h.len as usize);
        let (key, loff, reg) = self.local_region(buf, n)?;
        self.dev.write(&Write {
            peer,
            local_key: key,
            local_offset: loff,
            remote_key: RegionKey(h.key),
            remote_offset: h.offset as usize,
            len: n,
            imm: Some(IMM_DATA | h.rreq),
            sid: Some(h.sreq as u64),
        })?;
        let r = self.reqs.get_mut(h.sreq).expect("checked above");
        r.state = State::DataInFlight;
        r.reg = reg;
        self.data_inflight += 1;
        Ok(())
    }

    /// (key, offset, key to deregister later) of `buf .. buf+n`: inside the heap → heap
    /// key; empty → heap key at 0; else a fresh registration.
    fn local_region(
        &mut self,
        buf: *mut u8,
        n: usize,
    ) -> Result<(RegionKey, usize, Option<RegionKey>)> {
        if n == 0 {
            return Ok((self.my_key, 0, None));
        }
        if let Some(off) = self.heap.offset_of(buf, n) {
            return Ok((self.my_key, off, None));
        }
        // SAFETY: the buffer belongs to a live request; the MPI contract keeps it valid
        // until the request completes, and we deregister at completion.
        let k = unsafe { self.dev.register(buf, n) }?;
        Ok((k, 0, Some(k)))
    }

    /// Writes our consumed-slot counter for `peer` into its credit word for us.
    fn send_credit(&mut self, peer: usize) -> Result<()> {
        let off = self.lay.credit_out + 8 * peer;
        self.heap.write_u64(off, self.consumed[peer]);
        self.dev.write(&Write {
            peer,
            local_key: self.my_key,
            local_offset: off,
            remote_key: self.heap_keys[peer],
            remote_offset: self.lay.credit_in + 8 * self.rank,
            len: 8,
            imm: Some(IMM_CREDIT),
            sid: None,
        })?;
        self.reported[peer] = self.consumed[peer];
        Ok(())
    }

    /// Completes receive `id` with SHORT payload `data` (copy 2).
    fn deliver(&mut self, id: u32, env: &Envelope, data: &[u8]) {
        let r = self.reqs.get_mut(id).expect("posted request is live");
        // SAFETY: the receive buffer is valid for r.len bytes (irecv contract) and does
        // not overlap our heap slot / unexpected buffer.
        match unsafe { copy_short(r.buf, r.len, env, data) } {
            Ok(st) => r.status = st,
            Err(e) => {
                r.status = Status {
                    source: env.src,
                    tag: env.tag,
                    error: ErrorClass::Truncate as i32,
                    count: r.len,
                    cancelled: false,
                };
                r.error = Some(e);
            }
        }
        r.state = State::Done;
    }

    /// A receive matched a REQ: expose the buffer and answer with an RSP.
    pub(crate) fn start_rndv_recv(
        &mut self,
        id: u32,
        env: Envelope,
        peer: usize,
        sreq: u32,
        total: u64,
    ) -> Result<()> {
        let r = self.reqs.get(id).expect("posted request is live");
        let (buf, cap) = (r.buf, r.len);
        let n = (total.min(cap as u64)) as usize;
        let (key, off, reg) = self.local_region(buf, n)?;
        let r = self.reqs.get_mut(id).expect("live");
        r.reg = reg;
        r.state = State::WaitData { peer, len: n };
        r.status = Status {
            source: env.src,
            tag: env.tag,
            error: 0,
            count: n,
            cancelled: false,
        };
        if total > cap as u64 {
            r.status.error = ErrorClass::Truncate as i32;
            r.error = Some(Error::new(
                ErrorClass::Truncate,
                format!("message of {total} bytes truncated to the {cap}-byte receive buffer"),
            ));
        }
        let h = Header {
            kind: KIND_RSP,
            ctx: env.ctx,
            src: if env.ctx & !1 == crate::engine::CTX_SELF {
                0
            } else {
                self.rank as i32
            },
            tag: env.tag,
            len: n as u64,
            sreq,
            rreq: id,
            key: self.dev.key_for_peer(key, peer).0,
            offset: off as u64,
        };
        self.send_ctrl(peer, &h, &[])
    }

    /// Sends a CTRL message now if a credit and the staging slot are available and nothing
    /// is queued for `dest`; else queues it (payload copied) behind the others.
    pub(crate) fn send_ctrl(&mut self, dest: usize, h: &Header, payload: &[u8]) -> Result<()> {
        if self.fifo[dest].is_empty() && self.can_send(dest) {
            return self.write_ctrl(dest, h, payload);
        }
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(payload);
        self.fifo[dest].push_back(CtrlMsg {
            hdr: *h,
            payload: v,
        });
        self.queued += 1;
        Ok(())
    }

    #[inline]
    fn can_send(&self, dest: usize) -> bool {
        let s = self.lay.slots as u64;
        self.sent[dest] - self.credit[dest] < s
            && !self.inflight[dest * self.lay.slots + (self.sent[dest] % s) as usize]
    }

    /// Copy 1: header and payload into the staging slot, then one device write into the
    /// destination's ring; or, when the device takes unregistered sources
    /// (`Device::write_bytes`, device-shm), one copy straight into the destination's slot.
    fn write_ctrl(&mut self, dest: usize, h: &Header, payload: &[u8]) -> Result<()> {
        debug_assert!(payload.len() <= self.lay.payload_max());
        let s = self.lay.slots;
        let slot = (self.sent[dest] % s as u64) as usize;
        if self.dev.can_write_bytes(dest) {
            // The device copies header and payload straight into the destination's slot
            // (device-shm): no staging copy, no Sent event, the staging slot stays free.
            let mut hb = [0u8; HDR_RESERVED];
            h.encode(&mut hb);
            self.dev.write_bytes(
                dest,
                [&hb, payload],
                self.heap_keys[dest],
                self.lay.ring_slot(self.rank, slot),
                Some(IMM_CTRL | slot as u32),
            )?;
            self.sent[dest] += 1;
            return Ok(());
        }
        let off = self.lay.staging_slot(dest, slot);
        // SAFETY: the staging slot lies in the heap and is not in flight (can_send); the
        // payload fits (≤ eager limit = slot payload).
        unsafe {
            let p = self.heap.at(off);
            h.encode(std::slice::from_raw_parts_mut(p, HDR_LEN));
            if !payload.is_empty() {
                std::ptr::copy_nonoverlapping(payload.as_ptr(), p.add(HDR_RESERVED), payload.len());
            }
        }
        self.dev.write(&Write {
            peer: dest,
            local_key: self.my_key,
            local_offset: off,
            remote_key: self.heap_keys[dest],
            remote_offset: self.lay.ring_slot(self.rank, slot),
            len: HDR_RESERVED + payload.len(),
            imm: Some(IMM_CTRL | slot as u32),
            sid: Some(SID_CTRL | ((dest as u64) << 32) | slot as u64),
        })?;
        self.inflight[dest * s + slot] = true;
        self.ctrl_inflight += 1;
        self.sent[dest] += 1;
        Ok(())
    }

    /// Sends queued CTRL messages in FIFO order while credits and staging slots allow.
    fn push_queued(&mut self) -> Result<()> {
        for dest in 0..self.size {
            while !self.fifo[dest].is_empty() && self.can_send(dest) {
                let m = self.fifo[dest].pop_front().expect("non-empty");
                self.queued -= 1;
                self.write_ctrl(dest, &m.hdr, &m.payload)?;
                self.recycle(m.payload);
            }
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn recycle(&mut self, v: Vec<u8>) {
        if self.pool.len() < POOL_MAX && v.capacity() > 0 {
            self.pool.push(v);
        }
    }

    /// Starts a send of `len` bytes at `buf` to world rank `dest` in context `ctx` with
    /// source `src` (rank in the communicator) and `tag`; returns the request id.
    ///
    /// # Safety
    /// `buf` valid for reads of `len` bytes until the request completes.
    pub(crate) unsafe fn isend_raw(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: usize,
        ctx: u32,
        src: i32,
        tag: i32,
    ) -> Result<u32> {
        // SAFETY: forwarded caller contract.
        match unsafe { self.start_send(buf, len, dest, ctx, src, tag) }? {
            Some(id) => Ok(id),
            None => self.reqs.alloc(State::Done, std::ptr::null_mut(), 0),
        }
    }

    /// Starts a send as [`Mpi::isend_raw`]; `None` when it is already complete (eager:
    /// the payload was copied), so that a blocking send needs no request.
    ///
    /// # Safety
    /// As [`Mpi::isend_raw`].
    #[inline]
    pub(crate) unsafe fn start_send(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: usize,
        ctx: u32,
        src: i32,
        tag: i32,
    ) -> Result<Option<u32>> {
        if self.queued > 0 && !self.fifo[dest].is_empty() {
            self.progress_once()?;
        }
        if len + INLINE_HDR <= self.notify_max[dest] as usize && self.fifo[dest].is_empty() {
            // Inline SHORT: the message travels in the notification (no slot, no credit).
            let mut b = [0u8; rdma_api::NOTIFY_MAX];
            b[0..4].copy_from_slice(&ctx.to_le_bytes());
            b[4..8].copy_from_slice(&src.to_le_bytes());
            b[8..12].copy_from_slice(&tag.to_le_bytes());
            if len > 0 {
                // SAFETY: caller contract; len ≤ 36 fits after the 12-byte header.
                unsafe { std::ptr::copy_nonoverlapping(buf, b.as_mut_ptr().add(INLINE_HDR), len) };
            }
            self.dev
                .notify(dest, IMM_INLINE_SHORT, &b[..INLINE_HDR + len])?;
            return Ok(None);
        }
        let mut h = Header {
            kind: KIND_SHORT,
            ctx,
            src,
            tag,
            len: len as u64,
            ..Header::default()
        };
        if len <= self.settings.eager_limit {
            let payload: &[u8] = if len == 0 {
                &[]
            } else {
                // SAFETY: caller contract.
                unsafe { std::slice::from_raw_parts(buf, len) }
            };
            self.send_ctrl(dest, &h, payload)?;
            Ok(None)
        } else {
            let id = self
                .reqs
                .alloc(State::WaitRsp { peer: dest }, buf as *mut u8, len)?;
            h.kind = KIND_REQ;
            h.sreq = id;
            if let Err(e) = self.send_ctrl(dest, &h, &[]) {
                self.reqs.release(id);
                return Err(e);
            }
            Ok(Some(id))
        }
    }

    /// Posts a receive of up to `len` bytes at `buf` for pattern `env`; matches the
    /// unexpected queue first (arrival order).
    ///
    /// # Safety
    /// `buf` valid for writes of `len` bytes until the request completes.
    pub(crate) unsafe fn irecv_raw(
        &mut self,
        buf: *mut u8,
        len: usize,
        env: Envelope,
    ) -> Result<u32> {
        let id = self.reqs.alloc(State::Posted, buf, len)?;
        match self.q.take_unexpected(&env) {
            Some(u) => match u.body {
                Body::Short(v) => {
                    self.deliver(id, &u.env, &v);
                    self.recycle(v);
                }
                Body::Req {
                    peer,
                    sreq,
                    len: total,
                } => {
                    self.start_rndv_recv(id, u.env, peer, sreq, total)?;
                }
            },
            None => self.q.posted.push_back(Posted { env, req: id }),
        }
        Ok(id)
    }
}
