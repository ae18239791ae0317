"""The ``nnue`` sub-commands, one module each, in the order ``nnue --help`` lists them.

A command module ``nnue/commands/<cmd>.py`` is light (standard library and other light modules only: no
torch, Lightning, pyarrow, numba or Hydra; ``tests/cli/test_thin_cli.py`` checks it in a fresh interpreter)
and has ``add_parser(sub)``, which adds the command to the ``nnue`` sub-command parsers, and either

* ``run(args) -> int``, set as the parser's ``func``: it imports the command's work,
  ``nnue/commands/<cmd>_run.py`` (heavy imports at module level) or a library function, and calls it; or
* ``run_argv(argv) -> int`` for a command that parses its own arguments (``train``, ``retrain``,
  ``pack-shards``: Hydra overrides; ``bench``: a benchmark's options).

A new command is one module here, its ``_run`` module, and one entry in :data:`COMMANDS`.
"""
from nnue.commands import (analyze, annotate, bench, convert, datagen, evaluate, export, export_net, import_net,
                           inspect, match, merge, pack, pack_shards, registry, report, retrain, selfplay, sprt, sweep,
                           train)

#: every sub-command, in the order of ``nnue --help`` (and of docs/cli.md)
COMMANDS = (pack, merge, inspect, convert, annotate, analyze, pack_shards, retrain, registry, train, bench, export,
            export_net, report, evaluate, import_net, sprt, selfplay, match, datagen, sweep)
