"""The design rule of net kinds: a kind is its two modules (``trainer/kinds/<kind>.py``,
``inference/kinds/<kind>``) and a line in each registry, so nothing outside them dispatches on a
kind's name. Checked statically (``ast`` over the package's sources, nothing imported): no module
outside the kinds holds a kind's name as a string constant (docstrings aside), so none compares a
name with one, keys a dict or a lookup by one, or falls back to one; what differs between kinds is
a field of the kind's record (:class:`nnue.inference.kinds.spec.InferenceKind`,
:class:`nnue.trainer.kinds.spec.TrainerKind`).

Also here: every kind has its ``conf/model/<kind>.yaml``, and a kind with one feature set brings it
(``model=sfnnv5`` selects ``features=halfkav2_hm``; an explicit conflicting ``features=`` is
refused in one line).
"""
from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.test_import_graph import REPO, modules

#: the kinds' own packages: where a kind's name may stand
KIND_HOMES = ("nnue.trainer.kinds", "nnue.inference.kinds")
#: modules where a kind's name stands for something else, with the reason
EXEMPT = {
    # the activation registry's "places" (where an integer rule stands): "perspective" is the place
    # of the L1 input of a perspective net, a spec key read by the kinds, not a dispatch on a net
    "nnue.spec": "activation places",
    # a benchmark picks the kinds it measures (its --arch / --kind options build those nets)
    "nnue.bench": "benchmarks choose their kinds",
    # the feature set Stockfish 19 reads is named like the kind that brings it (nnue-pytorch's
    # Full_Threats+PP_3Wide+HalfKAv2_hm^): its registry name, not a dispatch on a net kind
    "nnue.pipeline.features.sfnnv16": "the feature set's own name",
}


def kind_names() -> set[str]:
    from nnue.inference import kinds as inference_kinds
    from nnue.trainer import kinds as trainer_kinds

    return set(inference_kinds.KINDS) | set(trainer_kinds.KINDS)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def kind_name_constants(source: str, names: set[str], where: str = "<source>") -> list[str]:
    """Every string constant of ``source`` equal to one of ``names`` (docstrings aside), as
    ``where:line: 'name'``: a comparison with a kind's name, a dict or lookup keyed by one, a
    fallback to one."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [f"{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
            and id(node) not in skip]


def _exempt(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in (*KIND_HOMES, *EXEMPT))


def test_no_module_outside_the_kinds_names_a_kind():
    names = kind_names()
    assert {"perspective", "deep", "tiny", "sfnnv5"} <= names
    found = []
    for name, path in sorted(modules().items()):
        if not _exempt(name):
            found += kind_name_constants(path.read_text(), names, str(path.relative_to(REPO)))
    assert not found, ("code outside trainer/kinds and inference/kinds names a net kind; make it a field of "
                       "the kind's record (InferenceKind / TrainerKind) instead:\n  " + "\n  ".join(found))


def test_the_rule_catches_dispatch():
    names = {"perspective", "deep", "sfnnv5"}
    bad = ['if net.kind == "deep":\n    pass\n',
           'TABLE = {"perspective": 1, "deep": 2}\n',
           'kind = arch.get("kind", "perspective")\n',
           'kind = arch.get("kind") or "perspective"\n',
           'ok = net.kind in ("sfnnv5",)\n',
           'f = TABLE["deep"]\n',
           'def f(net):\n    """A deep net."""\n    return net.kind != "sfnnv5"\n']
    for src in bad:
        assert kind_name_constants(src, names), src
    fine = ['"""The perspective kind\'s docs name it."""\n',
            'def f(kind):\n    """perspective"""\n    return f"a {kind} net"\n',
            'msg = "a deep net has layers after L1"\n',
            'x = kinds.of(net).trace\n']
    for src in fine:
        assert not kind_name_constants(src, names), src


def test_every_kind_has_its_model_config():
    from nnue.trainer import kinds

    for name in kinds.KINDS:
        text = (REPO / "conf" / "model" / f"{name}.yaml").read_text()
        assert f"kind: {name}" in text, name


def compose_train(overrides: list[str]):
    """The training config ``nnue train`` composes from ``overrides`` (Hydra, in process)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            return compose("train", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def test_a_kind_brings_its_feature_set():
    """model=<kind> selects the feature set its record requires (the model config's defaults list
    overrides the features group), unless the command line sets one; kinds that take any set
    keep the default."""
    from nnue.trainer import kinds

    for name, k in kinds.KINDS.items():
        cfg = compose_train([f"model={name}", "data.path=x"])
        assert cfg.model.kind == name
        if k.features is not None:
            assert cfg.features.name == cfg.model.features == k.features, name
        else:
            assert cfg.features.name == "chess768", name
    cfg = compose_train(["model=sfnnv5", "features=chess768", "data.path=x"])
    assert cfg.features.name == "chess768"  # the command line wins: refused by the check below


def _train_check(args: list[str]):
    return subprocess.run([sys.executable, "-m", "nnue.cli", "train", *args], capture_output=True, text=True)


def test_model_sfnnv5_alone_passes_the_checks(sample_dataset):
    from nnue.trainer.checks import check_train_args

    assert check_train_args(["model=sfnnv5", "model.hidden=32", f"data.path={sample_dataset}"]) is None
    assert check_train_args(["model=sfnnv5", "features=halfkav2_hm", "model.hidden=32",
                             f"data.path={sample_dataset}"]) is None


@pytest.mark.parametrize("override", ["features=chess768", "features.name=kb768hm4", "++features.name=chess768"])
def test_explicit_conflicting_features_are_refused(sample_dataset, override):
    from nnue.trainer.checks import check_train_args

    msg = check_train_args(["model=sfnnv5", override, "model.hidden=32", f"data.path={sample_dataset}"])
    assert msg is not None and "conflicts with model=sfnnv5" in msg and "halfkav2_hm" in msg and "\n" not in msg


def test_conflict_through_the_cli_is_one_line_status_2(sample_dataset, tmp_path):
    r = _train_check(["model=sfnnv5", "features=chess768", "model.hidden=32", f"data.path={sample_dataset}",
                      f"paths.output_dir={tmp_path / 'out'}"])
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "features=chess768 conflicts with model=sfnnv5" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_kind_set_without_its_model_config_is_told_how(sample_dataset):
    from nnue.trainer.checks import check_train_args

    msg = check_train_args(["model.kind=sfnnv5", "model.hidden=32", "model.activation=pairwise_crelu",
                            'model.output_buckets="SFPieceCount<8>"', f"data.path={sample_dataset}"])
    assert msg is not None and "use model=sfnnv5" in msg, msg
