//! The C ABI's handle values and types (MPICH's, x86_64 Linux). They must agree with
//! `include/mpi.h`; the test `capi_abi` compares both headers' values.

use std::os::raw::c_int;

/// `MPI_Status`, MPICH's layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpiStatus {
    /// Low 32 bits of the byte count.
    pub count_lo: c_int,
    /// High bits of the byte count shifted left by one, or'ed with the cancelled flag.
    pub count_hi_and_cancelled: c_int,
    /// `MPI_SOURCE`
    pub source: c_int,
    /// `MPI_TAG`
    pub tag: c_int,
    /// `MPI_ERROR`
    pub error: c_int,
}

pub const MPI_SUCCESS: c_int = 0;

pub const MPI_COMM_NULL: c_int = 0x0400_0000;
pub const MPI_COMM_WORLD: c_int = 0x4400_0000;
pub const MPI_COMM_SELF: c_int = 0x4400_0001;

pub const MPI_REQUEST_NULL: c_int = 0x2c00_0000;
/// Handles of live requests: `REQUEST_BASE + engine request id`.
pub const REQUEST_BASE: u32 = 0x2c00_0001;

pub const MPI_ERRHANDLER_NULL: c_int = 0x1400_0000;
pub const MPI_ERRORS_ARE_FATAL: c_int = 0x5400_0000;
pub const MPI_ERRORS_RETURN: c_int = 0x5400_0001;
pub const MPI_ERRORS_ABORT: c_int = 0x5400_0003;

pub const MPI_MAX: c_int = 0x5800_0001;
pub const MPI_MIN: c_int = 0x5800_0002;
pub const MPI_SUM: c_int = 0x5800_0003;
pub const MPI_PROD: c_int = 0x5800_0004;
/// Last predefined op handle (MPI_NO_OP).
pub const MPI_NO_OP: c_int = 0x5800_000e;

pub const MPI_TAG_UB: c_int = 0x6440_0001;
pub const MPI_HOST: c_int = 0x6440_0003;
pub const MPI_IO: c_int = 0x6440_0005;
pub const MPI_WTIME_IS_GLOBAL: c_int = 0x6440_0007;
pub const MPI_UNIVERSE_SIZE: c_int = 0x6440_0009;

pub const MPI_ANY_SOURCE: c_int = mpi_core::ANY_SOURCE;
pub const MPI_ANY_TAG: c_int = mpi_core::ANY_TAG;
pub const MPI_PROC_NULL: c_int = mpi_core::PROC_NULL;
pub const MPI_UNDEFINED: c_int = mpi_core::UNDEFINED;

pub const MPI_VERSION: c_int = 4;
pub const MPI_SUBVERSION: c_int = 0;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;

/// `MPI_STATUS_IGNORE` / `MPI_STATUSES_IGNORE`.
pub const STATUS_IGNORE: usize = 1;
/// `MPI_IN_PLACE`.
pub const IN_PLACE: usize = usize::MAX;

// Datatype handles.
pub const MPI_CHAR: c_int = 0x4c00_0101;
pub const MPI_SIGNED_CHAR: c_int = 0x4c00_0118;
pub const MPI_UNSIGNED_CHAR: c_int = 0x4c00_0102;
pub const MPI_BYTE: c_int = 0x4c00_010d;
pub const MPI_WCHAR: c_int = 0x4c00_040e;
pub const MPI_SHORT: c_int = 0x4c00_0203;
pub const MPI_UNSIGNED_SHORT: c_int = 0x4c00_0204;
pub const MPI_INT: c_int = 0x4c00_0405;
pub const MPI_UNSIGNED: c_int = 0x4c00_0406;
pub const MPI_LONG: c_int = 0x4c00_0807;
pub const MPI_UNSIGNED_LONG: c_int = 0x4c00_0808;
pub const MPI_LONG_LONG_INT: c_int = 0x4c00_0809;
pub const MPI_UNSIGNED_LONG_LONG: c_int = 0x4c00_0819;
pub const MPI_FLOAT: c_int = 0x4c00_040a;
pub const MPI_DOUBLE: c_int = 0x4c00_080b;
pub const MPI_LONG_DOUBLE: c_int = 0x4c00_100c;
pub const MPI_PACKED: c_int = 0x4c00_010f;
pub const MPI_INT8_T: c_int = 0x4c00_0137;
pub const MPI_INT16_T: c_int = 0x4c00_0238;
pub const MPI_INT32_T: c_int = 0x4c00_0439;
pub const MPI_INT64_T: c_int = 0x4c00_083a;
pub const MPI_UINT8_T: c_int = 0x4c00_013b;
pub const MPI_UINT16_T: c_int = 0x4c00_023c;
pub const MPI_UINT32_T: c_int = 0x4c00_043d;
pub const MPI_UINT64_T: c_int = 0x4c00_083e;
pub const MPI_C_BOOL: c_int = 0x4c00_013f;
pub const MPI_AINT: c_int = 0x4c00_0843;
pub const MPI_OFFSET: c_int = 0x4c00_0844;
pub const MPI_COUNT: c_int = 0x4c00_0845;
// Pair types (declared in mpi.h, not supported by the engine yet).
pub const MPI_FLOAT_INT: c_int = 0x8c00_0000_u32 as c_int;
pub const MPI_DOUBLE_INT: c_int = 0x8c00_0001_u32 as c_int;
pub const MPI_LONG_INT: c_int = 0x8c00_0002_u32 as c_int;
pub const MPI_SHORT_INT: c_int = 0x8c00_0003_u32 as c_int;
pub const MPI_LONG_DOUBLE_INT: c_int = 0x8c00_0004_u32 as c_int;
