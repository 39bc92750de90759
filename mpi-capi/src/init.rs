//! Start-up, shutdown and the environment (MPI-4.1 §11.2, §11.6, §9.1).

use crate::consts::*;
use crate::convert;
use crate::state::*;
use mpi_core::{Comm, Error, ErrorClass, Mpi, ThreadLevel};
use std::os::raw::{c_char, c_int};
use std::sync::atomic::Ordering;

fn thread_level(l: c_int) -> Option<ThreadLevel> {
    Some(match l {
        0 => ThreadLevel::Single,
        1 => ThreadLevel::Funneled,
        2 => ThreadLevel::Serialized,
        3 => ThreadLevel::Multiple,
        _ => return None,
    })
}

/// Common part of MPI_Init and MPI_Init_thread.
fn init(name: &'static str, required: ThreadLevel) -> CResult<ThreadLevel> {
    let mut g = lock();
    match &*g {
        Phase::Uninit => {}
        Phase::Running(_) => {
            return Err(Error::new(ErrorClass::Other, format!("{name} called twice")).into())
        }
        Phase::Finalized => not_running(name, "after MPI_Finalize"),
    }
    // Start the MPI_Wtime clock no later than MPI_Init.
    mpi_core::wtime();
    let (mpi, provided) = Mpi::init(required)?;
    if mpi.settings().heap_malloc {
        if let Some((base, len)) = mpi.malloc_arena() {
            // SAFETY: the heap hands the arena over untouched and never unmaps it.
            unsafe { crate::malloc::attach(base, len, mpi.settings().heap_malloc_min) };
        }
    }
    *g = Phase::Running(Engine(mpi));
    THREAD_LEVEL.store(provided as i32, Ordering::Relaxed);
    let _ = MAIN_THREAD.set(std::thread::current().id());
    INITIALIZED.store(true, Ordering::Release);
    Ok(provided)
}

/// MPI_Init. `argc`/`argv` may be null; they are not modified.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    api("MPI_Init", || {
        init("MPI_Init", ThreadLevel::Single).map(drop)
    })
}

/// MPI_Init_thread.
#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    api("MPI_Init_thread", || {
        non_null(provided, "provided")?;
        let req = thread_level(required)
            .ok_or_else(|| arg_err(format!("invalid thread level {required}")))?;
        let p = init("MPI_Init_thread", req)?;
        // SAFETY: checked non-null; the caller passes a pointer to an int.
        unsafe { *provided = p as c_int };
        Ok(())
    })
}

/// MPI_Finalize.
#[no_mangle]
pub extern "C" fn MPI_Finalize() -> c_int {
    api("MPI_Finalize", || {
        let mut g = lock();
        match std::mem::replace(&mut *g, Phase::Finalized) {
            Phase::Running(Engine(mpi)) => {
                FINALIZED.store(true, Ordering::Release);
                crate::malloc::detach();
                drop(g);
                mpi.finalize()?;
                Ok(())
            }
            Phase::Uninit => {
                *g = Phase::Uninit;
                not_running("MPI_Finalize", "before MPI_Init")
            }
            Phase::Finalized => not_running("MPI_Finalize", "after MPI_Finalize"),
        }
    })
}

/// Writes `v` to the int pointed to by `p`, which must be non-null.
pub(crate) fn put(p: *mut c_int, v: c_int, what: &str) -> CResult {
    non_null(p, what)?;
    // SAFETY: checked non-null; the C caller passes a pointer to a writable int.
    unsafe { *p = v };
    Ok(())
}

/// MPI_Initialized (callable at any time).
#[no_mangle]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    api("MPI_Initialized", || {
        put(flag, INITIALIZED.load(Ordering::Acquire) as c_int, "flag")
    })
}

/// MPI_Finalized (callable at any time).
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    api("MPI_Finalized", || {
        put(flag, FINALIZED.load(Ordering::Acquire) as c_int, "flag")
    })
}

/// MPI_Abort: aborts the whole job with `errorcode` (any communicator aborts all).
#[no_mangle]
pub extern "C" fn MPI_Abort(comm: c_int, errorcode: c_int) -> c_int {
    api("MPI_Abort", || {
        let what = match convert::comm(comm) {
            Ok(Comm::SELF) => "MPI_COMM_SELF",
            _ => "MPI_COMM_WORLD",
        };
        let msg = format!("MPI_Abort({what}, {errorcode}) called");
        if !INITIALIZED.load(Ordering::Acquire) || FINALIZED.load(Ordering::Acquire) {
            eprintln!("{msg}");
            std::process::exit(errorcode);
        }
        abort_job(errorcode, &msg)
    })
}

/// MPI_Query_thread.
#[no_mangle]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    api("MPI_Query_thread", || {
        check_running("MPI_Query_thread");
        put(provided, THREAD_LEVEL.load(Ordering::Relaxed), "provided")
    })
}

/// MPI_Is_thread_main.
#[no_mangle]
pub unsafe extern "C" fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    api("MPI_Is_thread_main", || {
        check_running("MPI_Is_thread_main");
        let main = MAIN_THREAD.get() == Some(&std::thread::current().id());
        put(flag, main as c_int, "flag")
    })
}

/// MPI_Get_version (callable at any time).
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    api("MPI_Get_version", || {
        non_null(subversion, "subversion")?;
        put(version, MPI_VERSION, "version")?;
        put(subversion, MPI_SUBVERSION, "subversion")
    })
}

/// Copies `s` (truncated to `max - 1` bytes) and a NUL into `buf`; stores the length.
///
/// # Safety
/// `buf` must be valid for writes of `max` bytes.
pub(crate) unsafe fn put_string(s: &str, buf: *mut c_char, max: usize, len: *mut c_int) -> CResult {
    non_null(buf, "string buffer")?;
    non_null(len, "result length")?;
    let n = s.len().min(max - 1);
    // SAFETY: `buf` holds at least `max` bytes (caller's contract) and n + 1 <= max;
    // the source is a live &str of at least n bytes; the regions cannot overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
        *len = n as c_int;
    }
    Ok(())
}

/// The string of MPI_Get_library_version.
pub const LIBRARY_VERSION: &str = concat!(
    "mpi-capi ",
    env!("CARGO_PKG_VERSION"),
    " (MPI 4.0 subset over a generic RDMA-write primitive; MPICH ABI)"
);

/// MPI_Get_library_version (callable at any time).
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    api("MPI_Get_library_version", || {
        // SAFETY: the standard requires a buffer of MPI_MAX_LIBRARY_VERSION_STRING bytes.
        unsafe {
            put_string(
                LIBRARY_VERSION,
                version,
                MPI_MAX_LIBRARY_VERSION_STRING,
                resultlen,
            )
        }
    })
}

/// MPI_Get_processor_name.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    api("MPI_Get_processor_name", || {
        check_running("MPI_Get_processor_name");
        let host = mpi_core::processor_name();
        // SAFETY: the standard requires a buffer of MPI_MAX_PROCESSOR_NAME bytes.
        unsafe { put_string(&host, name, mpi_core::MAX_PROCESSOR_NAME, resultlen) }
    })
}

/// MPI_Wtime (usable at any time; the clock starts no later than MPI_Init).
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    mpi_core::wtime()
}

/// MPI_Wtick.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    mpi_core::wtick()
}
