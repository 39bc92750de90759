//! MPI error classes (numbered as MPICH numbers them, MPI-4.1 §9.4) and the error type of
//! mpi-core.

use std::fmt;

/// An MPI error class. The discriminants are MPICH's values so that the C ABI passes them
/// through unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorClass {
    /// MPI_SUCCESS
    Success = 0,
    /// MPI_ERR_BUFFER: invalid buffer pointer.
    Buffer = 1,
    /// MPI_ERR_COUNT: invalid count argument.
    Count = 2,
    /// MPI_ERR_TYPE: invalid datatype argument.
    Type = 3,
    /// MPI_ERR_TAG: invalid tag argument.
    Tag = 4,
    /// MPI_ERR_COMM: invalid communicator.
    Comm = 5,
    /// MPI_ERR_RANK: invalid rank.
    Rank = 6,
    /// MPI_ERR_ROOT: invalid root.
    Root = 7,
    /// MPI_ERR_GROUP: invalid group.
    Group = 8,
    /// MPI_ERR_OP: invalid operation (or operation not defined for the datatype).
    Op = 9,
    /// MPI_ERR_ARG: invalid argument of some other kind.
    Arg = 12,
    /// MPI_ERR_UNKNOWN: unknown error.
    Unknown = 13,
    /// MPI_ERR_TRUNCATE: message truncated on receive.
    Truncate = 14,
    /// MPI_ERR_OTHER: known error not in this list (e.g. a lost peer).
    Other = 15,
    /// MPI_ERR_INTERN: internal error.
    Intern = 16,
    /// MPI_ERR_IN_STATUS: error code is in the status (multiple completion).
    InStatus = 17,
    /// MPI_ERR_PENDING: pending request (multiple completion).
    Pending = 18,
    /// MPI_ERR_REQUEST: invalid request handle.
    Request = 19,
    /// MPI_ERR_NO_MEM: MPI_Alloc_mem could not allocate.
    NoMem = 34,
}

impl ErrorClass {
    /// The class for an integer error code, if it is one of ours.
    pub fn from_code(code: i32) -> Option<ErrorClass> {
        use ErrorClass::*;
        Some(match code {
            0 => Success,
            1 => Buffer,
            2 => Count,
            3 => Type,
            4 => Tag,
            5 => Comm,
            6 => Rank,
            7 => Root,
            8 => Group,
            9 => Op,
            12 => Arg,
            13 => Unknown,
            14 => Truncate,
            15 => Other,
            16 => Intern,
            17 => InStatus,
            18 => Pending,
            19 => Request,
            34 => NoMem,
            _ => return None,
        })
    }

    /// The standard's short description of the class (what MPI_Error_string returns for a
    /// bare class code).
    pub fn description(self) -> &'static str {
        use ErrorClass::*;
        match self {
            Success => "No MPI error",
            Buffer => "Invalid buffer pointer",
            Count => "Invalid count",
            Type => "Invalid datatype",
            Tag => "Invalid tag",
            Comm => "Invalid communicator",
            Rank => "Invalid rank",
            Root => "Invalid root",
            Group => "Invalid group",
            Op => "Invalid MPI_Op",
            Arg => "Invalid argument",
            Unknown => "Unknown error",
            Truncate => "Message truncated",
            Other => "Other MPI error",
            Intern => "Internal MPI error",
            InStatus => "See the MPI_ERROR field in MPI_Status for the error code",
            Pending => "Pending request (no error)",
            Request => "Invalid MPI_Request",
            NoMem => "Out of memory",
        }
    }
}

/// An error of an MPI operation: its class and a message saying what was wrong
/// (e.g. "invalid rank 7 in a communicator of size 4").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The MPI error class.
    pub class: ErrorClass,
    /// Human-readable detail.
    pub msg: String,
}

impl Error {
    /// Builds an error of `class` with message `msg`.
    pub fn new(class: ErrorClass, msg: impl Into<String>) -> Error {
        Error {
            class,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class.description(), self.msg)
    }
}

impl std::error::Error for Error {}

impl From<rdma_api::DeviceError> for Error {
    fn from(e: rdma_api::DeviceError) -> Error {
        Error::new(ErrorClass::Other, e.to_string())
    }
}

/// Result type of mpi-core.
pub type Result<T> = std::result::Result<T, Error>;
