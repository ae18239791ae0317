"""Where numba keeps the compiled code of our ``@njit(cache=True)`` functions, chosen so that a
read-only install never fails (run by ``nnue/__init__.py``, before numba is imported).

numba writes its cache next to each module (``__pycache__``), else under the user's cache folder
(``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``), or in ``NUMBA_CACHE_DIR`` when that is set;
where none of them can be written, *defining* a cached function raises ``RuntimeError: cannot
cache function …: no locator available``, so every compiled command failed on a read-only
install with a home folder that cannot be written. :func:`choose` keeps the first of these that
can be written, else points ``NUMBA_CACHE_DIR`` at ``<temp folder>/nnue-forge-numba-<uid>``, else
(nothing writable at all) turns numba's cache off for this process: the code is compiled in
memory at each run (slower starts, same results). Standard library only.
"""
from __future__ import annotations

import importlib.util
import os
import sys

#: how :func:`choose` decided: "NUMBA_CACHE_DIR", "next to the modules", "user cache folder",
#: "temporary folder" or "off"
CHOICE: str | None = None


def writable(path: str) -> bool:
    """Whether numba could use ``path`` as a cache folder: it can be made and a file written in it
    (numba's own test, ``_CacheLocator.ensure_cache_path``)."""
    probe = os.path.join(path, f".nnue-forge-probe-{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
        return True
    except OSError:
        return False


def _in_tree() -> str | None:
    spec = importlib.util.find_spec("nnue.pipeline")  # imports nothing of nnue.pipeline itself
    locs = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(locs[0], "compiled", "__pycache__") if locs else None


def _user_wide() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")  # numba's AppDirs on Linux
    return os.path.join(base, "numba")


def choose() -> str:
    """Pick numba's cache folder as the module docstring says; returns :data:`CHOICE`."""
    global CHOICE
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user and writable(user):
        CHOICE = "NUMBA_CACHE_DIR"
    elif (tree := _in_tree()) is not None and writable(tree):
        CHOICE = "next to the modules"
    elif writable(_user_wide()):
        CHOICE = "user cache folder"
    else:
        import tempfile  # here only: importing it costs the light commands (nnue --version) milliseconds

        try:  # gettempdir raises when no temporary folder can be written either
            tmp = os.path.join(tempfile.gettempdir(), f"nnue-forge-numba-{os.getuid() if hasattr(os, 'getuid') else 0}")
        except OSError:
            tmp = None
        if tmp is not None and writable(tmp):
            _set_cache_dir(tmp)
            CHOICE = "temporary folder"
        else:
            _cache_off()
            CHOICE = "off"
    return CHOICE


def _set_cache_dir(path: str) -> None:
    os.environ["NUMBA_CACHE_DIR"] = path
    if "numba.core.config" in sys.modules:  # numba already imported: it read the variable then
        sys.modules["numba.core.config"].CACHE_DIR = path


def _disable(dispatcher_module) -> None:
    dispatcher_module.Dispatcher.enable_caching = lambda self: None  # keeps numba's NullCache


def _cache_off() -> None:
    if "numba.core.dispatcher" in sys.modules:
        _disable(sys.modules["numba.core.dispatcher"])
        return
    import importlib.abc  # here only (milliseconds): the rare case of nothing writable

    class _PatchDispatcher(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """Turns ``cache=True`` into no cache when ``numba.core.dispatcher`` is imported."""

        def find_spec(self, name, path, target=None):
            if name != "numba.core.dispatcher":
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None:
                return None
            self._inner = spec.loader
            spec.loader = self
            return spec

        def create_module(self, spec):
            return self._inner.create_module(spec)

        def exec_module(self, module):
            self._inner.exec_module(module)
            _disable(module)
            sys.meta_path.remove(self)

    if not any(type(f).__name__ == "_PatchDispatcher" for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchDispatcher())
