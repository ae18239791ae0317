"""Learning check of Stockfish 19's net beside nnue-pytorch's: both trained on the same positions of the same ``.binpack``, both nets judged by our integer evaluator on held-out self-play; prints JSON.

1. **ours**: ``nnue train features=sfnnv16 model=sfnnv16`` (L1 1,024, QAT, the fast CPU path:
   ``model.backend=numba optimizer.sparse_ft=true``) on the ``.binpack`` packed by ``nnue pack
   --score-unit sf-internal``, then ``nnue export`` (its float-vs-integer gap is in the report);
2. **npa**: nnue-pytorch's ``train.py`` (its default net, ``Full_Threats+PP_3Wide+HalfKAv2_hm^``
   at L1 1,024) on the ``.binpack`` itself, then its ``serialize.py`` to a ``.nnue``, read by
   ``nnue import-net``;
3. the same number of optimiser steps of the same batch (``--steps`` × ``--batch`` positions),
   epochs of ``--epoch-steps`` steps for both, the settings made as alike as the two trainers
   allow (the report's ``settings`` lists both sides and what differs): lr ``--lr`` (nnue-pytorch's
   default 8.75e-4) × 0.992 after every epoch (its StepLR; ours ``scheduler=step``), the search
   score only (its λ = 1.0; our ``model.loss.wdl_lambda=0``), loss exponent 2.5, no weight decay;
4. every net (plus Stockfish 19's official one when ``--official`` is there, and a material
   count) evaluated by :func:`nnue.inference.evaluate` on the quiet positions (our training
   filters) of each held-out ``.plain`` (our own Stockfish 15.1 self-play: games neither net
   saw): Spearman against the search score, and our trainer's WDL validation loss
   (:func:`nnue.trainer.loss.wdl_loss`, SCALE 400, eval = integer centipawns) both at the run's
   settings (λ 0, power 2.5) and at the trainer's defaults (λ 0.1, power 2).

Phases (``--phase``) can run apart on one ``--work`` folder (a training takes long on a shared
machine): ``ours``, ``npa``, ``eval`` or ``all``. A finished phase is not run again.

    nnue bench learn_vs_npa --npa DIR --work DIR [--steps 160] [--epoch-steps 40] [--batch 16384]
        [--heldout PLAIN ...] [--official FILE.nnue] [--phase all] [--out FILE]
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from nnue.bench import emit, parser

from .bench_train_vs_npa import DEFAULT_BINPACK, FAST, NPA_FEATURES, HERE, REPO, npa_env, npa_paths, pack_binpack

SELFPLAY = REPO.parent / "shared" / "data" / "selfplay"
HELDOUT = [SELFPLAY / "sf15-n5000-s1.plain", SELFPLAY / "sf15-n2000-s11.plain"]
OFFICIAL = Path(os.environ.get("NNUE_SF19_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "nnue-forge" / "sf19") / "nn-1a298aa575a0.nnue"
LR, GAMMA, POWER = 8.75e-4, 0.992, 2.5


def sh(cmd: list[str], log: Path, cwd: str | None = None, env: dict | None = None) -> dict:
    """Run cmd (output to log); wall and CPU seconds (wait4: the process and the children it
    waited for), peak RSS. RuntimeError with the log's tail when it fails."""
    t0, before = time.perf_counter(), os.getloadavg()
    with open(log, "w") as f:
        f.write("+ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        f.flush()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env)
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except BaseException:   # interrupted: leave no training running
            p.kill()
            p.wait()
            raise
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-6:])
        raise RuntimeError(f"{cmd[0]} {cmd[1]} failed ({rc}), see {log}:\n{tail}")
    return {"command": " ".join(shlex.quote(c) for c in cmd), "wall_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 1), "peak_rss_gib": round(ru.ru_maxrss / 2 ** 20, 3),
            "load_before": [round(x, 2) for x in before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def nnue_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "nnue.cli", *args]


def train_ours(work: Path, dataset: str, a) -> dict:
    d = work / "ours"
    done = d / "phase.json"
    if done.exists():
        return json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    clock = d / "clock.json"
    overrides = ["features=sfnnv16", "model=sfnnv16", *FAST, f"data.path={dataset}", f"data.batch_size={a.batch}",
                 "data.val_fraction=0.0", f"data.positions_per_epoch={a.epoch_steps * a.batch}",
                 f"trainer.max_epochs={a.steps // a.epoch_steps}", f"optimizer.lr={a.lr}", "optimizer.weight_decay=0.0",
                 "scheduler=step", f"scheduler.gamma={GAMMA}", "scheduler.step_superbatches=1",
                 "model.loss.wdl_lambda=0.0", f"model.loss.power={POWER}", f"seed={a.seed}",
                 f"paths.output_dir={d / 'run'}",
                 "+callbacks.clock._target_=nnue.bench.step_timer.lightning_callback", f"+callbacks.clock.out={clock}",
                 "+callbacks.clock.warmup=4", f"+callbacks.clock.batch={a.batch}", *a.overrides]
    rec = {"train": sh(nnue_cmd("train", *overrides), d / "train.log")}
    rec["train"]["clock"] = _clock_summary(clock)
    rec["export"] = sh(nnue_cmd("export", str(d / "run" / "checkpoints" / "last.ckpt"), "-o", str(d / "net"), "--json"),
                       d / "export.log")
    exp = json.loads((d / "net" / "export.json").read_text())
    rec["export_cross_check_positions"] = exp["cross_check"].get("positions")
    rec["net"] = str(d / "net" / "net.safetensors")
    _write(done, rec)
    return rec


def train_npa(work: Path, binpack: str, a) -> dict:
    d = work / "npa"
    done = d / "phase.json"
    if done.exists():
        return json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    py, src = npa_paths(a.npa)
    clock = d / "clock.json"
    cmd = [str(py), str(HERE / "npa_timed_train.py"), "--clock-out", str(clock), "--clock-warmup", "4", binpack,
           "--features", NPA_FEATURES, "--l1", "1024", "--accelerator", "cpu", "--threads", str(os.cpu_count()),
           "--num-workers", "1", "--batch-size", str(a.batch), "--epoch-size", str(a.epoch_steps * a.batch),
           "--max-epochs", str(a.steps // a.epoch_steps), "--validation-size", "0", "--lr", str(a.lr),
           "--gamma", str(GAMMA), "--lambda", "1.0", "--pow-exp", str(POWER), "--seed", str(a.seed),
           "--network-save-period", str(a.steps // a.epoch_steps), "--default-root-dir", str(d / "run"),
           *shlex.split(a.npa_args)]
    rec = {"train": sh(cmd, d / "train.log", cwd=str(src), env=npa_env(a.npa_omp, src))}
    rec["train"]["clock"] = _clock_summary(clock)
    ckpts = sorted((d / "run").rglob("last.ckpt"))
    if not ckpts:
        raise RuntimeError(f"nnue-pytorch wrote no last.ckpt under {d / 'run'}")
    nnue_file = d / "net.nnue"
    rec["serialize"] = sh([str(py), "serialize.py", str(ckpts[-1]), str(nnue_file), "--l1", "1024",
                           "--features", NPA_FEATURES], d / "serialize.log", cwd=str(src), env=npa_env(a.npa_omp))
    rec["import"] = sh(nnue_cmd("import-net", str(nnue_file), "-o", str(d / "net")), d / "import.log")
    rec["nnue_bytes"] = nnue_file.stat().st_size
    rec["net"] = str(d / "net" / "net.safetensors")
    _write(done, rec)
    return rec


def _clock_summary(clock: Path) -> dict | None:
    if not clock.exists():
        return None
    c = json.loads(clock.read_text())
    loads = c.pop("load1_at_step_end", [])
    c.pop("step_s", None)
    if loads:
        c["load1_min_median_max"] = [min(loads), float(np.median(loads)), max(loads)]
    return c


def _write(path: Path, rec: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    os.replace(tmp, path)


def heldout_rows(plain: Path, work: Path) -> dict:
    """The quiet positions (our training filters) of a self-play dump, packed once into work:
    {"boards" (N, 32) uint8, "score" (N,) float32 cp, "result" (N,) float32 in {0, 0.5, 1}}."""
    import torch

    from nnue.pipeline.stream import Filters, PackedStream

    ds = work / "heldout" / plain.name.split(".")[0]
    if not (ds / "manifest.json").exists():
        sh(nnue_cmd("pack", str(plain), "-o", str(ds), "--no-progress", "--json"), work / f"pack-{plain.name}.log")
    stream = PackedStream([str(ds)], 8192, 0, "all", 0.0, Filters(), drop_last=False)
    got = {"boards": [], "score": [], "result": []}
    for b in stream:
        for k in got:
            got[k].append(b[k])
    return {k: torch.cat(v) for k, v in got.items()}


def metrics(evals, rows) -> dict:
    import torch

    from nnue.trainer.loss import wdl_loss
    from nnue.trainer.metrics import spearman

    y = evals.double() / 400.0
    score, result = rows["score"].double(), rows["result"].double()
    return {"spearman_vs_score": round(spearman(evals.numpy(), score.numpy()), 4),
            "spearman_vs_result": round(spearman(evals.numpy(), result.numpy()), 4),
            "wdl_loss_lambda0_power2.5": round(float(wdl_loss(y, score, result, 400.0, 0.0, POWER)), 6),
            "wdl_loss_lambda0.1_power2": round(float(wdl_loss(y, score, result, 400.0, 0.1, 2.0)), 6),
            "mean_abs_eval_cp": round(float(evals.abs().double().mean()), 1),
            "share_same_sign_as_score": round(float(((evals > 0) == (score > 0))[score != 0].double().mean()), 4)
            if bool((score != 0).any()) else None,
            "_n": int(len(evals)) if isinstance(evals, torch.Tensor) else None}


def float_vs_int(ckpt: Path, net, rows, chunk: int = 4096) -> dict:
    """Our float model against its integer net on the held-out positions, as ``nnue export``'s
    cross-check computes it (float output × SCALE against :func:`nnue.inference.api.forward_int`
    on the same feature indices): mean and max |Δ| and mean Δ in centipawns. (The export's own
    cross-check reads the run's validation split, which a run on all its data does not have.)"""
    import torch

    from nnue.inference.api import forward_int
    from nnue.pipeline.batch import to_sparse_batch
    from nnue.pipeline.features import get_feature_set, parse_output_buckets
    from nnue.trainer.export import load_checkpoint
    from nnue.spec.quant import QuantScheme

    model, hp, _, _ = load_checkpoint(ckpt)
    fs, buckets = get_feature_set(hp["features"]), parse_output_buckets(hp["output_buckets"])
    scale = QuantScheme(**(hp.get("quant") or {})).scale
    diffs = []
    for i in range(0, len(rows["score"]), chunk):
        part = {k: v[i:i + chunk] for k, v in rows.items()}
        b = to_sparse_batch(part, fs, buckets)
        with torch.no_grad():
            f = model(b.stm_indices, b.nstm_indices, b.bucket).double() * scale
        diffs.append(forward_int(net, b.stm_indices, b.nstm_indices, b.bucket).double() - f)
    d = torch.cat(diffs)
    return {"positions": int(len(d)), "mean_abs_diff_cp": round(float(d.abs().mean()), 3),
            "max_abs_diff_cp": round(float(d.abs().max()), 2), "mean_signed_diff_cp": round(float(d.mean()), 3)}


def evaluate_all(work: Path, nets: dict[str, str], heldout: list[Path]) -> dict:
    from nnue.inference import evaluate, load
    from nnue.trainer.report import material_cp

    out = {}
    loaded = {name: load(path) for name, path in nets.items()}
    for plain in heldout:
        rows = heldout_rows(plain, work)
        res = {"positions": int(len(rows["score"]))}
        for name, net in loaded.items():
            t0 = time.perf_counter()
            ev = evaluate(net, rows["boards"])
            m = metrics(ev, rows)
            m.pop("_n")
            m["eval_s"] = round(time.perf_counter() - t0, 1)
            res[name] = m
        m = metrics(material_cp(rows["boards"]), rows)
        m.pop("_n")
        res["material"] = m
        res["float_vs_int_ours"] = float_vs_int(work / "ours" / "run" / "checkpoints" / "last.ckpt", loaded["ours"],
                                                rows)
        out[plain.name] = res
    return out


def run(argv=None) -> dict:
    """The benchmark (module docstring); returns the report it prints."""
    p = parser("nnue bench learn_vs_npa", __doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="more nnue train overrides for ours")
    p.add_argument("--npa", default=os.environ.get("NPA"), help="nnue-pytorch build folder (src/, venv/); "
                                                               "default: $NPA")
    p.add_argument("--work", required=True, help="folder for the runs, nets and held-out datasets (kept: phases "
                                                 "resume from it)")
    p.add_argument("--binpack", default=str(DEFAULT_BINPACK), help="training data, a Stockfish .binpack")
    p.add_argument("--dataset", help="the .binpack packed by 'nnue pack --score-unit sf-internal' (default: "
                                     "packed into WORK/dataset)")
    p.add_argument("--batch", type=int, default=16384, help="positions per step, both")
    p.add_argument("--steps", type=int, default=160, help="optimiser steps, both (a multiple of --epoch-steps)")
    p.add_argument("--epoch-steps", type=int, default=40, help="steps per epoch, both (the lr × 0.992 after each)")
    p.add_argument("--lr", type=float, default=LR, help="learning rate, both (default %(default)s: nnue-pytorch's)")
    p.add_argument("--seed", type=int, default=42, help="both trainers' seed")
    p.add_argument("--heldout", nargs="+", default=[str(h) for h in HELDOUT],
                   help="held-out self-play dumps (.plain with search scores and results)")
    p.add_argument("--official", default=str(OFFICIAL), help="Stockfish 19's official net, evaluated beside "
                                                             "(skipped when the file is absent)")
    p.add_argument("--npa-omp", choices=["default", "passive"], default="default",
                   help="nnue-pytorch's OMP_WAIT_POLICY (see nnue bench train_vs_npa)")
    p.add_argument("--npa-args", default="", help="more train.py arguments for nnue-pytorch")
    p.add_argument("--phase", choices=["all", "ours", "npa", "eval"], default="all",
                   help="train ours, train nnue-pytorch's, evaluate both (needs both trained), or all three")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_intermixed_args(argv)
    if a.steps % a.epoch_steps:
        p.error(f"--steps {a.steps} is not a multiple of --epoch-steps {a.epoch_steps}")
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    binpack = str(Path(a.binpack).resolve())
    res: dict = {}
    if a.phase in ("all", "ours"):
        dataset = a.dataset or str(work / "dataset")
        if not a.dataset and not (work / "dataset" / "manifest.json").exists():
            pack_binpack(binpack, dataset)
        res["ours"] = train_ours(work, str(Path(dataset).resolve()), a)
    if a.phase in ("all", "npa"):
        if not a.npa:
            p.error("--npa DIR (or $NPA): an nnue-pytorch build is needed")
        res["npa"] = train_npa(work, binpack, a)
    if a.phase not in ("all", "eval"):
        emit(res, None)
        return res
    ours, npa = (json.loads((work / s / "phase.json").read_text()) for s in ("ours", "npa"))
    nets = {"ours": ours["net"], "npa": npa["net"]}
    if Path(a.official).is_file():
        if not (work / "official" / "net.safetensors").exists():
            sh(nnue_cmd("import-net", a.official, "-o", str(work / "official")), work / "import-official.log")
        nets["sf19_official"] = str(work / "official" / "net.safetensors")
    heldout = [Path(h) for h in a.heldout]
    positions = a.steps * a.batch
    out = {"benchmark": "learning check of sfnnv16 (Stockfish 19's net, L1 1,024): nnue train vs nnue-pytorch, "
                        "same positions, nets judged by our integer evaluator on held-out self-play",
           "positions_trained": positions, "steps": a.steps, "batch": a.batch, "epoch_steps": a.epoch_steps,
           "binpack": Path(a.binpack).name, "heldout": [h.name for h in heldout], "cores": os.cpu_count(),
           "settings": settings(a),
           "heldout_metrics": evaluate_all(work, nets, heldout),
           "training": {"ours": ours["train"], "npa": npa["train"]},
           "export": {"ours": ours["export"], "npa_serialize": npa["serialize"], "npa_import": npa["import"]}}
    emit(out, a.out)
    return out


def settings(a) -> dict:
    """What each side trained with, and what differs (the report's ``settings``)."""
    return {
        "ours": {"command": "nnue train features=sfnnv16 model=sfnnv16 " + " ".join(FAST),
                 "optimizer": "AdamW, betas (0.9, 0.999), eps 1e-8, weight decay 0; the feature transformer "
                              "row-sparse (RowSparseAdamW)", "lr": a.lr,
                 "schedule": f"step: lr x {GAMMA} after every epoch of {a.epoch_steps} steps",
                 "loss": f"mean |sigmoid(eval/400) - sigmoid(score/400)|^{POWER}, lambda (result weight) 0",
                 "scores": "binpack scores packed with --score-unit sf-internal: cp = 100 score / 208",
                 "filters": "skip in check, best move a capture or promotion, no score, mate scores",
                 "qat": True, "gradient_clip": None, "data_order": "shuffle buffer of 1,048,576 rows"},
        "npa": {"command": f"train.py BINPACK --features {NPA_FEATURES} --l1 1024 --lr {a.lr} --gamma {GAMMA} "
                           f"--lambda 1.0 --pow-exp {POWER}",
                "optimizer": "RangerLite (its default: Adam with positive-negative momentum and lookahead 5/0.5), "
                             "weight decay 0", "lr": a.lr,
                "schedule": f"StepLR: lr x {GAMMA} after every epoch of {a.epoch_steps} steps",
                "loss": f"its WDL-model loss: |q(eval) - p(score)|^{POWER} with q, p the win-minus-loss "
                        "sigmoids (offset 270, scaling 340 for the net, 380 for the score, internal units), "
                        "lambda 1.0 (score only)",
                "scores": "binpack internal units as they are",
                "filters": "its defaults: skip captures (a piece on the target square: not en passant, not "
                           "quiet promotions), in check, no score, a 0 placeholder after a large score in a "
                           "decisive game; random skips by score/result agreement (wld_filtered), of early plies "
                           "(soft, up to ply 20) and by piece count (towards its target distribution)",
                "qat": True, "gradient_clip": "norm 2.0", "data_order": "its C++ loader, one worker"},
        "not_removed": ["optimiser: RangerLite has no counterpart here, ours is AdamW (row-sparse for the FT)",
                        "loss shape: nnue-pytorch's win-rate model loss vs our sigmoid(cp/400); same exponent, "
                        "same target (the search score only)",
                        "data filters: nnue-pytorch's random skips (score/result agreement, early plies, piece "
                        "count) cannot be switched off without losing its skip of positions without a score",
                        "gradient-norm clip 2.0 in nnue-pytorch (our row-sparse optimiser takes none)"]}


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
