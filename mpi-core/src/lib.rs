//! # mpi-core: MPI semantics over the generic remote-write primitive
//!
//! Layers (see `DESIGN.md`): the C ABI (`mpi-capi`) and Rust programs ([`api`]) call the
//! engine [`Mpi`]; the engine implements matching (posted / unexpected queues), the
//! protocols SHORT, REQ, RSP, CREDIT and DATA, requests, collectives and reductions on top of
//! an [`rdma_api::Device`].
//!
//! ## Settings (environment variables, read at MPI_Init)
//! See [`settings::Settings`] for the table; `MPI_PRINT_SETTINGS=1` prints the effective
//! values at start-up on rank 0.

pub mod api;
pub mod datatype;
pub mod engine;
pub mod error;
pub mod op;
pub mod settings;

pub use datatype::Datatype;
pub use engine::{Comm, ErrHandler, Mpi, Request, Status, ThreadLevel};
pub use error::{Error, ErrorClass, Result};
pub use op::Op;

/// MPI_ANY_SOURCE (MPICH's value).
pub const ANY_SOURCE: i32 = -2;
/// MPI_ANY_TAG (MPICH's value).
pub const ANY_TAG: i32 = -1;
/// MPI_PROC_NULL (MPICH's value).
pub const PROC_NULL: i32 = -1;
/// MPI_UNDEFINED (MPICH's value), returned by MPI_Get_count when the byte count is not a
/// multiple of the datatype size.
pub const UNDEFINED: i32 = -32766;
/// The largest valid tag (the MPI_TAG_UB attribute of MPI_COMM_WORLD). The standard asks
/// for at least 32767; tags above this are MPI_ERR_TAG.
pub const TAG_UB: i32 = (1 << 30) - 1;
/// MPI_MAX_PROCESSOR_NAME (MPICH's value).
pub const MAX_PROCESSOR_NAME: usize = 128;
/// MPI_MAX_ERROR_STRING (MPICH's value).
pub const MAX_ERROR_STRING: usize = 512;

/// MPI_Wtime: seconds since an arbitrary origin fixed at start-up (monotonic clock).
pub fn wtime() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// MPI_Wtick: resolution of [`wtime`] in seconds.
pub fn wtick() -> f64 {
    1e-9
}

/// MPI_Get_processor_name: the host name (at most [`MAX_PROCESSOR_NAME`] - 1 bytes).
pub fn processor_name() -> String {
    let mut name = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    name.truncate(MAX_PROCESSOR_NAME - 1);
    name
}

/// MPI_Error_string for an error code (our codes are the classes).
pub fn error_string(code: i32) -> String {
    match ErrorClass::from_code(code) {
        Some(c) => c.description().to_string(),
        None => format!("Unknown error code {code}"),
    }
}

pub mod collective;
pub mod heap;
pub mod matching;
pub mod progress;
pub mod protocol;
pub mod request;
pub mod select;
