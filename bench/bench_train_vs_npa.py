"""Training speed of Stockfish 19's net beside nnue-pytorch's: ``nnue train model=sfnnv16`` and nnue-pytorch's ``train.py``, alternated in one run; prints JSON.

Both train the same net, SFNNv16 at L1 1,024 (nnue-pytorch's default,
``Full_Threats+PP_3Wide+HalfKAv2_hm^``: threat inputs, pawn pairs, HalfKAv2_hm with its
factoriser, 8 layer stacks, fake quantisation on) from the same ``.binpack`` at the same batch,
each as its users run it, in its own process:

* ``ours``: ``nnue train features=sfnnv16 model=sfnnv16`` with the fastest CPU settings
  (``model.backend=numba optimizer.sparse_ft=true``: the compiled feature transformer and the
  row-sparse AdamW) over the ``.binpack`` packed by ``nnue pack --score-unit sf-internal``
  (``--dataset``, else packed into a temporary folder first, outside the timing); the Parquet
  stream, the feature encoding, Lightning and its callbacks included;
* ``npa``: nnue-pytorch's ``train.py`` unchanged (its C++ loader with its default filters and
  one worker, ``torch.compile``, RangerLite), run under its own interpreter by
  ``bench/npa_timed_train.py`` with ``--threads`` = the cores.

Runs alternate ``ours npa ours npa …`` (``--pairs`` pairs). Each run trains ``--warmup`` +
``--steps`` steps; the clock (``bench/step_timer.py``, the same code in both) stamps wall
time, the process's CPU seconds (every thread) and the 1-minute load average at the end of
every step; the figures are over the steps after the warm-up (nnue-pytorch's first step holds
its compilation): positions/s (timed positions ÷ timed wall seconds), positions per
CPU-second, the median step. Peak RSS: the process's own (``ru_maxrss``) as reported by the
wait for it. Per pair the ratio ours/npa; the summary gives medians over the runs and pairs.
The machine may be shared: the load average at every step is in the JSON, and a pair whose
two load ranges differ a lot is flagged (``load_differs``).

    nnue bench train_vs_npa --npa DIR [--binpack FILE] [--dataset DIR] [--batch 16384]
        [--steps 20] [--warmup 4] [--npa-warmup 4] [--pairs 2] [--out FILE] [OVERRIDES...]

``DIR``: an nnue-pytorch build (``DIR/src/train.py`` and its C++ loader, ``DIR/venv``).
OVERRIDES: more ``nnue train`` overrides for ours (after the fast defaults).
"""
from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nnue.bench import emit, parser

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BATCH = 16384
NPA_FEATURES = "Full_Threats+PP_3Wide+HalfKAv2_hm^"
#: our fastest CPU settings for the kind (docs/training.md, "Fast CPU training")
FAST = ["model.backend=numba", "optimizer.sparse_ft=true"]
DEFAULT_BINPACK = REPO.parent / "shared" / "data" / "public" / "small.binpack"


def npa_paths(npa: str) -> tuple[Path, Path]:
    """(python, src) of an nnue-pytorch build; SystemExit naming what is missing."""
    root = Path(npa)
    py, src = root / "venv" / "bin" / "python", root / "src"
    if not (src / "train.py").is_file() or not py.is_file():
        raise SystemExit(f"bench train_vs_npa: {root} is not an nnue-pytorch build (no src/train.py or venv/bin/python)")
    return py, src


def pack_binpack(binpack: str, out: str) -> str:
    """``nnue pack --score-unit sf-internal BINPACK -o OUT``: the dataset our side reads."""
    cmd = [sys.executable, "-m", "nnue.cli", "pack", binpack, "-o", out, "--score-unit", "sf-internal",
           "--no-progress", "--json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def ours_command(dataset: str, out_dir: str, clock: str, batch: int, warmup: int, steps: int,
                 overrides: list[str]) -> list[str]:
    """``nnue train`` of the sfnnv16 kind for exactly warmup + steps steps (one epoch of that many
    batches: no epoch end, checkpoint or validation inside the timed steps), with the step clock."""
    n = warmup + steps
    return [sys.executable, "-m", "nnue.cli", "train", "features=sfnnv16", "model=sfnnv16", *FAST,
            f"data.path={dataset}", f"data.batch_size={batch}", "data.val_fraction=0.0",
            f"data.positions_per_epoch={n * batch}", "trainer.max_epochs=1", f"paths.output_dir={out_dir}",
            "+callbacks.clock._target_=nnue.bench.step_timer.lightning_callback", f"+callbacks.clock.out={clock}",
            f"+callbacks.clock.warmup={warmup}", f"+callbacks.clock.batch={batch}", *overrides]


