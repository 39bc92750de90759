//! Measurements between two threads over shared memory (ignored by default):
//! `cargo test --release -p device-shm --test perf -- --ignored --nocapture`

mod util;

use rdma_api::conformance::perf;
use rdma_api::Event;
use std::time::Instant;
use util::{run_job, Rank};

#[test]
#[ignore]
fn pingpong_1_byte_latency() {
    perf::pingpong_1_byte_latency(&util::SHM);
}

#[test]
#[ignore]
fn bandwidth_4_mib() {
    perf::bandwidth_4_mib(&util::SHM);
}

/// Ping-pong between registered (non-heap) buffers, 64 KiB .. 16 MiB: the rendezvous DATA
/// path without allocator interposition. `MPI_SHM_PIPE_MIN` / `MPI_SHM_CHUNK` select
/// process_vm_writev vs the pipelined copy and the chunk size.
#[test]
#[ignore]
fn pingpong_registered() {
    const MAX: usize = 16 << 20;
    run_job(2, 4096, |mut r| {
        let me = r.rank();
        let other = 1 - me;
        let buf = util::Mem::new(2 * MAX);
        // SAFETY: buf outlives the device's use (finalized below).
        let k = unsafe { r.dev.register(buf.ptr, buf.len) }.unwrap();
        r.barrier(); // the peer's region is registered (same key on both ranks)
        let mut ev = Vec::with_capacity(64);
        let mut size = 64 << 10;
        while size <= MAX {
            let iters = (2_000_000_000 / size).clamp(20, 2000);
            let mut t0 = Instant::now();
            for i in 0..iters + 5 {
                if i == 5 {
                    t0 = Instant::now();
                }
                let w = rdma_api::Write {
                    peer: other,
                    local_key: k,
                    local_offset: 0,
                    remote_key: k,
                    remote_offset: MAX,
                    len: size,
                    imm: Some(1),
                    sid: Some(1),
                };
                if me == 0 {
                    r.dev.write(&w).unwrap();
                    r.spin_recv(&mut ev);
                } else {
                    r.spin_recv(&mut ev);
                    r.dev.write(&w).unwrap();
                }
            }
            if me == 0 {
                let half = t0.elapsed().as_secs_f64() / iters as f64 / 2.0;
                println!(
                    "{size:>9} B: {:8.1} us  {:6.2} GB/s",
                    half * 1e6,
                    size as f64 / half / 1e9
                );
            }
            size *= 2;
        }
        r.dev.finalize().unwrap();
    });
}

/// Ping-pong of 0-byte inline notifications (`Device::notify`): the device's floor under
/// mpi-core's 0-byte MPI ping-pong (one cache line each way).
#[test]
#[ignore]
fn pingpong_inline_latency() {
    const WARM: usize = 2_000;
    const ITERS: usize = 100_000;
    run_job(2, 4096, |mut r| {
        let other = 1 - r.rank();
        let mut buf = Vec::with_capacity(64);
        let mut t0 = Instant::now();
        let wait_inline = |r: &mut Rank, buf: &mut Vec<Event>| {
            while !matches!(r.spin_event(buf), Event::RecvInline { .. }) {}
        };
        for i in 0..WARM + ITERS {
            if i == WARM {
                t0 = Instant::now();
            }
            if r.rank() == 0 {
                r.dev.notify(other, 1, &[0u8; 12]).unwrap();
                wait_inline(&mut r, &mut buf);
            } else {
                wait_inline(&mut r, &mut buf);
                r.dev.notify(other, 1, &[0u8; 12]).unwrap();
            }
        }
        if r.rank() == 0 {
            let rtt = t0.elapsed().as_secs_f64() / ITERS as f64;
            println!(
                "inline notify round trip: {:.3} us (half: {:.3} us)",
                rtt * 1e6,
                rtt * 5e5
            );
        }
        r.dev.finalize().unwrap();
    });
}
