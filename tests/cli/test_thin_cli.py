"""The ``nnue`` parser is built, and ``nnue --version`` and every ``nnue CMD --help`` answer, without
importing torch, Lightning, pyarrow, numba, Hydra, pandas, scipy or matplotlib; and ``nnue eval
--fen/--fens`` of a net imports neither pyarrow nor the trainer (nor the Stockfish annotator).

Each check runs in a fresh interpreter (a subprocess): in the test process those modules are loaded
already. The sub-commands are read from the parser itself, so a new command is covered without
editing this file. ``nnue train --help`` is Hydra's own help of conf/train.yaml (an existing behaviour,
tests/e2e/test_main_job.py), shipped in conf/train_help.txt for the digest of its inputs, so it imports
nothing heavy either; Hydra is asked (Hydra and OmegaConf imported) only when the configs changed. Timing is not
tested here; ``nnue bench cli`` measures it (bench/results/cli_cpu.json).
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: never imported by building the parser, --version or a --help (the issue's list)
HEAVY = ("torch", "lightning", "pytorch_lightning", "pyarrow", "numba", "hydra", "omegaconf", "pandas", "scipy",
         "matplotlib", "triton", "numpy", "chess")
#: the commands whose choices come from the format registry (nnue.commands.format_table: its names are
#: shipped for the digest of their sources, so their help imports nothing heavy either)
REGISTRY_HELP = ("pack", "convert")

# Runs in the fresh interpreter: build the parser, then each argv of ARGVS through nnue.cli.main with stdout
# captured; prints one JSON object: the sub-command paths, each argv's exit status and output, and the
# HEAVY modules that were imported.
_PROBE = r"""
import argparse, contextlib, io, json, sys
HEAVY, ARGVS = json.loads(sys.argv[1]), json.loads(sys.argv[2])
from nnue.cli import build_parser, main

def walk(p, path):
    yield path
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk(sub, path + [name])

paths = [w for w in walk(build_parser(), []) if w]
after_build = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
runs = []
# default: every sub-command but train (its help: a process of its own), then --version
SEPARATE = ("train",)
for argv in (ARGVS or [p + ["--help"] for p in paths if p[0] not in SEPARATE] + [["--version"]]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    runs.append({"argv": argv, "rc": rc, "out": out.getvalue()})
# a HEAVY name is a module and its sub-modules ("nnue.trainer" covers nnue.trainer.metrics)
loaded = sorted({h for m in sys.modules for h in HEAVY if m == h or m.startswith(h + ".")})
print(json.dumps({"paths": paths, "after_build": after_build, "runs": runs, "loaded": loaded}))
"""


def _probe(argvs: list[list[str]] | None = None, heavy: tuple[str, ...] = HEAVY) -> dict:
    env = {**os.environ, "COLUMNS": "100"}
    r = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(heavy), json.dumps(argvs or [])],
                       capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def every_help() -> dict:
    """``--help`` of every sub-command but ``train``, and ``--version``, in one fresh interpreter."""
    return _probe()


def test_building_the_parser_imports_nothing_heavy(every_help):
    assert every_help["after_build"] == []


def test_every_help_and_version_import_nothing_heavy(every_help):
    # every sub-command of the parser, the nested `sweep report` among them
    assert {" ".join(p) for p in every_help["paths"]} >= {"pack", "eval", "train", "bench", "sweep", "sweep report",
                                                           "registry", "import-net", "match", "pack-shards"}
    assert len(every_help["runs"]) == len(every_help["paths"])  # all but train, plus --version
    assert every_help["loaded"] == [], f"imported by --help/--version: {every_help['loaded']}"
    for r in every_help["runs"]:
        assert r["rc"] == 0, r
        cmd = " ".join(r["argv"][:-1])
        if r["argv"] == ["--version"]:
            assert r["out"].startswith("nnue-forge ")
        elif cmd not in ("retrain", "pack-shards"):  # those two print their module's docstring and usage
            assert r["out"].startswith(f"usage: nnue {cmd}"), r["out"][:200]
        else:
            assert f"usage: nnue {cmd}" in r["out"]


def _shipped_train_help_usable() -> None:
    """Skip, with the reason, where conf/train_help.txt was made by another hydra-core than the one
    installed: `nnue train --help` then asks Hydra (tested below), and only that hydra-core's help is known."""
    from nnue.commands import train

    shipped = train._shipped()
    assert shipped is not None and train.shipped_is_current(), "stale: run python scripts/gen_docs.py"
    if shipped[1] != train.hydra_version():
        pytest.skip(f"conf/train_help.txt was made by hydra-core {shipped[1]}, {train.hydra_version()} is installed: "
                    "nnue train --help asks Hydra (python scripts/gen_docs.py after removing the file remakes it)")


def test_train_help_is_hydras_and_imports_nothing_heavy():
    """``nnue train --help`` prints Hydra's help as shipped for the configs' digest: no Hydra import."""
    _shipped_train_help_usable()
    probe = _probe([["train", "--help"]])
    (r,) = probe["runs"]
    assert r["rc"] == 0 and "Powered by Hydra" in r["out"] and "experiment:" in r["out"]
    assert probe["loaded"] == [], probe["loaded"]


def test_shipped_train_help_is_what_hydra_prints():
    """conf/train_help.txt is current (its digest) and its text is Hydra's own help, made now."""
    from nnue.commands import train

    _shipped_train_help_usable()
    assert train.shipped_help() == train.hydra_help()


def test_train_help_asks_hydra_when_the_config_changed(monkeypatch, capsys, tmp_path):
    """A shipped help whose digest does not match the configs (edited in place) is not printed: Hydra is asked."""
    from nnue.commands import train

    stale = tmp_path / "train_help.txt"
    monkeypatch.setattr(train, "SHIPPED_HELP", stale)
    asked = []
    monkeypatch.setattr(train, "_print_help", lambda argv: asked.append(argv) or 0)
    # configs changed since it was made; then made by another hydra-core
    for first in ("digest: 0 hydra-core: " + train.hydra_version(), f"digest: {train.help_digest()} hydra-core: 0.0"):
        stale.write_text(first + "\nnot Hydra's\n")
        assert train.run_argv(["--help"]) == 0
        assert asked.pop() == ["--help"] and "not Hydra's" not in capsys.readouterr().out
    assert train.shipped_is_current()  # another hydra-core does not make the file stale, only unused
    # a changed config changes the digest
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "a.yaml").write_text("hidden: 1\n")
    before = train.help_digest(conf)
    (conf / "model" / "a.yaml").write_text("hidden: 2\n")
    assert train.help_digest(conf) != before


