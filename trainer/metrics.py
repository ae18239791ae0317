"""Evaluation metrics for nets: Spearman rank correlation with average ranks for ties."""
from __future__ import annotations

import numpy as np


def rankdata(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) of a 1-D array, ties sharing the mean of their ranks."""
    _, inv, counts = np.unique(np.asarray(x), return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    return (upper - (counts - 1) / 2.0)[inv]


def spearman(a, b) -> float:
    """Spearman's ρ of two equal-length 1-D sequences (Pearson correlation of average ranks).
    Returns nan for fewer than 2 values or a constant input."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"spearman: shapes {a.shape} and {b.shape} differ")
    if a.size < 2:
        return float("nan")
    ra, rb = rankdata(a), rankdata(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den else float("nan")
