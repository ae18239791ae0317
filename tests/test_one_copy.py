"""One copy of each shared constant: the score constants (VALUE_NONE 32002, MATE 32000,
MATE_BOUND 31754) and the dataset's flag bits are defined in nnue.pipeline.constants only, and no
other module of ours writes their values as bare integers (issue 22: six copies before). Static:
``ast`` over the package's sources, nothing imported."""
from __future__ import annotations

import ast

from tests.test_import_graph import REPO, modules

NAMES = {"VALUE_NONE", "MATE", "MATE_BOUND", "MAX_PLY", "FLAG_SCORE_NONE", "FLAG_SCORE_MATE", "FLAG_PLY_UNKNOWN",
         "F_NONE", "F_MATE", "F_PLY_UNKNOWN"}
VALUES = {32002, 32000, 31754}
HOME = "nnue.pipeline.constants"


def copies() -> list[str]:
    """Where a module other than HOME binds one of NAMES to a literal, or uses one of VALUES as
    an integer literal in code (strings and docstrings do not count)."""
    out = []
    for name, path in modules().items():
        if name == HOME:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.Tuple, ast.BinOp)):
                targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in NAMES:
                        out.append(f"{path.relative_to(REPO)}:{node.lineno}: {t.id} defined")
            elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) in VALUES:
                out.append(f"{path.relative_to(REPO)}:{node.lineno}: literal {node.value}")
    return out


def test_constants_have_one_home():
    found = copies()
    assert not found, f"define these in {HOME} and import them:\n  " + "\n  ".join(found)


def test_constants_values():
    """The values are Stockfish's (types.h): VALUE_NONE 32002, VALUE_MATE 32000, and
    VALUE_MATE_IN_MAX_PLY = 32000 - MAX_PLY (246) = 31754; the flag bits are distinct powers of two."""
    from nnue.pipeline import constants as c
    from nnue.pipeline.compiled import fixed
    from nnue.pipeline.formats import MATE, MATE_BOUND, VALUE_NONE
    from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE

    assert (c.VALUE_NONE, c.MATE, c.MATE_BOUND) == (32002, 32000, 31754) == (VALUE_NONE, MATE, MATE_BOUND)
    assert (fixed.F_NONE, fixed.F_MATE, fixed.F_PLY_UNKNOWN) == (FLAG_SCORE_NONE, FLAG_SCORE_MATE, FLAG_PLY_UNKNOWN)
    assert sorted((c.FLAG_SCORE_NONE, c.FLAG_SCORE_MATE, c.FLAG_PLY_UNKNOWN)) == [1, 2, 4]
