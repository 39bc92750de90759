//! # pmi: the PMI-1 and PMI-2 wire protocols (as MPICH, Hydra and Slurm speak them)
//!
//! * [`wire`]: the PMI-1 line format; [`wire2`]: the PMI-2 frame format. Both are parsed
//!   by key (never by position).
//! * [`PmiClient`]: a rank's PMI-1 connection to its process manager (our `mpirun`, MPICH's
//!   Hydra `mpiexec.hydra`, Slurm's `srun --mpi=pmi2`); [`Pmi2Client`]: the PMI-2 one
//!   (Slurm's `srun --mpi=pmi2`, Hydra). Both implement [`rdma_api::Bootstrap`];
//!   [`Singleton`] is the store of a program started alone, and [`Boot`] chooses among the
//!   three from the environment ([`Boot::from_env`]).
//! * [`server`]: the launcher's side, a poll-driven PMI-1 server for the N ranks of a job.
//!
//! ## Which PMI version [`Boot::from_env`] speaks
//!
//! 1. `PMI_FD` unset: a [`Singleton`] (rank 0 of 1). Otherwise `PMI_RANK` and `PMI_SIZE`
//!    must be set (our `mpirun`, Hydra and `srun --mpi=pmi2` all set the three).
//! 2. `MPI_PMI=1` or `MPI_PMI=2` forces that version; a server that refuses it is an error.
//!    Any other value than `1`, `2`, `auto` or empty is an error.
//! 3. Otherwise (`auto`): PMI-2 is offered when Slurm's `mpi/pmi2` plugin started the rank
//!    (`SLURM_MPI_TYPE` starts with `pmi2`, which `srun --mpi=pmi2` exports to every task,
//!    or `PMI2_SUN_PATH` is set, as newer Slurm releases also do); else PMI-1 is offered.
//! 4. The offer is the PMI-1 line `cmd=init pmi_version=V pmi_subversion=S` (1.1 or 2.0).
//!    In `auto` mode, if `response_to_init` refuses it but names the other version, the
//!    client continues in that version on the same connection. This covers a PMI-1-only
//!    server met with Slurm variables still in the environment (our `mpirun` started
//!    inside an `srun` step answers `rc=-1 pmi_version=1`), and a Slurm step whose first
//!    task already fixed the version (Slurm's server answers `rc=-1 pmi_version=<fixed>`).
//!
//! Slurm's `mpi/pmi2` server also serves PMI-1.1, so `MPI_PMI=1` works under
//! `srun --mpi=pmi2` too; Hydra serves both versions.
//!
//! Errors are reported as [`rdma_api::DeviceError::Bootstrap`].

#![warn(missing_docs)]

pub mod client;
pub mod client2;
mod conn;
pub mod server;
pub mod wire;
pub mod wire2;

pub use client::{bootstrap_from_env, Boot, Maxes, PmiClient, Singleton};
pub use client2::{Pmi2Client, PmiVersion, Selection};
