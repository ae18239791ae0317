"""Residual integer nets: eval = base + α·net (nnue/inference/residual.py), header, export, nnue eval."""
from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from nnue.cli import main as cli_main
from nnue.inference import NetFormatError, evaluate, load, residual
from nnue.inference.api import boards_from_fens, evaluate_net
from nnue.pipeline.annotate import annotate, material_eval
from tests.netfiles import make_int_net, make_model

STOCKFISH = Path("/usr/games/stockfish")


def test_header_alpha_is_a_multiple_of_1_256():
    assert residual.header("material", 0.5) == {"base": "material", "alpha": 0.5, "alpha_num": 128, "alpha_shift": 8}
    assert residual.header("stockfish-classical", 1)["alpha_num"] == 256
    for bad in (0.3, 0, -0.5, 5, float("nan"), "x"):
        with pytest.raises(ValueError, match="residual alpha"):
            residual.header("material", bad)
    with pytest.raises(ValueError, match="residual base 'nnue'"):
        residual.header("nnue", 0.5)


def test_combine_rounds_half_up_exactly():
    n = torch.randint(-40000, 40000, (5000,), generator=torch.Generator().manual_seed(1))
    n = torch.cat([n, torch.tensor([3, -3, 1, -1, 0, 2, -2])])
    base = torch.randint(-3000, 3000, n.shape, generator=torch.Generator().manual_seed(2))
    for num in (128, 256, 64, 192, 1, 1024):
        got = residual.combine(n, base, num)
        alpha = Fraction(num, 256)
        want = [int(b) + int((alpha * int(x) + Fraction(1, 2)).__floor__()) for x, b in zip(n.tolist(), base.tolist())]
        assert got.tolist() == want
    assert residual.combine(torch.tensor([3, -3]), torch.zeros(2), 128).tolist() == [2, -1]
    assert torch.equal(residual.combine(n, base, 256), n + base)


def test_material_base_equals_nnue_annotate_material(boards):
    assert torch.equal(residual.material_base(boards), torch.from_numpy(material_eval(boards.numpy())).long())


def _residual_net(base="material", alpha=0.5, seed=4):
    net = make_int_net("chess768", "screlu", hidden=32, seed=seed)
    net.arch["residual"] = residual.header(base, alpha)
    return net


def test_residual_net_round_trip_and_eval_rule(tmp_path, boards):
    net = _residual_net()
    path = tmp_path / "net.safetensors"
    net.save(path)
    back = load(path)
    assert back.arch["residual"] == net.arch["residual"]
    raw = evaluate_net(back, boards)
    plain = make_int_net("chess768", "screlu", hidden=32, seed=4)
    assert torch.equal(raw, evaluate(plain, boards))  # the net part is the kind's own eval
    mat = torch.from_numpy(material_eval(boards.numpy())).long()
    assert torch.equal(evaluate(back, boards), mat + ((raw * 128 + 128) >> 8))
    assert torch.equal(evaluate(back, boards, base=torch.zeros(len(boards), dtype=torch.int64)), (raw * 128 + 128) >> 8)


def test_stockfish_base_without_the_base_fails_in_one_line(boards):
    net = _residual_net("stockfish-classical")
    with pytest.raises(residual.BaseMissingError, match="no stockfish-classical base was given"):
        evaluate(net, boards[:4])
    with pytest.raises(residual.BaseMissingError, match="no base"):
        evaluate(net, boards[:2], base=torch.tensor([1.0, float("nan")]))


