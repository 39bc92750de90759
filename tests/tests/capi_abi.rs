//! The C ABI and the wrapper: `mpi.h` compiles cleanly as C99, C11 and C++; its constants
//! and struct layout equal MPICH's (`tests/c/capi_abi.c` built against both headers);
//! programs built with Debian's `mpicc.mpich` run against our library through the
//! `libmpich.so.12` symlink; `mpicc -show` prints what rsmpi's probe needs.
//!
//! The MPICH comparisons are skipped, with a notice, when `mpicc.mpich` is not installed.
//! The install prefix is built once by `scripts/build.sh` (see `tests::prefix`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::{compile, prefix, repo_root, scratch, Job};

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null 2>&1")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn mpicc() -> PathBuf {
    prefix().join("bin/mpicc")
}

fn c_file(name: &str) -> PathBuf {
    repo_root().join("tests/c").join(name)
}

/// Runs a command to completion and returns (success, stdout, stderr).
fn sh(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().expect("spawn");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn header_compiles_cleanly() {
    let dir = scratch("capi_header");
    let inc = format!("-I{}", prefix().join("include").display());
    let src = dir.join("h.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\n\
         static const MPI_Datatype types[] = { MPI_INT, MPI_DOUBLE, MPI_2INT, MPI_C_BOOL };\n\
         int main(void) {\n\
             MPI_Status s = { 0, 0, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS };\n\
             void *in_place = MPI_IN_PLACE;\n\
             switch (types[0]) { case MPI_INT: case MPI_COMM_WORLD: case MPI_SUM: break; default: break; }\n\
             return (s.MPI_TAG == MPI_ANY_TAG && in_place != MPI_BOTTOM && \n\
                     MPI_STATUS_IGNORE != 0) ? 0 : 1;\n\
         }\n",
    )
    .unwrap();
    for std in ["-std=c99", "-std=c11"] {
        let (ok, _, err) = sh(Command::new("cc")
            .args(["-Wall", "-Wextra", "-Werror", "-pedantic", std, "-c", "-o"])
            .arg(dir.join("h.o"))
            .arg(&inc)
            .arg(&src));
        assert!(ok, "cc {std}:\n{err}");
    }
    // Every test program too, with all warnings as errors.
    for f in [
        "capi_hello.c",
        "capi_self.c",
        "capi_errors.c",
        "capi_fatal.c",
        "capi_abi.c",
    ] {
        let (ok, _, err) = sh(Command::new(mpicc())
            .args(["-Wall", "-Wextra", "-Werror", "-std=c99", "-c", "-o"])
            .arg(dir.join("x.o"))
            .arg(c_file(f)));
        assert!(ok, "mpicc {f}:\n{err}");
    }
    if have("c++") {
        let cpp = dir.join("h.cpp");
        std::fs::copy(&src, &cpp).unwrap();
        let (ok, _, err) = sh(Command::new("c++")
            .args(["-Wall", "-Wextra", "-Werror", "-c", "-o"])
            .arg(dir.join("hpp.o"))
            .arg(&inc)
            .arg(&cpp));
        assert!(ok, "c++:\n{err}");
    } else {
        eprintln!("NOTICE: no C++ compiler; C++ check of mpi.h skipped");
    }
    // Not MPICH, not Open MPI: no identity macros.
    let h = std::fs::read_to_string(prefix().join("include/mpi.h")).unwrap();
    for m in [
        "MPICH_NAME",
        "MPICH",
        "MPICH_VERSION",
        "OPEN_MPI",
        "MSMPI_VER",
    ] {
        let defined = h.lines().any(|l| {
            let mut t = l.split_whitespace();
            t.next() == Some("#define") && t.next() == Some(m)
        });
        assert!(!defined, "mpi.h defines {m}");
    }
}

#[test]
fn constants_match_mpich() {
    let dir = scratch("capi_abi");
    let ours = compile("tests/c/capi_abi.c", &dir, "abi_ours");
    let (ok, ours_out, err) = sh(&mut Command::new(&ours));
    assert!(ok, "{err}");
    assert!(ours_out.lines().count() > 150, "{ours_out}");
    if !have("mpicc.mpich") {
        eprintln!("NOTICE: mpicc.mpich not installed; comparison with MPICH's mpi.h skipped");
        return;
    }
    let theirs = dir.join("abi_mpich");
    let (ok, _, err) = sh(Command::new("mpicc.mpich")
        .arg("-o")
        .arg(&theirs)
        .arg(c_file("capi_abi.c")));
    assert!(ok, "mpicc.mpich:\n{err}");
    let (ok, theirs_out, err) = sh(&mut Command::new(&theirs));
    assert!(ok, "{err}");
    for (a, b) in ours_out.lines().zip(theirs_out.lines()) {
        assert_eq!(a, b, "ours vs MPICH");
    }
    assert_eq!(ours_out, theirs_out);
}

/// Builds `tests/c/<name>.c` with MPICH's wrapper.
fn build_with_mpich(name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(format!("{name}_mpich"));
    let (ok, _, err) = sh(Command::new("mpicc.mpich")
        .arg("-o")
        .arg(&exe)
        .arg(c_file(&format!("{name}.c"))));
    assert!(ok, "mpicc.mpich {name}:\n{err}");
    exe
}

#[test]
fn mpich_built_programs_run_against_our_library() {
    if !have("mpicc.mpich") {
        eprintln!("NOTICE: mpicc.mpich not installed; MPICH-ABI run test skipped");
        return;
    }
    let dir = scratch("capi_mpich_abi");
    let lib = prefix().join("lib");
    for name in ["capi_hello", "capi_self", "capi_errors"] {
        let exe = build_with_mpich(name, &dir);
        // The program needs libmpich.so.12; make sure it is ours that gets loaded, and
        // resolve every symbol at start-up (LD_BIND_NOW) so a missing one fails here.
        let (_, ldd, _) = sh(Command::new("ldd").arg(&exe).env("LD_LIBRARY_PATH", &lib));
        assert!(
            ldd.lines()
                .any(|l| l.contains("libmpich.so.12") && l.contains(lib.to_str().unwrap())),
            "libmpich.so.12 not resolved to our prefix:\n{ldd}"
        );
        let out = Job::new({
            let mut c = Command::new(&exe);
            c.env("LD_LIBRARY_PATH", &lib).env("LD_BIND_NOW", "1");
            c
        })
        .deadline(Duration::from_secs(20))
        .run();
        out.assert_success(name);
        assert!(out.stdout.trim_end().ends_with("OK"), "{}", out.stdout);
    }
    // The default handler behaves the same for an MPICH-built program.
    let exe = build_with_mpich("capi_fatal", &dir);
    let out = Job::new({
        let mut c = Command::new(&exe);
        c.arg("rank").env("LD_LIBRARY_PATH", &lib);
        c
    })
    .deadline(Duration::from_secs(20))
    .run();
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("MPI error in MPI_Send: Invalid rank"),
        "{}",
        out.stderr
    );
}

