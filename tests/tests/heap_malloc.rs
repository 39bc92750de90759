//! The interposed C allocator (`MPI_HEAP_MALLOC`, `mpi-capi/src/malloc.rs`): C programs
//! from `tests/c/heap_malloc*.c` with the setting on and off. With it on, large blocks
//! allocated after MPI_Init must lie in the rank's heap (checked by the program through
//! /proc/self/maps, and here against the arena range `MPI_PRINT_SETTINGS=1` prints).

use std::path::PathBuf;
use tests::{compile, field, scratch, Job};

fn build(source: &str, name: &str) -> PathBuf {
    compile(source, &scratch(name), name)
}

/// `(malloc arena 0x…..0x…)` of the settings printout → (start, end).
fn arena_range(out: &str) -> Option<(u64, u64)> {
    let l = out.lines().find(|l| l.contains("(malloc arena "))?;
    let r = l
        .trim()
        .trim_start_matches("(malloc arena ")
        .trim_end_matches(')');
    let (a, b) = r.split_once("..")?;
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    Some((hex(a)?, hex(b)?))
}

#[test]
fn allocator_functions_with_the_setting_on_and_off() {
    let prog = build("tests/c/heap_malloc.c", "heap_malloc");
    for (setting, mode) in [("1", "on"), ("0", "off")] {
        let out = Job::mpirun(2, &prog, &[mode])
            .env("MPI_DEVICE", "shm")
            .env("MPI_HEAP_MALLOC", setting)
            .env("MPI_PRINT_SETTINGS", "1")
            .run();
        out.assert_success(&format!("heap_malloc, MPI_HEAP_MALLOC={setting}"));
        assert!(out.stdout.contains("heap_malloc ok"), "{}", out.stdout);
        let big = field(&out.stdout, "big").expect("big <ptr>");
        let big = u64::from_str_radix(big.trim_start_matches("0x"), 16).unwrap();
        match arena_range(&out.stdout) {
            Some((lo, hi)) => {
                assert_eq!(setting, "1", "arena printed with the setting off");
                assert!(lo <= big && big < hi, "{big:#x} outside {lo:#x}..{hi:#x}");
            }
            None => assert_eq!(setting, "0", "no arena printed:\n{}", out.stdout),
        }
    }
    // Over TCP the heap (and its malloc arena) is anonymous memory: same functions, no
    // location check in the program.
    let out = Job::mpirun(2, &prog, &["any"])
        .env("MPI_DEVICE", "tcp")
        .env("MPI_HEAP_MALLOC", "1")
        .run();
    out.assert_success("heap_malloc over tcp");
    assert!(out.stdout.contains("heap_malloc ok"), "{}", out.stdout);
}

#[test]
fn large_message_stress_with_malloced_buffers() {
    let prog = build("tests/c/heap_malloc_stress.c", "heap_malloc_stress");
    for setting in ["1", "0"] {
        for dev in ["shm", "auto"] {
            let out = Job::mpirun(4, &prog, &[])
                .env("MPI_DEVICE", dev)
                .env("MPI_HEAP_MALLOC", setting)
                .run();
            out.assert_success(&format!(
                "stress, MPI_HEAP_MALLOC={setting}, MPI_DEVICE={dev}"
            ));
            assert!(out.stdout.contains("stress ok 144 "), "{}", out.stdout);
        }
    }
    // A tiny arena: most blocks fall back to glibc, messages still arrive intact.
    let out = Job::mpirun(4, &prog, &["3"])
        .env("MPI_HEAP_MALLOC", "1")
        .env("MPI_HEAP_MALLOC_SIZE", "12M")
        .env("MPI_HEAP_MALLOC_MIN", "1")
        .run();
    out.assert_success("stress with a 12 MiB arena");
    assert!(out.stdout.contains("stress ok 72 "), "{}", out.stdout);
}

/// The C ping-pong runs with every buffer kind and the setting on (smoke: no crash, rows
/// printed).
#[test]
fn pingpong_with_the_allocator_interposed() {
    let prog = build("examples/pingpong.c", "pingpong_hm");
    let out = Job::mpirun(2, &prog, &["1048576"])
        .env("MPI_HEAP_MALLOC", "1")
        .run();
    out.assert_success("pingpong with MPI_HEAP_MALLOC=1");
    assert!(out.stdout.contains("1048576"), "{}", out.stdout);
}