def npa_command(py: Path, binpack: str, out_dir: str, clock: str, batch: int, warmup: int, steps: int,
                threads: int, extra: list[str]) -> list[str]:
    """nnue-pytorch's train.py (its defaults: the SFNNv16 net at L1 1,024) for warmup + steps steps."""
    n = warmup + steps
    return [str(py), str(HERE / "npa_timed_train.py"), "--clock-out", clock, "--clock-warmup", str(warmup),
            binpack, "--features", NPA_FEATURES, "--l1", "1024", "--accelerator", "cpu", "--threads", str(threads),
            "--num-workers", "1", "--batch-size", str(batch), "--epoch-size", str(n * batch), "--max-epochs", "1",
            "--validation-size", "0", "--default-root-dir", out_dir, *extra]


def run_timed(cmd: list[str], cwd: str | None, clock: str, log: str, env: dict | None = None) -> dict:
    """Run one training; its clock report plus the process's peak RSS (wait4), exit status and
    the load average before and after. The output goes to ``log``."""
    before = os.getloadavg()
    t0 = time.perf_counter()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env)
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except BaseException:   # interrupted: leave no training running
            p.kill()
            p.wait()
            raise
        p.returncode = os.waitstatus_to_exitcode(status)
    rec = {"exit_status": p.returncode, "process_wall_s": round(time.perf_counter() - t0, 1),
           "peak_rss_gib_wait4": round(ru.ru_maxrss / 2 ** 20, 3),
           "load_before": [round(x, 2) for x in before], "load_after": [round(x, 2) for x in os.getloadavg()]}
    if p.returncode != 0 or not os.path.exists(clock):
        tail = Path(log).read_text(errors="replace").strip().splitlines()[-8:]
        rec["error"] = tail
        return rec
    rec.update(json.loads(Path(clock).read_text()))
    return rec


#: the profile's groups: (name, torch.profiler event, inclusive of the ops it calls)
PROFILE_EVENTS = (("ft_forward", "_SparseFTPair"), ("ft_backward", "_SparseFTPairBackward"),
                  ("layer_stacks_forward", "_StackLinear"), ("layer_stacks_backward", "_StackLinearBackward"))
PROFILE_PHASES = ("stream", "features", "forward_loss", "backward", "optimizer", "clip")


