//! `mpiexec`: the same program as `mpirun`.

#[path = "app.rs"]
mod app;

fn main() {
    app::main()
}
