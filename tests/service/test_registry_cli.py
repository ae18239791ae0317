"""``nnue registry list|show`` as a person reads them, and the retrain's summary line, on a
registry written by hand (no training: the commands only read version.json, gate.json and
history.jsonl)."""
from __future__ import annotations

import json
import subprocess

from tests.service.service_testlib import NNUE, env

from nnue.trainer.retrain import summary_line


def _version(reg, v, verdict, reason, loss, rho, champ_metrics=None, champion=None, sprt=None):
    d = reg / "versions" / v
    d.mkdir(parents=True)
    cand = {"loss": loss, "spearman": rho, "positions": 321}
    rec = {"version": v, "created": f"2026-01-0{int(v)}T00:00:00Z", "verdict": verdict, "reason": reason,
           "metrics": {"candidate": cand, "champion": champ_metrics},
           "data": {"files": 2, "positions": 1400 * int(v), "new_files": 1, "new_positions": 700},
           "warm_start": champion,
           "history": {"train": {"val_loss": loss + 0.001, "val_spearman": rho, "epochs": 1, "global_step": 8}}}
    (d / "version.json").write_text(json.dumps(rec))
    (d / "gate.json").write_text(json.dumps({"version": v, "champion": champion, "candidate": cand,
                                             "champion_metrics": champ_metrics, "sprt": sprt,
                                             "verdict": verdict, "reason": reason}))


def _registry(tmp_path):
    reg = tmp_path / "reg"
    _version(reg, "0001", "promote", "first version: no champion to beat", 0.031, 0.71)
    _version(reg, "0002", "reject", "not better on loss: 0.03300 > 0.03100 - 0", 0.033, 0.70,
             {"loss": 0.031, "spearman": 0.71, "positions": 321}, "0001",
             sprt={"verdict": "H0", "llr": -2.95, "elo": -40.0, "elo_ci95": 30.0, "games": 200,
                   "elo0": 0, "elo1": 10, "nodes": 64})
    hist = [{"time": "T1", "action": "cycle", "version": "0001", "verdict": "promote", "champion": "0001",
             "previous_champion": None, "reason": "first version: no champion to beat"},
            {"time": "T2", "action": "cycle", "version": "0002", "verdict": "reject", "champion": "0001",
             "previous_champion": "0001", "reason": "not better on loss"},
            {"time": "T3", "action": "promote", "version": "0002", "previous": "0001", "champion": "0002",
             "reason": "manual"},
            {"time": "T4", "action": "rollback", "version": "0001", "previous": "0002", "champion": "0001",
             "reason": "rolled back from 0002"}]
    (reg / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in hist))
    (reg / "champion").write_text(json.dumps({"version": "0001"}))
    return reg


def _nnue(*args):
    r = subprocess.run([*NNUE, *map(str, args)], capture_output=True, text=True, env=env())
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_summary_line_words_the_verdict():
    h = {"action": "cycle", "version": "0003", "verdict": "reject", "reason": "not better on loss", "champion": "0002"}
    assert summary_line(h) == "retrain: version 0003 rejected: not better on loss; champion 0002"
    assert "version 0003 promoted:" in summary_line(h | {"verdict": "promote"})


def test_list_shows_promotions_rejections_and_rollbacks(tmp_path):
    reg = _registry(tmp_path)
    out = _nnue("registry", "list", "-r", reg)
    lines = out.splitlines()
    assert lines[0].startswith(f"registry {reg}: 2 version(s), champion 0001")
    row1 = next(x for x in lines if " 0001 " in x and x.startswith("*"))
    assert "promoted" in row1 and "0.03100" in row1 and "1,400" in row1
    assert any(" 0002 " in x and "rejected" in x and not x.startswith("*") for x in lines)
    hist = lines[lines.index("history (oldest first):") + 1:]
    assert hist[0].split()[:2] == ["time", "event"]
    events = [x.split()[1:4] for x in hist[1:]]
    assert events == [["promoted", "0001", "none"], ["rejected", "0002", "0001"],
                      ["promoted", "(manual)", "0002"], ["rolled", "back", "0001"]]
    assert "0002 -> 0001" in hist[-1] and "0001 -> 0002" in hist[-2]
    rows = json.loads(_nnue("registry", "list", "-r", reg, "--json"))
    assert [r["version"] for r in rows] == ["0001", "0002"] and [r["champion"] for r in rows] == [True, False]
    assert [e["event"] for e in rows[0]["events"]] == ["promoted", "rolled back"]
    assert [e["event"] for e in rows[1]["events"]] == ["rejected", "promoted (manual)"]


def test_show_is_a_table_and_json_on_request(tmp_path):
    reg = _registry(tmp_path)
    out = _nnue("registry", "show", "2", "-r", reg)
    assert not out.lstrip().startswith("{")
    fields = {x.split("  ")[0]: x.split("  ", 1)[1].strip() for x in out.splitlines()[:9] if "  " in x}
    assert fields["version"] == "0002" and fields["champion"] == "no" and fields["verdict"] == "rejected"
    assert fields["warm start from"] == "0001" and "2,800 positions in 2 file(s)" in fields["data"]
    loss = next(x for x in out.splitlines() if x.startswith("loss "))
    assert loss.split()[1:] == ["0.03300", "0.03100"]
    assert "SPRT [0, 10] at 64 nodes: H0, LLR -2.95, Elo -40.0 ± 30.0 over 200 games" in out
    rec = json.loads(_nnue("registry", "show", "2", "-r", reg, "--json"))
    assert rec["version"] == "0002" and rec["gate"]["sprt"]["verdict"] == "H0" and rec["champion"] is False


def test_warm_start_names_the_weights_a_cycle_started_from(tmp_path):
    """A cycle trained with ``init_weights=FILE`` in train.overrides (no champion yet) was shown as
    "warm start from none (fresh weights)": the record now names the file; a champion's weights
    are named by its version; fresh weights are none."""
    from nnue.trainer.retrain import warm_start_record

    champ = tmp_path / "reg" / "versions" / "0001" / "checkpoint.safetensors"
    mine = tmp_path / "imported" / "checkpoint.safetensors"
    assert warm_start_record(str(champ), champ, "0001") == "0001"
    assert warm_start_record(str(mine), None, None) == str(mine)
    assert warm_start_record(str(mine), champ, "0001") == str(mine)  # the user's file won the override
    assert warm_start_record(None, None, None) is None
    reg = _registry(tmp_path)
    rec = json.loads((reg / "versions" / "0001" / "version.json").read_text())
    (reg / "versions" / "0001" / "version.json").write_text(json.dumps(rec | {"warm_start": str(mine)}))
    out = _nnue("registry", "show", "1", "-r", reg)
    line = next(x for x in out.splitlines() if x.startswith("warm start from"))
    assert str(mine) in line and "fresh" not in line
