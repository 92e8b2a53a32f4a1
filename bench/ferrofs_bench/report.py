"""Output: raw and summary CSV, a Markdown report laid out like the papers' tables, PNG plots.

Tables per corpus: image size per codec and cluster (the 2022 SquashFS comparison, with
each size also as a share of the tool's uncompressed image), build cost, device I/O per
read pattern (EROFS paper Table 1), read throughput and CPU (Fig. 7), and the memory
cost of reading the large file (Fig. 10). Cells are medians; ``±N%`` is the relative
range (max - min) / median over the repeats.
"""

import csv
import os

from .measure import FIO_PATTERNS as PATTERNS, TESTS
from .stats import KEY_FIELDS, index
from .tools import CODECS, cluster_label

MIB = 1024 * 1024
RAW_FIELDS = KEY_FIELDS + ("repeat", "value")
SUMMARY_FIELDS = KEY_FIELDS + ("n", "median", "min", "max", "spread_pct")
TOOL_ORDER = ("ferrofs", "erofs-utils", "squashfs")


def write_csv(rows, path, fields):
    """Write dict rows with the given columns (extra keys are an error)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def read_csv(path):
    """Read a CSV written by ``write_csv`` back as dicts (numbers stay strings)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _configs(summary, corpus):
    """(tool, codec, cluster) triples of a corpus in report order."""
    seen = {(s["tool"], s["codec"], int(s["cluster"])) for s in summary
            if s["corpus"] == corpus}
    return sorted(seen, key=lambda c: (TOOL_ORDER.index(c[0]) if c[0] in TOOL_ORDER else 9,
                                       CODECS.index(c[1]) if c[1] in CODECS else 9, c[2]))


def _label(cfg):
    tool, codec, cluster = cfg
    return f"{tool} {codec} {cluster_label(cluster)}".rstrip()


def _cell(s, scale=1.0, digits=1):
    """Median scaled, with the spread when there were repeats; '–' if missing."""
    if s is None:
        return "–"
    text = f"{s['median'] / scale:.{digits}f}"
    if s["n"] > 1 and round(s["spread_pct"]) > 0:
        text += f" ±{s['spread_pct']:.0f}%"
    return text


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _size_table(ix, corpus, configs):
    tools = [t for t in TOOL_ORDER if any(c[0] == t for c in configs)]
    none = {t: ix.get((corpus, t, "none", c[2], "build", "image_bytes"))
            for t in tools for c in configs if c[0] == t and c[1] == "none"}
    keys = sorted({(c[1], c[2] if c[1] != "none" else 0) for c in configs},
                  key=lambda k: (CODECS.index(k[0]), k[1]))
    rows = []
    for codec, cluster in keys:
        row = [codec, cluster_label(cluster) or "–"]
        for t in tools:
            cfg = next((c for c in configs if c[0] == t and c[1] == codec
                        and (codec == "none" or c[2] == cluster)), None)
            s = cfg and ix.get((corpus, t, codec, cfg[2], "build", "image_bytes"))
            if not s:
                row.append("–")
                continue
            base = none.get(t)
            share = f" ({s['median'] / base['median'] * 100:.1f}%)" if base else ""
            row.append(f"{s['median'] / MIB:.2f}{share}")
        rows.append(row)
    return _table(["codec", "cluster"] + [f"{t} MiB (% of none)" for t in tools], rows)


def _per_config(ix, corpus, configs, columns):
    """Rows of one cell per (test, metric, scale, digits) column for every config."""
    rows = []
    for cfg in configs:
        cells = [_cell(ix.get((corpus,) + cfg + (test, metric)), scale, digits)
                 for test, metric, scale, digits in columns]
        if any(c != "–" for c in cells):
            rows.append([_label(cfg)] + cells)
    return rows


