//! Runs an n-rank job as threads of this process over the real TCP device.
#![allow(dead_code)]

use mpi_core::settings::Settings;
use mpi_core::Mpi;
use rdma_api::thread_kvs::ThreadKvs;
use std::sync::Arc;

/// Eager limit of the test settings (small, so that the rendezvous is exercised often).
pub const EAGER: usize = 1024;

pub fn settings() -> Settings {
    Settings {
        eager_limit: EAGER,
        ctrl_slots: 8,
        heap_size: 1 << 20,
        print: false,
    }
}

/// Runs `f(rank's engine)` on `n` thread-ranks, then finalizes each. Panics propagate.
pub fn run<F>(n: usize, s: Settings, f: F)
where
    F: Fn(&mut Mpi) + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let hs: Vec<_> = ThreadKvs::job(n)
        .into_iter()
        .map(|k| {
            let f = f.clone();
            let s = s.clone();
            std::thread::spawn(move || {
                let mut m = Mpi::init_with(Box::new(k), s).expect("init");
                f(&mut m);
                m.finalize().expect("finalize");
            })
        })
        .collect();
    let mut err = None;
    for h in hs {
        if let Err(e) = h.join() {
            err = Some(e);
        }
    }
    if let Some(e) = err {
        std::panic::resume_unwind(e);
    }
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
