"""SPRT module: the three seed-000 results from their pentanomial counts, the constrained MLE,
stopping bounds and the ``nnue sprt`` command."""
from __future__ import annotations

import dataclasses
import json
import math
import numpy as np
import pytest

from nnue.selfplay import sprt as S

# seed 000's table, PENTA listed there +2 first; here LL first. (LLR, Elo, ±, games)
SEED000 = [((15, 529, 1249, 703, 28), 3.09, 13.77, 5.04, 5048),
           ((12, 1259, 3100, 1437, 22), 3.04, 5.90, 3.11, 11660),
           ((16, 1407, 3249, 1597, 20), 2.95, 5.47, 3.04, 12578)]


@pytest.mark.parametrize("penta,llr,elo,ci,games", SEED000)
def test_seed000_rows_reproduced(penta, llr, elo, ci, games):
    r = S.sprt(penta, 0.0, 3.0, 0.05, 0.05)
    assert abs(r.llr - llr) <= 0.02
    assert abs(r.elo - elo) <= 0.01
    assert abs(r.elo_ci95 - ci) <= 0.01
    assert r.games == games
    assert r.verdict == "H1" and r.llr >= r.upper
    assert (r.lower, r.upper) == pytest.approx((-2.944439, 2.944439), abs=1e-6)


def test_mle_meets_its_constraint_and_lagrange_condition():
    f = np.array([15, 529, 1249, 703, 28], float)
    f /= f.sum()
    a = S.PAIR_SCORES
    for t in (-0.05, 0.0, 0.02, 0.1):
        p = S._mle_tvalue(f, t)
        mu = (p * a).sum()
        sd = math.sqrt((p * (a - mu) ** 2).sum())
        assert abs(p.sum() - 1) < 1e-12 and (p > 0).all()
        assert abs((mu - 0.5) / sd - t) < 1e-9
        grad_g = a - t * (a - mu) ** 2 / (2 * sd)
        coef = np.polyfit(grad_g, f / p, 1)
        assert np.allclose(np.polyval(coef, grad_g), f / p, rtol=1e-7, atol=1e-7)
    for e in (-20.0, 0.0, 10.0):
        p = S._mle_mean(f, a - S.elo_to_score(e))
        assert abs((p * a).sum() - S.elo_to_score(e)) < 1e-12


def test_llr_symmetry_and_sign():
    sym = (100, 300, 500, 300, 100)
    assert abs(S.llr(sym, -3, 3)) < 1e-9
    assert S.llr(sym, 0, 5) < 0 < S.llr(sym, -5, 0)
    strong = (10, 200, 500, 400, 40)
    assert S.llr(strong, 0, 5) > 0 and S.llr(strong[::-1], 0, 5) < 0
    # LLR grows linearly with the sample at fixed frequencies
    assert S.llr([4 * v for v in strong], 0, 5) == pytest.approx(4 * S.llr(strong, 0, 5), rel=1e-9)
    # logistic model: a larger Elo effect per nElo, hence a larger |LLR| on the same data
    assert S.llr(strong, 0, 5, "logistic") > S.llr(strong, 0, 5)


def test_verdicts_bounds_and_edge_cases():
    assert S.sprt((10, 200, 500, 400, 40), 0, 5).verdict == "H1"
    assert S.sprt((40, 400, 500, 200, 10), 0, 5).verdict == "H0"
    assert S.sprt((1, 2, 3, 2, 1), 0, 5).verdict == "inconclusive"
    assert S.bounds(0.05, 0.1) == pytest.approx((math.log(0.1 / 0.95), math.log(0.9 / 0.05)))
    empty = S.sprt((0, 0, 0, 0, 0))
    assert empty.llr == 0 and empty.verdict == "inconclusive" and math.isnan(empty.elo)
    sweep = S.sprt((0, 0, 0, 0, 7))
    assert sweep.elo == math.inf and math.isfinite(sweep.llr) and sweep.llr > 0
    for bad in ((1, 2, 3), (1, -1, 0, 0, 0), (1.5, 0, 0, 0, 0)):
        with pytest.raises(ValueError):
            S.sprt(bad)
    with pytest.raises(ValueError):
        S.sprt((1, 1, 1, 1, 1), 5, 0)
    with pytest.raises(ValueError):
        S.bounds(0.6, 0.5)
    assert S.penta_from_pairs([(1, 1), (1, 0.5), (0.5, 0.5), (1, 0), (0, 0.5), (0, 0)]) == [1, 1, 2, 1, 1]


def _nnue(*args):
    """``nnue`` in this process (a subprocess costs seconds of imports): returncode, stdout, stderr."""
    import contextlib
    import io
    import types

    from nnue.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code
    return types.SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def test_cli_layout_and_json():
    r = _nnue("sprt", "--penta", "15,529,1249,703,28", "--elo0", "0", "--elo1", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("LLR: +3.09 (-2.94, +2.94) [0.00, 3.00]")
    assert lines[1] == "ELO: +13.77 ± 5.04"
    assert lines[2] == "GAMES: 5048"
    assert lines[3].startswith("PENTA: [15, 529, 1249, 703, 28]")
    j = json.loads(_nnue("sprt", "--penta", "12,1259,3100,1437,22", "--elo0", "0", "--elo1", "3", "--json").stdout)
    assert j["verdict"] == "H1" and abs(j["llr"] - 3.04) <= 0.02 and abs(j["elo_ci95"] - 3.11) <= 0.01
    assert {"llr", "elo", "elo_ci95", "verdict"} <= set(j)
    bad = _nnue("sprt", "--penta", "1,2,x,4,5")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nnue sprt: error:" in bad.stderr


def test_games_line_counts_an_unfinished_pair_apart():
    """W/D/L count every game played, GAMES only those of finished pairs: a match stopped with one
    game of a pair played says so instead of W + D + L disagreeing with GAMES."""
    r = S.sprt([95, 198, 333, 212, 119], -10, 0)
    assert r.games == 1914
    r = dataclasses.replace(r, wdl=(656, 666, 593))
    assert r.lines()[2] == "GAMES: 1914 in pairs (W 656 / D 666 / L 593 of 1915 played; 1 more of an unfinished pair)"
    r = dataclasses.replace(r, wdl=(656, 666, 592))
    assert r.lines()[2] == "GAMES: 1914 in pairs (W 656 / D 666 / L 592 of 1914 played)"
