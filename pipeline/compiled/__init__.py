"""Compiled (numba ``@njit(cache=True)``) cores of the record paths.

The python-chess readers stay the reference; a compiled core decodes and validates the records
it can settle exactly and hands every other one back to the reference path (see each module).
Numba compiles on first call in the same process (cached on disk next to the module), so no
build step is needed.
"""
