"""The CPU fast path by default: resolve ``model.backend=auto`` and ``optimizer.sparse_ft=auto`` of a
training config from the device, the world size, the optimiser and what the kind's net covers.

On the CPU, ``model.backend=auto`` trains with the compiled feature transformer (``numba``:
:mod:`nnue.kernels.sparse_ft_numba`; its forward is bit-identical to the torch reference and its
gradients agree to fp32 summation order, ``tests/kernels/test_sparse_ft_numba.py``), and on one
device ``optimizer.sparse_ft=auto`` turns on the row-sparse AdamW
(:class:`nnue.trainer.sparse_optim.RowSparseAdamW`: AdamW on every row a batch touches, the exact
decay of the others, no momentum drift of untouched rows). Where they do not apply the defaults stay
as they were, and :func:`resolve` says why:

* a GPU (or ``trainer.accelerator=auto`` with CUDA present): ``auto`` stays ``auto`` (Triton on
  CUDA), ``sparse_ft`` off;
* several devices (DDP): the compiled feature transformer on CPU ranks, ``sparse_ft`` off (its
  sparse gradients are not all-reduced);
* a kind whose record does not declare ``compiled_ft(activation, qat)`` true (a new kind without
  a compiled path; sfnnv5 under QAT): the torch reference, ``sparse_ft`` off;
* an optimiser the row-sparse AdamW cannot stand in for (not AdamW, amsgrad, ...) or gradient
  clipping: ``sparse_ft`` off.

A value the user set (``model.backend=torch``, ``optimizer.sparse_ft=false`` ...) is kept as it is.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FastPath:
    """What :func:`decide` chose: ``backend`` (the value for ``model.backend``), ``sparse_ft``
    (for ``optimizer.sparse_ft``; None: the optimiser config has no such key) and ``note``, the
    one line the training log prints."""

    backend: str
    sparse_ft: bool | None
    note: str


def _device(t: dict) -> str:
    """"cpu" or the accelerator a trainer config trains on (auto: cuda when CUDA is available)."""
    acc = str(t.get("accelerator", "cpu") or "cpu")
    if acc == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cpu" if acc == "cpu" else acc


def world_size(t: dict) -> int:
    """Devices × nodes of a trainer config; devices -1 or "auto" count as 2 (more than one: the
    row-sparse optimiser stays off, as :func:`nnue.trainer.checks.check_train_config` refuses it there)."""
    d, n = t.get("devices", 1), t.get("num_nodes", 1) or 1
    if isinstance(d, bool):
        return 1
    if isinstance(d, int):
        return d * n if d > 0 else 2
    if isinstance(d, (list, tuple)):
        return len(d) * n
    if isinstance(d, str) and d.isdigit():
        return int(d) * n
    return 1 if d in (None, "1") else 2


def _kind_covers(m: dict) -> str | None:
    """Why the compiled CPU feature transformer does not cover the net of model config ``m``, or
    None: the kind record's ``compiled_ft`` (:class:`nnue.trainer.kinds.spec.TrainerKind`). An
    unresolved ``model.qat=auto`` counts as off, as the model reads it."""
    from . import kinds

    kind = kinds.kind_of(m)
    covers, qat = kinds.get(kind).compiled_ft, m.get("qat") is True
    if covers is None:
        return f"the {kind} kind has no compiled CPU feature transformer"
    if not covers(str(m.get("activation")), qat):
        return (f"the {kind} kind's compiled feature transformer does not cover "
                f"{'QAT' if qat else 'activation ' + str(m.get('activation'))}")
    return None


def _optimizer_takes_sparse(o: dict, t: dict) -> str | None:
    """Why the row-sparse AdamW cannot stand in for optimiser config ``o`` (trainer config ``t``), or None."""
    from hydra.utils import get_class

    from .sparse_optim import adamw_settings

    if t.get("gradient_clip_val"):
        return "trainer.gradient_clip_val is set"
    try:
        adamw_settings(get_class(o.get("_target_")),
                       {k: v for k, v in o.items() if not k.startswith("_") and k != "sparse_ft"})
    except Exception as e:  # another optimiser, amsgrad, an unknown setting; an unimportable class
        return str(e).replace("optimizer.sparse_ft=true: ", "").replace("optimizer.sparse_ft=true ", "")
    return None


def decide(model: dict, optimizer: dict, trainer: dict) -> FastPath:
    """The fast path's choice for plain config mappings ``model``, ``optimizer`` and ``trainer`` (the
    groups of ``nnue train``'s config). Reads ``model.backend`` ("auto" is to be decided) and
    ``optimizer.sparse_ft`` ("auto" is to be decided; absent: the optimiser has none, e.g.
    schedule-free). Raises ValueError for an unknown kind."""
    backend, sparse = str(model.get("backend", "auto")), optimizer.get("sparse_ft")
    device, world = _device(trainer), world_size(trainer)
    why_not: list[str] = []
    if backend == "auto":
        if device != "cpu":
            why_not.append(f"training on {device}: model.backend=auto stays auto (Triton on CUDA)")
        elif (no := _kind_covers(model)) is not None:
            backend = "torch"
            why_not.append(f"{no}: model.backend=auto -> torch")
        else:
            backend = "numba"
    if sparse == "auto":
        if backend != "numba":
            sparse = False
            if device == "cpu" and not why_not:
                why_not.append(f"model.backend={backend}: optimizer.sparse_ft=auto -> false (row-sparse "
                               f"gradients come from the compiled feature transformer)")
            else:
                why_not.append("optimizer.sparse_ft=auto -> false")
        elif world > 1:
            sparse = False
            why_not.append(f"{world} devices: optimizer.sparse_ft=auto -> false (its sparse gradients are not all-reduced)")
        elif (no := _optimizer_takes_sparse(optimizer, trainer)) is not None:
            sparse = False
            why_not.append(f"optimizer.sparse_ft=auto -> false: {no}")
        else:
            sparse = True
    fast = backend == "numba" and sparse in (True, None)
    what = (f"compiled feature transformer (model.backend={backend})" if backend == "numba" else
            f"model.backend={backend}") + (f", row-sparse AdamW (optimizer.sparse_ft={str(sparse).lower()})"
                                           if sparse else (", dense optimiser" if sparse is False else ""))
    if fast and model.get("backend", "auto") == "auto" and optimizer.get("sparse_ft") in ("auto", None):
        note = (f"CPU fast path: {what}; model.backend=torch optimizer.sparse_ft=false trains on the torch "
                f"reference path")
    elif why_not:
        note = f"training with {what}: " + "; ".join(why_not)
    else:
        note = f"training with {what}, as configured"
    return FastPath(backend, sparse, note)


def resolve(cfg) -> str:
    """Resolve ``cfg.model.backend`` and ``cfg.optimizer.sparse_ft`` of a composed ``nnue train``
    config in place (:func:`decide`), so that the model and the optimiser are built, and the run's
    config.yaml is written, with what runs. Returns the line to log (once, by rank 0)."""
    from omegaconf import open_dict

    from .callbacks import plain

    choice = decide(plain(cfg.model), plain(cfg.optimizer), plain(cfg.trainer))
    with open_dict(cfg):
        cfg.model.backend = choice.backend
        if choice.sparse_ft is not None:
            cfg.optimizer.sparse_ft = choice.sparse_ft
    return choice.note
