"""Time limits of engine games: a leaf (standard library only), so that ``nnue``'s parser can show them
as defaults without importing the engine code (``tests/cli/test_thin_cli.py``)."""

#: seconds an engine may take beyond its limit's own time (nodes limits have none) before it
#: counts as hung: the default of ``--move-timeout``
MOVE_TIMEOUT = 30.0
