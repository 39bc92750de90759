//! Gives libmpi.so the soname `libmpi.so.12`, so that programs linked with `-lmpi`
//! record `libmpi.so.12` (the install prefix provides it, and `libmpich.so.12` for
//! programs built against MPICH, as symlinks to the same file).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi.so.12");
    println!("cargo:rerun-if-changed=build.rs");
}
