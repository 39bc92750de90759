//! # mpi-capi: the C ABI (`libmpi.so`, `include/mpi.h`)
//!
//! A thin layer over [`mpi_core::Mpi`]: every `MPI_*` function checks its arguments,
//! converts C handles to engine values ([`convert`]), calls the engine under the global
//! lock ([`state`]) and converts the result back.
//!
//! ## ABI
//! Handles, `MPI_Status`, error classes and special values are MPICH's (x86_64 Linux),
//! so programs built with MPICH's `mpicc` run against this library when it is found as
//! `libmpich.so.12` (the install prefix of `scripts/build.sh` provides that symlink).
//! The library's soname is `libmpi.so.12`.
//!
//! Request handles are `0x2c000001 + engine request id` (never `MPI_REQUEST_NULL`,
//! `0x2c000000`). Error codes are error classes.
//!
//! ## Errors
//! See [`state`]: the communicator's handler (MPI_COMM_WORLD's for calls without a
//! communicator, e.g. MPI_Wait) decides between returning the class and aborting with
//! `MPI error in <function>: <class>: <detail>` on stderr. Calls before MPI_Init or after
//! MPI_Finalize print an MPI_ERR_OTHER message and exit(1). Panics become MPI_ERR_INTERN
//! (fatal); none crosses the FFI boundary.

#![allow(clippy::missing_safety_doc)] // the C functions' contracts are the MPI standard's

pub mod coll;
pub mod consts;
pub mod convert;
pub mod init;
pub mod malloc;
pub mod misc;
pub mod p2p;
pub mod state;
