//! Data movement: sizes, events, self writes, per-peer ordering (the conformance suite,
//! `rdma_api::conformance::transfer`).

mod util;

use rdma_api::conformance::transfer;

#[test]
fn two_ranks_all_sizes() {
    transfer::all_to_all(&util::TCP, 2);
}

#[test]
fn four_ranks_all_sizes() {
    transfer::all_to_all(&util::TCP, 4);
}

#[test]
fn ordering_of_10000_mixed_writes() {
    transfer::ordering_of_10000_mixed_writes(&util::TCP);
}

#[test]
fn self_writes_single_rank() {
    transfer::self_writes_single_rank(&util::TCP);
}

#[test]
fn self_write_into_registered_region() {
    transfer::self_write_into_registered_region(&util::TCP);
}

#[test]
fn unpolled_receiver_keeps_order() {
    transfer::unpolled_receiver_keeps_order(&util::TCP);
}

#[test]
fn wait_is_woken_by_a_write() {
    transfer::wait_is_woken_by_a_write(&util::TCP);
}
