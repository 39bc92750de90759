#!/bin/sh
# Runs the whole test suite: unit and device tests of every crate, and the end-to-end tests
# (C programs through the real mpicc and mpirun). Release mode, so the tests share the build
# of scripts/build.sh. Extra arguments go to cargo test (e.g. a test name filter).
set -eu
root=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
cd "$root"
sh scripts/build.sh >/dev/null
cargo test --release --workspace "$@"
