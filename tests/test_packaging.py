"""Packaging: the wheel carries every package and the Hydra configs; the Dockerfile copies every
package folder before installing (scripts/container_check.sh builds and runs it: tests/test_container.py,
slow)."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _package_dirs() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def test_every_package_folder_is_listed():
    """Every folder with an ``__init__.py`` under a package dir is in ``packages`` (a net kind
    that is a small package, e.g. ``inference/kinds/sfnnv5/``, needs its line there, or the
    wheel leaves it out)."""
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    dirs = conf["package-dir"]
    roots = {REPO / folder for folder in dirs.values()}
    for pkg, folder in dirs.items():
        for init in (REPO / folder).rglob("__init__.py"):
            sub = init.parent.relative_to(REPO / folder)
            if any(r != REPO / folder and r in init.parents for r in roots):  # another package dir's folder
                continue
            name = ".".join([pkg, *sub.parts])
            assert name in listed, f"{name} ({init.parent.relative_to(REPO)}) is not in pyproject.toml's packages"


def test_dockerfile_copies_every_package_before_installing():
    text = (REPO / "Dockerfile").read_text()
    install = re.search(r"^RUN pip install \$PIP_ARGS --no-deps \. ", text, re.M).start()
    copied = set(re.findall(r"^COPY (\S+) ", text[:install], re.M))
    assert set(_package_dirs().values()) <= copied
    # torch pinned (the build argument's default) and installed before the project and its dependencies
    assert 'ARG TORCH="torch==2.13.0"' in text[:install]
    assert text.index('pip install $PIP_ARGS "$TORCH"') < text.index("pip install $PIP_ARGS -r /tmp/requirements.txt")


def test_wheel_holds_packages_and_configs(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(REPO)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(tmp_path.glob("nnue_forge-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in _package_dirs():
        assert f"{package.replace('.', '/')}/__init__.py" in names, package
    for needed in ("nnue/conf/train.yaml", "nnue/conf/experiment/demo.yaml", "nnue/conf/features/halfkp.yaml",
                   "nnue/conf/hydra/launcher/submitit_slurm.yaml", "nnue/conf/hparams_search/lr_hidden.yaml",
                   "nnue/bench/bench_pack.py", "nnue/commands/pack_run.py", "nnue/pipeline/formats/binpack.py", "nnue/kernels/sparse_ft.py",
                   "nnue/selfplay/books/balanced.txt"):
        assert needed in names, needed
