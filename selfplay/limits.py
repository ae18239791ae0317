"""Time limits of engine games: a leaf (standard library only), so that ``nnue``'s parser can show them
as defaults without importing the engine code (``tests/cli/test_thin_cli.py``)."""

#: seconds an engine may take beyond its limit's own time (nodes limits have none) before it
#: counts as hung: the default of ``--move-timeout``
MOVE_TIMEOUT = 30.0

#: seconds an engine may take to start (``uci`` → ``uciok``), to take its options (``isready`` →
#: ``readyok``, where Stockfish loads its EvalFile) and to answer its first ``go nodes 1``: the
#: default of ``--start-timeout``, one limit for the pre-match check and every game's start. Chosen
#: for the slowest engine we drive, a WASM Stockfish under Node loading a large net on a loaded
#: 2-core machine; a healthy native engine answers in well under a second, so only a hung one waits.
START_TIMEOUT = 120.0
