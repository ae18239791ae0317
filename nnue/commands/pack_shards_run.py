"""``nnue pack-shards``, the work: deal the inputs into N shards, run one Hydra job per shard through the
chosen launcher, merge the shard datasets. What it does and why: :mod:`nnue.commands.pack_shards` (the
command's help)."""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import hydra
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from nnue.pipeline import manifest as mf
from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import expand_inputs, pack, resolve_score_unit
from nnue.pipeline.ranges import range_bytes
from nnue.pipeline.shard import merge_datasets, shard_units
from nnue.trainer.launchers import register

# Hydra 1.3's deprecation notice for the launcher plugins' schema (as in nnue.trainer.runs)
warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema")


def shard_dir(work: str | Path, k: int, n: int) -> Path:
    return Path(work) / f"shard-{k}-of-{n}"


def error_file(work: str | Path, k: int, n: int) -> Path:
    return Path(work) / f"shard-{k}-of-{n}.error.txt"


@hydra.main(version_base="1.3", config_path="pkg://nnue.conf", config_name="pack_shards")
def job(cfg: DictConfig) -> dict:
    """One Hydra job: pack shard ``cfg.shard`` of ``cfg.shards`` into its shard dataset. An error is
    written to ``WORK/shard-K-of-N.error.txt`` (one line) for the submitting process to report,
    instead of a traceback in the job's log; ``NNUE_DEBUG=1`` re-raises it."""
    k, n = int(cfg.shard), int(cfg.shards)
    err = error_file(to_absolute_path(str(cfg.work)), k, n)
    err.unlink(missing_ok=True)
    try:
        return _pack_shard(cfg)
    except Exception as e:
        if os.environ.get("NNUE_DEBUG"):
            raise
        atomic_write_bytes(err, (" ".join(str(e).split()) or type(e).__name__).encode() + b"\n")
        return {"shard": k, "error": str(e)}


def _pack_shard(cfg: DictConfig) -> dict:
    k, n = int(cfg.shard), int(cfg.shards)
    inputs = [to_absolute_path(str(p)) for p in cfg.inputs]
    files, _ = expand_inputs(inputs)
    range_mb = float(cfg.range_mb)
    units = shard_units(files, k, n, range_bytes(range_mb), str(cfg.format))
    unit, _ = resolve_score_unit(str(cfg.score_unit), files, str(cfg.format), None)  # all inputs: one unit
    mine = [f for f in files if str(f) in units]
    out = shard_dir(to_absolute_path(str(cfg.work)), k, n)
    if not mine:
        out.mkdir(parents=True, exist_ok=True)
        if not (out / mf.MANIFEST).exists() and not (out / "merged.json").exists():
            mf.merge(out, [], score_unit=unit)
        return {"shard": k, "files": 0, "packed": 0}
    if (out / "merged.json").exists() and not (out / mf.MANIFEST).exists():
        return {"shard": k, "files": len(mine), "packed": None, "status": "already merged"}
    # the shards take the layout of the dataset they are merged into (a new one: chained)
    target = Path(to_absolute_path(str(cfg.output)))
    layout = None if (out / mf.MANIFEST).exists() else \
        {1: "flat", 2: "chained", 3: "chained"}[mf.layout(target)] if target.is_dir() else None
    if layout == "chained" and mf.layout(target) == 2:  # a dataset of the chained layout's schema 2
        out.mkdir(parents=True, exist_ok=True)
        mf.save(out, mf.new(2))
        layout = None
    s = pack(mine, out, fmt=str(cfg.format), score_unit=unit,
             options=ReaderOptions(pgn_pov=str(cfg.pgn_pov)), progress=False, workers=int(cfg.workers),
             range_mb=range_mb, units=units, layout=layout)
    r = {"shard": k, "files": len(mine), "read": s["read"], "packed": s["packed"],
         "skipped_already_packed": len(s["skipped"])}
    print(json.dumps(r), flush=True)
    return r


def _value(argv: list[str], key: str, default: str | None) -> str | None:
    for a in argv:
        if a.startswith(key + "="):
            return a.split("=", 1)[1]
    return default


def main(argv: list[str]) -> int:
    """The command: check the overrides, run the multirun, then merge. Returns the exit status."""
    if any(a in ("-m", "--multirun") or a.startswith("shard=") for a in argv):
        raise ValueError("pack-shards runs the multirun itself: give shards=N, not -m or shard=")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            cfg = compose("pack_shards", overrides=argv)
    except Exception as e:  # Hydra/OmegaConf raise many types; all mean a bad override here
        raise ValueError(" ".join(str(e).split())) from None
    finally:
        GlobalHydra.instance().clear()
    missing = [k for k in ("inputs", "output") if OmegaConf.is_missing(cfg, k)]
    if missing:
        raise ValueError(f"give {' and '.join(missing)}=..., e.g. 'inputs=[DUMPS]' output=DATASET")
    n = int(cfg.shards)
    if n < 1:
        raise ValueError(f"shards={n}: need at least 1")
    files, _ = expand_inputs([str(p) for p in cfg.inputs])  # FileNotFoundError naming a missing input
    if not files:
        raise ValueError(f"no dump files in {', '.join(map(str, cfg.inputs))}")
    work = Path(str(cfg.work))
    register()  # our launchers (hydra_plugins.nnue_forge_launchers): an editable install is not scanned
    old_argv = sys.argv
    sys.argv = ["nnue pack-shards", "-m", f"shard=range(0,{n})", *argv]
    try:
        job()
    except SystemExit as e:
        if e.code not in (0, None):
            raise ValueError(f"a shard job failed (status {e.code}); see {work / '.hydra'}") from None
    finally:
        sys.argv = old_argv
    shards = [shard_dir(work, k, n) for k in range(n)]
    errors = [(k, error_file(work, k, n)) for k in range(n) if error_file(work, k, n).exists()]
    if errors:
        k, f = errors[0]
        raise ValueError(f"{len(errors)} of {n} shard job(s) failed, nothing merged; shard {k}: "
                         f"{f.read_text().strip()} (fix it and rerun the same command)")
    bad = [str(s) for s in shards if not (s / "manifest.json").exists() and not (s / "merged.json").exists()]
    if bad:
        raise ValueError(f"shard job(s) did not finish: {', '.join(bad)} (rerun the same command to finish)")
    if not cfg.merge:
        print(f"packed {n} shard(s) into {work}; merge them with: nnue merge {work}/shard-*-of-{n} -o {cfg.output}")
        return 0
    r = merge_datasets(shards, str(cfg.output))
    print(f"packed {n} shard(s) of {len(files)} file(s); merged {r['files']} file(s), {r['positions']:,} positions "
          f"into {cfg.output}; it holds {r['dataset_files']} file(s), {r['totals']['packed']:,} positions")
    return 0
