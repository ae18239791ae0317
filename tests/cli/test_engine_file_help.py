"""The help of the commands that read an engine's own net file (``nnue eval NET``, ``nnue annotate
--teacher``) names every engine file a kind reads: ``nnue eval --help`` once named only Stockfish
15.1's ``.nnue`` although it evaluates Stockfish 19's as well."""
from __future__ import annotations

import argparse

import pytest

from nnue.cli import build_parser
from nnue.inference import kinds


def _help(command: str) -> str:
    for a in build_parser()._actions:
        if isinstance(a, argparse._SubParsersAction):
            return " ".join(a.choices[command].format_help().split())
    raise AssertionError("nnue has no sub-commands")


@pytest.mark.parametrize("command", ["eval", "annotate", "import-net"])
def test_help_names_every_engine_file_a_kind_reads(command):
    readers = sorted({k.engine_reader.name for k in kinds.KINDS.values() if k.engine_reader})
    assert len(readers) >= 2, readers  # Stockfish 15.1 and 19
    text = _help(command)
    missing = [r for r in readers if r not in text]
    assert not missing, f"nnue {command} --help does not name {missing}"