def _tamper(src: Path, dst: Path, change) -> Path:
    with safe_open(str(src), framework="pt") as f:
        meta = json.loads(f.metadata()["nnue_forge"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    change(meta["architecture"]["residual"])
    save_file(tensors, str(dst), {"nnue_forge": json.dumps(meta)})
    return dst


@pytest.mark.parametrize("change,msg", [
    (lambda r: r.update(alpha="0.5"), "'architecture.residual.alpha' is str"),
    (lambda r: r.update(base="stockfish-16"), "'architecture.residual.base' is 'stockfish-16', which this build does not know"),
    (lambda r: r.update(alpha=1.0), "the header contradicts itself"),
    (lambda r: r.update(alpha_shift=4), "'architecture.residual.alpha_shift' is 4"),
    (lambda r: r.pop("alpha_num"), "'architecture.residual.alpha_num' is missing"),
    (lambda r: r.update(extra=1), "'architecture.residual.extra' is not a field"),
])
def test_load_type_checks_the_residual_header(tmp_path, change, msg):
    path = tmp_path / "net.safetensors"
    _residual_net().save(path)
    with pytest.raises(NetFormatError, match=msg):
        load(_tamper(path, tmp_path / "bad.safetensors", change))


def test_cli_eval_material_base_and_missing_engine(tmp_path, capsys):
    fens = ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 1",
            "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"]
    (tmp_path / "fens.txt").write_text("\n".join(fens) + "\n")
    net = _residual_net()
    net.save(tmp_path / "mat.safetensors")
    b = boards_from_fens(fens)
    assert cli_main(["eval", str(tmp_path / "mat.safetensors"), "--fens", str(tmp_path / "fens.txt")]) == 0
    out = [int(v) for v in capsys.readouterr().out.split()]
    assert out == evaluate(net, b).tolist()
    assert out[1] - ((int(evaluate_net(net, b[1:2])) * 128 + 128) >> 8) == -900
    sf = _residual_net("stockfish-classical")
    sf.save(tmp_path / "sf.safetensors")
    assert cli_main(["eval", str(tmp_path / "sf.safetensors"), "--fens", str(tmp_path / "fens.txt"),
                     "--engine", str(tmp_path / "no-stockfish")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "residual net" in err and "no-stockfish: no such executable file" in err


@pytest.mark.skipif(not STOCKFISH.exists(), reason="Stockfish 15.1 not installed (scripts/ensure_stockfish.sh)")
def test_cli_eval_stockfish_base_from_the_engine(tmp_path, capsys):
    from nnue.pipeline.annotate import EnginePool, stm_cp

    fens = ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
            "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"]  # in check: no static eval
    (tmp_path / "fens.txt").write_text("\n".join(fens) + "\n")
    net = _residual_net("stockfish-classical", alpha=1)
    net.save(tmp_path / "sf.safetensors")
    assert cli_main(["eval", str(tmp_path / "sf.safetensors"), "--fens", str(tmp_path / "fens.txt")]) == 0
    out = capsys.readouterr().out.split()
    b = boards_from_fens(fens)
    pool = EnginePool(str(STOCKFISH), 1, ("classical",))
    try:
        cp, null = stm_cp(pool.evaluate(b.numpy())["classical"], (b[:, 24] >> 7).bool().numpy())
    finally:
        pool.close()
    raw = evaluate_net(net, b).tolist()
    assert out[2] == "none" and null.tolist() == [False, False, True]
    assert [int(v) for v in out[:2]] == [int(cp[i]) + raw[i] for i in range(2)]


# ------------------------------------------------------------------------------ export
def _residual_ckpt(tmp_path: Path, ds: Path, name: str = "weights", **hp_extra) -> Path:
    m = make_model("screlu", hidden=16, buckets=8, seed=3)
    hp = {"hidden": 16, "activation": "screlu", "features": "chess768", "output_buckets": "MaterialCount<8>",
          "quant": None, "loss": {"target": "residual", "residual_space": "sigma"}} | hp_extra
    path = tmp_path / f"{name}.safetensors"
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(path),
              {"hparams": json.dumps(hp), "data": json.dumps({"path": str(ds), "val_fraction": 0.2})})
    return path


@pytest.fixture(scope="module")
def material_dataset(sample_dataset, tmp_path_factory):
    ds = tmp_path_factory.mktemp("mat") / "ds"
    shutil.copytree(sample_dataset, ds)
    annotate(ds, base="material", progress=False)
    return ds


def test_export_writes_base_and_alpha_and_evaluates_exactly(tmp_path, material_dataset, boards):
    from nnue.trainer.export import export

    ck = _residual_ckpt(tmp_path, material_dataset, alpha=0.25)
    r = export(ck, tmp_path / "net", max_positions=2000)
    assert r["residual"] == {"base": "material", "alpha": 0.25, "alpha_num": 64, "alpha_shift": 8}
    assert r["bytes"]["net.safetensors"] == (tmp_path / "net" / "net.safetensors").stat().st_size
    net = load(tmp_path / "net" / "net.safetensors")
    assert net.arch["residual"]["alpha"] == 0.25
    raw = evaluate_net(net, boards)
    assert torch.equal(evaluate(net, boards), residual.material_base(boards) + ((raw * 64 + 128) >> 8))
    r = export(ck, tmp_path / "net2", max_positions=0, alpha=1.0, base="stockfish-classical")  # options win
    assert load(tmp_path / "net2" / "net.safetensors").arch["residual"]["base"] == "stockfish-classical"
    assert r["residual"]["alpha_num"] == 256


def test_export_refuses_bad_alpha_missing_base_and_over_budget(tmp_path, material_dataset, sample_dataset, capsys):
    from nnue.trainer.export import ExportError, export

    ck = _residual_ckpt(tmp_path, material_dataset)
    with pytest.raises(ExportError, match="multiple of 1/256"):
        export(ck, tmp_path / "a", max_positions=0, alpha=0.3)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ExportError, match="no base_eval annotation .* pass --base"):
        export(_residual_ckpt(tmp_path, sample_dataset, "plain_data"), tmp_path / "b", max_positions=0)
    assert cli_main(["export", str(ck), "-o", str(tmp_path / "c"), "--positions", "0", "--max-bytes", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "over model.max_bytes = 1,000" in err and "net.safetensors would be" in err
    assert not (tmp_path / "c" / "net.safetensors").exists()
    size = export(ck, tmp_path / "d", max_positions=0)["bytes"]["net.safetensors"]
    assert export(ck, tmp_path / "e", max_positions=0, max_bytes=size)["bytes"]["net.safetensors"] == size


def test_incremental_accumulator_adds_the_base():
    from tests.inference.test_c_cross_check_tiny import make_tiny_int_net

    from nnue.inference import IncrementalAccumulator

    net = make_tiny_int_net("chess768", "crelu", 16, 32, "crelu", "MaterialCount<1>", seed=2)
    net.arch["residual"] = residual.header("material", 0.5)
    acc = IncrementalAccumulator.from_fen(net, "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    seen = set()
    for move in ["e2e4", "d7d5", "e4d5", "d8d5", "b1c3", "d5a5", "d2d4", "c7c6", "g1f3", "c8g4"]:
        acc.push(move)
        board = torch.frombuffer(bytearray(acc.packed()), dtype=torch.uint8).view(1, 32)
        assert acc.evaluate() == int(evaluate(net, board)[0])
        assert acc.evaluate_net() == int(evaluate_net(net, board)[0])
        seen.add(acc.evaluate() - ((acc.evaluate_net() * 128 + 128) >> 8))
    assert seen == {0, -100}  # the material base (stm POV) moves with the captures
    net.arch["residual"] = residual.header("stockfish-classical", 1)
    with pytest.raises(residual.BaseMissingError):
        acc.evaluate()
    assert acc.evaluate(base=-37) == acc.evaluate_net() - 37


@pytest.mark.skipif(not STOCKFISH.exists(), reason="Stockfish 15.1 not installed (scripts/ensure_stockfish.sh)")
def test_cli_eval_dataset_engine_base_equals_annotated_column(sample_dataset, tmp_path, capsys):
    """nnue eval --dataset of a stockfish-classical residual net: the base from the engine (plain
    dataset) and from the base_eval column (annotated copy) give the same lines."""
    net = _residual_net("stockfish-classical", alpha=0.5)
    net.save(tmp_path / "sf.safetensors")
    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    annotate(ds, base="stockfish-classical", progress=False)
    args = ["eval", str(tmp_path / "sf.safetensors"), "--dataset"]
    assert cli_main(args + [str(sample_dataset), "--limit", "300"]) == 0
    from_engine = capsys.readouterr().out.split()
    assert cli_main(args + [str(ds), "--limit", "300"]) == 0
    from_column = capsys.readouterr().out.split()
    assert from_engine == from_column and len(from_engine) == 300
    assert 0 < from_engine.count("none") < 100  # in-check rows: no static eval
    assert cli_main(args + [str(ds), "--summary"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["base_from"] == "dataset base_eval column" and s["positions_without_base"] > 0
