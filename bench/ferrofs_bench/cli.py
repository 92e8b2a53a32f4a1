"""Command line and run loop: build every image, mount it, measure, write the results.

For each corpus and each (tool, codec, cluster) image: build it ``--build-repeat`` times
(size, wall, CPU, peak RSS), then ``--repeat`` times run each read workload on a fresh
kernel mount with caches dropped (see ``measure``). Results are rewritten after every
image, so an interrupted run still leaves CSV files for what finished.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from . import corpus, measure, report, system, tools
from .stats import median, summarise

QUICK = {"codecs": ["none", "lz4", "zstd"], "clusters": [4096, 131072]}
FULL = {"codecs": list(tools.CODECS), "clusters": [4096, 8192, 16384, 65536, 131072]}
MIN_FIO_FILE = 1024 * 1024


def size_arg(text):
    """Parse a byte count with an optional K/M suffix (``64K`` -> 65536)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1024, "M": 1024 * 1024}.get(t[-1:], 1)
    value = int(t[:-1] if mult > 1 else t) * mult
    if value < 4096 or value % 4096:
        raise argparse.ArgumentTypeError(f"{text}: cluster sizes are multiples of 4K")
    return value


def list_arg(choices=None, convert=str):
    """An argparse type for comma-separated lists, checked against ``choices``."""
    def parse(text):
        items = [convert(x) for x in text.split(",") if x.strip()]
        bad = [x for x in items if choices and x not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {', '.join(choices)}")
        return items
    return parse


def parser():
    """The argparse parser of the runner (``bench/ferrofs-bench.sh``)."""
    p = argparse.ArgumentParser(
        prog="bench/ferrofs-bench.sh",
        description="Build EROFS and SquashFS images of a corpus with ferrofs mkfs, "
                    "mkfs.erofs and mksquashfs, mount them with the kernel and measure image "
                    "size, build cost, tar and fio 4 KiB seq/rand/stride read throughput, "
                    "I/O amplification and memory (EROFS ATC'19 Table 1, Figs. 7 and 10; the "
                    "2022 EROFS-vs-SquashFS size tables). Needs root for loop mounts.",
        epilog="Without --corpus a deterministic ~40 MiB corpus (with a 32 MiB text file) "
               "is generated under OUT and the quick matrix runs in a few minutes.")
    p.add_argument("--corpus", action="append", metavar="DIR|FILE",
                   help="tree or single file to pack (repeatable); fio and memory tests "
                        "read its largest file. Default: the bundled generated corpus")
    p.add_argument("--out", default="/tmp/ferrofs-bench", metavar="DIR",
                   help="output directory for images, CSV, report.md and plots "
                        "(default: %(default)s)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="codecs none,lz4,zstd at clusters 4K,128K (the default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="codecs none,lz4,lz4hc,lzma,zstd at clusters 4K,8K,16K,64K,128K")
    p.add_argument("--tools", type=list_arg(("ferrofs", "erofs-utils", "squashfs")),
                   help="comma-separated subset of ferrofs,erofs-utils,squashfs")
    p.add_argument("--codecs", type=list_arg(tools.CODECS),
                   help="comma-separated codecs, overriding the mode's")
    p.add_argument("--clusters", type=list_arg(convert=size_arg),
                   help="comma-separated cluster sizes (e.g. 4K,64K), overriding the mode's")
    p.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="repetitions of each read measurement (default: %(default)s)")
    p.add_argument("--build-repeat", type=int, metavar="N",
                   help="repetitions of each build (default: --repeat)")
    p.add_argument("--tests", type=list_arg(measure.TESTS),
                   help=f"comma-separated subset of {','.join(measure.TESTS)} (default: all)")
    p.add_argument("--build-only", action="store_true",
                   help="only build and size images (no mounts, no root needed)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite report.md and the plots from OUT/raw.csv and OUT/meta.json")
    p.add_argument("--keep-images", action="store_true",
                   help="keep the images in OUT/images (default: delete after measuring)")
    p.add_argument("--upstream-bin", metavar="DIR",
                   help="directory with mkfs.erofs and mksquashfs (default: "
                        "$UPSTREAM_TOOLS_BIN or ~/.cache/upstream-tools/bin, then PATH)")
    return p


def _tree_stats(root):
    files = size = 0
    for d, _, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            if os.path.isfile(path) and not os.path.islink(path):
                files += 1
                size += os.path.getsize(path)
    return files, size


def _corpora(args):
    """[(name, source dir, large file relative path)] for the run."""
    if not args.corpus:
        print("generating the bundled corpus ...", flush=True)
        src = corpus.generate(os.path.join(args.out, "corpus-bundled"))
        return [("bundled", src, "large.txt")]
    out, names = [], set()
    for path in args.corpus:
        name = os.path.basename(os.path.normpath(path)) or "root"
        while name in names:
            name += "_"
        names.add(name)
        src, large = corpus.prepare(path, os.path.join(args.out, "staging", name))
        out.append((name, src, large))
    return out


def _kernel_ok(fstype):
    if not system.filesystem_supported(fstype):
        subprocess.run(["modprobe", fstype], capture_output=True)
    return system.filesystem_supported(fstype)


def _rows(base, test, repeat, metrics):
    return [dict(base, test=test, metric=k, repeat=repeat, value=v) for k, v in metrics.items()]


def _build(tool, cfg, src, image, n):
    """Build ``n`` times; returns the rows, or raises with the builder's message."""
    rows = []
    for r in range(n):
        if os.path.exists(image):
            os.unlink(image)
        done = system.run_measured(tool.command(cfg, src, image),
                                   peak_rss=system.have_gnu_time())
        if done.returncode != 0:
            raise RuntimeError(f"build failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).decode(errors='replace')[-400:]}")
        start = time.monotonic()
        with open(image, "rb") as f:
            os.fsync(f.fileno())
        row = {"image_bytes": os.path.getsize(image),
               "wall_s": done.wall_s + time.monotonic() - start, "cpu_s": done.cpu_s}
        if done.maxrss_kib is not None:
            row["maxrss_kib"] = done.maxrss_kib
        rows.append((r, row))
    return rows


def _measure(cfg, image, mnt, tests, large, large_size, cgroup_name):
    """One repetition of every test, each on a fresh mount after dropping caches."""
    results = {}
    for test in tests:
        with system.loop_mount(image, cfg.fstype, mnt) as dev:
            system.drop_caches()
            path = os.path.join(mnt, large) if large else None
            if test == "tar":
                results[test] = measure.run_tar(dev, mnt)
            elif test == "whole":
                results[test] = measure.run_whole(dev, path, cgroup_name)
            else:
                results[test] = measure.run_fio(dev, path, test, large_size)
    return results


def _progress(i, total, cfg, build_rows, reads):
    """Print one line per image: median size and build time, last repeat's reads."""
    size = median([r["image_bytes"] for _, r in build_rows])
    wall = median([r["wall_s"] for _, r in build_rows])
    text = f"[{i}/{total}] {cfg.label}: {size / 2**20:.2f} MiB, build {wall:.2f} s"
    if reads:
        last = reads[-1]
        text += "".join(f"; {t} {last[t]['throughput_mibs']:.0f} MiB/s"
                        f" ×{last[t]['amplification']:.2f}" for t in measure.TESTS if t in last)
    print(text, flush=True)


def _report_only(out):
    """Regenerate the report and plots of an earlier run in ``out``."""
    rows = report.read_csv(os.path.join(out, "raw.csv"))
    for r in rows:
        r["cluster"] = int(r["cluster"])
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    summary = summarise(rows)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(report.markdown(summary, meta))
    pngs = report.plots(summary, meta["corpora"], out)
    print(f"rewrote {out}/report.md and {len(pngs)} plots")
    return 0


def main(argv=None):
    args = parser().parse_args(argv)
    if args.report_only:
        return _report_only(args.out)
    mode = args.mode or "quick"
    matrix = dict(QUICK if mode == "quick" else FULL)
    if args.codecs:
        matrix["codecs"] = args.codecs
    if args.clusters:
        matrix["clusters"] = args.clusters
    build_repeat = args.build_repeat or args.repeat
    if args.repeat < 1 or build_repeat < 1:
        print("ferrofs-bench: --repeat and --build-repeat must be at least 1", file=sys.stderr)
        return 2
    if not args.build_only and os.geteuid() != 0:
        print("ferrofs-bench: mounting images (losetup, mount, drop_caches) needs root; "
              "run it as root (e.g. `sudo bash bench/ferrofs-bench.sh ...`) or pass --build-only",
              file=sys.stderr)
        return 2

    found = tools.find_tools(args.upstream_bin)
    chosen = []
    for t in found:
        if args.tools and t.name not in args.tools:
            continue
        if t.path is None:
            print(f"skipping {t.name}: {t.missing_reason}")
        else:
            chosen.append(t)
    if not chosen:
        print("ferrofs-bench: no image builder available", file=sys.stderr)
        return 1
    tests = () if args.build_only else tuple(args.tests or measure.TESTS)
    for exe, dropped in (("fio", measure.FIO_PATTERNS), ("tar", ("tar",)),
                         ("dd", ("whole",))):
        if tests and shutil.which(exe) is None:
            print(f"skipping {', '.join(dropped)}: {exe} is not installed")
            tests = tuple(t for t in tests if t not in dropped)
    if not system.have_gnu_time():
        print(f"skipping build peak RSS: GNU time ({system.GNU_TIME}) is not installed")
    mountable = {}
    if tests:
        for fstype in {"erofs", "squashfs"}:
            mountable[fstype] = _kernel_ok(fstype)
            if not mountable[fstype]:
                print(f"skipping {fstype} mounts: the kernel has no {fstype} support")

    os.makedirs(args.out, exist_ok=True)
    started, t0 = time.strftime("%Y-%m-%d %H:%M:%S"), time.monotonic()
    corpora = _corpora(args)
    cfgs = tools.configs(chosen, matrix["codecs"], matrix["clusters"])
    mnt = os.path.join(args.out, "mnt")
    os.makedirs(mnt, exist_ok=True)
    cgroup_name = f"ferrofs-bench-{os.getpid()}"
    rows, meta_corpora = [], []
    meta = {"mode": mode, "repeat": args.repeat, "build_repeat": build_repeat,
            "kernel": os.uname().release, "started": started,
            "tools": [vars(t) for t in found], "corpora": meta_corpora}

    def write_outputs():
        summary = summarise(rows)
        meta["elapsed_s"] = time.monotonic() - t0
        report.write_csv(rows, os.path.join(args.out, "raw.csv"), report.RAW_FIELDS)
        report.write_csv(summary, os.path.join(args.out, "summary.csv"), report.SUMMARY_FIELDS)
        with open(os.path.join(args.out, "report.md"), "w") as f:
            f.write(report.markdown(summary, meta))
        with open(os.path.join(args.out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        return summary

    for name, src, large in corpora:
        files, size = _tree_stats(src)
        large_size = os.path.getsize(os.path.join(src, large)) if large else 0
        meta_corpora.append({"name": name, "source": src, "files": files, "bytes": size,
                             "large": large or "–", "large_bytes": large_size})
        corpus_tests = tuple(t for t in tests if t == "tar" or (
            large and (t == "whole" or large_size >= MIN_FIO_FILE)))
        imgdir = os.path.join(args.out, "images", name)
        os.makedirs(imgdir, exist_ok=True)
        print(f"corpus {name}: {src} ({files} files, {size / 2**20:.1f} MiB; "
              f"large file {large} {large_size / 2**20:.1f} MiB)", flush=True)
        for i, cfg in enumerate(cfgs, 1):
            tool = next(t for t in chosen if t.name == cfg.tool)
            image = os.path.join(imgdir, cfg.slug + ".img")
            base = {"corpus": name, "tool": cfg.tool, "codec": cfg.codec,
                    "cluster": cfg.cluster}
            try:
                built = _build(tool, cfg, src, image, build_repeat)
            except RuntimeError as e:
                print(f"[{i}/{len(cfgs)}] {cfg.label}: skipped, {e}", flush=True)
                continue
            for r, b in built:
                rows.extend(_rows(base, "build", r, b))
            reads = []
            if corpus_tests and mountable.get(cfg.fstype):
                for r in range(args.repeat):
                    try:
                        res = _measure(cfg, image, mnt, corpus_tests, large, large_size,
                                       cgroup_name)
                    except RuntimeError as e:
                        print(f"[{i}/{len(cfgs)}] {cfg.label}: measurement failed, {e}",
                              flush=True)
                        break
                    reads.append(res)
                    for test, metrics in res.items():
                        rows.extend(_rows(base, test, r, metrics))
            _progress(i, len(cfgs), cfg, built, reads)
            if not args.keep_images:
                os.unlink(image)
            write_outputs()

    summary = write_outputs()
    pngs = report.plots(summary, meta_corpora, args.out)
    print(f"done in {time.monotonic() - t0:.0f} s: {args.out}/report.md, raw.csv, "
          f"summary.csv" + (f", {len(pngs)} plots" if pngs else ""))
    return 0
