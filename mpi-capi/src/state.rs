//! The process-global engine, the entry-point wrapper and error handling.
//!
//! ## Global state
//! One [`Mpi`] per process lives in [`STATE`], a `Mutex<Phase>`. Every C entry point that
//! needs the engine takes the lock for the duration of the engine call (one uncontended
//! lock/unlock, some 20 ns). Flags that may be read without the engine
//! (`MPI_Initialized`, `MPI_Finalized`, the provided thread level) are atomics.
//!
//! Under `MPI_THREAD_MULTIPLE` the blocking point-to-point calls are run as nonblocking
//! call + polling loop that releases the lock between polls (see `p2p.rs`), so one
//! thread blocked in `MPI_Recv` does not stop the others. Collectives hold the lock.
//!
//! ## Errors
//! Entry points run their body through [`api`]: the body returns `Err(CallError)` with
//! the communicator whose error handler applies (`None`: MPI_COMM_WORLD's). Under
//! MPI_ERRORS_RETURN the class is returned; under MPI_ERRORS_ARE_FATAL the error is
//! printed as `MPI error in <function>: <class description>: <detail>` and the job is
//! aborted through the engine. A Rust panic never crosses the FFI boundary: it becomes
//! MPI_ERR_INTERN and aborts.

use mpi_core::{Comm, ErrHandler, Error, ErrorClass, Mpi};
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The engine, made movable into the global.
///
/// SAFETY (invariant): the engine is only ever touched through [`STATE`]'s lock, so at
/// most one thread uses it at a time; the thread level provided to the program bounds
/// which threads call at all. `Send` is asserted because the engine may hold raw
/// pointers into its heap, which are only dereferenced under that lock.
pub struct Engine(pub Mpi);
// SAFETY: see the invariant above — all access is serialised by `STATE`'s mutex.
unsafe impl Send for Engine {}

/// Life cycle of the library in this process. (It lives in one static, so the size
/// difference of the variants costs nothing; no box, no extra indirection per call.)
#[allow(clippy::large_enum_variant)]
pub enum Phase {
    /// Before MPI_Init.
    Uninit,
    /// Between MPI_Init and MPI_Finalize.
    Running(Engine),
    /// After MPI_Finalize (no re-initialisation, MPI-4.1 §11.2.2).
    Finalized,
}

/// The global engine.
pub static STATE: Mutex<Phase> = Mutex::new(Phase::Uninit);
/// MPI_Initialized's answer (stays true after MPI_Finalize, as the standard asks).
pub static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// MPI_Finalized's answer.
pub static FINALIZED: AtomicBool = AtomicBool::new(false);
/// The provided thread level (valid once INITIALIZED).
pub static THREAD_LEVEL: AtomicI32 = AtomicI32::new(0);
/// The thread that called MPI_Init (MPI_Is_thread_main).
pub static MAIN_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Locks the global state. A poisoned lock (a panic inside the engine, which is turned
/// into a fatal error anyway) is entered regardless.
pub fn lock() -> MutexGuard<'static, Phase> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An error of a C call and the communicator whose error handler applies.
pub struct CallError {
    pub err: Error,
    /// `None`: MPI_COMM_WORLD's handler.
    pub comm: Option<Comm>,
}

impl From<Error> for CallError {
    fn from(err: Error) -> CallError {
        CallError { err, comm: None }
    }
}

/// Result of a C call's body.
pub type CResult<T = ()> = Result<T, CallError>;

/// Attaches the communicator whose error handler applies.
pub trait OnComm<T> {
    fn on(self, comm: Comm) -> CResult<T>;
}

impl<T> OnComm<T> for Result<T, Error> {
    fn on(self, comm: Comm) -> CResult<T> {
        self.map_err(|err| CallError {
            err,
            comm: Some(comm),
        })
    }
}

/// A MPI_ERR_ARG error (communicator: MPI_COMM_WORLD).
pub fn arg_err(msg: impl Into<String>) -> CallError {
    Error::new(ErrorClass::Arg, msg).into()
}

/// Fails with MPI_ERR_ARG if `p` is null.
pub fn non_null<T>(p: *const T, what: &str) -> CResult {
    if p.is_null() {
        Err(arg_err(format!("null pointer for {what}")))
    } else {
        Ok(())
    }
}

/// Runs the body of the C function `name`: converts its result into an MPI return code,
/// applying the error handler, and turns a panic into a fatal MPI_ERR_INTERN.
pub fn api(name: &'static str, body: impl FnOnce() -> CResult) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| match body() {
        Ok(()) => mpi_core::ErrorClass::Success as c_int,
        Err(e) => handle_error(name, e),
    }));
    match r {
        Ok(code) => code,
        Err(payload) => {
            let msg = if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "panic".to_string()
            };
            fatal(
                name,
                &Error::new(ErrorClass::Intern, format!("panic in the library: {msg}")),
            )
        }
    }
}

