"""End-to-end training throughput: the real step, a plain PyTorch loop and a naive loop; prints JSON.

Variants, side by side in one process, in rotating order over ``--rounds`` rounds:

* ``lightning``: ``nnue train``'s step as it runs: the Parquet stream (DataLoader) → features
  encoded on the training device (``LitNNUE.on_after_batch_transfer``) → forward, loss, backward →
  optimiser step → weight clip, under Lightning with ``nnue train``'s per-step callbacks (progress,
  loss plot) and its ``log_every_n_steps`` (no logger, no checkpoints, no validation);
* ``plain``: the same model, optimiser and stream in a plain PyTorch loop without Lightning, each
  phase timed (stream, features, forward + loss, backward, optimiser step, clip): Lightning's
  overhead is lightning / plain − 1, and the phases are the step's profile;
* ``naive``: the same net (no factoriser) with the torch reference feature transformer
  (EmbeddingBag), dense ``torch.optim.AdamW``, features encoded once and kept in memory, no clip:
  what a forty-line EmbeddingBag loop does;
* ``baseline`` (with ``--baseline OVERRIDES``): the plain loop again with those overrides on top,
  e.g. ``--baseline "model.backend=torch optimizer.sparse_ft=false"``: before/after in one run.

Per variant: the median step wall time and positions/s over the timed steps (after ``--warmup``
untimed ones per round), the median CPU seconds per step (``time.process_time``: every thread of
this process; DataLoader worker processes not included), the window throughput (timed positions
÷ timed wall time, which spreads the stream's refills of its shuffle buffer), and the load average
before and after: on a shared machine the figures are only as quiet as that. So each variant also
carries ``positions_per_s_estimate_2_idle_cores`` = positions / (CPU s per step / 2), and a
suite case ``target_met_estimate_2_idle_cores``: an estimate, labelled as one, of what two idle
cores would do (perfect use of both, as on a quiet machine), beside the measured ``target_met``.

The config is ``nnue train``'s, composed from ``conf/`` with the overrides given (positional, as
for ``nnue train``) over the bench's defaults: batch 16,384, a shuffle buffer of 4 batches (so
that every timed window holds its refills), one fixed-length epoch cycling the data. Data:
``--data DATASET`` (or ``--data sample``: the bundled 4,015 positions, for toy runs), else real data
packed into a temporary folder: ``../shared/data/public/small.binpack`` where it exists (what
nnue-pytorch is timed on), else the demo's self-play the repo ships (``data/demo``); the JSON's
``data`` says which. ``--suite cpu``
runs the issue's CPU targets (and the deep 1,024 net beside the Stockfish kind) and writes them
together.

    nnue bench train features=halfkav2_hm model=deep model.hidden=256 [--device cpu|cuda] [--out FILE]
"""
from __future__ import annotations

import gc
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from nnue.bench import emit, parser

BATCH = 16384
# The CPU targets (positions/s on 2 cores at batch 16,384, beside the plain loop).
SUITE_CPU = [
    {"name": "halfkav2_hm -> 256, layer stacks", "target_positions_per_s": 150_000,
     "overrides": ["features=halfkav2_hm", "model=deep", "model.hidden=256", "model.factoriser=true"]},
    {"name": "chess768 -> 256x2 SCReLU, one output", "target_positions_per_s": 250_000,
     "overrides": ["features=chess768", "model=perspective", "model.hidden=256", "model.activation=screlu",
                   "model.output_buckets='MaterialCount<1>'"]},
    # the earlier stand-in for the Stockfish kind, kept for comparison (no target of its own)
    {"name": "halfkav2_hm -> 1024, layer stacks", "target_positions_per_s": None,
     "overrides": ["features=halfkav2_hm", "model=deep", "model.hidden=1024", "model.factoriser=true"]},
    # the issue's third target: Stockfish 15.1's net (L1 1,024 + 8 PSQT columns, pairwise product,
    # 8 layer stacks, the HalfKA factoriser; conf/model/sfnnv5.yaml)
    {"name": "sfnnv5 (Stockfish 15.1): halfkav2_hm -> 1024 + 8 PSQT, layer stacks", "target_positions_per_s": 30_000,
     "overrides": ["features=halfkav2_hm", "model=sfnnv5"]},
]
# bench/gpu.sh: the GPU cases (features encoded on the GPU; DataLoader workers keep the
# stream ahead of the device): chess768 -> 256 and the Stockfish 15.1 kind (L1 1,024), whose goal
# is >= 4M positions/s on one H200.
SUITE_GPU = [
    {"name": f"{net} at batch {batch:,}", "batch": batch, "target_positions_per_s": target,
     "overrides": overrides + ["data.num_workers=6"]}
    for net, overrides, target in (
        ("chess768 -> 256x2 SCReLU", ["features=chess768", "model=perspective", "model.hidden=256",
                                      "model.activation=screlu"], None),
        ("sfnnv5 (Stockfish 15.1): halfkav2_hm -> 1024 + 8 PSQT, layer stacks",
         ["features=halfkav2_hm", "model=sfnnv5"], 4_000_000))
    for batch in (16384, 65536)
]
FAST = ["model.backend=numba", "optimizer.sparse_ft=true"]
BEFORE = "model.backend=torch optimizer.sparse_ft=false"


