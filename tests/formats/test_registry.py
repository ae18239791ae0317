"""The dump-format registry (issue 22 item 1): every table derived from the specs, the record
types in a leaf module, one-way imports, and a registry the CLI's parser can import cheaply."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nnue.pipeline import formats
from nnue.pipeline.formats import BUILTIN, EXTENSIONS, FORMATS

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "lightning", "pytorch_lightning", "pyarrow", "numba")


def _imports(path: Path) -> set[str]:
    """Absolute names of the nnue.pipeline modules a module imports (relative imports resolved),
    at any depth (function-local included)."""
    pkg = "nnue.pipeline." + ".".join(path.relative_to(REPO / "pipeline").with_suffix("").parts[:-1])
    pkg = pkg.rstrip(".")
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_tables_are_derived_from_the_specs():
    assert list(FORMATS.values()) == list(BUILTIN)
    assert formats.names() == ["plain", "bullet-text", "pgn", "epd", "binpack", "bin", "bulletformat",
                               "marlinformat", "viriformat"]
    assert formats.writer_names() == ["plain", "bullet-text", "binpack", "bulletformat", "marlinformat", "viriformat"]
    # the chained formats are written as chains (a stream writer), the others row by row
    assert [s.name for s in BUILTIN if s.write_stream is not None] == ["binpack", "viriformat"]
    assert EXTENSIONS == {".plain": ("plain",), ".txt": ("bullet-text",), ".pgn": ("pgn",), ".epd": ("epd",),
                          ".binpack": ("binpack",), ".bin": ("bin", "viriformat"), ".bf": ("bulletformat",),
                          ".marlin": ("marlinformat",), ".vf": ("viriformat",), ".viri": ("viriformat",)}
    # every format is split into byte ranges today; the PGN one decodes Latin-1
    assert all(s.find_ranges is not None for s in BUILTIN)
    assert [s.name for s in BUILTIN if s.errors != "replace"] == ["pgn"]
    for s in BUILTIN:
        assert s.write_block is None or s.write is not None, s.name  # a bulk writer has its oracle
        assert s.write is None or s.write_stream is None, s.name  # one way of writing a format


def test_compiled_fast_paths_load():
    """Each spec's loader gives the numba module its reader uses (loaded only when called)."""
    for s in BUILTIN:
        mod = s.compiled()
        assert mod.__name__.startswith("nnue.pipeline.compiled."), s.name


def test_imports_are_one_way():
    """records imports no other nnue module but the constants (a leaf: no imports); the compiled package
    never imports the formats; the
    format modules import the compiled package only inside functions (numba, see below)."""
    leaf = _imports(REPO / "pipeline" / "records.py")
    assert not [m for m in leaf if m.startswith("nnue") and not m.startswith("nnue.pipeline.constants")], leaf
    assert not [m for m in _imports(REPO / "pipeline" / "constants.py") if m.startswith("nnue")]
    for path in sorted((REPO / "pipeline" / "compiled").glob("*.py")):
        bad = [m for m in _imports(path) if m.startswith("nnue.pipeline.formats")]
        assert not bad, (path.name, bad)
    for path in sorted((REPO / "pipeline" / "formats").glob("*.py")):
        top = [n for n in ast.parse(path.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {(n.module or "") for n in top if isinstance(n, ast.ImportFrom)} | \
            {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
        assert not [m for m in names if "compiled" in m or m.split(".")[0] in HEAVY], (path.name, names)


def test_registry_imports_no_heavy_module():
    """What the CLI's parser needs (names, writers, extensions) costs no torch, Lightning,
    pyarrow or numba: checked in a fresh interpreter."""
    code = ("import sys, json; from nnue.pipeline import formats; "
            "formats.names(); formats.writer_names(); sorted(formats.EXTENSIONS); "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


@pytest.mark.parametrize("name,size,want", [("a.bin", 80, "bin"), ("a.bin", 81, "viriformat")])
def test_shared_extension_settled_by_size_and_sniff(tmp_path, name, size, want):
    """.bin is claimed by two formats: Stockfish .bin when the size is a multiple of its record
    and the first record decodes, else viriformat (the last claimant)."""
    import chess

    from tests.formats.formats_testlib import encode_psv

    rec = encode_psv(chess.Board(), chess.Move.from_uci("e2e4"), 10, 0, 0)
    p = tmp_path / name
    p.write_bytes((rec * 3)[:size])
    assert formats.detect_format(p) == want