/// Applies the error handler of `e.comm` (or MPI_COMM_WORLD's) to an error of `name`.
fn handle_error(name: &'static str, e: CallError) -> c_int {
    let handler = {
        let mut g = lock();
        match &mut *g {
            Phase::Running(Engine(mpi)) => {
                let comm = e.comm.unwrap_or(Comm::WORLD);
                mpi.errhandler(comm)
                    .or_else(|_| mpi.errhandler(Comm::WORLD))
                    .unwrap_or(ErrHandler::Fatal)
            }
            _ => ErrHandler::Fatal,
        }
    };
    match handler {
        ErrHandler::Return => e.err.class as c_int,
        ErrHandler::Fatal => fatal(name, &e.err),
    }
}

/// MPI_ERRORS_ARE_FATAL: prints the error and aborts the job (exit code 1, as MPICH).
/// Must be called without holding the lock.
pub fn fatal(name: &str, err: &Error) -> ! {
    abort_job(1, &format!("MPI error in {name}: {err}"))
}

/// Aborts the job through the engine if there is one (it prints `msg` with the rank and
/// tells the launcher), else prints `msg` and exits. Never returns; falls back to
/// `exit(code)` if the engine is busy in another thread for more than a second or fails.
pub fn abort_job(code: c_int, msg: &str) -> ! {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let mut g = match STATE.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                if Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        if let Phase::Running(Engine(mpi)) = &mut *g {
            // Engine::abort prints the message and does not return unless it panicked.
            let _ = catch_unwind(AssertUnwindSafe(|| mpi.abort(code, msg)));
        }
        break;
    }
    if !msg.is_empty() {
        eprintln!("{msg}");
    }
    std::process::exit(if code == 0 { 1 } else { code })
}

/// Runs `f` on the engine under the lock. Before MPI_Init or after MPI_Finalize the call
/// is erroneous: MPI_ERR_OTHER, printed, and the process exits (like MPICH), whatever the
/// error handler.
pub fn with_mpi<T>(name: &'static str, f: impl FnOnce(&mut Mpi) -> CResult<T>) -> CResult<T> {
    let mut g = lock();
    match &mut *g {
        Phase::Running(Engine(mpi)) => f(mpi),
        Phase::Uninit => not_running(name, "before MPI_Init"),
        Phase::Finalized => not_running(name, "after MPI_Finalize"),
    }
}

/// Fails fatally for a call outside MPI_Init..MPI_Finalize.
pub fn not_running(name: &str, when: &str) -> ! {
    let err = Error::new(ErrorClass::Other, format!("{name} called {when}"));
    eprintln!("MPI error in {name}: {err}");
    std::process::exit(1)
}

/// Checks (without the lock) that the library is initialised and not finalized.
pub fn check_running(name: &'static str) {
    if !INITIALIZED.load(Ordering::Acquire) {
        not_running(name, "before MPI_Init")
    }
    if FINALIZED.load(Ordering::Acquire) {
        not_running(name, "after MPI_Finalize")
    }
}

/// Whether the provided level is MPI_THREAD_MULTIPLE.
pub fn multi_threaded() -> bool {
    THREAD_LEVEL.load(Ordering::Relaxed) == mpi_core::ThreadLevel::Multiple as i32
}
