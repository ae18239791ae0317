"""Write the generated pages of the documentation site: docs/cli.md (the argparse help of every
``nnue`` command and sub-command) and docs/benchmarks.md (every bench/results/*.json).

It also remakes nnue/commands/format_table.json (the format registry's names for the parser) and
conf/train_help.txt, Hydra's help of ``nnue train`` shipped for its inputs' digest
(:mod:`nnue.commands.train`), when that digest changed.

Usage: python scripts/gen_docs.py [--check]
--check writes nothing and exits 1, naming the stale pages, when a page differs from what the code
and the results would make now (tests/test_docs.py runs it; rerun without --check and commit).
The help is formatted at a fixed width (COLUMNS=100), so the page does not depend on the terminal.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
RESULTS = REPO / "bench" / "results"
WIDTH = "100"
#: top-level fields shown in a benchmark's table (scalars); the rest goes to its JSON block
SCALARS = (str, int, float, bool, type(None))


def _nnue_parser() -> argparse.ArgumentParser:
    """The ``nnue`` command's parser (built without importing torch: nnue.commands)."""
    from nnue.cli import build_parser

    return build_parser()


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:  # argparse keeps sub-parsers only here
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _walk(p: argparse.ArgumentParser, path: list[str]):
    yield path, p
    for name, sub in _subcommands(p).items():
        yield from _walk(sub, path + [name])


def cli_page() -> str:
    os.environ["COLUMNS"] = WIDTH
    root = _nnue_parser()
    root.prog = "nnue"
    out = ["# CLI reference", "",
           "Generated from the argparse help of every `nnue` command by `scripts/gen_docs.py` "
           "(do not edit by hand; `tests/test_docs.py` fails when it is stale). What each command "
           "refuses, and how, is on the [Commands and refusals](commands.md) page.", ""]
    entries = list(_walk(root, ["nnue"]))
    out += ["| command | what it does |", "|---|---|"]
    helps = {}  # id(sub-parser) -> its one-line help
    for _, p in entries:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for ca in a._choices_actions:
                    helps[id(a.choices[ca.dest])] = ca.help or ""
    for path, p in entries[1:]:
        what = helps.get(id(p), "").replace("|", "\\|")
        out.append(f"| [`{' '.join(path)}`](#{'-'.join(path)}) | {what} |")
    out.append("")
    for path, p in entries:
        p.prog = " ".join(path)
        out += [f"## {' '.join(path)} {{#{'-'.join(path)}}}", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _cell(v) -> str:
    s = json.dumps(v) if not isinstance(v, str) else v
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= 160 else s[:157] + "..."


#: pages that are not prose about results (generated, or the history)
NOT_PROSE = {"benchmarks.md", "cli.md", "CHANGELOG.md"}


def _quoted_on(name: str) -> list[str]:
    """Links to the prose pages of docs/ that name the result file ``name`` (title from their first line)."""
    out = []
    for page in sorted(DOCS.glob("*.md")):
        if page.name in NOT_PROSE:
            continue
        text = page.read_text()
        for m in re.finditer(r"(\w*)\{([\w,]+)\}(\w*\.json)", text):  # fuzz_{plain,epd}.json names both
            text += "\n" + " ".join(m[1] + part + m[3] for part in m[2].split(","))
        if re.search(rf"(?<![\w.]){re.escape(name)}", text):
            title = text.split("\n", 1)[0].lstrip("# ").strip() or page.stem
            out.append(f"[{title}]({page.name})")
    return out


def benchmarks_page() -> str:
    out = ["# Benchmarks", "",
           "Generated from `bench/results/*.json` by `scripts/gen_docs.py` (do not edit by hand). "
           "Each section is one result file: its top-level figures in a table, the rest as JSON. "
           "How each was measured (machine, load, command) is in the file itself; the pages that quote and "
           "explain a result are named under its heading.", ""]
    files = sorted(RESULTS.glob("*.json"))
    out += ["| result | benchmark |", "|---|---|"]
    for f in files:
        d = json.loads(f.read_text())
        what = d.get("benchmark") or d.get("bench") or d.get("fuzz") if isinstance(d, dict) else None
        out.append(f"| [{f.stem}](#{f.stem.replace('_', '-')}) | {_cell(what) if what else ''} |")
    out.append("")
    for f in files:
        d = json.loads(f.read_text())
        quoted = _quoted_on(f.name)
        out += [f"## {f.stem} {{#{f.stem.replace('_', '-')}}}", "",
                f"`bench/results/{f.name}`" + (f"; explained on: {', '.join(quoted)}" if quoted else ""), ""]
        rest = d
        if isinstance(d, dict):
            flat = {k: v for k, v in d.items() if isinstance(v, SCALARS)}
            rest = {k: v for k, v in d.items() if not isinstance(v, SCALARS)}
            if flat:
                out += ["| field | value |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in flat.items()] + [""]
        if rest:
            out += ["```json", json.dumps(rest, indent=1, ensure_ascii=False), "```", ""]
    return "\n".join(out)


PAGES = {"cli.md": cli_page, "benchmarks.md": benchmarks_page}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 naming the stale pages; write nothing")
    a = ap.parse_args(argv)
    stale = []
    for name, make in PAGES.items():
        text = make() + "\n"
        path = DOCS / name
        if a.check:
            if not path.exists() or path.read_text() != text:
                stale.append("docs/" + name)
            continue
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    # the shipped Hydra help of `nnue train --help` (nnue.commands.train): remade by Hydra when the
    # configs changed (another hydra-core makes `nnue train --help` ask Hydra, not the file stale)
    from nnue.commands import train as train_cmd

    if not train_cmd.shipped_is_current():
        if a.check:
            stale.append("conf/train_help.txt")
        else:
            train_cmd.write_help()
    # the format registry's names for the parser (nnue.commands.format_table): remade when stale
    from nnue.commands import format_table

    if format_table.shipped_table() != format_table.live_table():
        if a.check:
            stale.append("nnue/commands/format_table.json")
        else:
            format_table.write()
    if stale:
        print(f"gen_docs: stale page(s) {', '.join(stale)}: run python scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
