//! Measurements between two threads over loopback (ignored by default):
//! `cargo test --release -p device-tcp --test perf -- --ignored --nocapture`

mod util;

use rdma_api::conformance::perf;

#[test]
#[ignore]
fn pingpong_1_byte_latency() {
    perf::pingpong_1_byte_latency(&util::TCP);
}

#[test]
#[ignore]
fn bandwidth_4_mib() {
    perf::bandwidth_4_mib(&util::TCP);
}
