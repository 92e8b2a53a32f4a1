"""Median, spread and the collapsing of repeats."""

import pytest

from ferrofs_bench import stats


def test_median():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 2, 3]) == 2.5
    with pytest.raises(ValueError):
        stats.median([])


def test_spread():
    assert stats.spread([90, 100, 110]) == pytest.approx(20.0)
    assert stats.spread([5]) == 0.0
    assert stats.spread([0, 0, 0]) == 0.0


def row(test, metric, repeat, value, tool="ferrofs"):
    return {"corpus": "c", "tool": tool, "codec": "lz4", "cluster": 4096, "test": test,
            "metric": metric, "repeat": repeat, "value": value}


def test_summarise_groups_repeats_in_order():
    rows = [row("seq", "device_bytes", r, v) for r, v in enumerate((10, 30, 20))]
    rows += [row("build", "image_bytes", 0, 7), row("seq", "device_bytes", 0, 1, "squashfs")]
    s = stats.summarise(rows)
    assert [x["test"] for x in s] == ["seq", "build", "seq"]
    first = s[0]
    assert (first["n"], first["median"], first["min"], first["max"]) == (3, 20, 10, 30)
    assert first["spread_pct"] == pytest.approx(100.0)
    ix = stats.index(s)
    assert ix[("c", "squashfs", "lz4", 4096, "seq", "device_bytes")]["median"] == 1
