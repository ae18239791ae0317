"""A toy net kind in test code only: its two modules, :mod:`.inference` (what
``inference/kinds/toy.py`` would hold) and :mod:`.trainer` (what ``trainer/kinds/toy.py`` would
hold), registered at run time by ``tests/test_toy_extensions.py`` (docs/extending.md, "A net kind")."""
