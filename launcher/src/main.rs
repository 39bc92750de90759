//! `mpirun`: starts the ranks of an MPI job on this host and serves them PMI-1.
//! See the `app` module (also built as `mpiexec`).

mod app;

fn main() {
    app::main()
}
