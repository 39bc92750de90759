//! Collective operations (MPI-4.1 ch. 6) over point-to-point messages on the
//! communicator's collective context (p2p context + 1), so they never match user messages.
//!
//! * barrier: dissemination, ⌈log2 n⌉ rounds of zero-byte messages (tag = round);
//! * bcast: binomial tree rooted at `root`;
//! * reduce: binomial tree towards `root`; each node combines `acc = acc op child` in a
//!   fixed order given by the tree, so the result does not depend on timing;
//! * allreduce: direct all-to-all + rank-order fold (≤ 8 ranks, ≤ 64 B), recursive
//!   doubling (small) or Rabenseifner's reduce-scatter + allgather
//!   (large), with the usual fix-up for sizes that are not a power of two; every
//!   combination is `lower-rank block op higher-rank block`, so the result is bit-identical
//!   on every rank and deterministic.

use crate::engine::{Comm, Mpi};
use crate::matching::Envelope;
use crate::{Datatype, Error, ErrorClass, Op, Result};

const TAG_BARRIER: i32 = 1000;
const TAG_BCAST: i32 = 2;
const TAG_REDUCE: i32 = 3;
/// Allreduce: non-power-of-two fix-up before and after, then one tag per exchange step.
const TAG_AR_PRE: i32 = 4;
const TAG_AR_POST: i32 = 5;
const TAG_AR_STEP: i32 = 2000;

/// Direct (one-step, all-to-all) allreduce: at most this many ranks and bytes.
const ALLREDUCE_DIRECT_RANKS: usize = 8;
const ALLREDUCE_DIRECT: usize = 64;
/// Largest allreduce (bytes) done by recursive doubling; above, Rabenseifner.
const ALLREDUCE_SHORT: usize = 8192;

/// A 16-byte-aligned scratch buffer of at least `len` bytes.
fn scratch(len: usize) -> Vec<u128> {
    vec![0u128; len.div_ceil(16)]
}

impl Mpi {
    /// Blocking internal send in collective context `ctx` (from comm rank `me`).
    unsafe fn coll_send(
        &mut self,
        buf: *const u8,
        len: usize,
        ctx: u32,
        me: i32,
        to: i32,
        tag: i32,
    ) -> Result<u32> {
        let wd = self.world_rank(ctx, to);
        // SAFETY: caller keeps `buf` valid until the request completes.
        unsafe { self.isend_raw(buf, len, wd, ctx, me, tag) }
    }