# ------------------------------------------------------------------------------------------ set-up

def compose(overrides: list[str], data: str, batch: int, device: str):
    from hydra import compose as hydra_compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    defaults = [f"data.path={data}", f"data.batch_size={batch}", f"data.shuffle_buffer={4 * batch}",
                f"data.positions_per_epoch={batch * 1_000_000}", "data.val_fraction=0.0",
                f"trainer={'gpu' if device == 'cuda' else 'cpu'}"]
    import warnings

    from nnue.trainer.fast_path import resolve

    GlobalHydra.instance().clear()
    with warnings.catch_warnings(), initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        warnings.simplefilter("ignore", UserWarning)   # Hydra's schema-matching deprecation note
        cfg = hydra_compose("train", overrides=defaults + list(overrides))
    from omegaconf import open_dict

    note = resolve(cfg)  # model.backend=auto, optimizer.sparse_ft=auto: as nnue train decides them
    with open_dict(cfg):
        cfg.fast_path_note = note  # the line nnue train logs (describe())
    return cfg


def build(cfg):
    """(LitNNUE, NNUEDataModule) of a composed config, as ``nnue train`` builds them."""
    from hydra.utils import instantiate

    from nnue.trainer.callbacks import plain

    dm = instantiate(cfg.data)
    dm.setup("fit")
    lit = instantiate(cfg.model, optimizer=instantiate(cfg.optimizer), scheduler=plain(cfg.get("scheduler")),
                      lambda_schedule=plain(cfg.get("wdl_lambda")))
    lit.set_run_length(1_000_000, None, float(cfg.optimizer.lr))
    return lit, dm


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def summarise(walls: list[float], cpus: list[float], batch: int) -> dict:
    if not walls:
        return {"steps": 0}
    med, cpu = statistics.median(walls), statistics.median(cpus)
    return {"steps": len(walls), "step_ms_median": med * 1e3, "step_ms_mean": statistics.mean(walls) * 1e3,
            "step_ms_min": min(walls) * 1e3,
            "positions_per_s_median": batch / med, "window_positions_per_s": batch * len(walls) / sum(walls),
            "cpu_s_per_step_median": cpu, "cpu_s_per_step_mean": statistics.mean(cpus),
            "cpu_utilisation": cpu / med if med else None,
            # the cores the step kept busy on average: CPU seconds over wall seconds of the window
            # (this process's threads, the prefetch thread's included; DataLoader worker processes not)
            "cores_used": sum(cpus) / sum(walls),
            # an ESTIMATE, not a measurement: the rate if the step's CPU seconds ran on 2 idle cores
            # kept busy all the time (positions / (cpu_s_per_step / 2)); it overstates a step that
            # keeps fewer cores busy (cores_used); on a shared machine the wall-clock rate above is
            # only as quiet as the load average
            "positions_per_s_estimate_2_idle_cores": 2 * batch / cpu if cpu else None}


# ------------------------------------------------------------------------------------------ variants

def _time_into(acc: dict[str, float], phase: str, fn):
    """fn, with its wall time added to acc[phase]."""
    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[phase] += time.perf_counter() - t
    return timed


