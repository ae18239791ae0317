"""Training with the compiled CPU path (model.backend=numba, optimizer.sparse_ft=true): a run, its
checkpoint (flushed, clipped weights), exact resume, and the compose-time refusals."""
from __future__ import annotations

import copy

import pytest
import pytorch_lightning as pl
import torch

from tests.trainer.test_train_runs import SPE, ckpt, train

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


def _state(out) -> tuple[dict, list[dict]]:
    c = ckpt(out)
    return c["state_dict"], list(c["optimizer_states"][0]["state"].values())


@pytest.mark.parametrize("extra", [{}, {"model": "sfnnv16", "model.hidden": 64, "model.output_buckets": "'SFPieceCount<8>'",
                                             "model.activation": "pairwise_crelu"}], ids=["demo", "sfnnv16"])
@pytest.mark.parametrize("at", [SPE + 3, SPE - 1, SPE], ids=["mid-epoch", "last-step", "epoch-end"])
def test_interrupted_mid_epoch_fast_path_resumes_bit_identical(sample_dataset, tmp_path, extra, at):
    """The checkpoint and weights saved at an interrupt flushed the row-sparse optimiser in place
    (its rows' pending decays applied early): the resumed run then differed by rounding from one
    never interrupted (a flush rounds otherwise than the catch-up it replaces). The checkpoint now
    holds the flushed weights to export and, apart, the training weights to resume from; the
    run's own state is left as it was."""
    from nnue.trainer.callbacks import TrainingInterrupted

    kw = {"trainer.max_epochs": 2, **extra}  # the defaults: the CPU fast path
    ref, out = tmp_path / "ref", tmp_path / "out"
    train(sample_dataset, ref, **kw)
    with pytest.raises(TrainingInterrupted):
        train(sample_dataset, out, **kw, **{"+callbacks.sig._target_": "tests.trainer.ddp_signal.SignalAt",
                                            "+callbacks.sig.step": at, "+callbacks.sig.signum": 15})
    mid, mid_opt = _state(out)
    if at != SPE:  # caught at a step end: rows were pending, and the training weights are saved apart
        rs = [s for s in mid_opt if "row_step" in s]
        assert len(rs) == 1 and bool((rs[0]["row_step"] < rs[0]["step"]).any())
        train_sd = ckpt(out)["nnue_forge"]["train_state_dict"]
        assert "model.ft.weight" in train_sd and not torch.equal(train_sd["model.ft.weight"], mid["model.ft.weight"])
    train(sample_dataset, out, **kw, ckpt_path=out / "checkpoints" / "last.ckpt")
    (a, a_opt), (b, b_opt) = _state(out), _state(ref)
    assert ckpt(out)["global_step"] == ckpt(ref)["global_step"] == 2 * SPE
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert len(a_opt) == len(b_opt)
    for sa, sb in zip(a_opt, b_opt):
        assert sa.keys() == sb.keys()
        bad = [k for k in sa if not (torch.equal(sa[k], sb[k]) if isinstance(sa[k], torch.Tensor) else sa[k] == sb[k])]
        assert not bad, [(k, sa[k], sb[k]) for k in bad]


class WeightsProbe(pl.Callback):
    """At the end of step 3: takes :meth:`LitNNUE.weights_of_step`, checks that it changed
    nothing, then flushes in place and compares (results in ``SEEN``)."""

    def on_train_batch_end(self, trainer, lit, outputs, batch, batch_idx):
        if trainer.global_step != 3:
            return
        opt = lit._row_sparse()
        before = {k: v.clone() for k, v in lit.state_dict().items()}
        st = {id(p): copy.deepcopy(s) for p, s in opt.state.items()}
        got = lit.weights_of_step()
        SEEN["unchanged"] = all(torch.equal(v, before[k]) for k, v in lit.state_dict().items()) and all(
            torch.equal(s[k], st[id(p)][k]) if isinstance(s[k], torch.Tensor) else s[k] == st[id(p)][k]
            for p, s in opt.state.items() for k in s)
        SEEN["pending"] = opt.pending()
        lit.flush_optimizer()  # the in-place flush: what the saved weights must equal
        now = lit.state_dict()
        SEEN["equal"] = "model.ft.weight" in got and all(torch.equal(v, now[k]) for k, v in got.items()) and all(
            torch.equal(now[k], before[k]) for k in now if k not in got)
        SEEN["pending_after_flush"] = opt.pending()


SEEN: dict = {}


def test_weights_of_step_leaves_the_run_as_it_was(sample_dataset, tmp_path):
    """What export and the checkpoint read equals an in-place flush (pending decays, then the
    dense clip), and taking it changes neither a parameter nor the optimiser's state."""
    SEEN.clear()
    train(sample_dataset, tmp_path, **{"trainer.max_epochs": 1,
                                       "+callbacks.probe._target_": "tests.trainer.test_sparse_train.WeightsProbe"})
    assert SEEN == {"unchanged": True, "pending": True, "equal": True, "pending_after_flush": False}


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
