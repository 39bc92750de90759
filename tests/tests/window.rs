//! A window of 64 rendezvous messages (256 KiB) in flight at once, as osu_bw / osu_bibw
//! post it: into one shared receive buffer (overlapping receive buffers, each registered on
//! its own by the rendezvous) and into distinct buffers, one and both directions, on the
//! devices tcp and shm. The program (`tests/c/window.c`) checks counts, sources and data;
//! these tests check its exit status and final line, not timings.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tests::{compile, scratch, Job};

/// The devices under test.
const DEVICES: [&str; 2] = ["tcp", "shm"];

/// The program, compiled once for all tests of this file (they run in parallel threads of
/// one process, which share the scratch directory: compiling per test would overwrite a
/// binary another test is running).
fn build() -> &'static Path {
    static PROG: OnceLock<PathBuf> = OnceLock::new();
    PROG.get_or_init(|| compile("tests/c/window.c", &scratch("window"), "window"))
}

/// Runs `window <buffers> <direction> 4` on 2 ranks of every device in [`DEVICES`].
fn run(buffers: &str, direction: &str) {
    let prog = build();
    for d in DEVICES {
        let out = Job::mpirun(2, prog, &[buffers, direction, "4"])
            .env("MPI_DEVICE", d)
            // Keep malloc'ed buffers outside the MPI heap, so every receive buffer is
            // registered on its own (the path of the overlapping regions).
            .env("MPI_HEAP_MALLOC", "0")
            .run();
        out.assert_success(&format!("window {buffers} {direction}, device {d}"));
        let want = format!("window ok {buffers} {direction} 4 rounds");
        assert!(
            out.stdout.contains(&want),
            "device {d}: expected {want:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn window_of_irecvs_into_one_buffer() {
    run("shared", "uni");
}

#[test]
fn window_of_irecvs_into_distinct_buffers() {
    run("distinct", "uni");
}

#[test]
fn bidirectional_window_into_one_buffer() {
    run("shared", "bidir");
}

#[test]
fn bidirectional_window_into_distinct_buffers() {
    run("distinct", "bidir");
}
