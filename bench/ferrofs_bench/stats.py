"""Medians and spread of repeated measurements, and grouping of long-format rows.

A row is a dict with the keys of ``KEY_FIELDS`` plus ``repeat`` and ``value``; one row
holds one repetition of one metric. ``summarise`` collapses the repeats.
"""

import statistics

KEY_FIELDS = ("corpus", "tool", "codec", "cluster", "test", "metric")


def median(values):
    """Median of a non-empty sequence of numbers."""
    if not values:
        raise ValueError("median of no values")
    return statistics.median(values)


def spread(values):
    """Relative range (max - min) / median, in percent; 0 for a single value or zero median."""
    m = median(values)
    if len(values) < 2 or m == 0:
        return 0.0
    return (max(values) - min(values)) / abs(m) * 100.0


def summarise(rows):
    """Collapse repeats: one dict per key with n, median, min, max and spread_pct.

    Keeps first-seen order of keys so reports follow the run order.
    """
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in KEY_FIELDS), []).append(float(r["value"]))
    out = []
    for key, vals in groups.items():
        d = dict(zip(KEY_FIELDS, key))
        d.update(n=len(vals), median=median(vals), min=min(vals), max=max(vals),
                 spread_pct=spread(vals))
        out.append(d)
    return out


def index(summary):
    """Map (corpus, tool, codec, cluster, test, metric) -> summary dict."""
    return {tuple(s[k] for k in KEY_FIELDS): s for s in summary}
