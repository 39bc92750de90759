//! Point-to-point communication (MPI-4.1 ch. 3).

use crate::consts::*;
use crate::convert;
use crate::init::put;
use crate::state::*;
use mpi_core::{Datatype, Error, ErrorClass, Request, Status};
use std::os::raw::{c_int, c_void};

/// Where a status goes: ignored, or a C struct.
#[derive(Clone, Copy)]
pub(crate) struct StatusOut(*mut MpiStatus);

impl StatusOut {
    /// Checks a status pointer: `MPI_STATUS_IGNORE` is legal, NULL is MPI_ERR_ARG.
    pub(crate) fn new(p: *mut MpiStatus) -> CResult<StatusOut> {
        non_null(p, "status (use MPI_STATUS_IGNORE)")?;
        Ok(StatusOut(p))
    }

    /// Writes `st` unless ignored.
    pub(crate) fn write(self, st: &Status) {
        if self.0 as usize != STATUS_IGNORE {
            // SAFETY: non-null and not MPI_STATUS_IGNORE (checked in `new`); the C caller
            // passes a pointer to a writable MPI_Status.
            convert::status_to_c(st, unsafe { &mut *self.0 }, false);
        }
    }
}

/// Reads the `MPI_Request` at `p` (non-null).
fn read_request(p: *mut c_int) -> CResult<c_int> {
    non_null(p, "request")?;
    // SAFETY: checked non-null; the C caller passes a pointer to an MPI_Request.
    Ok(unsafe { *p })
}

/// Waits for `req`. Under MPI_THREAD_MULTIPLE it polls with MPI_Test semantics and
/// releases the global lock between polls, so other threads can make progress.
pub(crate) fn wait_req(name: &'static str, req: Request) -> CResult<Status> {
    if !multi_threaded() {
        return with_mpi(name, |m| Ok(m.wait(req)?));
    }
    loop {
        if let Some(st) = with_mpi(name, |m| Ok(m.test(req)?))? {
            return Ok(st);
        }
        std::thread::yield_now();
    }
}

/// MPI_Send.
#[no_mangle]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    const NAME: &str = "MPI_Send";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        if multi_threaded() {
            // SAFETY: the C caller guarantees `buf` holds `count` elements of `datatype`
            // for the duration of the call, which covers the request's lifetime.
            let r = with_mpi(NAME, |m| unsafe {
                m.isend(buf as *const u8, count, dt, dest, tag, c).on(c)
            })?;
            wait_req(NAME, r).map_err(|e| CallError { comm: Some(c), ..e })?;
            return Ok(());
        }
        // SAFETY: as above, for the blocking call.
        with_mpi(NAME, |m| unsafe {
            m.send(buf as *const u8, count, dt, dest, tag, c).on(c)
        })
    })
}

/// MPI_Recv.
#[no_mangle]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    const NAME: &str = "MPI_Recv";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        let out = StatusOut::new(status).map_err(|e| CallError { comm: Some(c), ..e })?;
        let st = if multi_threaded() {
            // SAFETY: the C caller guarantees `buf` is writable for `count` elements of
            // `datatype` for the duration of the call (the request's lifetime).
            let r = with_mpi(NAME, |m| unsafe {
                m.irecv(buf as *mut u8, count, dt, source, tag, c).on(c)
            })?;
            wait_req(NAME, r).map_err(|e| CallError { comm: Some(c), ..e })?
        } else {
            // SAFETY: as above, for the blocking call.
            with_mpi(NAME, |m| unsafe {
                m.recv(buf as *mut u8, count, dt, source, tag, c).on(c)
            })?
        };
        out.write(&st);
        Ok(())
    })
}

/// MPI_Isend.
#[no_mangle]
pub unsafe extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    const NAME: &str = "MPI_Isend";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        non_null(request, "request")?;
        // SAFETY: the C caller keeps `buf` valid until the request completes (MPI rule).
        let r = with_mpi(NAME, |m| unsafe {
            m.isend(buf as *const u8, count, dt, dest, tag, c).on(c)
        })?;
        put(request, convert::request_handle(r)?, "request")
    })
}

/// MPI_Irecv.
#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    const NAME: &str = "MPI_Irecv";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let dt = convert::datatype(datatype).on(c)?;
        non_null(request, "request")?;
        // SAFETY: the C caller keeps `buf` valid until the request completes (MPI rule).
        let r = with_mpi(NAME, |m| unsafe {
            m.irecv(buf as *mut u8, count, dt, source, tag, c).on(c)
        })?;
        put(request, convert::request_handle(r)?, "request")
    })
}

