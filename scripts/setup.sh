#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv.
# torch is installed first and pinned (torch==2.13.0, the CPU wheel), so no dependency can pull a
# CUDA build. Re-running is cheap: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
stamp="$VENV/.nnue-forge-installed"
want=$(sha256sum pyproject.toml | cut -c1-64)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/nnue" ]; then
  exit 0
fi
t0=$SECONDS
step() { echo "setup [$(( SECONDS - t0 )) s] $*" >&2; }
# on a terminal pip shows its download bars; in a log only these step lines
QUIET=(-q); [ -t 2 ] && QUIET=(--progress-bar on)
step "1/3 creating $VENV (a first install takes 3-6 minutes: torch is a 200 MB download)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
step "2/3 torch 2.13.0, the CPU wheel"
"$VENV/bin/python" -m pip install "${QUIET[@]}" --disable-pip-version-check "torch==2.13.0" 2> >(grep -v "^WARNING: Location" >&2)
step "3/3 nnue-forge and its dependencies (Lightning, Hydra, pyarrow, numba, python-chess, ...)"
"$VENV/bin/python" -m pip install "${QUIET[@]}" --disable-pip-version-check -e ".[dev]" 2> >(grep -v "^WARNING: Location" >&2)
"$VENV/bin/python" -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') else 'torch ' + v + ' installed, expected 2.13.0')"
echo "$want" > "$stamp"
step "done"
