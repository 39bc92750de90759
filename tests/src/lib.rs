//! Helpers for the end-to-end tests: they build the install prefix once (`scripts/build.sh`),
//! compile C programs with the real `mpicc` and run them with the real `mpirun`, as users do.
//!
//! * [`prefix`] — the install prefix (`target/mpi`, or `$MPI_TEST_PREFIX` if set: then the
//!   build step is skipped).
//! * [`compile`] — `mpicc -O2 -o <tmp>/<name> <file>`; C test programs live in `tests/c/`,
//!   the examples in `examples/`.
//! * [`Job`] — runs a command with a deadline; on expiry the whole process group is killed and
//!   the test fails with what the job printed (a hang is a failure, never a stuck CI).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The install prefix with `bin/mpicc`, `bin/mpirun`, `lib/libmpi.so`, `include/mpi.h`.
/// Built once per test process with `scripts/build.sh` unless `MPI_TEST_PREFIX` is set.
pub fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        if let Ok(p) = std::env::var("MPI_TEST_PREFIX") {
            return PathBuf::from(p);
        }
        let root = repo_root();
        let out = Command::new("sh")
            .arg(root.join("scripts/build.sh"))
            .env("CARGO_BUILD_QUIET", "1")
            .output()
            .expect("run scripts/build.sh");
        assert!(
            out.status.success(),
            "scripts/build.sh failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("build.sh prints the prefix")
            .trim()
            .to_string();
        PathBuf::from(p)
    })
}

/// A fresh directory for this test's binaries and files (under the target directory, so it
/// is cleaned with it).
pub fn scratch(name: &str) -> PathBuf {
    let dir = repo_root()
        .join("target/e2e")
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Compiles `source` (relative to the repository root) with our `mpicc -O2` into `dir/name`.
pub fn compile(source: &str, dir: &Path, name: &str) -> PathBuf {
    let out_path = dir.join(name);
    let out = Command::new(prefix().join("bin/mpicc"))
        .args(["-O2", "-Wall", "-o"])
        .arg(&out_path)
        .arg(repo_root().join(source))
        .output()
        .expect("run mpicc");
    assert!(
        out.status.success(),
        "mpicc {source} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out_path
}

/// Path of our `mpirun`.
pub fn mpirun() -> PathBuf {
    prefix().join("bin/mpirun")
}

/// What a finished job left.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status of the launched command.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// Wall time.
    pub elapsed: Duration,
}

impl Outcome {
    /// Panics with the job's output unless it exited 0.
    pub fn assert_success(&self, what: &str) -> &Self {
        assert!(
            self.status.success(),
            "{what}: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// A command run with a deadline in its own process group.
pub struct Job {
    cmd: Command,
    deadline: Duration,
}

impl Job {
    /// `mpirun -n <n> <prog> <args>`; with `MPI_DEVICE` = `$MPI_TEST_DEVICE` if that is set
    /// (to run a whole suite on one device), else the library's default (auto).
    pub fn mpirun(n: usize, prog: &Path, args: &[&str]) -> Job {
        let mut cmd = Command::new(mpirun());
        cmd.arg("-n").arg(n.to_string()).arg(prog).args(args);
        if let Ok(d) = std::env::var("MPI_TEST_DEVICE") {
            cmd.env("MPI_DEVICE", d);
        }
        Job::new(cmd)
    }

    /// Any command.
    pub fn new(cmd: Command) -> Job {
        Job {
            cmd,
            deadline: Duration::from_secs(300),
        }
    }

    /// Sets an environment variable of the job.
    pub fn env(mut self, k: &str, v: &str) -> Job {
        self.cmd.env(k, v);
        self
    }

    /// Sets the deadline after which the job is killed and the test fails (default 300 s,
    /// far above any expected run time: tests check correctness, not speed).
    pub fn deadline(mut self, d: Duration) -> Job {
        self.deadline = d;
        self
    }

    /// Runs the job to completion; panics if the deadline passes.
    pub fn run(self) -> Outcome {
        let deadline = self.deadline;
        let (out, timed_out) = self.run_inner(deadline);
        assert!(
            !timed_out,
            "job killed after {deadline:?} (hang)\n--- stdout\n{}\n--- stderr\n{}",
            out.stdout, out.stderr
        );
        out
    }

    fn run_inner(mut self, deadline: Duration) -> (Outcome, bool) {
        self.cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let start = Instant::now();
        let mut child = self.cmd.spawn().expect("spawn job");
        let pgid = child.id() as i32;
        let mut so = child.stdout.take().unwrap();
        let mut se = child.stderr.take().unwrap();
        let t_out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = so.read_to_string(&mut s);
            s
        });
        let t_err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = se.read_to_string(&mut s);
            s
        });
        let mut timed_out = false;
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait job") {
                break st;
            }
            if start.elapsed() > deadline {
                timed_out = true;
                kill_group(pgid);
                break child.wait().expect("wait killed job");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed = start.elapsed();
        // Whatever the job left in its group (it should be nothing) goes too.
        kill_group(pgid);
        let stdout = t_out.join().unwrap_or_default();
        let stderr = t_err.join().unwrap_or_default();
        (
            Outcome {
                status,
                stdout,
                stderr,
                elapsed,
            },
            timed_out,
        )
    }
}

fn kill_group(pgid: i32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// Whether process `pid` still exists (zombies count as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            // The state follows the parenthesised command name.
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Extracts `key value` from the job's output (e.g. `iterations 2176`).
pub fn field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()).flatten()
    })
}

/// A binary of the workspace's release build (built by `scripts/build.sh`), e.g.
/// `pingpong-rs`. Honours `CARGO_TARGET_DIR`.
pub fn release_bin(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| {
            if p.is_absolute() {
                p
            } else {
                repo_root().join(p)
            }
        })
        .unwrap_or_else(|| repo_root().join("target"));
    target.join("release").join(name)
}

/// The values of `MPI_DEVICE` the protocol tests loop over.
pub const DEVICES: [&str; 3] = ["shm", "tcp", "auto"];

/// Names in /dev/shm of the shared-memory segments of the job with id `jobid`
/// (`mpirs-<MPI_JOBID>-<rank>`).
pub fn leftover_segments(jobid: &str) -> Vec<String> {
    let prefix = format!("mpirs-{jobid}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// `MPI_JOBID` from the environment of process `pid` (a rank started by our mpirun).
pub fn jobid_of(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|kv| {
        std::str::from_utf8(kv)
            .ok()?
            .strip_prefix("MPI_JOBID=")
            .map(str::to_string)
    })
}
