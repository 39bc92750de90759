//! Device selection: the composite device (shared memory within a "host", TCP across, with
//! hosts simulated by hostname overrides) and `MPI_DEVICE=shm` with a remote rank.

mod common;
use common::{pattern, run_on, settings};
use mpi_core::settings::{DeviceChoice, Settings};
use mpi_core::{Comm, Datatype, ErrorClass, Mpi};
use rdma_api::thread_kvs::ThreadKvs;
use rdma_api::Bootstrap;

const W: Comm = Comm::WORLD;
const B: Datatype = Datatype::Byte;

/// Ranks 0,1 on host "a", 2,3 on host "b".
fn two_hosts(rank: usize) -> Option<String> {
    Some(if rank < 2 { "a" } else { "b" }.to_string())
}

/// Every rank sends every other rank an eager and a rendezvous message (into a receive
/// buffer outside the heap: a registered region, whose key must be the one of the device
/// that reaches the sender), then an allreduce.
#[test]
fn composite_routes_per_peer() {
    let s = Settings {
        device: DeviceChoice::Auto,
        ..settings()
    };
    run_on(
        4,
        s,
        |m: &mut Mpi| {
            let me = m.rank();
            let n = m.size();
            for len in [10usize, 100_000] {
                let out = pattern(len, me as u8);
                let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; len]).collect();
                let mut reqs = Vec::new();
                for q in 0..n {
                    unsafe {
                        reqs.push(
                            m.irecv(bufs[q].as_mut_ptr(), len as i32, B, q as i32, 7, W)
                                .unwrap(),
                        );
                        reqs.push(
                            m.isend(out.as_ptr(), len as i32, B, q as i32, 7, W)
                                .unwrap(),
                        );
                    }
                }
                let mut st = vec![Default::default(); reqs.len()];
                m.waitall(&reqs, &mut st).unwrap();
                for (q, b) in bufs.iter().enumerate() {
                    assert_eq!(b, &pattern(len, q as u8), "rank {me} from {q}, {len} B");
                }
            }
            let x = [me as i64 + 1];
            let mut y = [0i64];
            unsafe {
                m.allreduce(
                    Some(x.as_ptr() as *const u8),
                    y.as_mut_ptr() as *mut u8,
                    1,
                    Datatype::Int64,
                    mpi_core::Op::Sum,
                    W,
                )
                .unwrap();
            }
            assert_eq!(y[0], 10);
        },
        two_hosts,
    );
}

/// `MPI_DEVICE=shm` with ranks on two hosts: every rank's init fails with a clear error.
#[test]
fn shm_only_with_a_remote_rank_fails_at_init() {
    let hs: Vec<_> = ThreadKvs::job(2)
        .into_iter()
        .map(|k| {
            std::thread::spawn(move || {
                let s = Settings {
                    device: DeviceChoice::Shm,
                    ..settings()
                };
                let host = two_hosts(k.rank() * 2).unwrap();
                match Mpi::init_with_host(Box::new(k), s, &host) {
                    Ok(_) => panic!("init succeeded"),
                    Err(e) => e,
                }
            })
        })
        .collect();
    for h in hs {
        let e = h.join().unwrap();
        assert_eq!(e.class, ErrorClass::Other);
        assert!(e.to_string().contains("MPI_DEVICE=shm"), "{e}");
    }
}