/// MPI_Wait. On MPI_REQUEST_NULL returns the empty status at once.
#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut c_int, status: *mut MpiStatus) -> c_int {
    const NAME: &str = "MPI_Wait";
    api(NAME, || {
        let h = read_request(request)?;
        let out = StatusOut::new(status)?;
        if h == MPI_REQUEST_NULL {
            check_running(NAME);
            out.write(&convert::empty_status());
            return Ok(());
        }
        let req = convert::request(h)?;
        // The engine frees the request on completion, also on error.
        let r = wait_req(NAME, req);
        put(request, MPI_REQUEST_NULL, "request")?;
        out.write(&r?);
        Ok(())
    })
}

/// MPI_Test.
#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    const NAME: &str = "MPI_Test";
    api(NAME, || {
        let h = read_request(request)?;
        non_null(flag, "flag")?;
        let out = StatusOut::new(status)?;
        if h == MPI_REQUEST_NULL {
            check_running(NAME);
            out.write(&convert::empty_status());
            return put(flag, 1, "flag");
        }
        let req = convert::request(h)?;
        match with_mpi(NAME, |m| Ok(m.test(req)?)) {
            Ok(Some(st)) => {
                put(request, MPI_REQUEST_NULL, "request")?;
                out.write(&st);
                put(flag, 1, "flag")
            }
            Ok(None) => put(flag, 0, "flag"),
            Err(e) => {
                // A completion error frees the request (as MPI_Wait).
                if e.err.class != ErrorClass::Request {
                    put(request, MPI_REQUEST_NULL, "request")?;
                    put(flag, 1, "flag")?;
                }
                Err(e)
            }
        }
    })
}

/// MPI_Waitall. Null requests get the empty status. If one request fails the result is
/// MPI_ERR_IN_STATUS and each status's MPI_ERROR says which (unless ignored).
#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    const NAME: &str = "MPI_Waitall";
    api(NAME, || {
        check_running(NAME);
        if count < 0 {
            return Err(Error::new(ErrorClass::Count, format!("negative count {count}")).into());
        }
        if count == 0 {
            return Ok(());
        }
        non_null(requests, "array_of_requests")?;
        non_null(statuses, "array_of_statuses (use MPI_STATUSES_IGNORE)")?;
        let n = count as usize;
        // SAFETY: the C caller passes an array of `count` requests (non-null, checked).
        let handles = unsafe { std::slice::from_raw_parts_mut(requests, n) };
        let ignore = statuses as usize == STATUS_IGNORE;
        // Convert all handles first: an invalid one fails the call before anything waits.
        let mut reqs = Vec::with_capacity(n);
        let mut idx = Vec::with_capacity(n);
        for (i, &h) in handles.iter().enumerate() {
            if h != MPI_REQUEST_NULL {
                reqs.push(convert::request(h)?);
                idx.push(i);
            }
        }
        let mut sts = vec![Status::default(); reqs.len()];
        let result = if multi_threaded() {
            let mut failed = false;
            for (r, st) in reqs.iter().zip(sts.iter_mut()) {
                match wait_req(NAME, *r) {
                    Ok(s) => *st = s,
                    Err(e) => {
                        failed = true;
                        st.error = e.err.class as c_int;
                    }
                }
            }
            if failed {
                Err(Error::new(ErrorClass::InStatus, "a request failed").into())
            } else {
                Ok(())
            }
        } else {
            with_mpi(NAME, |m| Ok(m.waitall(&reqs, &mut sts)?))
        };
        let outs: Option<&mut [MpiStatus]> = if ignore {
            None
        } else {
            // SAFETY: not null and not MPI_STATUSES_IGNORE; the C caller passes `count`
            // writable statuses.
            Some(unsafe { std::slice::from_raw_parts_mut(statuses, n) })
        };
        if let Some(outs) = outs {
            let empty = convert::empty_status();
            let mut k = 0;
            for (i, out) in outs.iter_mut().enumerate() {
                if k < idx.len() && idx[k] == i {
                    convert::status_to_c(&sts[k], out, true);
                    k += 1;
                } else {
                    convert::status_to_c(&empty, out, true);
                }
            }
        }
        for &i in &idx {
            handles[i] = MPI_REQUEST_NULL;
        }
        result
    })
}

