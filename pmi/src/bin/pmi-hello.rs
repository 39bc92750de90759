//! `pmi-hello`: a tiny PMI client to check a process manager (our `mpirun`, Hydra, srun);
//! the PMI version is chosen by [`Boot::from_env`] (`MPI_PMI=1|2` forces one).
//!
//! Every rank puts `hello_<rank>=v<rank>_<pid>;%;end` (checking that `;` and `%` come back
//! intact), enters the barrier, reads every rank's
//! key, enters a second barrier and prints one line
//! `pmi-hello rank R of N kvsname K appnum A got v0,v1,… pmi V` (V: the PMI version, 0 for
//! a singleton) then finalizes.
//! With the argument `abort CODE` rank `size-1` calls PMI abort with that code after the
//! first barrier (the other ranks then wait in the second barrier until they are killed).
//! Started without a process manager it runs as a singleton.

use pmi::Boot;
use rdma_api::Bootstrap;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let abort_code: Option<i32> = match args.first().map(String::as_str) {
        Some("abort") => Some(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1)),
        _ => None,
    };
    let mut boot = match Boot::from_env() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("pmi-hello: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&mut boot, abort_code) {
        eprintln!("pmi-hello rank {}: {e}", boot.rank());
        std::process::exit(1);
    }
}

fn run(boot: &mut Boot, abort_code: Option<i32>) -> rdma_api::Result<()> {
    let (rank, size) = (boot.rank(), boot.size());
    let (kvsname, appnum) = match boot {
        Boot::Pmi(c) => (c.kvsname().to_string(), c.appnum()?),
        Boot::Pmi2(c) => (c.jobid().to_string(), c.appnum()),
        Boot::Singleton(_) => ("singleton".to_string(), 0),
    };
    boot.put(
        &format!("hello_{rank}"),
        &format!("v{rank}_{};%;end", std::process::id()),
    )?;
    boot.barrier()?;
    if let Some(code) = abort_code {
        if rank == size - 1 {
            boot.abort(code, "pmi-hello was asked to abort")?;
            std::process::exit(code);
        }
    }
    let mut got = Vec::with_capacity(size);
    for r in 0..size {
        let v = boot.get(&format!("hello_{r}"))?;
        if !v.ends_with(";%;end") {
            return Err(rdma_api::DeviceError::Bootstrap(format!(
                "value of hello_{r} came back altered: {v:?}"
            )));
        }
        // Keep only the "v<rank>" part so that the output does not depend on pids.
        got.push(v.split('_').next().unwrap_or("").to_string());
    }
    boot.barrier()?;
    let version = match boot.version() {
        Some(pmi::PmiVersion::One) => 1,
        Some(pmi::PmiVersion::Two) => 2,
        None => 0,
    };
    println!(
        "pmi-hello rank {rank} of {size} kvsname {kvsname} appnum {appnum} got {} pmi {version}",
        got.join(",")
    );
    boot.finalize()
}
