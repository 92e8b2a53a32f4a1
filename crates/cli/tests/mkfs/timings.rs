//! `mkfs --timings` and the phases in `mkfs --json`: every phase of a
//! build (scan, plan, data, meta, sync) is reported once, in order, with
//! wall and CPU seconds that add up to no more than the whole process
//! took; a build that compresses several MiB spends its CPU in the data
//! phase. `--timings` prints the same phases as a table on standard error
//! and leaves standard output to the summary. Needs no root.

use std::process::Command;
use std::time::Instant;

use crate::FERROFS;

#[test]
fn phases_are_reported_in_order_and_add_up() {
    let work = ferrofs_testkit::work_dir!("mkfs_timings");
    let tree = work.join("tree");
    std::fs::create_dir_all(tree.join("d")).unwrap();
    for i in 0..8u64 {
        let text: String = (0..60_000u64)
            .map(|k| format!("{} {}\n", k * (i + 3), k ^ i))
            .collect();
        std::fs::write(tree.join("d").join(format!("f{i}")), text).unwrap();
    }
    let img = work.join("t.img");
    let start = Instant::now();
    let out = Command::new(FERROFS)
        .args(["mkfs", "--json", "-zlz4hc,9", "-C65536"])
        .arg(&img)
        .arg(&tree)
        .output()
        .unwrap();
    let took = start.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let phases = v["phases"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = phases.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["scan", "plan", "data", "meta", "sync"], "{v}");
    let num = |p: &serde_json::Value, k: &str| p[k].as_f64().unwrap_or(-1.0);
    for p in &phases {
        assert!(num(p, "wall_s") >= 0.0 && num(p, "cpu_s") >= 0.0, "{p}");
    }
    let wall: f64 = phases.iter().map(|p| num(p, "wall_s")).sum();
    assert!(wall <= took + 0.05, "phases {wall} s, process {took} s");
    let cpu: f64 = phases.iter().map(|p| num(p, "cpu_s")).sum();
    let data_cpu = num(&phases[2], "cpu_s");
    assert!(cpu > 0.0 && data_cpu >= cpu / 2.0, "{v}");

    // --timings: the table on standard error, the summary alone on stdout.
    let out = Command::new(FERROFS)
        .args(["mkfs", "--timings", "-zlz4hc,9", "-C65536"])
        .arg(&img)
        .arg(&tree)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let rows: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        rows,
        ["phase", "scan", "plan", "data", "meta", "sync", "total"],
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("phase"));
    ferrofs_testkit::tmp::finish(&work, &[]);
}
