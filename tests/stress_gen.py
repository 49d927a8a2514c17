"""Deterministic hostile-but-valid VW text for the numeric-safety checks (issue 6, part 3).

Feature values are log-uniform in magnitude over 1e-30..1e30 with random signs, importance
weights log-uniform over 1e-3..1e6, labels -1/+1; every line is well-formed, so a learner
must take all of it without its weights becoming NaN or inf. Used by
``tests/test_reliability.py`` (small n) and ``benchmarks/numeric_stress.py`` (1,000,000).
"""
from __future__ import annotations

import numpy as np


def stress_lines(n: int, seed: int = 0, n_features: int = 100_000, per_line: int = 10,
                 chunk: int = 20_000):
    """Yield ``bytes`` chunks of VW text lines (``n`` lines in all)."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < n:
        m = min(chunk, n - done)
        labels = rng.choice([-1, 1], m)
        imp = 10.0 ** rng.uniform(-3, 6, m)
        ids = rng.integers(0, n_features, (m, per_line))
        vals = rng.choice([-1.0, 1.0], (m, per_line)) * 10.0 ** rng.uniform(-30, 30, (m, per_line))
        out = []
        for i in range(m):
            feats = " ".join(f"f{ids[i, j]}:{vals[i, j]:.6g}" for j in range(per_line))
            out.append(f"{labels[i]} {imp[i]:.6g} |x {feats}\n")
        done += m
        yield "".join(out).encode()
