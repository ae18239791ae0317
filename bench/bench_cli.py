"""Benchmark: how fast the ``nnue`` command answers ``--version`` and each ``--help``, and its peak memory.

``nnue bench cli [--runs R] [--commands pack,eval,...] [--out FILE]``: every case runs as its own process
(``nnue --version``, ``nnue --help``, ``nnue CMD --help`` for every sub-command of the parser, ``sweep report``
included), R times; reported per case: the median wall seconds (start to exit, interpreter start-up
included), the median CPU seconds of the child (user + system, ``os.wait4``) and its peak resident set
size (``ru_maxrss``, MiB). Two reference rows frame the figures: ``python -c pass`` (the interpreter's own
start-up, the floor) and ``python -c "import torch"`` (what every answer cost when the parser imported
torch). The goal (issue 22 item 3) is under 0.4 s each; ``over_goal`` lists the cases above it. The load
average is recorded before and after: on a shared machine wall times grow with it, CPU seconds less so.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from nnue.bench import emit, parser

GOAL_S = 0.4


def _nnue_command() -> list[str]:
    """The installed console script next to this interpreter (what a user runs), else ``python -m nnue.cli``."""
    script = Path(sys.executable).with_name("nnue")
    if script.exists():
        return [str(script)]
    found = shutil.which("nnue")
    return [found] if found else [sys.executable, "-m", "nnue.cli"]


def _subcommands() -> list[list[str]]:
    """Every sub-command path of the ``nnue`` parser (``["sweep", "report"]`` included), in help order."""
    from nnue.cli import build_parser

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    yield path + [name]
                    yield from walk(sub, path + [name])

    return list(walk(build_parser(), []))


def _run_once(cmd: list[str]) -> tuple[float, float, float, int]:
    """(wall s, child CPU s, child peak RSS MiB, exit status) of one run of ``cmd``, output discarded."""
    env = {**os.environ, "COLUMNS": "100"}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, proc.returncode  # ru_maxrss: KiB on Linux


def _case(cmd: list[str], runs: int) -> dict:
    walls, cpus, rss, codes = [], [], [], set()
    for _ in range(runs):
        w, c, r, rc = _run_once(cmd)
        walls.append(w)
        cpus.append(c)
        rss.append(r)
        codes.add(rc)
    return {"wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3),
            "max_rss_mib": round(max(rss), 1), "wall_s_min": round(min(walls), 3),
            "exit_status": sorted(codes)}


def main(argv: list[str] | None = None) -> int:
    p = parser("nnue bench cli", __doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5, help="runs of each case (the median is reported)")
    p.add_argument("--commands", default=None,
                   help="comma-separated sub-commands to time, e.g. pack,eval,'sweep report' (default: every "
                        "sub-command of the parser)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the python -c pass and import torch reference rows (default: timed)")
    p.add_argument("--out", default=None, help="also write the JSON report here")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs: at least 1")

    nnue = _nnue_command()
    subs = ([c.split() for c in args.commands.split(",")] if args.commands else _subcommands())
    cases = [["--version"], ["--help"]] + [s + ["--help"] for s in subs]
    load_before = os.getloadavg()
    rows = {" ".join(["nnue", *c]): _case(nnue + c, args.runs) for c in cases}
    reference = {}
    if not args.no_reference:
        reference = {"python -c pass": _case([sys.executable, "-c", "pass"], args.runs),
                     "python -c 'import torch'": _case([sys.executable, "-c", "import torch"], args.runs)}
    load_after = os.getloadavg()
    report = {
        "benchmark": "cli", "goal_s": GOAL_S, "runs": args.runs, "command": " ".join(nnue),
        "version": subprocess.run(nnue + ["--version"], capture_output=True, text=True).stdout.strip(),
        "slowest": max(rows, key=lambda k: rows[k]["wall_s"]),
        "slowest_wall_s": max(r["wall_s"] for r in rows.values()),
        "median_wall_s": round(statistics.median(r["wall_s"] for r in rows.values()), 3),
        "max_rss_mib": max(r["max_rss_mib"] for r in rows.values()),
        "over_goal": [k for k, r in rows.items() if r["wall_s"] >= GOAL_S],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "cases": rows, "reference": reference,
    }
    return emit(report, args.out)


if __name__ == "__main__":
    sys.exit(main())
