"""Compose-time checks of a training config: every value's type and range, known keys, device
availability and a finite stop, so that a bad value is one line before anything is written.

:func:`check_train_config` raises ValueError naming the key, the value and what is expected;
:func:`check_train_args` composes the config from ``nnue train``'s overrides, runs those checks and
the data, run-folder, kind and loss checks, and returns the first error as one line (or None).
"""
from __future__ import annotations

import difflib
import inspect
import sys
from pathlib import Path

from .callbacks import plain


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _bad(key: str, value, want: str) -> ValueError:
    return ValueError(f"{key}={value!r}: {want}" if isinstance(value, str) else f"{key}={value}: {want}")


def _int(key, v, lo, hi=None, none_ok=False, extra=""):
    if v is None and none_ok:
        return
    if not _is_int(v) or v < lo or (hi is not None and v > hi):
        raise _bad(key, v, f"an integer in {lo}..{hi if hi is not None else '∞'}{extra}")


def _num(key, v, lo, hi=None, none_ok=False, lo_open=False, extra=""):
    if v is None and none_ok:
        return
    if not _is_num(v) or v < lo or (lo_open and v == lo) or (hi is not None and v > hi):
        lo_s = f"> {lo}" if lo_open else f"≥ {lo}"
        raise _bad(key, v, f"a number {lo_s}" + (f" and ≤ {hi}" if hi is not None else "") + extra)


def _bool(key, v):
    if not isinstance(v, bool):
        raise _bad(key, v, "true or false")


def _known(section: str, cfg: dict, known) -> None:
    for k in cfg:
        if k not in known and not k.startswith("_"):
            near = difflib.get_close_matches(k, list(known), n=1)
            hint = f"; did you mean {section}.{near[0]}?" if near else ""
            raise ValueError(f"{section}.{k}: unknown key{hint}")


def _params(fn) -> set[str]:
    return {p for p in inspect.signature(fn).parameters if p not in ("self", "params")}


def check_trainer(t: dict) -> None:
    import pytorch_lightning as pl
    import torch

    _known("trainer", t, _params(pl.Trainer.__init__))
    _int("trainer.max_epochs", t.get("max_epochs"), -1, none_ok=True, extra=" (-1: no epoch limit)")
    _int("trainer.max_steps", t.get("max_steps", -1), -1, none_ok=True, extra=" (-1: no step limit)")
    _int("trainer.min_epochs", t.get("min_epochs"), 0, none_ok=True)
    _int("trainer.log_every_n_steps", t.get("log_every_n_steps"), 1, none_ok=True)
    _int("trainer.check_val_every_n_epoch", t.get("check_val_every_n_epoch"), 1, none_ok=True)
    _int("trainer.reload_dataloaders_every_n_epochs", t.get("reload_dataloaders_every_n_epochs"), 0, none_ok=True)
    _int("trainer.num_sanity_val_steps", t.get("num_sanity_val_steps"), -1, none_ok=True)
    _int("trainer.accumulate_grad_batches", t.get("accumulate_grad_batches"), 1, none_ok=True)
    _int("trainer.num_nodes", t.get("num_nodes"), 1, none_ok=True)
    for k in ("limit_train_batches", "limit_val_batches"):
        v = t.get(k)
        if v is not None and not (_is_int(v) and v >= 0 or isinstance(v, float) and 0.0 <= v <= 1.0):
            raise _bad(f"trainer.{k}", v, "an integer ≥ 0 (batches) or a fraction in 0.0..1.0")
    for k in ("enable_progress_bar", "deterministic", "enable_checkpointing", "enable_model_summary"):
        if t.get(k) is not None and not (k == "deterministic" and t.get(k) == "warn"):
            _bool(f"trainer.{k}", t[k])
    fdr = t.get("fast_dev_run")
    if fdr is not None and not isinstance(fdr, bool) and not (_is_int(fdr) and fdr >= 0):
        raise _bad("trainer.fast_dev_run", fdr, "true, false or a number of batches")
    d = t.get("devices", "auto")
    if not (d == "auto" or _is_int(d) and (d >= 1 or d == -1) or isinstance(d, (list, tuple))
            or isinstance(d, str) and d.replace(",", "").replace("-", "").isdigit()):
        raise _bad("trainer.devices", d, "a count ≥ 1, -1 (all), a list of device ids or auto")
    acc = t.get("accelerator", "auto")
    known_acc = ("cpu", "gpu", "cuda", "mps", "tpu", "auto")
    if not isinstance(acc, str) or acc not in known_acc:
        raise _bad("trainer.accelerator", acc, f"one of {', '.join(known_acc)}")
    if acc in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ValueError(f"trainer.accelerator={acc} (trainer=gpu), but no CUDA GPU is available here "
                         f"(torch {torch.__version__}, CUDA {'built' if torch.version.cuda else 'not built'}); "
                         f"use trainer=cpu")
    if acc in ("gpu", "cuda") and _is_int(d) and d > torch.cuda.device_count():
        raise ValueError(f"trainer.devices={d}: only {torch.cuda.device_count()} CUDA device(s) here")
    if acc == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("trainer.accelerator=mps, but MPS is not available here; use trainer=cpu")
    if not t.get("fast_dev_run") and t.get("max_epochs") in (None, -1) and t.get("max_steps", -1) in (None, -1):
        raise ValueError("the run has no finite stop: set trainer.max_epochs (≥ 1) or +trainer.max_steps "
                         "(≥ 1); the schedules need the run's length")
    check_lightning(t)


