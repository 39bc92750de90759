//! Communicator queries, attributes, error handlers, error strings, datatypes, memory.

use crate::consts::*;
use crate::convert;
use crate::init::{put, put_string};
use crate::state::*;
use mpi_core::{Error, ErrorClass};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

/// MPI_Comm_rank.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_rank(comm: c_int, rank: *mut c_int) -> c_int {
    const NAME: &str = "MPI_Comm_rank";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let r = with_mpi(NAME, |m| m.comm_rank(c).on(c))?;
        put(rank, r, "rank")
    })
}

/// MPI_Comm_size.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_size(comm: c_int, size: *mut c_int) -> c_int {
    const NAME: &str = "MPI_Comm_size";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let s = with_mpi(NAME, |m| m.comm_size(c).on(c))?;
        put(size, s, "size")
    })
}

// Attribute values: MPI_Comm_get_attr returns pointers to these, which stay valid for
// the life of the process.
static ATTR_TAG_UB: i32 = mpi_core::TAG_UB;
static ATTR_HOST: i32 = MPI_PROC_NULL;
static ATTR_IO: i32 = MPI_ANY_SOURCE;
static ATTR_WTIME_IS_GLOBAL: i32 = 0;
static ATTR_UNIVERSE_SIZE: AtomicI32 = AtomicI32::new(1);

fn comm_get_attr(
    name: &'static str,
    comm: c_int,
    keyval: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> CResult {
    let c = convert::comm(comm)?;
    let ptr: Option<*const i32> = match keyval {
        MPI_TAG_UB => Some(&ATTR_TAG_UB),
        MPI_HOST => Some(&ATTR_HOST),
        MPI_IO => Some(&ATTR_IO),
        MPI_WTIME_IS_GLOBAL => Some(&ATTR_WTIME_IS_GLOBAL),
        MPI_UNIVERSE_SIZE => {
            let n = with_mpi(name, |m| m.comm_size(mpi_core::Comm::WORLD).on(c))?;
            ATTR_UNIVERSE_SIZE.store(n, Ordering::Relaxed);
            Some(ATTR_UNIVERSE_SIZE.as_ptr())
        }
        _ => None,
    };
    check_running(name);
    non_null(flag, "flag").map_err(|e| CallError { comm: Some(c), ..e })?;
    match ptr {
        Some(p) => {
            non_null(value, "attribute_val").map_err(|e| CallError { comm: Some(c), ..e })?;
            // SAFETY: for predefined keys `attribute_val` is a `void **` (MPI-4.1 §7.7.2);
            // checked non-null.
            unsafe { *(value as *mut *const i32) = p };
            put(flag, 1, "flag")
        }
        None => put(flag, 0, "flag"),
    }
}

/// MPI_Comm_get_attr: the predefined attributes MPI_TAG_UB, MPI_HOST, MPI_IO,
/// MPI_WTIME_IS_GLOBAL and MPI_UNIVERSE_SIZE; `flag = 0` for any other key.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    comm: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    api("MPI_Comm_get_attr", || {
        comm_get_attr("MPI_Comm_get_attr", comm, keyval, attribute_val, flag)
    })
}

/// MPI_Attr_get (MPI-1 name of MPI_Comm_get_attr).
#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_get(
    comm: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    api("MPI_Attr_get", || {
        comm_get_attr("MPI_Attr_get", comm, keyval, attribute_val, flag)
    })
}

fn set_errhandler(name: &'static str, comm: c_int, h: c_int) -> CResult {
    let c = convert::comm(comm)?;
    let eh = convert::errhandler(h).on(c)?;
    with_mpi(name, |m| m.set_errhandler(c, eh).on(c))
}

fn get_errhandler(name: &'static str, comm: c_int, out: *mut c_int) -> CResult {
    let c = convert::comm(comm)?;
    let eh = with_mpi(name, |m| m.errhandler(c).on(c))?;
    put(out, convert::errhandler_handle(eh), "errhandler")
}

/// MPI_Comm_set_errhandler (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_ABORT, MPI_ERRORS_RETURN).
#[no_mangle]
pub extern "C" fn MPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) -> c_int {
    api("MPI_Comm_set_errhandler", || {
        set_errhandler("MPI_Comm_set_errhandler", comm, errhandler)
    })
}

/// MPI_Errhandler_set (MPI-1 name).
#[no_mangle]
pub extern "C" fn MPI_Errhandler_set(comm: c_int, errhandler: c_int) -> c_int {
    api("MPI_Errhandler_set", || {
        set_errhandler("MPI_Errhandler_set", comm, errhandler)
    })
}

