#!/bin/sh
# Runs the whole test suite: unit and device tests of every crate, and the end-to-end tests
# (C programs through the real mpicc and mpirun). Release mode, so the tests share the build
# of scripts/build.sh. Extra arguments go to cargo test (e.g. a test name filter).
#
# The end-to-end suites run first with the automatic device choice (some of their tests
# also loop over the devices themselves), then once more with each device forced for every
# job (MPI_TEST_DEVICE, see tests/src/lib.rs).
set -eu
root=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
cd "$root"
sh scripts/build.sh >/dev/null
cargo test --release --workspace "$@"
for device in shm tcp; do
    echo "== end-to-end tests with MPI_DEVICE=$device forced"
    MPI_TEST_DEVICE=$device cargo test --release -p tests --test e2e --test capi_mpirun \
        --test window "$@"
done