# Trainer flags Lightning takes as booleans without checking (a string is truthy: "no" would turn them on)
LIGHTNING_BOOLS = ("detect_anomaly", "sync_batchnorm", "inference_mode", "benchmark", "barebones",
                   "use_distributed_sampler", "enable_checkpointing", "enable_model_summary")


def check_lightning(t: dict) -> None:
    """Lightning's own trainer values (issue 20 item 11), before anything is written: the ones it
    takes unchecked (booleans, ``gradient_clip_val``, ``min_steps``, an integer
    ``val_check_interval`` of 0 that fails mid-run), then a dry ``pl.Trainer(...)`` of the config
    (no logger, no callbacks: it writes nothing), whose refusal becomes one ValueError naming the key.
    ``val_check_interval`` against the epoch's batches needs the data: :func:`check_val_interval`."""
    for k in LIGHTNING_BOOLS:
        if t.get(k) is not None:
            _bool(f"trainer.{k}", t[k])
    _num("trainer.gradient_clip_val", t.get("gradient_clip_val"), 0.0, none_ok=True)
    _int("trainer.min_steps", t.get("min_steps"), -1, none_ok=True)
    v = t.get("val_check_interval")
    if v is not None and not isinstance(v, str):
        if isinstance(v, bool) or not (_is_int(v) and v >= 1 or isinstance(v, float) and 0.0 <= v <= 1.0):
            raise _bad("trainer.val_check_interval", v, "an integer ≥ 1 (training batches between validations) "
                       "or a fraction of an epoch in 0.0..1.0")
    import io
    import tempfile
    import warnings
    from contextlib import redirect_stderr, redirect_stdout

    import pytorch_lightning as pl

    from .train import quiet_lightning

    quiet_lightning()
    kw = {k: v for k, v in t.items() if not k.startswith("_") and k not in ("callbacks", "logger", "plugins")}
    kw.update(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), \
            redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        kw["default_root_dir"] = tmp
        try:
            pl.Trainer(**kw)
        except Exception as e:  # MisconfigurationException, ValueError, TypeError, RuntimeError ...
            msg = " ".join(str(e).split())
            key = next((k for k in t if k in msg and k in kw), None)
            for k in ([] if key else [k for k in t if k in kw]):  # the key whose removal makes it pass
                try:
                    pl.Trainer(**{a: b for a, b in kw.items() if a != k})
                    key = k
                    break
                except Exception:  # noqa: BLE001 - another key is (also) refused
                    continue
            where = f"trainer.{key}={t[key]!r}" if key in t else "trainer"
            raise ValueError(f"{where}: Lightning refuses it: {msg}") from None


