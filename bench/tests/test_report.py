"""CSV and Markdown report content generated from synthetic rows."""

import csv

from ferrofs_bench import report
from ferrofs_bench.stats import summarise

MIB = 1024 * 1024


def rows():
    out = []

    def add(tool, codec, cluster, test, metric, values):
        for r, v in enumerate(values):
            out.append({"corpus": "demo", "tool": tool, "codec": codec, "cluster": cluster,
                        "test": test, "metric": metric, "repeat": r, "value": v})

    for tool, none_cluster in (("erofs-utils", 0), ("squashfs", 131072)):
        add(tool, "none", none_cluster, "build", "image_bytes", [100 * MIB])
        add(tool, "lz4", 4096, "build", "image_bytes", [60 * MIB])
        add(tool, "lz4", 4096, "build", "wall_s", [1.0, 2.0, 3.0])
        for p in report.PATTERNS:
            add(tool, "lz4", 4096, p, "requested_bytes", [16 * MIB] * 3)
            add(tool, "lz4", 4096, p, "device_bytes", [24 * MIB, 26 * MIB, 25 * MIB])
            add(tool, "lz4", 4096, p, "amplification", [1.5, 1.625, 1.5625])
            add(tool, "lz4", 4096, p, "throughput_mibs", [100, 110, 90])
        add(tool, "lz4", 4096, "whole", "mem_free_drop_bytes", [70 * MIB] * 3)
    return out


META = {"mode": "quick", "repeat": 3, "build_repeat": 1, "kernel": "6.x",
        "started": "now", "elapsed_s": 12.0,
        "tools": [{"name": "erofs-utils", "path": "/x/mkfs.erofs", "version": "1.8.6",
                   "missing_reason": ""},
                  {"name": "ferrofs", "path": None, "version": "",
                   "missing_reason": "not built"}],
        "corpora": [{"name": "demo", "source": "/src", "files": 3, "bytes": 100 * MIB,
                     "large": "big", "large_bytes": 64 * MIB}]}


def test_csv_round_trip(tmp_path):
    raw = rows()
    report.write_csv(raw, tmp_path / "raw.csv", report.RAW_FIELDS)
    report.write_csv(summarise(raw), tmp_path / "summary.csv", report.SUMMARY_FIELDS)
    back = report.read_csv(tmp_path / "raw.csv")
    assert len(back) == len(raw) and list(back[0]) == list(report.RAW_FIELDS)
    with open(tmp_path / "summary.csv") as f:
        summary = list(csv.DictReader(f))
    seq = [s for s in summary if s["tool"] == "squashfs" and s["test"] == "seq"
           and s["metric"] == "device_bytes"][0]
    assert float(seq["median"]) == 25 * MIB and seq["n"] == "3"
    assert float(seq["spread_pct"]) == 8.0


def test_markdown_tables():
    md = report.markdown(summarise(rows()), META)
    assert "| ferrofs | missing | not built |" in md
    # image sizes with the share of the uncompressed image (2022 comparison layout)
    assert "| lz4 | 4K | 60.00 (60.0%) | 60.00 (60.0%) |" in md
    assert "| none | – | 100.00 (100.0%) | 100.00 (100.0%) |" in md
    # Table 1 layout: requested row, then device MiB and amplification per pattern
    assert "| requested | 16.00 | 16.00 | 16.00 | 1.00 | 1.00 | 1.00 |" in md
    assert "| squashfs lz4 4K | 25.00 ±8% | 25.00 ±8% | 25.00 ±8% | 1.56 ±8% |" in md
    # build wall spread: (3 - 1) / 2
    assert "| erofs-utils lz4 4K | 60.00 | 2.00 ±100% |" in md
    assert "| image | seq | rand | stride |" in md  # no tar or whole rows: no columns
    assert "| erofs-utils lz4 4K | 100.0 ±20% | 100.0 ±20% | 100.0 ±20% |" in md
    assert "Memory after reading the whole large file" in md


def test_plots(tmp_path):
    pngs = report.plots(summarise(rows()), META["corpora"], tmp_path)
    assert sorted(p.rsplit("/", 1)[1] for p in pngs) == [
        "demo-amplification.png", "demo-sizes.png", "demo-throughput.png"]
    assert all((tmp_path / p.rsplit("/", 1)[1]).stat().st_size > 1000 for p in pngs)
