#!/usr/bin/env bash
# End-to-end check of bench/ferrofs-bench.sh: runs the quick default on the bundled corpus
# with the ferrofs binary, then checks that every expected row exists and every figure is sane:
# positive sizes, times and throughputs, device bytes >= 0, amplification = device /
# requested, requested bytes as designed, image sizes equal to the image files on disk,
# and the report and plots written. Needs root (loop mounts); skips otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $(id -u) != 0 ]]; then
  echo "bench/e2e.sh: skipped (needs root for loop mounts)"
  exit 0
fi
target=${CARGO_TARGET_DIR:-$root/target}
if [[ -z ${FERROFS:-} ]]; then
  (cd "$root" && cargo build --release -q -p ferrofs-cli)
  FERROFS=$target/release/ferrofs
fi
out=$(mktemp -d /tmp/ferrofs-bench-e2e.XXXXXX)
trap 'rm -rf "$out"' EXIT
start=$SECONDS
FERROFS=$FERROFS bash "$root/bench/ferrofs-bench.sh" --out "$out" --keep-images
elapsed=$((SECONDS - start))
PYTHONPATH=$root/bench python3 - "$out" <<'EOF'
import json, math, os, sys
from ferrofs_bench import cli, report, tools

out = sys.argv[1]
meta = json.load(open(os.path.join(out, "meta.json")))
summary = report.read_csv(os.path.join(out, "summary.csv"))
ix = {(s["tool"], s["codec"], int(s["cluster"]), s["test"], s["metric"]): s for s in summary}
problems = []

def need(cond, what):
    if not cond:
        problems.append(what)

present = [tools.Tool(t["name"], t["path"], t["version"]) for t in meta["tools"] if t["path"]]
need(len(present) == 3, f"only {[t.name for t in present]} available")
cfgs = tools.configs(present, cli.QUICK["codecs"], cli.QUICK["clusters"])
MIB = 1 << 20
large = meta["corpora"][0]["large_bytes"]
need(large == 32 * MIB, f"large file is {large} bytes")
requested = {"seq": 16 * MIB, "rand": 16 * MIB, "stride": large // 32, "whole": large}
metrics = {
    "build": ("image_bytes", "wall_s", "cpu_s", "maxrss_kib"),
    "tar": ("requested_bytes", "device_bytes", "amplification", "throughput_mibs",
            "wall_s", "cpu_s", "cpu_all_s"),
    "whole": ("requested_bytes", "device_bytes", "amplification", "throughput_mibs", "wall_s",
              "cpu_s", "cgroup_peak_bytes", "mem_free_drop_bytes", "cached_delta_bytes"),
}
for p in ("seq", "rand", "stride"):
    metrics[p] = metrics["tar"]
# Machine-wide memory deltas can be negative when other processes free memory.
signed = {"mem_free_drop_bytes", "cached_delta_bytes"}
may_be_zero = {"device_bytes", "amplification", "cpu_all_s", "cpu_s"}
for c in cfgs:
    for test, names in metrics.items():
        for m in names:
            s = ix.get((c.tool, c.codec, c.cluster, test, m))
            if s is None:
                problems.append(f"{c.label}: no {test} {m}")
                continue
            want_n = meta["build_repeat"] if test == "build" else meta["repeat"]
            need(int(s["n"]) == want_n, f"{c.label} {test} {m}: n={s['n']}")
            v = float(s["median"])
            if m not in signed:
                need(math.isfinite(v) and (v >= 0 if m in may_be_zero else v > 0),
                     f"{c.label} {test} {m} = {v}")
                need(float(s["min"]) >= 0, f"{c.label} {test} {m}: min {s['min']}")
    img = os.path.join(out, "images", "bundled", c.slug + ".img")
    size = ix.get((c.tool, c.codec, c.cluster, "build", "image_bytes"))
    need(os.path.exists(img) and size and float(size["min"]) == float(size["max"])
         == os.path.getsize(img), f"{c.label}: image size differs from {img}")
    for test in ("tar", "seq", "rand", "stride", "whole"):
        g = lambda m: float(ix[(c.tool, c.codec, c.cluster, test, m)]["median"])
        try:
            req, dev, amp = g("requested_bytes"), g("device_bytes"), g("amplification")
        except KeyError:
            continue
        if test in requested:
            need(req == requested[test], f"{c.label} {test}: requested {req}")
        else:
            need(req >= meta["corpora"][0]["bytes"], f"{c.label} tar: only {req} bytes")
        # requested bytes do not vary between repeats, so median ratio = median / req
        need(abs(amp - dev / req) <= 1e-6 * max(amp, 1.0),
             f"{c.label} {test}: amplification {amp} vs {dev}/{req}")
    whole = lambda m: float(ix[(c.tool, c.codec, c.cluster, "whole", m)]["median"])
    if c.codec == "none":
        need(whole("device_bytes") >= 0.99 * large, f"{c.label}: read less than the file")
    else:
        need(whole("device_bytes") < large, f"{c.label}: compressed read >= file size")
    need(whole("cgroup_peak_bytes") >= 0.9 * large, f"{c.label}: cgroup peak below file size")
md = open(os.path.join(out, "report.md")).read()
for c in cfgs:
    need(f"| {c.label} |" in md, f"report lacks {c.label}")
for png in ("sizes", "amplification", "throughput"):
    need(os.path.getsize(os.path.join(out, f"bundled-{png}.png")) > 1000, f"no {png} plot")
if problems:
    print("bench/e2e.sh: FAILED\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"bench/e2e.sh: {len(cfgs)} images x {len(metrics)} tests checked")
EOF
echo "bench/e2e.sh: passed in ${elapsed}s"
if ((elapsed >= 300)); then
  echo "bench/e2e.sh: warning: the quick run took ${elapsed}s (goal: under 300 s)"
fi
