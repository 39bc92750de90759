//! Measurements between two threads of one process (instantiated as `#[ignore]` tests):
//! `cargo test --release -p device-<name> --test perf -- --ignored --nocapture`

use super::{run_job, Transport};
use crate::Event;
use std::time::Instant;

/// 1-byte ping-pong with inline writes, busy-polling: half the round trip is the latency.
pub fn pingpong_1_byte_latency(t: &Transport) {
    const WARM: usize = 2_000;
    const ITERS: usize = 50_000;
    run_job(t, 2, 4096, |mut r| {
        let other = 1 - r.rank();
        let mut buf = Vec::with_capacity(64);
        let mut t0 = Instant::now();
        for i in 0..WARM + ITERS {
            if i == WARM {
                t0 = Instant::now();
            }
            if r.rank() == 0 {
                r.put(other, 0, 8, 1, Some(i as u32), None);
                r.spin_recv(&mut buf);
            } else {
                r.spin_recv(&mut buf);
                r.put(other, 0, 8, 1, Some(i as u32), None);
            }
        }
        if r.rank() == 0 {
            let rtt = t0.elapsed().as_secs_f64() / ITERS as f64;
            println!(
                "1-byte round trip: {:.2} us (half: {:.2} us)",
                rtt * 1e6,
                rtt * 5e5
            );
        }
        r.dev.finalize().unwrap();
    });
}

/// 500 writes of 4 MiB, at most 4 in flight: the bandwidth.
pub fn bandwidth_4_mib(t: &Transport) {
    const LEN: usize = 4 << 20;
    const COUNT: usize = 500;
    const WINDOW: usize = 4;
    run_job(t, 2, 2 * LEN, |mut r| {
        let mut buf = Vec::with_capacity(64);
        if r.rank() == 0 {
            let t0 = Instant::now();
            let mut in_flight = 0;
            for i in 0..COUNT {
                while in_flight == WINDOW {
                    if let Event::Sent { .. } = r.spin_event(&mut buf) {
                        in_flight -= 1;
                    }
                }
                r.put(1, 0, LEN, LEN, Some(i as u32), Some(i as u64));
                in_flight += 1;
            }
            r.spin_recv(&mut buf); // the receiver's ack after the last write
            let s = t0.elapsed().as_secs_f64();
            println!(
                "4 MiB writes: {:.0} MB/s ({:.2} GiB/s)",
                (COUNT * LEN) as f64 / s / 1e6,
                (COUNT * LEN) as f64 / s / (1u64 << 30) as f64
            );
        } else {
            for _ in 0..COUNT {
                r.spin_recv(&mut buf);
            }
            r.put(0, 0, 0, 1, Some(0), None);
        }
        r.dev.finalize().unwrap();
    });
}
