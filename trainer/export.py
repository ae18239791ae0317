"""Post-training export: quantise a checkpoint into an integer net, audit it, cross-check it.

Steps, in the visible chain bullet's saved format uses:

1. load the float model (Lightning ``.ckpt`` or ``weights-*.safetensors``);
2. quantise (:func:`quantise`): ``l0w = round(W·QA)``, ``l0b = round(b0·QA)``,
   ``l1w = round(W1·QB)``, ``l1b = round(b1·QA·QB)``, all int16;
3. calibrate, on half of the validation positions, with the kind's ``calibrate`` piece
   (:mod:`nnue.trainer.kinds`): perspective nets correct L1's bias for the mean rounding error of
   L1's weights, deep and tiny nets their output bias for the mean integer-vs-float offset
   (:func:`nnue.trainer.quantise.calibrate_output_bias`); this runs after a first audit, on the
   audited tensors, and the changed tensors are audited again;
4. audit (:func:`audit`): every value fits int16; per neuron, ``|l0b| + Σ of the max_active
   largest |l0w|`` fits int16 (the accumulator can never overflow); for screlu/pairwise,
   ``|l1w|·QA`` fits int16; the L1 sum's worst case against int32, and, where that bound is not
   proven, the largest sum seen on real validation positions. A violation raises
   :class:`ExportError` naming layer, neuron and value, unless ``clip=True``, which clips and
   reports what it clipped;
5. write ``net.safetensors``, the kind's engine file (``engine_file``: ``net.bin``, the raw
   layout; sfnnv5 ``net.nnue``) and ``export.json`` (audit plus float-vs-integer differences on
   the other half of the validation positions: mean |Δcp|, max |Δcp|, mean signed Δcp).

Steps 2–4 are the kind's pieces (:class:`nnue.trainer.kinds.spec.TrainerKind`: ``quantise``,
``audit``, ``calibrate``); the formulas above are the perspective kind's, the other kinds' are in
their modules.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import torch
from safetensors import safe_open

from nnue.inference import api as inference_api
from nnue.inference.net import field_problem, json_type_name, quant_problem
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme
from nnue.pipeline import manifest as mf
from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.batch import to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets

from .metrics import spearman
from . import kinds
from .quantise import ExportError, index_of  # ExportError: raised by every step of the export


def load_checkpoint(path: str | Path) -> tuple[torch.nn.Module, dict, dict, dict]:
    """Load a float model from a Lightning ``.ckpt`` or a ``weights-*.safetensors`` file.

    Returns (model in eval mode, hparams, data hparams (may be empty), progress dict).
    Raises ExportError for an unreadable file.
    """
    path = Path(path)
    if not path.exists():
        raise ExportError(f"{path}: no such checkpoint")
    if path.is_dir():
        raise ExportError(f"{path}: is a folder; give a checkpoint file (checkpoints/last.ckpt or "
                          f"checkpoints/weights-*.safetensors)")
    if path.suffix == ".safetensors":
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                state = {k.replace("_orig_mod.", ""): f.get_tensor(k) for k in f.keys()}
        except Exception as e:  # safetensors raises its own error types
            raise ExportError(f"{path}: not a readable safetensors file (truncated?): {e}") from None
        if "hparams" not in meta:
            raise ExportError(f"{path}: safetensors file without 'hparams' metadata; not a weights checkpoint")
        hp, data, progress = (_json_object(path, meta, k) for k in ("hparams", "data", "progress"))
    else:
        from .checkpoint import UnsafeCheckpointError, load_ckpt  # weights_only: no code runs on load

        try:
            ck = load_ckpt(path)
        except UnsafeCheckpointError as e:
            raise ExportError(str(e)) from None
        if not isinstance(ck, dict) or "state_dict" not in ck or "hyper_parameters" not in ck:
            raise ExportError(f"{path}: a torch file, but not a Lightning checkpoint of nnue train "
                              f"(no state_dict / hyper_parameters)")
        hp = dict(ck.get("hyper_parameters", {}))
        data = dict(ck.get("datamodule_hyper_parameters", {}))
        # torch.compile'd models save "model._orig_mod.*": the same weights
        state = {k.removeprefix("model.").replace("_orig_mod.", ""): v for k, v in ck["state_dict"].items()
                 if k.startswith("model.")}
        progress = {"epoch": ck.get("epoch"), "global_step": ck.get("global_step"),
                    "val_loss": ck.get("nnue_forge", {}).get("val_loss")}
    fs, buckets, scheme = _check_hparams(path, hp)
    try:
        model = kinds.build(hp, fs, buckets, scheme, backend="torch")  # the net settings saved flat in hp
        model.load_state_dict(state)
        if hp.get("qat"):
            model.enable_qat(scheme)  # the function the net was trained as
    except (ValueError, RuntimeError, TypeError) as e:
        raise ExportError(f"{path}: checkpoint does not match its hparams: {' '.join(str(e).split())}") from None
    model.eval()
    return model, hp, data, progress


def _json_object(path, meta: dict, key: str) -> dict:
    """A metadata entry of a weights checkpoint decoded as a JSON object ({} when absent)."""
    if key not in meta:
        return {}
    try:
        v = json.loads(meta[key])
    except ValueError as e:
        raise ExportError(f"{path}: metadata {key!r} is not valid JSON (at character {getattr(e, 'pos', '?')})") from None
    if not isinstance(v, dict):
        raise ExportError(f"{path}: metadata {key!r} is {json_type_name(v)}, expected an object")
    return v


#: hparams field -> (type, required); the kind's own group (its ``layers_key``) must be an object too
_HPARAMS = {"features": (str, True), "output_buckets": (str, True), "hidden": (int, True), "activation": (str, True),
            "kind": (str, False), "quant": (dict, False), "factoriser": (bool, False),
            "qat": (bool, False), "alpha": ((int, float), False), "max_bytes": (int, False)}


def _check_hparams(path, hp: dict):
    """Type-check a checkpoint's hparams (every field the export reads); returns (feature set,
    output buckets, scheme). Raises ExportError naming the file and the field."""
    for name, (types, required) in _HPARAMS.items():
        why = None if hp.get(name) is None and not required else field_problem(hp, name, types)
        if why:
            raise ExportError(f"{path}: hparams field {name!r} {why}")
    kind = kinds.KINDS.get(kinds.kind_of(hp))
    key = kind.layers_key if kind is not None else None
    why = field_problem(hp, key, dict) if key and hp.get(key) is not None else None
    if why:
        raise ExportError(f"{path}: hparams field {key!r} {why}")
    quant = hp.get("quant") or {}
    bad = quant_problem(quant)
    if bad:
        raise ExportError(f"{path}: hparams field 'quant.{bad[0]}' {bad[1]}")
    try:
        fs = get_feature_set(hp["features"])
    except (KeyError, ValueError) as e:
        raise ExportError(f"{path}: hparams field 'features': {e.args[0] if e.args else e}") from None
    try:
        buckets = parse_output_buckets(hp["output_buckets"])
    except (KeyError, ValueError) as e:
        raise ExportError(f"{path}: hparams field 'output_buckets': {e.args[0] if e.args else e}") from None
    return fs, buckets, QuantScheme(**quant)


def quantise(model: torch.nn.Module, scheme: QuantScheme) -> dict[str, torch.Tensor]:
    """Float state -> rounded integer tensors, int64 (range checked by :func:`audit`): the kind's
    ``quantise`` (:mod:`nnue.trainer.kinds`; e.g. perspective nets: l0 at QA, l1 weights at QB,
    l1 bias at QA·QB). Raises ExportError naming the parameter when a value is not finite (NaN
    or ±inf: rounding would turn it into an arbitrary integer)."""
    for name, t in model.state_dict().items():
        bad = ~torch.isfinite(t)
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            raise ExportError(f"parameter {name}: {int(bad.sum())} value(s) not finite, first at "
                              f"{index_of(t, i)} = {float(t.flatten()[i])}: the checkpoint is broken "
                              f"(diverged training?); --clip cannot repair it")
    return kinds.get(model.arch.kind).quantise(model, scheme)


def audit(q: dict[str, torch.Tensor], arch, scheme: QuantScheme, max_active: int,
          clip: bool = False) -> tuple[dict[str, torch.Tensor], dict]:
    """Check (or, with clip, repair) the static ranges of quantised tensors: the audit of the
    net's kind (:mod:`nnue.trainer.kinds`)."""
    return kinds.get(arch.kind).audit(q, arch, scheme, max_active, clip)