@pytest.mark.parametrize("cmd", sorted(REGISTRY_HELP))
def test_registry_choices_are_read_only_for_their_help(cmd):
    """``nnue pack --help`` / ``nnue convert --help`` list the format registry's names, from the shipped
    table (nnue.commands.format_table) when it is current: nothing heavy imported."""
    from nnue.pipeline import formats

    probe = _probe([[cmd, "--help"]])
    (r,) = probe["runs"]
    assert r["rc"] == 0 and r["out"].startswith(f"usage: nnue {cmd}")
    # convert: "chained" (the in-place upgrade), then the writers
    names = ["auto", *formats.names()] if cmd == "pack" else ["chained", *formats.writer_names()]
    assert "{" + ",".join(names) + "}" in r["out"].replace("\n", "").replace(" ", "")
    if cmd == "pack":
        assert ", ".join(sorted(formats.EXTENSIONS)) in " ".join(r["out"].split())
    assert probe["loaded"] == [], probe["loaded"]


def test_format_table_is_the_registrys_and_falls_back_when_stale(monkeypatch, tmp_path):
    """The shipped table equals the registry's names; a table whose digest does not match the sources is
    not used (the registry is asked)."""
    from nnue.commands import format_table

    assert format_table.shipped_table() == format_table.live_table(), "stale: run python scripts/gen_docs.py"
    stale = tmp_path / "format_table.json"
    stale.write_text(json.dumps({"digest": "0", "names": ["x"], "writers": [], "extensions": []}))
    monkeypatch.setattr(format_table, "SHIPPED", stale)
    assert format_table.shipped_table() is None
    monkeypatch.setattr(format_table, "_registry_imported", lambda: False)  # as in a fresh `nnue pack --help`
    monkeypatch.setattr(format_table, "live_table", lambda: {"names": ["from the registry"]})
    assert format_table.table()["names"] == ["from the registry"]


def test_registry_choices_check_values():
    """A --format outside the registry is one usage error naming the registry's choices (status 2)."""
    probe = _probe([["pack", "x.plain", "-o", "out", "--format", "nope"]])
    (r,) = probe["runs"]
    assert r["rc"] == 2


def test_retrain_help_is_the_modules_docstring():
    """The help is read from nnue.trainer.retrain's source (not imported): it must still be its docstring."""
    import nnue.trainer.retrain as retrain
    from nnue.commands.retrain import help_text

    first, rest = retrain.__doc__.split("\n\n", 1)
    assert help_text().startswith(first + "\n\nusage: nnue retrain") and help_text().endswith(rest)