#[test]
fn mpicc_show_and_info() {
    let p = prefix().canonicalize().unwrap();
    let inc = format!("-I{}", p.join("include").display());
    let libdir = format!("-L{}", p.join("lib").display());
    let rpath = format!("-Wl,-rpath,{}", p.join("lib").display());

    let (ok, out, _) = sh(Command::new(mpicc())
        .arg("-show")
        .env_remove("MPICH_CC")
        .env_remove("MPICC_CC"));
    assert!(ok);
    let toks: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(
        toks,
        ["cc", inc.as_str(), libdir.as_str(), rpath.as_str(), "-lmpi"],
        "{out}"
    );

    // Compile only: no link flags; user arguments kept in order, quoted when needed.
    let (_, out, _) = sh(Command::new(mpicc())
        .args(["-show", "-c", "a b.c", "-o", "x.o"])
        .env("MPICH_CC", "gcc -m64"));
    assert_eq!(out.trim(), format!("gcc -m64 {inc} -c 'a b.c' -o x.o"));
    let (_, out, _) = sh(Command::new(mpicc())
        .args(["-show", "x.o", "-o", "prog"])
        .env("MPICC_CC", "clang")
        .env_remove("MPICH_CC"));
    assert_eq!(
        out.trim(),
        format!("clang {inc} x.o -o prog {libdir} {rpath} -lmpi")
    );
    for opt in ["-compile_info", "-link_info", "-compile-info", "-link-info"] {
        let (_, out, _) = sh(Command::new(mpicc())
            .arg(opt)
            .env_remove("MPICH_CC")
            .env_remove("MPICC_CC"));
        assert_eq!(
            out.trim(),
            format!("cc {inc} {libdir} {rpath} -lmpi"),
            "{opt}"
        );
    }
    let (_, out, _) = sh(Command::new(mpicc())
        .arg("-show-compile-info")
        .env_remove("MPICH_CC")
        .env_remove("MPICC_CC"));
    assert_eq!(out.trim(), format!("cc {inc}"));
}

#[test]
fn prefix_is_relocatable() {
    // A copy of the prefix elsewhere compiles and runs against itself.
    let dir = scratch("capi_moved");
    let moved = dir.join("moved prefix");
    let (ok, _, err) = sh(Command::new("cp").arg("-a").arg(prefix()).arg(&moved));
    assert!(ok, "{err}");
    let exe = dir.join("hello");
    let (ok, _, err) = sh(Command::new(moved.join("bin/mpicc"))
        .arg("-o")
        .arg(&exe)
        .arg(c_file("capi_hello.c")));
    assert!(ok, "{err}");
    let (ok, out, _) = sh(Command::new(moved.join("bin/mpicc")).arg("-show"));
    assert!(ok && out.contains("moved prefix"), "{out}");
    let (_, ldd, _) = sh(Command::new("ldd").arg(&exe));
    assert!(
        ldd.contains("moved prefix/lib/libmpi.so.12"),
        "rpath does not point into the moved prefix:\n{ldd}"
    );
    let out = Job::new(Command::new(&exe))
        .deadline(Duration::from_secs(20))
        .run();
    out.assert_success("moved hello");
}
