//! Orderly shutdown (the conformance suite, `rdma_api::conformance::finalize`).

mod util;

use rdma_api::conformance::finalize;

#[test]
fn concurrent_finalize_flushes_everything() {
    finalize::concurrent_finalize_flushes_everything(&util::SHM);
}

#[test]
fn finalize_without_traffic() {
    finalize::finalize_without_traffic(&util::SHM);
}
