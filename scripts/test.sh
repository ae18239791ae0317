#!/usr/bin/env bash
# Run the default test suite (no slow or GPU tests) in the project's environment.
# Extra arguments go to pytest, e.g. scripts/test.sh -m slow, or scripts/test.sh -m "slow or not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/ensure_stockfish.sh  # real Stockfish 15.1 for the engine tests (skip with the reason without it)
bash scripts/ensure_sf19.sh       # real Stockfish 19 (npm, a cache folder) and its official net (likewise)
# The documentation site (mkdocs.yml, docs/): a broken link or anchor fails the run. Strict mode
# counts warnings only when they are logged, so not -q; its log is shown only when it fails.
site=$(mktemp -d)
if ! NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site" > "$site.log" 2>&1; then
  cat "$site.log" >&2
  echo "mkdocs build --strict failed (the documentation site, docs/)" >&2
  exit 1
fi
rm -rf "$site" "$site.log"
export TRITON_INTERPRET=1
exec .venv/bin/python -m pytest -n 2 "$@"