def check_val_interval(t: dict, batches: int, exact: bool, one_pass: bool = False) -> None:
    """An integer ``trainer.val_check_interval`` must not exceed the training batches of an epoch
    (``batches``, after ``limit_train_batches``) unless ``check_val_every_n_epoch`` is null, and a
    fraction other than 1.0 needs an epoch of known length (``one_pass``: the epoch is one pass
    over the data, which the stream cannot count in advance): Lightning refuses both only once
    the run has started, after the run folder was written."""
    v = t.get("val_check_interval")
    if one_pass and isinstance(v, float) and v != 1.0:
        at = max(1, int(batches * v))
        raise ValueError(f"trainer.val_check_interval={v}: a fraction of an epoch needs an epoch of known length, "
                         f"and a one-pass epoch (data.positions_per_epoch=null) has none, so Lightning refuses it "
                         f"once the run starts; give a number of training batches instead "
                         f"(trainer.val_check_interval={at}: {'' if exact else 'about '}{v:g} of this data's "
                         f"{'' if exact else 'about '}{batches:,}), or set data.positions_per_epoch")
    if not _is_int(v) or "check_val_every_n_epoch" in t and t["check_val_every_n_epoch"] is None:
        return
    lim = t.get("limit_train_batches")
    if _is_int(lim):
        batches = min(batches, lim)
    elif isinstance(lim, float):
        batches = int(batches * lim)
    if v > batches:
        raise ValueError(f"trainer.val_check_interval={v}: more than the {'' if exact else 'about '}{batches:,} "
                         f"training batches of an epoch; give a fraction of the epoch (0.5) or at most "
                         f"{batches:,}, or +trainer.check_val_every_n_epoch=null to count batches across epochs")


def check_data(d: dict) -> None:
    from nnue.pipeline.stream import Filters

    from .data import NNUEDataModule

    _known("data", d, _params(NNUEDataModule.__init__))
    _int("data.batch_size", d.get("batch_size"), 1)
    _int("data.val_batch_size", d.get("val_batch_size"), 1)
    _int("data.shuffle_buffer", d.get("shuffle_buffer"), 0)
    _num("data.val_fraction", d.get("val_fraction"), 0.0, 1.0)
    if d.get("val_fraction", 0) == 1.0:
        raise ValueError("data.val_fraction=1.0: leaves no game to train on; a number in 0.0..<1.0")
    _int("data.num_workers", d.get("num_workers"), 0)
    _int("data.prefetch", d.get("prefetch", 0), 0, 64)
    _int("data.seed", d.get("seed"), 0, none_ok=True)
    _int("data.positions_per_epoch", d.get("positions_per_epoch"), 1, none_ok=True)
    _int("data.batches_per_superbatch", d.get("batches_per_superbatch"), 1, none_ok=True)
    if d.get("pin_memory") is not None:
        _bool("data.pin_memory", d["pin_memory"])
    w = d.get("weights")
    if w is not None and (not isinstance(w, list) or not all(_is_num(x) and x > 0 for x in w)):
        raise _bad("data.weights", w, "a list of positive numbers, one per data.path entry")
    f = d.get("filters") or {}
    _known("data.filters", f, Filters.__dataclass_fields__)
    for k in ("skip_in_check", "skip_capture", "skip_score_none", "skip_mate"):
        if k in f:
            _bool(f"data.filters.{k}", f[k])
    _int("data.filters.max_abs_score", f.get("max_abs_score"), 0, none_ok=True)
    _int("data.filters.min_ply", f.get("min_ply"), 0, none_ok=True)
    _int("data.filters.min_pieces", f.get("min_pieces"), 0, 32, none_ok=True)
    _num("data.filters.random_skip", f.get("random_skip"), 0.0, 1.0, none_ok=True)
    ppe, bps = d.get("positions_per_epoch"), d.get("batches_per_superbatch")
    if ppe is not None and ppe < d.get("batch_size", 1):
        raise ValueError(f"data.positions_per_epoch={ppe}: less than one batch (data.batch_size={d.get('batch_size')})")
    if ppe is not None and bps is not None and ppe != bps * d.get("batch_size", 1):
        raise ValueError("give one of data.positions_per_epoch and data.batches_per_superbatch")


