//! Collective communication (MPI-4.1 ch. 6).

use crate::consts::*;
use crate::convert;
use crate::state::*;
use std::os::raw::{c_int, c_void};

/// `MPI_IN_PLACE` → `None`, any other send buffer → `Some`.
fn send_buf(p: *const c_void) -> Option<*const u8> {
    if p as usize == IN_PLACE {
        None
    } else {
        Some(p as *const u8)
    }
}

/// MPI_Barrier.
#[no_mangle]
pub extern "C" fn MPI_Barrier(comm: c_int) -> c_int {
    const NAME: &str = "MPI_Barrier";
    api(NAME, || {
        let c = convert::comm(comm)?;
        with_mpi(NAME, |m| m.barrier(c).on(c))
    })
}

/// MPI_Bcast.
#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: c_int,
    root: c_int,
    comm: c_int,
) -> c_int {
    const NAME: &str = "MPI_Bcast";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        // SAFETY: the C caller passes a buffer of `count` elements of `datatype`.
        with_mpi(NAME, |m| unsafe {
            m.bcast(buffer as *mut u8, count, dt, root, c).on(c)
        })
    })
}

/// MPI_Reduce (`sendbuf` may be MPI_IN_PLACE at the root).
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: c_int,
) -> c_int {
    const NAME: &str = "MPI_Reduce";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        let o = convert::op(op).on(c)?;
        // SAFETY: the C caller passes buffers of `count` elements of `datatype`
        // (`recvbuf` significant at the root only).
        with_mpi(NAME, |m| unsafe {
            m.reduce(send_buf(sendbuf), recvbuf as *mut u8, count, dt, o, root, c)
                .on(c)
        })
    })
}

/// MPI_Allreduce (`sendbuf` may be MPI_IN_PLACE).
#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    const NAME: &str = "MPI_Allreduce";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        let o = convert::op(op).on(c)?;
        // SAFETY: the C caller passes buffers of `count` elements of `datatype`.
        with_mpi(NAME, |m| unsafe {
            m.allreduce(send_buf(sendbuf), recvbuf as *mut u8, count, dt, o, c)
                .on(c)
        })
    })
}
