"""The README is the first screen and the manual is the site: the README stays under 250 lines,
its relative links and anchors resolve (mkdocs checks only the pages under docs/), every page of
docs/ is in mkdocs.yml's nav exactly once, `.ci/run` runs exactly the README's test command, and
the refusal tables live on the commands page. (`mkdocs build --strict`, which checks the links and
anchors between pages, runs in scripts/test.sh.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.samples import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 250  # issue 22 item 5


def _nav_pages(nav) -> list[str]:
    """Every page named in an mkdocs nav (a list of {title: page | list}) in order, nested sections included."""
    out = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
            continue
        for v in item.values():
            out += _nav_pages(v) if isinstance(v, list) else [v]
    return out


def _code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _ids(md_path: Path) -> set[str]:
    """The element ids of a page as mkdocs renders it (toc slugs of headings, {#id} and {: #id })."""
    markdown = pytest.importorskip("markdown", reason="markdown comes with the docs extras (mkdocs)")
    html = markdown.Markdown(extensions=["toc", "attr_list", "tables", "admonition"]).convert(md_path.read_text())
    return set(re.findall(r'\bid="([^"]+)"', html))


def _broken_links(text: str, base: Path) -> list[str]:
    """Relative links of a markdown text (`[x](path#anchor)`, images too) whose file or anchor is missing."""
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        f = (base / path).resolve()
        if not f.exists():
            bad.append(f"{target}: no such file")
        elif anchor and anchor not in _ids(f):
            bad.append(f"{target}: no anchor #{anchor} in {path}")
    return bad


def test_readme_is_a_first_screen():
    n = len(README.read_text().splitlines())
    assert n < README_MAX_LINES, f"README.md has {n} lines: move the detail into a page of docs/"


def test_readme_links_resolve():
    assert _broken_links(README.read_text(), REPO) == []


def test_broken_links_are_found(tmp_path):
    """The link check can fail: a missing page and a missing anchor are both named."""
    (tmp_path / "p.md").write_text("# Title\n\n## A section (`x=y`)\n\n**Bold** paragraph.\n{: #bold-anchor }\n")
    text = "[a](p.md#a-section-xy) [b](p.md#bold-anchor) [c](p.md#nope) [d](q.md) [e](https://x.org/y) [f](#local)"
    assert _broken_links(text, tmp_path) == ["p.md#nope: no anchor #nope in p.md", "q.md: no such file"]


def test_every_page_is_in_the_nav_once():
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    assert len(nav) == len(set(nav)), f"a page is twice in mkdocs.yml's nav: {nav}"
    pages = {p.name for p in DOCS.glob("*.md")}
    assert set(nav) == pages, (f"pages not in mkdocs.yml's nav: {sorted(pages - set(nav))}; "
                               f"nav entries with no page: {sorted(set(nav) - pages)}")


def test_ci_runs_the_readme_test_command():
    readme_cmds = [line for block in _code_blocks(README.read_text(), "sh") for line in block.splitlines()]
    assert "bash scripts/test.sh" in readme_cmds and "bash scripts/demo.sh" in readme_cmds
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert ci == ["bash scripts/test.sh"], ci


def test_refusal_tables_are_on_the_commands_page():
    """The table of what each command refuses moved from the README to docs/commands.md, whole:
    its rows for every command family, each refusal with status 2."""
    text = (DOCS / "commands.md").read_text()
    assert "## What each command refuses, and how" in text
    table = text.split("## What each command refuses, and how", 1)[1].split("\n\n", 2)[1]
    rows = [r for r in table.splitlines() if r.startswith("| ")]
    assert rows[0] == "| command | refused with one line, status 2 |"
    first = [r.split(" | ")[0].removeprefix("| ") for r in rows[1:]]
    commands = {c for cell in first for c in re.findall(r"`([a-z-]+)", cell)} | {c for c in first if c == "all"}
    for c in ("all", "pack", "inspect", "convert", "export", "export-net", "import-net", "eval", "bench",
              "selfplay", "match", "datagen", "train"):
        assert c in commands, f"no refusal row for `{c}`"
    assert "exits with status 2 and one line" in text


def test_no_page_points_into_the_old_readme():
    """Sections moved to docs/: nothing links to a README.md#section any more."""
    hits = [f"{p.relative_to(REPO)}: {m}" for p in [README, *DOCS.glob("*.md")]
            for m in re.findall(r"README\.md#[\w-]+", p.read_text())]
    assert hits == []


def _commands() -> set[str]:
    """The sub-commands of `nnue`, read from its parser the way scripts/gen_docs.py reads it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    gd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gd)
    return set(gd._subcommands(gd._nnue_parser()))


def test_every_command_has_a_row_on_the_commands_page():
    """Each sub-command of `nnue` is named in the commands table (`| `nnue CMD ...` |`), so a new
    command cannot ship without its line of documentation."""
    commands = _commands()
    assert {"pack", "train", "export", "eval"} <= commands
    text = (DOCS / "commands.md").read_text()
    rows = set(re.findall(r"^\| `nnue ([a-z-]+)", text, flags=re.M))
    assert commands - rows == set(), f"commands without a row in docs/commands.md: {sorted(commands - rows)}"


def _shell_blocks_commands(text: str) -> tuple[list[str], list[str]]:
    """(`nnue` sub-commands, `bash scripts|bench/….sh` paths) named in a page's shell code blocks."""
    subs, scripts = [], []
    for block in re.findall(r"^```(?:sh|bash|console)?\n(.*?)^```", text, flags=re.S | re.M):
        subs += re.findall(r"(?:^|[\s;|(&$])nnue ([a-z][\w-]*)", block)
        scripts += re.findall(r"\bbash ((?:scripts|bench)/[\w./-]+\.sh)", block)
    return subs, scripts


def test_commands_in_the_docs_exist():
    """Every `nnue CMD` and `bash scripts/….sh` in the code blocks of the README and the written
    pages names a real sub-command and a script in the repo (a renamed command fails here)."""
    commands = _commands()
    generated = ("cli.md", "benchmarks.md", "CHANGELOG.md")
    pages = [README] + [p for p in sorted(DOCS.glob("*.md")) if p.name not in generated]
    bad, seen = [], 0
    for page in pages:
        subs, scripts = _shell_blocks_commands(page.read_text())
        seen += len(subs)
        bad += [f"{page.name}: nnue {c}" for c in subs if c not in commands]
        bad += [f"{page.name}: bash {s}" for s in scripts if not (REPO / s).is_file()]
    assert seen > 20 and bad == []
    assert _shell_blocks_commands("```sh\nnnue pak x\nbash scripts/nope.sh\n```\n") == (["pak"], ["scripts/nope.sh"])


#: the widest code line the site shows without a scroll bar (Material theme, the content column
#: between both sidebars at 1280 px: about 88 characters of code; 80 leaves room)
CODE_WIDTH = 80


def test_design_code_map_fits_the_page():
    """The layout and code map of docs/design.md (its code blocks) are read in the built site:
    no line wider than :data:`CODE_WIDTH`, so none is cut off on the right."""
    text = (DOCS / "design.md").read_text()
    blocks = _code_blocks(text, "")
    assert blocks, "design.md has no code block: the layout moved?"
    wide = [line for b in blocks for line in b.splitlines() if len(line) > CODE_WIDTH]
    assert not wide, f"code lines wider than {CODE_WIDTH} characters in design.md:\n" + "\n".join(wide)