def _instrument(lit, dm, ours: dict[str, float]) -> None:
    """Add the wall time of the step's own work under Lightning to ours[phase] (PHASES): the stream's next
    batch, the features (on_after_batch_transfer), training_step (forward, loss, the logging),
    the optimiser's step less its closure, the weight clip (on_train_batch_end); backward is timed
    by the callback's on_before/after_backward. What is left of a step is Lightning's own code."""
    lit.on_after_batch_transfer = _time_into(ours, "features", lit.on_after_batch_transfer)
    step = lit.training_step

    def training_step(b, batch_idx):   # Lightning passes arguments by these names
        return _time_into(ours, "forward_loss", step)(b, batch_idx)

    lit.training_step = training_step
    lit.on_train_batch_end = _time_into(ours, "clip", lit.on_train_batch_end)
    configure = lit.configure_optimizers

    def configure_optimizers():
        opt = configure()
        inner = _time_into(ours, "optimizer", opt.step)

        def step_after_closure(closure=None):   # the closure (forward, backward) is timed in its parts
            out = closure() if closure is not None else None
            inner()
            return out
        opt.step = step_after_closure
        return opt

    lit.configure_optimizers = configure_optimizers
    make_loader = dm.train_dataloader

    def train_dataloader():
        loader = make_loader()
        base = type(loader)

        class Timed:
            def __init__(self, it):
                self.it = it

            def __iter__(self):
                return self

            def __next__(self):
                return _time_into(ours, "stream", self.it.__next__)()

        loader.__class__ = type("Timed" + base.__name__, (base,), {"__iter__": lambda self: Timed(base.__iter__(self))})
        return loader

    dm.train_dataloader = train_dataloader


def run_lightning(cfg, device: torch.device, steps: int, warmup: int):
    """Wall and CPU seconds of each timed step, and (CPU only) Lightning's own wall seconds of each
    (the step less the time in our code, :func:`_instrument`) and our code's, by phase ({phase:
    [seconds]}); on CUDA, where our code only queues kernels, [] and {}."""
    import pytorch_lightning as pl

    from nnue.trainer.callbacks import Plots, Progress
    from nnue.trainer.train import quiet_lightning

    quiet_lightning()
    lit, dm = build(cfg)
    stamps: list[tuple[float, float, dict]] = []
    ours = dict.fromkeys(PHASES, 0.0)
    instrument = device.type == "cpu"
    if instrument:
        _instrument(lit, dm, ours)

    class Timer(pl.Callback):
        def on_before_backward(self, trainer, module, loss):
            self.t = time.perf_counter()

        def on_after_backward(self, trainer, module):
            ours["backward"] += time.perf_counter() - self.t

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            sync(device)
            stamps.append((time.perf_counter(), time.process_time(), dict(ours)))

    # nnue train's per-step callbacks (the progress line without its bar, the loss plot's running
    # mean) and its logging cadence, so that the step's scalars reach self.log as often as there
    with tempfile.TemporaryDirectory() as plots:
        trainer = pl.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1, max_epochs=-1,
                             max_steps=warmup + steps, limit_val_batches=0, num_sanity_val_steps=0, logger=False,
                             log_every_n_steps=int(cfg.trainer.get("log_every_n_steps") or 50),
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             callbacks=[Progress(1_000_000, cfg.data.batch_size, None, False), Plots(plots), Timer()])
        trainer.fit(lit, datamodule=dm)
    timed = stamps[warmup - 1:] if warmup else stamps
    walls = [b[0] - a[0] for a, b in zip(timed, timed[1:])]
    cpus = [b[1] - a[1] for a, b in zip(timed, timed[1:])]
    # the module hook that clips runs after the Timer's on_train_batch_end: its time lands in the
    # next interval, as the stream's does; over the window every step's work is counted once
    phases = {p: [b[2][p] - a[2][p] for a, b in zip(timed, timed[1:])] for p in PHASES} if instrument else {}
    own = [w - sum(phases[p][i] for p in PHASES) for i, w in enumerate(walls)] if instrument else []
    del trainer, lit, dm
    return walls, cpus, own, phases


PHASES = ("stream", "features", "forward_loss", "backward", "optimizer", "clip")