def profile_ours(dataset: str, batch: int, steps: int, warmup: int, overrides: list[str]) -> dict:
    """Where our step's time goes: ``steps`` steps of the same config as ``nnue train`` runs it,
    in a plain loop (no Lightning) under ``torch.profiler``, after ``warmup`` untimed ones. Per
    step (ms, wall time of this process as the profiler counts it): the phases (the stream's
    next batch, the feature encoding, forward + loss, backward, optimiser step, weight clip) and
    inside them the feature transformer's compiled kernels (forward, backward) and the layer
    stacks' grouped matmuls (forward, backward); the rest of forward + loss and of backward is
    the elementwise work (activations, fake quantisation, the loss, the autograd engine)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from nnue.pipeline.batch import to_sparse_batch

    from nnue.kernels.host_memory import retain_freed_memory

    from .bench_train import build, compose

    retain_freed_memory()   # as nnue train does on the CPU
    cfg = compose(["features=sfnnv16", "model=sfnnv16", *FAST, *overrides], dataset, batch, "cpu")
    lit, dm = build(cfg)
    opt = lit.configure_optimizers()
    model, scheme = lit.model, lit.scheme
    it = iter(dm.train_dataloader())

    def step():
        with record_function("phase:stream"):
            packed = next(it)
        with record_function("phase:features"):
            b = to_sparse_batch(packed, lit.feature_set, lit.buckets)
        with record_function("phase:forward_loss"):
            _, _, loss = lit._loss(b, lit.current_lambda())
        with record_function("phase:backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with record_function("phase:optimizer"):
            opt.step()
        with record_function("phase:clip"):
            model.clip_weights(scheme.ft_clip, scheme.l1_clip, ft_weight=False)

    for _ in range(warmup):
        step()
    load = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    total = {e.key: e.cpu_time_total / 1e3 / steps for e in prof.key_averages()}   # µs -> ms per step
    phases = {p: round(total.get(f"phase:{p}", 0.0), 1) for p in PROFILE_PHASES}
    kernels = {name: round(total.get(ev, 0.0), 1) for name, ev in PROFILE_EVENTS}
    step_ms = sum(phases.values())
    return {"steps": steps, "warmup": warmup, "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()], "wall_ms_per_step_profiled": round(wall / steps * 1e3, 1),
            "cpu_s_per_step_profiled": round(cpu / steps, 4),
            "phases_ms_per_step": phases, "inside_ms_per_step": kernels,
            "share_of_step": {k: round(v / step_ms, 3) for k, v in {**phases, **kernels}.items()} if step_ms else {},
            "note": "wall time per op as torch.profiler counts it in this process (it includes waiting for a core "
                    "on a loaded machine); the shares are the figure to read"}


def npa_env(omp: str, src: Path | str | None = None) -> dict:
    """nnue-pytorch's environment: ours (``nnue`` sets OMP_WAIT_POLICY=PASSIVE for itself, which
    its children inherit) without OMP_WAIT_POLICY for ``default``, with PASSIVE for ``passive``;
    ``src`` (its source folder) first on PYTHONPATH, where ``npa_timed_train.py`` imports its
    ``train`` from."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(src), env.get("PYTHONPATH")) if x)
    env.pop("OMP_WAIT_POLICY", None)
    if omp == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _loads(r: dict) -> list[float]:
    return r.get("load1_at_step_end") or []


def summarise(runs: list[dict], key: str) -> float | None:
    xs = [r[key] for r in runs if r.get(key)]
    return round(statistics.median(xs), 1) if xs else None


