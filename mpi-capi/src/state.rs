//! The process-global engine, the entry-point wrapper and error handling.
//!
//! ## Global state
//! One [`Mpi`] per process lives in [`STATE`], an [`EngineLock`]. Every C entry point that
//! needs the engine takes it for the duration of the engine call. Below
//! MPI_THREAD_MULTIPLE the program itself guarantees that no two threads are in MPI calls
//! at once (MPI-4.1 §11.6: SINGLE, FUNNELED and SERIALIZED all mean that), so taking it is
//! two plain stores to a flag instead of a mutex's two locked instructions (each a full
//! barrier that first drains the store buffer, e.g. the ring entry `MPI_Send` just
//! wrote); the flag catches a nested or concurrent use in debug builds. Under
//! MPI_THREAD_MULTIPLE it is a real
//! lock (swap + release store, spinning then yielding). Flags that may be read without
//! the engine (`MPI_Initialized`, `MPI_Finalized`, the provided thread level) are atomics.
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
use std::cell::UnsafeCell;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The engine, made movable into the global.
///
/// SAFETY (invariant): the engine is only ever touched through [`STATE`]'s guard, so at
/// most one thread uses it at a time (see [`EngineLock`]); the thread level provided to
/// the program bounds which threads call at all. `Send` is asserted because the engine
/// may hold raw pointers into its heap, which are only dereferenced under that guard.
pub struct Engine(pub Mpi);
// SAFETY: see the invariant above — all access is serialised by `STATE`'s guard.
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
pub static STATE: EngineLock = EngineLock {
    held: AtomicBool::new(false),
    phase: UnsafeCell::new(Phase::Uninit),
};

/// The lock around the global [`Phase`].
///
/// Below MPI_THREAD_MULTIPLE the MPI program guarantees mutual exclusion of its MPI calls
/// (and orders them: a call in another thread happens after the previous call returned,
/// by the program's own synchronisation), so [`lock`] only marks `held` with plain
/// stores; a nested use (a bug of ours) or a concurrent one (a bug of the program) is
/// caught by a debug assertion. Under MPI_THREAD_MULTIPLE (never changed while a call
/// is running: it is set inside MPI_Init, before any other thread may call) `held` is a
/// spin lock: swap with Acquire, release store.
pub struct EngineLock {
    held: AtomicBool,
    phase: UnsafeCell<Phase>,
}

// SAFETY: `phase` is only reached through a [`Guard`], and at most one guard exists at a
// time: under MPI_THREAD_MULTIPLE by the swap on `held`; below it by the program's
// guarantee that MPI calls do not overlap (MPI-4.1 §11.6) plus the nesting check.
unsafe impl Sync for EngineLock {}

/// Access to the global [`Phase`]; releases the lock when dropped (also on unwinding).
pub struct Guard {
    _not_send: std::marker::PhantomData<*mut Phase>,
}

impl std::ops::Deref for Guard {
    type Target = Phase;
    #[inline]
    fn deref(&self) -> &Phase {
        // SAFETY: this guard is the only one (EngineLock's invariant).
        unsafe { &*STATE.phase.get() }
    }
}

impl std::ops::DerefMut for Guard {
    #[inline]
    fn deref_mut(&mut self) -> &mut Phase {
        // SAFETY: this guard is the only one (EngineLock's invariant).
        unsafe { &mut *STATE.phase.get() }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // A plain store on x86; Release publishes our engine writes to the next holder.
        STATE.held.store(false, Ordering::Release);
    }
}

impl EngineLock {
    /// Takes the lock without waiting (None if it is held).
    pub fn try_lock(&'static self) -> Option<Guard> {
        if self.held.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(Guard {
            _not_send: std::marker::PhantomData,
        })
    }

    #[cold]
    fn lock_contended(&'static self) -> Guard {
        let mut spins = 0u32;
        loop {
            if !self.held.load(Ordering::Relaxed) {
                if let Some(g) = self.try_lock() {
                    return g;
                }
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
/// MPI_Initialized's answer (stays true after MPI_Finalize, as the standard asks).
pub static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// MPI_Finalized's answer.
pub static FINALIZED: AtomicBool = AtomicBool::new(false);
/// The provided thread level (valid once INITIALIZED).
pub static THREAD_LEVEL: AtomicI32 = AtomicI32::new(0);
/// The thread that called MPI_Init (MPI_Is_thread_main).
pub static MAIN_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Locks the global state (see [`EngineLock`]). A panic inside the engine (turned into a
/// fatal error anyway) releases it while unwinding.
#[inline]
pub fn lock() -> Guard {
    if multi_threaded() {
        return match STATE.try_lock() {
            Some(g) => g,
            None => STATE.lock_contended(),
        };
    }
    if STATE.held.load(Ordering::Relaxed) {
        held_twice();
    }
    STATE.held.store(true, Ordering::Relaxed);
    Guard {
        _not_send: std::marker::PhantomData,
    }
}

/// The lock is held while we take it below MPI_THREAD_MULTIPLE: either a nested use
/// (our bug) or two threads in MPI calls at once (the program's).
#[cold]
#[inline(never)]
fn held_twice() {
    debug_assert!(
        false,
        "the MPI library was entered twice at once without MPI_THREAD_MULTIPLE"
    );
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
        let Some(mut g) = STATE.try_lock() else {
            if Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
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
#[inline]
pub fn multi_threaded() -> bool {
    THREAD_LEVEL.load(Ordering::Relaxed) == mpi_core::ThreadLevel::Multiple as i32
}
