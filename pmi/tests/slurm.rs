//! Runs `pmi-hello` under Slurm's `srun --mpi=pmi2`. Skipped (with a NOTICE) unless `srun`
//! is on PATH and a Slurm controller answers (`sinfo` exits 0).

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// Runs `cmd`, killing it after `secs`; `None` if it could not start or timed out.
fn run_with_deadline(cmd: &mut Command, secs: u64) -> Option<Output> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().ok()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().ok()
}

fn slurm() -> bool {
    if !on_path("srun") {
        eprintln!("NOTICE: srun is not on PATH; Slurm (srun --mpi=pmi2) test skipped");
        return false;
    }
    // Without a configuration sinfo may retry DNS lookups for a while: bound it.
    let answers =
        run_with_deadline(&mut Command::new("sinfo"), 10).is_some_and(|o| o.status.success());
    if !answers {
        eprintln!(
            "NOTICE: no Slurm controller answers (sinfo failed); srun --mpi=pmi2 test skipped"
        );
    }
    answers
}

/// `srun --mpi=pmi2 -O -n <n> pmi-hello <args>`, killed after two minutes.
fn srun(n: usize, args: &[&str], mpi_pmi: Option<&str>) -> Output {
    let mut cmd = Command::new("srun");
    cmd.args(["--mpi=pmi2", "-O", "-n", &n.to_string()])
        .arg(env!("CARGO_BIN_EXE_pmi-hello"))
        .args(args)
        .env_remove("PMI_FD")
        .env_remove("PMI2_SUN_PATH");
    match mpi_pmi {
        Some(v) => cmd.env("MPI_PMI", v),
        None => cmd.env_remove("MPI_PMI"),
    };
    run_with_deadline(&mut cmd, 120).expect("srun failed to start or took more than 120 s")
}

fn check_hello(n: usize, mpi_pmi: Option<&str>, version: u32) {
    let out = srun(n, &[], mpi_pmi);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), n, "{stdout}");
    let got: Vec<String> = (0..n).map(|r| format!("v{r}")).collect();
    for (r, l) in lines.iter().enumerate() {
        assert!(
            l.starts_with(&format!("pmi-hello rank {r} of {n} kvsname ")),
            "{l}"
        );
        assert!(
            l.ends_with(&format!(" got {} pmi {version}", got.join(","))),
            "{l}"
        );
    }
}

#[test]
fn srun_pmi2() {
    if !slurm() {
        return;
    }
    // Default rule: SLURM_MPI_TYPE=pmi2 → PMI-2.
    check_hello(2, None, 2);
    check_hello(4, None, 2);
    // Forced versions: Slurm's pmi2 server serves both.
    check_hello(2, Some("2"), 2);
    check_hello(2, Some("1"), 1);
    // Abort: Slurm kills the step; srun fails.
    let out = srun(2, &["abort", "7"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("abort(7)"), "{stderr}");
}