def check_optimizer(o: dict) -> None:
    from hydra.utils import get_class

    target = o.get("_target_")
    try:
        cls = get_class(target)
    except Exception:
        raise ValueError(f"optimizer._target_={target}: not an importable optimiser class") from None
    _known("optimizer", o, _params(cls.__init__) | {"sparse_ft"})
    if o.get("sparse_ft") not in (None, "auto"):  # auto: decided at the start of the run (trainer/fast_path.py)
        if not isinstance(o["sparse_ft"], bool):
            raise _bad("optimizer.sparse_ft", o["sparse_ft"], "true, false or auto")
        if o["sparse_ft"]:
            from .sparse_optim import adamw_settings

            adamw_settings(cls, {k: v for k, v in o.items() if not k.startswith("_") and k != "sparse_ft"})
    lr = o.get("lr")
    _num("optimizer.lr", lr, 0.0, lo_open=True)
    _num("optimizer.weight_decay", o.get("weight_decay"), 0.0, none_ok=True)
    _num("optimizer.eps", o.get("eps"), 0.0, none_ok=True, lo_open=True)
    b = o.get("betas")
    if b is not None and (not isinstance(b, (list, tuple)) or len(b) != 2
                          or not all(_is_num(x) and 0 <= x < 1 for x in b)):
        raise _bad("optimizer.betas", b, "two numbers in [0, 1), e.g. [0.9, 0.999]")
    _int("optimizer.warmup_steps", o.get("warmup_steps"), 0, none_ok=True)


def check_train_config(cfg) -> None:
    """cfg: the composed, resolved training config (DictConfig or dict). Raises ValueError."""
    from .schedule import SHAPES, check_scheduler_cfg

    c = plain(cfg)
    import pytorch_lightning as pl

    from .data import NNUEDataModule

    nested = {**{k: "trainer" for k in _params(pl.Trainer.__init__)},
              **{k: "data" for k in _params(NNUEDataModule.__init__)}}
    for k in c:  # a key of trainer or data given at the top level (+max_epochs=1): a typo
        if k in nested and k not in ("seed", "logger", "callbacks", "path", "weights"):
            raise ValueError(f"{k}: not a top-level key; did you mean {nested[k]}.{k}?")
    _int("seed", c.get("seed"), 0, 2**32 - 1)
    check_trainer(c.get("trainer") or {})
    check_data(c.get("data") or {})
    check_optimizer(c.get("optimizer") or {})
    if (c.get("optimizer") or {}).get("sparse_ft") is True:  # auto turns itself off where these refuse true
        t = c.get("trainer") or {}
        d, nodes = t.get("devices", 1), t.get("num_nodes", 1) or 1
        if nodes != 1 or d == -1 or (_is_int(d) and d > 1) or (isinstance(d, (list, tuple)) and len(d) > 1):
            raise ValueError("optimizer.sparse_ft=true trains on one device (its sparse gradients are not "
                             "all-reduced); use trainer.devices=1, or optimizer.sparse_ft=false")
        if t.get("gradient_clip_val"):
            raise ValueError("optimizer.sparse_ft=true: trainer.gradient_clip_val does not take sparse gradients")
    check_scheduler_cfg(c.get("scheduler"))
    lam = c.get("wdl_lambda") or {}
    _known("wdl_lambda", lam, {"start", "end", "shape"})
    _num("wdl_lambda.start", lam.get("start"), 0.0, 1.0, none_ok=True)
    _num("wdl_lambda.end", lam.get("end"), 0.0, 1.0, none_ok=True)
    if lam.get("shape", "linear") not in SHAPES:
        raise _bad("wdl_lambda.shape", lam.get("shape"), f"one of {', '.join(SHAPES)}")
    loss = (c.get("model") or {}).get("loss") or {}
    _num("model.loss.wdl_lambda", loss.get("wdl_lambda", 0.1), 0.0, 1.0)
    _num("model.loss.power", loss.get("power", 2.0), 0.0, lo_open=True)
    from .loss import check_loss_config

    check_loss_config(loss)  # known keys (target, residual_space, teacher, ...) and their values
    cks = c.get("checkpoints") or {}
    _known("checkpoints", cks, {"weights_every_n_epochs"})
    _int("checkpoints.weights_every_n_epochs", cks.get("weights_every_n_epochs", 0), 0)
    es = c.get("early_stopping") or {}
    _known("early_stopping", es, {"patience", "min_delta", "monitor"})
    _int("early_stopping.patience", es.get("patience"), 0, none_ok=True)
    _num("early_stopping.min_delta", es.get("min_delta", 0.0), 0.0)
    metric = c.get("optimized_metric")
    if metric is not None and not isinstance(metric, str):
        raise _bad("optimized_metric", metric, "a logged metric name, e.g. val_loss or val_spearman")
    ck = c.get("ckpt_path")
    if ck is not None and not Path(str(ck)).is_file():
        raise ValueError(f"ckpt_path={ck}: no such checkpoint file (OUT/checkpoints/last.ckpt of an earlier run)")


