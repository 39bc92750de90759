//! # pmi: the PMI-1 wire protocol ("simple PMI", as MPICH speaks it)
//!
//! * [`wire`]: the line format, parsed by key (never by position).
//! * [`PmiClient`]: a rank's connection to its process manager (our `mpirun`, MPICH's
//!   Hydra `mpiexec.hydra`, Slurm's `srun --mpi=pmi2`), implementing
//!   [`rdma_api::Bootstrap`]; [`Singleton`] is the store of a program started alone, and
//!   [`Boot`] chooses between the two from the environment ([`Boot::from_env`]).
//! * [`server`]: the launcher's side, a poll-driven PMI-1 server for the N ranks of a job.
//!
//! Errors are reported as [`rdma_api::DeviceError::Bootstrap`].

#![warn(missing_docs)]

pub mod client;
pub mod server;
pub mod wire;

pub use client::{bootstrap_from_env, Boot, Maxes, PmiClient, Singleton};
