//! mpi-core