def _given(overrides: list[str], group: str) -> bool:
    """Whether the command line sets ``group`` (``group=…``, ``group.key=…``, with or without
    Hydra's ``+``/``++`` prefixes)."""
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key == group or key.startswith(group + "."):
            return True
    return False


def check_train_args(overrides: list[str]) -> str | None:
    """Compose the training config as ``nnue train`` will and check its data, so that a bad
    override, a missing ``data.path`` or an unreadable dataset is one line of error, not a
    Hydra traceback and a half-made output folder. Returns the error text, or None.
    (``nnue train``, ``nnue retrain`` and the sweep check call it; it imports Hydra, the
    trainer's modules and the kernels' backend list when called.)"""
    from .sweep import check_multirun, is_multirun
    if is_multirun(overrides):  # a sweep (-m, hparams_search=...): its overrides, jobs, launcher
        return check_multirun(overrides, check_train_args)
    if any(a.startswith("-") for a in overrides):
        return None  # Hydra's own flags (--help, --cfg, -m ...): let Hydra handle them
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from nnue.pipeline import manifest as mf

    try:
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            cfg = compose("train", overrides=overrides)
        OmegaConf.resolve(cfg)
        check_train_config(cfg)  # types, ranges, known keys, devices, a finite stop
        paths = cfg.data.path
        paths = [paths] if isinstance(paths, str) else list(paths)
        for p in paths:  # a folder `nnue pack --watch` made and has not packed into yet: wait for a part
            mf.wait_for_first_part(p, float(cfg.data.get("wait_for_data_s", 0) or 0),
                                   lambda text: print(f"nnue train: {text}", file=sys.stderr, flush=True))
        if not sum(mf.totals(mf.load(p))["packed"] for p in paths):
            return f"data.path={','.join(map(str, paths))}: 0 positions packed; nothing to train on"
        vci = cfg.trainer.get("val_check_interval")
        if isinstance(vci, (int, float)) and vci != 1.0:  # against the epoch's batches: the data's
            from hydra.utils import instantiate

            from .train import _world_size

            t = plain(cfg.trainer)
            dm, ws = instantiate(cfg.data), _world_size(t)
            # one pass, no length: a single process without a fixed epoch (DDP epochs have a length)
            one_pass = ws == 1 and dm.train_positions_per_epoch(ws) is None
            check_val_interval(t, *dm.steps_per_epoch(ws), one_pass=one_pass)
        from .runs import check_run_folder  # a folder holding a run: refused, one line
        if cfg.paths.output_dir and (why := check_run_folder(cfg.paths.output_dir, cfg.get("ckpt_path"),
                                                             bool(cfg.get("overwrite", False)))):
            return why
        from nnue.kernels import BACKENDS
        from nnue.pipeline.features import get_feature_set, parse_output_buckets
        from . import kinds
        from nnue.pipeline.features import factor_map

        m = cfg.model
        fs = get_feature_set(m.features)
        buckets = parse_output_buckets(m.output_buckets)
        kind = kinds.kind_of(m)
        if kind not in kinds.KINDS:
            return f"model.kind={kind}: one of {', '.join(kinds.KINDS)}"
        _int("model.hidden", m.hidden, 1)
        hidden = m.hidden
        d = kinds.layers_config(kind, m)
        for k in ("l1_outputs", "l2_outputs"):
            if k in d:
                _int(f"model.{kinds.get(kind).layers_key}.{k}", d[k], 1, 4096)
        # the kind's arch checks activations (where each is allowed) and sizes
        kinds.check_kind_inputs(kind, fs.name, buckets.name, features_given=_given(overrides, "features"))
        kinds.get(kind).float_arch.from_config(fs.num_inputs, hidden, m.activation, buckets.count, d, 1.0)
        if not isinstance(m.get("qat", False), bool) and m.get("qat") != "auto":
            return f"model.qat={m.qat}: true, false or auto"
        from nnue.inference.residual import header as residual_header
        try:
            residual_header("material", m.get("alpha", 0.5))  # α: a multiple of 1/256 in (0, 4]
        except ValueError as e:
            return f"model.alpha={m.get('alpha')}: {str(e).split(': ', 1)[1]}"
        mb = m.get("max_bytes")
        if mb is not None and (not isinstance(mb, int) or isinstance(mb, bool) or mb < 1):
            return f"model.max_bytes={mb}: a positive integer (bytes of the exported net.safetensors) or null"
        try:
            act_l1 = float(m.get("act_l1", 0.0))
        except (TypeError, ValueError):
            act_l1 = -1.0
        if not act_l1 >= 0:
            return f"model.act_l1={m.act_l1}: a number ≥ 0 (the weight of the L1 activation penalty)"
        from .loss import check_loss_config
        loss = check_loss_config(dict(m.get("loss") or {}))
        needed = (["base_eval"] if loss["target"] == "residual" else []) + \
            (["teacher_eval"] if loss["teacher"] != "score" else [])
        if needed:  # the loss needs the annotated columns (nnue annotate)
            from nnue.pipeline.annotate import missing_columns
            err = missing_columns(paths, needed)
            if err:
                return err
        if m.get("backend", "auto") not in BACKENDS:
            return f"model.backend={m.backend}: one of {', '.join(BACKENDS)}"
        if m.get("backend") == "numba" and str(cfg.trainer.get("accelerator", "cpu")) in ("gpu", "cuda"):
            return "model.backend=numba runs on the CPU; with trainer=gpu use model.backend=auto (Triton)"
        if m.get("factoriser"):
            from . import kinds
            entry = kinds.KINDS.get(kinds.kind_of(m))
            factor_map(m.features, fs.num_inputs, partial=bool(entry and entry.partial_factoriser))
    except Exception as e:  # Hydra/OmegaConf raise many types; all mean "bad arguments" here
        msg = " ".join(str(e.args[0] if isinstance(e, KeyError) and e.args else e).split())
        if "Missing mandatory value: data.path" in msg:
            msg = "data.path is required (a dataset folder written by 'nnue pack')"
        elif "LexerNoViableAltException" in msg:
            msg = (f"{msg.split(' ^ ')[0].replace('LexerNoViableAltException: ', '')}: Hydra cannot parse "
                   "this override; quote values with <, > or spaces, e.g. "
                   """'model.output_buckets="SFPieceCount<8>"'""")
        return msg
    finally:
        GlobalHydra.instance().clear()
    return None
