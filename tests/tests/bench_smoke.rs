//! Smoke test of the benchmark runner (`benchmarks/run`): a quick ping-pong with our MPI
//! only must finish within a minute and print a table (and write its JSON, Markdown and
//! SVG files). Skipped, with a notice, when `python3` is not installed.

use std::process::{Command, Stdio};
use std::time::Duration;
use tests::{prefix, repo_root, scratch, Job};

fn have_python3() -> bool {
    Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn quick_pingpong_prints_a_table() {
    if !have_python3() {
        eprintln!("bench_smoke: notice: python3 not found; benchmark runner smoke test skipped");
        return;
    }
    let prefix = prefix(); // built (scripts/build.sh) before the clock starts
    let out_dir = scratch("bench-smoke");
    let mut cmd = Command::new("python3");
    cmd.arg(repo_root().join("benchmarks/run"))
        .args([
            "--quick", "--only", "pingpong", "--impl", "ours", "--prefix",
        ])
        .arg(prefix)
        .arg("--out")
        .arg(&out_dir);
    let out = Job::new(cmd).deadline(Duration::from_secs(60)).run();
    out.assert_success("benchmarks/run --quick --only pingpong --impl ours");
    let s = &out.stdout;
    assert!(
        s.contains("### Ping-pong latency") && s.contains("| case | ours (µs) |"),
        "no latency table:\n{s}\n--- stderr\n{}",
        out.stderr
    );
    // A data row with a number (not an error or a dash) for 0 B.
    let row = s
        .lines()
        .find(|l| l.starts_with("| 0 B |"))
        .unwrap_or_else(|| panic!("no 0 B row:\n{s}"));
    let v = row.split('|').nth(2).unwrap().trim().trim_end_matches('*');
    assert!(
        v.parse::<f64>().map(|x| x > 0.0).unwrap_or(false),
        "0 B latency is not a number: {row}"
    );
    assert!(
        s.contains("### Ping-pong bandwidth"),
        "no bandwidth table:\n{s}"
    );
    for f in ["results.json", "tables.md", "plot.svg"] {
        assert!(out_dir.join(f).is_file(), "{f} not written in {out_dir:?}");
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}
