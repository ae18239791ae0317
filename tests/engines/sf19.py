"""The real Stockfish 19 for the engine tests: our UCI front end for its WebAssembly build
(``scripts/sf19-uci``), the official net in the cache folder (``scripts/ensure_sf19.sh`` puts both
there; these helpers skip with the reason where they are absent), and its ``eval`` trace of many
positions in one process."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

from nnue.selfplay import sf19
# the engine's front end and its eval traces live in the package (the benches use them too)
from nnue.selfplay.sf19 import FRONT_END, LOAD_LINE, EngineAnswerError, eval_traces, run_uci  # noqa: F401


def require_sf19() -> str:
    """The front end's path, or skip with the reason: no Node.js, or the engine not installed."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed (Stockfish 19 runs under it: apt-get install nodejs npm, then "
                    "scripts/ensure_sf19.sh)")
    if not sf19.engine_module_path().is_file():
        pytest.skip(f"Stockfish 19 is not in {sf19.cache_dir()} (scripts/ensure_sf19.sh installs it with npm; "
                    "it says why it could not)")
    return str(FRONT_END)


@functools.lru_cache(maxsize=None)
def _official_ok(path: Path, size: int, mtime: float) -> bool:
    return hashlib.sha256(path.read_bytes()).hexdigest() == sf19.OFFICIAL_SHA256


def require_official_net() -> Path:
    """The official net ``nn-1a298aa575a0.nnue`` in the cache (its SHA-256 checked), or skip
    with the reason."""
    p = sf19.official_net_path()
    if not p.is_file():
        pytest.skip(f"the official Stockfish 19 net is not in {p.parent} (scripts/ensure_sf19.sh takes it out of "
                    "stockfish@19.0.0 with npm; it says why it could not)")
    st = p.stat()
    if st.st_size != sf19.OFFICIAL_BYTES or not _official_ok(p, st.st_size, st.st_mtime):
        pytest.skip(f"{p} is not the official net (size or SHA-256 differ): delete it and run scripts/ensure_sf19.sh")
    return p


def npa_nets() -> list[Path]:
    """Nets written by nnue-pytorch's serializer: the file ``NNUE_NPA_NET``, else every ``.nnue``
    in ``${XDG_CACHE_HOME:-~/.cache}/nnue-forge/npa`` (scripts/npa_sf19_net.sh writes them there)."""
    env = os.environ.get("NNUE_NPA_NET")
    if env:
        return [Path(env)] if Path(env).is_file() else []
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return sorted((Path(base) / "nnue-forge" / "npa").glob("*.nnue"))


def require_npa_nets() -> list[Path]:
    """Stockfish 19 nets written by nnue-pytorch's own serializer (:func:`npa_nets`), or skip
    with the reason."""
    nets = npa_nets()
    if not nets:
        pytest.skip("no net written by nnue-pytorch's serializer (NPA=DIR scripts/npa_sf19_net.sh makes one where "
                    "nnue-pytorch is built, into ~/.cache/nnue-forge/npa; NNUE_NPA_NET names another)")
    return nets


def nnue_part(trace: str) -> str:
    """The NNUE lines of an ``eval`` trace, as the parity tests compare them: the bucket table
    (from "NNUE network contributions" to its closing border line), a blank line, and the two
    "NNUE evaluation" lines (internal units, side to move; pawns, white side). A position in check
    has none: "Final evaluation: none (in check)" is returned as it is."""
    if trace.startswith("Final evaluation: none"):
        return trace
    lines = trace.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("NNUE network contributions"))
    end = next(i for i in range(start + 5, len(lines)) if lines[i].startswith("+---"))
    nn = [x for x in lines if x.startswith("NNUE evaluation")]
    assert len(nn) == 2, trace
    return "\n".join(lines[start:end + 1] + [""] + nn) + "\n"


def internal_value(trace: str) -> int:
    """The "NNUE evaluation ... (side to move, internal units)" value of a trace."""
    m = re.search(r"^NNUE evaluation\s+([+-]?\d+) \(side to move, internal units\)$", trace, re.M)
    assert m, trace
    return int(m.group(1))


def used_bucket(trace: str) -> int:
    """The layer stack the engine used (the table row marked "<-- this bucket is used")."""
    m = re.search(r"^\|\s+(\d)\s+\|.*<-- this bucket is used$", trace, re.M)
    assert m, trace
    return int(m.group(1))
