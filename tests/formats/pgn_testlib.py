"""Test-side helper for the compiled PGN reader: pack one input with the compiled and the
python-chess path and assert identical datasets, rejects and per-record locations."""
from __future__ import annotations


from nnue.pipeline.formats import FormatError, PackedRows, ReaderOptions, get_format, open_text
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part


def locations(path, fast: bool, pov: str = "mover") -> tuple[list, int]:
    """(every item's location in order, positions handed to python-chess) of one reader run."""
    out, handed = [], 0
    with open_text(path) as s:
        for item in get_format("pgn").read(s, ReaderOptions(pgn_pov=pov, fast=fast)):
            if isinstance(item, PackedRows):
                out.extend(item.locations[i] for i in range(len(item)))
                assert item.first == item.locations[0]
            else:
                handed += 1
                out.append(item.location)
    return out, handed


def both(tmp_path, data: bytes | None = None, name: str = "x", path=None, pov: str = "mover") -> dict | None:
    """Pack with both paths; assert identical outputs. Returns the summary and the handed count
    (None when both refuse the file alike)."""
    if path is None:
        path = tmp_path / f"{name}.pgn"
        path.write_bytes(data)
    out, errors = [], []
    for fast in (True, False):
        ds = tmp_path / f"{name}-{fast}"
        try:
            s = pack([path], ds, fmt="pgn", options=ReaderOptions(pgn_pov=pov, fast=fast), progress=False)
        except FormatError as e:
            errors.append(str(e))
            continue
        (part,) = ds.glob("part-*.parquet")
        (rej,) = ds.glob("rejects-*.jsonl")
        out.append((s["read"], s["packed"], s["rejected"], read_part(part), rej.read_text()))
    if errors:
        assert len(errors) == 2 and errors[0] == errors[1], errors
        both.last_error = errors[0]
        return None
    (ra, pa_, ja, ta, xa), (rb, pb, jb, tb, xb) = out
    assert (ra, pa_, ja) == (rb, pb, jb)
    assert ta.equals(tb), _first_difference(ta, tb)
    assert xa == xb, _first_line_difference(xa, xb)
    la, handed = locations(path, True, pov)
    lb, _ = locations(path, False, pov)
    assert la == lb
    return {"read": ra, "packed": pa_, "rejected": ja, "handed": handed}


def _first_line_difference(a: str, b: str) -> str:
    for x, y in zip(a.splitlines(), b.splitlines()):
        if x != y:
            return f"{x}\n  vs\n{y}"
    return f"{len(a.splitlines())} vs {len(b.splitlines())} lines"


def _first_difference(ta, tb) -> str:
    for name in ta.column_names:
        a, b = ta.column(name).to_pylist(), tb.column(name).to_pylist()
        if a != b:
            i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            return f"column {name} row {i}: {a[i:i + 1]} vs {b[i:i + 1]} (rows {len(a)} / {len(b)})"
    return "no column differs"
