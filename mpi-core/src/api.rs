//! The safe Rust API, in the spirit of rsmpi.
//!
//! ```no_run
//! use mpi_core::api::*;
//!
//! fn main() -> mpi_core::Result<()> {
//!     let mut universe = Universe::init()?;
//!     let mut world = universe.world();
//!     let (rank, size) = (world.rank(), world.size());
//!     if rank == 0 {
//!         world.send(&[1.0f64, 2.0, 3.0], 1 % size, 7)?;
//!     } else if rank == 1 {
//!         let mut buf = [0.0f64; 3];
//!         let status = world.receive_into(&mut buf, 0, 7)?;
//!         assert_eq!(status.count_of::<f64>(), 3);
//!     }
//!     let mut sum = [0i64];
//!     world.all_reduce_into(&[rank as i64], &mut sum, Op::Sum)?;
//!     drop(world);
//!     universe.finalize()
//! }
//! ```
//!
//! - [`Universe`] owns the engine: MPI_Init on creation, MPI_Finalize on
//!   [`Universe::finalize`] or drop (MPI-4.1 §11.2).
//! - [`Equivalence`] maps Rust primitives to predefined datatypes (MPI-4.1 §3.2.2).
//! - [`Communicator`] carries point-to-point (MPI-4.1 ch. 3) and collective (ch. 6)
//!   operations as methods; every fallible one returns [`crate::Result`].
//! - Nonblocking operations live in a [`Communicator::scope`]: each [`ScopedRequest`]
//!   borrows its buffer until the scope ends, and the scope completes every request that
//!   is still in flight before it returns, so a buffer can never be freed or reused while
//!   the network may still read or write it (MPI-4.1 §3.7.2).

use std::cell::RefCell;
use std::marker::PhantomData;

use crate::{Comm, Error, ErrorClass, Mpi, Request, Result};

pub use crate::{Datatype, Op, Status, ThreadLevel, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

/// An MPI environment: MPI_Init on creation, MPI_Finalize on [`Universe::finalize`] or on
/// drop (MPI-4.1 §11.2.1, §11.2.2). There is one per process.
pub struct Universe {
    /// `None` only after finalize has taken it.
    mpi: Option<Mpi>,
    provided: ThreadLevel,
}

impl Universe {
    /// MPI_Init (MPI-4.1 §11.2.1): starts the process's MPI environment (under the
    /// launcher, or as a singleton of size 1 without one).
    pub fn init() -> Result<Universe> {
        Universe::init_thread(ThreadLevel::Single)
    }

    /// MPI_Init_thread (MPI-4.1 §11.6.1): as [`Universe::init`] asking for thread level
    /// `required`; [`Universe::thread_level`] tells what was provided (possibly less).
    pub fn init_thread(required: ThreadLevel) -> Result<Universe> {
        let (mpi, provided) = Mpi::init(required)?;
        Ok(Universe {
            mpi: Some(mpi),
            provided,
        })
    }

    /// The thread level provided (MPI_Query_thread, MPI-4.1 §11.6.1).
    pub fn thread_level(&self) -> ThreadLevel {
        self.provided
    }

    /// MPI_COMM_WORLD (MPI-4.1 §7.2.4): all processes of the job.
    pub fn world(&mut self) -> Communicator<'_> {
        Communicator {
            mpi: self.engine(),
            comm: Comm::WORLD,
        }
    }

    /// MPI_COMM_SELF (MPI-4.1 §7.2.4): this process alone.
    pub fn self_comm(&mut self) -> Communicator<'_> {
        Communicator {
            mpi: self.engine(),
            comm: Comm::SELF,
        }
    }

    /// The engine, for operations this API does not wrap yet (MPI_Alloc_mem, error
    /// handlers, ...).
    pub fn engine(&mut self) -> &mut Mpi {
        self.mpi.as_mut().expect("the engine lives until finalize")
    }

    /// MPI_Abort on MPI_COMM_WORLD (MPI-4.1 §9.5): ends every process of the job with
    /// exit code `code`.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        self.engine().abort(code, msg)
    }

    /// MPI_Finalize (MPI-4.1 §11.2.2): completes outstanding communication and shuts the
    /// device down; collective over the job. Returns its error, unlike dropping.
    pub fn finalize(mut self) -> Result<()> {
        match self.mpi.take() {
            Some(mpi) => mpi.finalize(),
            None => Ok(()),
        }
    }
}