/// MPI_Comm_get_errhandler.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) -> c_int {
    api("MPI_Comm_get_errhandler", || {
        get_errhandler("MPI_Comm_get_errhandler", comm, errhandler)
    })
}

/// MPI_Errhandler_get (MPI-1 name).
#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_get(comm: c_int, errhandler: *mut c_int) -> c_int {
    api("MPI_Errhandler_get", || {
        get_errhandler("MPI_Errhandler_get", comm, errhandler)
    })
}

/// MPI_Errhandler_free: predefined handlers are not freed; the handle becomes null.
#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_free(errhandler: *mut c_int) -> c_int {
    api("MPI_Errhandler_free", || {
        check_running("MPI_Errhandler_free");
        non_null(errhandler, "errhandler")?;
        // SAFETY: checked non-null; the C caller passes a pointer to an MPI_Errhandler.
        convert::errhandler(unsafe { *errhandler })?;
        put(errhandler, MPI_ERRHANDLER_NULL, "errhandler")
    })
}

/// MPI_Error_string (callable at any time). Our error codes are the classes.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    api("MPI_Error_string", || {
        let s = mpi_core::error_string(errorcode);
        // SAFETY: the standard requires a buffer of MPI_MAX_ERROR_STRING bytes.
        unsafe { put_string(&s, string, mpi_core::MAX_ERROR_STRING, resultlen) }
    })
}

/// MPI_Error_class (callable at any time): codes are classes; any class number of the
/// MPICH ABI (0..=78) is accepted.
#[no_mangle]
pub unsafe extern "C" fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    api("MPI_Error_class", || {
        if !(0..=78).contains(&errorcode) {
            return Err(arg_err(format!("invalid error code {errorcode}")));
        }
        put(errorclass, errorcode, "errorclass")
    })
}

/// MPI_Type_size (any predefined datatype, including those the engine cannot send yet).
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size(datatype: c_int, size: *mut c_int) -> c_int {
    api("MPI_Type_size", || {
        check_running("MPI_Type_size");
        let s = convert::datatype_size(datatype)?;
        put(size, s as c_int, "size")
    })
}

/// MPI_Alloc_mem: memory from the engine's heap. `baseptr` is really a `void **`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Alloc_mem(
    size: std::os::raw::c_long,
    _info: c_int,
    baseptr: *mut c_void,
) -> c_int {
    const NAME: &str = "MPI_Alloc_mem";
    api(NAME, || {
        if size < 0 {
            check_running(NAME);
            return Err(Error::new(ErrorClass::Arg, format!("negative size {size}")).into());
        }
        non_null(baseptr, "baseptr")?;
        let p = with_mpi(NAME, |m| Ok(m.alloc_mem(size as usize)?))?;
        // SAFETY: `baseptr` is a non-null `void **` (MPI-4.1 §9.2).
        unsafe { *(baseptr as *mut *mut u8) = p };
        Ok(())
    })
}

/// MPI_Free_mem.
#[no_mangle]
pub unsafe extern "C" fn MPI_Free_mem(base: *mut c_void) -> c_int {
    const NAME: &str = "MPI_Free_mem";
    // SAFETY: the C caller guarantees no pending operation uses the memory.
    api(NAME, || {
        with_mpi(NAME, |m| Ok(unsafe { m.free_mem(base as *mut u8) }?))
    })
}

/// A pointer that may live in an exported static.
#[repr(transparent)]
pub struct ExportedPtr(*mut c_int);
// SAFETY: the pointers are constants that the library never writes through.
unsafe impl Sync for ExportedPtr {}

static UNWEIGHTED_TARGET: i32 = 0;
static WEIGHTS_EMPTY_TARGET: i32 = 0;

/// `MPI_F_STATUS_IGNORE` of the MPICH ABI (Fortran status conversion; null as MPICH).
#[no_mangle]
pub static MPI_F_STATUS_IGNORE: ExportedPtr = ExportedPtr(std::ptr::null_mut());
/// `MPI_F_STATUSES_IGNORE` of the MPICH ABI.
#[no_mangle]
pub static MPI_F_STATUSES_IGNORE: ExportedPtr = ExportedPtr(std::ptr::null_mut());
/// `MPI_UNWEIGHTED` of the MPICH ABI (a unique non-null address).
#[no_mangle]
pub static MPI_UNWEIGHTED: ExportedPtr = ExportedPtr(&UNWEIGHTED_TARGET as *const i32 as *mut i32);
/// `MPI_WEIGHTS_EMPTY` of the MPICH ABI (a unique non-null address).
#[no_mangle]
pub static MPI_WEIGHTS_EMPTY: ExportedPtr =
    ExportedPtr(&WEIGHTS_EMPTY_TARGET as *const i32 as *mut i32);
