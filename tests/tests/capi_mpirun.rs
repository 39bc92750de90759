//! The C interface on several ranks, under our `mpirun`: statuses and MPI_Get_count of
//! messages from other ranks, MPI_ANY_SOURCE, rings, collectives with MPI_IN_PLACE,
//! per-communicator error handlers (`tests/c/capi_multi.c`), and the default error
//! handler stopping the whole job promptly (`tests/c/capi_fatal.c`).
//!
//! The install prefix is built once per test binary by `scripts/build.sh` (see
//! `tests::prefix`); the tests are skipped, with a notice, if it has no `bin/mpirun`.

use std::time::Duration;
use tests::{compile, mpirun, scratch, Job};

fn have_mpirun() -> bool {
    let ok = mpirun().exists();
    if !ok {
        eprintln!("NOTICE: no bin/mpirun in the prefix; multi-rank C-interface test skipped");
    }
    ok
}

#[test]
fn c_interface_on_2_to_4_ranks() {
    if !have_mpirun() {
        return;
    }
    let prog = compile("tests/c/capi_multi.c", &scratch("capi_multi"), "capi_multi");
    for n in [2, 3, 4] {
        let out = Job::mpirun(n, &prog, &[])
            .deadline(Duration::from_secs(60))
            .run();
        out.assert_success(&format!("capi_multi on {n} ranks"));
        for r in 0..n {
            assert!(
                out.stdout.contains(&format!("rank {r} OK")),
                "{n} ranks, rank {r}:\n{}",
                out.stdout
            );
        }
    }
}

#[test]
fn fatal_error_stops_the_job() {
    if !have_mpirun() {
        return;
    }
    let prog = compile(
        "tests/c/capi_fatal.c",
        &scratch("capi_fatal_mpirun"),
        "capi_fatal",
    );
    let out = Job::mpirun(3, &prog, &["rank"])
        .deadline(Duration::from_secs(60))
        .run();
    assert!(!out.status.success(), "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "MPI error in MPI_Send: Invalid rank: invalid rank 7 in a communicator of size 3"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.elapsed < Duration::from_secs(15),
        "took {:?}",
        out.elapsed
    );
    let out = Job::mpirun(2, &prog, &["abort"])
        .deadline(Duration::from_secs(60))
        .run();
    assert!(!out.status.success(), "{}", out.stderr);
    assert!(
        out.elapsed < Duration::from_secs(15),
        "took {:?}",
        out.elapsed
    );
}