def run_plain(cfg, device: torch.device, steps: int, warmup: int) -> tuple[list[float], list[float], dict]:
    """The same step without Lightning, phase by phase (the data module's prefetch thread encodes
    the features ahead on the CPU, as under Lightning)."""
    lit, dm = build(cfg)
    lit.to(device)
    if device.type == "cpu":
        dm.encode = lit.encode_batch
    opt = lit.configure_optimizers()
    sparse = hasattr(opt, "flush")
    model, scheme = lit.model, lit.scheme
    loader = dm.train_dataloader()
    it = iter(loader)
    walls, cpus, phases, phase_cpu = [], [], {p: [] for p in PHASES}, {p: [] for p in PHASES}
    for i in range(warmup + steps):
        t = [time.perf_counter()]
        c = [time.process_time()]
        c0 = c[0]
        packed = dm.transfer_batch_to_device(next(it), device, 0)
        sync(device)
        t.append(time.perf_counter())
        c.append(time.process_time())
        b = lit.encode_batch(packed)  # as on_after_batch_transfer: a batch encoded ahead passes through
        sync(device)
        t.append(time.perf_counter())
        c.append(time.process_time())
        _, _, loss = lit._loss(b, lit.current_lambda())
        sync(device)
        t.append(time.perf_counter())
        c.append(time.process_time())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sync(device)
        t.append(time.perf_counter())
        c.append(time.process_time())
        opt.step()
        sync(device)
        t.append(time.perf_counter())
        c.append(time.process_time())
        model.clip_weights(scheme.ft_clip, scheme.l1_clip, ft_weight=not sparse)
        sync(device)
        t.append(time.perf_counter())
        c.append(time.process_time())
        if i >= warmup:
            walls.append(t[-1] - t[0])
            cpus.append(time.process_time() - c0)
            for k, p in enumerate(PHASES):
                phases[p].append(t[k + 1] - t[k])
                phase_cpu[p].append(c[k + 1] - c[k])
    del it, loader, opt, lit, dm
    return walls, cpus, {p: (statistics.median(phases[p]) * 1e3, statistics.median(phase_cpu[p]) * 1e3,
                             statistics.mean(phases[p]) * 1e3) for p in PHASES if phases[p]}


