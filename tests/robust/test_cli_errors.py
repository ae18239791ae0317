"""Issue 15 items 10-11: no traceback reaches a user. Every sub-command is swept with wrong
paths, wrong kinds of file, empty, huge and missing values: each case is one line on stderr,
``nnue <cmd>: error: ...``, and status 2. ``NNUE_DEBUG=1`` shows the traceback instead. Plus
``--version`` and help texts."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from nnue.cli import build_parser, main
from tests.netfiles import make_model, write_weights

KING_FEN = "4k3/8/8/8/8/8/8/4K3 w - - 0 1"


@pytest.fixture(scope="module")
def env(tmp_path_factory, sample_dataset):
    from nnue.trainer.export import export

    t = tmp_path_factory.mktemp("cli")
    (t / "file.txt").write_text("hello\n")
    (t / "empty").mkdir()
    (t / "random.bin").write_bytes(os.urandom(3000))
    (t / "badman").mkdir()
    (t / "badman" / "manifest.json").write_text("{nope")
    (t / "listman").mkdir()
    (t / "listman" / "manifest.json").write_text("[1, 2]")
    ck = write_weights(make_model("crelu"), t / "w.safetensors", sample_dataset)
    export(ck, t / "net", max_positions=0)
    (t / "bom_junk.fens").write_text(KING_FEN + " trailing junk\n")
    part = next(sample_dataset.glob("part-*.parquet"))
    return {"t": t, "ds": sample_dataset, "net": t / "net" / "net.safetensors", "netdir": t / "net",
            "ck": ck, "part": part, "sample": "data/sample/sf15-n5000-s1-sample.plain"}


def _fmt(args, e):
    return [a.format(**{k: str(v) for k, v in e.items()}) for a in args]


# (arguments, a fragment the one line must contain)
CASES = [
    # pack
    (["pack", "{t}/nonexist", "-o", "{t}/o"], "no such file or folder"),
    (["pack", "{sample}", "-o", "{t}/file.txt"], "exists and is not a folder"),
    (["pack", "{sample}", "-o", "{t}/file.txt/sub"], "file.txt/sub"),
    (["pack", "{t}/empty", "-o", "{t}/o"], "no dump files"),
    (["pack", "{sample}", "-o", "{t}/o", "--workers", "0"], "--workers"),
    (["pack", "{sample}", "-o", "{t}/o", "--workers", "99999999999999999999999"], "--workers"),
    (["pack", "{sample}", "-o", "{t}/o", "--workers", "many"], "not an integer"),
    (["pack", "{sample}", "-o", ""], "empty path"),
    (["pack", "", "-o", "{t}/o"], "empty path"),
    (["pack", "{sample}"], "-o/--output"),
    (["pack", "{sample}", "-o", "{t}/o", "--format", "nosuch"], "--format"),
    (["pack", "{t}/random.bin", "-o", "{t}/o", "--format", "bulletformat"], "random.bin"),
    (["pack", "{t}/file.txt", "-o", "{t}/o", "--format", "marlinformat"], "file.txt"),
    (["pack", "{t}/random.bin", "-o", "{t}/o"], "random.bin"),
    (["pack", "{sample}", "-o", "{t}/o", "--score-unit", "mm"], "--score-unit"),
    # inspect
    (["inspect", "{t}/nonexist"], "no such folder"),
    (["inspect", "{t}/file.txt"], "not a dataset folder"),
    (["inspect", "{t}/empty"], "no manifest.json"),
    (["inspect", "{t}/badman"], "not valid JSON"),
    (["inspect", ""], "empty path"),
    (["inspect", "{ds}", "--fens", "-3"], "negative"),
    (["inspect", "{ds}", "--fens", "x"], "not an integer"),
    (["inspect"], "dataset"),
    # convert
    (["convert", "{t}/nonexist", "--to", "plain", "-o", "{t}/c.plain"], "no such folder"),
    (["convert", "{ds}", "--to", "plain", "-o", "{t}/empty"], "is a folder"),
    (["convert", "{ds}", "--to", "plain", "-o", ""], "empty path"),
    (["convert", "{ds}", "--to", "nosuch", "-o", "{t}/c"], "--to"),
    (["convert", "{ds}", "-o", "{t}/c"], "--to"),
    (["convert", "{ds}", "--to", "plain", "-o", "{t}/file.txt/x.plain"], "file.txt"),
    (["export-net", "{netdir}", "--to", "bullet", "-o", "{t}/file.txt/q.bin"], "file.txt: not a folder"),
    # export
    (["export", "{part}", "-o", "{t}/n1"], "Parquet"),
    (["export", "{t}/nonexist.ckpt", "-o", "{t}/n1"], "no such checkpoint"),
    (["export", "{t}/file.txt", "-o", "{t}/n1"], "not a checkpoint"),
    (["export", "{t}/random.bin", "-o", "{t}/n1"], "random.bin"),
    (["export", "{t}/empty", "-o", "{t}/n1"], "is a folder"),
    (["export", "{ck}", "-o", "{t}/file.txt"], "not a folder"),
    (["export", "{ck}", "-o", "{t}/n1", "--data", "{t}/nonexist"], "no such folder"),
    (["export", "{ck}", "-o", "{t}/n1", "--positions", "-1"], "negative"),
    (["export", "{ck}", "-o", ""], "empty path"),
    (["export", "{ck}"], "-o/--output"),
    # eval
    (["eval", "{net}", "--fen", ""], "empty FEN"),
    (["eval", "{net}", "--fen", "garbage"], "--fen"),
    (["eval", "{net}", "--fen", KING_FEN + " trailing junk"], "junk"),
    (["eval", "{net}", "--fen", "4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1"], "side not to move is in check"),
    (["eval", "{t}/empty", "--fen", KING_FEN], "without net.safetensors"),
    (["eval", "{t}/nonexist", "--fen", KING_FEN], "no such net"),
    (["eval", "{t}/file.txt", "--fen", KING_FEN], "file.txt"),
    (["eval", "{part}", "--fen", KING_FEN], "not a safetensors net"),
    (["eval", "{net}", "--fens", "{t}/nonexist"], "no such file"),
    (["eval", "{net}", "--fens", "{t}/empty"], "is a folder"),
    (["eval", "{net}", "--fens", "{t}/random.bin"], "random.bin:"),
    (["eval", "{net}", "--fens", "{t}/bom_junk.fens"], "bom_junk.fens:1"),
    (["eval", "{net}", "--dataset", "{t}/nonexist"], "no such folder"),
    (["eval", "{net}", "--dataset", "{t}/file.txt"], "not a dataset folder"),
    (["eval", "{net}", "--dataset", "{t}/listman"], "manifest.json"),
    (["eval", "{net}", "--fen", KING_FEN, "--limit", "3"], "--limit"),
    (["eval", "{net}", "--dataset", "{ds}", "--limit", "-3"], "negative"),
    (["eval", "{net}"], "one of the arguments"),
    (["eval", "{net}", "--fens", ""], "empty path"),
    # bench
    (["bench", "nosuch"], "unknown benchmark"),
    (["bench", "infer", "--net", "{t}/nonexist"], "nonexist"),
    # unknown command
    (["nosuch"], "invalid choice"),
]


@pytest.mark.parametrize("args,fragment", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_one_line_and_status_2(env, args, fragment, capsys, monkeypatch):
    monkeypatch.delenv("NNUE_DEBUG", raising=False)
    argv = _fmt(args, env)
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's usage errors
        rc = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1, err
    cmd = argv[0] if argv[0] in ("pack", "inspect", "convert", "export", "eval", "bench") else ""
    assert err[0].startswith(f"nnue {cmd}".strip()) and ": error: " in err[0], err
    assert fragment in err[0], err
    assert "Traceback" not in err[0]


def test_pack_to_an_existing_file_writes_nothing(env, capsys):
    f = env["t"] / "file.txt"
    before = f.read_bytes()
    assert main(["pack", env["sample"], "-o", str(f)]) == 2
    assert f.read_bytes() == before


def test_train_bad_data_path_is_one_line(env, capsys):
    assert main(["train", "experiment=demo", f"data.path={env['t']}/nonexist"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nnue train: error:") and "no such folder" in err[0]


def test_a_bug_is_one_line_status_1_and_nnue_debug_shows_the_traceback(env, capsys, monkeypatch):
    import nnue.cli as cli

    def boom(args):
        raise TypeError("something internal")

    real = cli.build_parser

    def parser():
        p = real()
        p._subparsers._group_actions[0].choices["inspect"].set_defaults(func=boom)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    monkeypatch.delenv("NNUE_DEBUG", raising=False)
    assert main(["inspect", str(env["ds"])]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error: TypeError: something internal" in err[0] and "NNUE_DEBUG=1" in err[0]
    monkeypatch.setenv("NNUE_DEBUG", "1")
    with pytest.raises(TypeError, match="something internal"):
        main(["inspect", str(env["ds"])])
    with pytest.raises(Exception):  # a bad-input error too: the traceback, for us
        main(["inspect", str(env["t"] / "nonexist")])


def test_nnue_debug_in_a_real_process(env):
    cmd = [sys.executable, "-m", "nnue.cli", "inspect", str(env["t"] / "nonexist")]
    plain = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "NNUE_DEBUG": ""})
    debug = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "NNUE_DEBUG": "1"})
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1
    assert "Traceback (most recent call last)" in debug.stderr and "no such folder" in debug.stderr


# ------------------------------------------------------------------------------ item 11: help
def test_version(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"nnue-forge {metadata.version('nnue-forge')} (git ")
    git = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if git.returncode == 0:
        assert git.stdout.strip() in out


def _subparsers():
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("cmd", ["pack", "inspect", "convert", "export", "eval"])
def test_every_option_has_help_and_its_default(cmd):
    sp = _subparsers()[cmd]
    for a in sp._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        assert a.help, f"nnue {cmd} {a.dest}: no help text"
        has_default = a.default not in (None, False, argparse.SUPPRESS) and not a.required
        if has_default or isinstance(a, argparse._StoreTrueAction) or (a.option_strings and a.default is None
                                                                         and not a.required and a.nargs != "+"
                                                                         and a.dest not in ("fen", "fens", "dataset")):
            assert "default" in a.help, f"nnue {cmd} {a.option_strings}: help does not give the default"
        if a.choices and a.default not in (None, False):
            assert str(a.default) in a.help


@pytest.mark.parametrize("name", ["sparse_ft", "activations", "infer", "pack", "stream", "incremental"])
def test_bench_help_names_nnue_bench(name, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", name, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: nnue bench {name}")


def test_bench_infer_on_the_users_net(env, tmp_path):
    import json

    out = tmp_path / "r.json"
    rc = main(["bench", "infer", "--net", str(env["netdir"]), "--batch", "64", "--runs", "2", "--block", "1",
               "--no-neutral", "--out", str(out)])
    r = json.loads(out.read_text())
    assert rc == 0 and r["net"] == str(env["netdir"]) and r["int_evals_per_s"] > 0
    assert r["architecture"]["hidden"] == 32


def test_export_net_into_a_folder_that_does_not_exist(env, tmp_path):
    """``export-net -o DIR/file`` with DIR missing was a raw ``[Errno 2]`` naming a temporary
    file; the folder is made now, as ``nnue convert -o`` makes it. A write elsewhere into a
    missing folder names the folder (``nnue.pipeline.atomic``), not the temporary file."""
    from nnue.pipeline.atomic import atomic_write_bytes

    out = tmp_path / "new" / "sub" / "q.bin"
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "export-net", str(env["netdir"]), "--to", "bullet", "-o",
                        str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0 and not list(out.parent.glob(".*tmp"))
    with pytest.raises(FileNotFoundError, match=f"^{tmp_path / 'none'}: no such folder to write x.bin into"):
        atomic_write_bytes(tmp_path / "none" / "x.bin", b"1")
