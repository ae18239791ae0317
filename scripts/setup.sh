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
echo "setting up $VENV (torch 2.13.0 CPU, then nnue-forge and its dependencies)..." >&2
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0" 2> >(grep -v "^WARNING: Location" >&2)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev]" 2> >(grep -v "^WARNING: Location" >&2)
"$VENV/bin/python" -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') else 'torch ' + v + ' installed, expected 2.13.0')"
echo "$want" > "$stamp"