def run_naive(cfg, device: torch.device, steps: int, warmup: int) -> tuple[list[float], list[float]]:
    """EmbeddingBag reference FT, dense AdamW, features in memory, no clip, no factoriser."""
    from nnue.pipeline.batch import to_sparse_batch
    from nnue.trainer.loss import training_loss
    from nnue.trainer import kinds

    lit, dm = build(cfg)
    m = cfg.model
    model = kinds.build(dict(m, factoriser=False), lit.feature_set, lit.buckets, lit.scheme, backend="torch").to(device)
    o = cfg.optimizer
    opt = torch.optim.AdamW(model.parameters(), lr=float(o.lr), weight_decay=float(o.get("weight_decay", 0.01)))
    it = iter(dm.train_dataloader())
    batches = [to_sparse_batch({k: v.to(device) for k, v in next(it).items()}, lit.feature_set, lit.buckets)
               for _ in range(min(4, warmup + steps))]
    del it
    loss_cfg, scale = dict(lit.loss_cfg), lit.scheme.scale
    walls, cpus = [], []
    for i in range(warmup + steps):
        b = batches[i % len(batches)]
        t0, c0 = time.perf_counter(), time.process_time()
        y = model(b.stm_indices, b.nstm_indices, b.bucket)
        loss = training_loss(y, b, scale, **loss_cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync(device)
        if i >= warmup:
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    del batches, model, opt, lit, dm
    return walls, cpus


# ------------------------------------------------------------------------------------------ one config

def describe(cfg) -> dict:
    import nnue.kernels as K

    m = cfg.model
    dev = torch.device("cuda" if cfg.trainer.accelerator in ("gpu", "cuda") else "cpu")
    return {"features": m.features, "kind": m.kind, "hidden": m.hidden, "activation": m.activation,
            "output_buckets": m.output_buckets, "factoriser": bool(m.factoriser), "backend": m.backend,
            "backend_resolved": K.resolve_backend(m.backend, dev),
            "sparse_ft": cfg.optimizer.get("sparse_ft", False) is True, "batch_size": cfg.data.batch_size,
            "fast_path": cfg.get("fast_path_note"),
            "deep": dict(m.deep) if m.get("deep") else None}


def machine_busy_s() -> float | None:
    """CPU seconds every process of the machine has spent so far (all cores: user, nice, system,
    irq, softirq, steal of /proc/stat's first line); None off Linux."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def bench_config(overrides: list[str], data: str, batch: int, device: torch.device, steps: int, warmup: int,
                 rounds: int, variants: list[str], baseline: list[str] | None) -> dict:
    cfg = compose(overrides, data, batch, device.type)
    base_cfg = compose(overrides + baseline, data, batch, device.type) if baseline else None
    runs = {v: ([], [], []) for v in variants + (["baseline"] if baseline else [])}
    # the other processes' CPU while each variant ran (its warm-up included): on a shared machine
    # what a step could not use; (CPU seconds, wall seconds) per variant
    others = {v: [0.0, 0.0] for v in runs}
    lightning_own: list[float] = []
    lightning_phases: dict[str, list[float]] = {}
    load = [round(x, 2) for x in os.getloadavg()]
    for r in range(rounds):
        order = list(runs)
        order = order[r % len(order):] + order[:r % len(order)]   # rotate: no variant always runs first
        for v in order:
            busy0, own0, wall0 = machine_busy_s(), time.process_time(), time.perf_counter()
            if v == "lightning":
                w, c, own, lph = run_lightning(cfg, device, steps, warmup)
                lightning_own.extend(own)
                for p, x in lph.items():
                    lightning_phases.setdefault(p, []).extend(x)
                ph = None
            elif v == "naive":
                w, c = run_naive(cfg, device, steps, warmup)
                ph = None
            else:
                w, c, ph = run_plain(base_cfg if v == "baseline" else cfg, device, steps, warmup)
            if busy0 is not None:
                others[v][0] += machine_busy_s() - busy0 - (time.process_time() - own0)
                others[v][1] += time.perf_counter() - wall0
            runs[v][0].extend(w)
            runs[v][1].extend(c)
            if ph:
                runs[v][2].append(ph)
            gc.collect()
    out = {"overrides": overrides, "config": describe(cfg), "load_average_1_5_15min_before": load,
           "load_average_1_5_15min_after": [round(x, 2) for x in os.getloadavg()], "variants": {}}
    if baseline:
        out["baseline_overrides"] = baseline
        out["baseline_config"] = describe(base_cfg)
    for v, (w, c, ph) in runs.items():
        row = summarise(w, c, batch)
        if others[v][1]:
            row["other_processes_cores"] = round(max(others[v][0], 0.0) / others[v][1], 3)
        if ph:   # the plain loop's profile: wall and CPU milliseconds per phase
            row["phases_ms_median"] = {p: statistics.median(x[p][0] for x in ph) for p in ph[0]}
            row["phases_cpu_ms_median"] = {p: statistics.median(x[p][1] for x in ph) for p in ph[0]}
            # the mean is the one that adds up to the window rate (the stream's phase is bimodal)
            row["phases_ms_mean"] = {p: statistics.mean(x[p][2] for x in ph) for p in ph[0]}
        out["variants"][v] = row
    rate = {v: out["variants"][v].get("positions_per_s_median") for v in runs}
    ratios = {}
    if rate.get("lightning") and rate.get("plain"):
        # on the window rates (every timed step's time): the steps are bimodal (the stream refills
        # its shuffle buffer every other step), and a median of a few steps lands in either mode
        li, pl_ = out["variants"]["lightning"], out["variants"]["plain"]
        ratios["lightning_overhead"] = pl_["window_positions_per_s"] / li["window_positions_per_s"] - 1
        ratios["lightning_overhead_median"] = rate["plain"] / rate["lightning"] - 1
        # CPU seconds per step (mean): what Lightning adds to the work, less sensitive to the load
        ratios["lightning_overhead_cpu"] = li["cpu_s_per_step_mean"] / pl_["cpu_s_per_step_mean"] - 1
    if lightning_own:
        # measured inside the Lightning run: its step less the time in our code. Less sensitive to
        # the load than a ratio of two runs: the load slows our code and Lightning's alike
        li = out["variants"]["lightning"]
        li["lightning_own_ms_per_step_median"] = statistics.median(lightning_own) * 1e3
        li["lightning_own_ms_per_step_mean"] = statistics.mean(lightning_own) * 1e3
        ratios["lightning_own_fraction"] = statistics.mean(lightning_own) * 1e3 / li["step_ms_mean"]
        # our code's phases inside the Lightning run, beside the plain loop's phases_ms_mean
        li["phases_ms_mean"] = {p: statistics.mean(x) * 1e3 for p, x in lightning_phases.items()}
    if rate.get("naive"):
        for v in ("lightning", "plain", "baseline"):
            if rate.get(v):
                ratios[f"{v}_vs_naive"] = rate[v] / rate["naive"]
    if rate.get("baseline"):
        for v in ("lightning", "plain"):
            if rate.get(v):
                ratios[f"{v}_vs_baseline"] = rate[v] / rate["baseline"]
    out["ratios"] = ratios
    return out


REPO = Path(__file__).resolve().parents[1]
#: the default data, first found: the third-party small.binpack of ../shared (434,921 positions of
#: Stockfish data, what nnue-pytorch is timed on), else the demo's self-play the repo ships
DEFAULT_DATA = (("small.binpack", REPO.parent / "shared" / "data" / "public" / "small.binpack",
                 "third-party Stockfish data (../shared/data/public/small.binpack), what nnue-pytorch is timed on"),
                ("demo", REPO / "data" / "demo", "our self-play the repo ships (data/demo: 2,400 games)"))
SAMPLE = ("sample", REPO / "data" / "sample", "the bundled sample (data/sample: 4,015 positions; toy runs only)")


def bench_data(choice: str | None, tmp: str) -> tuple[str, dict]:
    """(dataset folder, what it is) for ``--data``: a packed dataset as given; ``sample`` (the
    bundled 4,015 positions, for toy runs); default (None): the first of :data:`DEFAULT_DATA` that
    exists, packed into ``tmp`` (real data: a batch of 16,384 holds no position twice)."""
    from nnue.pipeline.manifest import load, totals
    from nnue.pipeline.pack import pack

    if choice not in (None, "sample"):
        return choice, {"source": choice, "what": "the dataset given (--data)",
                        "positions_packed": totals(load(choice))["packed"]}
    name, src, what = SAMPLE if choice == "sample" else next(
        (d for d in DEFAULT_DATA if d[1].exists()), (None, None, None))
    if name is None:
        raise SystemExit("bench train: no --data, no ../shared/data/public/small.binpack and no data/demo")
    files = [src] if src.is_file() else sorted(f for f in src.iterdir() if f.name.endswith((".plain", ".plain.zst")))
    out = Path(tmp) / name
    t = time.perf_counter()
    pack(files, out, progress=False)
    return str(out), {"source": name, "what": what, "files": [f.name for f in files],
                      "positions_packed": totals(load(out))["packed"], "pack_s": round(time.perf_counter() - t, 1)}


def environment(device: torch.device) -> dict:
    import platform

    import numba

    from nnue.kernels import host_memory

    env = {"device": device.type, "torch": torch.__version__, "numba": numba.__version__,
           "python": platform.python_version(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
           "cores_available": len(os.sched_getaffinity(0)),
           "torch_threads": torch.get_num_threads(), "numba_threads": numba.get_num_threads(),
           # PASSIVE: torch's OpenMP threads sleep instead of spinning between ops; on a shared
           # machine the spinning costs ~10x the CPU time of the feature encoding (see README)
           "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
           # retain: freed memory kept in the heap (nnue.kernels.host_memory); NNUE_MALLOC=default: not
           "malloc": host_memory.status()}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    return env


def main(argv=None) -> int:
    run(argv)
    return 0


def run(argv=None) -> dict:
    """The benchmark (module docstring); returns the report it prints."""
    p = parser("nnue bench train", __doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="nnue train's Hydra overrides, e.g. features=halfkav2_hm model=deep")
    p.add_argument("--data", help="a packed dataset, or 'sample' (the bundled 4,015 positions: toy runs); "
                                  "default: ../shared/data/public/small.binpack where it exists, else data/demo, "
                                  "packed into a temporary folder")
    p.add_argument("--batch", type=int, help=f"positions per step (data.batch_size; default {BATCH:,}, or the "
                                              "suite's own)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where the model and batches live")
    p.add_argument("--steps", type=int, default=16, help="timed steps per variant and round (even: as many of "
                                                        "the stream's refill steps in every variant)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per variant and round (compilation, caches)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every variant, in rotating order")
    p.add_argument("--variants", default="lightning,plain,naive", help="comma-separated: lightning,plain,naive")
    p.add_argument("--baseline", help="overrides for a 'baseline' plain loop beside the others, e.g. "
                                      f"\"{BEFORE}\"")
    p.add_argument("--suite", choices=["cpu", "gpu"],
                   help="cpu: the issue's CPU targets, each with the numba backend and optimizer.sparse_ft=true, "
                        "the torch path as baseline; gpu: bench/gpu.sh's cases (chess768 -> 256 and "
                        "sfnnv5 (halfkav2_hm -> 1024) at batch 16,384 and 65,536, the torch reference as baseline). "
                        "Overrides given are added to every config, --batch replaces the cases' batch")
    p.add_argument("--threads", type=int, help="torch and numba threads (default: theirs)")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_intermixed_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench train: --device cuda but no CUDA device")
    if a.threads:
        import numba

        torch.set_num_threads(a.threads)
        numba.set_num_threads(min(a.threads, numba.config.NUMBA_NUM_THREADS))
    device = torch.device(a.device)
    if device.type == "cpu":   # as LitNNUE.on_fit_start does for CPU training, for every variant alike
        from nnue.kernels.host_memory import retain_freed_memory

        retain_freed_memory()
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in ("lightning", "plain", "naive"):
            raise SystemExit(f"bench train: unknown variant {v!r}")
    if a.suite == "cpu":
        cases = [(c["overrides"] + FAST + a.overrides, c) for c in SUITE_CPU]
        baseline = shlex.split(a.baseline or BEFORE)
    elif a.suite == "gpu":
        cases = [(c["overrides"] + a.overrides, c) for c in SUITE_GPU]
        baseline = shlex.split(a.baseline or "model.backend=torch")
    else:
        cases = [(a.overrides, None)]
        baseline = shlex.split(a.baseline) if a.baseline else None
    for overrides, case in cases:   # refuse a bad override in one line (status 2) before any work
        try:
            compose(overrides + (baseline or []), a.data or "unused", a.batch or BATCH, a.device)
        except Exception as e:  # Hydra's override and config errors
            p.error(f"bad override: {' '.join(str(e).split())}")
    with tempfile.TemporaryDirectory() as tmp:
        data, data_info = bench_data(a.data, tmp)
        result = {"benchmark": "train: end-to-end positions/s of the training step (stream -> features -> "
                               "forward/backward -> optimiser step)",
                  "command": "nnue bench train " + shlex.join(sys.argv[1:] if argv is None else argv),
                  "environment": environment(device), "data": data_info,
                  "timing": {"steps": a.steps, "warmup": a.warmup, "rounds": a.rounds,
                             "statistic": "median over every timed step of every round; window = timed positions / timed "
                                           "wall time; lightning_overhead on the window rates"}, "runs": []}
        for overrides, case in cases:
            batch = a.batch or (case or {}).get("batch") or BATCH
            r = bench_config(overrides, data, batch, device, a.steps, a.warmup, a.rounds, variants, baseline)
            r["features_encoded_on"] = device.type
            if case is not None:
                r["name"], r["target_positions_per_s"] = case["name"], case["target_positions_per_s"]
                got = r["variants"].get("lightning", r["variants"].get("plain", {})).get("positions_per_s_median")
                r["target_met"] = (bool(got and got >= case["target_positions_per_s"])
                                   if case["target_positions_per_s"] else None)
                est = r["variants"].get("lightning", r["variants"].get("plain", {})).get(
                    "positions_per_s_estimate_2_idle_cores")
                r["target_met_estimate_2_idle_cores"] = (bool(est and est >= case["target_positions_per_s"])
                                                         if case["target_positions_per_s"] else None)
            result["runs"].append(r)
    emit(result, a.out)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
