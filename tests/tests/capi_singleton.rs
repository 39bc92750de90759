//! The C interface, exercised by C programs (`tests/c/capi_*.c`) compiled with our `mpicc`
//! and run as singletons (`./prog`, no launcher): start-up and queries, point-to-point
//! through MPI_COMM_SELF, collectives on one rank, errors returned under
//! MPI_ERRORS_RETURN, and the default handler's message and exit.
//!
//! The install prefix is built once per test binary by `scripts/build.sh` (see
//! `tests::prefix`; set `MPI_TEST_PREFIX` to use an existing one).

use std::process::Command;
use std::time::Duration;
use tests::{compile, scratch, Job, Outcome};

/// Compiles `tests/c/<name>.c` into a scratch directory of its own per test (`tag`), so
/// that tests running in parallel never replace a binary another one is running.
fn build(name: &str, tag: &str) -> std::path::PathBuf {
    compile(
        &format!("tests/c/{name}.c"),
        &scratch(&format!("{name}-{tag}")),
        name,
    )
}

/// Runs a singleton with a 20 s deadline.
fn run(prog: &std::path::Path, args: &[&str]) -> Outcome {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    Job::new(cmd).deadline(Duration::from_secs(20)).run()
}

#[test]
fn init_finalize_and_queries() {
    let out = run(&build("capi_hello", "queries"), &[]);
    out.assert_success("capi_hello");
    assert!(out.stdout.contains("rank 0 size 1"), "{}", out.stdout);
    assert!(out.stdout.contains("tag_ub 1073741823"), "{}", out.stdout);
    assert!(out.stdout.trim_end().ends_with("OK"), "{}", out.stdout);
}

#[test]
fn self_point_to_point_and_collectives() {
    let out = run(&build("capi_self", "p2p"), &[]);
    out.assert_success("capi_self");
    assert!(out.stdout.trim_end().ends_with("OK"), "{}", out.stdout);
}

#[test]
fn errors_return_the_right_classes() {
    let out = run(&build("capi_errors", "return"), &[]);
    out.assert_success("capi_errors");
    for want in [
        "-> MPI_ERR_RANK",
        "-> MPI_ERR_COUNT",
        "-> MPI_ERR_TAG",
        "-> MPI_ERR_COMM",
        "-> MPI_ERR_TYPE",
        "-> MPI_ERR_OP",
        "-> MPI_ERR_REQUEST",
        "-> MPI_ERR_ARG",
        "-> MPI_ERR_ROOT",
        "-> MPI_ERR_TRUNCATE",
    ] {
        assert!(out.stdout.contains(want), "missing {want}:\n{}", out.stdout);
    }
    assert!(out.stdout.trim_end().ends_with("OK"), "{}", out.stdout);
}

/// Runs `capi_fatal <case>`: it must fail promptly with `expect` on stderr.
fn fatal_case(prog: &std::path::Path, case: &str, expect: &[&str], code: Option<i32>) {
    let out = run(prog, &[case]);
    assert!(
        !out.status.success(),
        "{case}: exited 0\n{}\n{}",
        out.stdout,
        out.stderr
    );
    if let Some(c) = code {
        assert_eq!(out.status.code(), Some(c), "{case}: {}", out.stderr);
    }
    assert!(
        out.elapsed < Duration::from_secs(10),
        "{case}: took {:?}",
        out.elapsed
    );
    for e in expect {
        assert!(
            out.stderr.contains(e),
            "{case}: stderr lacks {e:?}:\n{}",
            out.stderr
        );
    }
    assert!(
        !out.stdout.contains("not reached"),
        "{case}: {}",
        out.stdout
    );
}

#[test]
fn default_handler_is_fatal() {
    let prog = build("capi_fatal", "fatal");
    fatal_case(
        &prog,
        "rank",
        &["MPI error in MPI_Send: Invalid rank: invalid rank 7 in a communicator of size 1"],
        Some(1),
    );
    fatal_case(
        &prog,
        "comm",
        &["MPI error in MPI_Send: Invalid communicator"],
        Some(1),
    );
    fatal_case(
        &prog,
        "type",
        &["MPI error in MPI_Recv: Invalid datatype"],
        Some(1),
    );
    fatal_case(
        &prog,
        "self_return",
        &["MPI error in MPI_Allreduce: Invalid MPI_Op"],
        Some(1),
    );
    fatal_case(&prog, "abort", &[], Some(3));
}

#[test]
fn calls_outside_init_finalize_abort() {
    let prog = build("capi_fatal", "outside");
    fatal_case(
        &prog,
        "before_init",
        &["MPI error in MPI_Send", "MPI_Send called before MPI_Init"],
        None,
    );
    fatal_case(
        &prog,
        "after_finalize",
        &["MPI_Send called after MPI_Finalize"],
        None,
    );
}
