"""Check an exported Stockfish 19 net in the real engine and summarise its fine-tune (the last
step of ``bench/sf19_finetune.sh``).

``python -m bench.sf19_check_net NET.nnue [--positions N] [--work W] [--run RUN] [--out FILE]``:
Stockfish 19 (``scripts/sf19-uci``, the net given with ``setoption name EvalFile``) evaluates N
positions of real games not in check (the bundled sample, ``data/sample``), and our trace of the
same net (:func:`nnue.inference.kinds.sfnnv16.trace`) is compared with the engine's, every line from
the bucket table to the final evaluation. Prints one JSON object: the engine's load line, the
traces equal, the float-vs-integer gap ``nnue export`` measured (``NET/../export.json``), and,
with ``--run``/``--work``, the training run's settings and metrics beside the official net's own
export cross-check on the same data (``W/official/export.json``). Exit status 1 when the engine
did not load the net or any trace differs.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path


def _gap(export_json: Path) -> dict | None:
    """The export's float-vs-integer cross-check (None: a net without nnue export's export.json,
    e.g. the official one)."""
    if not export_json.is_file():
        return None
    e = json.loads(export_json.read_text())
    c = e["cross_check"]
    return {"positions": c["positions"], "mean_abs_int_minus_float_cp": round(c["mean_abs_diff_cp"], 3),
            "max_abs_int_minus_float_cp": round(c["max_abs_diff_cp"], 2),
            "mean_int_minus_float_cp": round(c["mean_signed_diff_cp"], 3),
            "spearman_int_vs_score": round(c["spearman_int_vs_score"], 5),
            "spearman_float_vs_score": round(c["spearman_float_vs_score"], 5),
            "sha256_net_nnue": e["sha256"].get("net.nnue")}


def _run(run: Path) -> dict:
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    secs = run / "train_seconds"
    return {"settings": {"init_weights": cfg.get("init_weights"), "qat": cfg["model"]["qat"],
                         "factoriser": cfg["model"]["factoriser"], "hidden": cfg["model"]["hidden"],
                         "backend": cfg["model"]["backend"], "lr": cfg["optimizer"]["lr"],
                         "final_lr": cfg["scheduler"].get("final_lr"), "schedule": cfg["scheduler"]["kind"],
                         "weight_decay": cfg["optimizer"]["weight_decay"], "sparse_ft": cfg["optimizer"]["sparse_ft"],
                         "wdl_lambda": cfg["model"]["loss"]["wdl_lambda"], "batch_size": cfg["data"]["batch_size"],
                         "epochs": cfg["trainer"]["max_epochs"], "data": cfg["data"]["path"]},
            "metrics": metrics, "train_seconds": int(secs.read_text()) if secs.is_file() else None}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.sf19_check_net", description=__doc__.splitlines()[0])
    p.add_argument("net", help="the exported net.nnue (its export.json beside it)")
    p.add_argument("--positions", type=int, default=300, help="positions the engine and our trace compare")
    p.add_argument("--work", default=None, help="the work folder of bench/sf19_finetune.sh (official/export.json)")
    p.add_argument("--run", default=None, help="the training run's folder (config.yaml, metrics.json)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)

    from nnue.bench import sample_fens
    from nnue.inference.kinds import sfnnv16
    from nnue.selfplay.sf19 import FRONT_END, eval_traces

    net_path = Path(args.net).resolve()
    fens = sample_fens(args.positions)
    t = time.perf_counter()
    theirs, load = eval_traces(str(FRONT_END), fens, eval_file=net_path)
    engine_s = time.perf_counter() - t
    ours = sfnnv16.trace(sfnnv16.read_nnue(net_path), fens)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    loaded = load is not None and str(net_path) in load and "(86896, 1024, 32, 32, 1)" in load
    report = {
        "benchmark": "sf19_finetune", "net": str(net_path), "engine_load_line": load, "engine_loaded_net": loaded,
        "trace_parity": {"positions": len(fens), "source": "data/sample/sf15-n5000-s1-sample.plain, not in check",
                         "identical": len(fens) - len(differ), "differ": len(differ),
                         "first_difference": None if not differ else {"fen": fens[differ[0]], "ours": ours[differ[0]],
                                                                      "stockfish_19": theirs[differ[0]]},
                         "engine_seconds": round(engine_s, 1)},
        "export_float_vs_int": _gap(net_path.parent / "export.json"),
    }
    if args.work and (Path(args.work) / "official" / "export.json").is_file():
        report["official_net_same_data"] = _gap(Path(args.work) / "official" / "export.json")
    if args.run:
        report["training"] = _run(Path(args.run))
    report["load_average"] = os.getloadavg()
    report["machine"] = f"{platform.machine()}, {os.cpu_count()} cores (shared)"
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if loaded and not differ else 1


if __name__ == "__main__":
    raise SystemExit(main())