impl Drop for Universe {
    /// MPI_Finalize, reporting an error on stderr. While the thread is panicking the job is
    /// aborted instead (MPI_Abort with code 1): the other ranks may be blocked waiting for
    /// this one, so a collective finalize could hang the job.
    fn drop(&mut self) {
        if let Some(mut mpi) = self.mpi.take() {
            if std::thread::panicking() {
                mpi.abort(1, "a rank panicked; aborting the job");
            }
            if let Err(e) = mpi.finalize() {
                eprintln!("mpi-core: MPI_Finalize failed: {e}");
            }
        }
    }
}

/// A Rust type with the layout of a predefined MPI datatype (MPI-4.1 §3.2.2), usable as a
/// message element.
///
/// # Safety
/// `T` must have exactly the size, alignment requirements no stricter than, and the value
/// representation of [`Equivalence::DATATYPE`], and **every** bit pattern of that size must
/// be a valid `T` (received bytes are written into `T`s unchecked). This is why `bool` and
/// `char` do not implement it.
pub unsafe trait Equivalence: Copy {
    /// The matching predefined datatype.
    const DATATYPE: Datatype;
}

macro_rules! equivalence {
    ($($t:ty => $dt:ident),* $(,)?) => {
        $(
            // SAFETY: fixed-width primitive of the same size and representation as the
            // C type; every bit pattern is valid.
            unsafe impl Equivalence for $t {
                const DATATYPE: Datatype = Datatype::$dt;
            }
        )*
    };
}

equivalence! {
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64,
    f32 => Float, f64 => Double,
}

#[cfg(target_pointer_width = "64")]
equivalence! { isize => Int64, usize => Uint64 }
#[cfg(target_pointer_width = "32")]
equivalence! { isize => Int32, usize => Uint32 }

impl Status {
    /// MPI_Get_count (MPI-4.1 §3.2.5) in elements of `T`, or [`crate::UNDEFINED`] when the
    /// byte count is not a multiple of `T`'s size.
    pub fn count_of<T: Equivalence>(&self) -> i32 {
        self.get_count(T::DATATYPE)
    }
}

/// Element count of a buffer as MPI's `int` count (MPI_ERR_COUNT beyond `i32::MAX`).
fn count_of_len(len: usize) -> Result<i32> {
    i32::try_from(len).map_err(|_| {
        Error::new(
            ErrorClass::Count,
            format!(
                "a buffer of {len} elements exceeds the largest count {}",
                i32::MAX
            ),
        )
    })
}

fn same_len(what: &str, send: usize, recv: usize) -> Result<()> {
    if send == recv {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Count,
            format!("{what}: the send buffer has {send} elements but the receive buffer {recv}"),
        ))
    }
}

/// A communicator (MPI-4.1 ch. 7) bound to the engine for the lifetime `'a`: the
/// operations of point-to-point (ch. 3) and collective (ch. 6) communication are its
/// methods. Obtained from [`Universe::world`] or [`Universe::self_comm`].
pub struct Communicator<'a> {
    mpi: &'a mut Mpi,
    comm: Comm,
}

impl<'a> Communicator<'a> {
    /// The engine's handle of this communicator.
    pub fn handle(&self) -> Comm {
        self.comm
    }

    /// MPI_Comm_rank (MPI-4.1 §7.4.1): this process's rank, in `0..size()`.
    pub fn rank(&self) -> i32 {
        self.mpi
            .comm_rank(self.comm)
            .expect("predefined communicators are always valid")
    }

    /// MPI_Comm_size (MPI-4.1 §7.4.1): number of processes.
    pub fn size(&self) -> i32 {
        self.mpi
            .comm_size(self.comm)
            .expect("predefined communicators are always valid")
    }

