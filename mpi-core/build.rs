//! Compiles the C kernels that Rust cannot express: MPI_LONG_DOUBLE reductions
//! (`csrc/longdouble.c`, `long double` arithmetic). Needs only a C compiler.
fn main() {
    println!("cargo:rerun-if-changed=csrc/longdouble.c");
    cc::Build::new()
        .file("csrc/longdouble.c")
        .opt_level(2)
        .warnings(true)
        .compile("mpicore_longdouble");
}
