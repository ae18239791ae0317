"""``nnue retrain`` and ``nnue registry``: cycles, the gate, crash safety, bad registries.

Every cycle runs the real command in a child process with a tiny training (1 epoch of 2,048
positions, hidden 8). The kill test SIGKILLs a cycle at each of its 8 stages in turn
(``NNUE_RETRAIN_KILL_AT``) and once from outside while it trains; after each kill the champion is
unchanged and loadable and every folder under versions/ is a finished, verifiable version; the
next run cleans up (or completes) and the final one finishes the cycle."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from nnue.trainer.registry import Registry
from nnue.trainer.retrain import STAGES
from tests.service.service_testlib import NNUE, cut_dumps, env

TINY = ("experiment=demo trainer.max_epochs=1 data.positions_per_epoch=2048 data.batch_size=256 "
        "model.hidden=8 trainer.enable_progress_bar=false data.val_fraction=0.2 ~logger.tensorboard")


def retrain(reg: Path, watch: Path, *extra, kill_at=None, pause_at=None, wait=True):
    e = env()
    if kill_at:
        e["NNUE_RETRAIN_KILL_AT"] = kill_at
    if pause_at:
        e["NNUE_RETRAIN_PAUSE_AT"] = pause_at
    cmd = [*NNUE, "retrain", f"registry={reg}", f"watch=[{watch}]", "pack.settle=0", "export.positions=1000",
           "gate.fraction=0.2", "train.skip_if_no_new_data=false", f'train.overrides="{TINY}"', *extra]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    if not wait:
        return p
    out, err = p.communicate(timeout=900)
    return p.returncode, out, err


def assert_consistent(reg: Path, champion: str | None):
    r = Registry(reg)
    assert r.champion() == champion
    if champion:
        r.verify(champion)
    for d in (reg / "versions").iterdir() if (reg / "versions").exists() else []:
        assert d.name in r.finished(), f"{d} looks like a version but is not finished"
        r.verify(d.name)


@pytest.fixture
def dumps(tmp_path):
    folder = tmp_path / "dumps"
    cut_dumps(folder, 2, records=700, bad_every=0)
    return folder


def test_two_cycles_registry_commands_and_bad_champion(tmp_path, dumps):
    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    assert "version 0001 promoted: first version" in out
    cut_dumps(dumps, 1, records=600, bad_every=0, start=3000, stem="new")
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    h = [json.loads(x) for x in (reg / "history.jsonl").read_text().splitlines()]
    assert [x["version"] for x in h] == ["0001", "0002"] and h[1]["warm_start"] == "0001"
    assert h[1]["data"]["new_files"] == 1 and h[1]["verdict"] in ("promote", "reject") and h[1]["reason"]
    champ = "0002" if h[1]["verdict"] == "promote" else "0001"
    assert_consistent(reg, champ)
    gate = json.loads((reg / "versions" / "0002" / "gate.json").read_text())
    assert gate["candidate"]["positions"] == gate["champion_metrics"]["positions"] > 0
    lst = subprocess.run([*NNUE, "registry", "list", "-r", reg, "--json"], capture_output=True, text=True, env=env())
    rows = json.loads(lst.stdout)
    assert [r["version"] for r in rows] == ["0001", "0002"] and sum(r["champion"] for r in rows) == 1
    # manual promote of 0002, then rollback to 0001
    subprocess.run([*NNUE, "registry", "promote", "2", "-r", reg], check=True, capture_output=True, env=env())
    assert Registry(reg).champion() == "0002"
    rb = subprocess.run([*NNUE, "registry", "rollback", "-r", reg], capture_output=True, text=True, env=env())
    assert rb.returncode == 0 and "-> 0001" in rb.stdout
    # a corrupt champion: one line naming it, suggesting rollback, for retrain and registry show
    (reg / "champion").write_text("{not json")
    for cmd in ([*NNUE, "registry", "show", "-r", reg],):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env())
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
        assert str(reg / "champion") in r.stderr and "nnue registry rollback" in r.stderr
    rc, out, err = retrain(reg, dumps)
    assert rc == 2 and str(reg / "champion") in err and "nnue registry rollback" in err
    assert "Traceback" not in err
    # a champion whose net is damaged: named; rollback goes to the last good one
    (reg / "champion").write_text(json.dumps({"version": "0002"}))
    with open(reg / "versions" / "0002" / "net.safetensors", "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 16)
    r = subprocess.run([*NNUE, "registry", "show", "-r", reg], capture_output=True, text=True, env=env())
    assert r.returncode == 2 and "0002" in r.stderr and "rollback" in r.stderr
    rb = subprocess.run([*NNUE, "registry", "rollback", "-r", reg], capture_output=True, text=True, env=env())
    assert rb.returncode == 0, rb.stderr
    assert Registry(reg).champion() == "0001"
    (reg / "champion").unlink()
    r = subprocess.run([*NNUE, "registry", "show", "-r", reg], capture_output=True, text=True, env=env())
    assert r.returncode == 2 and "missing" in r.stderr and "rollback" in r.stderr


def test_overlapping_cycle_is_refused_and_a_stale_lock_is_cleaned_up(tmp_path, dumps):
    reg = tmp_path / "reg"
    p = retrain(reg, dumps, pause_at="trained", wait=False)
    try:
        deadline = time.monotonic() + 600
        while not (reg / ".paused-trained").exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.2)
        rc, out, err = retrain(reg, dumps)
        assert rc == 2 and "another retrain cycle is running" in err and str(p.pid) in err
    finally:
        p.kill()
        p.communicate()
    assert_consistent(reg, None)
    assert list((reg / "work").iterdir())  # the dead cycle's work is still there, unfinished
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    assert f"stale lock of process {p.pid}" in err and "removed unfinished" in err
    assert_consistent(reg, "0001")
    assert not list((reg / "work").iterdir())


@pytest.mark.slow
def test_kill_9_at_every_stage(tmp_path, dumps):
    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    champion = "0001"
    always = ("gate.loss_margin=-1", "gate.spearman_margin=-2")  # every candidate promotes: all 8 stages run
    for s in STAGES:
        rc, out, err = retrain(reg, dumps, *always, kill_at=s)
        assert rc == -signal.SIGKILL, (s, err[-2000:])
        # the champion moves only once a promoted version is in place
        r = Registry(reg)
        raw = r.champion_raw()
        assert raw in (champion, *r.finished())
        if s in ("promoted", "recorded"):
            champion = raw
        elif s == "finished":
            # renamed into place but not yet promoted: the pointer has not moved
            assert raw == champion
        else:
            assert raw == champion
        assert_consistent(reg, raw)
    # from outside, while it trains
    p = retrain(reg, dumps, wait=False)
    while not list((reg / "work").glob("*/train")):
        assert p.poll() is None
        time.sleep(0.05)
    time.sleep(1.0)
    p.kill()
    p.communicate()
    assert_consistent(reg, Registry(reg).champion_raw())
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    r = Registry(reg)
    hist = [h for h in r.history() if h.get("action") == "cycle"]
    assert sorted(h["version"] for h in hist) == r.finished()  # every finished version recorded once
    assert_consistent(reg, r.champion_raw())
    assert not list((reg / "work").iterdir())


def test_bad_config_is_one_line(tmp_path, dumps):
    reg = tmp_path / "reg"
    r = subprocess.run([*NNUE, "retrain", f"registry={reg}", f"watch=[{tmp_path / 'nope'}]"],
                       capture_output=True, text=True, env=env())
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"nnue retrain: error: {tmp_path / 'nope'}: watched folder does not exist"]
    r = subprocess.run([*NNUE, "retrain", f"registry={reg}", "no_such_key=1"], capture_output=True, text=True, env=env())
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    try:
        import nnue.selfplay.match  # noqa: F401
    except ImportError:
        r = subprocess.run([*NNUE, "retrain", f"registry={reg}", f"watch=[{dumps}]", "gate.sprt.enabled=true"],
                           capture_output=True, text=True, env=env())
        assert r.returncode == 2 and "gate.sprt.enabled=true needs nnue.selfplay.match.gate_match" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([*NNUE, "retrain", f"registry={reg}", f"watch=[{dumps}]", "gate.sprt.enabled=true",
                        "gate.sprt.mode=sometimes"], capture_output=True, text=True, env=env())
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "nnue retrain: error: gate.sprt.mode='sometimes': one of after_metrics, alone"]
    assert not reg.exists()  # nothing written


def test_sprt_decision_rule():
    from nnue.trainer.retrain import RetrainError, sprt_decision

    for metrics in ("promote", "reject"):
        assert sprt_decision(metrics, None) == metrics  # no match played: the metrics stand
        for inc in ("reject", "promote"):
            # after_metrics: a candidate that failed the metrics is never promoted by a match
            exp = {"H1": "promote", "H0": "reject", "inconclusive": inc}
            for v in exp:
                assert sprt_decision(metrics, v, "after_metrics", inc) == (exp[v] if metrics == "promote" else "reject")
                assert sprt_decision(metrics, v, "alone", inc) == exp[v]  # the match alone decides
    for bad in (("promote", "H1", "sometimes", "reject"), ("promote", "H1", "alone", "maybe")):
        with pytest.raises(RetrainError, match="gate.sprt"):
            sprt_decision(*bad)


def _match_games(pgn: Path) -> list:
    import chess.pgn

    with open(pgn) as f:
        return [g for g in iter(lambda: chess.pgn.read_game(f), None)]


SPRT_CASES = [("0002", ("gate.loss_margin=-1", "gate.spearman_margin=-2", "gate.sprt.inconclusive=promote"),
               "promote", "after_metrics", "promote"),
              # metrics that cannot pass (the loss must drop by 1): only the match can promote
              ("0003", ("gate.loss_margin=1", "gate.sprt.mode=alone", "gate.sprt.inconclusive=reject"),
               "reject", "alone", "reject")]


def test_sprt_gate_plays_a_real_match_and_decides(tmp_path, dumps):
    """The gate's SPRT match is the real nnue.selfplay.match.gate_match (our MCTS on both integer
    nets, 4 nodes per move, at most 4 games): its PGN and JSON land in versions/NNNN/sprt/ with
    the paths recorded there, and the verdict follows the configured rule."""
    _sprt_cycles(tmp_path, dumps, SPRT_CASES[:1])


@pytest.mark.slow
def test_sprt_gate_alone_mode(tmp_path, dumps):
    """gate.sprt.mode=alone: a candidate that fails the metrics still plays, and the match decides."""
    _sprt_cycles(tmp_path, dumps, SPRT_CASES)


def _sprt_cycles(tmp_path, dumps, cases):
    from nnue.trainer.retrain import sprt_decision

    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    match = ("gate.sprt.enabled=true", "gate.sprt.games=4", "gate.sprt.nodes=4", "gate.sprt.seed=3")
    champion = "0001"
    for i, (version, extra, metrics_verdict, mode, inconclusive) in enumerate(cases):
        cut_dumps(dumps, 1, records=500, bad_every=0, start=4000 + 1000 * i, stem=f"new{i}")
        champion_sha = json.loads((reg / "champion").read_text())["net_sha256"]
        rc, out, err = retrain(reg, dumps, *match, *extra)
        assert rc == 0, err[-2000:]
        vdir = reg / "versions" / version
        gate = json.loads((vdir / "gate.json").read_text())
        on_disk = json.loads((vdir / "sprt" / "match.json").read_text())
        s = gate["sprt"]
        assert gate["metrics_verdict"] == metrics_verdict
        # the PGN and JSON travelled with the version folder and say where they are now
        assert s["pgn"] == on_disk["pgn"] == str(vdir / "sprt" / "match.pgn")
        assert s["json"] == on_disk["json"] == str(vdir / "sprt" / "match.json")
        games = _match_games(vdir / "sprt" / "match.pgn")
        assert len(games) == s["games"] == on_disk["games"] == 2 * sum(s["penta"]) and 2 <= s["games"] <= 4
        assert on_disk["settings"]["nodes"] == 4 and on_disk["players"]["A"]["net"].endswith("net.safetensors")
        assert on_disk["players"]["B"]["sha256"] == champion_sha  # the champion before this cycle
        assert s["verdict"] == on_disk["verdict"] in ("H1", "H0", "inconclusive")
        assert s["penta"] == on_disk["penta"] and s["llr"] == on_disk["llr"]
        # the candidate's score in the PGN is the one the pentanomial counts say
        score_a = sum({"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}[g.headers["Result"]] if g.headers["White"].startswith("A:")
                      else {"1-0": 0.0, "0-1": 1.0, "1/2-1/2": 0.5}[g.headers["Result"]] for g in games)
        assert score_a == pytest.approx(sum(k * 0.5 * n for k, n in enumerate(s["penta"])))
        assert gate["verdict"] == sprt_decision(metrics_verdict, s["verdict"], mode, inconclusive)
        assert f"SPRT [0.0, 5.0] at 4 nodes: {s['verdict']}" in gate["reason"]
        h = [json.loads(x) for x in (reg / "history.jsonl").read_text().splitlines()][-1]
        assert h["version"] == version and h["sprt"] == s and h["verdict"] == gate["verdict"]
        if gate["verdict"] == "promote":
            champion = version
        assert_consistent(reg, champion)
        assert f"version {version} {gate['verdict']}d" in out


def test_a_cycle_with_nothing_new_skips_at_once(tmp_path, dumps):
    """With nothing new, a cycle waited the settle time on every dump already packed (each counted
    as "being written" until seen unchanged for ``pack.settle`` s), then composed and checked the
    training config and loaded the champion's net (torch) before recording "skipped": about 24 s.
    Now dumps older than the settle time are complete at once, the skip is decided right after
    packing, and the champion is checked by its hash: no torch is imported. Here settle is 600 s:
    the old cycle waited up to 1,800 s."""
    import sys

    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps)
    assert rc == 0, err[-2000:]
    code = ("import sys, nnue.cli; rc = nnue.cli.main(sys.argv[1:]); "
            "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr); sys.exit(rc)")
    for f in dumps.iterdir():  # written at least 600 s ago: settled by their age
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    r = subprocess.run([sys.executable, "-c", code, "retrain", f"registry={reg}", f"watch=[{dumps}]",
                        "pack.settle=600", "gate.fraction=0.2", f'train.overrides="{TINY}"'],
                       capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "retrain: skipped (no new dumps since the last cycle); champion 0001" in r.stdout
    assert "still being written" not in r.stderr and r.stderr.strip().endswith("no torch"), r.stderr[-2000:]
    h = [json.loads(x) for x in (reg / "history.jsonl").read_text().splitlines()]
    assert h[-1]["action"] == "skipped" and h[-1]["data"]["new_files"] == 0