    /// MPI_Abort (MPI-4.1 §9.5): ends every process of the job (this implementation
    /// aborts all of MPI_COMM_WORLD whatever the communicator) with exit code `code`.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        self.mpi.abort(code, msg)
    }

    /// MPI_Send (MPI-4.1 §3.2.1), standard mode: returns when `buf` may be reused.
    /// `dest` may be [`PROC_NULL`]. Errors: MPI_ERR_RANK, MPI_ERR_TAG, MPI_ERR_COUNT.
    pub fn send<T: Equivalence>(&mut self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        let count = count_of_len(buf.len())?;
        // SAFETY: `buf` is valid for reads of its length for the duration of the call.
        unsafe {
            self.mpi.send(
                buf.as_ptr() as *const u8,
                count,
                T::DATATYPE,
                dest,
                tag,
                self.comm,
            )
        }
    }

    /// MPI_Recv (MPI-4.1 §3.2.4) into `buf`; `source` may be [`ANY_SOURCE`] or
    /// [`PROC_NULL`], `tag` may be [`ANY_TAG`]. The status tells the actual source, tag
    /// and length ([`Status::count_of`]). Errors also MPI_ERR_TRUNCATE when the message is
    /// longer than `buf`.
    pub fn receive_into<T: Equivalence>(
        &mut self,
        buf: &mut [T],
        source: i32,
        tag: i32,
    ) -> Result<Status> {
        let count = count_of_len(buf.len())?;
        // SAFETY: `buf` is valid for writes for the duration of the call and every bit
        // pattern is a valid `T` (Equivalence).
        unsafe {
            self.mpi.recv(
                buf.as_mut_ptr() as *mut u8,
                count,
                T::DATATYPE,
                source,
                tag,
                self.comm,
            )
        }
    }

    /// MPI_Sendrecv (MPI-4.1 §3.10): sends `send` to `dest` and receives into `recv` from
    /// `source` without deadlocking on each other.
    pub fn send_receive_into<S: Equivalence, R: Equivalence>(
        &mut self,
        send: &[S],
        dest: i32,
        send_tag: i32,
        recv: &mut [R],
        source: i32,
        recv_tag: i32,
    ) -> Result<Status> {
        let scount = count_of_len(send.len())?;
        let rcount = count_of_len(recv.len())?;
        // Check the send's arguments before posting the receive, so that a bad `dest` or
        // `tag` is reported without a receive left waiting.
        let size = self.size();
        if dest != PROC_NULL && !(0..size).contains(&dest) {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("invalid rank {dest} in a communicator of size {size}"),
            ));
        }
        if !(0..=TAG_UB).contains(&send_tag) {
            return Err(Error::new(
                ErrorClass::Tag,
                format!("invalid tag {send_tag} (valid: 0..={TAG_UB})"),
            ));
        }
        // SAFETY: both buffers are borrowed until both requests completed below.
        unsafe {
            let r = self.mpi.irecv(
                recv.as_mut_ptr() as *mut u8,
                rcount,
                R::DATATYPE,
                source,
                recv_tag,
                self.comm,
            )?;
            let s = match self.mpi.isend(
                send.as_ptr() as *const u8,
                scount,
                S::DATATYPE,
                dest,
                send_tag,
                self.comm,
            ) {
                Ok(s) => s,
                Err(e) => {
                    // The receive may still be written: complete it before `recv` is
                    // released. Its own outcome is secondary to the send's error.
                    let _ = self.mpi.wait(r);
                    return Err(e);
                }
            };
            let mut st = [Status::default(); 2];
            self.mpi.waitall(&[r, s], &mut st).map_err(|e| {
                if e.class == ErrorClass::InStatus {
                    let failed = if st[0].error != 0 { st[0] } else { st[1] };
                    let class = ErrorClass::from_code(failed.error).unwrap_or(ErrorClass::Other);
                    Error::new(class, e.msg)
                } else {
                    e
                }
            })?;
            Ok(st[0])
        }
    }

    /// MPI_Probe (MPI-4.1 §3.8.1): blocks until a message from `source` with `tag` (or the
    /// wildcards) is pending; `Status::count` is its length in bytes.
    pub fn probe(&mut self, source: i32, tag: i32) -> Result<Status> {
        self.mpi.probe(source, tag, self.comm)
    }

    /// MPI_Iprobe (MPI-4.1 §3.8.1): as [`Communicator::probe`] without blocking.
    pub fn immediate_probe(&mut self, source: i32, tag: i32) -> Result<Option<Status>> {
        self.mpi.iprobe(source, tag, self.comm)
    }

    /// MPI_Barrier (MPI-4.1 §6.3).
    pub fn barrier(&mut self) -> Result<()> {
        self.mpi.barrier(self.comm)
    }

    /// MPI_Bcast (MPI-4.1 §6.4): `root`'s `buf` is copied into every other rank's `buf`
    /// (same length everywhere). Errors: MPI_ERR_ROOT.
    pub fn broadcast_into<T: Equivalence>(&mut self, buf: &mut [T], root: i32) -> Result<()> {
        let count = count_of_len(buf.len())?;
        // SAFETY: `buf` is valid for reads and writes for the call; every bit pattern is a
        // valid `T`.
        unsafe {
            self.mpi.bcast(
                buf.as_mut_ptr() as *mut u8,
                count,
                T::DATATYPE,
                root,
                self.comm,
            )
        }
    }

    /// MPI_Allreduce (MPI-4.1 §6.9.6): `recv[i] = op over all ranks of send[i]`, the same
    /// bits on every rank. `send` and `recv` have the same length. Errors: MPI_ERR_OP (e.g.
    /// an op not defined on `T`), MPI_ERR_COUNT.
    pub fn all_reduce_into<T: Equivalence>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: Op,
    ) -> Result<()> {
        same_len("MPI_Allreduce", send.len(), recv.len())?;
        let count = count_of_len(send.len())?;
        // SAFETY: distinct borrows (so no overlap), valid for the call.
        unsafe {
            self.mpi.allreduce(
                Some(send.as_ptr() as *const u8),
                recv.as_mut_ptr() as *mut u8,
                count,
                T::DATATYPE,
                op,
                self.comm,
            )
        }
    }

    /// MPI_Allreduce with MPI_IN_PLACE (MPI-4.1 §6.9.6): `buf` is both input and result.
    pub fn all_reduce_in_place<T: Equivalence>(&mut self, buf: &mut [T], op: Op) -> Result<()> {
        let count = count_of_len(buf.len())?;
        // SAFETY: `buf` valid for reads and writes for the call.
        unsafe {
            self.mpi.allreduce(
                None,
                buf.as_mut_ptr() as *mut u8,
                count,
                T::DATATYPE,
                op,
                self.comm,
            )
        }
    }

    /// MPI_Reduce (MPI-4.1 §6.9.1): the element-wise `op` over all ranks' `send` lands in
    /// `root`'s `recv`. `recv` must be `Some` (of `send`'s length) at the root and is
    /// ignored elsewhere (pass `None`). Errors: MPI_ERR_OP, MPI_ERR_ROOT, MPI_ERR_COUNT,
    /// MPI_ERR_BUFFER (no `recv` at the root).
    pub fn reduce_into<T: Equivalence>(
        &mut self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: Op,
        root: i32,
    ) -> Result<()> {
        let count = count_of_len(send.len())?;
        let recv_ptr = if root == self.rank() {
            match recv {
                Some(r) => {
                    same_len("MPI_Reduce", send.len(), r.len())?;
                    r.as_mut_ptr() as *mut u8
                }
                None => {
                    return Err(Error::new(
                        ErrorClass::Buffer,
                        "MPI_Reduce: the root needs a receive buffer",
                    ))
                }
            }
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `send` valid for reads; `recv` (significant only at the root) valid for
        // writes of the same length; distinct borrows.
        unsafe {
            self.mpi.reduce(
                Some(send.as_ptr() as *const u8),
                recv_ptr,
                count,
                T::DATATYPE,
                op,
                root,
                self.comm,
            )
        }
    }

    /// Runs `f` with a [`Scope`] for nonblocking operations (MPI-4.1 §3.7) and returns its
    /// result. Buffers given to the scope's operations must outlive the whole scope; when
    /// `f` returns (or panics) every request still in flight is completed (MPI_Wait) before
    /// `scope` returns, so no buffer is released while the network may use it.
    ///
    /// A buffer borrowed by a request stays borrowed until the scope ends (even after the
    /// request is waited for): read received data after `scope` returns.
    ///
    /// ```no_run
    /// # use mpi_core::api::*;
    /// # let mut universe = Universe::init().unwrap();
    /// # let mut world = universe.world();
    /// let peer = 1 - world.rank();
    /// let out = [world.rank(); 4];
    /// let mut inp = [0i32; 4];
    /// world.scope(|s| -> mpi_core::Result<()> {
    ///     let r = s.immediate_receive_into(&mut inp, peer, 0)?;
    ///     let w = s.immediate_send(&out, peer, 0)?;
    ///     w.wait()?;
    ///     r.wait()?;
    ///     Ok(())
    /// })?;
    /// assert_eq!(inp, [peer; 4]);
    /// # Ok::<(), mpi_core::Error>(())
    /// ```
    ///
    /// A buffer that does not outlive the scope is rejected at compile time:
    ///
    /// ```compile_fail
    /// # use mpi_core::api::*;
    /// # let mut universe = Universe::init().unwrap();
    /// # let mut world = universe.world();
    /// world.scope(|s| {
    ///     let local = vec![1u8; 8];
    ///     let _r = s.immediate_send(&local, 1, 0); // `local` dies inside the scope
    /// });
    /// ```
    pub fn scope<'env, F, R>(&'env mut self, f: F) -> R
    where
        F: for<'s> FnOnce(&'s Scope<'s, 'env>) -> R,
    {
        let scope = Scope {
            mpi: RefCell::new(&mut *self.mpi),
            comm: self.comm,
            pending: RefCell::new(Vec::new()),
            _scope: PhantomData,
            _env: PhantomData,
        };
        // Completes whatever is still in flight on every way out of `f`, unwinding
        // included.
        struct Complete<'a, 's, 'env>(&'a Scope<'s, 'env>);
        impl Drop for Complete<'_, '_, '_> {
            fn drop(&mut self) {
                self.0.complete_all();
            }
        }
        let guard = Complete(&scope);
        let r = f(&scope);
        drop(guard);
        r
    }
}

