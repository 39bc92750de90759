//! End-to-end tests of the first slice: C programs built with our `mpicc`, launched with our
//! `mpirun` (and with MPICH's `mpiexec.hydra`, and alone), checking data, order, status
//! fields and exit codes. The programs are in `tests/c/` and `examples/`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tests::{alive, compile, field, jobid_of, leftover_segments, mpirun, scratch, Job, DEVICES};

/// Eager limits the protocol tests run with: a small one (many messages take the REQ/RSP
/// path) and the default.
const EAGER_LIMITS: [&str; 2] = ["1024", "32768"];

fn build(source: &str, name: &str) -> PathBuf {
    compile(source, &scratch(name), name)
}

#[test]
fn jacobi_same_result_on_1_to_4_ranks() {
    let prog = build("examples/jacobi.c", "jacobi");
    let run = |n: usize| {
        let out = Job::mpirun(n, &prog, &["64", "1e-4", "5000"]).run();
        out.assert_success(&format!("jacobi on {n} ranks"));
        let iters: u64 = field(&out.stdout, "iterations").unwrap().parse().unwrap();
        let sum: f64 = field(&out.stdout, "checksum").unwrap().parse().unwrap();
        let res: f64 = field(&out.stdout, "residual").unwrap().parse().unwrap();
        (iters, sum, res)
    };
    let (i1, s1, r1) = run(1);
    assert!(i1 > 10 && i1 < 5000, "1 rank: {i1} iterations");
    assert!(r1 < 1e-4, "1 rank: residual {r1}");
    for n in 2..=4 {
        let (i, s, r) = run(n);
        // The update of every point is the same arithmetic whatever the decomposition and
        // the residual is a max-norm (exact), so the iteration count and the residual must
        // be identical; the checksum is a sum reduced in another order: 1e-12 relative.
        assert_eq!(i, i1, "{n} ranks: iterations");
        assert_eq!(r, r1, "{n} ranks: residual");
        assert!(
            ((s - s1) / s1).abs() < 1e-12,
            "{n} ranks: checksum {s} vs {s1}"
        );
    }
}

/// The start-up benchmark's program (MPI_Init + MPI_Finalize only) on 2 ranks under
/// mpirun, on every device: it completes and rank 0 prints once (no timing assertion; the
/// time is measured by `benchmarks/run --only hello`).
#[test]
fn hello_world_two_ranks_under_mpirun() {
    let prog = build("benchmarks/c/hello.c", "hello");
    for d in DEVICES {
        for _ in 0..3 {
            let out = Job::mpirun(2, &prog, &[]).env("MPI_DEVICE", d).run();
            out.assert_success(&format!("hello, device {d}"));
            assert_eq!(
                out.stdout.matches("hello 2").count(),
                1,
                "device {d}: {}",
                out.stdout
            );
        }
    }
}

#[test]
fn every_size_class_arrives_intact() {
    let prog = build("tests/c/sizes.c", "sizes");
    for d in DEVICES {
        for e in EAGER_LIMITS {
            let out = Job::mpirun(2, &prog, &[])
                .env("MPI_EAGER_LIMIT", e)
                .env("MPI_DEVICE", d)
                .run();
            out.assert_success(&format!("sizes, device {d}, eager limit {e}"));
            assert!(out.stdout.contains("sizes ok"), "{}", out.stdout);
        }
    }
}

#[test]
fn mixed_burst_is_received_in_order() {
    let prog = build("tests/c/order.c", "order");
    for d in DEVICES {
        for e in EAGER_LIMITS {
            let out = Job::mpirun(2, &prog, &[])
                .env("MPI_EAGER_LIMIT", e)
                .env("MPI_DEVICE", d)
                .run();
            out.assert_success(&format!("order, device {d}, eager limit {e}"));
            assert!(out.stdout.contains("order ok"), "{}", out.stdout);
        }
    }
}

#[test]
fn flow_control_100000_unexpected_short_messages() {
    let prog = build("tests/c/flood.c", "flood");
    for d in DEVICES {
        let out = Job::mpirun(2, &prog, &[]).env("MPI_DEVICE", d).run();
        out.assert_success(&format!("flood, device {d}"));
        assert!(out.stdout.contains("flood ok: 100000"), "{}", out.stdout);
    }
    let out = Job::mpirun(2, &prog, &[]).run();
    out.assert_success("flood");
    assert!(out.stdout.contains("flood ok: 100000"), "{}", out.stdout);
}

#[test]
fn any_source_any_tag_and_probe() {
    let prog = build("tests/c/anysrc.c", "anysrc");
    for d in DEVICES {
        for e in EAGER_LIMITS {
            let out = Job::mpirun(4, &prog, &[])
                .env("MPI_EAGER_LIMIT", e)
                .env("MPI_DEVICE", d)
                .run();
            out.assert_success(&format!("anysrc, device {d}, eager limit {e}"));
            assert!(out.stdout.contains("anysrc ok"), "{}", out.stdout);
        }
    }
}

