"""Quality report of a trained and exported net on held-out games.

``nnue report OUT [--net NETDIR] [--data DATASET] [--engine PATH] [--json] [--force]`` (also ``python -m
nnue.trainer.report --run OUT ...``) prints the run's final metrics (metrics.json) and, with
``--net``, the final validation loss, the Spearman rank correlation with the dataset's (Stockfish) scores of the
integer net's evals and of a material count (P N B R Q = 100 300 300 500 900, stm POV) on the
validation games (quiet positions: the training filters), and the float-vs-integer error from
``export.json``. It is the demo's closing summary and the quality gate of the full-data run.
A net whose ``export.json`` names a checkpoint outside OUT was exported from another run: refused
(ValueError) unless ``--force``. A residual net is judged by its whole eval, base + α·net (a
Stockfish base from the data's base_eval column, else from the engine: ``--engine``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from nnue.inference import load, residual
from nnue.pipeline.annotate import dataset_holds_base, evaluate_with_base, residual_base, residual_fields
from nnue.pipeline.features.board_tensor import black_to_move, decode_squares

from .export import load_checkpoint, validation_rows
from .metrics import spearman

PIECE_CP = torch.tensor([100, 300, 300, 500, 900, 0])


def material_cp(boards: torch.Tensor) -> torch.Tensor:
    """Material balance of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV."""
    occupied, code, _ = decode_squares(boards)
    value = PIECE_CP.to(boards.device)[code & 7] * occupied
    sign = torch.where((code >> 3) == 1, -1, 1)
    white = (value * sign).sum(1)
    return torch.where(black_to_move(boards), -white, white)


def run_metrics(run_dir: Path) -> dict:
    """metrics.json of a run folder; FileNotFoundError naming it when the run has none."""
    f = run_dir / "metrics.json"
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    if not f.exists():
        raise FileNotFoundError(f"{f}: no such file (the run has not finished: export its "
                                f"checkpoints/last.ckpt and pass --net)")
    return json.loads(f.read_text())


def report(run_dir: str | Path, net_dir: str | Path | None = None, data=None, max_positions: int = 200_000,
           force: bool = False, engine: str | None = None) -> dict:
    """The run's metrics; with ``net_dir``, its exported net on the validation games (module
    docstring). A residual net is judged by its whole eval, base + α·net: a Stockfish base comes
    from the data's base_eval column when it holds that base, else from the engine (``engine``,
    :func:`nnue.pipeline.annotate.residual_base`), and positions without one (in check) are left
    out (``positions_without_base``). Raises FileNotFoundError, ValueError, EngineError."""
    run_dir = Path(run_dir)
    metrics = run_metrics(run_dir) if net_dir is None or (run_dir / "metrics.json").exists() else {}
    if net_dir is None:
        return {"run": str(run_dir), **{k: metrics.get(k) for k in ("val_loss", "val_spearman", "train_loss",
                                                                     "global_step", "epochs", "total_steps")}}
    net_dir = Path(net_dir)
    if not (net_dir / "export.json").exists():
        raise FileNotFoundError(f"{net_dir / 'export.json'}: no such file (give the folder 'nnue export -o' wrote)")
    exp = json.loads((net_dir / "export.json").read_text())
    ck = Path(exp["provenance"]["checkpoint"])
    if not force and not ck.resolve().is_relative_to(run_dir.resolve()):
        raise ValueError(f"{net_dir} was exported from {ck}, a checkpoint of another run than {run_dir}; "
                         f"its Spearman would sit beside another run's loss (--force to report anyway)")
    _, _, data_hp, _ = load_checkpoint(ck)
    if data is not None:
        data_hp = dict(data_hp, path=data)
    net = load(net_dir / "net.safetensors")
    r = residual.of(net)
    rows = validation_rows(data_hp, max_positions, extra=("base_eval",))
    boards, scores = rows["boards"], rows["score"]
    paths = data_hp.get("path") or []
    use_column = (r is not None and r["base"] != "material" and "base_eval" in rows
                  and dataset_holds_base(paths, r["base"], ("base_eval",)))
    base = residual_base(net, boards, rows["base_eval"].double().numpy() if use_column else None, engine,
                         str(net_dir / "net.safetensors"))
    ints, keep = evaluate_with_base(net, boards, base)
    boards, scores = boards[keep], scores[keep]
    c = exp["cross_check"]
    return {
        "val_loss": metrics.get("val_loss"),
        "validation_positions": int(len(scores)),
        **residual_fields(r, use_column, int((~keep).sum())),
        "spearman_net": spearman(ints.numpy(), scores.numpy()),
        "spearman_material": spearman(material_cp(boards).numpy(), scores.numpy()),
        "float_vs_int_mean_abs_cp": c.get("mean_abs_diff_cp"),
        "float_vs_int_max_abs_cp": c.get("max_abs_diff_cp"),
        "float_vs_int_mean_signed_cp": c.get("mean_signed_diff_cp"),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--net", default=None, help="export folder (holds net.safetensors, export.json)")
    p.add_argument("--data", default=None, help="dataset to report on (default: the training data)")
    p.add_argument("--force", action="store_true", help="report a net exported from another run's checkpoint")
    p.add_argument("--engine", metavar="PATH", default=None,
                   help="residual nets on a Stockfish base: the Stockfish 15.1 binary that computes it when the "
                        "data's base_eval column does not hold it")
    p.add_argument("--json", action="store_true")


def cmd_report(a) -> int:
    r = report(a.run, a.net, a.data, force=a.force, engine=a.engine)
    if a.json:
        print(json.dumps(r))
        return 0
    fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
    print("summary")
    print(f"  validation loss                      {fmt(r['val_loss'], '.5f')}")
    if a.net is None:
        print(f"  val Spearman (float net vs score)    {fmt(r['val_spearman'], '.3f')}")
        print(f"  steps                                {fmt(r['global_step'], ',')} of {fmt(r['total_steps'], ',')}"
              f" ({fmt(r['epochs'], 'd')} epochs)")
        return 0
    print(f"  Spearman vs Stockfish, integer net   {fmt(r['spearman_net'], '.3f')}   "
          f"(material count: {fmt(r['spearman_material'], '.3f')}; {r['validation_positions']:,} "
          f"quiet positions of held-out games)")
    if r.get("residual"):
        print(f"  residual net                         eval = {r['residual']['base']} + {r['residual']['alpha']:g}·net "
              f"(base: {r['base_from']}; {r['positions_without_base']:,} positions without one left out)")
    print(f"  float vs integer eval                mean |Δ| {fmt(r['float_vs_int_mean_abs_cp'], '.2f')} cp, "
          f"max |Δ| {fmt(r['float_vs_int_max_abs_cp'], '.1f')} cp, mean Δ "
          f"{fmt(r['float_vs_int_mean_signed_cp'], '+.2f')} cp")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnue.trainer.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, help="training output folder (paths.output_dir)")
    add_arguments(p)
    a = p.parse_args(argv)
    from nnue.inference.net import NetFormatError
    from nnue.pipeline.manifest import ManifestError

    from .export import ExportError

    try:
        return cmd_report(a)
    except (ExportError, ManifestError, NetFormatError, FileNotFoundError, ValueError) as e:
        print(f"nnue report: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
