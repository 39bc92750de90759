//! Runs the `pmi-hello` binary under MPICH's `mpiexec.hydra` (skipped if not installed).

use std::process::Command;

fn hydra() -> Option<&'static str> {
    let ok = Command::new("mpiexec.hydra")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Some("mpiexec.hydra")
    } else {
        eprintln!("NOTICE: mpiexec.hydra is not installed; Hydra interoperability test skipped");
        None
    }
}

fn hello_under_hydra(hydra: &str, mpi_pmi: Option<&str>, want_version: u32) {
    let mut cmd = Command::new(hydra);
    cmd.args(["-n", "2", env!("CARGO_BIN_EXE_pmi-hello")])
        .env_remove("PMI_FD")
        .env_remove("SLURM_MPI_TYPE")
        .env_remove("PMI2_SUN_PATH");
    match mpi_pmi {
        Some(v) => cmd.env("MPI_PMI", v),
        None => cmd.env_remove("MPI_PMI"),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (r, l) in lines.iter().enumerate() {
        assert!(
            l.starts_with(&format!("pmi-hello rank {r} of 2 kvsname ")),
            "{l}"
        );
        assert!(
            l.ends_with(&format!(" appnum 0 got v0,v1 pmi {want_version}")),
            "{l}"
        );
    }
}

#[test]
fn pmi_hello_under_hydra() {
    let Some(hydra) = hydra() else { return };
    hello_under_hydra(hydra, None, 1);
}

#[test]
fn pmi2_hello_under_hydra() {
    let Some(hydra) = hydra() else { return };
    hello_under_hydra(hydra, Some("2"), 2);
}

#[test]
fn auto_offers_pmi2_when_slurm_says_so_and_hydra_accepts() {
    let Some(hydra) = hydra() else { return };
    let out = Command::new(hydra)
        .args(["-n", "2", env!("CARGO_BIN_EXE_pmi-hello")])
        .env_remove("MPI_PMI")
        .env("SLURM_MPI_TYPE", "pmi2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout.matches(" pmi 2\n").count(), 2, "{stdout}");
}

#[test]
fn pmi_abort_under_hydra() {
    let Some(hydra) = hydra() else { return };
    let out = Command::new(hydra)
        .args(["-n", "2", env!("CARGO_BIN_EXE_pmi-hello"), "abort", "7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
}

#[test]
fn singleton_without_process_manager() {
    let out = Command::new(env!("CARGO_BIN_EXE_pmi-hello"))
        .env_remove("PMI_FD")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "pmi-hello rank 0 of 1 kvsname singleton appnum 0 got v0 pmi 0\n"
    );
}
