//! Runs the real `mpirun` binary on small shell scripts, C programs (compiled with `cc`)
//! and, when it was built, the `pmi-hello` binary of the pmi crate.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const MPIRUN: &str = env!("CARGO_BIN_EXE_mpirun");

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> TempDir {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "launcher-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

fn mpirun(args: &[&str]) -> Command {
    let mut c = Command::new(MPIRUN);
    c.args(args).env_remove("PMI_FD");
    c
}

fn out(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Compiles a C source into a temporary directory (kept with the result); None (with a
/// notice) if `cc` fails.
fn compile(name: &str, src: &str) -> Option<(TempDir, PathBuf)> {
    let dir = tempdir();
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, src).unwrap();
    let ok = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ok {
        Some((dir, exe))
    } else {
        eprintln!("NOTICE: cc is not available; test skipped");
        None
    }
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

/// Waits (up to 20 s) for `n` pid files `pid.<rank>` in `dir`.
fn read_pids(dir: &Path, n: usize) -> Vec<i32> {
    let t = Instant::now();
    loop {
        let pids: Vec<i32> = (0..n)
            .filter_map(|r| std::fs::read_to_string(dir.join(format!("pid.{r}"))).ok())
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        if pids.len() == n {
            return pids;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "ranks did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("mpirun did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_all_dead(pids: &[i32]) {
    let t = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "processes left behind: {:?}",
            pids.iter().filter(|&&p| alive(p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell rank that records its pid (the pid `sleep` will keep) and then sleeps.
fn sleeper_script(dir: &Path, extra: &str) -> String {
    format!(
        "echo $$ > {}/pid.$PMI_RANK.tmp && mv {0}/pid.$PMI_RANK.tmp {0}/pid.$PMI_RANK; {extra} exec sleep 60",
        dir.display()
    )
}

#[test]
fn version_and_help() {
    let o = mpirun(&["--version"]).output().unwrap();
    assert!(o.status.success());
    assert!(out(&o).0.contains(env!("CARGO_PKG_VERSION")));
    let o = mpirun(&["-h"]).output().unwrap();
    assert!(o.status.success());
    assert!(out(&o).0.contains("-np"));
    let o = mpirun(&["--bogus", "true"]).output().unwrap();
    assert!(!o.status.success());
    let o = mpirun(&[]).output().unwrap();
    assert!(!o.status.success());
}

#[test]
fn exit_codes() {
    let o = mpirun(&["-n", "3", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let o = mpirun(&["false"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let o = mpirun(&[
        "-np",
        "3",
        "sh",
        "-c",
        "[ $PMI_RANK = 2 ] && exit 5; exit 0",
    ])
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(5), "{:?}", out(&o));
    let o = mpirun(&["-n", "2", "/nonexistent/prog"]).output().unwrap();
    assert_eq!(o.status.code(), Some(127));
    assert!(out(&o).1.contains("/nonexistent/prog"));
}

#[test]
fn failing_rank_stops_the_others() {
    let dir = tempdir();
    // Rank 1 fails once every rank has started.
    let wait_all = format!(
        "[ $PMI_RANK = 1 ] && while [ ! -e {0}/pid.0 ] || [ ! -e {0}/pid.2 ]; do sleep 0.02; done && exit 3;",
        dir.display()
    );
    let script = sleeper_script(&dir, &wait_all);
    let t = Instant::now();
    let o = mpirun(&["-n", "3", "sh", "-c", &script]).output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(20));
    let (_, err) = out(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("rank 1") && err.contains("code 3"), "{err}");
    assert_all_dead(&read_pids(&dir, 3));
}

#[test]
fn early_successful_exit_is_normal() {
    let o = mpirun(&[
        "-n",
        "3",
        "sh",
        "-c",
        "[ $PMI_RANK = 0 ] && exit 0; sleep 0.3; echo done $PMI_RANK",
    ])
    .output()
    .unwrap();
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["done 1", "done 2"]);
}

#[test]
fn program_arguments_and_environment() {
    let o = mpirun(&[
        "-n",
        "2",
        "-genv",
        "GENV_X",
        "gx",
        "sh",
        "-c",
        "echo \"$PMI_SIZE $MPI_LOCAL_SIZE $FROM_PARENT $GENV_X $*\"",
        "sh",
        "-n",
        "3",
        "--help",
    ])
    .env("FROM_PARENT", "yes")
    .output()
    .unwrap();
    assert!(o.status.success());
    assert_eq!(out(&o).0, "2 2 yes gx -n 3 --help\n".repeat(2));
    // PATH search and ranks' local rank.
    let o = mpirun(&["-n", "2", "-l", "sh", "-c", "echo $MPI_LOCAL_RANK"])
        .output()
        .unwrap();
    let mut lines: Vec<String> = out(&o).0.lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["[0] 0", "[1] 1"]);
}

#[test]
fn final_line_without_newline() {
    let o = mpirun(&["printf", "abc"]).output().unwrap();
    assert_eq!(out(&o).0, "abc");
    let o = mpirun(&["-n", "2", "-l", "printf", "x\\ny"])
        .output()
        .unwrap();
    let mut lines: Vec<String> = out(&o).0.lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["[0] x", "[0] y", "[1] x", "[1] y"]);
}

const LINES_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    int r = atoi(getenv("PMI_RANK"));
    /* Full buffering in odd-sized chunks: writes end in the middle of lines. */
    static char obuf[777], ebuf[333];
    setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    setvbuf(stderr, ebuf, _IOFBF, sizeof ebuf);
    for (int i = 0; i < 3000; i++) {
        printf("out rank %d line %d ", r, i);
        for (int j = 0; j < i % 97; j++) putchar('a' + j % 26);
        printf(" end\n");
        if (i % 3 == 0) fprintf(stderr, "err rank %d line %d end\n", r, i);
    }
    return 0;
}
"#;

#[test]
fn output_lines_are_never_broken() {
    let Some((_dir, exe)) = compile("lines", LINES_C) else {
        return;
    };
    let o = mpirun(&["-n", "4", exe.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let (stdout, stderr) = out(&o);
    let mut next = [0usize; 4];
    for line in stdout.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        assert_eq!(w[0], "out", "broken line {line:?}");
        let r: usize = w[2].parse().unwrap();
        let i: usize = w[4].parse().unwrap();
        assert_eq!(i, next[r], "line {line:?} out of order");
        next[r] += 1;
        let pad: String = (0..i % 97)
            .map(|j| (b'a' + (j % 26) as u8) as char)
            .collect();
        assert_eq!(line, format!("out rank {r} line {i} {pad} end"));
    }
    assert_eq!(next, [3000; 4]);
    let mut errs = [0usize; 4];
    for line in stderr.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        assert!(
            w.len() == 6 && w[0] == "err" && w[5] == "end",
            "broken line {line:?}"
        );
        errs[w[2].parse::<usize>().unwrap()] += 1;
    }
    assert_eq!(errs, [1000; 4]);
}

#[test]
fn rank_killed_by_sigkill() {
    let dir = tempdir();
    let script = sleeper_script(&dir, "[ $PMI_RANK = 2 ] && sleep 0.3 && kill -9 $$;");
    let mut child = mpirun(&["-n", "4", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = read_pids(&dir, 4);
    let status = wait_timeout(&mut child, Duration::from_secs(15));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + 9), "{err}");
    assert!(err.contains("rank 2") && err.contains("SIGKILL"), "{err}");
    assert_all_dead(&pids);
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, sig) };
}

#[test]
fn sigint_stops_everything() {
    let dir = tempdir();
    // The ranks ignore SIGTERM: mpirun must escalate to SIGKILL.
    let script = sleeper_script(&dir, "trap '' TERM;");
    let mut child = mpirun(&["-n", "3", "sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = read_pids(&dir, 3);
    signal(child.id(), libc::SIGINT);
    let status = wait_timeout(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(130));
    assert_all_dead(&pids);
}

#[test]
fn sigterm_stops_everything() {
    let dir = tempdir();
    let script = sleeper_script(&dir, "");
    let mut child = mpirun(&["-n", "2", "sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = read_pids(&dir, 2);
    signal(child.id(), libc::SIGTERM);
    let status = wait_timeout(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(143));
    assert_all_dead(&pids);
}

#[test]
fn killed_mpirun_leaves_nothing_behind() {
    let dir = tempdir();
    let script = sleeper_script(&dir, "");
    let mut child = mpirun(&["-n", "3", "sh", "-c", &script]).spawn().unwrap();
    let pids = read_pids(&dir, 3);
    child.kill().unwrap(); // SIGKILL: no chance to clean up, PR_SET_PDEATHSIG does it
    child.wait().unwrap();
    assert_all_dead(&pids);
}

const PMI_C: &str = r#"
/* A PMI-1 client written independently of the pmi crate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int fd; static char ibuf[8192]; static int ilen;
static void sendl(const char *s) { if (write(fd, s, strlen(s)) < 0) exit(4); }
static char line[8192];
static void recvl(void) {
    for (;;) {
        char *nl = memchr(ibuf, '\n', ilen);
        if (nl) { int n = nl - ibuf + 1; memcpy(line, ibuf, n); line[n] = 0;
                  memmove(ibuf, ibuf + n, ilen - n); ilen -= n; return; }
        int r = read(fd, ibuf + ilen, sizeof ibuf - ilen);
        if (r <= 0) { fprintf(stderr, "pmi eof\n"); exit(3); }
        ilen += r;
    }
}
/* Value of `key` in the last line, by key. */
static const char *field(const char *key) {
    static char v[4096]; char tmp[8192]; strcpy(tmp, line);
    for (char *t = strtok(tmp, " \n"); t; t = strtok(NULL, " \n")) {
        char *eq = strchr(t, '='); if (!eq) continue; *eq = 0;
        if (!strcmp(t, key)) { strcpy(v, eq + 1); return v; }
    }
    return NULL;
}
static void expect(const char *cmd) {
    recvl(); const char *c = field("cmd");
    if (!c || strcmp(c, cmd)) { fprintf(stderr, "bad reply %s", line); exit(5); }
    const char *rc = field("rc");
    if (rc && atoi(rc) != 0) { fprintf(stderr, "bad rc %s", line); exit(5); }
}
int main(int argc, char **argv) {
    fd = atoi(getenv("PMI_FD")); int rank = atoi(getenv("PMI_RANK")), size = atoi(getenv("PMI_SIZE"));
    char kvs[256], msg[8192];
    sendl("cmd=init pmi_version=1 pmi_subversion=1\n"); expect("response_to_init");
    sendl("cmd=get_maxes\n"); expect("maxes");
    sendl("cmd=get_my_kvsname\n"); expect("my_kvsname"); strcpy(kvs, field("kvsname"));
    snprintf(msg, sizeof msg, "cmd=put kvsname=%s key=c_%d value=w%d\n", kvs, rank, rank * rank);
    sendl(msg); expect("put_result");
    if (argc > 1 && !strcmp(argv[1], "exit0") && rank == 0) return 0; /* no finalize */
    sendl("cmd=barrier_in\n"); expect("barrier_out");
    if (argc > 2 && !strcmp(argv[1], "abort") && rank == size - 1) {
        snprintf(msg, sizeof msg, "cmd=abort exitcode=%d\n", atoi(argv[2]));
        sendl(msg); exit(atoi(argv[2]));
    }
    printf("c-pmi rank %d of %d got", rank, size);
    for (int r = 0; r < size; r++) {
        snprintf(msg, sizeof msg, "cmd=get kvsname=%s key=c_%d\n", kvs, r);
        sendl(msg); expect("get_result"); printf(" %s", field("value"));
    }
    printf("\n"); fflush(stdout);
    sendl("cmd=barrier_in\n"); expect("barrier_out");
    sendl("cmd=finalize\n"); expect("finalize_ack");
    return 0;
}
"#;

fn pmi_c() -> Option<&'static PathBuf> {
    // Static: compiled once per test process (its directory is not removed).
    static EXE: OnceLock<Option<PathBuf>> = OnceLock::new();
    EXE.get_or_init(|| {
        compile("pmi_c", PMI_C).map(|(dir, exe)| {
            std::mem::forget(dir);
            exe
        })
    })
    .as_ref()
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
fn pmi_put_barrier_get_c_client() {
    let Some(exe) = pmi_c() else { return };
    let o = mpirun(&["-n", "4", exe.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    let want: Vec<String> = (0..4)
        .map(|r| format!("c-pmi rank {r} of 4 got w0 w1 w4 w9"))
        .collect();
    assert_eq!(sorted_lines(&stdout), want);
}

#[test]
fn pmi_abort_c_client() {
    let Some(exe) = pmi_c() else { return };
    let o = mpirun(&["-n", "3", exe.to_str().unwrap(), "abort", "6"])
        .output()
        .unwrap();
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("rank 2 called abort with code 6"),
        "{stderr}"
    );
}

#[test]
fn pmi_exit_without_finalize_does_not_hang() {
    let Some(exe) = pmi_c() else { return };
    // Rank 0 leaves after init without finalizing; the others would wait in the barrier
    // forever: mpirun must end the job.
    let o = mpirun(&["-n", "3", exe.to_str().unwrap(), "exit0"])
        .output()
        .unwrap();
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("rank 0") && stderr.contains("finaliz"),
        "{stderr}"
    );
}

/// `pmi-hello` of the pmi crate, built next to mpirun when both crates are tested together.
fn pmi_hello() -> Option<PathBuf> {
    let p = Path::new(MPIRUN).with_file_name("pmi-hello");
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "NOTICE: {} not built (run `cargo test -p pmi -p launcher`); test skipped",
            p.display()
        );
        None
    }
}

#[test]
fn pmi_put_barrier_get_rust_client() {
    let Some(exe) = pmi_hello() else { return };
    let o = mpirun(&["-n", "4", exe.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    let lines = sorted_lines(&stdout);
    assert_eq!(lines.len(), 4, "{stdout}");
    for (r, l) in lines.iter().enumerate() {
        assert!(
            l.starts_with(&format!("pmi-hello rank {r} of 4 kvsname kvs_")),
            "{l}"
        );
        // Our mpirun serves PMI-1.
        assert!(l.ends_with(" appnum 0 got v0,v1,v2,v3 pmi 1"), "{l}");
    }
    let o = mpirun(&["-n", "3", exe.to_str().unwrap(), "abort", "9"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(9), "{:?}", out(&o));
}

#[test]
fn c_client_under_hydra() {
    let hydra_ok = Command::new("mpiexec.hydra")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !hydra_ok {
        eprintln!("NOTICE: mpiexec.hydra is not installed; Hydra test skipped");
        return;
    }
    let Some(exe) = pmi_c() else { return };
    let o = Command::new("mpiexec.hydra")
        .args(["-n", "2", exe.to_str().unwrap()])
        .env_remove("PMI_FD")
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        sorted_lines(&stdout),
        ["c-pmi rank 0 of 2 got w0 w1", "c-pmi rank 1 of 2 got w0 w1"]
    );
    if let Some(exe) = pmi_hello() {
        let o = Command::new("mpiexec.hydra")
            .args(["-n", "2", exe.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{:?}", out(&o));
        assert_eq!(sorted_lines(&out(&o).0).len(), 2);
    }
}
