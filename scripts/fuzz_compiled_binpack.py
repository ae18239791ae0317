"""Fuzz the compiled binpack decoder (pipeline/compiled/binpack.py) with mutated chains.

``python scripts/fuzz_compiled_binpack.py [--rounds N] [--seed S] [--out FILE]``

Each round mutates small.binpack's block (random bytes and bit flips, about one mutation per
``--every`` chains) and decodes it with ``decode_chains``, resuming after each chain it hands
back (FALLBACK) at the next original chain start. Checked, for every call: it returns (no
crash: a numba fault would kill the process), the position moves forward and stays in the
block, rows fit the buffers; for every row it settles (kind 0), NumPy's bulk validator
(tests/formats/fastcheck_oracle.py) finds the packed board valid, with the same in-check flag and piece
count, and the columns are in range. Random-byte blocks are decoded the same way. Each
decoded position and each handed-back chain counts as a record. Prints (and writes) JSON.
The exactness of the handed-back path against python-chess is tested in
tests/formats/test_compiled_binpack.py. Run it with ``NUMBA_BOUNDSCHECK=1
NUMBA_CACHE_DIR=$(mktemp -d)`` to have numba check every array index (the JSON records it).
"""
from __future__ import annotations

import argparse
import functools
import json
import random
import runpy
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO.parent / "shared" / "data" / "public" / "small.binpack"


@functools.lru_cache(maxsize=1)
def _check_boards():
    """check_boards of tests/formats/fastcheck_oracle.py (run by path: tests are not installed)."""
    return runpy.run_path(str(REPO / "tests" / "formats" / "fastcheck_oracle.py"))["check_boards"]


def main(argv=None) -> int:
    from nnue.pipeline.compiled import binpack as cb
    check_boards = _check_boards()

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--every", type=int, default=3, help="one mutation per this many chains")
    p.add_argument("--random-blocks", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    rng = random.Random(a.seed)
    data = SMALL.read_bytes()
    body = data[8:8 + int.from_bytes(data[4:8], "little")]
    b = cb.buffers(cb.CAP)
    args = [b[k] for k in cb._FIELDS]
    clean = np.frombuffer(body, np.uint8)
    starts, pos = [], 0
    while pos < len(clean):
        rows, _, pos, status = cb.decode_chains(clean, pos, len(clean), *args)
        assert status != cb.FALLBACK, "small.binpack itself must decode fully"
        starts.extend(np.unique(b["chain_pos"][:rows]).tolist())
    starts = np.array(starts + [len(clean)])
    totals = {"records": 0, "positions": 0, "handed_back_chains": 0, "python_chess_rows": 0, "calls": 0,
              "mutations": 0}
    t0 = time.perf_counter()

    def run(buf: np.ndarray, resume) -> None:
        pos, end = 0, len(buf)
        while pos < end:
            rows, chains, new, status = cb.decode_chains(buf, pos, end, *args)
            totals["calls"] += 1
            assert 0 <= rows <= cb.CAP and pos <= new <= end, (rows, pos, new, end)
            assert status in (cb.END, cb.FULL, cb.FALLBACK)
            if rows:
                k = b["kind"][:rows]
                assert set(np.unique(k).tolist()) <= {0, 1}
                ok = np.nonzero(k == 0)[0]
                chk = check_boards(b["board"][:rows][ok])
                assert (chk.reason == 0).all(), "a settled row fails the bulk validator"
                assert (chk.in_check == b["in_check"][:rows][ok]).all()
                assert (chk.piece_count == b["piece_count"][:rows][ok]).all()
                assert (np.abs(b["result"][:rows][ok]) <= 1).all() and (b["ply"][:rows][ok] <= 65535).all()
                totals["positions"] += rows
                totals["records"] += rows
                totals["python_chess_rows"] += int(k.sum())
            if status == cb.FALLBACK:
                totals["handed_back_chains"] += 1
                totals["records"] += 1
                new = resume(new)
            elif status == cb.FULL:
                assert rows > 0 or chains > 0
            assert new > pos or status == cb.END, "no progress"
            pos = new

    for r in range(a.rounds):
        d = bytearray(body)
        n = len(starts) // a.every
        for _ in range(n):
            i = rng.randrange(len(d))
            d[i] = rng.randrange(256) if rng.random() < 0.5 else d[i] ^ (1 << rng.randrange(8))
        totals["mutations"] += n
        buf = np.frombuffer(bytes(d), np.uint8)
        run(buf, lambda p: int(starts[np.searchsorted(starts, p, side="right")]))
    for _ in range(a.random_blocks):
        buf = np.frombuffer(rng.randbytes(rng.choice((33, 34, 40, 64, 100, 300))), np.uint8)
        run(buf, lambda p: len(buf))
    import os

    report = {"fuzz": "compiled binpack decoder", "input": SMALL.name, "seed": a.seed, "rounds": a.rounds,
              "numba_boundscheck": os.environ.get("NUMBA_BOUNDSCHECK") == "1",
              "random_blocks": a.random_blocks, **totals, "seconds": round(time.perf_counter() - t0, 1),
              "result": "no crash, no hang, every settled row valid and every other chain handed back"}
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
