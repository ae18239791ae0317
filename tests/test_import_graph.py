"""The import graph of the ``nnue`` package, built statically (``ast``, nothing imported): no cycle
among module-level imports, and the layer contracts of the design ("Imports across layers":
inference imports only torch, numpy, safetensors and the torch-only parts of the pipeline, never
the trainer, the kernels, Lightning, Hydra or pyarrow; selfplay never imports the trainer; the
pipeline never imports the trainer or the kernels), checked for module-level AND function-local
imports.

An import is *module-level* when it runs on ``import`` of the module (top level, or inside a
top-level ``if``/``try``/``with`` block, ``if TYPE_CHECKING:`` excluded); *function-local* when
it sits inside a ``def`` (it runs on the first call). A function-local import does not make a
module-level cycle, but it is where one hides: the graph keeps them apart (``Edge.local``),
:func:`test_no_cycle_through_function_local_imports` looks for cycles with them counted, and
:func:`test_function_local_share` prints their count and share per layer.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None


@dataclass(frozen=True)
class Edge:
    """``src`` imports ``dst`` (both dotted module names; ``dst`` may be third-party) at ``line``
    of ``path``; ``local``: inside a function."""

    src: str
    dst: str
    path: str
    line: int
    local: bool

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _package_dirs() -> dict[str, Path]:
    """Package name -> folder, from pyproject.toml's ``[tool.setuptools] package-dir`` (so the
    test follows the packaging), ``nnue.*`` only."""
    if tomllib is None:  # pragma: no cover
        pytest.skip("tomllib needs Python 3.11")
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    dirs = conf["tool"]["setuptools"]["package-dir"]
    return {pkg: REPO / folder for pkg, folder in dirs.items() if pkg.split(".")[0] == "nnue"}


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    """Every module of the ``nnue`` package: dotted name -> file."""
    out: dict[str, Path] = {}
    dirs = _package_dirs()
    for pkg, folder in sorted(dirs.items()):
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            # a folder mapped to a package of its own (nnue.pipeline = pipeline/) is not also
            # a sub-package of the parent folder's package
            if any(d != folder and d in f.parents and len(d.parts) > len(folder.parts)
                   for d in dirs.values()):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = f
    return out


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _resolve(src: str, node: ast.ImportFrom) -> list[str]:
    """The modules a ``from X import a, b`` needs: X.a and X.b where those are modules of ours
    (``from . import foo``), and X itself when some name is not a sub-module (an attribute of X,
    which needs X's ``__init__`` to have run that far)."""
    if node.level:
        base = src.split(".") if _is_package(src) else src.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    mods = modules()
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
    return subs + ([target] if len(subs) < len(node.names) else [])


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


@lru_cache(maxsize=1)
def edges() -> tuple[Edge, ...]:
    """Every import statement of every module, as edges (one per named module)."""
    out: list[Edge] = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        rel = str(path.relative_to(REPO))

        def visit(node: ast.AST, local: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _type_checking(child):
                    continue
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        out.append(Edge(name, alias.name, rel, child.lineno, local))
                elif isinstance(child, ast.ImportFrom):
                    for dst in _resolve(name, child):
                        out.append(Edge(name, dst, rel, child.lineno, local))
                else:
                    inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    visit(child, inner)

        visit(tree, False)
    return tuple(out)


def _ours(dst: str) -> str | None:
    """The module of ours ``dst`` names (a dotted name of ours or its nearest package), else None."""
    mods = modules()
    parts = dst.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in mods:
            return cand
        parts.pop()
    return None


def _parents(name: str) -> list[str]:
    """The packages whose ``__init__`` runs before ``name`` is imported (nnue.a.b -> nnue, nnue.a)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def graph(local: bool = False) -> dict[str, dict[str, Edge]]:
    """Module -> {imported module of ours -> first edge}, module-level imports only (or with the
    function-local ones too when ``local``). Importing ``a.b.c`` also runs ``a`` and ``a.b``: an
    import of a sub-module is an edge to each package above it as well."""
    g: dict[str, dict[str, Edge]] = {m: {} for m in modules()}
    for e in edges():
        if e.local and not local:
            continue
        dst = _ours(e.dst)
        if dst is None:
            continue
        if dst != e.src:
            g[e.src].setdefault(dst, e)
        for d in _parents(dst):  # implicit: the packages above dst run first (those above src already ran)
            if d != e.src and d not in _parents(e.src):
                g[e.src].setdefault(d, e)
    return g


def cycles(g: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(g):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def _describe(comp: list[str], g: dict[str, dict[str, Edge]]) -> str:
    inside = set(comp)
    lines = [f"  cycle of {len(comp)} modules: {', '.join(comp)}"]
    for m in comp:
        for d, e in sorted(g[m].items()):
            if d in inside:
                lines.append(f"    {m} -> {d}  ({e.where()})")
    return "\n".join(lines)


# -- layer contracts (../shared/DESIGN.md, "Imports across layers") ----------------------------------
#: the torch-only parts of the pipeline that inference may import: the feature sets, the board
#: codec, atomic writes, and the leaf module of constants
PIPELINE_FOR_INFERENCE = ("nnue.pipeline", "nnue.pipeline.features", "nnue.pipeline.board",
                          "nnue.pipeline.atomic", "nnue.pipeline.constants")
THIRD_PARTY_FOR_INFERENCE = {"torch", "numpy", "safetensors"}
#: the inference modules that may import numba (and its llvmlite): the compiled integer paths, an
#: optional accelerator with a torch fallback: the shared core ``nnue.inference.compiled`` and each
#: kind's ``compiled`` module (``nnue.inference.kinds.<kind>.compiled``). Other inference modules
#: import them only inside a function (on first use), so that ``import nnue.inference`` and every
#: other module stay free of numba (DESIGN.md's contract with this one exception)
COMPILED_FOR_INFERENCE = "nnue.inference.compiled"


def compiled_module(name: str) -> bool:
    """Whether ``name`` is one of the inference modules allowed numba (:data:`COMPILED_FOR_INFERENCE`
    or a kind's ``compiled`` module)."""
    return name == COMPILED_FOR_INFERENCE or (name.startswith("nnue.inference.kinds.") and name.endswith(".compiled"))


COMPILED_THIRD_PARTY = {"numba", "llvmlite"}
#: and the pipeline's numba bit intrinsics (popcount, lowest set bit), one copy for both layers
COMPILED_PIPELINE = ("nnue.pipeline.compiled", "nnue.pipeline.compiled.bits")
NEVER = {
    # layer -> (forbidden prefixes of ours, forbidden third-party top-level packages)
    "nnue.inference": (("nnue.trainer", "nnue.kernels", "nnue.selfplay", "nnue.cli", "nnue.cmd_"),
                       {"lightning", "pytorch_lightning", "lightning_fabric", "hydra", "omegaconf", "pyarrow",
                        "triton", "numba"}),
    "nnue.selfplay": (("nnue.trainer",), set()),
    "nnue.pipeline": (("nnue.trainer", "nnue.kernels"), set()),
}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".") or (prefix.endswith("_") and name.startswith(prefix))


def _stdlib(top: str) -> bool:
    return top in sys.stdlib_module_names or top == "__future__"


def violations(es=None) -> list[str]:
    """Every import (module-level or function-local) in ``es`` (default: all of ours) that breaks
    a layer contract."""
    out = []
    for e in edges() if es is None else es:
        for layer, (ours, third) in NEVER.items():
            if not _under(e.src, layer):
                continue
            dst = _ours(e.dst)
            kind = "function-local" if e.local else "module-level"
            if dst is not None:
                bad = any(_under(dst, p) for p in ours)
                if layer == "nnue.inference" and _under(dst, "nnue.pipeline"):
                    bad = dst != "nnue.pipeline" and not any(_under(dst, p) for p in PIPELINE_FOR_INFERENCE[1:])
                    if compiled_module(e.src) and dst in COMPILED_PIPELINE:
                        bad = False
                if layer == "nnue.inference" and compiled_module(dst) and not e.local and not compiled_module(e.src):
                    bad = True  # the compiled path loads numba: only on first use
                if bad:
                    out.append(f"{e.where()}: {e.src} imports {dst} ({kind})")
                continue
            top = e.dst.split(".")[0]
            if compiled_module(e.src) and top in COMPILED_THIRD_PARTY:
                continue
            if top in third or (layer == "nnue.inference" and not _stdlib(top)
                                and top not in THIRD_PARTY_FOR_INFERENCE and top != "nnue"):
                out.append(f"{e.where()}: {e.src} imports {e.dst} ({kind})")
    return out


def reached(start: str) -> tuple[set[str], set[str]]:
    """What ``import start`` runs: (modules of ours, third-party top-level packages), following
    module-level imports transitively."""
    g = graph()
    third_of: dict[str, set[str]] = {}
    for e in edges():
        if not e.local and _ours(e.dst) is None:
            third_of.setdefault(e.src, set()).add(e.dst.split(".")[0])
    seen, todo = set(), [*_parents(start), start]
    while todo:
        m = todo.pop()
        if m in seen or m not in g:
            continue
        seen.add(m)
        todo.extend(g[m])
    third = set().union(*(third_of.get(m, set()) for m in seen))
    return seen, {t for t in third if not _stdlib(t)}


# -- the tests --------------------------------------------------------------------------------------
def test_modules_found():
    """The walk finds every layer (a broken package-dir mapping would make the other tests vacuous)."""
    mods = modules()
    for pkg in ("nnue.cli", "nnue.pipeline.pack", "nnue.pipeline.formats", "nnue.trainer.export",
                "nnue.inference.loader", "nnue.kernels", "nnue.selfplay.mcts", "nnue.spec.activations"):
        assert pkg in mods, pkg
    assert len(mods) > 100
    assert sum(not e.local for e in edges()) > 300


def test_no_module_level_cycle():
    """No cycle among module-level imports: a reader follows a position's path by its imports."""
    g = graph()
    found = cycles(g)
    assert not found, "module-level import cycles:\n" + "\n".join(_describe(c, g) for c in found)


def test_no_cycle_through_function_local_imports():
    """No cycle either when the function-local imports are counted: a lazy import that closes a
    loop is a cycle held together by import order. The pipeline's format readers and compiled
    decoders (``pipeline/formats`` <-> ``pipeline/compiled``) and the feature-set registry
    (``pipeline/features/__init__`` <-> its modules) are the ones that remain: their record types
    and spec classes move to leaf modules in the formats and features registries (issue 22 item
    1), which this test waits for; each cycle is listed with the import lines that close it."""
    g = graph(local=True)
    found = cycles(g)
    assert not found, ("import cycles through function-local imports (module-level + function-local):\n"
                       + "\n".join(_describe(c, g) for c in found))


def test_layer_contracts():
    """DESIGN.md "Imports across layers", for module-level and function-local imports alike."""
    bad = violations()
    assert not bad, "imports that break the layer contracts:\n  " + "\n  ".join(bad)


def test_layer_contracts_transitive():
    """``import nnue.inference`` (and each inference module) loads no trainer, kernels, Lightning,
    Hydra, pyarrow, Triton or numba through the modules it imports, however deep."""
    ours_bad, third_bad = NEVER["nnue.inference"]
    for m in [m for m in modules() if _under(m, "nnue.inference")]:
        seen, third = reached(m)
        if compiled_module(m):  # the modules allowed numba (see COMPILED_FOR_INFERENCE)
            third = third - COMPILED_THIRD_PARTY
        else:
            assert not [s for s in seen if compiled_module(s)], (m, "loads a compiled path on import")
        assert not [s for s in seen if any(_under(s, p) for p in ours_bad)], (m, sorted(seen))
        assert not third & third_bad, (m, sorted(third & third_bad))
        assert third <= THIRD_PARTY_FOR_INFERENCE, (m, sorted(third - THIRD_PARTY_FOR_INFERENCE))
    for layer in ("nnue.selfplay", "nnue.pipeline"):
        for m in [m for m in modules() if _under(m, layer)]:
            seen, _ = reached(m)
            assert not [s for s in seen if any(_under(s, p) for p in NEVER[layer][0])], (m, sorted(seen))


def test_contract_checker_catches_violations():
    """The checker itself flags what it must, module-level or function-local, and passes what is allowed."""
    bad = [Edge("nnue.inference.loader", "nnue.trainer.export", "inference/loader.py", 1, True),
           Edge("nnue.inference.net", "pyarrow.parquet", "inference/net.py", 2, False),
           Edge("nnue.inference.net", "nnue.pipeline.pack", "inference/net.py", 3, False),
           Edge("nnue.selfplay.mcts", "nnue.trainer.model", "selfplay/mcts.py", 4, True),
           Edge("nnue.pipeline.pack", "nnue.kernels.sparse_ft", "pipeline/pack.py", 5, False),
           Edge("nnue.inference.net", "numba", "inference/net.py", 6, True),
           Edge("nnue.inference.kinds.perspective", "nnue.inference.compiled", "inference/kinds/perspective/net.py", 7, False),
           Edge("nnue.inference.kinds.sfnnv16.net", "nnue.inference.kinds.sfnnv16.compiled", "inference/kinds/sfnnv16/net.py", 8, False)]
    assert len(violations(bad)) == len(bad)
    ok = [Edge("nnue.inference.net", "nnue.pipeline.features", "inference/net.py", 1, False),
          Edge("nnue.inference.compiled", "numba", "inference/compiled.py", 1, False),
          Edge("nnue.inference.kinds.perspective", "nnue.inference.compiled", "inference/kinds/perspective/net.py", 2, True),
          Edge("nnue.inference.net", "torch", "inference/net.py", 2, False),
          Edge("nnue.selfplay.mcts", "nnue.inference.api", "selfplay/mcts.py", 3, True),
          Edge("nnue.trainer.export", "nnue.kernels", "trainer/export.py", 4, False),
          Edge("nnue.inference.kinds.sfnnv16.compiled", "numba", "inference/kinds/sfnnv16/compiled.py", 5, False),
          Edge("nnue.inference.kinds.sfnnv16.compiled", "nnue.inference.compiled", "inference/kinds/sfnnv16/compiled.py", 6, False),
          Edge("nnue.inference.kinds.sfnnv16.net", "nnue.inference.kinds.sfnnv16.compiled", "inference/kinds/sfnnv16/net.py", 7, True)]
    assert violations(ok) == []


def function_local_imports() -> dict[str, tuple[int, int]]:
    """Per layer (nnue.cli, nnue.pipeline, ...): (function-local import statements, all import
    statements) of its modules."""
    out: dict[str, list[int]] = {}
    for path, line, local, src in {(e.path, e.line, e.local, e.src) for e in edges()}:
        layer = ".".join(src.split(".")[:2])
        c = out.setdefault(layer, [0, 0])
        c[0] += local
        c[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def test_function_local_share(capsys):
    """Count the function-local imports of our own modules (the issue measured 37% of all imports
    before the clean-up; they are what hides a cycle or a heavy dependency), print them per layer,
    and check that every import of ours names a module that exists (a stale lazy import only fails
    when its function runs)."""
    per = function_local_imports()
    local, total = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
    with capsys.disabled():
        print(f"\nimport statements: {total}, function-local: {local} ({local / total:.0%}); per layer: "
              + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in per.items()))
    assert 0 < local < total
    mods = modules()
    missing = sorted({f"{e.where()}: {e.dst}" for e in edges() if e.dst.split(".")[0] == "nnue" and e.dst not in mods})
    assert not missing, missing


def test_cycle_finder_finds_cycles():
    """The cycle finder itself: a 3-cycle and a self-contained pair are found, a chain is not."""
    e = Edge("a", "b", "x.py", 1, False)
    g = {"a": {"b": e}, "b": {"c": e}, "c": {"a": e}, "d": {"e": e}, "e": {"d": e}, "f": {"a": e}}
    assert cycles(g) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b": e}, "b": {"c": e}, "c": {}}) == []
