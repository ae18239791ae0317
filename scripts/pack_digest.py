"""Digest of everything ``nnue pack`` and ``nnue convert`` write for some inputs, to compare two
checkouts of the code (a refactor must leave every byte as it was).

Usage: python scripts/pack_digest.py WORKDIR OUT.json INPUT...
Each input is packed whole and in five byte ranges (one worker); each dataset's tables (rows, in
order), rejects and counts are hashed, and the dataset is converted to every target of the
built-in writers with the compiled and the python-chess writers, each output hashed. Run it once
per checkout (for another checkout: a folder holding ``nnue/`` with its ``pipeline``, ``trainer``,
... linked in, on PYTHONPATH) and compare the two JSON files. The formats registry refactor of
issue 22 was checked this way on the samples of every format (identical).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import nnue.pipeline.formats as formats
from nnue.pipeline import manifest as mf
from nnue.pipeline.convert import convert
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part

TARGETS = ("plain", "bullet-text", "bulletformat", "marlinformat")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    work, dest, inputs = Path(argv[0]), Path(argv[1]), [Path(p) for p in argv[2:]]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    res = {"code": formats.__file__}
    for p in inputs:
        for mode in ("whole", "ranged"):
            ds = work / f"{p.name}-{mode}"
            kw = {"range_mb": max(p.stat().st_size / 5, 2048) / (1 << 20)} if mode == "ranged" else {}
            s = pack([p], ds, progress=False, workers=1, **kw)
            row = res[f"{p.name}/{mode}"] = {"read": s["read"], "packed": s["packed"], "rejected": s["rejected"]}
            for e in mf.load(ds)["files"].values():
                parts = e.get("parts") or [e["part"]]
                rejects = e.get("rejects_parts") or [e["rejects"]]
                h = hashlib.sha256()
                for name in parts:
                    h.update(repr(read_part(ds / name).to_pydict()).encode())  # logical rows, either layout
                row.update(tables=h.hexdigest(), parts=len(parts),
                           rejects=hashlib.sha256(b"".join((ds / r).read_bytes() for r in rejects)).hexdigest())
            for to in TARGETS if s["packed"] else ():
                for fast in (True, False):
                    out = work / f"{p.name}-{mode}.{to}.{fast}"
                    r = convert(ds, to, out, fast=fast)
                    row[f"{to}/{fast}"] = [hashlib.sha256(out.read_bytes()).hexdigest(), r["rows"],
                                           r["python_chess_rows"]]
            dest.write_text(json.dumps(res, indent=1, sort_keys=True))  # as it goes: a long run keeps its start
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
