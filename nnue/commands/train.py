"""``nnue train``: the parser entry and the help; the work is :mod:`nnue.commands.train_run`, imported when
the command runs. Its arguments are Hydra overrides (and Hydra's own flags), so argparse only lists the
command. ``nnue train --help`` is Hydra's help of conf/train.yaml (its config groups and the composed
config), printed by a Hydra entry point with the same config as :func:`nnue.trainer.train.main` that
imports no torch: Hydra and OmegaConf only.

Hydra's help takes seconds (importing Hydra and composing the config: 3.5 s under load, against 0.2 s
for every other ``--help``; bench/results/cli_cpu.json). Its text depends only on the YAML files of
``conf/`` and on Hydra's version, so it is shipped, made by Hydra, in ``conf/train_help.txt`` with the
digest of those configs (:func:`help_digest`) and the version of hydra-core that made it:
``nnue train --help`` prints it when both still match, and asks Hydra otherwise (a config edited in
place, another hydra-core). ``python
scripts/gen_docs.py`` rewrites it when stale (:func:`write_help`); tests/test_docs.py fails when the
digest is stale and tests/cli/test_thin_cli.py when the text is not Hydra's.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes  # standard library only

#: Hydra's flags that print something and exit without calling the task function: answered here, light
HELP_FLAGS = ("-h", "--help", "--hydra-help")


def add_parser(sub) -> None:
    """Add ``nnue train`` to the ``nnue`` sub-command parsers ``sub``."""
    sub.add_parser("train", help="train a net (Hydra overrides; 'nnue train --help' for Hydra's help)",
                   add_help=False).set_defaults(run_argv=run_argv)


#: the folder of the Hydra configs: the ``nnue.conf`` package, found (not imported) through its spec
CONF = Path(list(importlib.util.find_spec("nnue.conf").submodule_search_locations)[0])
#: Hydra's ``nnue train --help`` text, as Hydra printed it, after one line ``digest: <help_digest()>``
SHIPPED_HELP = CONF / "train_help.txt"


def hydra_version() -> str:
    """hydra-core's installed version ("?" when it is not installed), read from its metadata."""
    try:
        return version("hydra-core")
    except PackageNotFoundError:
        return "?"


def help_digest(conf: Path | None = None) -> str:
    """sha256 (hex) of the configs Hydra's help of conf/train.yaml shows: every ``*.yaml`` under
    ``conf`` (relative path and bytes, in sorted order)."""
    conf = CONF if conf is None else conf
    h = hashlib.sha256()
    for f in sorted(conf.rglob("*.yaml")):
        h.update(f"{f.relative_to(conf).as_posix()}\n".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _shipped() -> tuple[str, str, str] | None:
    """(configs digest, hydra-core version, text) of the shipped help, or None."""
    try:
        first, text = SHIPPED_HELP.read_text(encoding="utf-8").split("\n", 1)
        _, digest, _, made_by = first.split(" ")
    except (OSError, ValueError):
        return None
    return digest, made_by, text


def shipped_is_current() -> bool:
    """The shipped help was made from the configs as they are now (whatever Hydra made it):
    ``python scripts/gen_docs.py`` remakes it when not."""
    shipped = _shipped()
    return shipped is not None and shipped[0] == help_digest()


def shipped_help() -> str | None:
    """The shipped Hydra help of ``nnue train --help`` when it is current: made from the configs as
    they are now (:func:`help_digest`) by the hydra-core installed now. Else None."""
    shipped = _shipped()
    if shipped is None or shipped[0] != help_digest() or shipped[1] != hydra_version():
        return None
    return shipped[2]


def hydra_help() -> str:
    """Hydra's ``nnue train --help`` text, made by Hydra now (seconds: imports Hydra, composes)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            _print_help(["--help"])
        except SystemExit as e:  # Hydra exits after its help
            if e.code not in (None, 0):
                raise
    return out.getvalue()


def write_help() -> None:
    """Rewrite ``conf/train_help.txt`` from Hydra (atomically: a temporary file, then a rename)."""
    text = f"digest: {help_digest()} hydra-core: {hydra_version()}\n" + hydra_help()
    atomic_write_bytes(SHIPPED_HELP, text.encode("utf-8"))


def _print_help(argv: list[str]) -> int:
    """Hydra's ``--help`` / ``--hydra-help`` for conf/train.yaml. The task name in Hydra's help comes from
    the file of the decorated function: this module is ``train.py``, as :mod:`nnue.trainer.train` is."""
    import warnings

    import hydra

    # Hydra 1.3's deprecation notice for the launcher plugins' schema (filtered as in nnue.trainer.runs)
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema")

    @hydra.main(version_base="1.3", config_path="pkg://nnue.conf", config_name="train")
    def train(cfg) -> None:  # never called: Hydra prints the help and exits
        raise AssertionError("nnue train --help: Hydra called the task function")

    old = sys.argv
    sys.argv = ["nnue train", *argv]
    try:
        train()
    finally:
        sys.argv = old
    return 0


#: the one line of a run without data (the same words as nnue.trainer.checks.check_train_args)
NO_DATA = "data.path is required (a dataset folder written by 'nnue pack')"


def data_path_missing(argv: list[str]) -> bool:
    """Whether no override gives ``data.path`` and no config of ``conf/`` sets it (conf/data/default.yaml
    leaves it ``???``): then the run is refused at once, before Hydra and torch are imported (they
    took seconds to say the same). Hydra flags (``-m``, ``--cfg`` …) leave it to the full check."""
    import re

    if any(a.startswith("-") for a in argv):
        return False
    keys = [a.split("=", 1)[0].lstrip("+~") for a in argv]
    if any(k in ("data.path", "data") for k in keys):
        return False
    for f in CONF.rglob("*.yaml"):  # a config that sets data.path (none ships; a user's might)
        if f.relative_to(CONF).as_posix() != "data/default.yaml" and \
                re.search(r"^data:[ \t]*\n(?:[ \t]+.*\n|[ \t]*#.*\n|\n)*?[ \t]+path:", f.read_text(), re.M):
            return False
    return True


def run_argv(argv: list[str]) -> int:
    """``nnue train [OVERRIDES]``: Hydra's help, or check the overrides and train."""
    if argv in (["--help"], ["-h"]) and (text := shipped_help()) is not None:
        sys.stdout.write(text)  # Hydra's own text, shipped for its inputs' digest (module docstring)
        return 0
    if any(a in HELP_FLAGS for a in argv):
        return _print_help(argv)
    if data_path_missing(argv):
        print(f"nnue train: error: {NO_DATA}; e.g. nnue train experiment=demo data.path=DATASET "
              f"('nnue train --help' lists the config groups)", file=sys.stderr)
        return 2
    from nnue.commands import train_run  # torch, Lightning, Hydra: only when the command runs

    return train_run.run_argv(argv)