/// The scope of nonblocking operations of one communicator (see
/// [`Communicator::scope`]). `'s` is the scope's lifetime, which every buffer given to it
/// must outlive; `'env` is the communicator's borrow.
pub struct Scope<'s, 'env: 's> {
    mpi: RefCell<&'env mut Mpi>,
    comm: Comm,
    /// Requests started in this scope and not completed yet.
    pending: RefCell<Vec<Request>>,
    /// Invariant in both lifetimes, so that `'s` cannot be shortened to let a buffer die
    /// inside the scope (as in `std::thread::Scope`).
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'s, 'env> Scope<'s, 'env> {
    fn engine(&self) -> Result<std::cell::RefMut<'_, &'env mut Mpi>> {
        self.mpi.try_borrow_mut().map_err(|_| {
            Error::new(
                ErrorClass::Request,
                "the scope's requests cannot be used inside its with_communicator",
            )
        })
    }

    fn track(&'s self, req: Request) -> ScopedRequest<'s, 'env> {
        self.pending.borrow_mut().push(req);
        ScopedRequest {
            req: Some(req),
            scope: self,
        }
    }

    fn untrack(&self, req: Request) {
        let mut p = self.pending.borrow_mut();
        if let Some(i) = p.iter().position(|&r| r == req) {
            p.swap_remove(i);
        }
    }

    /// Waits for every request still pending (on scope exit).
    fn complete_all(&self) {
        let pending: Vec<Request> = std::mem::take(&mut *self.pending.borrow_mut());
        if pending.is_empty() {
            return;
        }
        match self.mpi.try_borrow_mut() {
            Ok(mut mpi) => {
                for r in pending {
                    // The outcome of a request nobody waited for has nowhere to go.
                    let _ = mpi.wait(r);
                }
            }
            // Cannot happen (the borrow of with_communicator ended before we get here),
            // but if it did, returning would release buffers still in flight.
            Err(_) => std::process::abort(),
        }
    }

    /// MPI_Isend (MPI-4.1 §3.7.2): starts sending `buf`; the request borrows `buf` until
    /// the scope ends. Errors as [`Communicator::send`], reported here or at completion.
    pub fn immediate_send<T: Equivalence>(
        &'s self,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<ScopedRequest<'s, 'env>> {
        let count = count_of_len(buf.len())?;
        let mut mpi = self.engine()?;
        // SAFETY: `buf` is borrowed for 's, and the scope completes the request before 's
        // ends (complete_all).
        let req = unsafe {
            mpi.isend(
                buf.as_ptr() as *const u8,
                count,
                T::DATATYPE,
                dest,
                tag,
                self.comm,
            )?
        };
        drop(mpi);
        Ok(self.track(req))
    }

    /// MPI_Irecv (MPI-4.1 §3.7.2): starts receiving into `buf`, which stays borrowed until
    /// the scope ends (read it after [`Communicator::scope`] returns). Errors as
    /// [`Communicator::receive_into`], MPI_ERR_TRUNCATE at completion.
    pub fn immediate_receive_into<T: Equivalence>(
        &'s self,
        buf: &'s mut [T],
        source: i32,
        tag: i32,
    ) -> Result<ScopedRequest<'s, 'env>> {
        let count = count_of_len(buf.len())?;
        let mut mpi = self.engine()?;
        // SAFETY: `buf` is exclusively borrowed for 's and the request completes before 's
        // ends; every bit pattern is a valid `T`.
        let req = unsafe {
            mpi.irecv(
                buf.as_mut_ptr() as *mut u8,
                count,
                T::DATATYPE,
                source,
                tag,
                self.comm,
            )?
        };
        drop(mpi);
        Ok(self.track(req))
    }

    /// MPI_Waitall (MPI-4.1 §3.7.5): completes all `reqs`; the statuses are in the same
    /// order. Errors: the first failed request's error (all are completed regardless).
    pub fn wait_all(&self, reqs: Vec<ScopedRequest<'s, 'env>>) -> Result<Vec<Status>> {
        let mut mpi = self.engine()?;
        let mut handles = Vec::with_capacity(reqs.len());
        let mut owners = Vec::with_capacity(reqs.len());
        for mut r in reqs {
            if let Some(h) = r.req.take() {
                handles.push(h);
                owners.push(r.scope);
            }
        }
        let mut st = vec![Status::default(); handles.len()];
        let res = mpi.waitall(&handles, &mut st);
        drop(mpi);
        for (&h, owner) in handles.iter().zip(owners) {
            owner.untrack(h);
        }
        match res {
            Ok(()) => Ok(st),
            Err(e) if e.class == ErrorClass::InStatus => {
                let failed = st
                    .iter()
                    .find(|s| s.error != 0)
                    .copied()
                    .unwrap_or_default();
                let class = ErrorClass::from_code(failed.error).unwrap_or(ErrorClass::Other);
                Err(Error::new(class, e.msg))
            }
            Err(e) => Err(e),
        }
    }

    /// Runs `f` with this scope's communicator for blocking operations (send, receive,
    /// collectives) while requests are in flight. The scope's requests cannot be waited
    /// for inside `f` (that returns MPI_ERR_REQUEST).
    pub fn with_communicator<R>(&self, f: impl FnOnce(&mut Communicator<'_>) -> R) -> R {
        let mut mpi = self
            .mpi
            .try_borrow_mut()
            .expect("with_communicator may not be nested in itself");
        let mut c = Communicator {
            mpi: &mut mpi,
            comm: self.comm,
        };
        f(&mut c)
    }
}

/// A nonblocking operation in flight (MPI-4.1 §3.7.1), borrowing its buffer for the scope
/// `'s`. Complete it with [`ScopedRequest::wait`] or [`ScopedRequest::test`]; dropping an
/// incomplete request waits for it and discards its status and error.
#[must_use = "a request must be completed with wait() or test() to learn its outcome"]
pub struct ScopedRequest<'s, 'env> {
    /// `None` once completed.
    req: Option<Request>,
    scope: &'s Scope<'s, 'env>,
}

impl<'s, 'env> ScopedRequest<'s, 'env> {
    /// MPI_Wait (MPI-4.1 §3.7.3): blocks until the operation completes; for a receive the
    /// status tells source, tag and length. Errors: e.g. MPI_ERR_TRUNCATE.
    pub fn wait(mut self) -> Result<Status> {
        let h = self.req.expect("not yet completed");
        let res = self.scope.engine()?.wait(h);
        self.req = None;
        self.scope.untrack(h);
        res
    }

    /// MPI_Test (MPI-4.1 §3.7.3): `Ok(result)` when the operation has completed (with its
    /// status or error), else `Err(self)` to try again later.
    #[allow(clippy::result_large_err)]
    pub fn test(mut self) -> std::result::Result<Result<Status>, Self> {
        let h = self.req.expect("not yet completed");
        let mut mpi = match self.scope.engine() {
            Ok(m) => m,
            // Inside with_communicator: report it; dropping `self` leaves the request to
            // the scope's exit, which completes it.
            Err(e) => return Ok(Err(e)),
        };
        match mpi.test(h) {
            Ok(None) => {
                drop(mpi);
                Err(self)
            }
            done => {
                drop(mpi);
                self.req = None;
                self.scope.untrack(h);
                Ok(done.map(|s| s.expect("completed")))
            }
        }
    }
}

impl Drop for ScopedRequest<'_, '_> {
    fn drop(&mut self) {
        if let Some(h) = self.req.take() {
            // Inside with_communicator the engine is busy: leave the request to the
            // scope's exit, which waits for it.
            if let Ok(mut mpi) = self.scope.mpi.try_borrow_mut() {
                let _ = mpi.wait(h);
                drop(mpi);
                self.scope.untrack(h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout<T: Equivalence>() {
        assert_eq!(std::mem::size_of::<T>(), T::DATATYPE.size());
        assert!(std::mem::align_of::<T>() <= T::DATATYPE.size());
    }

    #[test]
    fn equivalence_layouts_match() {
        layout::<i8>();
        layout::<i16>();
        layout::<i32>();
        layout::<i64>();
        layout::<u8>();
        layout::<u16>();
        layout::<u32>();
        layout::<u64>();
        layout::<f32>();
        layout::<f64>();
        layout::<isize>();
        layout::<usize>();
    }

    #[test]
    fn every_equivalence_type_supports_every_op() {
        // So the API can never raise MPI_ERR_OP for a Rust type.
        for dt in [
            i8::DATATYPE,
            i16::DATATYPE,
            i32::DATATYPE,
            i64::DATATYPE,
            u8::DATATYPE,
            u16::DATATYPE,
            u32::DATATYPE,
            u64::DATATYPE,
            f32::DATATYPE,
            f64::DATATYPE,
            isize::DATATYPE,
            usize::DATATYPE,
        ] {
            for op in [Op::Sum, Op::Prod, Op::Min, Op::Max] {
                crate::op::check(op, dt).unwrap();
            }
        }
    }

    #[test]
    fn counts() {
        assert_eq!(count_of_len(5), Ok(5));
        assert_eq!(count_of_len(1 << 31).unwrap_err().class, ErrorClass::Count);
        assert_eq!(same_len("x", 2, 3).unwrap_err().class, ErrorClass::Count);
        let st = Status {
            count: 12,
            ..Status::default()
        };
        assert_eq!(st.count_of::<u32>(), 3);
        assert_eq!(st.count_of::<f64>(), crate::UNDEFINED);
    }
}
