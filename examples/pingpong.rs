//! Ping-pong between ranks 0 and 1 on the mpi-core Rust API.
//!
//! Usage: `mpirun -n 2 pingpong-rs [MAX_BYTES]` (MAX_BYTES default 4 MiB; suffixes K, M, G
//! accepted). For message sizes 0, 1, 2, 4, … MAX_BYTES, rank 0 sends to rank 1, which
//! sends the message back; rank 0 prints
//!
//! - `latency_us`: half the round-trip time in microseconds,
//! - `bandwidth_MBps`: bytes / latency in MB/s (10^6 bytes per second).
//!
//! Each size is warmed up, then timed over an iteration count that shrinks with the size
//! (1000 for small messages) so a run takes seconds. The echoed data is checked. Ranks
//! beyond 1 only join the barriers.

use mpi_core::api::*;
use mpi_core::settings::parse_size;

const DEFAULT_MAX: usize = 4 << 20;
const TAG: i32 = 1;

/// Timed iterations for `bytes`: 1000 up to 64 KiB, then about 64 MiB of traffic per
/// size, at least 20.
fn iterations(bytes: usize) -> usize {
    (64usize << 20)
        .checked_div(bytes)
        .unwrap_or(usize::MAX)
        .clamp(20, 1000)
}

fn main() {
    let max = match std::env::args().nth(1) {
        None => DEFAULT_MAX,
        Some(a) => match parse_size(&a) {
            Some(n) if n <= i32::MAX as usize => n,
            _ => {
                eprintln!("pingpong-rs: invalid maximum size {a:?} (bytes, suffix K/M/G allowed)");
                std::process::exit(2);
            }
        },
    };
    if let Err(e) = run(max) {
        eprintln!("pingpong-rs: {e}");
        std::process::exit(1);
    }
}

fn run(max: usize) -> mpi_core::Result<()> {
    let mut universe = Universe::init()?;
    let mut world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        if rank == 0 {
            eprintln!("pingpong-rs: needs at least 2 ranks (got {size})");
        }
        drop(world);
        universe.finalize()?;
        std::process::exit(2);
    }

    let mut sizes = vec![0usize];
    let mut s = 1;
    while s <= max {
        sizes.push(s);
        s *= 2;
    }

    let mut sbuf = vec![0u8; max];
    let mut rbuf = vec![0u8; max];

    if rank == 0 {
        println!("# mpi-core ping-pong, {size} ranks, rank 0 <-> rank 1");
        println!(
            "{:>10} {:>12} {:>16}",
            "bytes", "latency_us", "bandwidth_MBps"
        );
    }

    for &bytes in &sizes {
        let iters = iterations(bytes);
        let warmup = (iters / 10).max(2);
        // A pattern per size, so a stale or misplaced echo is caught.
        let seed = bytes.trailing_zeros() as u8;
        for (i, b) in sbuf[..bytes].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
        world.barrier()?;
        let mut t0 = 0.0;
        for it in 0..warmup + iters {
            if it == warmup {
                t0 = mpi_core::wtime();
            }
            match rank {
                0 => {
                    world.send(&sbuf[..bytes], 1, TAG)?;
                    world.receive_into(&mut rbuf[..bytes], 1, TAG)?;
                }
                1 => {
                    world.receive_into(&mut rbuf[..bytes], 0, TAG)?;
                    world.send(&rbuf[..bytes], 0, TAG)?;
                }
                _ => {}
            }
        }
        let elapsed = mpi_core::wtime() - t0;
        if rank == 0 {
            if rbuf[..bytes] != sbuf[..bytes] {
                let at = (0..bytes).find(|&i| rbuf[i] != sbuf[i]).unwrap_or(0);
                eprintln!(
                    "pingpong-rs: echo of {bytes} bytes differs at byte {at}: got {}, want {}",
                    rbuf[at], sbuf[at]
                );
                world.abort(3, "data mismatch");
            }
            let latency_us = elapsed / iters as f64 / 2.0 * 1e6;
            // bytes per microsecond = MB/s (10^6 B/s).
            let bandwidth = if latency_us > 0.0 {
                bytes as f64 / latency_us
            } else {
                0.0
            };
            println!("{bytes:>10} {latency_us:>12.2} {bandwidth:>16.2}");
        }
    }

    world.barrier()?;
    drop(world);
    universe.finalize()
}
