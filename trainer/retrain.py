"""``nnue retrain``: one gated retrain cycle over a registry (conf/retrain.yaml).

Stages, each ending in a state the next run can read (``NNUE_RETRAIN_KILL_AT=<stage>`` SIGKILLs
the process as the stage is reached, ``NNUE_RETRAIN_PAUSE_AT=<stage>`` writes ``REG/.paused-<stage>``
and waits: the crash-safety tests use them):

1. ``locked``   take the registry lock (a stale one of a dead process: its work is removed); recover:
                remove unfinished ``work/`` folders, finish a version that was renamed into place
                but whose promotion or history line is missing;
2. ``packed``   pack what is new in the watched folders (:class:`nnue.pipeline.watch.Watcher`);
                the first cycle fixes the gate set (``REG/gate.json``);
3. ``trained``  train (``nnue train``'s config tree plus ``train.overrides``) into ``work/NNNN/train``,
                warm-started from the champion's ``checkpoint.safetensors`` (first cycle: from scratch);
4. ``exported`` export (trainer/export.py) into ``work/NNNN``;
5. ``gated``    gate the candidate against the champion on the gate set: validation loss and
                quiet-position Spearman ρ of the *integer* nets, each with a margin, then
                (``gate.sprt.enabled``) an SPRT match through ``nnue.selfplay.match.gate_match``;
6. ``finished`` ``version.json`` written and ``work/NNNN`` renamed to ``versions/NNNN``;
7. ``promoted`` the champion pointer replaced (promote only);
8. ``recorded`` the history line appended; the lock is released.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import numpy as np

from . import runs  # noqa: F401  (its conf/ resolvers, and the launcher-schema warning filter)
from .registry import VERSION_JSON, LockedError, Registry, _json, now_iso

log = logging.getLogger("nnue.retrain")
STAGES = ("locked", "packed", "trained", "exported", "gated", "finished", "promoted", "recorded")


class RetrainError(ValueError):
    """Bad retrain configuration or a cycle that cannot run (one line at the command line)."""


def stage(reg: Registry, name: str) -> None:
    """Crash-test hook: SIGKILL or pause this process as stage ``name`` is reached."""
    log.info("stage %s", name)
    if os.environ.get("NNUE_RETRAIN_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("NNUE_RETRAIN_PAUSE_AT") == name:
        (reg.root / f".paused-{name}").write_text(str(os.getpid()))
        while True:
            time.sleep(1)


# ---------------------------------------------------------------------------------- recovery
def recover(reg: Registry) -> list[str]:
    """Under the lock: remove unfinished work, complete finished-but-unrecorded versions.
    Returns what was done, one line each."""
    done = []
    if reg.work.is_dir():
        for p in sorted(reg.work.iterdir()):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            done.append(f"removed unfinished {p}")
    for p in reg.root.glob(".paused-*"):
        p.unlink()
    recorded = {h.get("version") for h in reg.history() if h.get("action") == "cycle"}
    for v in reg.finished():
        if v in recorded:
            continue
        rec = reg.info(v)
        if rec.get("verdict") == "promote":
            current = reg.champion_raw()
            if current is None or current < v:
                reg.set_champion(v)
                done.append(f"completed the promotion of {v}")
        reg.append_history(dict(rec["history"], recovered=True, champion=reg.champion_raw()))
        done.append(f"recorded the history line of {v}")
    return done


# ------------------------------------------------------------------------------------- gate
def gate_positions(dataset: Path, gate: dict, filters: dict, limit: int):
    """The gate set's positions: games of the gate parts with ``game_id % 10000 < fraction·10000``
    (inside the training's validation split, so never trained on), through the training filters
    (quiet positions). Returns (boards (N, 32) uint8, score (N,) float32 cp, result (N,) float32
    in {0, ½, 1}), at most ``limit`` positions, in part order."""
    import torch
    from collections import Counter

    from nnue.pipeline import manifest as mf
    from nnue.pipeline.board import boards_from_bytes
    from nnue.pipeline.parts import read_part
    from nnue.pipeline.stream import SF_INTERNAL_PER_PAWN, Filters, filter_mask, split_mask

    m = mf.load(dataset)
    scale = 100.0 / SF_INTERNAL_PER_PAWN if m["score_unit"] == "sf-internal" else 1.0
    f = Filters(**{**dict(filters or {}), "random_skip": 0.0})
    boards, scores, results, n = [], [], [], 0
    for part in gate["parts"]:
        if not (dataset / part).exists():
            raise RetrainError(f"{dataset / part}: a part of the fixed gate set ({gate['path']}) is missing")
        t = read_part(dataset / part)  # either layout, flat or chained
        cols = {c: t.column(c).to_numpy(zero_copy_only=False) for c in
                ("game_id", "flags", "ply", "piece_count", "result", "score")}
        for c in ("in_check", "best_move_is_capture"):
            cols[c] = np.asarray(t.column(c).fill_null(False).to_numpy(zero_copy_only=False), bool)
        score_cp = cols["score"].astype(np.float32) * np.float32(scale)
        keep = split_mask(cols["game_id"], "val", gate["fraction"])
        keep = filter_mask(cols, f, Counter(), np.random.default_rng(0), score_cp, keep)
        idx = np.flatnonzero(keep)[: max(limit - n, 0)]
        boards.append(np.take(boards_from_bytes(t.column("board")), idx, axis=0))
        scores.append(score_cp[idx])
        results.append((cols["result"][idx].astype(np.float32) + 1) / 2)
        n += len(idx)
    if n == 0:
        raise RetrainError(f"the gate set ({gate['path']}) holds no position after the filters; "
                           "raise gate.fraction (at most data.val_fraction)")
    return (torch.from_numpy(np.concatenate(boards)), torch.from_numpy(np.concatenate(scores)),
            torch.from_numpy(np.concatenate(results)))


def net_metrics(net_path: Path, boards, score, result, loss_cfg: dict) -> dict:
    """Gate metrics of an integer net: WDL loss of its integer evals (the training loss, with the
    net's SCALE) and Spearman ρ of its evals with the scores."""
    import torch

    from nnue.inference import evaluate, load

    from .loss import wdl_loss
    from .metrics import spearman

    net = load(net_path)
    ev = evaluate(net, boards).to(torch.float32)
    sc = float(net.scheme.scale)
    loss = float(wdl_loss(ev / sc, score, result, sc, float(loss_cfg.get("wdl_lambda", 0.1)),
                          float(loss_cfg.get("power", 2.0))))
    return {"loss": loss, "spearman": float(spearman(ev.numpy(), score.numpy())), "positions": int(len(score))}


def decide(cand: dict, champ: dict | None, gcfg) -> tuple[str, str]:
    """(verdict, reason) of the loss and Spearman gate: promote when ``loss ≤ champion − loss_margin``
    and ``ρ ≥ champion + spearman_margin`` (negative margins tolerate a small regression)."""
    if not (np.isfinite(cand["loss"]) and np.isfinite(cand["spearman"])):
        return "reject", f"candidate metrics are not finite ({cand})"
    if champ is None:
        return "promote", "first version: no champion to beat"
    lm, sm = float(gcfg.loss_margin), float(gcfg.spearman_margin)
    ok_loss = cand["loss"] <= champ["loss"] - lm
    ok_rho = cand["spearman"] >= champ["spearman"] + sm
    detail = (f"gate loss {cand['loss']:.5f} vs champion {champ['loss']:.5f} (margin {lm:g}), "
              f"ρ {cand['spearman']:.4f} vs {champ['spearman']:.4f} (margin {sm:g})")
    if ok_loss and ok_rho:
        return "promote", "better on the gate set: " + detail
    which = " and ".join(w for w, ok in (("loss", ok_loss), ("Spearman", ok_rho)) if not ok)
    return "reject", f"not better on {which}: " + detail


def _gate_match():
    try:
        from nnue.selfplay.match import gate_match
    except ImportError as e:
        raise RetrainError(f"gate.sprt.enabled=true needs nnue.selfplay.match.gate_match, which is not "
                           f"installed here ({e})") from None
    return gate_match


SPRT_MODES = ("after_metrics", "alone")
SPRT_INCONCLUSIVE = ("reject", "promote")
#: the keys of gate.sprt passed on to gate_match
SPRT_MATCH_KEYS = ("games", "nodes", "elo0", "elo1", "alpha", "beta", "concurrency", "openings", "seed")


def sprt_decision(metrics_verdict: str, sprt_verdict: str | None, mode: str = "after_metrics",
                  inconclusive: str = "reject") -> str:
    """The gate's final verdict ("promote" | "reject") once the SPRT match has run.

    mode ``after_metrics``: the match runs only for a candidate that passed the loss/Spearman gate
    (``metrics_verdict == "promote"``) and must then not fail it; ``alone``: the metrics are
    recorded but the match alone decides. The match's verdict: "H1" promotes, "H0" rejects,
    "inconclusive" (the game budget ran out between the bounds) does what ``inconclusive`` says.
    ``sprt_verdict`` None (no match was played): the metrics verdict stands."""
    if mode not in SPRT_MODES:
        raise RetrainError(f"gate.sprt.mode={mode!r}: one of {', '.join(SPRT_MODES)}")
    if inconclusive not in SPRT_INCONCLUSIVE:
        raise RetrainError(f"gate.sprt.inconclusive={inconclusive!r}: one of {', '.join(SPRT_INCONCLUSIVE)}")
    if sprt_verdict is None:
        return metrics_verdict
    if mode == "after_metrics" and metrics_verdict != "promote":
        return "reject"
    if sprt_verdict == "H1":
        return "promote"
    if sprt_verdict == "H0":
        return "reject"
    return inconclusive


def run_gate_match(sprt_cfg, candidate: Path, champion: Path, work: Path, final: Path) -> dict:
    """Play the gate's SPRT match (``gate_match``) candidate vs champion into ``work/sprt``; the
    match's ``match.pgn`` and ``match.json`` travel with the version folder, so their recorded
    paths (in match.json and in the returned summary) are those under ``final`` (the
    ``versions/NNNN`` the work folder is renamed to). Returns the summary kept in gate.json and
    history.jsonl: verdict, llr, elo, elo_ci95, penta (LL..WW, candidate's POV), games, wdl,
    sprt_stopped, elo0, elo1, nodes, pgn, json."""
    import json

    from nnue.pipeline.atomic import atomic_write_bytes

    kw = {k: sprt_cfg[k] for k in SPRT_MATCH_KEYS if sprt_cfg.get(k) is not None}
    if kw.get("openings") is not None:
        kw["openings"] = Path(str(kw["openings"]))
    r = _gate_match()(candidate, champion, work / "sprt", **kw)
    paths = {"pgn": str(final / "sprt" / "match.pgn"), "json": str(final / "sprt" / "match.json")}
    on_disk = json.loads((work / "sprt" / "match.json").read_text())
    on_disk.update(paths)
    atomic_write_bytes(work / "sprt" / "match.json", (json.dumps(on_disk, indent=2) + "\n").encode())
    summary = {k: r.get(k) for k in ("verdict", "llr", "elo", "elo_ci95", "penta", "games", "wdl", "sprt_stopped")}
    summary.update(elo0=kw.get("elo0"), elo1=kw.get("elo1"), nodes=kw.get("nodes"), **paths)
    return summary


# ------------------------------------------------------------------------------------- cycle
def _train_config(overrides: list[str]):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from .checks import check_train_args

    err = check_train_args(overrides)
    if err:
        raise RetrainError(f"train.overrides: {err}")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            return compose("train", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def warm_start_record(init_weights, champion_file: Path | None, champion: str | None) -> str | None:
    """What a version records as its warm start (``nnue registry show``): the champion's version
    when the cycle started from its weights (``champion_file``, train.warm_start), else the file
    an ``init_weights=`` of ``train.overrides`` names, else None (fresh weights). init_weights:
    the composed training config's value."""
    if init_weights in (None, ""):
        return None
    if champion_file is not None and Path(str(init_weights)).resolve() == Path(champion_file).resolve():
        return champion
    return str(init_weights)


def train_overrides(cfg) -> list[str]:
    """``train.overrides``: a list, or one string of space-separated overrides (easier to quote:
    ``'train.overrides="experiment=demo trainer.max_epochs=4"'``)."""
    return _override_list(cfg.train.overrides)


def _override_list(o) -> list[str]:
    """A list of overrides, or one string of space-separated ones (shell-quoted)."""
    import shlex

    if o is None:
        return []
    return shlex.split(o) if isinstance(o, str) else [str(x) for x in o]


def train_through_launcher(overrides: list[str], launcher: str, launcher_overrides: list[str],
                           sweep_dir: Path) -> dict:
    """Run the cycle's training as a one-job Hydra multirun through ``hydra/launcher=LAUNCHER``
    (``submitit_slurm``: an sbatch job on the cluster, which this process waits for), in
    ``SWEEP_DIR/0``. Returns that job's ``metrics.json``; RetrainError with the job's error (its
    ``error.txt``, else the last line ``nnue train`` printed) when it wrote none."""
    import json
    import subprocess

    cmd = [sys.executable, "-m", "nnue.cli", "train", "-m", *overrides, f"hydra/launcher={launcher}",
           *launcher_overrides, f"hydra.sweep.dir={sweep_dir.resolve()}"]
    log.info("training through hydra/launcher=%s into %s", launcher, sweep_dir / "0")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    job = sweep_dir / "0"
    if (job / "metrics.json").exists() and r.returncode == 0:
        return json.loads((job / "metrics.json").read_text())
    err = job / "error.txt"
    why = (err.read_text().strip().splitlines() or ["?"])[0] if err.exists() else \
        ((r.stdout or "").strip().splitlines() or [f"status {r.returncode}"])[-1]
    raise RetrainError(f"training through hydra/launcher={launcher} failed: {why}")


def _check_config(cfg) -> None:
    if not 0 < float(cfg.gate.fraction) <= 1:
        raise RetrainError(f"gate.fraction={cfg.gate.fraction}: a share of games in (0, 1]")
    if cfg.gate.sprt.enabled:
        _gate_match()
        sprt_decision("promote", None, str(cfg.gate.sprt.get("mode", "after_metrics")),
                      str(cfg.gate.sprt.get("inconclusive", "reject")))  # checks both settings
    launcher = cfg.train.get("launcher")
    if launcher:
        import nnue.conf

        # ours, and Hydra's own basic launcher (its stored config: a file of the same name would be
        # validated against it, with Hydra's deprecation warning at every composition)
        known = sorted({"basic", *(f.stem for f in (Path(nnue.conf.__file__).parent / "hydra" / "launcher").glob("*.yaml"))})
        if str(launcher) not in known:
            raise RetrainError(f"train.launcher={launcher}: no such hydra/launcher=... (known: {', '.join(known)})")
    for w in cfg.watch or []:
        if not Path(w).is_dir():
            raise FileNotFoundError(f"{w}: watched folder does not exist")


def run_cycle(cfg) -> dict:
    """One cycle (module docstring). Returns the history line it appended (``action: cycle``), or
    ``{"action": "skipped", ...}`` when nothing new arrived and ``train.skip_if_no_new_data``."""
    from nnue.pipeline import manifest as mf

    _check_config(cfg)
    reg = Registry(cfg.registry)
    dataset = Path(cfg.dataset)

    def on_stale(info):
        log.warning("stale lock of process %s on %s (since %s, no longer running): cleaning up its cycle",
                    info.get("pid"), info.get("host"), info.get("since"))

    with reg.lock(on_stale):
        stage(reg, "locked")
        for line in recover(reg):
            log.info("recovery: %s", line)
        champ = reg.champion(load_net=False)  # raises, naming it, when missing or corrupt (the gate loads it)
        # 2. pack
        new_files = new_positions = 0
        failed = []
        if cfg.watch:
            from nnue.pipeline.watch import Watcher

            w = Watcher(list(cfg.watch), dataset, fmt=cfg.pack.format, score_unit=cfg.pack.score_unit,
                        settle=float(cfg.pack.settle), interval=0.5, log=log.info, inotify=False)
            s = w.run(once=True)
            new_files, new_positions, failed = s.packed_files, s.packed, s.failures
        if not (dataset / mf.MANIFEST).exists():
            raise RetrainError(f"{dataset}: no dataset yet (nothing packed from watch={list(cfg.watch or [])})")
        m = mf.load(dataset)
        totals = mf.totals(m)
        if totals["packed"] == 0:
            raise RetrainError(f"{dataset}: the dataset holds no positions")
        data = {"files": len(m["files"]), "positions": totals["packed"], "new_files": new_files,
                "new_positions": new_positions, "failed_files": len(failed)}
        if champ is not None and new_files == 0 and cfg.train.skip_if_no_new_data:
            # decided before the training config is composed and checked (seconds of Hydra and torch)
            stage(reg, "packed")
            entry = {"time": now_iso(), "action": "skipped", "reason": "no new dumps since the last cycle",
                     "data": data, "champion": champ}
            reg.append_history(entry)
            log.info("nothing new: no cycle (train.skip_if_no_new_data)")
            return entry
        tcfg = _train_config(train_overrides(cfg) + [f"data.path={dataset.resolve()}"])
        val_fraction = float(tcfg.data.val_fraction)
        if float(cfg.gate.fraction) > val_fraction:
            raise RetrainError(f"gate.fraction={cfg.gate.fraction} is larger than data.val_fraction="
                               f"{val_fraction}: the gate games must be held out of training")
        gate_path = reg.root / "gate.json"
        if gate_path.exists():
            gate = _json(gate_path, "fixed gate set")
        else:
            gate = {"fraction": float(cfg.gate.fraction), "dataset": str(dataset.resolve()), "created": now_iso(),
                    "parts": sorted(name for e in m["files"].values() if e["packed"]
                                    for name in mf.entry_parts(e))}
            from nnue.pipeline.atomic import atomic_write_bytes
            import json

            atomic_write_bytes(gate_path, (json.dumps(gate, indent=1) + "\n").encode())
        gate["path"] = str(gate_path)
        if gate["fraction"] > val_fraction:
            raise RetrainError(f"{gate_path}: fraction {gate['fraction']} exceeds data.val_fraction {val_fraction}")
        stage(reg, "packed")
        # 3. train
        version = f"{int(max(reg.finished(), default='0')) + 1:04d}"
        work = reg.work / version
        work.mkdir(parents=True)
        launcher = cfg.train.get("launcher")
        train_dir = work / "train" if not launcher else work / "train_sweep" / "0"
        overrides = train_overrides(cfg) + [f"data.path={dataset.resolve()}"]
        if not launcher:
            overrides.append(f"paths.output_dir={train_dir.resolve()}")
        warm = None
        if champ is not None and cfg.train.warm_start:
            warm = reg.versions / champ / "checkpoint.safetensors"
            overrides.append(f"init_weights={warm.resolve()}")
        tcfg = _train_config(overrides)
        t0 = time.time()
        if launcher:
            train_metrics = train_through_launcher(overrides, str(launcher), _override_list(cfg.train.get("launcher_overrides")),
                                                   work / "train_sweep")
        else:
            from .train import run as train_run

            train_metrics = train_run(tcfg)
        ckpt = train_dir / "checkpoints" / "weights-last.safetensors"
        if not ckpt.exists():
            raise RetrainError(f"{ckpt}: training wrote no weights")
        shutil.copyfile(ckpt, work / "checkpoint.safetensors")
        shutil.rmtree(train_dir / "checkpoints")  # the weights live on as checkpoint.safetensors
        stage(reg, "trained")
        # 4. export
        from .export import export

        # export.json and the net's provenance name versions/NNNN, where work/NNNN ends up
        export(work / "checkpoint.safetensors", work, data_path=str(dataset.resolve()),
               max_positions=int(cfg.export.positions), final_dir=(reg.versions / version).resolve())
        stage(reg, "exported")
        # 5. gate
        boards, score, result = gate_positions(dataset, gate, dict(tcfg.data.filters), int(cfg.gate.max_positions))
        loss_cfg = dict(tcfg.model.get("loss") or {})
        cand = net_metrics(work / "net.safetensors", boards, score, result, loss_cfg)
        ch = None if champ is None else net_metrics(reg.versions / champ / "net.safetensors", boards, score,
                                                   result, loss_cfg)
        verdict, reason = decide(cand, ch, cfg.gate)
        sprt = None
        sc = cfg.gate.sprt
        mode, inconclusive = str(sc.get("mode", "after_metrics")), str(sc.get("inconclusive", "reject"))
        metrics_verdict = verdict
        finite = bool(np.isfinite(cand["loss"]) and np.isfinite(cand["spearman"]))
        if champ is not None and sc.enabled and (verdict == "promote" or (mode == "alone" and finite)):
            sprt = run_gate_match(sc, work / "net.safetensors", reg.versions / champ / "net.safetensors", work,
                                  reg.versions / version)
            verdict = sprt_decision(metrics_verdict, sprt["verdict"], mode, inconclusive)
            elo = ("n/a" if sprt["elo"] is None else f"{sprt['elo']:+.1f} ± " +
                   ("inf" if sprt["elo_ci95"] is None else f"{sprt['elo_ci95']:.1f}"))
            llr = "n/a" if sprt["llr"] is None else f"{sprt['llr']:+.2f}"
            reason = ("metrics (not deciding, gate.sprt.mode=alone): " + reason if mode == "alone" else reason)
            reason += (f"; SPRT [{sprt['elo0']}, {sprt['elo1']}] at {sprt['nodes']} nodes: {sprt['verdict']}"
                       f"{' (budget spent: inconclusive=' + inconclusive + ')' if sprt['verdict'] == 'inconclusive' else ''}"
                       f", LLR {llr}, Elo {elo} over {sprt['games']} games -> {verdict}")
        import json

        from nnue.pipeline.atomic import atomic_write_bytes

        report = {"version": version, "champion": champ, "gate_set": gate, "candidate": cand,
                  "champion_metrics": ch, "margins": {"loss": float(cfg.gate.loss_margin),
                                                      "spearman": float(cfg.gate.spearman_margin)},
                  "metrics_verdict": metrics_verdict, "sprt": sprt, "verdict": verdict, "reason": reason}
        atomic_write_bytes(work / "gate.json", (json.dumps(report, indent=1, default=float) + "\n").encode())
        stage(reg, "gated")
        # 6. finish: version.json last, then one rename
        history = {"time": now_iso(), "action": "cycle", "version": version, "data": data,
                   "warm_start": warm_start_record(tcfg.get("init_weights"), warm, champ),
                   "train": {k: train_metrics.get(k) for k in ("val_loss", "val_spearman", "epochs", "global_step")},
                   "train_seconds": round(time.time() - t0, 1),
                   "metrics": {"candidate": cand, "champion": ch}, "sprt": sprt,
                   "verdict": verdict, "reason": reason, "previous_champion": champ}
        record = {"version": version, "created": now_iso(), "verdict": verdict, "reason": reason,
                  "metrics": {"candidate": cand, "champion": ch}, "data": data,
                  "warm_start": history["warm_start"], "history": history}
        atomic_write_bytes(work / VERSION_JSON, (json.dumps(record, indent=1, default=float) + "\n").encode())
        reg.versions.mkdir(parents=True, exist_ok=True)
        os.replace(work, reg.versions / version)
        stage(reg, "finished")
        if verdict == "promote":
            reg.set_champion(version)
            stage(reg, "promoted")
        history["champion"] = reg.champion_raw()
        reg.append_history(history)
        stage(reg, "recorded")
        return history


def main(argv: list[str]) -> int:
    """``nnue retrain [OVERRIDES]``: compose conf/retrain.yaml, run one cycle; one line on bad input
    (``--help``: :mod:`nnue.commands.retrain`)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from nnue.pipeline.manifest import ManifestError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        GlobalHydra.instance().clear()
        try:
            with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
                cfg = compose("retrain", overrides=argv)
            OmegaConf.resolve(cfg)
        except Exception as e:  # Hydra/OmegaConf raise many types; all mean a bad override here
            raise RetrainError(" ".join(str(e).split())) from None
        finally:
            GlobalHydra.instance().clear()
        h = run_cycle(cfg)
    except (ValueError, ManifestError, FileNotFoundError) as e:  # RetrainError, RegistryError, ExportError
        if os.environ.get("NNUE_DEBUG"):
            raise
        kind = "busy" if isinstance(e, LockedError) else "error"
        print(f"nnue retrain: {kind}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nnue retrain: interrupted (no version was finished; the next run cleans up)", file=sys.stderr)
        return 130
    print(summary_line(h))
    return 0


def summary_line(h: dict) -> str:
    """The line ``nnue retrain`` ends with, from the cycle's history entry:
    ``retrain: version 0003 rejected: REASON; champion 0002``."""
    from .registry import VERDICT_WORDS

    if h["action"] == "skipped":
        return f"retrain: skipped ({h['reason']}); champion {h['champion']}"
    return (f"retrain: version {h['version']} {VERDICT_WORDS.get(h['verdict'], h['verdict'])}: {h['reason']}; "
            f"champion {h['champion']}")
