"""Training with the compiled CPU path (model.backend=numba, optimizer.sparse_ft=true): a run, its
checkpoint (flushed, clipped weights), exact resume, and the compose-time refusals."""
from __future__ import annotations

import pytest
import torch

from tests.trainer.test_train_runs import ckpt, train

FAST = {"model.backend": "numba", "optimizer.sparse_ft": "true"}


def test_sparse_run_clips_flushes_and_resumes_exactly(sample_dataset, tmp_path):
    kw = {**FAST, "scheduler": "constant", "data.positions_per_epoch": 2048, "data.shuffle_buffer": 1024}
    a, b = tmp_path / "a", tmp_path / "b"
    ma = train(sample_dataset, a, **kw, **{"trainer.max_epochs": 3})
    train(sample_dataset, b, **kw, **{"trainer.max_epochs": 2})
    mb = train(sample_dataset, b, **kw, **{"trainer.max_epochs": 3, "ckpt_path": b / "checkpoints" / "last.ckpt"})
    assert ma["global_step"] == mb["global_step"] > 0 and ma["val_loss"] < 0.2
    ca = ckpt(a)
    wa, wb = ca["state_dict"], ckpt(b)["state_dict"]
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    # the optimiser state is RowSparseAdamW's, every row brought up to the saved step by the flush
    st = [s for s in ca["optimizer_states"][0]["state"].values() if "row_step" in s]
    assert len(st) == 1 and bool((st[0]["row_step"] == st[0]["step"]).all())
    # the folded feature-transformer weight is within the clip (the demo has the factoriser)
    folded = wa["model.ft.weight"] + wa["model.ft.factor"][torch.arange(768) // 64]
    assert folded.abs().max() <= 1.98 + 1e-6


@pytest.mark.parametrize("arg,needle", [
    ("optimizer=schedulefree", "needs optimizer=adamw"),
    ("+optimizer.amsgrad=true", "amsgrad"),
    ("trainer.devices=2", "one device"),
    ("+trainer.gradient_clip_val=1.0", "gradient_clip_val"),
    ("optimizer.sparse_ft=yes", "optimizer.sparse_ft"),
])
def test_sparse_ft_refusals_at_compose_time(sample_dataset, tmp_path, arg, needle):
    from nnue.trainer.checks import check_train_args

    out = tmp_path / "out"
    args = ["experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={out}"]
    if arg != "optimizer.sparse_ft=yes":
        args.append("optimizer.sparse_ft=true" if arg != "optimizer=schedulefree" else "+optimizer.sparse_ft=true")
    err = check_train_args(args + [arg])
    assert err and "\n" not in err and needle in err, err
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="has CUDA: trainer=gpu is allowed there")
def test_numba_backend_refused_off_the_cpu(sample_dataset, tmp_path):
    from nnue.trainer.kinds import build_model

    net = build_model("perspective", "chess768", 768, 8, "crelu", 1, "numba")
    with pytest.raises(ValueError, match="CPU tensors"):
        net._ft(torch.zeros(1, 2, dtype=torch.int32, device="meta"), torch.zeros(1, 2, dtype=torch.int32, device="meta"))