#[test]
fn truncation_is_mpi_err_truncate() {
    let prog = build("tests/c/truncate.c", "truncate");
    let out = Job::mpirun(2, &prog, &[]).run();
    out.assert_success("truncate");
    assert!(out.stdout.contains("truncate ok"), "{}", out.stdout);
}

#[test]
fn bad_input_aborts_the_job_with_a_message() {
    let prog = build("tests/c/badarg.c", "badarg");
    // (case, function named, words of which one must appear in the message)
    let cases: [(&str, &str, &[&str]); 7] = [
        ("rank", "MPI_Send", &["rank"]),
        ("count", "MPI_Send", &["count"]),
        ("tag", "MPI_Send", &["tag"]),
        ("comm", "MPI_Send", &["communicator", "comm"]),
        ("type", "MPI_Send", &["datatype", "type"]),
        ("recvrank", "MPI_Recv", &["rank", "source"]),
        ("root", "MPI_Bcast", &["root"]),
    ];
    for (case, func, words) in cases {
        let out = Job::mpirun(2, &prog, &[case])
            .deadline(Duration::from_secs(60))
            .run();
        assert!(
            !out.status.success(),
            "{case}: the job must fail\n{}{}",
            out.stdout,
            out.stderr
        );
        assert!(
            !out.stdout.contains("erroneous call returned"),
            "{case}: the call returned under MPI_ERRORS_ARE_FATAL"
        );
        assert!(
            out.stderr.contains(func),
            "{case}: stderr does not name {func}:\n{}",
            out.stderr
        );
        let lower = out.stderr.to_lowercase();
        assert!(
            words.iter().any(|w| lower.contains(w)),
            "{case}: stderr does not say what was wrong ({words:?}):\n{}",
            out.stderr
        );
        // No segfault: the failing rank aborts (non-zero code), it is not killed by SIGSEGV.
        assert!(
            !out.stderr.contains("SIGSEGV"),
            "{case}: segfault\n{}",
            out.stderr
        );
    }
}

