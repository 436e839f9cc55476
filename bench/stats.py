"""stats.py -- the project's rules for benchmark figures, shared by every benchmark.

  - A series is measured with warm-up samples first; `series` runs them and drops them
    (the first create, fork or spawn pays for cold caches that later ones do not).
  - A figure is the median; its tail is called p99 only with at least P99_MIN samples,
    else it is the max and is labelled "max" (`tail`). For a rate (higher is better) the
    tail is the low end: p1, else "min".
  - A comparison is a ratio against a baseline measured in the same run (`ratio`).

Figures are printed, never asserted: nothing here raises on a slow result.
"""

import math
import statistics

P99_MIN = 100  # samples needed before a tail may be called p99
WARMUP = 1  # warm-up samples dropped from the front of a series by default


def series(fn, n, warmup=WARMUP):
    """Calls fn() warmup + n times; returns the last n results (the warm-up ones dropped)."""
    out = [fn() for _ in range(warmup + n)]
    return out[warmup:]


def drop_warmup(xs, warmup=WARMUP):
    """The samples after the first `warmup` (for series collected by hand)."""
    return list(xs)[warmup:]


def median(xs):
    return statistics.median(xs)


def p99(xs):
    """The 99th percentile (nearest rank); refused below P99_MIN samples."""
    if len(xs) < P99_MIN:
        raise ValueError(f"p99 of {len(xs)} samples: need at least {P99_MIN} (use tail())")
    s = sorted(xs)
    return s[math.ceil(0.99 * len(s)) - 1]


def tail(xs, higher_is_better=False):
    """The worst end of a series with its label: ("p99", value) with at least P99_MIN
    samples, else ("max", max(xs)); for rates ("p1", ...) or ("min", min(xs))."""
    if higher_is_better:
        if len(xs) >= P99_MIN:
            return "p1", sorted(xs)[math.ceil(0.01 * len(xs)) - 1]
        return "min", min(xs)
    if len(xs) >= P99_MIN:
        return "p99", p99(xs)
    return "max", max(xs)


def ratio(x, base):
    """x / base, NaN when there is no baseline to divide by."""
    return x / base if base else float("nan")
