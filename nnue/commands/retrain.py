"""``nnue retrain``: the parser entry and the help; the work is :func:`nnue.trainer.retrain.main`, imported
when the command runs. Its arguments are Hydra overrides of conf/retrain.yaml, so argparse only lists the
command; the help is :mod:`nnue.trainer.retrain`'s docstring, read without importing the module."""
from __future__ import annotations

from nnue.commands.common import module_docstring

USAGE = ("usage: nnue retrain [KEY=VALUE ...]   (keys: conf/retrain.yaml)\n"
         "e.g. nnue retrain registry=REG 'watch=[DUMPS]' 'train.overrides=\"experiment=demo trainer.max_epochs=4\"'")


def add_parser(sub) -> None:
    """Add ``nnue retrain`` to the ``nnue`` sub-command parsers ``sub``."""
    sub.add_parser("retrain", help="one gated retrain cycle over a registry (conf/retrain.yaml overrides)",
                   add_help=False).set_defaults(run_argv=run_argv)


def help_text() -> str:
    """``nnue retrain --help``: the first paragraph of :mod:`nnue.trainer.retrain`'s docstring, the usage,
    then the rest of the docstring (the stages of a cycle)."""
    doc = module_docstring("nnue.trainer.retrain")
    return doc.split("\n\n")[0] + "\n\n" + USAGE + "\n\n" + doc.split("\n\n", 1)[1]


def run_argv(argv: list[str]) -> int:
    """``nnue retrain [OVERRIDES]``: the help, or one cycle (:func:`nnue.trainer.retrain.main`)."""
    if argv and argv[0] in ("-h", "--help"):
        print(help_text())
        return 0
    from nnue.trainer.retrain import main  # torch, Lightning, Hydra: only when the command runs

    return main(argv)
