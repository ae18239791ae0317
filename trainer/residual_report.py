"""Quality of a residual net (``model.loss.target=residual``) on held-out games, float net.

``python -m nnue.trainer.residual_report CKPT [--net NETDIR] [--data DATASET] [--alphas 1,0.5] [--json]``
streams the validation games of the checkpoint's training data (same split by game id and the
same filters: quiet positions) and prints the Spearman rank correlation with the dataset's score
column (Stockfish's search scores) of: the base alone (``base_eval``), the net alone, and
``base + α·net`` for each α, for the *float* model of the checkpoint and, with ``--net``, for
the exported *integer* residual net (``nnue export``): its own integer eval, and
``base + α·net`` by the integer rule of :mod:`nnue.inference.residual` for each α (the header's
α is what ``nnue eval`` uses; the others are the same net with α replaced), the base being the
dataset's ``base_eval`` column (what ``nnue eval --dataset`` reads).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from nnue.pipeline.batch import to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.pipeline.stream import Filters, PackedStream

from . import kinds
from .export import load_checkpoint
from .metrics import spearman


def residual_report(ckpt: str | Path, data=None, alphas=(1.0, 0.5), max_positions: int = 200_000,
                    net: str | Path | None = None) -> dict:
    """Returns {"validation_positions", "spearman_base", "spearman_net_alone",
    "spearman_base_plus_net": {α: ρ}, "spearman_teacher_eval" (None without that column),
    "mean_abs_net_cp", "base", "loss", "kind"}, and with ``net`` (an exported residual net:
    NETDIR or its net.safetensors) "integer": {"net", "residual" (its header object),
    "spearman_net_alone", "spearman_base_plus_net": {α: ρ}, "mean_abs_net_cp",
    "mean_abs_int_minus_float_cp"}. Raises ValueError when the data has no base_eval column, or
    the net is not residual, or its base is not the column's."""
    model, hp, data_hp, _ = load_checkpoint(ckpt)
    inet = None
    if net is not None:
        from nnue.inference import load, residual

        net = Path(net) / "net.safetensors" if Path(net).is_dir() else Path(net)
        inet = load(net)
        if residual.of(inet) is None:
            raise ValueError(f"{net}: not a residual net (no architecture.residual in its header)")
    paths = data if data is not None else data_hp.get("path")
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    ds = PackedStream(paths, 8192, 0, "val", float(data_hp.get("val_fraction", 0.05)),
                      Filters(**dict(data_hp.get("filters") or {})), drop_last=False)
    if "base_eval" not in ds.extra_columns:
        raise ValueError(f"{paths[0]}: no base_eval column in every part; run 'nnue annotate'")
    fs, buckets = get_feature_set(hp["features"]), parse_output_buckets(hp["output_buckets"])
    scale = float((hp.get("quant") or {}).get("scale", 400))
    nets, bases, scores, teachers, ints, n = [], [], [], [], [], 0
    with torch.no_grad():
        for b in ds:
            sb = to_sparse_batch(b, fs, buckets)
            keep = torch.isfinite(sb.base_eval)
            y = model(sb.stm_indices, sb.nstm_indices, sb.bucket).reshape(-1) * scale
            if inet is not None:
                from nnue.inference.api import evaluate_net

                ints.append(evaluate_net(inet, b["boards"][keep]).numpy())
            nets.append(y[keep].numpy())
            bases.append(sb.base_eval[keep].numpy())
            scores.append(sb.score[keep].numpy())
            if sb.teacher_eval is not None:
                teachers.append(sb.teacher_eval[keep].numpy())
            n += int(keep.sum())
            if n >= max_positions:
                break
    net, base, score = (np.concatenate(a)[:max_positions] for a in (nets, bases, scores))
    m = json.loads(Path(paths[0], "manifest.json").read_text()).get("annotations", {}).get("base_eval", {})
    integer = None
    if inet is not None:
        r = residual.of(inet)
        if m.get("source") != r["base"]:
            raise ValueError(f"{net}: a residual net on base {r['base']}, but the data's base_eval is {m.get('source')}")
        raw = torch.from_numpy(np.concatenate(ints)[:max_positions])
        b_int = torch.from_numpy(base).round().long()
        integer = {"net": str(net), "residual": r, "spearman_net_alone": spearman(raw.numpy(), score),
                   "spearman_base_plus_net": {str(a): spearman(residual.combine(raw, b_int, residual.header(
                       r["base"], a)["alpha_num"]).numpy(), score) for a in alphas},
                   "mean_abs_net_cp": float(raw.abs().double().mean()) if len(raw) else None,
                   "mean_abs_int_minus_float_cp": float(np.abs(raw.numpy() - net_float_cp(nets, max_positions)).mean())
                   if len(raw) else None}
    return {"validation_positions": int(len(score)), "kind": kinds.kind_of(hp),
            "base": f"{m.get('source')} ({m.get('version')})",
            "loss": hp.get("loss"),
            "spearman_base": spearman(base, score),
            # the teacher_eval column itself (e.g. Stockfish's NNUE static eval), where annotated
            "spearman_teacher_eval": (spearman(np.concatenate(teachers)[:max_positions], score)
                                      if teachers else None),
            "spearman_net_alone": spearman(net, score),
            "spearman_base_plus_net": {str(a): spearman(base + a * net, score) for a in alphas},
            "mean_abs_net_cp": float(np.abs(net).mean()) if len(net) else None,
            **({"integer": integer} if integer is not None else {})}


def net_float_cp(nets: list, limit: int) -> np.ndarray:
    return np.concatenate(nets)[:limit].astype(np.float64)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnue.trainer.residual_report", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="OUT/checkpoints/last.ckpt of a residual run")
    p.add_argument("--data", default=None, help="dataset (default: the training data)")
    p.add_argument("--net", default=None, help="the exported integer residual net (NETDIR of nnue export)")
    p.add_argument("--alphas", default="1,0.5", help="comma-separated α values (default 1,0.5)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from nnue.pipeline.manifest import ManifestError

    from .export import ExportError

    try:
        r = residual_report(a.checkpoint, a.data, tuple(float(x) for x in a.alphas.split(",")), net=a.net)
    except (ExportError, ManifestError, FileNotFoundError, ValueError) as e:  # NetFormatError is a ValueError
        print(f"residual_report: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{r['validation_positions']:,} quiet positions of held-out games; base {r['base']}")
    print(f"  Spearman vs score: base {r['spearman_base']:.4f}, net alone {r['spearman_net_alone']:.4f}, "
          + ", ".join(f"base + {k}·net {v:.4f}" for k, v in r["spearman_base_plus_net"].items()))
    if "integer" in r:
        i = r["integer"]
        print(f"  integer net: net alone {i['spearman_net_alone']:.4f}, "
              + ", ".join(f"base + {k}·net {v:.4f}" for k, v in i["spearman_base_plus_net"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
