#!/bin/sh
# Builds the workspace in release mode and assembles an install prefix.
#
#   scripts/build.sh [PREFIX]        (default PREFIX: <repo>/target/mpi)
#
# Layout of PREFIX:
#   bin/mpirun, bin/mpiexec   copies of the launcher binaries (if the launcher built them)
#   bin/mpicc                 the compiler wrapper (mpi-capi/mpicc.in); finds PREFIX from
#                             its own location, so PREFIX can be moved
#   lib/libmpi.so             copy of the C library (soname libmpi.so.12)
#   lib/libmpi.so.12          -> libmpi.so
#   lib/libmpich.so.12        -> libmpi.so   (programs built with MPICH's mpicc)
#   include/mpi.h             mpi-capi/include/mpi.h
#
# Cargo's target directory is the default one (<repo>/target) unless CARGO_TARGET_DIR is
# set, which is honoured (cargo metadata reports the effective one). Files are replaced
# only when their content changed, so a second run with nothing changed is quick (cargo's
# no-op build plus a few cmp) and running programs keep their mapping of the old library.
set -eu

root=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
prefix=${1:-$root/target/mpi}

cd "$root"
cargo build --release --workspace ${CARGO_BUILD_QUIET:+--quiet}

target_dir=$(cargo metadata --format-version 1 --no-deps --offline 2>/dev/null \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target_dir" ] || target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in /*) ;; *) target_dir=$root/$target_dir ;; esac
rel=$target_dir/release

mkdir -p "$prefix/bin" "$prefix/lib" "$prefix/include"
prefix=$(cd -- "$prefix" && pwd -P)

# install_file SRC DST MODE: replaces DST atomically if its content differs.
install_file() {
    if [ -L "$2" ] || ! cmp -s "$1" "$2"; then
        cp -- "$1" "$2.tmp.$$"
        chmod "$3" "$2.tmp.$$"
        mv -f -- "$2.tmp.$$" "$2"
    fi
}

# link_to TARGET NAME: NAME -> TARGET (relative symlink), if not already.
link_to() {
    if [ "$(readlink -- "$2" 2>/dev/null || true)" != "$1" ]; then
        rm -f -- "$2"
        ln -s -- "$1" "$2"
    fi
}

install_file "$rel/libmpi.so" "$prefix/lib/libmpi.so" 755
link_to libmpi.so "$prefix/lib/libmpi.so.12"
link_to libmpi.so "$prefix/lib/libmpich.so.12"
install_file "$root/mpi-capi/include/mpi.h" "$prefix/include/mpi.h" 644
install_file "$root/mpi-capi/mpicc.in" "$prefix/bin/mpicc" 755
for b in mpirun mpiexec; do
    if [ -f "$rel/$b" ]; then
        install_file "$rel/$b" "$prefix/bin/$b" 755
    else
        echo "build.sh: note: $rel/$b not built; $prefix/bin/$b not installed" >&2
    fi
done
echo "$prefix"
