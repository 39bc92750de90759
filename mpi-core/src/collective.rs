//! Collective operations (MPI-4.1 ch. 6) over point-to-point messages on the
//! communicator's collective context (p2p context + 1), so they never match user messages.
//!
//! * barrier: dissemination, ⌈log2 n⌉ rounds of zero-byte messages (tag = round);
//! * bcast: binomial tree rooted at `root`;
//! * reduce: binomial tree towards `root`; each node combines `acc = acc op child` in a
//!   fixed order given by the tree, so the result does not depend on timing;
//! * allreduce: reduce to rank 0, then bcast from 0 (bit-identical result on every rank).

use crate::engine::{Comm, Mpi};
use crate::matching::Envelope;
use crate::{Datatype, Error, ErrorClass, Op, Result};

const TAG_BARRIER: i32 = 1000;
const TAG_BCAST: i32 = 2;
const TAG_REDUCE: i32 = 3;

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

    /// MPI_Allreduce (MPI-4.1 §6.9.6): reduce to rank 0 then bcast, so the result is
    /// identical (bit for bit) on every rank. `sendbuf == None` means MPI_IN_PLACE. Errors
    /// as [`Mpi::reduce`].
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
        // SAFETY: forwarded caller contract.
        unsafe {
            self.reduce_impl(input, recvbuf, c, dt, op, 0, ctx + 1, n, me)?;
            if n > 1 {
                self.bcast_impl(recvbuf, c * dt.size(), 0, ctx + 1, n, me)?;
            }
        }
        Ok(())
    }
}
