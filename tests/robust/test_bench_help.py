"""Issue 15 item 11: ``nnue bench NAME --help`` names itself and gives every option of the
benchmark with its help text and, where it has one, its default."""
from __future__ import annotations

import argparse

import pytest

from nnue.commands.bench import bench_names, run_argv as run_bench


def test_every_benchmark_is_listed():
    assert {"activations", "infer", "pack", "sparse_ft", "stream"} <= set(bench_names())


@pytest.mark.parametrize("name", bench_names())
def test_bench_help_gives_every_option_with_help_and_default(name, capsys, monkeypatch):
    seen = []
    real = argparse.ArgumentParser.parse_args

    def spy(self, *a, **kw):
        seen.append(self)
        return real(self, *a, **kw)

    real_mixed = argparse.ArgumentParser.parse_intermixed_args

    def spy_mixed(self, *a, **kw):  # bench train: positional overrides between the options
        seen.append(self)
        return real_mixed(self, *a, **kw)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", spy)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_intermixed_args", spy_mixed)
    with pytest.raises(SystemExit) as e:
        run_bench([name, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: nnue bench {name}"), text[:80]
    (p,) = seen
    fmt = p._get_formatter()
    for action in p._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        opt = action.option_strings[0] if action.option_strings else action.dest
        assert opt in text, opt
        shown = fmt._expand_help(action) if action.help else ""
        assert shown.strip(), f"{name} {opt}: no help text"
        if action.default not in (None, False, argparse.SUPPRESS):
            # argparse wraps help to the terminal's width and breaks a long default (a path under
            # the clone's folder) after a hyphen or anywhere, so compare with all whitespace removed
            assert "default" in shown and "".join(str(action.default).split()) in "".join(text.split()), \
                f"{name} {opt}: default {action.default!r} not shown"
