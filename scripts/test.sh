#!/usr/bin/env bash
# Run the default test suite (no slow or GPU tests) in the project's environment.
# Extra arguments go to pytest, e.g. scripts/test.sh -m slow, or scripts/test.sh -m "slow or not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ensure_stockfish.sh  # real Stockfish 15.1 for the engine tests (skip with the reason without it)
export TRITON_INTERPRET=1
exec .venv/bin/python -m pytest -n 2 "$@"
