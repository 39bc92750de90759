//! Predefined reduction operations (MPI-4.1 §6.9.2).

use crate::{Datatype, Result};

/// A predefined reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// MPI_SUM
    Sum,
    /// MPI_PROD
    Prod,
    /// MPI_MIN
    Min,
    /// MPI_MAX
    Max,
}

/// `inout[i] = inout[i] op input[i]` for `count` elements of `dt`.
/// Errors: MPI_ERR_OP when `op` is not defined on `dt` (e.g. MPI_SUM on MPI_BYTE).
///
/// # Safety
/// Both pointers valid for `count * dt.size()` bytes; they may not overlap partially.
#[allow(unused_variables)]
pub unsafe fn reduce_local(
    op: Op,
    dt: Datatype,
    input: *const u8,
    inout: *mut u8,
    count: usize,
) -> Result<()> {
    todo!()
}