    unsafe fn coll_recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        ctx: u32,
        from: i32,
        tag: i32,
    ) -> Result<u32> {
        // SAFETY: caller keeps `buf` valid until the request completes.
        unsafe {
            self.irecv_raw(
                buf,
                len,
                Envelope {
                    ctx,
                    src: from,
                    tag,
                },
            )
        }
    }

    fn wait_id(&mut self, id: u32) -> Result<()> {
        self.wait(crate::Request(id)).map(|_| ())
    }

    /// MPI_Barrier (MPI-4.1 §6.3): dissemination algorithm. Errors: MPI_ERR_COMM,
    /// MPI_ERR_OTHER (lost peer).
    pub fn barrier(&mut self, comm: Comm) -> Result<()> {
        let (ctx, n, me) = self.comm_info(comm)?;
        let ctx = ctx + 1;
        let mut k = 1usize;
        let mut round = 0;
        while k < n {
            let to = ((me as usize + k) % n) as i32;
            let from = ((me as usize + n - k) % n) as i32;
            // SAFETY: zero-byte messages; no buffer is accessed.
            let r =
                unsafe { self.coll_recv(std::ptr::null_mut(), 0, ctx, from, TAG_BARRIER + round) }?;
            let s =
                unsafe { self.coll_send(std::ptr::null(), 0, ctx, me, to, TAG_BARRIER + round) }?;
            self.wait_id(s)?;
            self.wait_id(r)?;
            k <<= 1;
            round += 1;
        }
        Ok(())
    }

    fn check_root(root: i32, n: usize) -> Result<()> {
        if root < 0 || root as usize >= n {
            return Err(Error::new(
                ErrorClass::Root,
                format!("invalid root {root} in a communicator of size {n}"),
            ));
        }
        Ok(())
    }

    fn check_count_c(count: i32) -> Result<()> {
        if count < 0 {
            return Err(Error::new(
                ErrorClass::Count,
                format!("invalid count {count} (must be non-negative)"),
            ));
        }
        Ok(())
    }

    /// MPI_Bcast (MPI-4.1 §6.4): binomial tree. Errors: MPI_ERR_COMM, MPI_ERR_COUNT,
    /// MPI_ERR_ROOT, MPI_ERR_BUFFER (null buffer with count > 0).
    ///
    /// # Safety
    /// `buf` valid for reads and writes of `count * dt.size()` bytes.
    pub unsafe fn bcast(
        &mut self,
        buf: *mut u8,
        count: i32,
        dt: Datatype,
        root: i32,
        comm: Comm,
    ) -> Result<()> {
        let (ctx, n, me) = self.comm_info(comm)?;
        Self::check_count_c(count)?;
        Self::check_root(root, n)?;
        if buf.is_null() && count > 0 {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("null buffer with count {count}"),
            ));
        }
        if count == 0 || n == 1 {
            return Ok(());
        }
        // SAFETY: forwarded caller contract.
        unsafe { self.bcast_impl(buf, count as usize * dt.size(), root, ctx + 1, n, me) }
    }

    unsafe fn bcast_impl(
        &mut self,
        buf: *mut u8,
        len: usize,
        root: i32,
        ctx: u32,
        n: usize,
        me: i32,
    ) -> Result<()> {
        let vr = (me as usize + n - root as usize) % n;
        let abs = |v: usize| ((v + root as usize) % n) as i32;
        let mut mask = 1usize;
        while mask < n {
            if vr & mask != 0 {
                // SAFETY: caller contract on `buf`.
                let r = unsafe { self.coll_recv(buf, len, ctx, abs(vr - mask), TAG_BCAST) }?;
                self.wait_id(r)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        let mut sends = [0u32; 64];
        let mut ns = 0;
        while mask > 0 {
            if vr + mask < n {
                // SAFETY: caller contract on `buf`; waited below.
                sends[ns] =
                    unsafe { self.coll_send(buf, len, ctx, me, abs(vr + mask), TAG_BCAST) }?;
                ns += 1;
            }
            mask >>= 1;
        }
        for &s in &sends[..ns] {
            self.wait_id(s)?;
        }
        Ok(())
    }

    fn check_reduce(count: i32, dt: Datatype, op: Op, root: i32, n: usize) -> Result<()> {
        Self::check_count_c(count)?;
        crate::op::check(op, dt)?;
        Self::check_root(root, n)
    }

    /// MPI_Reduce (MPI-4.1 §6.9.1). `sendbuf == None` means MPI_IN_PLACE (only valid at
    /// the root, where the input is taken from `recvbuf`). `recvbuf` is significant only
    /// at the root. Combination order is fixed by the binomial tree (deterministic).
    /// Errors: MPI_ERR_OP when `op` is not defined for `dt` (checked before communicating),
    /// MPI_ERR_ROOT, MPI_ERR_COUNT, MPI_ERR_COMM, MPI_ERR_BUFFER (null buffers, or
    /// MPI_IN_PLACE at a non-root).
    ///
    /// # Safety
    /// Buffers valid for `count * dt.size()` bytes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reduce(
        &mut self,
        sendbuf: Option<*const u8>,
        recvbuf: *mut u8,
        count: i32,
        dt: Datatype,
        op: Op,
        root: i32,
        comm: Comm,
    ) -> Result<()> {
        let (ctx, n, me) = self.comm_info(comm)?;
        Self::check_reduce(count, dt, op, root, n)?;
        let input = match sendbuf {
            Some(p) => p,
            None if me == root => recvbuf as *const u8,
            None => {
                return Err(Error::new(
                    ErrorClass::Buffer,
                    "MPI_IN_PLACE is only valid at the root of MPI_Reduce",
                ))
            }
        };
        if count > 0 && (input.is_null() || (me == root && recvbuf.is_null())) {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("null buffer with count {count}"),
            ));
        }
        if count == 0 {
            return Ok(());
        }
        // SAFETY: forwarded caller contract.
        unsafe { self.reduce_impl(input, recvbuf, count as usize, dt, op, root, ctx + 1, n, me) }
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn reduce_impl(
        &mut self,
        input: *const u8,
        out: *mut u8,
        count: usize,
        dt: Datatype,
        op: Op,
        root: i32,
        ctx: u32,
        n: usize,
        me: i32,
    ) -> Result<()> {
        let len = count * dt.size();
        let mut own = Vec::new();
        let acc: *mut u8 = if me == root {
            if !std::ptr::eq(input, out) {
                // SAFETY: both valid for `len` bytes (caller); ptr::copy tolerates overlap.
                unsafe { std::ptr::copy(input, out, len) };
            }
            out
        } else {
            own = scratch(len);
            let p = own.as_mut_ptr() as *mut u8;
            // SAFETY: `own` has ≥ len bytes; `input` valid for len (caller).
            unsafe { std::ptr::copy_nonoverlapping(input, p, len) };
            p
        };
        let mut tmp = Vec::new();
        let vr = (me as usize + n - root as usize) % n;
        let abs = |v: usize| ((v + root as usize) % n) as i32;
        let mut mask = 1usize;
        while mask < n {
            if vr & mask == 0 {
                let child = vr | mask;
                if child < n {
                    if tmp.is_empty() {
                        tmp = scratch(len);
                    }
                    let t = tmp.as_mut_ptr() as *mut u8;
                    // SAFETY: `tmp` has ≥ len bytes and lives until the wait returns.
                    let r = unsafe { self.coll_recv(t, len, ctx, abs(child), TAG_REDUCE) }?;
                    self.wait_id(r)?;
                    // SAFETY: both buffers hold `count` elements of `dt`, distinct.
                    unsafe { crate::op::reduce_local(op, dt, t, acc, count) }?;
                }
            } else {
                // SAFETY: `acc` valid for len bytes until the wait returns.
                let s = unsafe { self.coll_send(acc, len, ctx, me, abs(vr & !mask), TAG_REDUCE) }?;
                self.wait_id(s)?;
                break;
            }
            mask <<= 1;
        }
        drop(own);
        Ok(())
    }

    /// MPI_Allreduce (MPI-4.1 §6.9.6). Tiny vectors (≤ `ALLREDUCE_DIRECT` bytes) on at
    /// most `ALLREDUCE_DIRECT_RANKS` ranks: one all-to-all step, see `allreduce_direct`.
    /// Small messages (≤ `ALLREDUCE_SHORT` bytes, or
    /// fewer elements than ranks): recursive doubling, ⌈log2 n⌉ exchange steps (3 for 8
    /// ranks instead of the 2·3 of reduce + bcast). Large messages: Rabenseifner's
    /// reduce-scatter (recursive halving) + allgather (recursive doubling), each rank
    /// sending ~2·len instead of log2(n)·len. Sizes that are not a power of two: the first
    /// 2·r ranks (r = n − 2^⌊log2 n⌋) pair up, the even one hands its vector to the odd one
    /// and gets the result back at the end.
    ///
    /// Combination order: always `lower-rank block op higher-rank block` (the lower block
    /// as the `inout` of the kernel, as in [`Mpi::reduce`]); both partners of an exchange
    /// combine the same two values in the same order, so every rank ends with the same bits
    /// (also for MIN/MAX on ±0 and NaN, where operand order matters), and the bracketing is
    /// fixed by the rank count, so results are deterministic. `sendbuf == None` means
    /// MPI_IN_PLACE. Errors as [`Mpi::reduce`].
    ///
    /// # Safety
    /// Buffers valid for `count * dt.size()` bytes.
    pub unsafe fn allreduce(
        &mut self,
        sendbuf: Option<*const u8>,
        recvbuf: *mut u8,
        count: i32,
        dt: Datatype,
        op: Op,
        comm: Comm,
    ) -> Result<()> {
        let (ctx, n, me) = self.comm_info(comm)?;
        Self::check_reduce(count, dt, op, 0, n)?;
        let input = sendbuf.unwrap_or(recvbuf as *const u8);
        if count > 0 && (input.is_null() || recvbuf.is_null()) {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("null buffer with count {count}"),
            ));
        }
        if count == 0 {
            return Ok(());
        }
        let c = count as usize;
        let len = c * dt.size();
        if !std::ptr::eq(input, recvbuf) {
            // SAFETY: both valid for `len` bytes (caller); ptr::copy tolerates overlap.
            unsafe { std::ptr::copy(input, recvbuf, len) };
        }
        if n == 1 {
            return Ok(());
        }
        let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
        // SAFETY: forwarded caller contract; the input is now in `recvbuf`.
        unsafe {
            if n <= ALLREDUCE_DIRECT_RANKS && len <= ALLREDUCE_DIRECT {
                self.allreduce_direct(recvbuf, c, dt, op, ctx + 1, n, me as usize)
            } else if len <= ALLREDUCE_SHORT || c < pof2 {
                self.allreduce_rd(recvbuf, c, dt, op, ctx + 1, n, me as usize)
            } else {
                self.allreduce_rab(recvbuf, c, dt, op, ctx + 1, n, me as usize)
            }
        }
    }

    /// Direct allreduce of a tiny vector on few ranks: every rank sends its vector to every
    /// other rank (one step, n − 1 inline messages each) and folds all n vectors in rank
    /// order, `((v0 op v1) op v2) …`, so every rank computes the same bits. One step
    /// instead of ⌈log2 n⌉; when the ranks share few cores (4 per core), each rank needs
    /// to be scheduled about twice per allreduce instead of once per step.
    #[allow(clippy::too_many_arguments)]
    unsafe fn allreduce_direct(
        &mut self,
        out: *mut u8,
        count: usize,
        dt: Datatype,
        op: Op,
        ctx: u32,
        n: usize,
        me: usize,
    ) -> Result<()> {
        let len = count * dt.size();
        let mut all = scratch(n * len);
        let base = all.as_mut_ptr() as *mut u8;
        let mut reqs = [0u32; 2 * ALLREDUCE_DIRECT_RANKS];
        let mut nr = 0;
        // SAFETY (whole body): `out` (caller) holds `len` bytes, `all` n·len; slot i of
        // `all` is written only by the receive from rank i, read after all waits.
        unsafe { std::ptr::copy_nonoverlapping(out, base.add(me * len), len) };
        for k in 1..n {
            let from = (me + n - k) % n;
            reqs[nr] =
                unsafe { self.coll_recv(base.add(from * len), len, ctx, from as i32, TAG_AR_PRE) }?;
            nr += 1;
        }
        for k in 1..n {
            let to = ((me + k) % n) as i32;
            reqs[nr] = unsafe { self.coll_send(out, len, ctx, me as i32, to, TAG_AR_PRE) }?;
            nr += 1;
        }
        for &r in &reqs[..nr] {
            self.wait_id(r)?;
        }
        unsafe { std::ptr::copy_nonoverlapping(base, out, len) };
        for i in 1..n {
            unsafe { crate::op::reduce_local(op, dt, base.add(i * len), out, count) }?;
        }
        drop(all);
        Ok(())
    }

    /// Non-power-of-two fix-up, first half: among the first `2·rem` ranks, each even rank
    /// sends its vector `acc` to the next (odd) rank and drops out (`None`); the odd rank
    /// combines `even op odd`. Returns the rank in the power-of-two group. `acc` and
    /// `other` (both `len` bytes) may be swapped so that `acc` holds the partial result.
    #[allow(clippy::too_many_arguments)]
    unsafe fn fixup_in(
        &mut self,
        acc: &mut *mut u8,
        other: &mut *mut u8,
        count: usize,
        dt: Datatype,
        op: Op,
        ctx: u32,
        rem: usize,
        me: usize,
    ) -> Result<Option<usize>> {
        let len = count * dt.size();
        if me >= 2 * rem {
            return Ok(Some(me - rem));
        }
        if me.is_multiple_of(2) {
            // SAFETY: `acc` valid for len bytes until the wait returns.
            let s =
                unsafe { self.coll_send(*acc, len, ctx, me as i32, me as i32 + 1, TAG_AR_PRE) }?;
            self.wait_id(s)?;
            return Ok(None);
        }
        // SAFETY: `other` valid for len bytes; distinct from `acc`.
        let r = unsafe { self.coll_recv(*other, len, ctx, me as i32 - 1, TAG_AR_PRE) }?;
        self.wait_id(r)?;
        // lower (received) op higher (ours): the lower block is the inout.
        unsafe { crate::op::reduce_local(op, dt, *acc, *other, count) }?;
        std::mem::swap(acc, other);
        Ok(Some(me / 2))
    }

    /// Rank in the communicator of rank `nr` of the power-of-two group (see `fixup_in`).
    fn from_group(nr: usize, rem: usize) -> i32 {
        if nr < rem {
            (2 * nr + 1) as i32
        } else {
            (nr + rem) as i32
        }
    }

    /// Recursive-doubling allreduce of `count` elements held in `out` (the result goes
    /// there too).
    #[allow(clippy::too_many_arguments)]
    unsafe fn allreduce_rd(
        &mut self,
        out: *mut u8,
        count: usize,
        dt: Datatype,
        op: Op,
        ctx: u32,
        n: usize,
        me: usize,
    ) -> Result<()> {
        let len = count * dt.size();
        let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let rem = n - pof2;
        let mut tmp = scratch(len);
        let mut acc = out;
        let mut other = tmp.as_mut_ptr() as *mut u8;
        // SAFETY (whole body): `out` (caller) and `tmp` hold `len` bytes each and are
        // distinct; every request is waited before its buffer is touched again.
        let group = unsafe { self.fixup_in(&mut acc, &mut other, count, dt, op, ctx, rem, me) }?;
        if let Some(nr) = group {
            let mut mask = 1usize;
            let mut step = 0;
            while mask < pof2 {
                let pr = nr ^ mask;
                let peer = Self::from_group(pr, rem);
                let tag = TAG_AR_STEP + step;
                let r = unsafe { self.coll_recv(other, len, ctx, peer, tag) }?;
                let s = unsafe { self.coll_send(acc, len, ctx, me as i32, peer, tag) }?;
                self.wait_id(s)?;
                self.wait_id(r)?;
                if pr < nr {
                    // The partner's block is the lower one: it is the inout.
                    unsafe { crate::op::reduce_local(op, dt, acc, other, count) }?;
                    std::mem::swap(&mut acc, &mut other);
                } else {
                    unsafe { crate::op::reduce_local(op, dt, other, acc, count) }?;
                }
                mask <<= 1;
                step += 1;
            }
        }
        unsafe { self.fixup_out(acc, out, len, ctx, rem, me) }?;
        drop(tmp);
        Ok(())
    }

    /// Non-power-of-two fix-up, second half: the odd rank of each pair returns the result
    /// (`acc`) to its even partner, which receives it into `out`; everyone else copies
    /// `acc` into `out` if it is elsewhere.
    unsafe fn fixup_out(
        &mut self,
        acc: *mut u8,
        out: *mut u8,
        len: usize,
        ctx: u32,
        rem: usize,
        me: usize,
    ) -> Result<()> {
        if me < 2 * rem && me.is_multiple_of(2) {
            // SAFETY: `out` valid for len bytes (caller).
            let r = unsafe { self.coll_recv(out, len, ctx, me as i32 + 1, TAG_AR_POST) }?;
            return self.wait_id(r);
        }
        if me < 2 * rem {
            // SAFETY: `acc` valid for len bytes until the wait returns.
            let s =
                unsafe { self.coll_send(acc, len, ctx, me as i32, me as i32 - 1, TAG_AR_POST) }?;
            self.wait_id(s)?;
        }
        if !std::ptr::eq(acc, out) {
            // SAFETY: distinct buffers of len bytes.
            unsafe { std::ptr::copy_nonoverlapping(acc, out, len) };
        }
        Ok(())
    }

    /// Rabenseifner's allreduce of `count` (≥ power-of-two group size) elements held in
    /// `out`: reduce-scatter by recursive halving (block i of the vector ends at group
    /// rank i), then allgather by recursive doubling.
    #[allow(clippy::too_many_arguments)]
    unsafe fn allreduce_rab(
        &mut self,
        out: *mut u8,
        count: usize,
        dt: Datatype,
        op: Op,
        ctx: u32,
        n: usize,
        me: usize,
    ) -> Result<()> {
        let es = dt.size();
        let len = count * es;
        let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let rem = n - pof2;
        let (base, extra) = (count / pof2, count % pof2);
        // First element of block b (b = pof2 is the end).
        let disp = |b: usize| b * base + b.min(extra);
        let mut tmp = scratch(len);
        let mut acc = out;
        let mut other = tmp.as_mut_ptr() as *mut u8;
        // SAFETY (whole body): `out` (caller) and `tmp` hold `len` bytes each and are
        // distinct; every request is waited before its buffer range is touched again;
        // concurrent send and receive use disjoint ranges.
        let group = unsafe { self.fixup_in(&mut acc, &mut other, count, dt, op, ctx, rem, me) }?;
        if let Some(nr) = group {
            // Reduce-scatter: the window [lo, hi) of blocks halves each step.
            let (mut lo, mut hi) = (0usize, pof2);
            let mut mask = pof2 >> 1;
            let mut step = 0;
            while mask > 0 {
                let pr = nr ^ mask;
                let peer = Self::from_group(pr, rem);
                let mid = lo + mask;
                let (keep, give) = if nr & mask == 0 {
                    ((lo, mid), (mid, hi))
                } else {
                    ((mid, hi), (lo, mid))
                };
                let (ko, kn) = (disp(keep.0), disp(keep.1) - disp(keep.0));
                let (go, gn) = (disp(give.0), disp(give.1) - disp(give.0));
                let tag = TAG_AR_STEP + step;
                let r = unsafe { self.coll_recv(other.add(ko * es), kn * es, ctx, peer, tag) }?;
                let s = unsafe {
                    self.coll_send(acc.add(go * es), gn * es, ctx, me as i32, peer, tag)
                }?;
                self.wait_id(s)?;
                self.wait_id(r)?;
                let (a, o) = unsafe { (acc.add(ko * es), other.add(ko * es)) };
                if pr < nr {
                    // The partner's block is the lower one: it is the inout. Only the kept
                    // window matters from now on, so the buffers swap roles.
                    unsafe { crate::op::reduce_local(op, dt, a, o, kn) }?;
                    std::mem::swap(&mut acc, &mut other);
                } else {
                    unsafe { crate::op::reduce_local(op, dt, o, a, kn) }?;
                }
                (lo, hi) = keep;
                mask >>= 1;
                step += 1;
            }
            // Our block is final; gather everything into `out`.
            if !std::ptr::eq(acc, out) {
                let (o, k) = (disp(nr) * es, (disp(nr + 1) - disp(nr)) * es);
                // SAFETY: distinct buffers, range inside both.
                unsafe { std::ptr::copy_nonoverlapping(acc.add(o), out.add(o), k) };
                acc = out;
            }
            let mut mask = 1usize;
            while mask < pof2 {
                let pr = nr ^ mask;
                let peer = Self::from_group(pr, rem);
                let mine = nr & !(mask - 1);
                let theirs = pr & !(mask - 1);
                let (mo, mn) = (disp(mine), disp(mine + mask) - disp(mine));
                let (to, tn) = (disp(theirs), disp(theirs + mask) - disp(theirs));
                let tag = TAG_AR_STEP + step;
                let r = unsafe { self.coll_recv(acc.add(to * es), tn * es, ctx, peer, tag) }?;
                let s = unsafe {
                    self.coll_send(acc.add(mo * es), mn * es, ctx, me as i32, peer, tag)
                }?;
                self.wait_id(s)?;
                self.wait_id(r)?;
                mask <<= 1;
                step += 1;
            }
        }
        unsafe { self.fixup_out(acc, out, len, ctx, rem, me) }?;
        drop(tmp);
        Ok(())
    }
}
