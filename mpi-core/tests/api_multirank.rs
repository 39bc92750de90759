//! The Rust API across ranks: this test re-runs its own executable under the launcher
//! (`MPIRUN`, default `mpirun` from the workspace's target directory or PATH) with 3 ranks.
//! It is skipped, saying so, when no launcher is found.

use std::path::PathBuf;
use std::process::Command;

use mpi_core::api::*;

const CHILD: &str = "MPI_CORE_API_TEST_CHILD";
const NP: i32 = 3;

fn launcher() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIRUN") {
        return Some(PathBuf::from(p));
    }
    // <target>/<profile>/deps/api_multirank-HASH → <target>/<profile>/mpirun
    let exe = std::env::current_exe().ok()?;
    let cand = exe.parent()?.parent()?.join("mpirun");
    if cand.exists() {
        return Some(cand);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("mpirun"))
        .find(|p| p.exists())
}

#[test]
fn multirank() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let Some(mpirun) = launcher() else {
        eprintln!("api_multirank: SKIPPED (no launcher; set MPIRUN or build the launcher)");
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&mpirun)
        .args(["-n", &NP.to_string()])
        .arg(&exe)
        .args(["multirank", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the launcher");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        mpirun.display(),
        out.status
    );
    assert_eq!(
        stdout.matches("api_multirank: rank ok").count(),
        NP as usize,
        "{stdout}"
    );
}

fn child() {
    let mut universe = Universe::init().unwrap();
    let mut world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    assert_eq!(size, NP);
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;

    // Ring with blocking send-receive.
    let mut got = [0i32; 2];
    let st = world
        .send_receive_into(&[rank, 100 + rank], next, 1, &mut got, prev, 1)
        .unwrap();
    assert_eq!((got, st.source), ([prev, 100 + prev], prev));

    // Ring with scoped nonblocking operations, eager and rendezvous sizes.
    for n in [1usize, 1000, 300_000] {
        let out: Vec<u32> = (0..n as u32).map(|i| i ^ rank as u32).collect();
        let mut inp = vec![0u32; n];
        world
            .scope(|s| -> mpi_core::Result<()> {
                let r = s.immediate_receive_into(&mut inp, ANY_SOURCE, 2)?;
                let w = s.immediate_send(&out, next, 2)?;
                let st = s.wait_all(vec![w, r])?;
                assert_eq!(st[1].source, prev);
                Ok(())
            })
            .unwrap();
        assert!(inp
            .iter()
            .enumerate()
            .all(|(i, &v)| v == i as u32 ^ prev as u32));
    }

    // Rank 0 receives from everyone with ANY_SOURCE after a probe.
    if rank == 0 {
        let mut seen = vec![false; size as usize];
        for _ in 1..size {
            let st = world.probe(ANY_SOURCE, 3).unwrap();
            let mut v = vec![0i64; st.count_of::<i64>() as usize];
            world.receive_into(&mut v, st.source, 3).unwrap();
            assert_eq!(v, vec![st.source as i64; st.source as usize]);
            seen[st.source as usize] = true;
        }
        assert!(seen[1..].iter().all(|&s| s));
    } else {
        world.send(&vec![rank as i64; rank as usize], 0, 3).unwrap();
    }

    // Collectives.
    world.barrier().unwrap();
    let mut b = if rank == 1 { [7u8, 8, 9] } else { [0; 3] };
    world.broadcast_into(&mut b, 1).unwrap();
    assert_eq!(b, [7, 8, 9]);

    let mut r = [0i32; 3];
    world
        .all_reduce_into(&[rank, -rank, 1], &mut r, Op::Sum)
        .unwrap();
    let s: i32 = (0..size).sum();
    assert_eq!(r, [s, -s, size]);
    let mut r = [rank as f64 + 0.5];
    world.all_reduce_in_place(&mut r, Op::Max).unwrap();
    assert_eq!(r, [size as f64 - 0.5]);
    let mut r = [0u8];
    world.all_reduce_into(&[200u8], &mut r, Op::Sum).unwrap();
    assert_eq!(r, [(200 * size as u32) as u8], "wrapping sum");

    let mut out = [0i64; 2];
    let root = size - 1;
    let recv = if rank == root {
        Some(&mut out[..])
    } else {
        None
    };
    world
        .reduce_into(&[rank as i64 + 1, 2], recv, Op::Prod, root)
        .unwrap();
    if rank == root {
        let fact: i64 = (1..=size as i64).product();
        assert_eq!(out, [fact, 1 << size]);
    }
    let mut m = [0u64];
    world
        .all_reduce_into(&[10 + rank as u64], &mut m, Op::Min)
        .unwrap();
    assert_eq!(m, [10]);

    world.barrier().unwrap();
    drop(world);
    println!("api_multirank: rank ok");
    universe.finalize().unwrap();
}