def validation_boards(data: dict, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``limit`` validation positions of the training data (same split and filters).
    Returns (boards (N, 32) uint8, scores (N,) float32 centipawns)."""
    rows = validation_rows(data, limit)
    return rows["boards"], rows["score"]


def validation_rows(data: dict, limit: int, extra: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """:func:`validation_boards` with more columns: {"boards", "score"} and each column of
    ``extra`` (e.g. "base_eval": (N,) float32, NaN = null) that every part of the data has."""
    from nnue.pipeline.stream import Filters, PackedStream

    empty = {"boards": torch.zeros((0, 32), dtype=torch.uint8), "score": torch.zeros(0)}
    paths = data.get("path")
    if not paths:
        return empty
    paths = [paths] if isinstance(paths, str) else list(paths)
    ds = PackedStream(paths, 8192, 0, "val", float(data.get("val_fraction", 0.05)),
                      Filters(**dict(data.get("filters") or {})), drop_last=False, strict=True)
    names = ["boards", "score"] + [c for c in extra if c in ds.extra_columns]
    got: dict[str, list] = {c: [] for c in names}
    n = 0
    for b in ds:
        for c in names:
            got[c].append(b[c])
        n += len(b["score"])
        if n >= limit:
            break
    if not got["boards"]:
        return empty | {c: torch.zeros(0) for c in names[2:]}
    return {c: torch.cat(v)[:limit] for c, v in got.items()}


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _int_net(model, q: dict[str, torch.Tensor], scheme: QuantScheme, fs, buckets, provenance: dict,
             residual: dict | None = None):
    """The integer net of quantised (and audited) tensors: the kind's arch builder and integer
    class (:mod:`nnue.trainer.kinds`); ``residual``: the header's residual object, if any."""
    entry = kinds.get(model.arch.kind).inference
    arch = entry.arch_builder(feature_set=fs.name, output_buckets=buckets.name, **model.arch.header_args())
    if residual is not None:
        arch["residual"] = residual
    cls = entry.integer
    specs = cls.tensor_specs(arch)
    return cls(arch, scheme, *(q[k].to(dt) for k, (dt, _) in specs.items()), provenance=provenance)


def residual_of(hp: dict, data: dict, base: str | None = None, alpha: float | None = None) -> dict | None:
    """The ``residual`` header object (:mod:`nnue.inference.residual`) of a run trained with
    ``model.loss.target=residual``, None for other runs. base: the base's name, default the
    ``base_eval`` annotation of the training data's manifest (``nnue annotate --base``);
    alpha: default the run's ``model.alpha`` (0.5). Raises ExportError when the base is not
    known, or α is not a multiple of 1/256 in (0, 4]."""
    from nnue.inference import residual

    if (hp.get("loss") or {}).get("target") != "residual":
        if base is not None or alpha is not None:
            raise ExportError("--base / --alpha go with a residual net (model.loss.target=residual); this "
                              "checkpoint was trained on the plain target")
        return None
    if base is None:
        paths = data.get("path")
        first = (paths if isinstance(paths, str) else list(paths)[0]) if paths else None
        try:
            ann = mf.load(first).get("annotations", {}).get("base_eval", {}) if first else {}
        except (mf.ManifestError, OSError):
            ann = {}
        base = ann.get("source")
        if base is None:
            raise ExportError(f"residual net: which base it was trained on is not known (no base_eval annotation "
                              f"in the manifest of {first or 'its training data'}); pass --base "
                              f"{'|'.join(residual.BASES)}")
    a = hp.get("alpha", 0.5) if alpha is None else alpha
    try:
        return residual.header(base, a)
    except ValueError as e:
        raise ExportError(str(e)) from None


def check_size(net, max_bytes: int | None) -> int:
    """The size of the net's ``net.safetensors`` in bytes; raises ExportError with it when it
    exceeds ``max_bytes`` (``model.max_bytes``; None: no limit)."""
    n = len(net.file_bytes())
    if max_bytes is not None and n > max_bytes:
        raise ExportError(f"net.safetensors would be {n:,} bytes ({n / 2**20:.2f} MiB), over model.max_bytes = "
                          f"{max_bytes:,} ({max_bytes / 2**20:.2f} MiB); nothing written")
    return n


#: the mean float-vs-integer gap (centipawns, on the validation positions) above which ``nnue
#: export`` warns. Measured: QAT nets well under 1 cp (the official Stockfish 19 net exported
#: again and a QAT fine-tune of it: 0.34 cp); small perspective nets trained without QAT 3-5 cp
#: (the demo: 3.9); fine-tunes of engine nets without QAT 35 cp (Stockfish 19) and 52 cp (15.1)
GAP_WARN_CP = 10.0


def gap_warning(mean_abs_cp: float, qat: bool) -> str:
    """The one-line warning of a mean float-vs-integer gap above :data:`GAP_WARN_CP`, with the fix."""
    if not qat:
        fix = ("it was trained without QAT, so its weights drifted off the integer grids: train (or fine-tune) "
               "with model.qat=true, the default for warm starts of engine kinds")
    else:
        fix = ("it was trained with QAT; look for clipped weights in the audit (--clip) or activations the "
               "integer path approximates")
    return (f"the integer net is {mean_abs_cp:.1f} cp from the float net on average (more than "
            f"{GAP_WARN_CP:g} cp): {fix}")


def export(ckpt: str | Path, out_dir: str | Path, clip: bool = False, data_path=None,
           max_positions: int = 20000, bias_correction: bool = True, alpha: float | None = None,
           base: str | None = None, max_bytes: int | None = None,
           final_dir: str | Path | None = None) -> dict:
    """Export a checkpoint into ``out_dir`` (net.safetensors, the kind's engine file, export.json:
    ``net.bin``, or for an sfnnv5 net Stockfish 15.1's ``net.nnue``).

    final_dir: where ``out_dir`` is renamed to once complete (``nnue retrain`` exports into
    ``work/NNNN`` and renames it to ``versions/NNNN``): the paths export.json and the net's
    provenance give under ``out_dir`` (the nets, the checkpoint) name that folder instead.

    data_path: dataset(s) for the cross-check, overriding the checkpoint's own. max_positions:
    validation positions read; with bias_correction the even-numbered ones calibrate the bias
    (the kind's ``calibrate``) and the odd-numbered ones are the cross-check, else all are the
    cross-check.
    A run trained with ``model.loss.target=residual`` exports a residual net
    (:func:`residual_of`: base and α, default the run's ``model.alpha``, in the header).
    max_bytes: limit on ``net.safetensors`` (default the run's ``model.max_bytes``, none if
    unset). Returns the export.json contents. Raises ExportError (overflow, bad checkpoint,
    over the byte budget) and writes nothing then.
    """
    if max_positions < 0:
        raise ExportError(f"max_positions is {max_positions}: it must be 0 or more")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir}: exists and is not a folder; -o names the folder to write "
                          "net.safetensors, net.bin and export.json into")
    model, hp, data, progress = load_checkpoint(ckpt)
    res = residual_of(hp, data, base, alpha)  # from the training data's manifest, before --data
    if max_bytes is None:
        max_bytes = hp.get("max_bytes")
    if max_bytes is not None and (not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 1):
        raise ExportError(f"max_bytes is {max_bytes!r}: a positive integer (bytes of net.safetensors)")
    if data_path is not None:
        data = dict(data, path=data_path)
    scheme = QuantScheme(**(hp.get("quant") or {}))
    fs = get_feature_set(hp["features"])
    buckets = parse_output_buckets(hp["output_buckets"])
    boards, scores = validation_boards(data, max_positions)
    q = quantise(model, scheme)
    calibration = {"bias_correction": False, "positions": 0}
    cb = None
    if bias_correction and boards.shape[0] >= 2:
        cb = to_sparse_batch({"boards": boards[0::2], "score": scores[0::2], "result": scores[0::2]}, fs, buckets)
        boards, scores = boards[1::2], scores[1::2]
        calibration = {"bias_correction": True, "positions": int(cb.score.shape[0])}
    q, report = audit(q, model.arch, scheme, fs.max_active, clip)
    paths = data.get("path")
    manifest_hash = None
    if paths:
        first = paths if isinstance(paths, str) else list(paths)[0]
        if (Path(first) / mf.MANIFEST).exists():
            manifest_hash = mf.digest(first)
    def named(p) -> str:
        """A path under out_dir as it will be known (under final_dir)."""
        if final_dir is not None:
            try:
                return str(Path(final_dir) / Path(p).resolve().relative_to(out_dir.resolve()))
            except ValueError:
                pass
        return str(p)

    provenance = {"checkpoint": named(ckpt), "dataset_manifest_sha256": manifest_hash,
                  "commit": _git_commit(), "epoch": progress.get("epoch"),
                  "global_step": progress.get("global_step"), "val_loss": progress.get("val_loss")}
    net = _int_net(model, q, scheme, fs, buckets, provenance, res)
    if cb is not None:  # the kind's bias calibration (nnue.trainer.kinds: calibrate)
        calibrate = kinds.get(model.arch.kind).calibrate
        changed, info = calibrate(model, q, net, scheme, cb.stm_indices, cb.nstm_indices, cb.bucket)
        calibration |= info
    if cb is not None and changed:
        q |= changed
        q, again = audit(q, model.arch, scheme, fs.max_active, clip)  # the new outb must fit int32 too
        for k, n in again["clipped"].items():
            report["clipped"][k] = report["clipped"].get(k, 0) + n
        report = again | {"clipped": report["clipped"], "problems": report["problems"] + again["problems"]}
        net = _int_net(model, q, scheme, fs, buckets, provenance, res)
    # cross-check on real validation positions: float eval vs integer eval, and int32 sums
    cross = {"positions": int(boards.shape[0]), "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if boards.shape[0]:
        b = to_sparse_batch({"boards": boards, "score": scores, "result": scores}, fs, buckets)
        with torch.no_grad():
            float_cp = model(b.stm_indices, b.nstm_indices, b.bucket).double() * scheme.scale
        try:
            int_cp, parts = inference_api.forward_int(net, b.stm_indices, b.nstm_indices, b.bucket, return_parts=True)
        except OverflowError as e:
            raise ExportError(f"integer eval overflows on a validation position: {e}") from None
        d = int_cp.double() - float_cp
        cross |= {
            "mean_abs_diff_cp": float(d.abs().mean()), "max_abs_diff_cp": float(d.abs().max()),
            "mean_signed_diff_cp": float(d.mean()),
            "spearman_int_vs_score": spearman(int_cp.numpy(), scores.numpy()),
            "spearman_float_vs_score": spearman(float_cp.numpy(), scores.numpy()),
        }
        if cross["mean_abs_diff_cp"] > GAP_WARN_CP:
            cross["warning"] = gap_warning(cross["mean_abs_diff_cp"], bool(hp.get("qat")))
        sums = [k for k in ("s1", "s2", "out", "sum") if k in parts]
        names = {"s1": "l1_sum", "s2": "l2_sum", "out": "out_sum", "sum": "l1_sum"}
        cross |= {f"{names[k]}_max_abs_seen": int(parts[k].abs().max()) for k in sums}
    # export.json is written last and names the hashes of the two nets: a folder whose
    # export.json is missing, or whose nets do not hash to what it says, is not a finished export
    # (an interrupted re-export removes the old export.json before it replaces anything)
    size = check_size(net, max_bytes)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "export.json").unlink(missing_ok=True)
    net.save(out_dir / "net.safetensors")
    engine_file = kinds.get(model.arch.kind).inference.engine_file  # sfnnv5: net.nnue, Stockfish 15.1's file
    net.write_bin(out_dir / engine_file)
    result = {
        "net": named(out_dir / "net.safetensors"), "bin": named(out_dir / engine_file),
        "sha256": {"net.safetensors": mf.sha256_file(out_dir / "net.safetensors"),
                   engine_file: mf.sha256_file(out_dir / engine_file)},
        "bin_layout": net.raw_layout(), "bytes": {"net.safetensors": size, "max_bytes": max_bytes},
        "residual": res,
        "architecture": net.arch, "quantisation": scheme.to_dict(), "provenance": net.provenance,
        "audit": report, "calibration": calibration, "cross_check": cross,
    }
    if hasattr(net, "layers"):
        result["layers"] = net.layers()
    approx = sorted({n for n in net.arch.values() if isinstance(n, str) and n in acts.ACTIVATIONS
                     and acts.approximation(n) is not None})
    if approx:
        # an activation without an exact integer form (swish, and the units it gates): the integer
        # net uses the spec's approximation; its own error report, apart from the cross-check
        result["activation_approximation"] = {n: acts.approximation(n)(scheme.qa) for n in approx}
    atomic_write_bytes(out_dir / "export.json", (json.dumps(result, indent=1, default=float) + "\n").encode())
    return result
