#!/bin/sh
# Builds everything and runs the main job: the Jacobi Laplace solver on 4 ranks and the
# ping-pong on 2 ranks, both C programs compiled with our mpicc and launched with our mpirun.
#
#   scripts/demo.sh [jacobi arguments: N tolerance max_iterations]
set -eu
root=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
prefix=$(sh "$root/scripts/build.sh" | tail -n 1)
out=$root/target/examples
mkdir -p "$out"
"$prefix/bin/mpicc" -O2 -o "$out/jacobi" "$root/examples/jacobi.c"
"$prefix/bin/mpicc" -O2 -o "$out/pingpong" "$root/examples/pingpong.c"
echo "== mpirun -n 4 jacobi $*"
"$prefix/bin/mpirun" -n 4 "$out/jacobi" "$@"
echo "== mpirun -n 2 pingpong"
"$prefix/bin/mpirun" -n 2 "$out/pingpong"
