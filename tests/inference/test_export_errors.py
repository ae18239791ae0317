"""Bad input to export / eval / train: one clear error naming the file, field or parameter,
nothing half-written, and --clip only where clipping gives a net that evaluates."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from nnue.trainer.checks import check_train_args
from nnue.cli import main as cli_main
from nnue.inference import NetFormatError, evaluate, load
from nnue.inference.net import META_KEY
from nnue.inference.api import boards_from_fens
from nnue.pipeline import manifest as mf
from nnue.pipeline.features import parse_output_buckets
from nnue.inference.kinds.perspective import IntegerNet
from nnue.trainer.export import ExportError, export
from tests.netfiles import make_deep_model, make_model, write_weights


def test_non_finite_parameters_are_named_and_not_clipped(tmp_path, sample_dataset):
    model = make_deep_model(seed=3)
    with torch.no_grad():
        model.l2.weight[4, 2] = float("nan")
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    for clip in (False, True):
        with pytest.raises(ExportError, match=r"parameter l2.weight: 1 value\(s\) not finite, first at \[4, 2\]"):
            export(ck, tmp_path / "net", clip=clip)
    assert not (tmp_path / "net").exists()


def test_clip_keeps_deep_sums_within_int32(tmp_path, sample_dataset):
    model = make_deep_model(seed=4)
    with torch.no_grad():
        model.l2.bias[5] = 1e6  # 1.6e10 at QA·QB: beyond int32 on its own
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    with pytest.raises(ExportError, match="l2b"):
        export(ck, tmp_path / "refused")
    r = export(ck, tmp_path / "net", clip=True)
    assert r["audit"]["clipped"].get("l2b", 0) >= 1 and r["audit"]["l2_sum_worst_case_fits_int32"]
    net = load(tmp_path / "net" / "net.safetensors")
    boards = boards_from_fens(["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
                               "4k3/8/8/8/8/8/8/4K2R w K - 0 1"])
    assert evaluate(net, boards).shape == (2,)  # no OverflowError


def test_export_json_is_written_last_and_names_the_nets(tmp_path, sample_dataset, monkeypatch):
    ck = write_weights(make_model("screlu"), tmp_path / "w.safetensors", sample_dataset)
    r = export(ck, tmp_path / "net")
    meta = json.loads((tmp_path / "net" / "export.json").read_text())
    for name in ("net.safetensors", "net.bin"):
        assert meta["sha256"][name] == mf.sha256_file(tmp_path / "net" / name) == r["sha256"][name]
    # a re-export interrupted after the first net: the old export.json is gone, so the folder
    # does not look finished
    def boom(self, path):
        raise KeyboardInterrupt
    monkeypatch.setattr(IntegerNet, "write_bin", boom)
    with pytest.raises(KeyboardInterrupt):
        export(ck, tmp_path / "net")
    assert not (tmp_path / "net" / "export.json").exists()


def test_unreadable_checkpoints_and_output_paths(tmp_path, sample_dataset):
    ck = write_weights(make_model("crelu"), tmp_path / "w.safetensors", sample_dataset)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(ck.read_bytes()[:5000])
    with pytest.raises(ExportError, match="cut.safetensors: not a readable safetensors file"):
        export(cut, tmp_path / "a")
    torch.save({"x": 1}, tmp_path / "other.ckpt")
    with pytest.raises(ExportError, match="not a Lightning checkpoint of nnue train"):
        export(tmp_path / "other.ckpt", tmp_path / "a")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="exists and is not a folder"):
        export(ck, tmp_path / "file")
    with pytest.raises(ExportError, match="is a folder"):
        export(tmp_path, tmp_path / "a")
    with pytest.raises(SystemExit) as exit_info:  # argparse: one-line usage error, status 2
        cli_main(["export", str(ck), "-o", str(tmp_path / "b"), "--positions", "-5"])
    assert exit_info.value.code == 2


def test_header_contradictions_are_refused(tmp_path, sample_dataset):
    ck = write_weights(make_deep_model(seed=1), tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net")
    path = tmp_path / "net" / "net.safetensors"
    net = load(path)
    tensors = {k: v.contiguous() for k, v in net.tensors().items()}
    for field_, value, match in (("hidden_activation", "relu", "architecture.hidden_activation"),
                                 ("activation", "swish", "architecture.activation"),
                                 ("output_buckets", "SFPieceCount<8>", "output_buckets")):
        header = net.header()
        header["architecture"] = dict(header["architecture"], **{field_: value})
        bad = tmp_path / f"bad-{field_}.safetensors"
        save_file(tensors, str(bad), {META_KEY: json.dumps(header, sort_keys=True)})
        with pytest.raises(NetFormatError, match=match):
            load(bad)


def test_output_bucket_and_train_argument_checks(sample_dataset):
    with pytest.raises(ValueError, match="SFPieceCount<9>"):
        parse_output_buckets("SFPieceCount<9>")
    base = [f"data.path={sample_dataset}"]
    for override, match in (("model.kind=deeep", "model.kind"), ("model.qat=maybe", "model.qat"),
                            ("model.act_l1=-1", "model.act_l1"),
                            ("model.output_buckets=SFPieceCount<8>", "quote values")):
        assert match in (check_train_args(base + [override]) or ""), override
    for override, match in (("model.deep.l1_outputs=0", "model.deep.l1_outputs"),
                            ("model.deep.hidden_activation=relu", "hidden activation 'relu'")):
        assert match in (check_train_args(base + ["model=deep", override]) or ""), override
    assert check_train_args(base + ["model=deep"]) is None


def test_eval_names_the_line_of_a_bad_fen(tmp_path, capsys):
    from tests.netfiles import make_int_net

    make_int_net("chess768", hidden=8).save(tmp_path / "n.safetensors")
    (tmp_path / "f.txt").write_text("4k3/8/8/8/8/8/8/4K3 w - - 0 1\n\nbad w - - 0 1\n")
    assert cli_main(["eval", str(tmp_path / "n.safetensors"), "--fens", str(tmp_path / "f.txt")]) == 2
    assert "f.txt:3" in capsys.readouterr().err
    (tmp_path / "b.txt").write_bytes(b"\xff\xfe\x00junk")
    assert cli_main(["eval", str(tmp_path / "n.safetensors"), "--fens", str(tmp_path / "b.txt")]) == 2
    assert "b.txt:1: not UTF-8" in capsys.readouterr().err


def test_eval_names_the_position_that_overflows(tmp_path, capsys):
    from tests.netfiles import make_int_net

    net = make_int_net("chess768", act="crelu", hidden=300)
    net.l0w.fill_(0)
    net.l0b.fill_(255)  # every v = 255
    net.l1w.fill_(32767)  # crelu: Σ v·w = 600 · 255 · 32767 ≈ 5.0e9 leaves int32
    net.save(tmp_path / "n.safetensors")
    (tmp_path / "f.txt").write_text("4k3/8/8/8/8/8/8/4K3 w - - 0 1\n" * 2)
    assert cli_main(["eval", str(tmp_path / "n.safetensors"), "--fens", str(tmp_path / "f.txt")]) == 2
    err = capsys.readouterr().err
    assert "f.txt:1 (4k3/8/8/8/8/8/8/4K3 w - - 0 1)" in err and "int32" in err


def test_eval_dataset_names_the_row_that_overflows(tmp_path, sample_dataset, capsys):
    from tests.netfiles import make_int_net

    net = make_int_net("chess768", act="crelu", hidden=300)
    net.l0w.fill_(0)
    net.l0b.fill_(255)
    net.l1w.fill_(32767)  # every position overflows: the first row is named
    net.save(tmp_path / "n.safetensors")
    assert cli_main(["eval", str(tmp_path / "n.safetensors"), "--dataset", str(sample_dataset)]) == 2
    err = capsys.readouterr().err
    assert "row 1 in file order (" in err and "int32" in err
