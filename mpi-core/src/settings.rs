//! Settings, read once from the environment at MPI_Init.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `MPI_EAGER_LIMIT` | largest message (bytes) sent SHORT (eager); larger ones use REQ/RSP/DATA | chosen by measurement |
//! | `MPI_CTRL_SLOTS` | CTRL slots per sender in each receiver's ring (= credits) | 32 |
//! | `MPI_HEAP_SIZE` | bytes of the per-rank heap (CTRL rings + MPI_Alloc_mem) | 64 MiB |
//! | `MPI_PRINT_SETTINGS` | `1`: rank 0 prints the effective settings at start-up | 0 |

/// The effective settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Eager (SHORT) limit in bytes.
    pub eager_limit: usize,
    /// CTRL slots per sender.
    pub ctrl_slots: usize,
    /// Heap size in bytes.
    pub heap_size: usize,
    /// Print the settings at start-up.
    pub print: bool,
}
