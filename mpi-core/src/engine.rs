//! The engine: one per rank. Point-to-point (MPI-4.1 ch. 3), collectives (ch. 6), memory
//! allocation (§9.2), error handlers (§9.3), start-up and shutdown (§11.2).
//!
//! Every buffer argument is a raw pointer plus a count and a datatype, as in the C
//! binding; the safe Rust API in [`crate::api`] wraps these.

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
        if self.count % sz != 0 {
            crate::UNDEFINED
        } else {
            (self.count / sz) as i32
        }
    }
}

/// The per-rank engine (progress engine, matching, protocols, collectives).
pub struct Mpi {
    _private: (),
}

#[allow(unused_variables)]
impl Mpi {
    /// MPI_Init / MPI_Init_thread: bootstraps through PMI (or as a singleton when started
    /// without a launcher), creates the heap and the device, connects to all ranks.
    /// Returns the engine and the provided thread level.
    pub fn init(required: ThreadLevel) -> Result<(Mpi, ThreadLevel)> {
        todo!()
    }

    /// Rank of this process in MPI_COMM_WORLD.
    pub fn rank(&self) -> usize {
        todo!()
    }
    /// Size of MPI_COMM_WORLD.
    pub fn size(&self) -> usize {
        todo!()
    }
    /// MPI_Comm_rank. Errors: MPI_ERR_COMM for an unknown communicator.
    pub fn comm_rank(&self, comm: Comm) -> Result<i32> {
        todo!()
    }
    /// MPI_Comm_size. Errors: MPI_ERR_COMM.
    pub fn comm_size(&self, comm: Comm) -> Result<i32> {
        todo!()
    }

    /// MPI_Isend (standard mode). Errors: MPI_ERR_COMM, MPI_ERR_COUNT (negative count),
    /// MPI_ERR_RANK (dest not in 0..size and not MPI_PROC_NULL), MPI_ERR_TAG (tag < 0 or
    /// > TAG_UB), MPI_ERR_BUFFER (null buffer with count > 0).
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
        todo!()
    }

    /// MPI_Irecv. `source` may be MPI_ANY_SOURCE or MPI_PROC_NULL, `tag` may be
    /// MPI_ANY_TAG. Errors as [`Mpi::isend`]; truncation is reported at completion
    /// (MPI_ERR_TRUNCATE).
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
        todo!()
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
        todo!()
    }

    /// MPI_Recv: [`Mpi::irecv`] + [`Mpi::wait`]. Errors also MPI_ERR_TRUNCATE.
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
        todo!()
    }

    /// MPI_Wait: completes `req` and frees it. On error (e.g. MPI_ERR_TRUNCATE) the request
    /// is freed too and the status is lost. Errors: MPI_ERR_REQUEST for an unknown request.
    pub fn wait(&mut self, req: Request) -> Result<Status> {
        todo!()
    }

    /// MPI_Test: `Some(status)` (request freed) if complete, else `None` after one progress
    /// step.
    pub fn test(&mut self, req: Request) -> Result<Option<Status>> {
        todo!()
    }

    /// MPI_Waitall: completes all; `statuses[i]` gets each status (with `error` set). If any
    /// request failed, returns MPI_ERR_IN_STATUS (statuses[i].error says which).
    pub fn waitall(&mut self, reqs: &[Request], statuses: &mut [Status]) -> Result<()> {
        todo!()
    }

    /// MPI_Iprobe: `Some(status)` (count = full message size in bytes) if a matching
    /// message is pending.
    pub fn iprobe(&mut self, source: i32, tag: i32, comm: Comm) -> Result<Option<Status>> {
        todo!()
    }

    /// MPI_Probe: blocks until a matching message is pending.
    pub fn probe(&mut self, source: i32, tag: i32, comm: Comm) -> Result<Status> {
        todo!()
    }

    /// MPI_Barrier.
    pub fn barrier(&mut self, comm: Comm) -> Result<()> {
        todo!()
    }

    /// MPI_Bcast. Errors: MPI_ERR_ROOT, MPI_ERR_COUNT, MPI_ERR_COMM.
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
        todo!()
    }

    /// MPI_Reduce. `sendbuf == None` means MPI_IN_PLACE (only valid at the root, where the
    /// input is taken from `recvbuf`). `recvbuf` is significant only at the root. Errors:
    /// MPI_ERR_OP when `op` is not defined for `dt`, MPI_ERR_ROOT, MPI_ERR_COUNT.
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
        todo!()
    }

    /// MPI_Allreduce. `sendbuf == None` means MPI_IN_PLACE. The result is identical
    /// (bit for bit) on every rank.
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
        todo!()
    }

    /// MPI_Alloc_mem: `size` bytes from the heap (falls back to the system allocator when
    /// the heap is exhausted). Errors: MPI_ERR_NO_MEM.
    pub fn alloc_mem(&mut self, size: usize) -> Result<*mut u8> {
        todo!()
    }

    /// MPI_Free_mem. Errors: MPI_ERR_ARG for a pointer not from [`Mpi::alloc_mem`].
    ///
    /// # Safety
    /// No pending operation may use the memory.
    pub unsafe fn free_mem(&mut self, ptr: *mut u8) -> Result<()> {
        todo!()
    }

    /// MPI_Comm_set_errhandler.
    pub fn set_errhandler(&mut self, comm: Comm, h: ErrHandler) -> Result<()> {
        todo!()
    }

    /// MPI_Comm_get_errhandler.
    pub fn errhandler(&self, comm: Comm) -> Result<ErrHandler> {
        todo!()
    }

    /// MPI_Abort: tells the launcher (PMI abort) and exits the process with `code`; the
    /// launcher stops the other ranks.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        todo!()
    }

    /// MPI_Finalize: completes outstanding communication, collective shutdown of the device.
    pub fn finalize(self) -> Result<()> {
        todo!()
    }
}

#[allow(dead_code)]
fn _unused(_: Error) {}
