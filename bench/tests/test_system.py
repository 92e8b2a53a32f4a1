"""Parsing of /sys/block/*/stat, /proc/meminfo and /proc/stat."""

import pytest

from ferrofs_bench import system

STAT17 = ("  339941     7067 11240843    66591        0        0        0        0"
          "        0    28516    66591        0        0        0        0        0        0\n")


def test_block_stat_17_fields():
    s = system.parse_block_stat(STAT17)
    assert s["read_ios"] == 339941 and s["read_merges"] == 7067
    assert s["read_sectors"] == 11240843 and s["io_ticks"] == 28516
    assert s["flush_ticks"] == 0 and len(s) == 17


def test_block_stat_old_kernels():
    s = system.parse_block_stat("1 2 3 4 5 6 7 8 9 10 11")
    assert s["read_sectors"] == 3 and s["time_in_queue"] == 11 and "discard_ios" not in s
    assert len(system.parse_block_stat(" ".join(["0"] * 15))) == 15


def test_block_stat_too_short():
    with pytest.raises(ValueError):
        system.parse_block_stat("1 2 3")


def test_device_read_bytes_uses_sectors(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text(STAT17)
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: real_open(
        stat if p == "/sys/block/loop7/stat" else p, *a, **k))
    assert system.device_read_bytes("/dev/loop7") == 11240843 * 512


def test_meminfo():
    m = system.parse_meminfo("MemTotal:       24684236 kB\nMemFree:  100 kB\n"
                             "HugePages_Total:       0\nCached: 5 kB\n")
    assert m == {"MemTotal": 24684236 * 1024, "MemFree": 102400, "HugePages_Total": 0,
                 "Cached": 5120}


def test_proc_stat_busy():
    text = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n"
    assert system.parse_proc_stat_busy(text) == 100 + 5 + 50 + 3 + 2 + 1