def markdown(summary, meta):
    """The whole report as Markdown. ``meta`` holds run facts: tools, corpora, mode."""
    ix = index(summary)
    out = ["# ferrofs bench report\n",
           f"Mode `{meta['mode']}`, {meta['repeat']} repeat(s) per read measurement, "
           f"{meta['build_repeat']} per build; kernel {meta['kernel']}; "
           f"started {meta['started']}, took {meta['elapsed_s']:.0f} s.\n",
           "Cells are medians; ±N% is (max − min) / median over the repeats. Images are "
           "mounted read-only on a direct-I/O loop device with caches dropped before each "
           "measurement; device bytes are sectors read × 512 from /sys/block/loopN/stat.\n",
           "## Tools\n",
           _table(["tool", "path", "version"],
                  [[t["name"], f"`{t['path']}`" if t["path"] else "missing",
                    t["version"] or t["missing_reason"]] for t in meta["tools"]])]
    for c in meta["corpora"]:
        name = c["name"]
        configs = _configs(summary, name)
        out.append(f"\n## Corpus `{name}`\n")
        out.append(f"Source `{c['source']}`: {c['files']} files, {c['bytes'] / MIB:.1f} MiB; "
                   f"large file `{c['large']}` ({c['large_bytes'] / MIB:.1f} MiB).\n")
        out.append("\n### Image size\n\n" + _size_table(ix, name, configs))
        out.append("\n### Build (median of repeats)\n\n" + _table(
            ["image", "size MiB", "wall s", "CPU s", "peak RSS MiB"],
            _per_config(ix, name, configs, [
                ("build", "image_bytes", MIB, 2), ("build", "wall_s", 1, 2),
                ("build", "cpu_s", 1, 2), ("build", "maxrss_kib", 1024, 0)])))
        req = [next((ix[k] for k in ((name,) + c + (p, "requested_bytes") for c in configs)
                     if k in ix), None) for p in PATTERNS]
        rows = _per_config(ix, name, configs, [(p, "device_bytes", MIB, 2) for p in PATTERNS]
                           + [(p, "amplification", 1, 2) for p in PATTERNS])
        if any(req):
            rows.insert(0, ["requested"] + [_cell(r, MIB, 2) for r in req] + ["1.00"] * 3)
            out.append("\n### I/O amount under 4 KiB read patterns (paper Table 1)\n\n"
                       "Device MiB read while fio reads the large file; amplification = "
                       "device bytes / requested bytes.\n\n" + _table(
                           ["image"] + [f"{p} MiB" for p in PATTERNS]
                           + [f"{p} ×" for p in PATTERNS], rows))
        tests = [t for t in TESTS if any(k[0] == name and k[4] == t for k in ix)]
        rows = _per_config(ix, name, configs, [(t, "throughput_mibs", 1, 1) for t in tests])
        if rows:
            out.append("\n### Read throughput, MiB/s (paper Fig. 7; 2022 tar test)\n\n"
                       "`tar` = `tar cf - | wc -c` of the tree; `whole` = dd of the whole "
                       "large file.\n\n" + _table(["image"] + tests, rows))
            out.append("\n### CPU seconds (reader process / whole machine)\n\n" + _table(
                ["image"] + [f"{t} {k}" for t in tests for k in ("proc", "all")],
                _per_config(ix, name, configs, [
                    (t, m, 1, 3) for t in tests for m in ("cpu_s", "cpu_all_s")])))
        rows = _per_config(ix, name, configs, [
            ("whole", "requested_bytes", MIB, 1), ("whole", "device_bytes", MIB, 1),
            ("whole", "mem_free_drop_bytes", MIB, 1), ("whole", "cached_delta_bytes", MIB, 1),
            ("whole", "cgroup_peak_bytes", MIB, 1)])
        if rows:
            out.append("\n### Memory after reading the whole large file (paper Fig. 10)\n\n"
                       "MemFree drop and Cached growth are machine-wide (/proc/meminfo); "
                       "cgroup peak is the reader's memory cgroup.\n\n" + _table(
                           ["image", "file MiB", "device MiB", "MemFree drop MiB",
                            "Cached +MiB", "cgroup peak MiB"], rows))
    return "\n".join(out)


def plots(summary, corpora, outdir):
    """Write per-corpus PNGs (sizes, amplification, throughput); returns their paths.
    Returns [] with a printed reason when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install matplotlib)")
        return []
    ix = index(summary)
    written = []
    for c in corpora:
        name = c["name"]
        configs = _configs(summary, name)
        tools = [t for t in TOOL_ORDER if any(k[0] == t for k in configs)]
        clusters = sorted({k[2] for k in configs if k[1] != "none"})
        codecs = [k for k in CODECS if any(cfg[1] == k for cfg in configs)]
        if not configs:
            continue
        fig, axes = plt.subplots(1, max(1, len(clusters)), figsize=(3.2 * max(1, len(clusters)),
                                                                    3), sharey=True,
                                 squeeze=False)
        width = 0.8 / max(1, len(tools))
        for ax, cl in zip(axes[0], clusters or [0]):
            for i, t in enumerate(tools):
                ys = []
                for codec in codecs:
                    cfg = next((k for k in configs if k[0] == t and k[1] == codec
                                and (codec == "none" or k[2] == cl)), None)
                    s = cfg and ix.get((name,) + cfg + ("build", "image_bytes"))
                    ys.append(s["median"] / MIB if s else 0)
                ax.bar([x + i * width for x in range(len(codecs))], ys, width, label=t)
            ax.set_xticks([x + width * (len(tools) - 1) / 2 for x in range(len(codecs))],
                          codecs, fontsize=7)
            ax.set_title(f"cluster {cluster_label(cl) or '–'}", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0][0].set_ylabel("image MiB", fontsize=8)
        axes[0][0].legend(fontsize=6)
        fig.suptitle(f"{name}: image size by codec", fontsize=9)
        written.append(_save(fig, plt, outdir, f"{name}-sizes.png"))
        for metric, title, fname in (("amplification", "device bytes / requested bytes",
                                      "amplification"),
                                     ("throughput_mibs", "MiB/s", "throughput")):
            tests = [t for t in TESTS
                     if any((name,) + k + (t, metric) in ix for k in configs)]
            labelled = [k for k in configs
                        if any((name,) + k + (t, metric) in ix for t in tests)]
            if not labelled:
                continue
            fig, axes = plt.subplots(1, len(tests), figsize=(1.2 + 2.6 * len(tests),
                                                             0.9 + 0.17 * len(labelled)),
                                     sharey=True, squeeze=False)
            colors = {t: f"C{i}" for i, t in enumerate(TOOL_ORDER)}
            for ax, p in zip(axes[0], tests):
                vals = [ix[k]["median"] if k in ix else 0
                        for k in ((name,) + c + (p, metric) for c in labelled)]
                ax.barh(range(len(labelled)), vals,
                        color=[colors.get(k[0], "C9") for k in labelled])
                for y, v in enumerate(vals):
                    ax.text(v, y, f" {v:.2f}" if v < 10 else f" {v:.0f}", va="center",
                            fontsize=5)
                if metric == "amplification":
                    ax.axvline(1.0, color="grey", lw=0.6, ls="--")
                ax.set_xlim(0, max(vals + [1e-9]) * 1.2)
                ax.set_title(p, fontsize=8)
                ax.tick_params(labelsize=6)
            axes[0][0].set_yticks(range(len(labelled)), [_label(k) for k in labelled])
            axes[0][0].invert_yaxis()
            fig.suptitle(f"{name}: reads, {title}", fontsize=9)
            written.append(_save(fig, plt, outdir, f"{name}-{fname}.png"))
    return written


def _save(fig, plt, outdir, fname):
    path = os.path.join(outdir, fname)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
