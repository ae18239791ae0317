"""Write docs/CHANGELOG.md from the git history, grouped by issue.

Usage: python scripts/gen_changelog.py   (run in a clone with its whole history; commit the page)

Commit subjects rarely name their issue, so each commit is put under an issue by the first rule of
RULES whose pattern its subject matches (the day decides between the first phase's issues 2-6
and the later ones); bare "Merge branch" commits are left out, and a commit no rule matches is
listed under "Other". The grouping is therefore approximate: the rules are the table below, and a
commit that names its issue ("issue 15") goes there first.
"""
from __future__ import annotations

import os
import re
import subprocess
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "CHANGELOG.md"

TITLES = {
    2: "The main job end to end on real self-play data: pack, stream, train, export, evaluate",
    3: "Ingest every common self-play dump, robustly and fast",
    4: "Feature sets and a streaming loader that never starves the trainer",
    5: "Triton kernels: fused sparse feature transformer and activations",
    6: "Integer nets that engines compute exactly: quantisation, export, CPU inference",
    10: "The service: Hydra sweeps on clusters, streaming self-play ingest, nightly retrain",
    11: "The seeds' nets: Swish, Hard-Swish and SwiGLU layers, residual and tiny nets",
    12: "Training runs that users can trust and that converge to strong nets",
    13: "Self-play and strength: MCTS, a UCI datagen driver, SPRT matches",
    14: "Pack at the speed of the data: compiled decoders, all cores, packing on a cluster",
    15: "Robustness, round 2: the files and mistakes that users really have",
    22: "One module per extension, a thin CLI, tests that stand alone, a documentation site",
}

# (first phase?, issue, pattern): first phase = commits before 2026-12-01 (issues 2-6)
RULES = [
    (True, 5, r"triton|kernel"),
    (True, 6, r"deep|integer|inference|c reference|c cross|qat|quantis|sparse l1|incremental|export|cpu.capab|"
              r"nnue eval|evals/s|vnni|bench infer"),
    (True, 4, r"feature set|factoriser|loader|features \(|halfk|kb768"),
    (True, 3, r"reader|binpack|\.bin\b|bulletformat|marlinformat|viriformat|convert|bench pack|--workers|bulk|"
              r"\.plain|bullet text|epd|fuzz|fen placement|edge-case|inspect"),
    (True, 2, r"."),
    (False, 22, r"tests stand alone|mkdocs|docs site|demo net beats|issue 22|bare clone|data/demo|tests\.\* imports|changelog"),
    (False, 15, r"issue 15|gameids|\bbom\b|refus|crash-safety|sigkill|traceback|impossible double|retrograde|repeats another|"
                r"nothing.decod|eval comment|game ids|content-derived|pgn eval|%eval|weights_only|checkpoints load|"
                r"chess960 \.plain round trip|fresh-clone|nag\b"),
    (False, 14, r"compiled|numba|range|shard|merge refuses|nnue merge|pack-shards|pack_workers|pack_rss|"
                r"pack_profile|fuzz|bench pack|text core|pgn walk|\.bin kernel|retire the numpy|chesscore"),
    (False, 13, r"selfplay|self-play|mcts|sprt|\bmatch\b|datagen|uci|stockfish|closing the loop|loop_selfplay"),
    (False, 11, r"residual|tiny|swish|swiglu|hardswish|annotate|analyze|hidden activation|seeds?\b|spec module|"
                r"net-kind"),
    (False, 10, r"issue 10|sweep|slurm|hydra|retrain|registry|--watch|deploy|stream|hparams|optuna|ddp|"
                r"concurrent packs|dedup|provenance|pack --watch"),
    (False, 12, r"train|schedule|checkpoint|config check|quality|sigterm|run folder|every job owns|experiment="),
]


def _commits() -> list[tuple[str, str, str]]:
    out = subprocess.run(["git", "-C", str(REPO), "log", "--reverse", "--format=%h%x09%ad%x09%s", "--date=short"],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("\t", 2)) for line in out.splitlines() if line]


def _issue(day: str, subject: str) -> int | None:
    s = subject.lower()
    m = re.search(r"\bissue (\d+)", s)
    if m and int(m.group(1)) in TITLES:
        return int(m.group(1))
    first = day < "2026-12-01"
    for phase, issue, pattern in RULES:
        if phase == first and re.search(pattern, s):
            return issue
    return None


def main() -> int:
    groups: dict[int | None, list[str]] = defaultdict(list)
    for h, day, subject in _commits():
        if re.fullmatch(r"Merge branch '[^']*'", subject):
            continue
        groups[_issue(day, subject)].append(f"- {day} `{h}` {subject}")
    lines = ["# Changelog", "",
             "Generated from the git history by `scripts/gen_changelog.py`, newest issue first. Commits are "
             "put under an issue by keywords of their subjects (the script's rules), so the grouping is "
             "approximate; within an issue they are in the order they were made.", ""]
    for issue in sorted((k for k in groups if k is not None), reverse=True):
        lines += [f"## Issue {issue}: {TITLES[issue]}", ""] + groups[issue] + [""]
    if groups.get(None):
        lines += ["## Other", ""] + groups[None] + [""]
    tmp = OUT.with_name(".CHANGELOG.md.tmp")
    tmp.write_text("\n".join(lines))
    os.replace(tmp, OUT)
    print(f"{OUT}: {sum(len(v) for v in groups.values())} commits, {len(groups)} groups")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
