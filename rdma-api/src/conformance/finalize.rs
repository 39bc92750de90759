//! Orderly shutdown: all ranks finalize at once with writes still queued.

use super::{pattern, run_job, Transport};
use crate::Event;

/// Four ranks queue a large and many small writes to each other and finalize without any
/// poll: finalize pushes everything out while receiving; it is idempotent, and a finalized
/// device raises no events.
pub fn concurrent_finalize_flushes_everything(t: &Transport) {
    const N: usize = 4;
    const BIG: usize = 4 << 20;
    const SMALL: usize = 100;
    const NSMALL: usize = 200;
    // Layout: [source BIG][source small area][per-sender BIG slots][per-sender small slots]
    let slot = BIG + NSMALL * SMALL;
    let heap_len = slot + N * slot;
    let res = run_job(t, N, heap_len, move |mut r| {
        let me = r.rank();
        r.heap.set(0, &pattern(me as u64, slot));
        for q in (0..N).filter(|&q| q != me) {
            let base = slot + me * slot;
            r.put(q, 0, base, BIG, Some(0), Some(q as u64));
            for k in 0..NSMALL {
                r.put(
                    q,
                    BIG + k * SMALL,
                    base + BIG + k * SMALL,
                    SMALL,
                    None,
                    None,
                );
            }
        }
        // No poll at all: finalize must push all of it out while receiving.
        r.dev.finalize().unwrap();
        for p in (0..N).filter(|&p| p != me) {
            assert!(
                r.heap.get(slot + p * slot, slot) == pattern(p as u64, slot).as_slice(),
                "rank {me}: data from {p} incomplete after finalize"
            );
        }
        // Finalize is idempotent; the device is closed for writes afterwards.
        r.dev.finalize().unwrap();
        let mut ev: Vec<Event> = Vec::new();
        assert_eq!(r.dev.poll(&mut ev).unwrap(), 0);
        me
    });
    assert_eq!(res, (0..N).collect::<Vec<_>>());
}

/// Jobs of 1, 2, 3 and 5 ranks that only finalize.
pub fn finalize_without_traffic(t: &Transport) {
    for n in [1, 2, 3, 5] {
        run_job(t, n, 64, |mut r| r.dev.finalize().unwrap());
    }
}
