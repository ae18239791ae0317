"""Self-play and strength: MCTS on integer nets (python-chess rules, batched leaf evals through
:mod:`nnue.inference`), backup operators, ``.plain`` writers, UCI datagen, paired matches and
SPRT. Imports inference and python-chess, never the trainer, Lightning or pyarrow."""
