"""The generated pages of the documentation site (docs/cli.md, docs/benchmarks.md) are current:
scripts/gen_docs.py --check, in a fresh interpreter, finds nothing to rewrite. (mkdocs build
--strict itself runs in scripts/test.sh.)"""
from __future__ import annotations

import subprocess
import sys

from tests.samples import REPO


def test_generated_pages_are_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_docs.py"), "--check"], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr + "\n(run: python scripts/gen_docs.py, and commit docs/)"


def test_check_names_a_stale_page(tmp_path, monkeypatch):
    """--check fails, naming the page, when a page differs (the check can fail)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    gd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gd)
    (tmp_path / "benchmarks.md").write_text(gd.benchmarks_page() + "\n")
    (tmp_path / "cli.md").write_text("# stale\n")
    monkeypatch.setattr(gd, "DOCS", tmp_path)
    monkeypatch.setattr(gd, "PAGES", {"benchmarks.md": gd.benchmarks_page, "cli.md": lambda: "# new"})
    assert gd.main(["--check"]) == 1
    assert (tmp_path / "cli.md").read_text() == "# stale\n"  # --check writes nothing
    monkeypatch.setattr(gd, "PAGES", {"benchmarks.md": gd.benchmarks_page})
    assert gd.main(["--check"]) == 0
