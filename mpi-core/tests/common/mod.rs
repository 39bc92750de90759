//! Runs an n-rank job as threads of this process, once over each real device: shared memory
//! (device-shm) and TCP (device-tcp), unless the settings name one.
#![allow(dead_code)]

use mpi_core::settings::{DeviceChoice, Settings};
use mpi_core::Mpi;
use rdma_api::thread_kvs::ThreadKvs;
use rdma_api::Bootstrap;
use std::sync::Arc;

/// Eager limit of the test settings (small, so that the rendezvous is exercised often).
pub const EAGER: usize = 1024;

pub fn settings() -> Settings {
    Settings {
        eager_limit: EAGER,
        ctrl_slots: 8,
        heap_size: 1 << 20,
        print: false,
        device: DeviceChoice::Auto,
        ..Settings::default()
    }
}

/// The devices a job of [`run`] uses: `Auto` means "each of shm and tcp in turn".
fn devices(s: &Settings) -> Vec<DeviceChoice> {
    match s.device {
        DeviceChoice::Auto => vec![DeviceChoice::Shm, DeviceChoice::Tcp],
        d => vec![d],
    }
}

/// Runs `f(rank's engine)` on `n` thread-ranks, then finalizes each; once per device of
/// [`devices`]. Panics propagate.
pub fn run<F>(n: usize, s: Settings, f: F)
where
    F: Fn(&mut Mpi) + Send + Sync + 'static,
{
    let f = Arc::new(f);
    for d in devices(&s) {
        let s = Settings {
            device: d,
            ..s.clone()
        };
        let f = f.clone();
        run_on(n, s, move |m: &mut Mpi| f(m), |_| None);
    }
}

/// Runs one job with the settings' device; `host(rank)` may override the hostname a rank
/// reports (to simulate several hosts).
pub fn run_on<F>(n: usize, s: Settings, f: F, host: fn(usize) -> Option<String>)
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
                let mut m = match host(k.rank()) {
                    Some(h) => Mpi::init_with_host(Box::new(k), s, &h),
                    None => Mpi::init_with(Box::new(k), s),
                }
                .expect("init");
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
