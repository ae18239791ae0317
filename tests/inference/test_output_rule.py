"""The perspective net's rule after the L1 sum (nnue.inference.kinds.perspective.output) is one function
for the batch path (int64 tensors) and the incremental accumulator (Python ints): both give the
same centipawns as an independent statement of the formula, and refuse the same overflows."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest
import torch

from nnue.inference.exact import to_centipawns, trunc_div
from nnue.inference.kinds.perspective import output
from nnue.spec.quant import QuantScheme


def _c_div(a: int, b: int) -> int:
    """C's truncating division, from exact rationals (not the code under test)."""
    q = Fraction(a, b)
    return int(q)  # int() of a Fraction truncates toward zero


def _reference(act: str, s: QuantScheme, total: int, l1b: int) -> int:
    out = (_c_div(total, s.qa) if act in ("screlu", "pairwise_crelu") else total) + l1b
    return _c_div(out * s.scale, s.qa * s.qb)


def test_trunc_div_is_c_division():
    for a in (-7, -6, -1, 0, 1, 6, 7, -(1 << 40) - 3, (1 << 40) + 3):
        for b in (1, 2, 3, 255, 16320):
            assert trunc_div(a, b) == _c_div(a, b)
            assert int(trunc_div(torch.tensor([a]), b)[0]) == _c_div(a, b)


@pytest.mark.parametrize("act", ["crelu", "screlu", "pairwise_crelu"])
def test_output_ints_and_tensors_agree(act):
    s = QuantScheme(qa=255, qb=64, scale=400)
    rng = random.Random(7)
    totals = [rng.randrange(-(1 << 31), 1 << 31) for _ in range(500)] + [-1, 0, 1, -(1 << 31), (1 << 31) - 1]
    biases = [rng.randrange(-(1 << 15), 1 << 15) for _ in totals]
    if act == "crelu":  # the sum is the output: keep out = total + l1b inside int32
        totals = [max(-(1 << 31) + (1 << 15), min((1 << 31) - 1 - (1 << 15), t)) for t in totals]
    want = [_reference(act, s, t, b) for t, b in zip(totals, biases)]
    assert [output(act, s, t, b) for t, b in zip(totals, biases)] == want
    got = output(act, s, torch.tensor(totals, dtype=torch.int64), torch.tensor(biases, dtype=torch.int64))
    assert torch.equal(got, torch.tensor(want, dtype=torch.int64))
    assert to_centipawns(s.qa * s.qb, s) == s.scale


@pytest.mark.parametrize("total, b, what", [(1 << 31, 0, "L1 sum"), (-(1 << 31) - 1, 0, "L1 sum"),
                                            ((1 << 31) - 1, 1, "L1 output")])
def test_output_overflow_same_for_ints_and_tensors(total, b, what):
    s = QuantScheme(qa=255, qb=64, scale=400)
    with pytest.raises(OverflowError, match=what):
        output("crelu", s, total, b)
    with pytest.raises(OverflowError, match=what):
        output("crelu", s, torch.tensor([total]), torch.tensor([b]))
