//! Conversions between C handles / structs and mpi-core values.

use crate::consts::*;
use mpi_core::{Comm, Datatype, ErrHandler, Error, ErrorClass, Op, Request, Status};
use std::os::raw::c_int;

/// `MPI_Comm` → engine communicator. Errors: MPI_ERR_COMM.
pub fn comm(h: c_int) -> Result<Comm, Error> {
    match h {
        MPI_COMM_WORLD => Ok(Comm::WORLD),
        MPI_COMM_SELF => Ok(Comm::SELF),
        MPI_COMM_NULL => Err(Error::new(ErrorClass::Comm, "null communicator")),
        _ => Err(Error::new(
            ErrorClass::Comm,
            format!("invalid communicator handle {h:#x}"),
        )),
    }
}

/// Engine communicator → `MPI_Comm`.
pub fn comm_handle(c: Comm) -> c_int {
    MPI_COMM_WORLD + c.0 as c_int
}

/// The engine datatype of a supported predefined handle.
fn supported_datatype(h: c_int) -> Option<Datatype> {
    use Datatype::*;
    Some(match h {
        MPI_CHAR => Char,
        MPI_SIGNED_CHAR => SignedChar,
        MPI_UNSIGNED_CHAR => UnsignedChar,
        MPI_BYTE => Byte,
        MPI_WCHAR => WChar,
        MPI_SHORT => Short,
        MPI_UNSIGNED_SHORT => UnsignedShort,
        MPI_INT => Int,
        MPI_UNSIGNED => Unsigned,
        MPI_LONG => Long,
        MPI_UNSIGNED_LONG => UnsignedLong,
        MPI_LONG_LONG_INT => LongLong,
        MPI_UNSIGNED_LONG_LONG => UnsignedLongLong,
        MPI_FLOAT => Float,
        MPI_DOUBLE => Double,
        MPI_LONG_DOUBLE => LongDouble,
        MPI_PACKED => Packed,
        MPI_INT8_T => Int8,
        MPI_INT16_T => Int16,
        MPI_INT32_T => Int32,
        MPI_INT64_T => Int64,
        MPI_UINT8_T => Uint8,
        MPI_UINT16_T => Uint16,
        MPI_UINT32_T => Uint32,
        MPI_UINT64_T => Uint64,
        MPI_C_BOOL => CBool,
        MPI_AINT => Aint,
        MPI_OFFSET => Offset,
        MPI_COUNT => Count,
        _ => return None,
    })
}

/// Size in bytes of a predefined datatype handle the engine does not support yet (pair,
/// complex, Fortran and C++ types), as MPICH reports it; `None` for anything else.
fn other_predefined_size(h: c_int) -> Option<usize> {
    match h {
        MPI_FLOAT_INT => Some(8),
        MPI_DOUBLE_INT | MPI_LONG_INT => Some(12),
        MPI_SHORT_INT => Some(6),
        MPI_LONG_DOUBLE_INT => Some(20),
        // Basic predefined handles: 0x4c00SSII, SS = size in bytes, II = index. The
        // index range of MPICH's basic types is 0x01..=0x46 (0x10/0x11 are MPI_LB/UB).
        _ if (h as u32) & 0xffff_0000 == 0x4c00_0000 && (h & 0xff) <= 0x46 => {
            Some(((h >> 8) & 0xff) as usize)
        }
        _ => None,
    }
}

/// `MPI_Datatype` → engine datatype. Errors: MPI_ERR_TYPE (null, unknown, or a
/// predefined type the engine does not support yet).
pub fn datatype(h: c_int) -> Result<Datatype, Error> {
    supported_datatype(h).ok_or_else(|| {
        let what = if other_predefined_size(h).is_some() {
            "datatype not supported yet"
        } else if h == 0x0c00_0000 {
            "null datatype (MPI_DATATYPE_NULL)"
        } else {
            "invalid datatype handle"
        };
        Error::new(ErrorClass::Type, format!("{what} {h:#x}"))
    })
}

/// MPI_Type_size of any predefined handle.
pub fn datatype_size(h: c_int) -> Result<usize, Error> {
    match supported_datatype(h) {
        Some(dt) => Ok(dt.size()),
        None => other_predefined_size(h).ok_or_else(|| datatype(h).unwrap_err()),
    }
}

/// `MPI_Op` → engine op. Errors: MPI_ERR_OP.
pub fn op(h: c_int) -> Result<Op, Error> {
    match h {
        MPI_MAX => Ok(Op::Max),
        MPI_MIN => Ok(Op::Min),
        MPI_SUM => Ok(Op::Sum),
        MPI_PROD => Ok(Op::Prod),
        _ if (MPI_MAX..=MPI_NO_OP).contains(&h) => Err(Error::new(
            ErrorClass::Op,
            format!("reduction operation {h:#x} not supported yet"),
        )),
        _ => Err(Error::new(
            ErrorClass::Op,
            format!("invalid reduction operation handle {h:#x}"),
        )),
    }
}