/// MPI_Sendrecv: posts the receive and the send, then waits for both. The arguments
/// are validated before anything is posted, so an argument error leaves nothing behind.
#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    source: c_int,
    recvtag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    const NAME: &str = "MPI_Sendrecv";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let sdt = convert::datatype(sendtype).on(c)?;
        let rdt = convert::datatype(recvtype).on(c)?;
        let out = StatusOut::new(status).map_err(|e| CallError { comm: Some(c), ..e })?;
        let (rr, sr) = with_mpi(NAME, |m| {
            let size = m.comm_size(c).on(c)?;
            check_p2p(
                sendcount,
                sdt,
                sendbuf as *const u8,
                dest,
                sendtag,
                size,
                false,
            )
            .on(c)?;
            check_p2p(
                recvcount,
                rdt,
                recvbuf as *const u8,
                source,
                recvtag,
                size,
                true,
            )
            .on(c)?;
            // SAFETY: the C caller keeps both buffers valid for the whole call, which
            // outlives both requests (they are waited for below).
            let rr = unsafe {
                m.irecv(recvbuf as *mut u8, recvcount, rdt, source, recvtag, c)
                    .on(c)?
            };
            // SAFETY: as above.
            let sr = unsafe {
                m.isend(sendbuf as *const u8, sendcount, sdt, dest, sendtag, c)
                    .on(c)?
            };
            Ok((rr, sr))
        })?;
        let with_comm = |e: CallError| CallError { comm: Some(c), ..e };
        let rst = wait_req(NAME, rr).map_err(with_comm);
        let sst = wait_req(NAME, sr).map_err(with_comm);
        let st = rst?;
        sst?;
        out.write(&st);
        Ok(())
    })
}

/// The argument checks of MPI_Isend / MPI_Irecv, so that MPI_Sendrecv can validate both
/// halves before posting either.
fn check_p2p(
    count: c_int,
    dt: Datatype,
    buf: *const u8,
    rank: c_int,
    tag: c_int,
    size: c_int,
    recv: bool,
) -> Result<(), Error> {
    let _ = dt;
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            format!("negative count {count}"),
        ));
    }
    if buf.is_null() && count > 0 {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("null buffer with count {count}"),
        ));
    }
    let rank_ok =
        (0..size).contains(&rank) || rank == MPI_PROC_NULL || (recv && rank == MPI_ANY_SOURCE);
    if !rank_ok {
        return Err(Error::new(
            ErrorClass::Rank,
            format!("invalid rank {rank} in a communicator of size {size}"),
        ));
    }
    let tag_ok = (0..=mpi_core::TAG_UB).contains(&tag) || (recv && tag == MPI_ANY_TAG);
    if !tag_ok {
        return Err(Error::new(
            ErrorClass::Tag,
            format!("invalid tag {tag} (valid: 0..={})", mpi_core::TAG_UB),
        ));
    }
    Ok(())
}

/// MPI_Probe.
#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    const NAME: &str = "MPI_Probe";
    api(NAME, || {
        let c = convert::comm(comm)?;
        let out = StatusOut::new(status).map_err(|e| CallError { comm: Some(c), ..e })?;
        let st = if multi_threaded() {
            loop {
                if let Some(st) = with_mpi(NAME, |m| m.iprobe(source, tag, c).on(c))? {
                    break st;
                }
                std::thread::yield_now();
            }
        } else {
            with_mpi(NAME, |m| m.probe(source, tag, c).on(c))?
        };
        out.write(&st);
        Ok(())
    })
}

/// MPI_Iprobe.
#[no_mangle]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    const NAME: &str = "MPI_Iprobe";
    api(NAME, || {
        let c = convert::comm(comm)?;
        non_null(flag, "flag").map_err(|e| CallError { comm: Some(c), ..e })?;
        let out = StatusOut::new(status).map_err(|e| CallError { comm: Some(c), ..e })?;
        match with_mpi(NAME, |m| m.iprobe(source, tag, c).on(c))? {
            Some(st) => {
                out.write(&st);
                put(flag, 1, "flag")
            }
            None => put(flag, 0, "flag"),
        }
    })
}

/// MPI_Get_count: whole elements of `datatype` in the status's byte count, or
/// MPI_UNDEFINED if it is not a multiple of the size (or does not fit an int).
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count(
    status: *const MpiStatus,
    datatype: c_int,
    count: *mut c_int,
) -> c_int {
    const NAME: &str = "MPI_Get_count";
    api(NAME, || {
        check_running(NAME);
        non_null(status, "status")?;
        if status as usize == STATUS_IGNORE {
            return Err(arg_err("MPI_STATUS_IGNORE is not a status"));
        }
        let size = convert::datatype_size(datatype)? as u64;
        // SAFETY: non-null and not MPI_STATUS_IGNORE; the C caller passes a status.
        let bytes = convert::status_count(unsafe { &*status });
        let n = if size == 0 {
            if bytes == 0 {
                0
            } else {
                MPI_UNDEFINED
            }
        } else if bytes.checked_rem(size) != Some(0) || bytes / size > c_int::MAX as u64 {
            MPI_UNDEFINED
        } else {
            (bytes / size) as c_int
        };
        put(count, n, "count")
    })
}