def _error_classes() -> list[tuple[str, str]]:
    """(module, class) of every class named ``*Error`` in the project's packages, found in the source."""
    found = []
    for folder in ("pipeline", "trainer", "inference", "selfplay", "kernels", "nnue"):
        for f in sorted((REPO / folder).rglob("*.py")):
            rel = f.relative_to(REPO).with_suffix("")
            parts = rel.parts if folder == "nnue" else ("nnue",) + rel.parts
            module = ".".join(p for p in parts if p != "__init__")
            for node in ast.parse(f.read_text()).body:
                if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                    found.append((module, node.name))
    return found


def test_every_project_error_is_a_known_error_of_the_policy():
    """nnue.cli.KNOWN_ERRORS names only built-in classes, so that the error policy imports no torch: every
    error class of the project must therefore subclass one of them to be reported as bad input (status 2,
    one line) and not as a bug (status 1)."""
    import importlib

    from nnue.cli import KNOWN_ERRORS

    classes = _error_classes()
    assert len(classes) >= 10  # FormatError, ManifestError, NetFormatError, ExportError, RegistryError ...
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, KNOWN_ERRORS), f"{module}.{name} is no subclass of {KNOWN_ERRORS}"


def test_a_project_error_is_one_line_status_2(capsys):
    """The policy without the classes it used to import: a NetFormatError from a bad net file is still bad input."""
    from nnue.cli import main

    assert main(["eval", str(REPO / "pyproject.toml"), "--fen", "4k3/8/8/8/8/8/8/4K3 w - - 0 1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nnue eval: error:") and "pyproject.toml" in err[0]


def test_every_command_module_is_in_the_parser():
    """One module per command: each light module of nnue/commands adds exactly its command."""
    import argparse

    from nnue.commands import COMMANDS

    for command in COMMANDS:
        p = argparse.ArgumentParser()
        sub = p.add_subparsers()
        command.add_parser(sub)
        assert len(sub.choices) == 1, command.__name__
        (parser,) = sub.choices.values()
        assert parser.get_default("func") is not None or parser.get_default("run_argv") is not None \
            or any(isinstance(a, argparse._SubParsersAction) for a in parser._actions), command.__name__


#: never imported by ``nnue eval --fen/--fens`` of a net: the dataset stream (pyarrow), the trainer (its
#: metrics among them), the Stockfish annotator, the training kernels and what only training needs
EVAL_HEAVY = ("pyarrow", "nnue.trainer", "nnue.pipeline.annotate", "nnue.pipeline.stream", "nnue.pipeline.manifest",
              "nnue.kernels", "triton", "lightning", "pytorch_lightning", "hydra", "omegaconf", "pandas", "matplotlib")
EVAL_FENS = ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNB1KBNR w KQkq - 0 1", "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1",
             "r3k2r/pp3ppp/2n5/3p4/3P4/2N5/PP3PPP/R3K2R b KQkq - 3 12"]


@pytest.fixture(scope="module")
def eval_nets(tmp_path_factory) -> dict:
    """A perspective net (chess768), a deep net (halfkav2_hm) and a residual net on the material base,
    written as net.safetensors, with their evals of EVAL_FENS made in this process."""
    from nnue.inference import evaluate_fens, residual
    from tests.netfiles import make_deep_int_net, make_int_net

    d = tmp_path_factory.mktemp("eval_nets")
    nets = {"perspective": make_int_net("chess768", hidden=16, seed=2),
            "deep": make_deep_int_net("halfkav2_hm", hidden=16, seed=3),
            "residual": make_int_net("chess768", hidden=16, seed=4)}
    nets["residual"].arch["residual"] = residual.header("material", 0.5)
    out = {}
    for name, net in nets.items():
        path = d / f"{name}.safetensors"
        net.save(path)
        out[name] = (path, [int(v) for v in evaluate_fens(net, EVAL_FENS)])
    (d / "fens.txt").write_text("\n".join(EVAL_FENS) + "\n")
    return out


@pytest.mark.parametrize("kind", ["perspective", "deep", "residual"])
def test_eval_of_fens_imports_neither_pyarrow_nor_the_trainer(eval_nets, kind):
    """``nnue eval NET --fen`` and ``--fens`` in a fresh interpreter: the evals of the net, and none of
    EVAL_HEAVY imported (the inference package, its compiled path and the position parser only)."""
    path, want = eval_nets[kind]
    fens_file = path.parent / "fens.txt"
    probe = _probe([["eval", str(path), "--fen", EVAL_FENS[1]], ["eval", str(path), "--fens", str(fens_file)]],
                   heavy=EVAL_HEAVY)
    one, many = probe["runs"]
    assert one["rc"] == 0 and many["rc"] == 0, probe["runs"]
    assert [int(v) for v in one["out"].split()] == want[1:2]
    assert [int(v) for v in many["out"].split()] == want
    assert probe["loaded"] == [], f"imported by nnue eval --fen/--fens: {probe['loaded']}"