/// `MPI_Errhandler` → engine handler. Errors: MPI_ERR_ARG.
pub fn errhandler(h: c_int) -> Result<ErrHandler, Error> {
    match h {
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => Ok(ErrHandler::Fatal),
        MPI_ERRORS_RETURN => Ok(ErrHandler::Return),
        _ => Err(Error::new(
            ErrorClass::Arg,
            format!("invalid error handler handle {h:#x}"),
        )),
    }
}

/// Engine handler → `MPI_Errhandler`.
pub fn errhandler_handle(h: ErrHandler) -> c_int {
    match h {
        ErrHandler::Fatal => MPI_ERRORS_ARE_FATAL,
        ErrHandler::Return => MPI_ERRORS_RETURN,
    }
}

/// Engine request → `MPI_Request` (never `MPI_REQUEST_NULL`). Errors: MPI_ERR_INTERN
/// if the id does not fit.
pub fn request_handle(r: Request) -> Result<c_int, Error> {
    REQUEST_BASE
        .checked_add(r.0)
        .filter(|&h| h <= i32::MAX as u32)
        .map(|h| h as c_int)
        .ok_or_else(|| Error::new(ErrorClass::Intern, format!("request id {} too large", r.0)))
}

/// `MPI_Request` (not null) → engine request. Errors: MPI_ERR_REQUEST.
pub fn request(h: c_int) -> Result<Request, Error> {
    let u = h as u32;
    if h > 0 && u >= REQUEST_BASE {
        Ok(Request(u - REQUEST_BASE))
    } else {
        Err(Error::new(
            ErrorClass::Request,
            format!("invalid request handle {h:#x}"),
        ))
    }
}

/// Engine status → `MPI_Status`, encoding the byte count as MPICH does. `MPI_ERROR` is
/// written only when `with_error` (multiple-completion functions), as in MPICH.
pub fn status_to_c(st: &Status, out: &mut MpiStatus, with_error: bool) {
    let count = st.count as u64;
    out.count_lo = count as u32 as c_int;
    out.count_hi_and_cancelled = (((count >> 32) << 1) as u32 | st.cancelled as u32) as c_int;
    out.source = st.source;
    out.tag = st.tag;
    if with_error {
        out.error = st.error;
    }
}

/// The byte count stored in an `MPI_Status`.
pub fn status_count(st: &MpiStatus) -> u64 {
    let hi = (st.count_hi_and_cancelled as u32 >> 1) as u64;
    (hi << 32) + st.count_lo as u32 as u64
}

/// The empty status (MPI-4.1 §3.7.3): any source, any tag, no error, 0 bytes.
pub fn empty_status() -> Status {
    Status {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: MPI_SUCCESS,
        count: 0,
        cancelled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_count_roundtrip() {
        for &n in &[
            0usize,
            1,
            4,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0x1_0000_0005,
        ] {
            for &c in &[false, true] {
                let st = Status {
                    count: n,
                    cancelled: c,
                    ..Default::default()
                };
                let mut cs = MpiStatus::default();
                status_to_c(&st, &mut cs, false);
                assert_eq!(status_count(&cs), n as u64);
                assert_eq!(cs.count_hi_and_cancelled & 1, c as c_int);
            }
        }
    }

    #[test]
    fn handles() {
        assert_eq!(comm(MPI_COMM_WORLD).unwrap(), Comm::WORLD);
        assert_eq!(comm_handle(Comm::SELF), MPI_COMM_SELF);
        assert_eq!(comm(0).unwrap_err().class, ErrorClass::Comm);
        assert_eq!(datatype(MPI_INT).unwrap(), Datatype::Int);
        assert_eq!(
            datatype(MPI_2INT_HANDLE).unwrap_err().class,
            ErrorClass::Type
        );
        assert_eq!(datatype_size(MPI_2INT_HANDLE).unwrap(), 8);
        assert_eq!(datatype_size(MPI_DOUBLE_INT).unwrap(), 12);
        assert_eq!(datatype(12345).unwrap_err().class, ErrorClass::Type);
        assert_eq!(op(MPI_SUM).unwrap(), Op::Sum);
        assert_eq!(op(0x5800_0005).unwrap_err().class, ErrorClass::Op);
        let h = request_handle(Request(0)).unwrap();
        assert_ne!(h, MPI_REQUEST_NULL);
        assert_eq!(request(h).unwrap(), Request(0));
        assert_eq!(
            request(MPI_REQUEST_NULL).unwrap_err().class,
            ErrorClass::Request
        );
        assert_eq!(request(-5).unwrap_err().class, ErrorClass::Request);
    }

    const MPI_2INT_HANDLE: c_int = 0x4c00_0816;
}