#[test]
fn killed_rank_stops_the_job_and_leaves_nothing() {
    let prog = build("tests/c/killme.c", "killme");
    let dir = scratch("killme-pids");
    let dir_s = dir.to_str().unwrap().to_string();
    let job = std::thread::spawn({
        let prog = prog.clone();
        move || {
            Job::mpirun(4, &prog, &[&dir_s])
                .deadline(Duration::from_secs(100))
                .run()
        }
    });
    // Wait (bounded) for every rank to have written its pid.
    let pid_of = |r: usize| -> Option<i32> {
        std::fs::read_to_string(dir.join(format!("{r}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let mut pids = Vec::new();
    for _ in 0..3000 {
        pids = (0..4).filter_map(pid_of).collect();
        if pids.len() == 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(pids.len(), 4, "ranks did not start");
    let jobid = jobid_of(pids[0]).expect("MPI_JOBID of rank 0");
    let victim = pids[2];
    let killed_at = std::time::Instant::now();
    Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap();
    let out = job.join().unwrap();
    let took = killed_at.elapsed();
    assert!(!out.status.success(), "mpirun must fail: {:?}", out.status);
    assert!(
        took < Duration::from_secs(20),
        "mpirun took {took:?} to notice the dead rank"
    );
    assert!(
        out.stderr.contains("rank 2"),
        "mpirun does not name rank 2:\n{}",
        out.stderr
    );
    for p in pids {
        assert!(!alive(p), "process {p} left behind");
    }
    let left = leftover_segments(&jobid);
    assert!(left.is_empty(), "segments left in /dev/shm: {left:?}");
}

/// A rank SIGKILLed while its shared-memory segment still has a name (as one killed during
/// MPI_Init would leave it; simulated by a shell rank that creates the name itself): mpirun
/// removes it when the job ends.
#[test]
fn sigkilled_rank_leaves_no_segment() {
    let out = Job::new({
        let mut c = Command::new(mpirun());
        c.args([
            "-n",
            "2",
            "sh",
            "-c",
            ": > /dev/shm/mpirs-$MPI_JOBID-$PMI_RANK; echo $MPI_JOBID; kill -KILL $$",
        ]);
        c
    })
    .deadline(Duration::from_secs(60))
    .run();
    assert!(!out.status.success(), "{:?}", out.status);
    let jobid = out
        .stdout
        .lines()
        .next()
        .expect("a rank printed MPI_JOBID")
        .trim();
    assert!(!jobid.is_empty());
    let left = leftover_segments(jobid);
    assert!(left.is_empty(), "segments left in /dev/shm: {left:?}");
}

/// SIGINT to mpirun while the ranks hold named segments: mpirun stops the ranks, removes
/// the segments, and no process stays behind.
#[test]
fn sigint_to_mpirun_leaves_no_segment_and_no_process() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(mpirun())
        .args([
            "-n",
            "2",
            "sh",
            "-c",
            ": > /dev/shm/mpirs-$MPI_JOBID-$PMI_RANK; echo $MPI_JOBID $$; exec sleep 100",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn mpirun");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ranks = Vec::new();
    let mut jobid = String::new();
    for _ in 0..2 {
        let l = lines.next().expect("rank output").expect("read");
        let mut it = l.split_whitespace();
        jobid = it.next().unwrap().to_string();
        ranks.push(it.next().unwrap().parse::<i32>().unwrap());
    }
    assert_eq!(leftover_segments(&jobid).len(), 2);
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("mpirun did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    for p in ranks {
        assert!(!alive(p), "rank process {p} left behind");
    }
    let left = leftover_segments(&jobid);
    assert!(left.is_empty(), "segments left in /dev/shm: {left:?}");
}

#[test]
fn eight_ranks_on_two_cores_barrier_allreduce_loop() {
    let prog = build("tests/c/loop.c", "loop");
    let out = Job::mpirun(8, &prog, &["300"]).run();
    out.assert_success("loop with 8 ranks");
    assert!(out.stdout.contains("loop ok: 8 ranks"), "{}", out.stdout);
}

/// Programs built with Debian's `mpicc.mpich` run on our library through LD_LIBRARY_PATH.
#[test]
fn mpich_built_program_runs_on_our_library() {
    if Command::new("mpicc.mpich").arg("-show").output().is_err() {
        eprintln!("NOTICE: mpicc.mpich not installed (apt-get install libmpich-dev); skipped");
        return;
    }
    let dir = scratch("mpich-built");
    for (src, name, n, expect) in [
        ("tests/c/sizes.c", "sizes", 2, "sizes ok"),
        ("tests/c/anysrc.c", "anysrc", 4, "anysrc ok"),
        ("examples/jacobi.c", "jacobi", 3, "iterations"),
    ] {
        let exe = dir.join(name);
        let st = Command::new("mpicc.mpich")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(tests::repo_root().join(src))
            .status()
            .unwrap();
        assert!(st.success(), "mpicc.mpich {src}");
        let lib = tests::prefix().join("lib");
        let out = Job::mpirun(n, &exe, &["48"])
            .env("LD_LIBRARY_PATH", lib.to_str().unwrap())
            .run();
        out.assert_success(&format!("MPICH-built {name}"));
        assert!(out.stdout.contains(expect), "{}", out.stdout);
        // It really ran on our library: ldd resolves libmpich.so.12 into our prefix.
        let ldd = Command::new("ldd")
            .arg(&exe)
            .env("LD_LIBRARY_PATH", lib.to_str().unwrap())
            .output()
            .unwrap();
        let ldd = String::from_utf8_lossy(&ldd.stdout);
        assert!(
            ldd.lines()
                .any(|l| l.contains("libmpich.so.12") && l.contains(lib.to_str().unwrap())),
            "libmpich.so.12 not resolved to our library:\n{ldd}"
        );
    }
}

/// Our ping-pong runs under MPICH's process manager (PMI-1 over PMI_FD) and alone.
#[test]
fn pingpong_under_hydra_and_as_singleton() {
    let prog = build("examples/pingpong.c", "pingpong");
    let singleton = Job::new({
        let mut c = Command::new(&prog);
        c.arg("65536");
        c
    })
    .run();
    singleton.assert_success("pingpong as a singleton");
    assert!(singleton.stdout.contains("1 ranks"), "{}", singleton.stdout);
    assert!(singleton.stdout.contains("65536"), "{}", singleton.stdout);

    if Command::new("mpiexec.hydra")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("NOTICE: mpiexec.hydra not installed (apt-get install mpich); skipped");
        return;
    }
    let out = Job::new({
        let mut c = Command::new("mpiexec.hydra");
        c.args(["-n", "2"]).arg(&prog).arg("65536");
        c
    })
    .run();
    out.assert_success("pingpong under mpiexec.hydra");
    assert!(out.stdout.contains("2 ranks"), "{}", out.stdout);
    assert!(out.stdout.contains("65536"), "{}", out.stdout);
}

/// The Rust ping-pong on the Rust API, under our mpirun.
#[test]
fn rust_pingpong_runs() {
    tests::prefix();
    let exe = tests::release_bin("pingpong-rs");
    let out = Job::mpirun(2, &exe, &["65536"]).run();
    out.assert_success("pingpong-rs");
    assert!(out.stdout.contains("65536"), "{}", out.stdout);
}
