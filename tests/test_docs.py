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
    monkeypatch.setattr(gd, "DOCS", tmp_path)  # before the page is made: it links the pages of DOCS that quote a result
    (tmp_path / "benchmarks.md").write_text(gd.benchmarks_page() + "\n")
    (tmp_path / "cli.md").write_text("# stale\n")
    monkeypatch.setattr(gd, "PAGES", {"benchmarks.md": gd.benchmarks_page, "cli.md": lambda: "# new"})
    assert gd.main(["--check"]) == 1
    assert (tmp_path / "cli.md").read_text() == "# stale\n"  # --check writes nothing
    monkeypatch.setattr(gd, "PAGES", {"benchmarks.md": gd.benchmarks_page})
    assert gd.main(["--check"]) == 0


def test_benchmarks_name_the_pages_that_quote_them(tmp_path, monkeypatch):
    """Each result's section links the prose pages that name its file, brace lists included, and no
    page that only names a longer file (train_cpu.json is not train_cpu_omp.json)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    gd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gd)
    (tmp_path / "a.md").write_text("# Page A\n\nmeasured: `bench/results/train_cpu.json`\n")
    (tmp_path / "b.md").write_text("# Page B\n\n`bench/results/fuzz_{bin,epd}.json` and train_cpu_omp.json\n")
    (tmp_path / "cli.md").write_text("# CLI\n\ntrain_cpu.json\n")  # generated pages are not prose
    monkeypatch.setattr(gd, "DOCS", tmp_path)
    assert gd._quoted_on("train_cpu.json") == ["[Page A](a.md)"]
    assert gd._quoted_on("fuzz_epd.json") == ["[Page B](b.md)"]
    assert gd._quoted_on("fuzz_plain.json") == []
    assert gd._quoted_on("train_cpu_omp.json") == ["[Page B](b.md)"]