def run(argv=None) -> dict:
    """The benchmark (module docstring); returns the report it prints."""
    p = parser("nnue bench train_vs_npa", __doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="more nnue train overrides for ours (after the fast defaults)")
    p.add_argument("--npa", default=os.environ.get("NPA"), help="nnue-pytorch build folder (src/, venv/); "
                                                               "default: $NPA")
    p.add_argument("--binpack", default=str(DEFAULT_BINPACK), help="training data, a Stockfish .binpack")
    p.add_argument("--dataset", help="the .binpack packed by 'nnue pack --score-unit sf-internal' (default: packed "
                                     "into a temporary folder first)")
    p.add_argument("--batch", type=int, default=BATCH, help="positions per step, both")
    p.add_argument("--steps", type=int, default=20, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=4, help="untimed first steps of each of our runs")
    p.add_argument("--npa-warmup", type=int, default=4, help="untimed first steps of each nnue-pytorch run "
                                                             "(its first compiles the model)")
    p.add_argument("--pairs", type=int, default=2, help="pairs of runs, ours then npa")
    p.add_argument("--sides", default="ours,npa", help="which trainers run, in this order within a pair")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="nnue-pytorch's --threads (ours: "
                                                                        "nnue train's own choice, all cores)")
    p.add_argument("--npa-omp", choices=["default", "passive"], default="default",
                   help="nnue-pytorch's OMP_WAIT_POLICY: default (unset, as its users run it) or passive (what "
                        "nnue sets for itself)")
    p.add_argument("--npa-args", default="", help="more train.py arguments for nnue-pytorch")
    p.add_argument("--profile-steps", type=int, default=0, help="after the runs, profile this many of our steps "
                                                                "in a plain loop (0: no profile)")
    p.add_argument("--keep", help="keep the runs' logs and outputs in this folder (default: a temporary one)")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_intermixed_args(argv)
    if not a.npa:
        p.error("--npa DIR (or $NPA): an nnue-pytorch build is needed")
    sides = [x for x in a.sides.split(",") if x]
    if not sides or set(sides) - {"ours", "npa"}:
        p.error(f"--sides {a.sides}: a comma-separated choice of ours, npa")
    py, src = npa_paths(a.npa)
    if not Path(a.binpack).is_file():
        p.error(f"--binpack {a.binpack}: no such file")
    binpack = str(Path(a.binpack).resolve())
    with tempfile.TemporaryDirectory(prefix="bench-vs-npa-") as tmp:
        work = Path(a.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        dataset = a.dataset or ("ours" in sides and pack_binpack(binpack, str(work / "dataset")))
        runs = {"ours": [], "npa": []}
        commands = {}
        for i in range(a.pairs):
            for side in sides:
                d = work / f"{side}-{i}"
                d.mkdir(exist_ok=True)
                clock = str(d / "clock.json")
                if side == "ours":
                    cmd = ours_command(str(Path(dataset).resolve()), str(d / "run"), clock, a.batch, a.warmup,
                                       a.steps, a.overrides)
                    rec = run_timed(cmd, None, clock, str(d / "log.txt"))
                else:
                    cmd = npa_command(py, binpack, str(d / "run"), clock, a.batch, a.npa_warmup, a.steps, a.threads,
                                      shlex.split(a.npa_args))
                    rec = run_timed(cmd, str(src), clock, str(d / "log.txt"), npa_env(a.npa_omp, src))
                commands[side] = " ".join(shlex.quote(c) for c in cmd)
                rec["pair"] = i
                runs[side].append(rec)
                print(f"[train_vs_npa] pair {i} {side}: {rec.get('positions_per_s')} pos/s, "
                      f"{rec.get('positions_per_cpu_s')} pos/CPU-s, load {min(_loads(rec), default=None)}.."
                      f"{max(_loads(rec), default=None)}, peak RSS {rec['peak_rss_gib_wait4']} GiB"
                      + (f", FAILED: {rec['error'][-1]}" if "error" in rec else ""), file=sys.stderr, flush=True)
                if not a.keep:   # the checkpoints are large
                    subprocess.run(["rm", "-rf", str(d / "run")], check=False)
        prof = profile_ours(str(Path(dataset).resolve()), a.batch, a.profile_steps, 2, a.overrides) \
            if a.profile_steps and dataset else None
    pairs = []
    for o, n in zip(runs["ours"], runs["npa"]):
        if o.get("positions_per_s") and n.get("positions_per_s"):
            lo, ln = _loads(o), _loads(n)
            pairs.append({"pair": o["pair"],
                          "ours_over_npa_positions_per_s": round(o["positions_per_s"] / n["positions_per_s"], 3),
                          "ours_over_npa_positions_per_cpu_s":
                              round(o["positions_per_cpu_s"] / n["positions_per_cpu_s"], 3),
                          "load1_ours": [min(lo), max(lo)], "load1_npa": [min(ln), max(ln)],
                          "load_differs": abs(statistics.median(lo) - statistics.median(ln)) > 2.0})
    summary = {side: {"positions_per_s_median": summarise(rs, "positions_per_s"),
                      "positions_per_cpu_s_median": summarise(rs, "positions_per_cpu_s"),
                      "median_step_s_median": summarise(rs, "median_step_s"),
                      "peak_rss_gib_max": max((r["peak_rss_gib_wait4"] for r in rs), default=None),
                      "load1_median": round(statistics.median(x for r in rs for x in _loads(r)), 2)
                      if any(_loads(r) for r in rs) else None}
               for side, rs in runs.items()}
    if pairs:
        summary["ours_over_npa_positions_per_s_median"] = round(
            statistics.median(x["ours_over_npa_positions_per_s"] for x in pairs), 3)
        summary["ours_over_npa_positions_per_cpu_s_median"] = round(
            statistics.median(x["ours_over_npa_positions_per_cpu_s"] for x in pairs), 3)
    from .bench_train import environment
    import torch

    out = {"benchmark": "training speed of sfnnv16 (Stockfish 19's net, L1 1,024): nnue train vs nnue-pytorch's "
                        "train.py, alternated",
           "batch": a.batch, "steps_timed_per_run": a.steps, "warmup_ours": a.warmup, "warmup_npa": a.npa_warmup,
           "pairs": a.pairs, "binpack": Path(a.binpack).name, "cores": os.cpu_count(),
           "ours_overrides": FAST + a.overrides, "npa_features": NPA_FEATURES,
           "npa_commit": _git_head(src), "npa_omp_wait_policy": a.npa_omp, "commands": commands,
           "summary": summary, "pair_ratios": pairs, "runs": runs, "profile_ours": prof,
           "environment": environment(torch.device("cpu"))}
    emit(out, a.out)
    return out


def _git_head(src: Path) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
